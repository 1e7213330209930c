//! The one representation of a workload inside the scheduler: what it asks
//! for (pod sets with per-pod requests by interned resource), where it
//! queues, its priority — and, separately, its life-cycle state.
//! Built by `scheduler::intake` from a job; never mutated by policies.
//! What the scheduler records about it over time is in `entry`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, Toleration};

pub use crate::model::api::TopologyRequest;
use crate::model::cluster::{ClusterQueueId, FlavorId, FlavorResource, LocalQueueId, ResourceId};
use crate::model::{Amount, Millis};

/// A workload's slot in the scheduler. Slots of withdrawn workloads are
/// reused, so ids stay as few as the workloads alive at once; a driver
/// drops its id when it sees [`super::Event::Withdrawn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadId(pub u32);

/// Input order: the final tie-break between workloads ("uid" in docs/design.md §3),
/// counted from 0 per scheduler and never reused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seq(pub u64);

impl WorkloadId {
    /// Its index in [`Scheduler::entries`](super::Scheduler::entries).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One group of identical pods and what each pod requests.
#[derive(Clone, Debug, PartialEq)]
pub struct PodSetRequest {
    /// Its name, unique in its workload.
    pub name: String,
    /// Pods in the set.
    pub count: u32,
    /// Fewest pods it can run with (partial admission); `None`: all of them.
    pub min_count: Option<u32>,
    /// Per pod, sorted by resource, no zero entries.
    pub per_pod: Vec<(ResourceId, Amount)>,
    /// The pods' `nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// The pods' required node affinity, if any.
    pub required_affinity: Option<NodeSelector>,
    /// The pods' tolerations.
    pub tolerations: Vec<Toleration>,
    /// Its topology request, if its pod template makes one.
    pub topology: Option<TopologyRequest>,
}

/// The amount of `resource` in a list of per-resource amounts (a pod's
/// requests, a node's allocatable); zero if it is not listed.
pub fn amount_of(amounts: &[(ResourceId, Amount)], resource: ResourceId) -> Amount {
    amounts
        .iter()
        .find(|(r, _)| *r == resource)
        .map_or(Amount::ZERO, |(_, a)| *a)
}

impl PodSetRequest {
    /// What one pod requests of `resource`.
    pub(crate) fn per_pod_of(&self, resource: ResourceId) -> Amount {
        amount_of(&self.per_pod, resource)
    }
    /// What all `count` pods request of `resource`.
    pub fn total(&self, resource: ResourceId) -> Amount {
        self.per_pod_of(resource).saturating_mul(self.count as i64)
    }
}

/// What a job asks of the scheduler.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// The job's `kind`.
    pub kind: String,
    /// The job's namespace.
    pub namespace: String,
    /// The job's name.
    pub name: String,
    /// The job's labels.
    pub labels: BTreeMap<String, String>,
    /// The job's annotations.
    pub annotations: BTreeMap<String, String>,
    /// The name of the LocalQueue it was submitted to.
    pub queue_name: String,
    /// That LocalQueue.
    pub local_queue: LocalQueueId,
    /// The LocalQueue's ClusterQueue.
    pub cluster_queue: ClusterQueueId,
    /// Its priority (higher is more important).
    pub priority: i32,
    /// Its WorkloadPriorityClass, if it names one.
    pub priority_class: Option<String>,
    /// Weight multiplying priority in the default weighting policy.
    pub priority_weight: f64,
    /// Its pod sets, in the job's order.
    pub pod_sets: Vec<PodSetRequest>,
}

impl Workload {
    /// Does it ask the scheduler for exactly what `other` asks — same
    /// LocalQueue (so ClusterQueue and stop policy), priority, and pod sets
    /// alike in count, minimum count, per-pod requests, node selector,
    /// required affinity, tolerations and topology request (pod-set names
    /// aside)? Then every
    /// decision the core makes about one in a queue position it would make
    /// about the other: the only workloads a tenant's scores may exchange
    /// (`queues`).
    pub fn asks_same_as(&self, other: &Workload) -> bool {
        self.local_queue == other.local_queue
            && self.cluster_queue == other.cluster_queue
            && self.priority == other.priority
            && self.pod_sets.len() == other.pod_sets.len()
            && (0..self.pod_sets.len())
                .all(|i| self.topology_request(i) == other.topology_request(i))
            && self.pod_sets.iter().zip(&other.pod_sets).all(|(a, b)| {
                a.count == b.count
                    && a.min_count == b.min_count
                    && a.per_pod == b.per_pod
                    && a.node_selector == b.node_selector
                    && a.required_affinity == b.required_affinity
                    && a.tolerations == b.tolerations
            })
    }
}

impl Workload {
    /// Pod set `pod_set`'s topology request, if it makes one.
    pub(crate) fn topology_request(&self, pod_set: usize) -> Option<&TopologyRequest> {
        self.pod_sets.get(pod_set)?.topology.as_ref()
    }
}

/// Flavor chosen for each resource of one pod set (same index as `Workload::pod_sets`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PodSetFlavors {
    /// The flavor of each resource the pod set requests.
    pub flavors: Vec<(ResourceId, FlavorId)>,
}

/// Where a workload's pods were placed on physical nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The pod set these pods belong to (index into `Workload::pod_sets`).
    pub pod_set: u32,
    /// The flavor of the node.
    pub flavor: FlavorId,
    /// The node's index among the flavor's nodes.
    pub node: u32,
    /// What each pod requests.
    pub per_pod: Vec<(ResourceId, Amount)>,
    /// Pods placed on the node.
    pub pods: u32,
    /// What these pods hold of each card of the node's device resources
    /// (summed over the pods, one entry per card); empty where the node
    /// declares no devices.
    pub cards: Vec<CardUse>,
}

/// An amount of one card of a device resource, held by placed pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CardUse {
    /// The device resource.
    pub resource: ResourceId,
    /// The card's index among the node's cards of `resource`.
    pub card: u16,
    /// How much of the card the pods hold.
    pub amount: Amount,
}

/// A workload's admission: flavors, quota charged and pods placed.
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    /// When it was admitted.
    pub at: Millis,
    /// The flavors chosen, per pod set.
    pub pod_sets: Vec<PodSetFlavors>,
    /// Quota charged, per flavor and resource.
    pub usage: Vec<(FlavorResource, Amount)>,
    /// Where its pods were placed.
    pub placements: Vec<Placement>,
    /// Did it borrow quota from its cohort?
    pub borrowing: bool,
    /// Pods admitted per pod set (below the requested count after partial admission).
    pub counts: Vec<u32>,
}

/// Where a workload is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Submitted, waiting for the weight hook to score it.
    Scoring,
    /// In its ClusterQueue's queue.
    Queued,
    /// Set aside (BestEffortFIFO) until something in its cohort frees up.
    Inadmissible,
    /// Waiting out a retry backoff.
    Backoff,
    /// Admitted and running.
    Admitted,
    /// Ran to its end.
    Finished,
    /// Refused for good (admission policy, LocalQueue bounds).
    Rejected,
    /// Evicted more often than `retryPolicy.maxRetries` allows.
    Deactivated,
    /// Can never be admitted as configured (uncovered resource, too big); blocks nobody.
    Unschedulable,
    /// Its LocalQueue, ClusterQueue or a requested resource was removed from
    /// the configuration while it waited; it waits for them to come back.
    /// Its `cluster_queue` and `local_queue` ids may name nothing now: its
    /// reason names them.
    Orphaned,
    /// Was admitted by a ClusterQueue, LocalQueue or flavor since removed: it
    /// keeps running and holding its nodes, charged to no quota. As with
    /// `Orphaned`, its queue ids may name nothing now.
    Detached,
    /// Withdrawn (the job was deleted); the slot is free for reuse.
    Withdrawn,
}

/// A place in a queue: the platform score, queue time and input order that
/// sort it. A workload starts in its own slot; a tenant's scores may hand
/// its slot to another of the tenant's workloads that asks the same.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slot {
    /// The platform's policy score (higher goes first).
    pub score: f64,
    /// The queue time (earlier goes first).
    pub queue_time: Millis,
    /// Input order, the final tie-break.
    pub seq: Seq,
}

impl Slot {
    /// Earlier in the queue first: higher score, earlier queue time, input order.
    pub fn queue_order(&self, other: &Slot) -> std::cmp::Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.queue_time.cmp(&other.queue_time))
            .then(self.seq.cmp(&other.seq))
    }
}
