//! The typed views every policy sees (DESIGN §4) and the request/response
//! types of each hook: the CEL variables and the JSON of plugin ABI v1 are
//! the same structures. Built from the core's read-only state by
//! [`Views`]; their JSON Schemas are what `plugin-sdk/schema/` ships.
//! Never mutates scheduler state and never reads a clock: `now` comes from
//! the core's request.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Quantities as numbers in base units (`cpu` in cores, `memory` in bytes).
pub type Quantities = BTreeMap<String, f64>;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetView {
    pub name: String,
    pub count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u32>,
    /// Per pod.
    #[serde(default)]
    pub requests: Quantities,
}

/// A runtime estimate from the LocalQueue's `resourceEstimation`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EstimateView {
    /// The configured quantile of the runtimes of the queue's finished workloads.
    pub runtime_seconds: f64,
    /// How many finished workloads the estimate rests on.
    pub samples: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadView {
    pub name: String,
    pub namespace: String,
    pub kind: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub priority: i64,
    #[serde(default)]
    pub priority_class: Option<String>,
    /// The weight multiplying priority (priority class, else ClusterQueue `priorityClass.weight`, else 1).
    #[serde(default = "one")]
    pub priority_weight: f64,
    #[serde(default)]
    pub queue_name: String,
    #[serde(default)]
    pub cluster_queue: String,
    #[serde(default)]
    pub pod_sets: Vec<PodSetView>,
    /// Totals over all pods, per resource.
    #[serde(default)]
    pub requests: Quantities,
    /// Total `nvidia.com/gpu`.
    #[serde(default)]
    pub gpus: i64,
    /// Seconds since it was queued.
    #[serde(default)]
    pub age_seconds: f64,
    #[serde(default)]
    pub retries: u32,
    #[serde(default)]
    pub evictions: u32,
    #[serde(default)]
    pub estimate: Option<EstimateView>,
}

fn one() -> f64 {
    1.0
}

/// The LocalQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueView {
    pub name: String,
    pub namespace: String,
    #[serde(default)]
    pub priority: Option<i64>,
    #[serde(default)]
    pub cluster_queue: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueView {
    pub name: String,
    #[serde(default)]
    pub cohort: Option<String>,
    /// Fair-sharing weight in force.
    #[serde(default = "one")]
    pub weight: f64,
    /// Dominant resource share, per mille of the cohort tree's lendable capacity.
    #[serde(default)]
    pub share: f64,
    /// `nvidia.com/gpu`-seconds used, decayed with `adaptiveWeights.usageHalfLife`.
    #[serde(default)]
    pub decayed_usage: f64,
    /// Nominal quota: flavor → resource → amount.
    #[serde(default)]
    pub nominal: BTreeMap<String, Quantities>,
    /// Admitted usage: flavor → resource → amount.
    #[serde(default)]
    pub usage: BTreeMap<String, Quantities>,
    #[serde(default = "one")]
    pub priority_weight: f64,
    /// Workloads admitted now.
    #[serde(default)]
    pub admitted: u32,
    /// Workloads waiting now.
    #[serde(default)]
    pub pending: u32,
}

/// The tenant is the workload's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantView {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CohortView {
    pub name: String,
    #[serde(default)]
    pub parent: Option<String>,
}

/// A flavor with node pools, as the autoscale hook sees it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorView {
    pub name: String,
    pub nodes: u32,
    pub min_nodes: u32,
    pub max_nodes: u32,
    /// Fraction (0–1) of the nodes' dominant resource in use.
    pub utilization: f64,
    /// Nodes' worth of requests waiting for capacity.
    pub pending_nodes: f64,
    /// Target utilisation in percent.
    pub target_utilization: f64,
}

/// `admission`: may this workload be admitted with these flavors?
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionInput {
    pub workload: WorkloadView,
    #[serde(default)]
    pub queue: QueueView,
    #[serde(default)]
    pub cluster_queue: ClusterQueueView,
    #[serde(default)]
    pub tenant: TenantView,
    #[serde(default)]
    pub cohort: Option<CohortView>,
    /// Pod set → resource → flavor it would be admitted on.
    #[serde(default)]
    pub flavors: BTreeMap<String, BTreeMap<String, String>>,
    /// Whether admitting it borrows from the cohort.
    #[serde(default)]
    pub borrowing: bool,
    #[serde(default)]
    pub now: f64,
    #[serde(default)]
    pub params: serde_json::Value,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionOutput {
    pub allowed: bool,
    #[serde(default)]
    pub reason: Option<String>,
    /// `false` rejects the workload for good; default true (it is tried again later).
    #[serde(default)]
    pub retryable: Option<bool>,
}

/// `weight`: one score per workload (batch).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WeightInput {
    pub workloads: Vec<WorkloadView>,
    /// By `namespace/name`.
    #[serde(default)]
    pub queues: BTreeMap<String, QueueView>,
    #[serde(default)]
    pub cluster_queues: BTreeMap<String, ClusterQueueView>,
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantView>,
    #[serde(default)]
    pub now: f64,
    #[serde(default)]
    pub params: serde_json::Value,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct WeightOutput {
    /// One finite number per workload, same order; higher goes first.
    pub scores: Vec<f64>,
}

/// `fairShare`: one weight per ClusterQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairShareInput {
    pub cluster_queues: Vec<ClusterQueueView>,
    #[serde(default)]
    pub now: f64,
    #[serde(default)]
    pub params: serde_json::Value,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct FairShareOutput {
    /// One weight ≥ 0 per ClusterQueue, same order.
    pub weights: Vec<f64>,
}

/// `autoscale`: desired nodes per flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoscaleInput {
    pub flavors: Vec<FlavorView>,
    #[serde(default)]
    pub now: f64,
    #[serde(default)]
    pub params: serde_json::Value,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct AutoscaleOutput {
    /// Desired nodes per flavor, same order; clamped to `[minNodes, maxNodes]`.
    pub nodes: Vec<i64>,
}

/// `flavor`: preferred flavor order for one workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorInput {
    pub workload: WorkloadView,
    #[serde(default)]
    pub queue: QueueView,
    #[serde(default)]
    pub cluster_queue: ClusterQueueView,
    #[serde(default)]
    pub tenant: TenantView,
    /// The ClusterQueue's flavors, in listed order.
    pub candidates: Vec<String>,
    #[serde(default)]
    pub now: f64,
    #[serde(default)]
    pub params: serde_json::Value,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct FlavorOutput {
    /// Preferred order, a subset of `candidates`.
    pub flavors: Vec<String>,
}
