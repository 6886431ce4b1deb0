//! A checkpoint manifest for a test about something else (the student's loop, watch, reports,
//! interrupts): it states each probe's id and command and what the test reads back, and fills
//! in the rest. A test about the manifest format itself writes its TOML out instead.

use std::fmt;
use std::path::Path;

use crate::Dir;

/// The manifest of one lesson, built probe by probe; its TOML text is its `Display`.
///
/// ```
/// use lessonprobe_testkit::{Manifest, Probe};
///
/// let text = Manifest::lesson(93, "loop")
///     .probe(Probe::command("L-PASS", ["echo", "ok"]).name("passes"))
///     .probe(Probe::prose("L-WHY", "why?"))
///     .to_string();
/// assert!(text.contains("\nid = \"L-PASS\"\nname = \"passes\"\n"));
/// ```
#[derive(Clone, Debug)]
pub struct Manifest {
    lesson: u32,
    title: String,
    probes: Vec<Probe>,
}

impl Manifest {
    /// Lesson `lesson`, titled `title`, with no probe yet.
    pub fn lesson(lesson: u32, title: &str) -> Manifest {
        Manifest {
            lesson,
            title: title.to_owned(),
            probes: Vec::new(),
        }
    }

    /// The manifest with `probe` after the ones it has.
    pub fn probe(mut self, probe: Probe) -> Manifest {
        self.probes.push(probe);
        self
    }

    /// A new folder holding the manifest as `checkpoints/FILE`, where a run in it finds it.
    pub fn in_new_dir(&self, file: &str) -> Dir {
        let dir = Dir::new();
        dir.write(Path::new("checkpoints").join(file), self.to_string());
        dir
    }
}

impl fmt::Display for Manifest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "[checkpoint]")?;
        writeln!(f, "lesson = {}", self.lesson)?;
        writeln!(f, "title = {}", quoted(&self.title))?;
        for probe in &self.probes {
            write!(f, "\n{probe}")?;
        }
        Ok(())
    }
}

/// One `[[probe]]` table: its id, kind and what the kind needs, named `probe` and claiming `c`
/// unless told otherwise.
#[derive(Clone, Debug)]
pub struct Probe {
    id: String,
    name: String,
    claim: String,
    /// `kind` and the fields after it, in order, each value already TOML.
    fields: Vec<(&'static str, String)>,
}

impl Probe {
    /// A command probe running `argv`.
    pub fn command<I, S>(id: &str, argv: I) -> Probe
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let argv: Vec<String> = argv.into_iter().map(|a| quoted(a.as_ref())).collect();
        Probe::of_kind(id, "command").field("argv", format!("[{}]", argv.join(", ")))
    }

    /// A command probe running `script` with `sh -c`.
    pub fn script(id: &str, script: &str) -> Probe {
        Probe::command(id, ["sh", "-c", script])
    }

    /// A prose probe asking `question`.
    pub fn prose(id: &str, question: &str) -> Probe {
        Probe::of_kind(id, "prose").field("question", quoted(question))
    }

    fn of_kind(id: &str, kind: &str) -> Probe {
        Probe {
            id: id.to_owned(),
            name: "probe".to_owned(),
            claim: "c".to_owned(),
            fields: vec![("kind", quoted(kind))],
        }
    }

    fn field(mut self, key: &'static str, value: String) -> Probe {
        self.fields.push((key, value));
        self
    }

    /// The probe named `name` (what reports print after its id).
    pub fn name(mut self, name: &str) -> Probe {
        self.name = name.to_owned();
        self
    }

    /// The probe claiming `claim`.
    pub fn claim(mut self, claim: &str) -> Probe {
        self.claim = claim.to_owned();
        self
    }

    /// The probe expecting `output`.
    pub fn expect(self, output: &str) -> Probe {
        self.field("expect", quoted(output))
    }

    /// The probe with a deadline of `duration` (as a manifest writes it: `"120s"`).
    pub fn timeout(self, duration: &str) -> Probe {
        self.field("timeout", quoted(duration))
    }

    /// The probe needing the course's declared services `names`.
    pub fn services(self, names: &[&str]) -> Probe {
        let names: Vec<String> = names.iter().map(|n| quoted(n)).collect();
        self.field("services", format!("[{}]", names.join(", ")))
    }

    /// The probe retried `retries` times by its manifest.
    pub fn retries(self, retries: u32) -> Probe {
        self.field("retries", retries.to_string())
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "[[probe]]")?;
        writeln!(f, "id = {}", quoted(&self.id))?;
        writeln!(f, "name = {}", quoted(&self.name))?;
        writeln!(f, "claim = {}", quoted(&self.claim))?;
        for (key, value) in &self.fields {
            writeln!(f, "{key} = {value}")?;
        }
        Ok(())
    }
}

/// `text` as a TOML basic string: JSON's escapes are TOML's.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string is always JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_is_its_checkpoint_then_each_probe_after_a_blank_line() {
        let text = Manifest::lesson(93, "loop")
            .probe(Probe::script("L-1", r#"echo "$X" \ done"#).expect("ok"))
            .probe(
                Probe::prose("L-2", "why?")
                    .name("asks")
                    .claim("a claim")
                    .timeout("1s")
                    .retries(2),
            )
            .to_string();
        assert_eq!(
            text,
            r#"[checkpoint]
lesson = 93
title = "loop"

[[probe]]
id = "L-1"
name = "probe"
claim = "c"
kind = "command"
argv = ["sh", "-c", "echo \"$X\" \\ done"]
expect = "ok"

[[probe]]
id = "L-2"
name = "asks"
claim = "a claim"
kind = "prose"
question = "why?"
timeout = "1s"
retries = 2
"#
        );
    }
}
