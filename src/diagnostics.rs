//! Where in a file a problem is: byte spans of a TOML text (manifests, hosts files) become
//! `file:line:column` errors, one routine for every file the program validates.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::de::DeserializeOwned;

/// A problem at a place in a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{column}: {message}", path.display())]
pub struct Diagnostic {
    pub path: PathBuf,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub message: String,
}

/// A file's text, to parse and to locate problems in. Where each line starts is found once,
/// on first use, so locating many places costs a search each, not a scan of the text.
#[derive(Debug, Clone)]
pub struct Source<'a> {
    path: &'a Path,
    text: &'a str,
    line_starts: OnceLock<Vec<usize>>,
}

impl<'a> Source<'a> {
    pub fn new(path: &'a Path, text: &'a str) -> Self {
        Source {
            path,
            text,
            line_starts: OnceLock::new(),
        }
    }

    /// The text of `bytes` read from `path`, or where its first byte that is not UTF-8 is.
    pub fn decode(path: &Path, bytes: Vec<u8>) -> Result<String, Diagnostic> {
        String::from_utf8(bytes).map_err(|e| {
            let bytes = e.as_bytes();
            let at = e.utf8_error().valid_up_to();
            let valid = std::str::from_utf8(&bytes[..at]).unwrap_or_default();
            let (line, column) = Source::new(path, valid).line_column(at);
            Diagnostic {
                path: path.to_owned(),
                line,
                column,
                message: format!(
                    "not valid UTF-8 (byte 0x{:02x} at offset {at}); save the file as UTF-8",
                    bytes[at]
                ),
            }
        })
    }

    pub fn path(&self) -> &'a Path {
        self.path
    }

    /// Deserializes the whole text as TOML; a syntax or type error points at its place (the
    /// file's start when TOML names none).
    pub fn toml<T: DeserializeOwned>(&self) -> Result<T, Diagnostic> {
        toml::from_str(self.text)
            .map_err(|e| self.error(e.span().unwrap_or(0..0), e.message().to_owned()))
    }

    /// `message` at the start of `span`.
    pub fn error(&self, span: Range<usize>, message: impl Into<String>) -> Diagnostic {
        let (line, column) = self.line_column(span.start);
        Diagnostic {
            path: self.path.to_owned(),
            line,
            column,
            message: message.into(),
        }
    }

    /// The 1-based line of a byte offset.
    pub fn line(&self, offset: usize) -> usize {
        self.line_column(offset).0
    }

    fn line_column(&self, offset: usize) -> (usize, usize) {
        let mut end = offset.min(self.text.len());
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let starts = self.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(self.text.match_indices('\n').map(|(i, _)| i + 1))
                .collect()
        });
        // The last line starting at or before `end`.
        let index = starts.partition_point(|&start| start <= end) - 1;
        let column = self.text[starts[index]..end].chars().count() + 1;
        (index + 1, column)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_become_one_based_lines_and_character_columns() {
        let text = "a = 1\nb = \"é\"\nc = x\n";
        let src = Source::new(Path::new("f.toml"), text);
        assert_eq!(src.error(0..1, "m").to_string(), "f.toml:1:1: m");
        let c = text.find("c =").unwrap();
        assert_eq!(src.error(c + 4..c + 5, "m").to_string(), "f.toml:3:5: m");
        let accent = text.find('é').unwrap();
        assert_eq!(src.error(accent + 2..accent + 2, "m").column, 7, "after é");
        assert_eq!(
            src.error(accent + 1..accent + 1, "m").column,
            6,
            "inside é: at it"
        );
        assert_eq!(src.line(usize::MAX), 4, "past the end is the last line");
    }

    #[test]
    fn a_byte_that_is_not_utf8_is_named_with_its_line_and_column() {
        let e = Source::decode(
            Path::new("m.toml"),
            b"a = 1\ntitle = \"caf\xe9\"\n".to_vec(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "m.toml:2:13: not valid UTF-8 (byte 0xe9 at offset 18); save the file as UTF-8"
        );
        assert_eq!(
            Source::decode(Path::new("m.toml"), "é\n".into()).unwrap(),
            "é\n"
        );
    }

    #[test]
    fn toml_errors_carry_their_place() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct T {
            a: u32,
        }
        let src = Source::new(Path::new("f.toml"), "\na = \"x\"\n");
        let e = src.toml::<T>().unwrap_err();
        assert_eq!((e.line, e.column), (2, 5), "{e}");
        assert!(e.message.contains("invalid type"), "{e}");
    }
}
