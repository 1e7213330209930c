//! Each hook's request (`*Input`) and response (`*Output`), as in
//! plugin-sdk/ABI.md "Requests and responses": the host writes the one and
//! reads the other, a plugin the other way round.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::views::{
    ClusterQueueView, CohortView, FlavorView, NodeView, PodView, QueueView, TenantView,
    TypicalPodView, WorkloadView,
};

/// `admission`: may this workload be admitted with these flavors?
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AdmissionInput {
    /// The workload asking to be admitted; its `flavors` are the ones it would be admitted on.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub workload: WorkloadView,
    /// Its LocalQueue (empty unless a policy reads `queue`).
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub queue: QueueView,
    /// Its ClusterQueue (empty unless a policy reads `clusterQueue`).
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub cluster_queue: ClusterQueueView,
    /// Its namespace (empty unless a policy reads `tenant`).
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub tenant: TenantView,
    /// Its ClusterQueue's cohort, if any (absent unless a policy reads `cohort`).
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub cohort: Option<CohortView>,
    /// Pod set → resource → flavor it would be admitted on.
    #[serde(default)]
    pub flavors: BTreeMap<String, BTreeMap<String, String>>,
    /// Whether admitting it borrows from the cohort.
    #[serde(default)]
    pub borrowing: bool,
    /// The scheduler's clock, in seconds.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub now: f64,
    /// The policy's `params` (its `config` in bundle.yaml), filled in by the host.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub params: serde_json::Value,
}

/// The `admission` response: admit or deny, and why.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(description = ""))]
pub struct AdmissionOutput {
    /// Whether the workload may be admitted.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    pub allowed: bool,
    /// Why it is denied (shown in Events and reports); unused when allowed.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub reason: Option<String>,
    /// `false` rejects the workload for good; default true (it is tried again later).
    #[serde(default)]
    pub retryable: Option<bool>,
}

impl AdmissionOutput {
    /// Admit.
    pub fn allow() -> Self {
        AdmissionOutput {
            allowed: true,
            ..Self::default()
        }
    }

    /// Deny for now; the workload is tried again later.
    pub fn deny(reason: impl Into<String>) -> Self {
        AdmissionOutput {
            allowed: false,
            reason: Some(reason.into()),
            retryable: None,
        }
    }

    /// Deny for good: retrying cannot help (e.g. the request exceeds a cap).
    pub fn deny_permanently(reason: impl Into<String>) -> Self {
        AdmissionOutput {
            retryable: Some(false),
            ..Self::deny(reason)
        }
    }
}

/// `weight`: one score per workload (batch).
// `W` is how a workload is decoded: the whole `WorkloadView` by default; a
// plugin may decode its own smaller type holding only the fields it
// declares with `arbiter_weight_fields` (ABI.md "Lean weight requests").
// (Not a doc comment: it would become the schema's description.)
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
// The `Serialize` bound lets schemars state the workloads' default (`[]`).
#[cfg_attr(
    feature = "schema",
    schemars(rename = "WeightInput", bound = "W: schemars::JsonSchema + Serialize")
)]
#[serde(rename_all = "camelCase")]
pub struct WeightInput<W = WorkloadView> {
    /// The workloads to score, in order.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub workloads: Vec<W>,
    /// By `namespace/name`.
    #[serde(default)]
    pub queues: BTreeMap<String, QueueView>,
    /// The workloads' ClusterQueues, by name.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub cluster_queues: BTreeMap<String, ClusterQueueView>,
    /// The workloads' namespaces, by name.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantView>,
    /// The scheduler's clock, in seconds.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub now: f64,
    /// The policy's `params` (its `config` in bundle.yaml), filled in by the host.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub params: serde_json::Value,
}

/// The `weight` response.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(description = ""))]
pub struct WeightOutput {
    /// One finite number per workload, same order; higher goes first.
    pub scores: Vec<f64>,
}

/// `fairShare`: one weight per ClusterQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FairShareInput {
    /// The ClusterQueues to weigh, in order.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub cluster_queues: Vec<ClusterQueueView>,
    /// The scheduler's clock, in seconds.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub now: f64,
    /// The policy's `params` (its `config` in bundle.yaml), filled in by the host.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub params: serde_json::Value,
}

/// The `fairShare` response.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(description = ""))]
pub struct FairShareOutput {
    /// One weight ≥ 0 per ClusterQueue, same order.
    pub weights: Vec<f64>,
}

/// `autoscale`: desired nodes per flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AutoscaleInput {
    /// The flavors with node pools, in order.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub flavors: Vec<FlavorView>,
    /// The scheduler's clock, in seconds.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub now: f64,
    /// The policy's `params` (its `config` in bundle.yaml), filled in by the host.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub params: serde_json::Value,
}

/// The `autoscale` response.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(description = ""))]
pub struct AutoscaleOutput {
    /// Desired nodes per flavor, same order; clamped to `[minNodes, maxNodes]`.
    pub nodes: Vec<i64>,
}

/// `flavor`: preferred flavor order for one workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FlavorInput {
    /// The workload whose flavors are ordered.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub workload: WorkloadView,
    /// Its LocalQueue (empty unless a policy reads `queue`).
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub queue: QueueView,
    /// Its ClusterQueue (empty unless a policy reads `clusterQueue`).
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub cluster_queue: ClusterQueueView,
    /// Its namespace (empty unless a policy reads `tenant`).
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub tenant: TenantView,
    /// The ClusterQueue's flavors, in listed order.
    #[serde(default)]
    pub candidates: Vec<String>,
    /// The scheduler's clock, in seconds.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub now: f64,
    /// The policy's `params` (its `config` in bundle.yaml), filled in by the host.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub params: serde_json::Value,
}

/// The `flavor` response.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(description = ""))]
pub struct FlavorOutput {
    /// Preferred order, a subset of `candidates`.
    pub flavors: Vec<String>,
}

/// `placement`: a score for each node one pod of an admitted workload fits on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PlacementInput {
    /// The admitted workload the pod belongs to.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub workload: WorkloadView,
    /// The pod set the pod belongs to.
    #[serde(default)]
    pub pod_set: String,
    /// The flavor it was admitted on, whose nodes these are; empty when the
    /// candidates serve several flavors (each node's `flavor` names its own).
    #[serde(default)]
    pub flavor: String,
    /// The pod to place: what it asks for.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub pod: PodView,
    /// The nodes the pod fits on, with the pods placed before it taken off.
    #[serde(default)]
    pub nodes: Vec<NodeView>,
    /// The shapes of the pods last submitted to the workload's ClusterQueue
    /// (every shape of them), most frequent first.
    #[serde(default)]
    pub typical: Vec<TypicalPodView>,
    /// The scheduler's clock, in seconds.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub now: f64,
    /// The policy's `params` (its `config` in bundle.yaml), filled in by the host.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub params: serde_json::Value,
}

/// The `placement` response.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(description = ""))]
pub struct PlacementOutput {
    /// One finite number per node, same order; the pod goes to the highest.
    pub scores: Vec<f64>,
    /// Per node, same order: the card (index in its device's `cards`) for a
    /// request that fits on one card, or null to let the host pick the
    /// fullest card that holds it.
    #[serde(default)]
    pub cards: Option<Vec<Option<u32>>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn admission_output_helpers() {
        assert_eq!(
            serde_json::to_value(AdmissionOutput::allow()).unwrap(),
            json!({"allowed": true, "reason": null, "retryable": null})
        );
        assert_eq!(
            serde_json::to_value(AdmissionOutput::deny_permanently("too big")).unwrap(),
            json!({"allowed": false, "reason": "too big", "retryable": false})
        );
    }

    #[test]
    fn requests_use_the_documented_field_names() {
        let req: WeightInput = serde_json::from_value(json!({
            "workloads": [{"name": "a"}],
            "queues": {"research/gpu": {"name": "gpu", "clusterQueue": "cq"}},
            "clusterQueues": {"cq": {"decayedUsage": 3.5}},
            "tenants": {"research": {"labels": {"tier": "gold"}}},
            "now": 42,
            "params": {"k": 1}
        }))
        .unwrap();
        assert_eq!(req.queues["research/gpu"].cluster_queue, "cq");
        assert_eq!(req.cluster_queues["cq"].decayed_usage, 3.5);
        assert_eq!(req.cluster_queues["cq"].weight, 1.0);
        assert_eq!(req.tenants["research"].labels["tier"], "gold");
        assert_eq!(req.now, 42.0);
        assert_eq!(req.params, json!({"k": 1}));

        #[derive(Deserialize, Debug, Default, PartialEq)]
        struct Lean {
            gpus: i64,
        }
        let lean: WeightInput<Lean> =
            serde_json::from_value(json!({"workloads": [{"gpus": 3, "name": "x"}]})).unwrap();
        assert_eq!(lean.workloads, [Lean { gpus: 3 }]);

        let req: AdmissionInput = serde_json::from_value(json!({
            "flavors": {"worker": {"nvidia.com/gpu": "a100-80gb"}},
            "borrowing": true,
            "cohort": null
        }))
        .unwrap();
        assert_eq!(req.flavors["worker"]["nvidia.com/gpu"], "a100-80gb");
        assert!(req.borrowing);
        assert_eq!(req.params, Value::Null);

        let req: AutoscaleInput = serde_json::from_value(json!({"flavors": [
            {"name": "h100", "minNodes": 1, "maxNodes": 8, "pendingNodes": 2.5, "targetUtilization": 80}
        ]}))
        .unwrap();
        assert_eq!(req.flavors[0].max_nodes, 8);
        assert_eq!(req.flavors[0].pending_nodes, 2.5);

        let req: FlavorInput =
            serde_json::from_value(json!({"candidates": ["a100", "h100"]})).unwrap();
        assert_eq!(req.candidates, ["a100", "h100"]);

        let req: PlacementInput = serde_json::from_value(json!({
            "podSet": "worker",
            "pod": {"requests": {"example.com/gpu-milli": 500}},
            "nodes": [{"index": 3, "name": "gpu-3", "free": {"cpu": 12.5},
                       "devices": [{"resource": "example.com/gpu-milli", "perCard": 1000, "cards": [1000, 250]}]}],
            "typical": [{"requests": {"cpu": 4}, "share": 0.75}]
        }))
        .unwrap();
        assert_eq!(req.pod_set, "worker");
        assert_eq!(req.pod.requests["example.com/gpu-milli"], 500.0);
        assert_eq!(req.nodes[0].index, 3);
        assert_eq!(req.nodes[0].devices[0].per_card, 1000.0);
        assert_eq!(req.nodes[0].devices[0].cards, [1000.0, 250.0]);
        assert_eq!(req.typical[0].share, 0.75);
        assert_eq!(req.workload.priority_weight, 1.0);

        let out: PlacementOutput = serde_json::from_value(json!({"scores": [1, 2]})).unwrap();
        assert_eq!(out.cards, None);
        let out: PlacementOutput =
            serde_json::from_value(json!({"scores": [1], "cards": [null]})).unwrap();
        assert_eq!(out.cards, Some(vec![None]));
    }
}
