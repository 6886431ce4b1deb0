//! Checkpoints: their manifests, validated with file:line diagnostics, and the catalog that
//! finds and selects them.

mod catalog;
mod manifest;
mod select;

pub use catalog::{Catalog, CatalogSource};
pub use manifest::{Checkpoint, Probe, ProbeKind, Backend};
pub use select::Selection;
