//! Rows sent by binary COPY in large writes: each row encoded by its values' own `ToSql` into
//! one buffer, which goes to the server 64 KiB at a time. (`postgres`' `BinaryCopyInWriter`
//! enters the client's runtime once per row, a tenth of a replay's own CPU on a large batch.)

use std::io::Write;

use bytes::{BufMut, BytesMut};
use postgres::types::{IsNull, ToSql, Type};
use postgres::{CopyInWriter, Error};

use crate::store::param::Param;

/// What a buffer holds before it is sent.
const SEND_AT: usize = 64 << 10;

/// The binary COPY format's signature, flags and header extension length.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// Why a copy failed: the server's (or the connection's) error, or a value its type refused.
#[derive(Debug)]
pub(super) enum CopyError {
    Postgres(Error),
    Value(String),
    Connection(String),
}

/// A binary COPY under way: rows of `types`, encoded into a buffer sent in large writes.
pub(super) struct RowCopy<'a> {
    sink: CopyInWriter<'a>,
    types: &'a [Type],
    buf: BytesMut,
}

impl<'a> RowCopy<'a> {
    pub(super) fn new(sink: CopyInWriter<'a>, types: &'a [Type]) -> Self {
        let mut buf = BytesMut::with_capacity(SEND_AT + (8 << 10));
        buf.put_slice(HEADER);
        RowCopy { sink, types, buf }
    }

    /// Adds one row, one value per type.
    pub(super) fn write(&mut self, values: &[Param<'_>]) -> Result<(), CopyError> {
        debug_assert_eq!(values.len(), self.types.len());
        self.buf.put_i16(values.len() as i16);
        for (value, ty) in values.iter().zip(self.types) {
            let at = self.buf.len();
            self.buf.put_i32(0);
            let len = match value
                .to_sql_checked(ty, &mut self.buf)
                .map_err(|e| CopyError::Value(format!("a {ty} value: {e}")))?
            {
                IsNull::Yes => -1,
                IsNull::No => i32::try_from(self.buf.len() - at - 4)
                    .map_err(|_| CopyError::Value(format!("a {ty} value over 2 GiB")))?,
            };
            self.buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
        }
        if self.buf.len() >= SEND_AT {
            self.send()?;
        }
        Ok(())
    }

    /// Sends the trailer and ends the copy: the server's answer for every row.
    pub(super) fn finish(mut self) -> Result<u64, CopyError> {
        self.buf.put_i16(-1);
        self.send()?;
        self.sink.finish().map_err(CopyError::Postgres)
    }

    fn send(&mut self) -> Result<(), CopyError> {
        self.sink
            .write_all(&self.buf)
            .and_then(|()| self.sink.flush())
            .map_err(|e| {
                let text = e.to_string();
                match e.into_inner().map(|inner| inner.downcast::<Error>()) {
                    Some(Ok(pg)) => CopyError::Postgres(*pg),
                    _ => CopyError::Connection(text),
                }
            })?;
        self.buf.clear();
        Ok(())
    }
}
