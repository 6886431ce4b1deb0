//! A cell's produced outputs written as Jupyter stores them (nbformat's multi-line strings, keys
//! sorted, one space of indentation under the `outputs` key's own), the course's placeholders
//! put back: what bless writes in place of the stored outputs, and nothing else of the file.

use serde::Serialize;
use serde_json::Value;

use super::compare::OutputRedactions;
use super::StoredAt;
use crate::lesson::bless::Rewrite;
use crate::lesson::matcher::Redactions;

/// The rewrite of the stored outputs at `at` (the cell's first source line `line`) into
/// `produced`, the course's placeholders put back (an nbval sanitize file's replacements are
/// not: they stand for no value a stored output holds).
pub fn rewrite(
    line: usize,
    at: &StoredAt,
    produced: &[Value],
    redactions: &OutputRedactions,
) -> Rewrite {
    let outputs: Vec<Value> = produced
        .iter()
        .map(|o| stored_form(o.clone(), &redactions.course))
        .collect();
    let mut text = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut writer = serde_json::Serializer::with_formatter(&mut text, formatter);
    let _ = Value::Array(outputs).serialize(&mut writer);
    let text = String::from_utf8_lossy(&text).replace('\n', &format!("\n{}", at.indent));
    Rewrite::Value {
        line,
        range: at.range.clone(),
        text,
    }
}

/// One output as nbformat writes it: `text` and string MIME values split into lines (JSON MIME
/// values as they are), each line with the course's redactions put back.
fn stored_form(mut output: Value, redactions: &Redactions) -> Value {
    if let Some(text) = output.get_mut("text") {
        split(text, redactions);
    }
    if let Some(Value::Object(data)) = output.get_mut("data") {
        for (mime, value) in data.iter_mut() {
            if !mime.ends_with("json") {
                split(value, redactions);
            }
        }
    }
    output
}

fn split(value: &mut Value, redactions: &Redactions) {
    if let Value::String(text) = value {
        let lines: Vec<Value> = text
            .split_inclusive('\n')
            .map(|line| {
                Value::String(match line.strip_suffix('\n') {
                    Some(body) => format!("{}\n", redactions.redact(body)),
                    None => redactions.redact(line),
                })
            })
            .collect();
        *value = Value::Array(lines);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outputs_are_written_as_jupyter_writes_them_under_the_keys_indentation() {
        let at = StoredAt {
            range: 10..12,
            indent: "   ".into(),
        };
        let redactions = OutputRedactions {
            course: Redactions::new([("[ID]", "evt-[0-9]+")]).unwrap(),
            ..OutputRedactions::default()
        };
        let produced =
            [json!({"output_type": "stream", "name": "stdout", "text": "id evt-7\ndone\n"})];
        let Rewrite::Value { range, text, .. } = rewrite(3, &at, &produced, &redactions) else {
            panic!()
        };
        assert_eq!(range, 10..12);
        assert_eq!(
            text,
            "[\n    {\n     \"name\": \"stdout\",\n     \"output_type\": \"stream\",\n     \"text\": [\n      \"id [ID]\\n\",\n      \"done\\n\"\n     ]\n    }\n   ]"
        );
    }
}
