//! A value either driver binds: the columns of an audit row and the bookkeeping statements'
//! parameters are listed once, for PostgreSQL and SQLite alike.

use std::error::Error;

use bytes::BytesMut;
use postgres::types::{IsNull, Type};
use rusqlite::types::ToSqlOutput;

/// One value of a row or a statement, borrowed from where it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Param<'a> {
    Null,
    Text(&'a str),
    Bytes(&'a [u8]),
    Int4(i32),
    Int8(i64),
}

impl<'a> Param<'a> {
    /// Text, or NULL for none.
    pub(crate) fn text(value: Option<&'a str>) -> Param<'a> {
        value.map_or(Param::Null, Param::Text)
    }

    /// A count, as the bookkeeping's `int8` columns hold it.
    pub(crate) fn count(value: u64) -> Param<'a> {
        Param::Int8(value as i64)
    }
}

impl postgres::types::ToSql for Param<'_> {
    /// Each value checks its own type (an array's elements too): a mistaken one is an error,
    /// not bytes the server reads as another type.
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self {
            // NULL is a value of every type.
            Param::Null => Ok(IsNull::Yes),
            Param::Text(v) => v.to_sql_checked(ty, out),
            Param::Bytes(v) => v.to_sql_checked(ty, out),
            Param::Int4(v) => v.to_sql_checked(ty, out),
            Param::Int8(v) => v.to_sql_checked(ty, out),
        }
    }

    /// Any type here: [`to_sql`](Self::to_sql) asks the value's own.
    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Param::Null => rusqlite::types::Null.to_sql(),
            Param::Text(v) => v.to_sql(),
            Param::Bytes(v) => v.to_sql(),
            Param::Int4(v) => v.to_sql(),
            Param::Int8(v) => v.to_sql(),
        }
    }
}
