//! The `arbiter.dev/v1alpha1` kinds as Rust types (docs/design.md §2).
//!
//! These are the wire types: what a manifest says, with Kubernetes'
//! spelling, deserialized by serde and described by schemars so that
//! `arbiter crds` prints valid CRDs. They are *not* checked: quantities are
//! still strings and names are unresolved. `model::cluster` turns them into
//! checked, interned types once, at the boundary. No I/O here. The job
//! side (Workload, WorkloadPriorityClass) is in `workload`, re-exported here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod multikueue;
mod topology;
mod workload;
pub use multikueue::{
    AdmissionCheck, AdmissionCheckParameters, AdmissionCheckSpec, AdmissionCheckStatus,
    ClusterSource, KubeConfig, MultiKueueCluster, MultiKueueClusterSpec, MultiKueueClusterStatus,
    MultiKueueConfig, MultiKueueConfigSpec, MULTIKUEUE_CONTROLLER, MULTIKUEUE_MANAGED_BY,
    MULTIKUEUE_ORIGIN_LABEL, MULTIKUEUE_SECRET_KEY,
};
pub use topology::{
    Topology, TopologyLevel, TopologyRequest, TopologySpec, HOSTNAME_LABEL,
    PODSET_PREFERRED_TOPOLOGY_ANNOTATION, PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
};
pub use workload::{
    Admission, PodSet, PodSetAssignment, RequeueState, Workload, WorkloadPriorityClass,
    WorkloadSpec, WorkloadStatus,
};

/// API group of Arbiter's own kinds.
pub const GROUP: &str = "arbiter.dev";
/// `apiVersion` of Arbiter's own kinds.
pub const API_VERSION: &str = "arbiter.dev/v1alpha1";

// ---------------------------------------------------------------- ResourceFlavor

/// A kind of node (GPU model, pool): the labels and taints that identify it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "arbiter.dev",
    version = "v1alpha1",
    kind = "ResourceFlavor",
    doc = "A kind of node (GPU model, pool): the labels and taints that identify it.",
    plural = "resourceflavors",
    status = "ActiveStatus",
    shortname = "rf",
    category = "arbiter",
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.conditions[?(@.type==\"Active\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavorSpec {
    /// Labels a node of this flavor carries; injected as a nodeSelector on admission.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, String>,
    /// Taints the nodes carry; a pod set must tolerate them to use this flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8), extend("x-kubernetes-validations" = [
        {"rule": "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
         "message": "a taint's effect is NoSchedule, PreferNoSchedule or NoExecute"},
    ]))]
    pub node_taints: Vec<Taint>,
    /// Tolerations injected into admitted pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8), extend("x-kubernetes-validations" = [
        {"rule": "self.all(x, has(x.key) || (has(x.operator) && x.operator == 'Exists'))",
         "message": "a toleration without a key must have operator Exists (it matches every taint)"},
        {"rule": "self.all(x, !has(x.tolerationSeconds) || (has(x.effect) && x.effect == 'NoExecute'))",
         "message": "tolerationSeconds needs effect NoExecute"},
        {"rule": "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])",
         "message": "a toleration's operator is Equal (the default) or Exists"},
        {"rule": "self.all(x, !has(x.operator) || x.operator != 'Exists' || !has(x.value))",
         "message": "a toleration with operator Exists has no value"},
        {"rule": "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
         "message": "a toleration's effect is NoSchedule, PreferNoSchedule or NoExecute"},
    ]))]
    pub tolerations: Vec<Toleration>,
    /// The Topology (Kueue's `Topology` object) its nodes are arranged in,
    /// for topology-aware placement: a pod set asking for a topology level
    /// (`kueue.x-k8s.io/podset-required-topology`) is admitted on this
    /// flavor only inside one domain of that level, and its pods are kept
    /// to that domain. The flavor is inactive while the Topology is missing
    /// or invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub topology_name: Option<String>,
}

// ---------------------------------------------------------------- quotas

/// A set of resources whose quotas are assigned together, flavor by flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.flavors.all(f, size(f.resources) == size(self.coveredResources))",
     "message": "each flavor gives a quota for every covered resource: flavors[].resources lists as many resources as coveredResources (use nominalQuota: 0)"},
]))]
pub struct ResourceGroup {
    /// Resources whose quotas this group assigns.
    #[schemars(length(max = 64))]
    pub covered_resources: Vec<String>,
    /// The flavors to try, in order, with their quotas.
    #[schemars(length(max = 64))]
    pub flavors: Vec<FlavorQuotas>,
}

/// Kubernetes quantity syntax without a minus sign: what a quota may be
/// (the API server's own quantity pattern, the sign left out).
const NON_NEGATIVE_QUANTITY: &str = r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// An object name (an RFC 1123 subdomain), as a reference to one must be.
const OBJECT_NAME: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// The CRD schema of a quota: an integer or a quantity string, never
/// negative, so the API server refuses `-8` or `garbage` without the
/// webhook (what it cannot see — a value too large to count — the
/// operator still leaves out on its own).
fn quota_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "A quantity, 0 or more (8, 500m, 64Gi, 1e3).",
        // `minimum` holds for the integer form, `pattern` for the string.
        "minimum": 0,
        "pattern": NON_NEGATIVE_QUANTITY,
        "x-kubernetes-int-or-string": true,
    })
}

/// The CRD schema of a reference to another object by name.
fn name_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "The name of the object referred to (lower-case letters, digits, '-' and '.').",
        "type": "string",
        "maxLength": 253,
        "pattern": OBJECT_NAME,
    })
}

/// Quotas of one flavor's resources.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorQuotas {
    /// Name of a ResourceFlavor.
    #[schemars(schema_with = "name_schema")]
    pub name: String,
    /// Quota of each covered resource in this flavor.
    #[schemars(length(max = 64))]
    pub resources: Vec<ResourceQuota>,
}

/// Quota of one resource in one flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    /// Resource name (`cpu`, `nvidia.com/gpu`).
    pub name: String,
    /// Quota guaranteed to this queue (or cohort): a quantity, 0 or more (8, 500m, 64Gi, 1e3).
    #[schemars(schema_with = "quota_schema")]
    pub nominal_quota: Quantity,
    /// Most this queue may borrow from its cohort above its nominal quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quota_schema")]
    pub borrowing_limit: Option<Quantity>,
    /// Most of its nominal quota this queue lends to its cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quota_schema")]
    pub lending_limit: Option<Quantity>,
}

/// Fair-sharing settings of a ClusterQueue or cohort.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairSharing {
    /// Share weight (a quantity, as in Kueue); default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<Quantity>,
}

/// The status of a ResourceFlavor or Cohort: whether it is in force.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveStatus {
    /// `Active`: whether the object is in force, and why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

// ---------------------------------------------------------------- Cohort

/// A cohort object: needed only for a parent or for quota of its own.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "arbiter.dev",
    version = "v1alpha1",
    kind = "Cohort",
    doc = "A cohort of ClusterQueues that borrow from and lend to each other; needed only for a parent or quota of its own.",
    plural = "cohorts",
    status = "ActiveStatus",
    category = "arbiter",
    printcolumn = r#"{"name":"Parent","type":"string","jsonPath":".spec.parent"}"#,
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.conditions[?(@.type==\"Active\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CohortSpec {
    /// Parent cohort (alias `parentName`, Kueue v1beta2).
    #[serde(default, alias = "parentName", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "name_schema")]
    pub parent: Option<String>,
    /// Quota owned by the cohort itself, lent to its members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub resource_groups: Vec<ResourceGroup>,
    /// Fair-sharing weight of the cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

// ---------------------------------------------------------------- ClusterQueue

/// Order in which a ClusterQueue tries its pending workloads.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum QueueingStrategy {
    /// The head blocks the queue until it is admitted.
    StrictFIFO,
    /// A head that cannot be admitted steps aside for the next one.
    #[default]
    BestEffortFIFO,
}

/// When to stop at a flavor rather than try the next one.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum FungibilityPolicy {
    /// v1beta1: stop at this flavor when it can borrow (v1beta2 `MayStopSearch`).
    Borrow,
    /// v1beta1: stop at this flavor when it can preempt (v1beta2 `MayStopSearch`).
    Preempt,
    // No doc comment on these two: schemars would list the enum differently
    // in the CRDs (`arbiter crds`). `MayStopSearch`: take this flavor;
    // `TryNextFlavor`: try the next flavor first.
    #[allow(missing_docs)]
    MayStopSearch,
    #[allow(missing_docs)]
    TryNextFlavor,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.preference) || (has(self.whenCanBorrow) && self.whenCanBorrow == 'TryNextFlavor' && (!has(self.whenCanPreempt) || self.whenCanPreempt == 'TryNextFlavor'))",
     "message": "preference may only be set when whenCanBorrow and whenCanPreempt are both TryNextFlavor"},
]))]
/// How flavors are chosen when borrowing or preemption is needed.
pub struct FlavorFungibility {
    /// When the flavor needs borrowing (default `MayStopSearch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_borrow: Option<FungibilityPolicy>,
    /// When the flavor needs preemption (default `TryNextFlavor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_preempt: Option<FungibilityPolicy>,
    /// Which flavor wins when every flavor needs borrowing or preemption
    /// ([`FlavorPreference`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference: Option<FlavorPreference>,
}

/// Kueue's `preference`: which flavor wins when every flavor tried
/// needs borrowing, preemption or both (only with both policies
/// `TryNextFlavor`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum FlavorPreference {
    /// The flavor needing the least preemption (fit, then reclaim, then
    /// preemption in the queue), then the one borrowing least far up the
    /// cohort tree.
    #[default]
    BorrowingOverPreemption,
    /// The flavor borrowing least far up the cohort tree, then the one
    /// needing the least preemption.
    PreemptionOverBorrowing,
}

/// Which workloads of its own ClusterQueue a workload may preempt: none
/// (`Never`), those of lower priority (`LowerPriority`), or also those of
/// equal priority queued later (`LowerOrNewerEqualPriority`).
// No doc comment on these variants: schemars would list the enum
// differently in the CRDs (`arbiter crds`). Their meaning is in the type's.
#[allow(missing_docs)]
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum WithinClusterQueue {
    #[default]
    Never,
    LowerPriority,
    LowerOrNewerEqualPriority,
}

/// Which workloads of other ClusterQueues of the cohort a workload within
/// its nominal quota may preempt to reclaim quota: none (`Never`), those of
/// lower priority (`LowerPriority`) or any (`Any`).
// No doc comment on these variants: schemars would list the enum
// differently in the CRDs (`arbiter crds`). Their meaning is in the type's.
#[allow(missing_docs)]
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ReclaimWithinCohort {
    #[default]
    Never,
    LowerPriority,
    Any,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.borrowWithinCohort) || !has(self.borrowWithinCohort.policy) || self.borrowWithinCohort.policy == 'Never' || (has(self.reclaimWithinCohort) && self.reclaimWithinCohort != 'Never')",
     "message": "borrowWithinCohort.policy other than Never needs reclaimWithinCohort other than Never"},
]))]
/// When a pending workload may preempt admitted ones.
pub struct Preemption {
    /// Preemption inside the ClusterQueue (default `Never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_cluster_queue: Option<WithinClusterQueue>,
    /// Reclaiming quota lent to the cohort (default `Never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_within_cohort: Option<ReclaimWithinCohort>,
    /// Kueue's `borrowWithinCohort`: whether a workload that must borrow
    /// may reclaim from other ClusterQueues of the cohort (lower priority
    /// only, at most `maxPriorityThreshold`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrow_within_cohort: Option<BorrowWithinCohort>,
}

/// Preemption in the cohort by a workload that must borrow.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BorrowWithinCohort {
    /// Whether it may preempt (default `Never`).
    #[serde(default)]
    pub policy: BorrowWithinCohortPolicy,
    /// Only workloads of this priority or lower may be preempted while borrowing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_priority_threshold: Option<i32>,
}

/// Whether a workload that must borrow may preempt in the cohort: not at
/// all (`Never`), or workloads of lower priority (`LowerPriority`).
// No doc comment on these variants: schemars would list the enum
// differently in the CRDs (`arbiter crds`). Their meaning is in the type's.
#[allow(missing_docs)]
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum BorrowWithinCohortPolicy {
    #[default]
    Never,
    LowerPriority,
}

/// Stops admission in a queue.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StopPolicy {
    /// Admission goes on.
    #[default]
    None,
    /// Admit nothing new; admitted workloads keep running.
    Hold,
    /// Admit nothing new and evict what is admitted.
    HoldAndDrain,
}

/// Weight multiplying priority in the default weighting policy, for the
/// workloads (of a ClusterQueue or a LocalQueue) that name no
/// WorkloadPriorityClass.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PriorityClassWeight {
    /// A name for the weighting (the article's; informative).
    pub name: String,
    /// Multiplies priority (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// Free text for people (the article's); no effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// How a ClusterQueue orders workloads and shares quota.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SchedulingAlgorithm {
    /// Classic ordering, no dominant-resource-share.
    #[default]
    #[serde(rename = "fifo")]
    Fifo,
    /// Weighted dominant resource share across the cohort tree.
    #[serde(rename = "fair-sharing")]
    FairSharing,
    /// Fair sharing with order and weights decided by the policy hooks.
    #[serde(rename = "policy")]
    Policy,
}

/// Weights recomputed by the fair-share hook over time.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdaptiveWeights {
    /// Turns adaptive weights on.
    #[serde(default)]
    pub enabled: bool,
    /// How often the fair-share hook recomputes weights (duration, default `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adjustment_interval: Option<String>,
    /// Half-life of the decayed GPU usage the fair-share hook sees as
    /// `clusterQueue.decayedUsage` (duration, default `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_half_life: Option<String>,
}

/// How a ClusterQueue schedules its workloads.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scheduling {
    /// The ordering algorithm (default `fifo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<SchedulingAlgorithm>,
    /// Weights recomputed by the fair-share hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive_weights: Option<AdaptiveWeights>,
}

/// Node autoscaling of the flavors a ClusterQueue uses.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Autoscaling {
    /// Turns autoscaling on.
    #[serde(default)]
    pub enabled: bool,
    /// Fewest nodes per flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<u32>,
    /// Most nodes per flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<u32>,
    /// Target GPU utilisation of the flavor's nodes, in percent (default 80).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_utilization: Option<f64>,
}

/// What happens to a workload evicted or failed while admitted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// Evictions/failures tolerated before the workload is deactivated (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// First backoff; doubles on every retry (duration, default `1m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_duration: Option<String>,
}

/// All-or-nothing admission, Kueue's `waitForPodsReady` (its
/// Configuration's v1beta2 fields; present means enabled, `enable: false`
/// as v1beta1 wrote it turns it off): an admitted workload whose pods are
/// not all ready within `timeout` is evicted and requeued with backoff.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitForPodsReady {
    /// `false` turns waiting for pods off (v1beta1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable: Option<bool>,
    /// From admission to every pod ready (duration, default `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Admit nothing while an admitted workload's pods are not all ready (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_admission: Option<bool>,
    /// From an admitted workload's pods no longer all ready (once they
    /// were: a pod failed, its node went away) to all ready again
    /// (duration; absent: waited for without end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_timeout: Option<String>,
    /// How a workload evicted for its pods' readiness is queued again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeuing_strategy: Option<RequeuingStrategy>,
}

/// How a workload evicted for its pods' readiness is queued again.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequeuingStrategy {
    /// `Eviction` (default: queued from its eviction on) or `Creation` (its old place).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Requeues before it is deactivated (absent: without end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit_count: Option<u32>,
    /// First backoff, doubling with every requeue (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_base_seconds: Option<u32>,
    /// Longest backoff (default 3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_max_seconds: Option<u32>,
}

/// Eviction of workloads admitted too long.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceReclaim {
    /// Turns reclaiming on.
    #[serde(default)]
    pub enabled: bool,
    /// Evict a workload admitted for longer than this (duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_timeout: Option<String>,
}

/// Quota and admission rules shared by the LocalQueues that point at it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "arbiter.dev",
    version = "v1alpha1",
    kind = "ClusterQueue",
    doc = "Quota and admission rules shared by the LocalQueues that point at it.",
    plural = "clusterqueues",
    status = "ClusterQueueStatus",
    shortname = "cq",
    category = "arbiter",
    printcolumn = r#"{"name":"Cohort","type":"string","jsonPath":".spec.cohort"}"#,
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.conditions[?(@.type==\"Active\")].status"}"#,
    printcolumn = r#"{"name":"Strategy","type":"string","jsonPath":".spec.queueingStrategy","priority":1}"#,
    printcolumn = r#"{"name":"Pending","type":"integer","jsonPath":".status.pendingWorkloads"}"#,
    printcolumn = r#"{"name":"Admitted","type":"integer","jsonPath":".status.admittedWorkloads"}"#,
    printcolumn = r#"{"name":"Usage","type":"string","jsonPath":".status.usageSummary"}"#,
    printcolumn = r#"{"name":"Share","type":"number","jsonPath":".status.fairSharing.weightedShare","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.cohort) || !has(self.resourceGroups) || self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit) && !has(r.lendingLimit))))",
     "message": "borrowingLimit and lendingLimit need a cohort to borrow from or lend to: set spec.cohort or remove the limit"},
]))]
pub struct ClusterQueueSpec {
    /// Cohort this queue borrows from and lends to (alias `cohortName`).
    #[serde(default, alias = "cohortName", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "name_schema")]
    pub cohort: Option<String>,
    /// Resources and their quotas, per flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub resource_groups: Vec<ResourceGroup>,
    /// Order of pending workloads (default `BestEffortFIFO`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queueing_strategy: Option<QueueingStrategy>,
    /// Namespaces whose workloads may use this queue; omitted = all namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// How flavors are chosen when borrowing or preemption is needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor_fungibility: Option<FlavorFungibility>,
    /// When its workloads may preempt others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<Preemption>,
    /// Fair-sharing weight of the queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
    /// Stops admission (`Hold`) or also evicts (`HoldAndDrain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<StopPolicy>,
    /// Weight of the priority of its workloads that name no priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<PriorityClassWeight>,
    /// Ordering algorithm and adaptive weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
    /// Node autoscaling of its flavors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,
    /// Retries of evicted or failed workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_policy: Option<RetryPolicy>,
    /// Eviction of workloads admitted too long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_reclaim: Option<ResourceReclaim>,
    /// AdmissionChecks its workloads pass; one whose controller is
    /// `kueue.x-k8s.io/multikueue` runs them on worker clusters (the
    /// operator's multi-cluster dispatch), others are not acted on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub admission_checks: Vec<String>,
}

/// What a ClusterQueue holds now.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    /// Workloads waiting.
    #[serde(default)]
    pub pending_workloads: i32,
    /// Workloads admitted.
    #[serde(default)]
    pub admitted_workloads: i32,
    /// Quota in use per flavor and resource (Kueue's `flavorsUsage`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<FlavorUsage>,
    /// One line for `kubectl get`: `resource used/nominal` per flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_summary: Option<String>,
    /// Fair sharing as the scheduler computes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
    /// The first waiting workloads of a queue, in the order they will be tried
    /// (Kueue's `pendingWorkloadsStatus`): `kubectl arbiter` reads positions
    /// from it. At most ten of them, as Kueue's default `maxCount`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_workloads_status: Option<PendingWorkloadsStatus>,
    /// `Active`: whether the queue is in force, and why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The first waiting workloads of a queue, in the order they will be tried
/// (Kueue's `pendingWorkloadsStatus`): `kubectl arbiter` reads positions
/// from it. At most ten of them, as Kueue's default `maxCount`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingWorkloadsStatus {
    /// In queue order: the first is tried first.
    #[serde(default)]
    pub head: Vec<PendingWorkload>,
}

/// A waiting workload, by its Workload object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingWorkload {
    /// The Workload's namespace.
    pub namespace: String,
    /// The Workload's name.
    pub name: String,
}

/// Quota in use of one flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUsage {
    /// The flavor's name.
    pub name: String,
    /// Usage of each resource.
    pub resources: Vec<ResourceUsage>,
}

/// Quota in use of one resource of a flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    /// The resource's name.
    pub name: String,
    /// Admitted workloads' requests.
    pub total: Quantity,
    /// The part above nominal quota, borrowed from the cohort.
    pub borrowed: Quantity,
}

/// Fair sharing as the scheduler computes it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairSharingStatus {
    /// The dominant resource share above nominal quota, per mille of what
    /// the cohort tree can lend, divided by the fair-sharing weight (0:
    /// within nominal quota), as Kueue's `weightedShare`.
    pub weighted_share: f64,
}

// ---------------------------------------------------------------- LocalQueue

/// Per-workload bounds and default for one resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalResourceQuota {
    /// The resource's name.
    pub name: String,
    /// Least a workload may request in total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Quantity>,
    /// Most a workload may request in total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Quantity>,
    /// Fills the request of a workload that asks for none of this resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Quantity>,
}

/// How many finished workloads (a count) or how far back (a duration) an estimate looks.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum HistoryWindow {
    /// The last this many finished workloads.
    Count(u32),
    /// The workloads finished within this duration.
    Duration(String),
}

/// An integer or a string, as the API server's structural schemas spell it
/// (schemars' `anyOf` for an untagged enum is not structural).
impl JsonSchema for HistoryWindow {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "HistoryWindow".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "How many finished workloads (a count, e.g. 50) or how far back (a duration, e.g. `7d`) an estimate looks.",
            "x-kubernetes-int-or-string": true,
        })
    }
}

/// Runtime estimates from the queue's history.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceEstimation {
    /// Turns estimation on.
    #[serde(default)]
    pub enabled: bool,
    /// How many finished workloads (a count, e.g. 50) or how far back (a
    /// duration, e.g. `7d`) an estimate looks (default 100 workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_window: Option<HistoryWindow>,
    /// Quantile of past runtimes used as the estimate (0–1, default 0.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence_level: Option<f64>,
}

/// A namespace's door into a ClusterQueue.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "arbiter.dev",
    version = "v1alpha1",
    kind = "LocalQueue",
    doc = "A namespace's door into a ClusterQueue.",
    plural = "localqueues",
    namespaced,
    status = "LocalQueueStatus",
    shortname = "lq",
    shortname = "queue",
    shortname = "queues",
    category = "arbiter",
    printcolumn = r#"{"name":"ClusterQueue","type":"string","jsonPath":".spec.clusterQueue"}"#,
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.conditions[?(@.type==\"Active\")].status"}"#,
    printcolumn = r#"{"name":"Pending","type":"integer","jsonPath":".status.pendingWorkloads"}"#,
    printcolumn = r#"{"name":"Admitted","type":"integer","jsonPath":".status.admittedWorkloads"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueSpec {
    /// The name of the ClusterQueue it feeds (lower-case letters, digits, '-' and '.').
    #[schemars(schema_with = "name_schema")]
    pub cluster_queue: String,
    /// Priority of workloads that name no priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Bounds and defaults on its workloads' requests, per resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_quotas: Vec<LocalResourceQuota>,
    /// Weight multiplying the priority of its workloads that name no
    /// priority class, in place of the ClusterQueue's `priorityClass` (the
    /// article's Queue field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<PriorityClassWeight>,
    /// Runtime estimates from its history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_estimation: Option<ResourceEstimation>,
    /// Stops admission (`Hold`) or also evicts (`HoldAndDrain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<StopPolicy>,
}

/// What a LocalQueue holds now.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueStatus {
    /// Workloads waiting.
    #[serde(default)]
    pub pending_workloads: i32,
    /// Workloads admitted.
    #[serde(default)]
    pub admitted_workloads: i32,
    /// Quota its admitted workloads use per flavor and resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<FlavorUsage>,
    /// The first waiting workloads of a queue, in the order they will be tried
    /// (Kueue's `pendingWorkloadsStatus`): `kubectl arbiter` reads positions
    /// from it. At most ten of them, as Kueue's default `maxCount`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_workloads_status: Option<PendingWorkloadsStatus>,
    /// `Active` (Kueue's): whether the queue is in force, and why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
