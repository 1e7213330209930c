//! The Workload and WorkloadPriorityClass wire types (`api`'s job side):
//! what a job asks and what the scheduler decided about it, with Kueue's
//! spelling. Like the rest of `api`, not checked and no I/O; re-exported
//! from `api`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------- WorkloadPriorityClass

/// Priority of workloads that name it. As in Kueue it has no `spec`:
/// `value`, `description` and Arbiter's `weight` are top-level fields.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadPriorityClass {
    /// `arbiter.dev/v1alpha1` (or a Kueue version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `WorkloadPriorityClass`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The priority (higher is more important).
    pub value: i32,
    /// Free text for people; no effect.
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
    /// The pod set's name, unique in its workload.
    pub name: String,
    /// Pods in the set (default 1).
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
    /// The LocalQueue it is submitted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_name: Option<String>,
    /// Its groups of identical pods.
    pub pod_sets: Vec<PodSet>,
    /// The WorkloadPriorityClass it names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Its priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// `false`: deactivated, not considered for admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
}

/// Flavors and pods admitted for one pod set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    /// The pod set's name.
    pub name: String,
    /// Resource name → flavor name.
    #[serde(default)]
    pub flavors: BTreeMap<String, String>,
    /// Pods admitted (below the pod set's count after partial admission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

/// Where a workload was admitted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// The ClusterQueue that admitted it.
    pub cluster_queue: String,
    /// Flavors and counts per pod set.
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

/// What the scheduler decided about a workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    /// Its admission, while admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    /// Conditions such as `QuotaReserved`, `Admitted` and `Finished`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Times it was evicted.
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
    /// Requeues so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Until when it backs off before it is queued again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_at: Option<Time>,
}
