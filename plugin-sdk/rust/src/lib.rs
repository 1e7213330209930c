//! Guest-side SDK for Arbiter policy plugins: plugin ABI v1
//! (`plugin-sdk/ABI.md`).
//!
//! A plugin is a `cdylib` built for `wasm32-unknown-unknown`. It depends on
//! this crate, writes each hook as a plain function from a typed request to a
//! typed response, and exports it with one macro:
//!
//! ```
//! use arbiter_plugin_sdk::{export_weight, WeightRequest, WeightResponse};
//!
//! fn weight(req: WeightRequest) -> WeightResponse {
//!     WeightResponse { scores: req.workloads.iter().map(|w| w.gpus).collect() }
//! }
//! export_weight!(weight);
//! ```
//!
//! The crate itself exports `arbiter_abi_version` and `arbiter_alloc`; the
//! `export_*!` macros generate the `arbiter_<hook>` functions, which decode
//! the JSON request, call the hook and hand the JSON response back. A hook
//! may also return `Result<Response, E: Display>`: an error (like a request
//! that does not parse) is logged through `arbiter.log` and answered with an
//! empty response, which the host rejects as bad output, so the policy's
//! `failurePolicy` decides. The SDK never panics on host input.
//!
//! Views and requests are deserialized leniently: missing fields take their
//! default and unknown fields are ignored, so a plugin keeps working against
//! a newer host that adds fields.

mod abi;
mod hooks;
mod log;
mod views;

pub use abi::{call_json, HookOutput, Response, ABI_VERSION};
pub use hooks::{
    AdmissionRequest, AdmissionResponse, AutoscaleRequest, AutoscaleResponse, FairShareRequest,
    FairShareResponse, FlavorRequest, FlavorResponse, WeightRequest, WeightResponse,
};
pub use log::{log, Level};
pub use views::{
    ClusterQueue, Cohort, Estimate, Flavor, PodSet, Quantities, Queue, Tenant, Workload,
};

/// Re-exported for plugins that read their `params` with their own types.
pub use serde_json;

#[doc(hidden)]
pub mod __private {
    pub use crate::abi::{call_raw, leak_json};
}
