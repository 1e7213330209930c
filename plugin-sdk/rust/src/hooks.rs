//! Request and response of each hook (ABI.md "Requests and responses").
//! Requests are lenient like the views; responses serialize exactly the
//! documented shape.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::views::{ClusterQueue, Cohort, Flavor, Queue, Tenant, Workload};

/// `admission`: may this workload be admitted with these flavors now?
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AdmissionRequest {
    pub workload: Workload,
    pub queue: Queue,
    pub cluster_queue: ClusterQueue,
    pub tenant: Tenant,
    pub cohort: Option<Cohort>,
    /// The assignment under consideration: `{podSet: {resource: flavor}}`.
    pub flavors: BTreeMap<String, BTreeMap<String, String>>,
    /// Whether the assignment borrows from the cohort.
    pub borrowing: bool,
    pub now: f64,
    /// The policy's `config` object (`null` when it has none).
    pub params: Value,
}

/// The `admission` verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AdmissionResponse {
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether a denied workload may be retried later; the host takes
    /// `None` as `true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

impl AdmissionResponse {
    /// Admit.
    pub fn allow() -> Self {
        AdmissionResponse {
            allowed: true,
            ..Self::default()
        }
    }

    /// Deny for now; the workload is retried later.
    pub fn deny(reason: impl Into<String>) -> Self {
        AdmissionResponse {
            allowed: false,
            reason: Some(reason.into()),
            retryable: None,
        }
    }

    /// Deny for good: retrying cannot help (e.g. the request exceeds a cap).
    pub fn deny_permanently(reason: impl Into<String>) -> Self {
        AdmissionResponse {
            retryable: Some(false),
            ..Self::deny(reason)
        }
    }
}

/// `weight`: score a batch of workloads.
///
/// `W` is how a workload is decoded: the whole [`Workload`] by default, or a
/// plugin's own smaller type holding just the fields it reads, which with
/// `export_weight_fields!` makes big batches cheap to decode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    default,
    rename_all = "camelCase",
    bound(deserialize = "W: Deserialize<'de> + Default")
)]
pub struct WeightRequest<W = Workload> {
    pub workloads: Vec<W>,
    /// LocalQueues by `"namespace/name"`.
    pub queues: BTreeMap<String, Queue>,
    /// ClusterQueues by name.
    pub cluster_queues: BTreeMap<String, ClusterQueue>,
    /// Tenants by name (the namespace).
    pub tenants: BTreeMap<String, Tenant>,
    pub now: f64,
    pub params: Value,
}

/// One finite score per workload of the request, in its order; higher goes
/// first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WeightResponse {
    pub scores: Vec<f64>,
}

/// `fairShare`: weigh the ClusterQueues.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FairShareRequest {
    pub cluster_queues: Vec<ClusterQueue>,
    pub now: f64,
    pub params: Value,
}

/// One weight (≥ 0) per ClusterQueue of the request, in its order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FairShareResponse {
    pub weights: Vec<f64>,
}

/// `autoscale`: size the node pools.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AutoscaleRequest {
    pub flavors: Vec<Flavor>,
    pub now: f64,
    pub params: Value,
}

/// Desired nodes per flavor of the request, in its order; the host clamps
/// each to `[minNodes, maxNodes]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AutoscaleResponse {
    pub nodes: Vec<u64>,
}

/// `flavor`: order the candidate flavors for a workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FlavorRequest {
    pub workload: Workload,
    pub queue: Queue,
    pub cluster_queue: ClusterQueue,
    pub tenant: Tenant,
    /// Flavor names.
    pub candidates: Vec<String>,
    pub now: f64,
    pub params: Value,
}

/// Preferred order: a subset of the request's `candidates`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FlavorResponse {
    pub flavors: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn admission_response_omits_unset_optionals() {
        assert_eq!(
            serde_json::to_value(AdmissionResponse::allow()).unwrap(),
            json!({"allowed": true})
        );
        assert_eq!(
            serde_json::to_value(AdmissionResponse::deny_permanently("too big")).unwrap(),
            json!({"allowed": false, "reason": "too big", "retryable": false})
        );
    }

    #[test]
    fn requests_use_the_documented_field_names() {
        let req: WeightRequest = serde_json::from_value(json!({
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
        assert_eq!(req.tenants["research"].labels["tier"], "gold");
        assert_eq!(req.now, 42.0);
        assert_eq!(req.params, json!({"k": 1}));

        let req: AdmissionRequest = serde_json::from_value(json!({
            "flavors": {"worker": {"nvidia.com/gpu": "a100-80gb"}},
            "borrowing": true,
            "cohort": null
        }))
        .unwrap();
        assert_eq!(req.flavors["worker"]["nvidia.com/gpu"], "a100-80gb");
        assert!(req.borrowing);
        assert_eq!(req.params, Value::Null);

        let req: FairShareRequest =
            serde_json::from_value(json!({"clusterQueues": [{"name": "a"}]})).unwrap();
        assert_eq!(req.cluster_queues[0].name, "a");

        let req: AutoscaleRequest = serde_json::from_value(
            json!({"flavors": [{"name": "h100", "minNodes": 1, "maxNodes": 8, "pendingNodes": 2, "targetUtilization": 80}]}),
        )
        .unwrap();
        assert_eq!(req.flavors[0].max_nodes, 8);
        assert_eq!(req.flavors[0].target_utilization, 80.0);

        let req: FlavorRequest =
            serde_json::from_value(json!({"candidates": ["a100", "h100"]})).unwrap();
        assert_eq!(req.candidates, ["a100", "h100"]);
    }
}
