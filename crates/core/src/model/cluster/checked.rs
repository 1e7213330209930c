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
            /// Its index, in the vectors this id indexes.
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
id_type!(/// A Topology.
    TopologyId(u16));

/// Quota of one (flavor, resource) in a ClusterQueue or Cohort.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quota {
    /// `nominalQuota`.
    pub nominal: Amount,
    /// `borrowingLimit`; `None`: no limit.
    pub borrowing_limit: Option<Amount>,
    /// `lendingLimit`; `None`: no limit.
    pub lending_limit: Option<Amount>,
}

/// A ResourceFlavor, checked.
#[derive(Clone, Debug)]
pub struct Flavor {
    /// Its name.
    pub name: String,
    /// `nodeLabels`: the labels of its nodes.
    pub node_labels: BTreeMap<String, String>,
    /// `nodeTaints`: the taints of its nodes.
    pub node_taints: Vec<Taint>,
    /// `tolerations` added to the pods admitted on it.
    pub tolerations: Vec<Toleration>,
    /// `topologyName`: the Topology its nodes are arranged in.
    pub topology: Option<TopologyId>,
}

/// A Topology, checked: its levels' node labels, widest first, each once,
/// never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Its name.
    pub name: String,
    /// The node label of each level, widest first.
    pub levels: Vec<String>,
}

impl Topology {
    /// The index of the level whose node label is `label`.
    pub fn level(&self, label: &str) -> Option<usize> {
        self.levels.iter().position(|l| l == label)
    }
}

/// Resources assigned together, and the flavors to try in order.
#[derive(Clone, Debug)]
pub struct Group {
    /// The resources of the group.
    pub resources: Vec<ResourceId>,
    /// Its flavors, in the order to try them.
    pub flavors: Vec<FlavorId>,
}

/// What to do when a flavor allows borrowing / needs preemption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fungibility {
    /// `MayStopSearch`: take the flavor.
    MayStopSearch,
    /// `TryNextFlavor`: try the next flavor first.
    TryNextFlavor,
}

/// A ClusterQueue's `retryPolicy`, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// `maxRetries`: evictions it retries before deactivating the workload.
    pub max_retries: u32,
    /// Backoff before a retry.
    pub backoff: Millis,
}

impl RetryPolicy {
    /// What an empty `retryPolicy: {}` means; also bounds `resourceReclaim`
    /// evictions of a ClusterQueue without a retryPolicy.
    pub(crate) const DEFAULT: RetryPolicy = RetryPolicy {
        max_retries: 3,
        backoff: Millis(60_000),
    };
}

/// Kueue's `waitForPodsReady`, checked (`api::WaitForPodsReady`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodsReadyPolicy {
    /// `timeout`: how long after its admission its pods may take to be all ready.
    pub timeout: Millis,
    /// `recoveryTimeout`: how long an admitted workload whose pods were
    /// all ready may have them not all ready before it is evicted as at
    /// the timeout; `None`: without end.
    pub(crate) recovery_timeout: Option<Millis>,
    pub(crate) block_admission: bool,
    /// Requeued at its old place (`timestamp: Creation`) rather than from its eviction.
    pub(crate) requeue_at_creation: bool,
    pub(crate) backoff_limit: Option<u32>,
    pub(crate) backoff_base: Millis,
    pub(crate) backoff_max: Millis,
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

/// A ClusterQueue's `autoscaling`, checked (only when enabled).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoscalingPolicy {
    /// `minReplicas`: fewest nodes per flavor, if set.
    pub min_replicas: Option<u32>,
    /// `maxReplicas`: most nodes per flavor, if set.
    pub max_replicas: Option<u32>,
    /// `targetUtilization`, in percent.
    pub target_utilization: f64,
}

/// A ClusterQueue, checked.
#[derive(Clone, Debug)]
pub struct ClusterQueue {
    /// Its name.
    pub name: String,
    /// Its cohort, if any.
    pub cohort: Option<CohortId>,
    /// Its resource groups.
    pub groups: Vec<Group>,
    /// Indexed by [`FlavorResource`]; `None` where the queue has no quota.
    pub quotas: Vec<Option<Quota>>,
    /// `queueingStrategy`.
    pub strategy: QueueingStrategy,
    /// `None`: every namespace (docs/design.md §3).
    pub namespace_selector: Option<LabelSelector>,
    /// `flavorFungibility.whenCanBorrow`.
    pub when_can_borrow: Fungibility,
    /// `flavorFungibility.whenCanPreempt`.
    pub when_can_preempt: Fungibility,
    /// `flavorFungibility.preference` (default `BorrowingOverPreemption`).
    pub preference: FlavorPreference,
    /// `preemption.withinClusterQueue`.
    pub within_cluster_queue: WithinClusterQueue,
    pub(crate) reclaim_within_cohort: ReclaimWithinCohort,
    /// `borrowWithinCohort`: `None` when forbidden (absent or `Never`),
    /// else its `maxPriorityThreshold`, if any.
    pub(crate) borrow_within_cohort: Option<Option<i32>>,
    /// `fairSharing.weight`.
    pub fair_weight: f64,
    /// `stopPolicy`.
    pub stop_policy: StopPolicy,
    /// Weight of the priority in the default weighting policy, for its
    /// workloads that name no priority class (`priorityClass.weight`, else 1).
    pub priority_weight: f64,
    /// `scheduling.algorithm`.
    pub algorithm: SchedulingAlgorithm,
    /// How often adaptive weights are adjusted; `None`: they are off.
    pub adaptive_interval: Option<Millis>,
    /// Half-life of the decayed usage policies see (`adaptiveWeights.usageHalfLife`).
    pub(crate) usage_half_life: Millis,
    /// `autoscaling`, when enabled.
    pub autoscaling: Option<AutoscalingPolicy>,
    /// `retryPolicy`, if any.
    pub retry: Option<RetryPolicy>,
    /// `resourceReclaim.reclaimTimeout`, if any.
    pub reclaim_timeout: Option<Millis>,
}

/// A cohort, checked (explicit, or implied by a ClusterQueue's `cohort`).
#[derive(Clone, Debug)]
pub struct Cohort {
    /// Its name.
    pub name: String,
    /// Its parent cohort, if any.
    pub parent: Option<CohortId>,
    /// The cohort's own quota, lent to its members (indexed by FlavorResource).
    pub quotas: Vec<Option<Quota>>,
    /// `fairSharing.weight`.
    pub fair_weight: f64,
}

/// A LocalQueue's bounds on one resource (`spec.resourceQuotas[i]`).
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceBounds {
    /// The resource's name.
    pub resource: String,
    /// `min`, if any.
    pub min: Option<Amount>,
    /// `max`, if any.
    pub max: Option<Amount>,
    /// `default`, if any.
    pub default: Option<Amount>,
}

/// How much history runtime estimates look at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HistoryWindow {
    /// The last this many runs.
    Count(u32),
    /// The runs that ended within this long.
    Duration(Millis),
}

/// A LocalQueue's `resourceEstimation`, checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimation {
    /// The runs the estimate looks at.
    pub window: HistoryWindow,
    /// The quantile estimated, in (0, 1].
    pub confidence: f64,
}

/// A LocalQueue, checked.
#[derive(Clone, Debug)]
pub struct LocalQueue {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its ClusterQueue.
    pub cluster_queue: ClusterQueueId,
    /// Its `priority`, if set.
    pub priority: Option<i32>,
    /// Its `priorityClass.weight`: multiplies the priority of its workloads
    /// that name no priority class, in place of the ClusterQueue's.
    pub priority_weight: Option<f64>,
    /// `resourceQuotas`: bounds on its jobs' total requests.
    pub resource_bounds: Vec<ResourceBounds>,
    /// `resourceEstimation`, if enabled.
    pub estimation: Option<Estimation>,
    /// `stopPolicy`.
    pub stop_policy: StopPolicy,
}

/// A WorkloadPriorityClass, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct PriorityClass {
    /// Its priority value.
    pub value: i32,
    /// Weight multiplying the priority in the default weighting policy.
    pub weight: f64,
}

/// A namespace's metadata, as queue selectors and policies read it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Namespace {
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
}

/// The whole checked configuration.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    /// Resource names, indexed by [`ResourceId`].
    pub resources: Vec<String>,
    /// Flavors, indexed by [`FlavorId`].
    pub flavors: Vec<Flavor>,
    /// Topologies, indexed by [`TopologyId`].
    pub topologies: Vec<Topology>,
    /// Does the driver read Topology objects (the simulator)? Only then are
    /// `topologyName` and pod sets' topology annotations honoured; a driver
    /// that does not (the operator, for now) ignores both, as before.
    pub topology_aware: bool,
    /// Cohorts, indexed by [`CohortId`].
    pub cohorts: Vec<Cohort>,
    /// ClusterQueues, indexed by [`ClusterQueueId`].
    pub cluster_queues: Vec<ClusterQueue>,
    /// LocalQueues, indexed by [`LocalQueueId`].
    pub local_queues: Vec<LocalQueue>,
    pub(crate) priority_classes: BTreeMap<String, PriorityClass>,
    /// Namespaces known, by name.
    pub namespaces: BTreeMap<String, Namespace>,
    /// Fair sharing on for every cohort tree (Simulation/operator flag).
    pub fair_sharing_everywhere: bool,
    /// All-or-nothing admission (Simulation's `waitForPodsReady`, the
    /// operator's `--wait-for-pods-ready`); `None`: off, as in Kueue.
    pub pods_ready: Option<PodsReadyPolicy>,
    /// Fair-sharing preemption's share rules, in order (Kueue's
    /// `fairSharing.preemptionStrategies`; its default unless configured).
    pub preemption_strategies: super::FairPreemptionStrategies,
    /// The queue objects left out as invalid or depending on one
    /// ([`super::ClusterBuilder::build_lenient`]); empty from `build`.
    pub inactive: Vec<super::Inactive>,
    pub(super) resource_ids: BTreeMap<String, ResourceId>,
    pub(super) flavor_ids: BTreeMap<String, FlavorId>,
    pub(super) cluster_queue_ids: BTreeMap<String, ClusterQueueId>,
    pub(super) local_queue_ids: BTreeMap<(String, String), LocalQueueId>,
}

impl Cluster {
    /// The id of a resource name, if known.
    pub fn resource_id(&self, name: &str) -> Option<ResourceId> {
        self.resource_ids.get(name).copied()
    }
    /// The id of a flavor name, if known.
    pub fn flavor_id(&self, name: &str) -> Option<FlavorId> {
        self.flavor_ids.get(name).copied()
    }
    /// The id of a ClusterQueue name, if known.
    pub fn cluster_queue_id(&self, name: &str) -> Option<ClusterQueueId> {
        self.cluster_queue_ids.get(name).copied()
    }
    /// The id of a LocalQueue, if known.
    pub fn local_queue_id(&self, namespace: &str, name: &str) -> Option<LocalQueueId> {
        self.local_queue_ids
            .get(&(namespace.to_string(), name.to_string()))
            .copied()
    }
    /// The name of a resource.
    pub fn resource_name(&self, id: ResourceId) -> &str {
        &self.resources[id.index()]
    }
    /// (flavor, resource) pairs: the range of [`FlavorResource`].
    pub fn flavor_resource_count(&self) -> usize {
        self.flavors.len() * self.resources.len()
    }
    /// The pair of a flavor and a resource.
    pub fn flavor_resource(&self, flavor: FlavorId, resource: ResourceId) -> FlavorResource {
        FlavorResource(flavor.0 as u32 * self.resources.len() as u32 + resource.0 as u32)
    }
    /// The flavor and resource of a pair.
    pub fn split(&self, fr: FlavorResource) -> (FlavorId, ResourceId) {
        let n = self.resources.len() as u32;
        (FlavorId((fr.0 / n) as u16), ResourceId((fr.0 % n) as u16))
    }
    /// A ClusterQueue by id.
    pub fn cluster_queue(&self, id: ClusterQueueId) -> &ClusterQueue {
        &self.cluster_queues[id.index()]
    }
    /// The top of the cohort tree `cohort` belongs to.
    pub(crate) fn root_cohort(&self, mut cohort: CohortId) -> CohortId {
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
    pub(crate) fn namespace_allowed(&self, cq: ClusterQueueId, namespace: &str) -> bool {
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
