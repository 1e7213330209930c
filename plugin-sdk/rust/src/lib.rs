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
//!     WeightResponse { scores: req.workloads.iter().map(|w| w.gpus as f64).collect() }
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
//! The views, requests and responses are the host's own types (the
//! `arbiter-abi` crate, from which `plugin-sdk/schema/` is generated),
//! re-exported under the SDK's names: `Workload` is the host's
//! `WorkloadView`, `WeightRequest` its `WeightInput`, `WeightResponse` its
//! `WeightOutput`, and so on. A missing field takes the default the schema
//! states and unknown fields are ignored, so a plugin keeps working against
//! a newer host that adds fields.

mod abi;
mod log;

pub use abi::{call_json, HookOutput, Response, ABI_VERSION};
pub use arbiter_abi::{
    AdmissionInput as AdmissionRequest, AdmissionOutput as AdmissionResponse,
    AutoscaleInput as AutoscaleRequest, AutoscaleOutput as AutoscaleResponse,
    ClusterQueueView as ClusterQueue, CohortView as Cohort, DeviceView as Device,
    EstimateView as Estimate, FairShareInput as FairShareRequest,
    FairShareOutput as FairShareResponse, FlavorInput as FlavorRequest,
    FlavorOutput as FlavorResponse, FlavorView as Flavor, NodeView as Node,
    PlacementInput as PlacementRequest, PlacementOutput as PlacementResponse, PodSetView as PodSet,
    PodView as Pod, Quantities, QueueView as Queue, TenantView as Tenant,
    TypicalPodView as TypicalPod, WeightInput as WeightRequest, WeightOutput as WeightResponse,
    WorkloadView as Workload,
};
pub use log::{log, Level};

/// Re-exported for plugins that read their `params` with their own types.
pub use serde_json;

#[doc(hidden)]
pub mod __private {
    pub use crate::abi::{call_raw, leak_json};
}
