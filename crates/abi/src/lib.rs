//! The types Arbiter's host and its WebAssembly plugins exchange (plugin
//! ABI v1, `plugin-sdk/ABI.md`): the views every hook sees and each hook's
//! request and response. One definition serves both sides: the host
//! (`arbiter-policy` re-exports them from its `view` module, and generates
//! `plugin-sdk/schema/` from them with the `schema` feature) and the Rust
//! plugin SDK (`plugin-sdk/rust`), so the two cannot drift apart.
//!
//! It never depends on more than serde and serde_json (schemars behind
//! `schema`): it must build for `wasm32-unknown-unknown` inside a plugin.
//! It never builds views and never evaluates anything.
//!
//! Every public item is documented (`missing_docs`). The JSON Schemas were
//! written before some of those docs: an item marked
//! `schemars(description = "")` keeps its doc out of its schema, so
//! `plugin-sdk/schema/` stays as it was.

#![warn(missing_docs)]

mod hooks;
mod views;

pub use hooks::{
    AdmissionInput, AdmissionOutput, AutoscaleInput, AutoscaleOutput, FairShareInput,
    FairShareOutput, FlavorInput, FlavorOutput, PlacementInput, PlacementOutput, WeightInput,
    WeightOutput,
};
pub use views::{
    ClusterQueueView, CohortView, DeviceView, EstimateView, FlavorView, NodeView, PodSetView,
    PodView, Quantities, QueueView, TenantView, TypicalPodView, WorkloadView,
};
