//! A CSV report read back: its rows, each by column name.

use std::collections::BTreeMap;

/// Every row of the CSV `text` (with its header), each as column name → value.
#[track_caller]
pub fn csv_rows(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .unwrap_or_else(|e| panic!("no CSV header: {e}\n{text}"))
        .clone();
    reader
        .records()
        .map(|row| {
            let row = row.unwrap_or_else(|e| panic!("a CSV row: {e}\n{text}"));
            headers
                .iter()
                .zip(row.iter())
                .map(|(h, v)| (h.to_owned(), v.to_owned()))
                .collect()
        })
        .collect()
}
