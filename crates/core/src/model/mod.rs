//! Manifests in, checked configuration out.
//!
//! `api` holds the `arbiter.dev/v1alpha1` wire types, `quantity` and
//! `duration` the exact scalar types. Nothing here does I/O: `load` parses
//! YAML text that the simulator crate's `files` (or, later, the operator's
//! watches) read.

pub mod api;
pub(crate) mod article;
pub mod cluster;
pub mod configuration;
pub mod duration;
pub mod limits;
pub mod load;
pub mod quantity;
pub(crate) mod selector;
pub mod sim_api;
pub mod yaml;

pub use duration::Millis;
pub use quantity::Amount;
