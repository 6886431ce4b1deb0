//! Records printed as a table, CSV or JSON, for every command that prints rows: the columns are
//! the rows' serde field names, CSV follows one quoting rule (the csv crate's), and an empty
//! cell shows as `-` in a table.

use comfy_table::{presets, CellAlignment, Table};
use serde::Serialize;

/// How a command prints its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableFormat {
    Table,
    Json,
    Csv,
}

/// Why rows could not be turned into text.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("writing CSV: {0}")]
    Csv(#[from] csv::Error),
    #[error("writing JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("CSV output is not UTF-8: {0}")]
    Utf8(#[from] std::string::FromUtf8Error),
}

/// `rows` in `format`: a table, CSV with a header line, or a JSON array.
pub fn rows<T: Serialize>(format: TableFormat, rows: &[T]) -> Result<String, RenderError> {
    match format {
        TableFormat::Table => table(rows),
        TableFormat::Csv => csv(rows),
        TableFormat::Json => json(rows),
    }
}

/// Any serde value as pretty JSON.
pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<String, RenderError> {
    Ok(serde_json::to_string_pretty(value)?)
}

/// Any serde value as pretty JSON with the keys of every object in alphabetical order, as the
/// replay's plan and report documents print them.
pub fn json_sorted<T: Serialize>(value: &T) -> Result<String, RenderError> {
    json(&serde_json::to_value(value)?)
}

/// A header of the field names, then one line per row; `None` is an empty field. Like the
/// other formats, the text does not end in a line break.
pub fn csv<T: Serialize>(rows: &[T]) -> Result<String, RenderError> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for (i, row) in rows.iter().enumerate() {
        let Fields(fields) = Fields::of(row)?;
        if i == 0 {
            writer.write_record(fields.iter().map(|(name, _)| name))?;
        }
        writer.write_record(fields.iter().map(|(_, value)| cell(value)))?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    let mut text = String::from_utf8(bytes)?;
    text.truncate(text.trim_end_matches('\n').len());
    Ok(text)
}

/// A row's fields in the order serde writes them, flattened parts included (serde writes a
/// struct with a flattened part as a map, which the csv crate does not take).
struct Fields(Vec<(String, serde_json::Value)>);

impl Fields {
    fn of<T: Serialize>(row: &T) -> Result<Fields, RenderError> {
        Ok(serde_json::from_str(&serde_json::to_string(row)?)?)
    }
}

impl<'de> serde::Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> serde::de::Visitor<'de> for InOrder {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a row with named fields")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Fields, A::Error> {
                let mut fields = Vec::new();
                while let Some(field) = map.next_entry()? {
                    fields.push(field);
                }
                Ok(Fields(fields))
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

/// A field as CSV text: `null` empty, a string as it is, anything else as JSON writes it.
fn cell(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The CSV of `rows` laid out as right-aligned columns without borders, `-` in empty cells.
pub fn table<T: Serialize>(rows: &[T]) -> Result<String, RenderError> {
    let text = csv(rows)?;
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let mut table = Table::new();
    table.load_preset(presets::NOTHING);
    table.set_header(reader.headers()?.iter());
    for record in reader.records() {
        let record = record?;
        table.add_row(
            record
                .iter()
                .map(|cell| if cell.is_empty() { "-" } else { cell }),
        );
    }
    table
        .column_iter_mut()
        .for_each(|c| c.set_cell_alignment(CellAlignment::Right));
    // The preset pads each cell by a space on both sides: the first column's left pad and the
    // last column's right pad are noise.
    Ok(table
        .lines()
        .map(|line| {
            line.strip_prefix(' ')
                .unwrap_or(&line)
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        partition: i32,
        live: Option<i64>,
        status: String,
    }

    fn sample() -> Vec<Row> {
        vec![
            Row {
                partition: 0,
                live: Some(42),
                status: "ok".into(),
            },
            Row {
                partition: 1,
                live: None,
                status: "error: a, \"quoted\" reason".into(),
            },
        ]
    }

    #[test]
    fn csv_quotes_only_what_needs_it_and_leaves_none_empty() {
        assert_eq!(
            csv(&sample()).unwrap(),
            "partition,live,status\n0,42,ok\n1,,\"error: a, \"\"quoted\"\" reason\""
        );
        // Read back with a CSV reader, every field is what was written.
        let text = csv(&sample()).unwrap();
        let mut reader = ::csv::Reader::from_reader(text.as_bytes());
        let second = reader.records().nth(1).unwrap().unwrap();
        assert_eq!(&second[2], "error: a, \"quoted\" reason");
    }

    #[derive(Serialize)]
    struct Inner {
        records: u64,
        note: Option<String>,
    }

    #[derive(Serialize)]
    struct Flattened {
        partition: i32,
        #[serde(flatten)]
        inner: Inner,
        rate: f64,
    }

    #[test]
    fn a_flattened_part_keeps_its_place_among_the_columns() {
        let rows = [Flattened {
            partition: 3,
            inner: Inner {
                records: 7,
                note: None,
            },
            rate: 1.5,
        }];
        assert_eq!(csv(&rows).unwrap(), "partition,records,note,rate\n3,7,,1.5");
        assert!(table(&rows)
            .unwrap()
            .lines()
            .nth(1)
            .unwrap()
            .contains(" - "));
    }

    #[test]
    fn tables_align_columns_and_show_none_as_a_dash() {
        let text = table(&sample()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].contains("partition") && lines[0].contains("status"));
        assert!(lines[2].contains(" - "), "{text}");
        assert!(lines.iter().all(|l| !l.ends_with(' ')), "{text}");
        assert!(lines[0].starts_with("partition"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&json(&sample()).unwrap()).unwrap();
        assert_eq!(json[1]["live"], serde_json::Value::Null);
    }
}
