//! Kueue's `Topology` kind (`kueue.x-k8s.io`, also read as
//! `arbiter.dev/v1alpha1`) and the pod-set annotations that ask for it: the
//! levels of a data centre's hierarchy (block, rack, host) as node labels,
//! widest first. A wire type only: `model::cluster` checks it. Not (yet)
//! served as a CRD: the simulator reads it from manifests, the operator
//! does not watch it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Pod-template annotation: the topology level (a node label of the
/// flavor's Topology) whose one domain must hold all the pod set's pods.
pub const PODSET_REQUIRED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-required-topology";
/// Pod-template annotation: the topology level whose one domain should
/// hold the pod set's pods if it can (else a wider level's, else any node).
pub const PODSET_PREFERRED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-preferred-topology";

/// The node label naming each node: a Topology's last level if any, and
/// without a pool's own value each node its own domain.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Where a workload carries its pod sets' topology annotations: a pod
/// template's `kueue.x-k8s.io/podset-required-topology: rack` on pod set
/// `workers` becomes the workload annotation
/// `podset-required-topology.arbiter.dev/workers: rack` (and likewise
/// `podset-preferred-topology.arbiter.dev/…`), read back by the scheduler.
pub fn carried_annotation(template_annotation: &str, pod_set: &str) -> Option<String> {
    let prefix = match template_annotation {
        PODSET_REQUIRED_TOPOLOGY_ANNOTATION => "podset-required-topology.arbiter.dev",
        PODSET_PREFERRED_TOPOLOGY_ANNOTATION => "podset-preferred-topology.arbiter.dev",
        _ => return None,
    };
    Some(format!("{prefix}/{pod_set}"))
}

/// The hierarchy nodes are arranged in (`kind: Topology`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    /// `kueue.x-k8s.io/v1beta1` (or v1alpha1, v1beta2), or `arbiter.dev/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `Topology`.
    #[serde(default)]
    pub kind: String,
    /// Its name, as a ResourceFlavor's `spec.topologyName` names it.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Its levels.
    #[serde(default)]
    pub spec: TopologySpec,
}

/// A Topology's levels.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    /// From the widest (e.g. `cloud.provider.com/topology-block`) to the
    /// narrowest (often `kubernetes.io/hostname`); each label at most once.
    #[serde(default)]
    pub levels: Vec<TopologyLevel>,
}

/// One level of a Topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyLevel {
    /// The node label whose value names a node's domain at this level.
    pub node_label: String,
}
