//! Kueue's `Topology` kind (`kueue.x-k8s.io`, also read as
//! `arbiter.dev/v1alpha1`) and the pod-set annotations that ask for it: the
//! levels of a data centre's hierarchy (block, rack, host) as node labels,
//! widest first. A wire type only: `model::cluster` checks it. Served as
//! the cluster-scoped `arbiter.dev/v1alpha1` CRD (`arbiter crds`); the
//! operator watches it (and Kueue's), the simulator reads it from manifests.

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

/// A pod set's topology request: Kueue's pod-template annotations
/// `kueue.x-k8s.io/podset-required-topology` /
/// `podset-preferred-topology` (required wins when both are given, as in
/// Kueue). Each names a level (a node label) of the flavor's Topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyRequest {
    /// All pods inside one domain of the level, or not admitted.
    Required(String),
    /// One domain of the level if any holds them, else of a wider level,
    /// else anywhere on the flavor's nodes.
    Preferred(String),
}

impl TopologyRequest {
    /// The level asked for.
    pub fn level(&self) -> &str {
        match self {
            TopologyRequest::Required(level) | TopologyRequest::Preferred(level) => level,
        }
    }

    /// The request a pod template's annotations make, if any.
    pub fn from_annotations<'a>(
        annotation: impl Fn(&str) -> Option<&'a str>,
    ) -> Option<TopologyRequest> {
        annotation(PODSET_REQUIRED_TOPOLOGY_ANNOTATION)
            .map(|level| TopologyRequest::Required(level.to_string()))
            .or_else(|| {
                annotation(PODSET_PREFERRED_TOPOLOGY_ANNOTATION)
                    .map(|level| TopologyRequest::Preferred(level.to_string()))
            })
    }
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
    /// narrowest (often `kubernetes.io/hostname`, which can only be last);
    /// each label at most once.
    #[serde(default)]
    #[schemars(length(max = 16))]
    pub levels: Vec<TopologyLevel>,
}

/// One level of a Topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyLevel {
    /// The node label whose value names a node's domain at this level.
    #[schemars(length(min = 1, max = 316))]
    pub node_label: String,
}
