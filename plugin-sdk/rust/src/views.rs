//! The typed views every hook sees (ABI.md "Views"), as the host sends them:
//! camelCase JSON, quantities as numbers in base units (`cpu` in cores,
//! `memory` in bytes, devices in units). Every struct takes its default for a
//! missing field and ignores unknown ones, so newer hosts don't break older
//! plugins.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Amounts per resource name (`cpu`, `memory`, `nvidia.com/gpu`, ...).
pub type Quantities = BTreeMap<String, f64>;

/// A workload: one job waiting for (or holding) quota.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Workload {
    pub name: String,
    pub namespace: String,
    /// The job kind, e.g. `PyTorchJob`.
    pub kind: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub priority: i64,
    pub priority_class: Option<String>,
    pub priority_weight: f64,
    /// The LocalQueue's name (in the workload's namespace).
    pub queue_name: String,
    pub cluster_queue: String,
    pub pod_sets: Vec<PodSet>,
    /// Totals over all pod sets, per resource.
    pub requests: Quantities,
    /// Total `nvidia.com/gpu` of the workload.
    pub gpus: f64,
    pub age_seconds: f64,
    pub retries: u64,
    pub evictions: u64,
    /// From the LocalQueue's `resourceEstimation`; `None` when that is off
    /// or there is no history yet.
    pub estimate: Option<Estimate>,
    /// Flavors it is admitted on; for `admission`, the ones it would be admitted on.
    pub flavors: Vec<String>,
}

/// One group of identical pods of a workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSet {
    pub name: String,
    pub count: u64,
    /// Partial admission: the fewest pods the workload may start with.
    pub min_count: Option<u64>,
    /// Requests of one pod.
    pub requests: Quantities,
}

/// The runtime estimate of a workload, from its LocalQueue's history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Estimate {
    pub runtime_seconds: f64,
    /// How many finished workloads the estimate is drawn from.
    pub samples: u64,
}

/// A LocalQueue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Queue {
    pub name: String,
    pub namespace: String,
    /// The LocalQueue's `priority`, if it sets one.
    pub priority: Option<i64>,
    pub cluster_queue: String,
}

/// A ClusterQueue with its quota, usage and fair-sharing state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterQueue {
    pub name: String,
    pub cohort: Option<String>,
    /// Fair-sharing weight.
    pub weight: f64,
    /// Dominant resource share, per mille.
    pub share: f64,
    /// GPU-seconds with exponential decay.
    pub decayed_usage: f64,
    /// `{flavor: {resource: amount}}`.
    pub nominal: BTreeMap<String, Quantities>,
    /// `{flavor: {resource: amount}}`.
    pub usage: BTreeMap<String, Quantities>,
    pub priority_weight: f64,
    pub admitted: u64,
    pub pending: u64,
}

/// A tenant: a namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Tenant {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// A cohort of ClusterQueues.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Cohort {
    pub name: String,
    pub parent: Option<String>,
}

/// A ResourceFlavor's node pool, as the autoscale hook sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Flavor {
    pub name: String,
    pub nodes: u64,
    pub min_nodes: u64,
    pub max_nodes: u64,
    /// 0–1.
    pub utilization: f64,
    pub pending_nodes: u64,
    /// Percent.
    pub target_utilization: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_reads_camel_case_and_defaults_missing_fields() {
        let w: Workload = serde_json::from_str(
            r#"{"name": "train", "namespace": "research", "queueName": "gpu",
                "podSets": [{"name": "worker", "count": 4, "minCount": 2,
                             "requests": {"nvidia.com/gpu": 8}}],
                "ageSeconds": 12.5, "estimate": {"runtimeSeconds": 600, "samples": 7},
                "someFutureField": {"nested": true}}"#,
        )
        .unwrap();
        assert_eq!(w.queue_name, "gpu");
        assert_eq!(w.pod_sets[0].min_count, Some(2));
        assert_eq!(w.pod_sets[0].requests["nvidia.com/gpu"], 8.0);
        assert_eq!(w.age_seconds, 12.5);
        assert_eq!(
            w.estimate,
            Some(Estimate {
                runtime_seconds: 600.0,
                samples: 7
            })
        );
        assert_eq!(w.kind, "");
        assert_eq!(w.gpus, 0.0);
        assert!(w.labels.is_empty());
    }

    #[test]
    fn null_estimate_and_cohort_are_none() {
        let w: Workload = serde_json::from_str(r#"{"estimate": null}"#).unwrap();
        assert_eq!(w.estimate, None);
        let cq: ClusterQueue = serde_json::from_str(r#"{"name": "a", "cohort": null}"#).unwrap();
        assert_eq!(cq.cohort, None);
    }
}
