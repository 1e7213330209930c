//! The `arbiter.dev/v1alpha1` kinds as Rust types (docs/design.md §2).
//!
//! These are the wire types: what a manifest says, with Kubernetes'
//! spelling, deserialized by serde and described by schemars so that
//! `arbiter crds` prints valid CRDs. They are *not* checked: quantities are
//! still strings and names are unresolved. `model::cluster` turns them into
//! checked, interned types once, at the boundary. No I/O here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodTemplateSpec, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    #[schemars(length(max = 64))]
    pub covered_resources: Vec<String>,
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

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorQuotas {
    /// Name of a ResourceFlavor.
    #[schemars(schema_with = "name_schema")]
    pub name: String,
    #[schemars(length(max = 64))]
    pub resources: Vec<ResourceQuota>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    pub name: String,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

// ---------------------------------------------------------------- ClusterQueue

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum QueueingStrategy {
    /// The head blocks the queue until it is admitted.
    StrictFIFO,
    /// A head that cannot be admitted steps aside for the next one.
    #[default]
    BestEffortFIFO,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum FungibilityPolicy {
    /// v1beta1: stop at this flavor when it can borrow (v1beta2 `MayStopSearch`).
    Borrow,
    /// v1beta1: stop at this flavor when it can preempt (v1beta2 `MayStopSearch`).
    Preempt,
    MayStopSearch,
    TryNextFlavor,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.preference) || (has(self.whenCanBorrow) && self.whenCanBorrow == 'TryNextFlavor' && (!has(self.whenCanPreempt) || self.whenCanPreempt == 'TryNextFlavor'))",
     "message": "preference may only be set when whenCanBorrow and whenCanPreempt are both TryNextFlavor"},
]))]
pub struct FlavorFungibility {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_borrow: Option<FungibilityPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_preempt: Option<FungibilityPolicy>,
    /// Kueue's `preference`: which flavor wins when every flavor tried
    /// needs borrowing, preemption or both (only with both policies
    /// `TryNextFlavor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference: Option<FlavorPreference>,
}

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

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum WithinClusterQueue {
    #[default]
    Never,
    LowerPriority,
    LowerOrNewerEqualPriority,
}

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
pub struct Preemption {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_cluster_queue: Option<WithinClusterQueue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_within_cohort: Option<ReclaimWithinCohort>,
    /// Kueue's `borrowWithinCohort`: whether a workload that must borrow
    /// may reclaim from other ClusterQueues of the cohort (lower priority
    /// only, at most `maxPriorityThreshold`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrow_within_cohort: Option<BorrowWithinCohort>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BorrowWithinCohort {
    #[serde(default)]
    pub policy: BorrowWithinCohortPolicy,
    /// Only workloads of this priority or lower may be preempted while borrowing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_priority_threshold: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum BorrowWithinCohortPolicy {
    #[default]
    Never,
    LowerPriority,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StopPolicy {
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

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdaptiveWeights {
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

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scheduling {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<SchedulingAlgorithm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive_weights: Option<AdaptiveWeights>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Autoscaling {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<u32>,
    /// Target GPU utilisation of the flavor's nodes, in percent (default 80).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_utilization: Option<f64>,
}

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

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceReclaim {
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub resource_groups: Vec<ResourceGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queueing_strategy: Option<QueueingStrategy>,
    /// Namespaces whose workloads may use this queue; omitted = all namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor_fungibility: Option<FlavorFungibility>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<Preemption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<StopPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<PriorityClassWeight>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_policy: Option<RetryPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_reclaim: Option<ResourceReclaim>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    #[serde(default)]
    pub pending_workloads: i32,
    #[serde(default)]
    pub admitted_workloads: i32,
    /// Quota in use per flavor and resource (Kueue's `flavorsUsage`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<FlavorUsage>,
    /// One line for `kubectl get`: `resource used/nominal` per flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_workloads_status: Option<PendingWorkloadsStatus>,
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
    pub namespace: String,
    pub name: String,
}

/// Quota in use of one flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUsage {
    pub name: String,
    pub resources: Vec<ResourceUsage>,
}

/// Quota in use of one resource of a flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
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
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Quantity>,
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
    Count(u32),
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

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceEstimation {
    #[serde(default)]
    pub enabled: bool,
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
    #[schemars(schema_with = "name_schema")]
    pub cluster_queue: String,
    /// Priority of workloads that name no priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_quotas: Vec<LocalResourceQuota>,
    /// Weight multiplying the priority of its workloads that name no
    /// priority class, in place of the ClusterQueue's `priorityClass` (the
    /// article's Queue field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<PriorityClassWeight>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_estimation: Option<ResourceEstimation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<StopPolicy>,
}

/// What a LocalQueue holds now.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueStatus {
    #[serde(default)]
    pub pending_workloads: i32,
    #[serde(default)]
    pub admitted_workloads: i32,
    /// Quota its admitted workloads use per flavor and resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<FlavorUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_workloads_status: Option<PendingWorkloadsStatus>,
    /// `Active` (Kueue's): whether the queue is in force, and why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

// ---------------------------------------------------------------- WorkloadPriorityClass

/// Priority of workloads that name it. As in Kueue it has no `spec`:
/// `value`, `description` and Arbiter's `weight` are top-level fields.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadPriorityClass {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub value: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Multiplies priority in the default weighting policy (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

// ---------------------------------------------------------------- Workload

/// One group of identical pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    pub name: String,
    #[serde(default = "one")]
    pub count: u32,
    /// Fewest pods the job can run with (partial admission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u32>,
    /// The pods' template, Kueue's way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
    /// Shorthand: per-pod requests instead of a template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, Quantity>>,
}

fn one() -> u32 {
    1
}

/// The unit of admission: one per job, created by the operator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "arbiter.dev",
    version = "v1alpha1",
    kind = "Workload",
    doc = "The unit of admission: one per job, created by the operator.",
    plural = "workloads",
    namespaced,
    status = "WorkloadStatus",
    shortname = "wl",
    category = "arbiter",
    printcolumn = r#"{"name":"Queue","type":"string","jsonPath":".spec.queueName"}"#,
    printcolumn = r#"{"name":"ClusterQueue","type":"string","jsonPath":".status.admission.clusterQueue"}"#,
    printcolumn = r#"{"name":"Admitted","type":"string","jsonPath":".status.conditions[?(@.type==\"Admitted\")].status"}"#,
    printcolumn = r#"{"name":"Finished","type":"string","jsonPath":".status.conditions[?(@.type==\"Finished\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"QuotaReserved\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_name: Option<String>,
    pub pod_sets: Vec<PodSet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    pub name: String,
    /// Resource name → flavor name.
    #[serde(default)]
    pub flavors: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    pub cluster_queue: String,
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evictions: Option<u32>,
    /// Kueue's: requeues after its pods were not all ready in time
    /// (`waitForPodsReady`), and until when it backs off before the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_state: Option<RequeueState>,
    /// Runs again after a failed run (`retryPolicy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// Until when it backs off before running again (`retryPolicy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Time>,
    /// Arbiter's: the seal of `admission` (an HMAC with a key no tenant
    /// holds), so that an admission written here by anyone else is never
    /// read back as Arbiter's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_seal: Option<String>,
}

/// Kueue's `Workload.status.requeueState`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequeueState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_at: Option<Time>,
}
