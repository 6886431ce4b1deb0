//! A cell's produced outputs against its stored ones, as nbval's `compare_outputs` judges them:
//! streams of one name joined (carriage returns applied), every output key compared except
//! those nbval skips, MIME values flattened by type, strings sanitised (the course's
//! redactions) on both sides; a mismatch shown as a diff of both sides' text.

use std::collections::BTreeMap;

use serde_json::Value;
use similar::TextDiff;

use crate::lesson::matcher::Redactions;

/// The keys nbval leaves out of the comparison (images too, unless asked: nbval's `--nbdime`).
const SKIPPED: &[&str] = &[
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    "application/vnd.jupyter.widget-view+json",
    "image/png",
    "image/jpeg",
];

/// Whether `produced` equals `stored` as nbval compares them; when not, the diff of both
/// (`stored_label` heads the stored side).
pub fn compare(
    stored: &[Value],
    produced: &[Value],
    redactions: &Redactions,
    stored_label: &str,
) -> Result<(), String> {
    let want = flattened(&coalesced(stored), redactions);
    let got = flattened(&coalesced(produced), redactions);
    if want == got {
        return Ok(());
    }
    let why = if want.keys().ne(got.keys()) {
        let missing: Vec<&str> = want
            .keys()
            .filter(|k| !got.contains_key(*k))
            .map(String::as_str)
            .collect();
        let unexpected: Vec<&str> = got
            .keys()
            .filter(|k| !want.contains_key(*k))
            .map(String::as_str)
            .collect();
        let mut why = Vec::new();
        if !missing.is_empty() {
            why.push(format!("missing output fields: {}", missing.join(", ")));
        }
        if !unexpected.is_empty() {
            why.push(format!(
                "unexpected output fields: {}",
                unexpected.join(", ")
            ));
        }
        why.join("; ")
    } else {
        let key = want
            .iter()
            .find(|(k, v)| got.get(*k) != Some(*v))
            .map_or("", |(k, _)| k.as_str());
        format!("the {key} output differs")
    };
    let diff = TextDiff::from_lines(&shown(&want), &shown(&got))
        .unified_diff()
        .header(stored_label, "produced")
        .to_string();
    Err(format!("{why}\n{diff}"))
}

/// The text a cell printed or showed (its streams and plain-text results), for the report.
pub fn text_of(outputs: &[Value]) -> String {
    let mut text = String::new();
    for output in outputs {
        let part = match output.get("output_type").and_then(Value::as_str) {
            Some("stream") => output.get("text").and_then(Value::as_str),
            Some("execute_result" | "display_data") => output
                .get("data")
                .and_then(|d| d.get("text/plain"))
                .and_then(Value::as_str),
            Some("error") => None,
            _ => None,
        };
        if let Some(part) = part {
            text.push_str(part);
            if !part.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    text
}

/// nbval's `coalesce_streams`: the streams of one name joined where the first one stood, each
/// joined text with its overwritten line parts (a carriage return not ending a line) dropped.
fn coalesced(outputs: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut streams: BTreeMap<String, usize> = BTreeMap::new();
    for output in outputs {
        let stream = output.get("output_type").and_then(Value::as_str) == Some("stream");
        let name = output.get("name").and_then(Value::as_str).unwrap_or("");
        let text = output.get("text").and_then(Value::as_str).unwrap_or("");
        match streams.get(name) {
            Some(&at) if stream => {
                let joined = format!("{}{text}", out[at]["text"].as_str().unwrap_or(""));
                out[at]["text"] = Value::String(joined);
            }
            _ => {
                if stream {
                    streams.insert(name.to_owned(), out.len());
                }
                out.push(output.clone());
            }
        }
    }
    for &at in streams.values() {
        let text = out[at]["text"].as_str().unwrap_or("").to_owned();
        out[at]["text"] = Value::String(carriage_returns(&text));
    }
    out
}

/// nbval's `^.*\r(?=[^\n])`: in each line, everything up to its last carriage return that
/// something follows is dropped.
fn carriage_returns(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            let body = line.strip_suffix('\n').unwrap_or(line);
            match body
                .char_indices()
                .rev()
                .find(|&(i, c)| c == '\r' && i + 1 < body.len())
            {
                Some((i, _)) => &line[i + 1..],
                None => line,
            }
        })
        .collect()
}

/// nbval's comparison form: per key (a stream's name, an output key, or a MIME type of its
/// `data`), the sanitised values in order.
fn flattened(outputs: &[Value], redactions: &Redactions) -> BTreeMap<String, Vec<Value>> {
    let mut keys: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for output in outputs {
        let Some(fields) = output.as_object() else {
            continue;
        };
        if output.get("output_type").and_then(Value::as_str) == Some("stream") {
            let name = output.get("name").and_then(Value::as_str).unwrap_or("");
            let text = output.get("text").cloned().unwrap_or(Value::Null);
            keys.entry(name.to_owned())
                .or_default()
                .push(sanitized(text, redactions));
            continue;
        }
        for (key, value) in fields {
            if SKIPPED.contains(&key.as_str()) {
                continue;
            }
            match (key.as_str(), value) {
                ("data", Value::Object(data)) => {
                    for (mime, value) in data {
                        if !SKIPPED.contains(&mime.as_str()) {
                            keys.entry(mime.clone())
                                .or_default()
                                .push(sanitized(value.clone(), redactions));
                        }
                    }
                }
                _ => keys
                    .entry(key.clone())
                    .or_default()
                    .push(sanitized(value.clone(), redactions)),
            }
        }
    }
    keys
}

/// A string value with the course's redactions applied to each line (nbval's sanitising).
fn sanitized(value: Value, redactions: &Redactions) -> Value {
    match value {
        Value::String(s) if !redactions.is_empty() => Value::String(
            s.split_inclusive('\n')
                .map(|line| match line.strip_suffix('\n') {
                    Some(body) => format!("{}\n", redactions.redact(body)),
                    None => redactions.redact(line),
                })
                .collect(),
        ),
        other => other,
    }
}

/// The comparison form as text: each key, then its values.
fn shown(keys: &BTreeMap<String, Vec<Value>>) -> String {
    let mut text = String::new();
    for (key, values) in keys {
        for value in values {
            text.push_str(&format!("[{key}]\n"));
            let body = match value {
                Value::String(s) => s.clone(),
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
            text.push_str(&body);
            if !body.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn same(stored: Value, produced: Value) -> Result<(), String> {
        let (Value::Array(s), Value::Array(p)) = (stored, produced) else {
            panic!()
        };
        compare(&s, &p, &Redactions::default(), "stored")
    }

    #[test]
    fn streams_are_joined_and_metadata_names_and_counts_are_not_compared() {
        let stored = json!([
            {"output_type": "stream", "name": "stdout", "text": "a\nb\n"},
            {"output_type": "execute_result", "execution_count": 3, "metadata": {"x": 1},
             "data": {"text/plain": "2", "image/png": "AAAA"}}
        ]);
        let produced = json!([
            {"output_type": "stream", "name": "stdout", "text": "a\n"},
            {"output_type": "execute_result", "execution_count": 9, "metadata": {},
             "data": {"text/plain": "2", "image/png": "BBBB"}},
            {"output_type": "stream", "name": "stdout", "text": "b\n"}
        ]);
        assert_eq!(same(stored, produced), Ok(()));
        assert_eq!(
            carriage_returns("10%\r50%\r100%\ndone\r\n"),
            "100%\ndone\r\n"
        );
    }

    #[test]
    fn a_changed_value_or_a_missing_field_is_a_mismatch_with_a_diff() {
        let e = same(
            json!([{"output_type": "stream", "name": "stdout", "text": "3 rows\n"}]),
            json!([{"output_type": "stream", "name": "stdout", "text": "4 rows\n"}]),
        )
        .unwrap_err();
        assert!(e.starts_with("the stdout output differs\n"), "{e}");
        assert!(e.contains("-3 rows\n+4 rows\n"), "{e}");
        let e = same(
            json!([{"output_type": "stream", "name": "stdout", "text": "x\n"}]),
            json!([{"output_type": "error", "ename": "E", "evalue": "v", "traceback": []}]),
        )
        .unwrap_err();
        assert!(
            e.starts_with("missing output fields: stdout; unexpected output fields: ename, evalue"),
            "{e}"
        );
    }

    #[test]
    fn redactions_apply_to_both_sides() {
        let redactions = Redactions::new([("[ID]", "evt-[0-9]+")]).unwrap();
        let stored = [json!({"output_type": "stream", "name": "stdout", "text": "id [ID]\n"})];
        let produced = [json!({"output_type": "stream", "name": "stdout", "text": "id evt-42\n"})];
        assert_eq!(compare(&stored, &produced, &redactions, "s"), Ok(()));
    }
}
