//! Kueue's MultiKueue kinds as `arbiter.dev/v1alpha1` wire types: an
//! `AdmissionCheck` a ClusterQueue names in `spec.admissionChecks`, whose
//! controller `kueue.x-k8s.io/multikueue` sends the queue's admitted jobs
//! to worker clusters; the `MultiKueueConfig` it points at (the workers, in
//! order); and each `MultiKueueCluster` (a worker, reached with the
//! kubeconfig in a Secret of the operator's namespace). Kueue's field names
//! and constants, so its manifests carry over. Wire types only: the core
//! never reads them (the manager's quota decides admission as for any
//! queue); the operator's `multicluster` module does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller name of an AdmissionCheck that dispatches to worker
/// clusters (Kueue's `MultiKueueControllerName`).
pub const MULTIKUEUE_CONTROLLER: &str = "kueue.x-k8s.io/multikueue";
/// The `spec.managedBy` of a job on the manager cluster: the manager's own
/// job controller leaves it alone, the dispatcher runs it on a worker.
pub const MULTIKUEUE_MANAGED_BY: &str = MULTIKUEUE_CONTROLLER;
/// The label on a worker's copy naming the manager it came from (Kueue's
/// `MultiKueueOriginLabel`).
pub const MULTIKUEUE_ORIGIN_LABEL: &str = "kueue.x-k8s.io/multikueue-origin";
/// The key of a worker's kubeconfig in its Secret (Kueue's
/// `MultiKueueConfigSecretKey`).
pub const MULTIKUEUE_SECRET_KEY: &str = "kubeconfig";

/// A check a workload of the ClusterQueues naming it must pass; Arbiter
/// acts on the controller `kueue.x-k8s.io/multikueue` only.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "arbiter.dev",
    version = "v1alpha1",
    kind = "AdmissionCheck",
    doc = "A check a workload of the ClusterQueues naming it must pass; Arbiter acts on the controller kueue.x-k8s.io/multikueue only.",
    plural = "admissionchecks",
    status = "AdmissionCheckStatus",
    category = "arbiter",
    printcolumn = r#"{"name":"Controller","type":"string","jsonPath":".spec.controllerName"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckSpec {
    /// The controller that runs the check (`kueue.x-k8s.io/multikueue`).
    #[schemars(length(max = 253))]
    pub controller_name: String,
    /// The check's parameters: for MultiKueue, a MultiKueueConfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<AdmissionCheckParameters>,
}

/// The object holding an AdmissionCheck's parameters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckParameters {
    /// Its API group (`kueue.x-k8s.io` or `arbiter.dev`; either is read).
    #[serde(default)]
    #[schemars(length(max = 253))]
    pub api_group: String,
    /// Its kind (`MultiKueueConfig`).
    #[schemars(length(max = 63))]
    pub kind: String,
    /// Its name.
    #[schemars(length(max = 253))]
    pub name: String,
}

/// What the controller says of an AdmissionCheck.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStatus {
    /// `Active`: the check's parameters resolve.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub conditions: Vec<Condition>,
}

/// The worker clusters a MultiKueue AdmissionCheck dispatches to, in the
/// order the default choice tries them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "arbiter.dev",
    version = "v1alpha1",
    kind = "MultiKueueConfig",
    doc = "The worker clusters a MultiKueue AdmissionCheck dispatches to, in the order the default choice tries them.",
    plural = "multikueueconfigs",
    category = "arbiter"
)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueConfigSpec {
    /// Names of MultiKueueClusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub clusters: Vec<String>,
}

/// A worker cluster: where its API server is and how to reach it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "arbiter.dev",
    version = "v1alpha1",
    kind = "MultiKueueCluster",
    doc = "A worker cluster: where its API server is and how to reach it.",
    plural = "multikueueclusters",
    status = "MultiKueueClusterStatus",
    category = "arbiter",
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.conditions[?(@.type==\"Active\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueClusterSpec {
    /// The kubeconfig to reach it (Kueue v1beta1's spelling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfig>,
    /// Where its kubeconfig comes from (Kueue v1beta2's spelling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_source: Option<ClusterSource>,
}

impl MultiKueueClusterSpec {
    /// The kubeconfig reference, in either spelling.
    pub fn kubeconfig(&self) -> Option<&KubeConfig> {
        self.kube_config.as_ref().or(self
            .cluster_source
            .as_ref()
            .and_then(|source| source.kube_config.as_ref()))
    }
}

/// Where a worker's kubeconfig comes from (Kueue v1beta2).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSource {
    /// A kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfig>,
}

/// A kubeconfig reference.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfig {
    /// The name of a Secret in the operator's namespace whose key
    /// `kubeconfig` holds it.
    #[schemars(length(max = 253))]
    pub location: String,
    /// `Secret` (the default; Kueue's `Path` is not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub location_type: Option<String>,
}

/// What the operator says of a worker cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueClusterStatus {
    /// `Active`: the operator reaches its API server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_of_kueues_spellings_of_the_kubeconfig_are_read() {
        let v1beta1: MultiKueueClusterSpec = serde_json::from_value(serde_json::json!(
            {"kubeConfig": {"location": "w1", "locationType": "Secret"}}
        ))
        .unwrap();
        assert_eq!(v1beta1.kubeconfig().unwrap().location, "w1");
        let v1beta2: MultiKueueClusterSpec = serde_json::from_value(serde_json::json!(
            {"clusterSource": {"kubeConfig": {"location": "w2"}}}
        ))
        .unwrap();
        assert_eq!(v1beta2.kubeconfig().unwrap().location, "w2");
        assert_eq!(MultiKueueClusterSpec::default().kubeconfig(), None);
    }
}
