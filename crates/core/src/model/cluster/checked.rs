//! The checked configuration the scheduler reads: resources, flavors, the
//! cohort tree, ClusterQueues, LocalQueues, priority classes and
//! namespaces, with names resolved to dense ids ([`FlavorId`],
//! [`ClusterQueueId`], …), quantities exact and quotas laid out by
//! [`FlavorResource`]; and the lookups the core uses (`cluster_queue_id`,
//! `flavor_resource`/`split`, `root_cohort`, `fair_sharing_for`,
//! `namespace_allowed`). It never parses or checks input: only
//! [`ClusterBuilder`](super::ClusterBuilder) makes a [`Cluster`], so every
//! value here is already valid. No I/O. Read by the scheduler core, the
//! policy views and the simulator.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::model::api::{
    FlavorPreference, QueueingStrategy, ReclaimWithinCohort, SchedulingAlgorithm, StopPolicy,
    WithinClusterQueue,
};
use crate::model::{selector, Amount, Millis};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub $inner);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}
id_type!(/// A resource name (`cpu`, `nvidia.com/gpu`), interned.
    ResourceId(u16));
id_type!(/// A ResourceFlavor.
    FlavorId(u16));
id_type!(/// A (flavor, resource) pair, dense: `flavor * resources + resource`.
    FlavorResource(u32));
id_type!(/// A ClusterQueue.
    ClusterQueueId(u32));
id_type!(/// A cohort (explicit or implied by a ClusterQueue's `cohort`).
    CohortId(u32));
id_type!(/// A LocalQueue.
    LocalQueueId(u32));

/// Quota of one (flavor, resource) in a ClusterQueue or Cohort.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quota {
    pub nominal: Amount,
    pub borrowing_limit: Option<Amount>,
    pub lending_limit: Option<Amount>,
}

#[derive(Clone, Debug)]
pub struct Flavor {
    pub name: String,
    pub node_labels: BTreeMap<String, String>,
    pub node_taints: Vec<Taint>,
    pub tolerations: Vec<Toleration>,
}

/// Resources assigned together, and the flavors to try in order.
#[derive(Clone, Debug)]
pub struct Group {
    pub resources: Vec<ResourceId>,
    pub flavors: Vec<FlavorId>,
}

/// What to do when a flavor allows borrowing / needs preemption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fungibility {
    MayStopSearch,
    TryNextFlavor,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub backoff: Millis,
}

impl RetryPolicy {
    /// What an empty `retryPolicy: {}` means; also bounds `resourceReclaim`
    /// evictions of a ClusterQueue without a retryPolicy.
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        max_retries: 3,
        backoff: Millis(60_000),
    };
}

/// Kueue's `waitForPodsReady`, checked (`api::WaitForPodsReady`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodsReadyPolicy {
    pub timeout: Millis,
    /// `recoveryTimeout`: how long an admitted workload whose pods were
    /// all ready may have them not all ready before it is evicted as at
    /// the timeout; `None`: without end.
    pub recovery_timeout: Option<Millis>,
    pub block_admission: bool,
    /// Requeued at its old place (`timestamp: Creation`) rather than from its eviction.
    pub requeue_at_creation: bool,
    pub backoff_limit: Option<u32>,
    pub backoff_base: Millis,
    pub backoff_max: Millis,
}

impl PodsReadyPolicy {
    /// The policy `spec` asks for (`None`: off), or what is wrong with it,
    /// naming the field.
    pub fn from_spec(
        spec: &crate::model::api::WaitForPodsReady,
    ) -> Result<Option<PodsReadyPolicy>, String> {
        if spec.enable == Some(false) {
            return Ok(None);
        }
        let timeout = match &spec.timeout {
            Some(text) => {
                Millis::parse(text).map_err(|e| format!("waitForPodsReady.timeout: {e}"))?
            }
            None => Millis::from_secs(300),
        };
        if timeout <= Millis::ZERO {
            return Err(format!(
                "waitForPodsReady.timeout: {} must be more than 0s",
                spec.timeout.as_deref().unwrap_or_default()
            ));
        }
        let recovery_timeout = match &spec.recovery_timeout {
            Some(text) => {
                let recovery = Millis::parse(text)
                    .map_err(|e| format!("waitForPodsReady.recoveryTimeout: {e}"))?;
                if recovery < Millis::ZERO {
                    return Err(format!(
                        "waitForPodsReady.recoveryTimeout: {text} is negative"
                    ));
                }
                // Kueue's rule: zero is the same as not set.
                (recovery > Millis::ZERO).then_some(recovery)
            }
            None => None,
        };
        let strategy = spec.requeuing_strategy.clone().unwrap_or_default();
        let requeue_at_creation = match strategy.timestamp.as_deref() {
            None | Some("Eviction") => false,
            Some("Creation") => true,
            Some(other) => {
                return Err(format!(
                    "waitForPodsReady.requeuingStrategy.timestamp: `{other}` is neither `Eviction` nor `Creation`"
                ))
            }
        };
        let base = strategy.backoff_base_seconds.unwrap_or(60);
        let max = strategy.backoff_max_seconds.unwrap_or(3600);
        Ok(Some(PodsReadyPolicy {
            timeout,
            recovery_timeout,
            block_admission: spec.block_admission.unwrap_or(false),
            requeue_at_creation,
            backoff_limit: strategy.backoff_limit_count,
            backoff_base: Millis::from_secs(i64::from(base)),
            backoff_max: Millis::from_secs(i64::from(max.max(base))),
        }))
    }

    /// The wait before the `count`-th requeue: the base doubling, at most the maximum.
    pub fn backoff(&self, count: u32) -> Millis {
        let factor = 1i64 << count.saturating_sub(1).min(30);
        self.backoff_base
            .saturating_mul(factor)
            .min(self.backoff_max)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoscalingPolicy {
    pub min_replicas: Option<u32>,
    pub max_replicas: Option<u32>,
    pub target_utilization: f64,
}

#[derive(Clone, Debug)]
pub struct ClusterQueue {
    pub name: String,
    pub cohort: Option<CohortId>,
    pub groups: Vec<Group>,
    /// Indexed by [`FlavorResource`]; `None` where the queue has no quota.
    pub quotas: Vec<Option<Quota>>,
    pub strategy: QueueingStrategy,
    /// `None`: every namespace (docs/design.md §3).
    pub namespace_selector: Option<LabelSelector>,
    pub when_can_borrow: Fungibility,
    pub when_can_preempt: Fungibility,
    /// `flavorFungibility.preference` (default `BorrowingOverPreemption`).
    pub preference: FlavorPreference,
    pub within_cluster_queue: WithinClusterQueue,
    pub reclaim_within_cohort: ReclaimWithinCohort,
    /// `borrowWithinCohort`: `None` when forbidden (absent or `Never`),
    /// else its `maxPriorityThreshold`, if any.
    pub borrow_within_cohort: Option<Option<i32>>,
    pub fair_weight: f64,
    pub stop_policy: StopPolicy,
    /// Weight of the priority in the default weighting policy, for its
    /// workloads that name no priority class (`priorityClass.weight`, else 1).
    pub priority_weight: f64,
    pub algorithm: SchedulingAlgorithm,
    pub adaptive_interval: Option<Millis>,
    /// Half-life of the decayed usage policies see (`adaptiveWeights.usageHalfLife`).
    pub usage_half_life: Millis,
    pub autoscaling: Option<AutoscalingPolicy>,
    pub retry: Option<RetryPolicy>,
    pub reclaim_timeout: Option<Millis>,
}

#[derive(Clone, Debug)]
pub struct Cohort {
    pub name: String,
    pub parent: Option<CohortId>,
    /// The cohort's own quota, lent to its members (indexed by FlavorResource).
    pub quotas: Vec<Option<Quota>>,
    pub fair_weight: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ResourceBounds {
    pub resource: String,
    pub min: Option<Amount>,
    pub max: Option<Amount>,
    pub default: Option<Amount>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HistoryWindow {
    Count(u32),
    Duration(Millis),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimation {
    pub window: HistoryWindow,
    pub confidence: f64,
}

#[derive(Clone, Debug)]
pub struct LocalQueue {
    pub namespace: String,
    pub name: String,
    pub cluster_queue: ClusterQueueId,
    pub priority: Option<i32>,
    /// Its `priorityClass.weight`: multiplies the priority of its workloads
    /// that name no priority class, in place of the ClusterQueue's.
    pub priority_weight: Option<f64>,
    pub resource_bounds: Vec<ResourceBounds>,
    pub estimation: Option<Estimation>,
    pub stop_policy: StopPolicy,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PriorityClass {
    pub value: i32,
    pub weight: f64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Namespace {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// The whole checked configuration.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    pub resources: Vec<String>,
    pub flavors: Vec<Flavor>,
    pub cohorts: Vec<Cohort>,
    pub cluster_queues: Vec<ClusterQueue>,
    pub local_queues: Vec<LocalQueue>,
    pub priority_classes: BTreeMap<String, PriorityClass>,
    pub namespaces: BTreeMap<String, Namespace>,
    /// Fair sharing on for every cohort tree (Simulation/operator flag).
    pub fair_sharing_everywhere: bool,
    /// All-or-nothing admission (Simulation's `waitForPodsReady`, the
    /// operator's `--wait-for-pods-ready`); `None`: off, as in Kueue.
    pub pods_ready: Option<PodsReadyPolicy>,
    /// The queue objects left out as invalid or depending on one
    /// ([`super::ClusterBuilder::build_lenient`]); empty from `build`.
    pub inactive: Vec<super::Inactive>,
    pub(super) resource_ids: BTreeMap<String, ResourceId>,
    pub(super) flavor_ids: BTreeMap<String, FlavorId>,
    pub(super) cluster_queue_ids: BTreeMap<String, ClusterQueueId>,
    pub(super) local_queue_ids: BTreeMap<(String, String), LocalQueueId>,
}

impl Cluster {
    pub fn resource_id(&self, name: &str) -> Option<ResourceId> {
        self.resource_ids.get(name).copied()
    }
    pub fn flavor_id(&self, name: &str) -> Option<FlavorId> {
        self.flavor_ids.get(name).copied()
    }
    pub fn cluster_queue_id(&self, name: &str) -> Option<ClusterQueueId> {
        self.cluster_queue_ids.get(name).copied()
    }
    pub fn local_queue_id(&self, namespace: &str, name: &str) -> Option<LocalQueueId> {
        self.local_queue_ids
            .get(&(namespace.to_string(), name.to_string()))
            .copied()
    }
    pub fn resource_name(&self, id: ResourceId) -> &str {
        &self.resources[id.index()]
    }
    pub fn flavor_resource_count(&self) -> usize {
        self.flavors.len() * self.resources.len()
    }
    pub fn flavor_resource(&self, flavor: FlavorId, resource: ResourceId) -> FlavorResource {
        FlavorResource(flavor.0 as u32 * self.resources.len() as u32 + resource.0 as u32)
    }
    pub fn split(&self, fr: FlavorResource) -> (FlavorId, ResourceId) {
        let n = self.resources.len() as u32;
        (FlavorId((fr.0 / n) as u16), ResourceId((fr.0 % n) as u16))
    }
    pub fn cluster_queue(&self, id: ClusterQueueId) -> &ClusterQueue {
        &self.cluster_queues[id.index()]
    }
    /// The top of the cohort tree `cohort` belongs to.
    pub fn root_cohort(&self, mut cohort: CohortId) -> CohortId {
        while let Some(parent) = self.cohorts[cohort.index()].parent {
            cohort = parent;
        }
        cohort
    }
    /// Is fair sharing on for the tree holding this ClusterQueue?
    pub fn fair_sharing_for(&self, cq: ClusterQueueId) -> bool {
        if self.fair_sharing_everywhere {
            return true;
        }
        let uses = |q: &ClusterQueue| {
            matches!(
                q.algorithm,
                SchedulingAlgorithm::FairSharing | SchedulingAlgorithm::Policy
            )
        };
        match self.cluster_queue(cq).cohort {
            None => uses(self.cluster_queue(cq)),
            Some(cohort) => {
                let root = self.root_cohort(cohort);
                self.cluster_queues
                    .iter()
                    .any(|q| q.cohort.is_some_and(|c| self.root_cohort(c) == root) && uses(q))
            }
        }
    }
    /// Does the ClusterQueue admit workloads from this namespace?
    pub fn namespace_allowed(&self, cq: ClusterQueueId, namespace: &str) -> bool {
        match &self.cluster_queue(cq).namespace_selector {
            None => true,
            Some(selector) => {
                let empty = BTreeMap::new();
                let labels = self
                    .namespaces
                    .get(namespace)
                    .map_or(&empty, |ns| &ns.labels);
                let mut with_name = labels.clone();
                with_name.insert("kubernetes.io/metadata.name".into(), namespace.to_string());
                selector::label_selector_matches(selector, &with_name)
            }
        }
    }
}
