//! Typed configuration values, each with one grammar, parsed once wherever they are written:
//! on the command line, in manifests and in hosts files.

pub mod db;
pub mod duration;
pub mod values;
