//! Reporters: one per format, all fed the same outcomes.

pub mod json;
pub mod junit;
pub mod terminal;

use clap::ValueEnum;

/// What goes to standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One line per probe as it ends, then a closing count.
    Human,
    /// One JSON document with every outcome and the counts, at the end.
    Json,
}
