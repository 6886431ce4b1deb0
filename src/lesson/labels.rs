//! The prose labels that bind a lesson's fenced blocks: save (`保存为 FILE，从 DIR 运行` /
//! `Save as FILE, run from DIR`), run (`运行命令` / `Run`), expected output (`预期输出` /
//! `Expected output`) and expected stderr (`预期错误输出` / `Expected stderr`); and the labels
//! that carry a value on their own line: the exit code (`预期退出码：3` / `Expected exit code: 3`)
//! the step continued (`接续：EX-31-01` / `Continues: EX-31-01`), the declared services needed
//! (`服务：cache, audit_db` / `Services: cache, audit_db`) and the fault steps on one of them
//! (`停止服务：cache` / `Stop service: cache`, start, restart). Chinese or English, with
//! full-width or ASCII punctuation.

use regex::Regex;

/// What a label paragraph asks of the next fenced block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Label {
    /// The block is this file's content; `dir` is the run-from folder when the label names one.
    Save { file: String, dir: Option<String> },
    /// The block is the shell command to run.
    Run,
    /// The block is the exact expected stdout.
    Expected,
    /// The block is the exact expected stderr.
    Stderr,
    /// The command must exit with this status; `value` is the text after the colon as
    /// written (checked by the parser, so a wrong one names its line).
    ExitCode { value: String },
    /// The step runs in the folder the named step left, after it.
    Continues { id: String },
    /// The lesson (before its first exercise) or the exercise needs these declared services.
    Services { names: Vec<String> },
    /// Before the step's command runs, `action` is done to the declared service `service`.
    Fault {
        action: ServiceAction,
        service: String,
    },
}

/// What a fault step does to a declared service before its step's command runs, and waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceAction {
    /// Stopped: its stop signal, then KILL of its process group after `stop_timeout`.
    Stop,
    /// Started again, and ready by its `ready` check within `ready_timeout`.
    Start,
    /// Stopped, then started and ready.
    Restart,
}

impl ServiceAction {
    /// `stop`, `start` or `restart`, as messages say it.
    pub fn verb(self) -> &'static str {
        match self {
            ServiceAction::Stop => "stop",
            ServiceAction::Start => "start",
            ServiceAction::Restart => "restart",
        }
    }
}

impl Label {
    pub fn describe(&self) -> &'static str {
        match self {
            Label::Save { .. } => "save label",
            Label::Run => "run label",
            Label::Expected => "expected-output label",
            Label::Stderr => "expected-stderr label",
            Label::ExitCode { .. } => "exit-code label",
            Label::Continues { .. } => "continues label",
            Label::Services { .. } => "services label",
            Label::Fault { .. } => "fault step",
        }
    }
}

const SAVE: &[&str] = &[
    "保存为 {file}，从 {dir} 运行",
    "保存下面完整的 {file}",
    "Save as {file}, run from {dir}",
    "Save the complete {file} below",
];
const RUN: &[&str] = &["运行命令", "Run"];
const EXPECTED: &[&str] = &["预期输出", "Expected output"];
const STDERR: &[&str] = &["预期错误输出", "Expected stderr"];
const EXIT_CODE: &[&str] = &["预期退出码", "Expected exit code"];
const CONTINUES: &[&str] = &["接续", "Continues"];
const SERVICES: &[&str] = &["服务", "Services"];
const FAULTS: &[(ServiceAction, &[&str])] = &[
    (ServiceAction::Stop, &["停止服务", "Stop service"]),
    (ServiceAction::Start, &["启动服务", "Start service"]),
    (ServiceAction::Restart, &["重启服务", "Restart service"]),
];

/// The label words of one course: the defaults plus the course's own.
#[derive(Debug, Clone)]
pub struct Labels {
    save: Vec<Regex>,
    run: Vec<String>,
    expected: Vec<String>,
    stderr: Vec<String>,
    exit_code: Vec<String>,
    continues: Vec<String>,
}

/// A course's own label words, added to the defaults (`[labels]` of `lessonprobe.toml`).
#[derive(Debug, Clone, Default)]
pub struct ExtraLabels {
    pub save: Vec<String>,
    pub run: Vec<String>,
    pub expected: Vec<String>,
    pub stderr: Vec<String>,
    pub exit_code: Vec<String>,
    pub continues: Vec<String>,
}

/// A save template that is not `... {file} ...` with an optional `{dir}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("save label {template:?} must contain {{file}} once (and may contain {{dir}} once)")]
pub struct BadTemplate {
    pub template: String,
}

impl Labels {
    /// The defaults plus `save` templates (`{file}`, optional `{dir}`) and extra run and
    /// expected-output words.
    #[cfg(test)]
    pub fn new(
        save: &[String],
        run: &[String],
        expected: &[String],
    ) -> Result<Labels, BadTemplate> {
        Labels::with(&ExtraLabels {
            save: save.to_vec(),
            run: run.to_vec(),
            expected: expected.to_vec(),
            ..ExtraLabels::default()
        })
    }

    /// The defaults plus every word of `extra`.
    pub fn with(extra: &ExtraLabels) -> Result<Labels, BadTemplate> {
        let templates = SAVE
            .iter()
            .map(|s| (*s).to_owned())
            .chain(extra.save.iter().cloned());
        let save = templates
            .map(|t| template_regex(&t).ok_or(BadTemplate { template: t }))
            .collect::<Result<Vec<_>, _>>()?;
        let words = |defaults: &[&str], extra: &[String]| {
            defaults
                .iter()
                .map(|w| normalize(w))
                .chain(extra.iter().map(|w| normalize(w)))
                .collect()
        };
        Ok(Labels {
            save,
            run: words(RUN, &extra.run),
            expected: words(EXPECTED, &extra.expected),
            stderr: words(STDERR, &extra.stderr),
            exit_code: words(EXIT_CODE, &extra.exit_code),
            continues: words(CONTINUES, &extra.continues),
        })
    }

    /// The label a paragraph ends with, if any: its last line is the label.
    pub fn classify(&self, paragraph: &str) -> Option<Label> {
        let last = paragraph.trim_end().lines().last()?;
        let text = normalize(last);
        if text.is_empty() {
            return None;
        }
        if self.run.contains(&text) {
            return Some(Label::Run);
        }
        if self.expected.contains(&text) {
            return Some(Label::Expected);
        }
        if self.stderr.contains(&text) {
            return Some(Label::Stderr);
        }
        if let Some((key, value)) = keyed(last) {
            let key = normalize(key);
            if self.exit_code.contains(&key) {
                return Some(Label::ExitCode { value });
            }
            // A step is named by one word: `Continues: the consumer keeps reading` is prose.
            if self.continues.contains(&key) && !value.contains(char::is_whitespace) {
                return Some(Label::Continues { id: value });
            }
            // One service, named by one word: `Stop service: once the queue drains` is prose.
            let one_word = !value.contains(char::is_whitespace);
            if let Some((action, _)) = FAULTS
                .iter()
                .find(|(_, words)| one_word && words.iter().any(|w| normalize(w) == key))
            {
                return Some(Label::Fault {
                    action: *action,
                    service: value,
                });
            }
            // Names, one word each: `Services: the cache is warm` is prose.
            if SERVICES.iter().any(|w| normalize(w) == key) {
                let names: Vec<String> = value
                    .split([',', '，', '、'])
                    .map(|n| n.trim().trim_matches('`').to_owned())
                    .collect();
                if names
                    .iter()
                    .all(|n| !n.is_empty() && !n.contains(char::is_whitespace))
                {
                    return Some(Label::Services { names });
                }
            }
        }
        self.save.iter().find_map(|re| {
            let caps = re.captures(&text)?;
            Some(Label::Save {
                file: caps.name("file")?.as_str().to_owned(),
                dir: caps.name("dir").map(|d| d.as_str().to_owned()),
            })
        })
    }
}

/// `key: value` (ASCII or full-width colon) split at its first colon, the value trimmed and
/// out of backticks; `None` without a colon or a value.
fn keyed(line: &str) -> Option<(&str, String)> {
    let at = line.find([':', '：'])?;
    let colon = line[at..].chars().next()?.len_utf8();
    let value = line[at + colon..].trim().trim_matches('`').trim();
    (!value.is_empty()).then(|| (&line[..at], value.to_owned()))
}

/// Full-width punctuation to ASCII, runs of spaces to one, no trailing colon, lower case.
fn normalize(text: &str) -> String {
    let mapped: String = text
        .chars()
        .map(|c| match c {
            '，' | '、' => ',',
            '：' => ':',
            '。' => '.',
            '；' => ';',
            '（' => '(',
            '）' => ')',
            '\u{3000}' => ' ',
            other => other,
        })
        .collect();
    let collapsed = mapped.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed.trim_end_matches([':', ' ']).trim().to_lowercase()
}

/// `Save as {file}, run from {dir}` → an anchored pattern where spaces are optional (Chinese
/// labels have none), punctuation may be surrounded by spaces, and names may be in backticks.
fn template_regex(template: &str) -> Option<Regex> {
    let text = normalize(template);
    if text.matches("{file}").count() != 1 || text.matches("{dir}").count() > 1 {
        return None;
    }
    let name = |group: &str| format!(r"`?(?P<{group}>[^\s`]+?)`?");
    let mut pattern = String::from("^");
    let mut rest = text.as_str();
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("{file}") {
            pattern.push_str(&name("file"));
            rest = after;
        } else if let Some(after) = rest.strip_prefix("{dir}") {
            pattern.push_str(&name("dir"));
            rest = after;
        } else {
            if c == ' ' {
                pattern.push_str(r"\s*");
            } else if c.is_ascii_punctuation() {
                pattern.push_str(&format!(r"\s*{}\s*", regex::escape(&c.to_string())));
            } else {
                pattern.push_str(&regex::escape(&c.to_string()));
            }
            rest = &rest[c.len_utf8()..];
        }
    }
    pattern.push('$');
    Regex::new(&pattern).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Labels {
        Labels::new(&[], &[], &[]).unwrap()
    }

    fn save(file: &str, dir: Option<&str>) -> Option<Label> {
        Some(Label::Save {
            file: file.into(),
            dir: dir.map(Into::into),
        })
    }

    #[test]
    fn chinese_and_english_labels_with_either_punctuation() {
        let l = labels();
        let project = Some("project/");
        for (text, file, dir) in [
            (
                "保存为 `audit_fail_probe.py`，从 `project/` 运行：",
                "audit_fail_probe.py",
                project,
            ),
            (
                "保存为 audit_fail_probe.py, 从 project/ 运行:",
                "audit_fail_probe.py",
                project,
            ),
            (
                "Save as `sql_audit_probe.py`, run from `project/`:",
                "sql_audit_probe.py",
                project,
            ),
            ("save as `x.py` ,  run from `project/`", "x.py", project),
            (
                "保存下面完整的 `ticketflow/storage/models.py`：",
                "ticketflow/storage/models.py",
                None,
            ),
            ("Save the complete `models.py` below:", "models.py", None),
        ] {
            assert_eq!(l.classify(text), save(file, dir), "{text}");
        }
        assert_eq!(l.classify("运行命令："), Some(Label::Run));
        assert_eq!(l.classify("Run:"), Some(Label::Run));
        assert_eq!(l.classify("预期输出："), Some(Label::Expected));
        assert_eq!(l.classify("Expected output"), Some(Label::Expected));
        assert_eq!(
            l.classify("First we build it.\nExpected output:"),
            Some(Label::Expected)
        );
        assert_eq!(l.classify("Expected stderr:"), Some(Label::Stderr));
        assert_eq!(l.classify("预期错误输出："), Some(Label::Stderr));
        let exit = |v: &str| Some(Label::ExitCode { value: v.into() });
        assert_eq!(l.classify("Expected exit code: 3"), exit("3"));
        assert_eq!(l.classify("预期退出码：3"), exit("3"));
        assert_eq!(l.classify("Expected exit code: `x1`"), exit("x1"));
        let services = |n: &[&str]| {
            Some(Label::Services {
                names: n.iter().map(|s| (*s).to_owned()).collect(),
            })
        };
        assert_eq!(
            l.classify("Services: cache, audit_db"),
            services(&["cache", "audit_db"])
        );
        assert_eq!(
            l.classify("服务：`cache`，audit_db"),
            services(&["cache", "audit_db"])
        );
        assert_eq!(l.classify("Services: the cache is warm"), None);
        let fault = |action: ServiceAction| {
            Some(Label::Fault {
                action,
                service: "cache".into(),
            })
        };
        assert_eq!(
            l.classify("Stop service: cache"),
            fault(ServiceAction::Stop)
        );
        assert_eq!(l.classify("停止服务：`cache`"), fault(ServiceAction::Stop));
        assert_eq!(
            l.classify("Start service:  cache"),
            fault(ServiceAction::Start)
        );
        assert_eq!(l.classify("启动服务:cache"), fault(ServiceAction::Start));
        assert_eq!(
            l.classify("restart SERVICE: cache"),
            fault(ServiceAction::Restart)
        );
        assert_eq!(l.classify("重启服务：cache"), fault(ServiceAction::Restart));
        assert_eq!(
            l.classify("Stop service: once the queue drains"),
            None,
            "prose"
        );
        let continues = |v: &str| Some(Label::Continues { id: v.into() });
        assert_eq!(l.classify("Continues: EX-31-01"), continues("EX-31-01"));
        assert_eq!(l.classify("接续：`EX-31-01`"), continues("EX-31-01"));
        assert_eq!(l.classify("接续: store.py"), continues("store.py"));
        assert_eq!(l.classify("Expected exit code:"), None, "no value");
    }

    #[test]
    fn prose_that_merely_mentions_a_label_word_is_not_a_label() {
        let l = labels();
        for text in [
            "Run the consumer twice and compare.",
            "Save as much as you can, run from here.",
            "The expected output differs.",
            "运行命令之前先检查偏移量。",
            "Note: the store continues to work.",
            "The expected exit code differs: 3 here.",
            "Continues: the consumer keeps reading after a rebalance.",
        ] {
            assert_eq!(l.classify(text), None, "{text}");
        }
    }

    #[test]
    fn a_course_adds_its_own_words() {
        let l = Labels::new(
            &["Store {file} and run it from {dir}".into()],
            &["Command".into()],
            &["Output".into()],
        )
        .unwrap();
        assert_eq!(
            l.classify("Store `a.py` and run it from `app/`:"),
            save("a.py", Some("app/"))
        );
        assert_eq!(l.classify("Command:"), Some(Label::Run));
        assert_eq!(l.classify("Output："), Some(Label::Expected));
        assert!(Labels::new(&["no placeholder".into()], &[], &[]).is_err());
        let l = Labels::with(&ExtraLabels {
            stderr: vec!["Errors".into()],
            exit_code: vec!["Exit status".into()],
            continues: vec!["After".into()],
            ..ExtraLabels::default()
        })
        .unwrap();
        assert_eq!(l.classify("Errors:"), Some(Label::Stderr));
        assert_eq!(
            l.classify("Exit status: 2"),
            Some(Label::ExitCode { value: "2".into() })
        );
        assert_eq!(
            l.classify("After：EX-1-1"),
            Some(Label::Continues {
                id: "EX-1-1".into()
            })
        );
        assert_eq!(
            l.classify("Expected exit code: 4"),
            Some(Label::ExitCode { value: "4".into() }),
            "the defaults stay"
        );
    }
}
