//! The views every hook sees (plugin-sdk/ABI.md "Views"): camelCase JSON,
//! quantities as numbers in base units. Every field has a default — what a
//! request that leaves it out means — and `Default` is exactly a decoded
//! `{}`; unknown members are ignored. Data only: nothing here builds a view
//! (the host's `arbiter_policy::view::build` does).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Quantities as numbers in base units (`cpu` in cores, `memory` in bytes).
pub type Quantities = BTreeMap<String, f64>;

/// A pod set of the workload: `count` pods of one shape.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(description = ""))]
pub struct PodSetView {
    /// The pod set's name (`worker`, `launcher`, …).
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub name: String,
    /// How many pods it runs.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub count: u32,
    /// The fewest pods it may run with (partial admission), if it may run with fewer.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u32>,
    /// Per pod.
    #[serde(default)]
    pub requests: Quantities,
    /// The flavors of the ClusterQueue, in its order, this pod set may use:
    /// those whose node labels its node selector and required node
    /// affinity allow and whose taints it (or the flavor) tolerates.
    #[serde(default)]
    pub eligible_flavors: Vec<String>,
}

/// A runtime estimate from the LocalQueue's `resourceEstimation`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EstimateView {
    /// The configured quantile of the runtimes of the queue's finished workloads.
    #[serde(default)]
    pub runtime_seconds: f64,
    /// How many finished workloads the estimate rests on.
    #[serde(default)]
    pub samples: u32,
}

/// A workload: one job waiting or admitted, as every workload hook sees it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(description = ""))]
pub struct WorkloadView {
    /// The workload's name.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub name: String,
    /// Its namespace: the tenant.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub namespace: String,
    /// The kind of job it runs (`Job`, `JobSet`, `PyTorchJob`, …).
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub kind: String,
    /// The job's labels.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The job's annotations.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Its priority value.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub priority: i64,
    /// The name of its priority class, if it has one.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub priority_class: Option<String>,
    /// The weight multiplying priority (priority class, else LocalQueue `priorityClass.weight`, else ClusterQueue `priorityClass.weight`, else 1).
    #[serde(default = "one")]
    pub priority_weight: f64,
    /// The LocalQueue it was submitted to.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub queue_name: String,
    /// The ClusterQueue that LocalQueue feeds.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub cluster_queue: String,
    /// Its pod sets, in order.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub pod_sets: Vec<PodSetView>,
    /// Totals over all pods, per resource.
    #[serde(default)]
    pub requests: Quantities,
    /// Total `nvidia.com/gpu`.
    #[serde(default)]
    pub gpus: i64,
    /// Seconds since it was queued.
    #[serde(default)]
    pub age_seconds: f64,
    /// How many times it was tried again after a retryable denial or failure.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub retries: u32,
    /// How many times it was evicted (preempted) after admission.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub evictions: u32,
    /// The runtime estimate of its LocalQueue, if one is configured and known.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub estimate: Option<EstimateView>,
    /// Flavors it is admitted on — for `admission`, the ones it would be
    /// admitted on (distinct, in pod-set order); empty otherwise.
    #[serde(default)]
    pub flavors: Vec<String>,
    /// The flavors of its ClusterQueue, in the queue's order, that some
    /// pod set of it may use (each pod set's `eligibleFlavors` together):
    /// what a flavor policy may choose among without naming flavors.
    #[serde(default)]
    pub eligible_flavors: Vec<String>,
}

fn one() -> f64 {
    1.0
}

/// What a request without any of its fields decodes to (`priorityWeight` 1).
impl Default for WorkloadView {
    fn default() -> Self {
        WorkloadView {
            name: String::new(),
            namespace: String::new(),
            kind: String::new(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            priority: 0,
            priority_class: None,
            priority_weight: one(),
            queue_name: String::new(),
            cluster_queue: String::new(),
            pod_sets: Vec::new(),
            requests: Quantities::new(),
            gpus: 0,
            age_seconds: 0.0,
            retries: 0,
            evictions: 0,
            estimate: None,
            flavors: Vec::new(),
            eligible_flavors: Vec::new(),
        }
    }
}

/// The LocalQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct QueueView {
    /// The LocalQueue's name.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub name: String,
    /// Its namespace.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub namespace: String,
    /// The priority it gives its workloads, if it sets one.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub priority: Option<i64>,
    /// The ClusterQueue it feeds.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub cluster_queue: String,
}

/// A ClusterQueue: its fair-sharing state, quota and usage.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(description = ""))]
pub struct ClusterQueueView {
    /// The ClusterQueue's name.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub name: String,
    /// The cohort it borrows and lends in, if any.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub cohort: Option<String>,
    /// Fair-sharing weight in force.
    #[serde(default = "one")]
    pub weight: f64,
    /// Weighted dominant resource share, as Kueue's `weightedShare`: what the
    /// queue borrows × 1000 ÷ what its cohort could lend it, ÷ its weight.
    #[serde(default)]
    pub share: f64,
    /// `nvidia.com/gpu`-seconds used, decayed with `adaptiveWeights.usageHalfLife`.
    #[serde(default)]
    pub decayed_usage: f64,
    /// Nominal quota: flavor → resource → amount.
    #[serde(default)]
    pub nominal: BTreeMap<String, Quantities>,
    /// Admitted usage: flavor → resource → amount.
    #[serde(default)]
    pub usage: BTreeMap<String, Quantities>,
    /// The weight multiplying its workloads' priority (`priorityClass.weight`, else 1).
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default = "one")]
    pub priority_weight: f64,
    /// Workloads admitted now.
    #[serde(default)]
    pub admitted: u32,
    /// Workloads waiting now.
    #[serde(default)]
    pub pending: u32,
    /// The flavors it lists, in its order (resource group by resource group).
    #[serde(default)]
    pub flavors: Vec<String>,
}

/// What a request without any of its fields decodes to (`weight` and
/// `priorityWeight` 1).
impl Default for ClusterQueueView {
    fn default() -> Self {
        ClusterQueueView {
            name: String::new(),
            cohort: None,
            weight: one(),
            share: 0.0,
            decayed_usage: 0.0,
            nominal: BTreeMap::new(),
            usage: BTreeMap::new(),
            priority_weight: one(),
            admitted: 0,
            pending: 0,
            flavors: Vec::new(),
        }
    }
}

/// The tenant is the workload's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TenantView {
    /// The namespace's name.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub name: String,
    /// The namespace's labels.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The namespace's annotations.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// The cohort of a ClusterQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(description = ""))]
pub struct CohortView {
    /// The cohort's name.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub name: String,
    /// Its parent cohort, if it has one.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub parent: Option<String>,
}

/// A flavor with node pools, as the autoscale hook sees it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FlavorView {
    /// The flavor's name.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub name: String,
    /// Nodes it has now.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub nodes: u32,
    /// The fewest nodes its pool may have.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub min_nodes: u32,
    /// The most nodes its pool may have.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub max_nodes: u32,
    /// Fraction (0–1) of the nodes' dominant resource in use.
    #[serde(default)]
    pub utilization: f64,
    /// Nodes' worth of requests waiting for capacity.
    #[serde(default)]
    pub pending_nodes: f64,
    /// Target utilisation in percent.
    #[serde(default)]
    pub target_utilization: f64,
}

/// The pod the placement hook places: what it asks for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodView {
    /// Per pod.
    #[serde(default)]
    pub requests: Quantities,
}

/// A resource a node holds on separate cards (a Simulation node pool's
/// `devices`), with what each card has free.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeviceView {
    /// The resource its cards hold (`example.com/gpu-milli`).
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub resource: String,
    /// What one card holds.
    #[serde(default)]
    pub per_card: f64,
    /// Free per card, in card order (a card's index is its place here).
    #[serde(default)]
    pub cards: Vec<f64>,
}

/// A node the pod fits on, as the placement hook sees it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    /// The node's index among its flavor's nodes.
    #[serde(default)]
    pub index: u32,
    /// `<flavor>-<index>`.
    #[serde(default)]
    pub name: String,
    /// The flavor whose nodes it is among (with placement across flavors,
    /// the candidates may serve different ones).
    #[serde(default)]
    pub flavor: String,
    /// Free per resource the node limits (resources it does not limit are absent).
    #[serde(default)]
    pub free: Quantities,
    /// What the node can hold, per resource.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub allocatable: Quantities,
    /// Its resources held on separate cards.
    #[cfg_attr(feature = "schema", schemars(description = ""))]
    #[serde(default)]
    pub devices: Vec<DeviceView>,
    /// Where the node sits in its flavor's Topology: its topology labels
    /// (e.g. `cloud.provider.com/topology-rack`), as its node pool gives
    /// them in a Simulation (`nodePools[].labels`) or the Node carries
    /// them in a cluster; empty when the flavor names no Topology. A
    /// placement policy ranks topology domains through them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// A shape of the pods recently submitted to the workload's ClusterQueue,
/// and its share of them (FGD's "typical tasks").
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TypicalPodView {
    /// Per pod.
    #[serde(default)]
    pub requests: Quantities,
    /// The flavors these pods may run on (their node selector, affinity and
    /// tolerations); empty: any the ClusterQueue lists.
    #[serde(default)]
    pub flavors: Vec<String>,
    /// Fraction (0–1) of the typical pods with this shape; the shares sum to 1.
    #[serde(default)]
    pub share: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_an_empty_object_decoded() {
        fn check<T: serde::de::DeserializeOwned + Default + PartialEq + std::fmt::Debug>() {
            let decoded: T = serde_json::from_str("{}").unwrap();
            assert_eq!(decoded, T::default(), "{}", std::any::type_name::<T>());
        }
        check::<PodSetView>();
        check::<EstimateView>();
        check::<WorkloadView>();
        check::<QueueView>();
        check::<ClusterQueueView>();
        check::<TenantView>();
        check::<CohortView>();
        check::<FlavorView>();
        check::<PodView>();
        check::<DeviceView>();
        check::<NodeView>();
        check::<TypicalPodView>();
        assert_eq!(WorkloadView::default().priority_weight, 1.0);
        assert_eq!(ClusterQueueView::default().weight, 1.0);
        assert_eq!(ClusterQueueView::default().priority_weight, 1.0);
    }

    #[test]
    fn workload_reads_camel_case_and_ignores_unknown_members() {
        let w: WorkloadView = serde_json::from_str(
            r#"{"name": "train", "namespace": "research", "queueName": "gpu",
                "podSets": [{"name": "worker", "count": 4, "minCount": 2,
                             "requests": {"nvidia.com/gpu": 8}}],
                "gpus": 32, "ageSeconds": 12.5,
                "estimate": {"runtimeSeconds": 600, "samples": 7},
                "someFutureField": {"nested": true}}"#,
        )
        .unwrap();
        assert_eq!(w.queue_name, "gpu");
        assert_eq!(w.pod_sets[0].min_count, Some(2));
        assert_eq!(w.pod_sets[0].requests["nvidia.com/gpu"], 8.0);
        assert_eq!(w.gpus, 32);
        assert_eq!(w.age_seconds, 12.5);
        assert_eq!(
            w.estimate,
            Some(EstimateView {
                runtime_seconds: 600.0,
                samples: 7
            })
        );
        assert_eq!(w.priority_weight, 1.0);
        let w: WorkloadView = serde_json::from_str(r#"{"estimate": null}"#).unwrap();
        assert_eq!(w.estimate, None);
        let flavor: FlavorView = serde_json::from_str(r#"{"pendingNodes": 1.5}"#).unwrap();
        assert_eq!(flavor.pending_nodes, 1.5);
    }
}
