//! The simulator's own kinds, `sim.arbiter.dev/v1alpha1` (docs/design.md §6):
//! `Simulation` (node pools, horizon, global fair sharing) and
//! `WorkloadGenerator` (streams of identical workloads for large scenarios).
//! Wire types only; `sim::scenario` checks them. No I/O.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::PodSet;

/// `apiVersion` of the simulator's kinds.
pub const SIM_API_VERSION: &str = "sim.arbiter.dev/v1alpha1";
/// Annotation: arrival offset of a job from the start of the run (`30s`).
pub const ARRIVAL_ANNOTATION: &str = "sim.arbiter.dev/arrival";
/// Annotation: how long a job runs once admitted (`10m`).
pub const RUNTIME_ANNOTATION: &str = "sim.arbiter.dev/runtime";
/// How long a job's pods take from admission to all ready (a duration,
/// default `0s`; `never`: they never start). Its runtime counts from then.
pub const STARTUP_ANNOTATION: &str = "sim.arbiter.dev/startup";

/// A simulation run's settings (`kind: Simulation`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Simulation {
    /// `sim.arbiter.dev/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `Simulation`.
    #[serde(default)]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The settings.
    #[serde(default)]
    pub spec: SimulationSpec,
}

/// The settings of a simulation run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimulationSpec {
    /// Stop and report at this virtual time (duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Fair sharing for every cohort tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<GlobalFairSharing>,
    /// All-or-nothing admission, as Kueue's configuration has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for_pods_ready: Option<super::api::WaitForPodsReady>,
    /// The nodes of each flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_pools: Vec<NodePool>,
    /// Policy bundles in force: directories (or ConfigMap files), relative to this file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<String>,
}

/// Fair sharing for every cohort tree, and its preemption strategies.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GlobalFairSharing {
    /// Turns it on.
    #[serde(default)]
    pub enabled: bool,
    /// Kueue's `fairSharing.preemptionStrategies`, in order
    /// (`LessThanOrEqualToFinalShare`, `LessThanInitialShare`), wherever
    /// fair sharing is on; absent: Kueue's default, both in that order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption_strategies: Option<Vec<String>>,
}

/// Identical nodes serving one flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePool {
    /// The flavor of its nodes.
    pub flavor: String,
    /// Nodes at the start.
    pub nodes: u32,
    /// Per node, by resource.
    pub allocatable: BTreeMap<String, Quantity>,
    /// Fewest nodes autoscaling may leave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_nodes: Option<u32>,
    /// Most nodes autoscaling may reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<u32>,
    /// Time from a scale-up decision to the node being usable (duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_delay: Option<String>,
    /// Resources of `allocatable` each node holds on separate cards (GPUs
    /// shared by fractions, e.g. `example.com/gpu-milli: {cards: 8}` with
    /// `allocatable: {example.com/gpu-milli: "8000"}`): a request up to
    /// one card needs one card with that much free, k whole cards need k
    /// fully free cards.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, Device>,
    /// Labels every node of the pool carries, beside its flavor's
    /// `nodeLabels`: where it sits in its flavor's Topology (e.g.
    /// `{topology.example.com/block: b1, topology.example.com/rack: r1}`).
    /// Nodes in different racks are in different pools. The level
    /// `kubernetes.io/hostname`, unless given here, is each node itself.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// A device resource of a node pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// Cards per node; the node's allocatable of the resource is split evenly among them.
    pub cards: u32,
}

/// Generated workloads (`kind: WorkloadGenerator`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadGenerator {
    /// `sim.arbiter.dev/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `WorkloadGenerator`.
    #[serde(default)]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What to generate.
    pub spec: WorkloadGeneratorSpec,
}

/// What a WorkloadGenerator generates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadGeneratorSpec {
    /// Workloads to generate.
    pub count: u32,
    /// Their namespace.
    pub namespace: String,
    /// LocalQueue the generated workloads are submitted to.
    pub queue_name: String,
    /// First arrival (duration, default `0s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// Between arrivals (duration, default `0s`); with `seed`, the mean of
    /// exponentially distributed gaps (a Poisson stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Their WorkloadPriorityClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// Their priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Their pod sets.
    pub pod_sets: Vec<PodSet>,
    /// How long each runs once admitted (duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// Makes arrivals a seeded Poisson stream instead of a fixed interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}
