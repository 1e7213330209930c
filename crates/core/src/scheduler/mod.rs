//! The scheduler core (docs/design.md §3): per-ClusterQueue queues, flavor
//! assignment, quota with borrowing and lending, preemption, fair sharing,
//! retry backoff, reclaim timeouts, stop policies and physical capacity.
//!
//! Pure and deterministic: no clock (callers pass `now`), no I/O, no
//! threads. The simulator and the operator drive the same [`Scheduler`]
//! through one entry, [`Scheduler::step`] (`step`): the events since the
//! last call and the current time in; decisions, an autoscale plan and the
//! next wake-up out. Besides it, a driver may [`Scheduler::restore`] what
//! was admitted before a restart and [`Scheduler::reconfigure`] when the
//! queues change. Decisions that are policy go through [`hooks::Hooks`].
//!
//! The rooms: `queues` (ordering, tenant slots, set-aside workloads),
//! `cycle` (one scheduling cycle: heads, flavor assignment, admission),
//! `preemption` (candidates, victims), `lifecycle` (submit, finish, fail,
//! withdraw, timers, retry), `fair` (DRS shares, adaptive weights, decayed
//! usage), `autoscale` (node demand and the scale plan), `restore`
//! (restart and reconfiguration), `step` (the driver API).
//!
//! [`Scheduler`] is a composition of parts, each a type that owns its
//! fields, keeps its own invariants (documented on the type: what it
//! guarantees, what it never does) and is unit-tested beside it:
//! `store::Workloads` (slots, their reuse, input order),
//! `queues::Queues` and `queues::TenantGroups` (waiting and admitted
//! workloads per ClusterQueue, tenant groups), `timers::Timers`,
//! `fair::FairSharing` (weights, what cohorts lend, the next adjustment),
//! `trees::CohortTrees`, `history::History`, `pods_ready::Unready`,
//! `lifecycle::Unscored` (the next scoring batch, carried backoffs),
//! `memo::HeadMemos`, `repeats::Repeats`, `autoscale::Provisioning` and
//! `restore::Leftovers` (orphaned and detached workloads), besides
//! `quota::QuotaTree` and `capacity::Capacity`. The rooms' `impl
//! Scheduler` blocks combine them; none reaches into a part's fields.

pub(crate) mod assign;
mod autoscale;
pub mod capacity;
mod cycle;
pub(crate) mod entry;
mod fair;
mod fair_preemption;
mod flavor_order;
pub mod history;
pub mod hooks;
pub mod intake;
mod lifecycle;
mod memo;
mod placement;
mod pods_ready;
mod preemption;
mod queues;
pub(crate) mod quota;
pub mod reason;
mod repeats;
mod restore;
mod step;
mod store;
mod timers;
mod trees;
mod view;
pub mod workload;

#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::sync::Arc;

use crate::model::api::{QueueingStrategy, StopPolicy};
use crate::model::cluster::{Cluster, ClusterQueueId, FlavorId, FlavorResource, LocalQueueId};
use crate::model::{Amount, Millis};

use assign::Context;
use autoscale::Provisioning;
use capacity::{Capacity, PoolSpec};
use fair::FairSharing;
use history::{Estimate, History, TypicalPod};
use lifecycle::Unscored;
use memo::HeadMemos;
use pods_ready::Unready;
use queues::{Queues, TenantGroups};
use quota::QuotaTree;
use restore::Leftovers;
use store::Workloads;
use timers::Timers;
use trees::CohortTrees;

pub use autoscale::{ScaleKind, ScaleRequest};
pub use entry::{Backoff, Carried, Entry};
pub use reason::{Eviction, NeverFits, Reason, Requeue};
pub use restore::{PlacedPods, Reconfigured, RestoreError, Restored};
pub use step::{Input, Step};
pub use timers::TimerKind;
pub use view::HookState;
pub use workload::{
    Admission, PodSetFlavors, PodSetRequest, Seq, Slot, Status, Workload, WorkloadId,
};

/// The resource whose usage the decayed-usage history counts.
pub const GPU: &str = "nvidia.com/gpu";

/// Most scheduling cycles one [`Scheduler::step`] runs; a step that reaches it
/// asks to be woken again at once (`Step::next_wake == Some(now)`), so a
/// driver never waits on an unbounded loop.
pub const MAX_CYCLES_PER_STEP: u32 = 10_000;

/// A decision about one workload; the driver records and carries it out.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Admitted; details in `Entry::admission`.
    Admitted {
        /// The workload.
        workload: WorkloadId,
    },
    /// Lost its admission; `released`: the quota it gave back.
    Evicted {
        /// The workload.
        workload: WorkloadId,
        /// Why it lost its admission.
        cause: Eviction,
        /// The preemptor (`namespace/name`), when preempted.
        by: Option<String>,
        /// The quota it gave back.
        released: Vec<(FlavorResource, Amount)>,
    },
    /// Back in its queue (after preemption at once, after a failure once the backoff is over).
    Requeued {
        /// The workload.
        workload: WorkloadId,
        /// Why it was requeued.
        cause: Requeue,
    },
    /// Ran to its end: completed, or failed (`failure`: what the driver
    /// saw) in a ClusterQueue without a `retryPolicy` (Kueue's rule: a
    /// failed job's workload is finished, not run again).
    Finished {
        /// The workload.
        workload: WorkloadId,
        /// The quota it gave back.
        released: Vec<(FlavorResource, Amount)>,
        /// `None`: completed; otherwise what the driver saw of its failure.
        failure: Option<String>,
    },
    /// Refused for good by an admission policy.
    Rejected {
        /// The workload.
        workload: WorkloadId,
        /// The policy's name.
        policy: String,
        /// The policy's message.
        message: String,
    },
    /// Evicted more often than `retryPolicy.maxRetries` allows: it stays out.
    Deactivated {
        /// The workload.
        workload: WorkloadId,
        /// Retries it had.
        retries: u32,
        /// `retryPolicy.maxRetries`.
        max_retries: u32,
    },
    /// The job was deleted: forgotten, its quota and nodes released. Its id
    /// may name another workload from the next submission on.
    Withdrawn {
        /// The workload.
        workload: WorkloadId,
        /// The quota it gave back.
        released: Vec<(FlavorResource, Amount)>,
    },
}

impl Event {
    /// The workload the event is about.
    pub fn workload(&self) -> WorkloadId {
        match self {
            Event::Admitted { workload }
            | Event::Evicted { workload, .. }
            | Event::Requeued { workload, .. }
            | Event::Finished { workload, .. }
            | Event::Rejected { workload, .. }
            | Event::Deactivated { workload, .. }
            | Event::Withdrawn { workload, .. } => *workload,
        }
    }
}

/// Result of one scheduling cycle.
#[derive(Debug, Default)]
pub struct Cycle {
    /// The decisions taken, in order.
    pub events: Vec<Event>,
    /// Did anything change (admission, eviction, a head set aside)? If not,
    /// another cycle now would decide the same.
    pub progress: bool,
    /// Quota held for the rest of the cycle by heads that need preemption
    /// but have no candidates (Kueue's reservation for unreclaimable
    /// preemption); released when the cycle ends.
    pub(super) reserved: Vec<(ClusterQueueId, FlavorResource, Amount)>,
    /// Per cohort tree that holds reserved quota: its usage version before
    /// the first reservation and after the last, and whether nothing but
    /// reservations changed it in between — so when they are released the
    /// tree gets its old version back and what was computed from its
    /// usage before (the queues' reused assignments) holds again.
    pub(super) reserved_trees: Vec<ReservedTree>,
}

/// See [`Cycle::reserved_trees`].
#[derive(Debug)]
pub(super) struct ReservedTree {
    /// A ClusterQueue of the tree.
    pub cq: ClusterQueueId,
    pub before: u64,
    pub after: u64,
    /// Only reservations changed the tree's usage since `before`.
    pub only_reserved: bool,
}

/// An `f64` ordered totally, for sort keys.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Score(f64);
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The scheduler: all workloads, queues, quota usage and node capacity.
pub struct Scheduler {
    cluster: Arc<Cluster>,
    quota: QuotaTree,
    capacity: Capacity,
    /// Every workload's entry, by slot (`store`).
    workloads: Workloads,
    /// Waiting and admitted workloads per ClusterQueue (`queues`).
    queues: Queues,
    timers: Timers,
    /// Submitted workloads not scored yet, and the backoffs they carried (`lifecycle`).
    unscored: Unscored,
    /// Fair-sharing weights, what cohorts lend, the next weight adjustment (`fair`).
    fair: FairSharing,
    /// Which ClusterQueues share quota through a cohort (`trees`).
    trees: CohortTrees,
    /// Per ClusterQueue: every flavor it lists, in order (what the flavor hook may reorder).
    flavors_of: Vec<Vec<FlavorId>>,
    cycles: u64,
    /// The members of each tenant group (`queues`).
    tenant_groups: TenantGroups,
    /// Decayed usage, runtime estimates and pod shapes (`history`).
    history: History,
    /// Whether autoscaling is planned, nodes in flight per flavor (`autoscale`).
    provisioning: Provisioning,
    /// The latest time a step was called with.
    now: Millis,
    /// Orphaned and detached workloads and the nodes they hold (`restore`).
    leftovers: Leftovers,
    /// Per ClusterQueue: its last head's assignment, for reuse (`memo`).
    head_memos: HeadMemos,
    /// Changed whenever the policies in force or the fair-sharing weights
    /// change: what was computed under the old ones may not hold.
    epoch: u64,
    /// Admitted workloads whose pods are not all ready yet, while
    /// `waitForPodsReady` is on (`pods_ready`).
    unready: Unready,
    /// The preemptions made since the cluster last changed (`repeats`).
    repeats: repeats::Repeats,
}

impl Scheduler {
    /// A scheduler for `cluster` with no workloads, its flavors' nodes
    /// described by `pools`.
    pub fn new(cluster: Arc<Cluster>, pools: &[PoolSpec]) -> Scheduler {
        let quota = QuotaTree::new(&cluster);
        let fair = FairSharing::new(&cluster, &quota);
        let capacity = Capacity::new(cluster.flavors.len(), cluster.resources.len(), pools);
        let cqs = cluster.cluster_queues.len();
        Scheduler {
            quota,
            capacity,
            workloads: Workloads::default(),
            queues: Queues::new(cqs),
            timers: Timers::default(),
            unready: Unready::default(),
            unscored: Unscored::default(),
            fair,
            flavors_of: cluster
                .cluster_queues
                .iter()
                .map(|cq| {
                    cq.groups
                        .iter()
                        .flat_map(|g| g.flavors.iter().copied())
                        .collect()
                })
                .collect(),
            trees: CohortTrees::new(&cluster),
            cycles: 0,
            tenant_groups: TenantGroups::default(),
            history: History::new(&cluster),
            provisioning: Provisioning::new(&cluster, pools),
            now: Millis::ZERO,
            leftovers: Leftovers::default(),
            head_memos: HeadMemos::new(cqs),
            epoch: 0,
            repeats: repeats::Repeats::default(),
            cluster,
        }
    }

    /// The configuration in force.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
    /// The configuration in force, shared.
    pub fn cluster_arc(&self) -> &Arc<Cluster> {
        &self.cluster
    }
    /// Quota and its usage, per ClusterQueue and cohort (drivers read it
    /// through the façade in `view`).
    pub(crate) fn quota(&self) -> &QuotaTree {
        &self.quota
    }
    /// The nodes of each flavor and what they hold (drivers read them
    /// through the façade in `view`).
    /// Gives the nodes of each pool their labels, for topology-aware
    /// placement: `labels[i]` for every node of `pools[i]` as given to
    /// [`Scheduler::new`] (see [`Capacity::label_pools`]). A
    /// [`Scheduler::reconfigure`] forgets them: give them again after it.
    pub fn label_pools(&mut self, labels: &[std::collections::BTreeMap<String, String>]) {
        self.capacity.label_pools(labels);
    }

    pub(crate) fn capacity(&self) -> &Capacity {
        &self.capacity
    }
    /// The workload in slot `id` (panics if out of range).
    pub fn entry(&self, id: WorkloadId) -> &Entry {
        &self.workloads[id]
    }
    /// The workload in slot `id`, unless the slot is free (withdrawn) or out of range.
    pub fn get(&self, id: WorkloadId) -> Option<&Entry> {
        self.workloads.get(id)
    }
    /// Every slot, withdrawn ones included (status `Withdrawn`).
    pub fn entries(&self) -> &[Entry] {
        self.workloads.all()
    }
    /// Workloads known now (withdrawn slots left out).
    pub fn live(&self) -> impl Iterator<Item = (WorkloadId, &Entry)> {
        self.workloads.live()
    }
    /// Scheduling cycles run so far.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }
    /// Current fair-sharing weight of each ClusterQueue.
    pub fn fair_weights(&self) -> &[f64] {
        self.fair.weights()
    }
    /// Dominant resource share of `cq` now (per mille, divided by its weight).
    pub fn dominant_share(&self, cq: ClusterQueueId) -> f64 {
        self.share(cq, &[])
    }
    /// `cq`'s `nvidia.com/gpu`-seconds, decayed by its `usageHalfLife`, as of the last call with a `now`.
    pub fn decayed_usage(&self, cq: ClusterQueueId) -> f64 {
        self.history.decayed_usage(cq)
    }
    /// The shapes of the pods last submitted to `cq`, most frequent
    /// first, with their shares ([`PodShapes::typical`]).
    pub fn typical_pods(&self, cq: ClusterQueueId) -> Vec<TypicalPod> {
        self.history.typical_pods(cq)
    }
    /// The typical pods of every ClusterQueue together, each queue's
    /// shares weighted by the pods it remembers.
    pub fn typical_pods_all(&self) -> Vec<TypicalPod> {
        self.history.typical_pods_all()
    }
    /// The LocalQueue's runtime estimate, if `resourceEstimation` is on and something finished.
    pub fn estimate(&self, lq: LocalQueueId) -> Option<Estimate> {
        self.history.estimate(lq)
    }
    /// Workloads admitted in `cq` now.
    pub fn admitted_count(&self, cq: ClusterQueueId) -> usize {
        self.queues.admitted(cq).len()
    }
    /// Workloads waiting in `cq` now (queued or set aside).
    pub fn pending_count(&self, cq: ClusterQueueId) -> usize {
        self.queues.waiting_count(cq)
    }

    /// The workloads waiting in `cq` (those [`Scheduler::pending_count`]
    /// counts) in queue order: a set-aside workload keeps its place among
    /// the queued ones, as it will be tried in that order once woken.
    pub fn waiting_in_order(&self, cq: ClusterQueueId) -> impl Iterator<Item = WorkloadId> + '_ {
        self.queues.waiting_in_order(cq)
    }

    /// The earliest pending timer (backoff end, reclaim deadline, weight adjustment).
    pub fn next_timer(&self) -> Option<Millis> {
        let timer = self.timers.next_due();
        // Weights only matter while something waits; otherwise a run could never end.
        let waiting = self.queues.anything_waits();
        let adjust = self.fair.next_adjust().filter(|_| waiting);
        match (timer, adjust) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Why the workload is where it is now, as data. Besides the reason
    /// recorded at its last examination, a queued workload waits because
    /// its ClusterQueue is stopped, or behind the head of a StrictFIFO queue.
    pub fn reason(&self, id: WorkloadId) -> Reason {
        let entry = &self.workloads[id];
        if matches!(entry.status, Status::Queued | Status::Inadmissible) {
            if let Some(waiting) = self.admission_blocked_by() {
                return Reason::WaitingForPodsReady { workload: waiting };
            }
        }
        if entry.status == Status::Queued {
            let cq = self.cluster.cluster_queue(entry.workload.cluster_queue);
            if cq.stop_policy != StopPolicy::None {
                return Reason::ClusterQueueStopped {
                    policy: cq.stop_policy,
                };
            }
            if entry.reason.is_none() && cq.strategy == QueueingStrategy::StrictFIFO {
                let cq = entry.workload.cluster_queue;
                if let Some(head) = self.queues.first_queued(cq).filter(|h| h.id != id) {
                    let head = &self.workloads[head.id].workload;
                    return Reason::BehindStrictHead {
                        head: format!("{}/{}", head.namespace, head.name),
                    };
                }
            }
        }
        entry.reason.clone()
    }

    /// Why the workload is not admitted, for people (empty if nothing to say).
    pub fn reason_text(&self, id: WorkloadId) -> String {
        self.reason(id)
            .render(&self.cluster, &self.workloads[id].workload)
    }

    fn ctx(&self) -> Context<'_> {
        Context {
            cluster: &self.cluster,
            quota: &self.quota,
            capacity: &self.capacity,
            oracle: None,
        }
    }
}
