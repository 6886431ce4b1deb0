//! Checkpoints: their manifests, validated with file:line diagnostics, and the catalog that
//! finds and selects them.

mod catalog;
mod documents;
mod error;
mod manifest;
mod select;

pub use catalog::{Catalog, CatalogSource};
pub use documents::Uncollected;
pub use error::CatalogError;
pub use manifest::{Backend, Checkpoint, Probe, ProbeKind, MAX_RETRIES};
pub use select::{matches as selects, Selection};
