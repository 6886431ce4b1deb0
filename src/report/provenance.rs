//! What a run verified, for the reports that describe it (HTML, the GitHub step summary): the
//! course and which revision of it, the SQL backends, the broker, the remote host.

/// Which state of the course a run verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    /// The checkout as it is on disk.
    Checkout,
    /// `--rev REV`: the course as of that revision, resolved to `commit`.
    Revision { rev: String, commit: String },
    /// `--changed-since BASE`: the checkout, only the lessons changed since `base`.
    ChangedSince { base: String },
}

/// What the run verified, as the reports show it.
#[derive(Debug, Clone)]
pub struct Provenance {
    /// The course folder as given, if the run had a course.
    pub course: Option<String>,
    pub verified: Verified,
    /// The SQL backends of `--db`, by label.
    pub backends: Vec<String>,
    /// The broker of the Kafka probes: `embedded`, or its bootstrap servers.
    pub broker: String,
    /// Where remote probes ran, or why they did not.
    pub remote: String,
}

impl Default for Provenance {
    fn default() -> Self {
        Provenance {
            course: None,
            verified: Verified::Checkout,
            backends: Vec::new(),
            broker: "embedded".into(),
            remote: "not enabled".into(),
        }
    }
}

impl Provenance {
    /// One line naming what was verified, e.g. "revision v2 (commit 1a2b3c4d5e6f)".
    pub fn verified_text(&self) -> String {
        match &self.verified {
            Verified::Checkout => "the checkout as it is on disk".into(),
            Verified::Revision { rev, commit } => {
                let short = commit.get(..12).unwrap_or(commit);
                if rev == commit {
                    format!("revision {short}")
                } else {
                    format!("revision {rev} (commit {short})")
                }
            }
            Verified::ChangedSince { base } => {
                format!("the checkout, only the lessons changed since {base}")
            }
        }
    }

    /// `(label, value)` rows, in the order reports show them.
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "course",
                self.course.clone().unwrap_or_else(|| "(none)".into()),
            ),
            ("verified", self.verified_text()),
            (
                "SQL backends",
                if self.backends.is_empty() {
                    "(none)".into()
                } else {
                    self.backends.join(", ")
                },
            ),
            ("Kafka broker", self.broker.clone()),
            ("remote probes", self.remote.clone()),
            ("lessonprobe", env!("CARGO_PKG_VERSION").into()),
        ]
    }
}
