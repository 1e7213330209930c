//! The scheduler core (DESIGN §3): per-ClusterQueue queues, flavor
//! assignment, quota with borrowing and lending, preemption, fair sharing,
//! retry backoff, reclaim timeouts, stop policies and physical capacity.
//!
//! Pure and deterministic: no clock (callers pass `now`), no I/O, no
//! threads. The simulator and the operator drive the same [`Scheduler`]:
//! they submit workloads, report finishes, fire timers and run cycles, and
//! carry the returned [`Event`]s out. Decisions that are policy go through
//! [`hooks::Hooks`].

pub mod assign;
pub mod capacity;
pub mod history;
pub mod hooks;
pub mod intake;
pub mod quota;
pub mod reason;
pub mod workload;

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

use crate::model::api::{QueueingStrategy, ReclaimWithinCohort, StopPolicy, WithinClusterQueue};
use crate::model::cluster::{
    Cluster, ClusterQueueId, FlavorId, FlavorResource, LocalQueueId, RetryPolicy,
};
use crate::model::{Amount, Millis};

use assign::{Assignment, Context, Mode};
use capacity::{Capacity, PoolSpec};
use history::{DecayedUsage, Estimate, RuntimeHistory};
use hooks::{
    AdmissionRequest, AdmissionVerdict, AutoscaleRequest, FairShareRequest, FlavorLoad,
    FlavorRequest, Hooks, WeightRequest,
};
use quota::QuotaTree;
pub use reason::Reason;
pub use workload::{
    Admission, Entry, PodSetFlavors, PodSetRequest, Slot, Status, Workload, WorkloadId,
};

/// The resource whose usage the decayed-usage history counts.
pub const GPU: &str = "nvidia.com/gpu";

/// What happened to a workload; the driver records and carries it out.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Admitted; details in `Entry::admission`.
    Admitted { workload: WorkloadId },
    /// `released`: the quota it gave back.
    Evicted {
        workload: WorkloadId,
        reason: String,
        by: Option<String>,
        released: Vec<(FlavorResource, Amount)>,
    },
    /// Back in its queue (after preemption at once, after a failure once the backoff is over).
    Requeued {
        workload: WorkloadId,
        reason: String,
    },
    Finished {
        workload: WorkloadId,
        released: Vec<(FlavorResource, Amount)>,
    },
    Rejected {
        workload: WorkloadId,
        reason: String,
        by: Option<String>,
    },
    Deactivated {
        workload: WorkloadId,
        reason: String,
    },
}

/// Result of one scheduling cycle.
#[derive(Debug, Default)]
pub struct Cycle {
    pub events: Vec<Event>,
    /// Did anything change (admission, eviction, a head set aside)? If not,
    /// another cycle now would decide the same.
    pub progress: bool,
}

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

/// Queue order: priority, then policy score (both descending), queue time,
/// input order — of the workload's [`Slot`], which a tenant's scores may
/// have swapped with another of the same tenant's workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct QueueKey {
    priority: Reverse<i32>,
    score: Reverse<Score>,
    queue_time: Millis,
    seq: WorkloadId,
    id: WorkloadId,
}

/// The workloads of one tenant (namespace) with tenant scores, in one
/// ClusterQueue at one priority: the set a tenant's scores permute.
type TenantGroup = (ClusterQueueId, i32, String);

/// One ClusterQueue's waiting workloads. Set-aside (inadmissible) workloads
/// stay in `parked`, in queue order; waking them does not move them back:
/// `live_after` marks which of them are up for another try (those after the
/// bound), so a wake costs O(1) instead of one B-tree insert per workload.
#[derive(Clone, Debug, Default)]
struct ClusterQueueState {
    queue: BTreeSet<QueueKey>,
    parked: BTreeSet<QueueKey>,
    /// `None`: no parked workload is up for a try; otherwise those after this bound are.
    live_after: Option<Bound<QueueKey>>,
    /// Admitted workloads by (priority, id), so preemption looks only at lower priorities.
    admitted: BTreeSet<(i32, WorkloadId)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKind {
    BackoffEnds,
    Reclaim,
}

type CandidateKey = (bool, i32, Reverse<Millis>, Reverse<WorkloadId>, WorkloadId);

/// The scheduler: all workloads, queues, quota usage and node capacity.
pub struct Scheduler {
    cluster: Arc<Cluster>,
    quota: QuotaTree,
    capacity: Capacity,
    entries: Vec<Entry>,
    states: Vec<ClusterQueueState>,
    /// ClusterQueues with a non-empty queue.
    active: BTreeSet<ClusterQueueId>,
    timers: BTreeSet<(Millis, TimerKind, WorkloadId, u32)>,
    to_score: Vec<WorkloadId>,
    fair_weights: Vec<f64>,
    fair: Vec<bool>,
    /// Per ClusterQueue: the ClusterQueues of its cohort tree (itself alone without a cohort).
    tree_members: Vec<Arc<[ClusterQueueId]>>,
    /// Per ClusterQueue: every flavor it lists, in order (what the flavor hook may reorder).
    flavors_of: Vec<Vec<FlavorId>>,
    /// Per ClusterQueue: index of its tree.
    tree_of: Vec<usize>,
    next_fair_adjust: Option<Millis>,
    cycles: u64,
    tenant_groups: BTreeMap<TenantGroup, BTreeSet<WorkloadId>>,
    /// Per ClusterQueue: decayed GPU usage.
    decayed: Vec<DecayedUsage>,
    /// Per LocalQueue: runtime history, where `resourceEstimation` is on.
    runtimes: Vec<Option<RuntimeHistory>>,
    /// Every (flavor, `nvidia.com/gpu`) pair.
    gpu_resources: Vec<FlavorResource>,
}

impl Scheduler {
    pub fn new(cluster: Arc<Cluster>, pools: &[PoolSpec]) -> Scheduler {
        let quota = QuotaTree::new(&cluster);
        let capacity = Capacity::new(cluster.flavors.len(), cluster.resources.len(), pools);
        let cqs = cluster.cluster_queues.len();
        let mut trees: BTreeMap<Option<usize>, Vec<ClusterQueueId>> = BTreeMap::new();
        let mut tree_of = vec![0; cqs];
        for (i, cq) in cluster.cluster_queues.iter().enumerate() {
            let key = cq.cohort.map(|c| cluster.root_cohort(c).index());
            let key = key.map_or(Some(usize::MAX - i), Some);
            trees.entry(key).or_default().push(ClusterQueueId(i as u32));
        }
        let mut tree_members = vec![Arc::<[ClusterQueueId]>::from(Vec::new()); cqs];
        for (t, members) in trees.into_values().enumerate() {
            let shared: Arc<[ClusterQueueId]> = members.into();
            for &m in shared.iter() {
                tree_members[m.index()] = shared.clone();
                tree_of[m.index()] = t;
            }
        }
        let fair = (0..cqs)
            .map(|i| cluster.fair_sharing_for(ClusterQueueId(i as u32)))
            .collect();
        let adaptive = cluster
            .cluster_queues
            .iter()
            .filter_map(|cq| cq.adaptive_interval)
            .min();
        Scheduler {
            fair_weights: cluster
                .cluster_queues
                .iter()
                .map(|cq| cq.fair_weight)
                .collect(),
            quota,
            capacity,
            entries: Vec::new(),
            states: vec![ClusterQueueState::default(); cqs],
            active: BTreeSet::new(),
            timers: BTreeSet::new(),
            to_score: Vec::new(),
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
            tree_members,
            tree_of,
            next_fair_adjust: adaptive.map(|_| Millis::ZERO),
            cycles: 0,
            tenant_groups: BTreeMap::new(),
            decayed: cluster
                .cluster_queues
                .iter()
                .map(|cq| DecayedUsage::new(cq.usage_half_life))
                .collect(),
            runtimes: history::runtime_histories(&cluster),
            gpu_resources: match cluster.resource_id(GPU) {
                Some(gpu) => (0..cluster.flavors.len())
                    .map(|f| cluster.flavor_resource(FlavorId(f as u16), gpu))
                    .collect(),
                None => Vec::new(),
            },
            cluster,
        }
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
    pub fn quota(&self) -> &QuotaTree {
        &self.quota
    }
    pub fn capacity(&self) -> &Capacity {
        &self.capacity
    }
    pub fn entry(&self, id: WorkloadId) -> &Entry {
        &self.entries[id.index()]
    }
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
    pub fn cycles(&self) -> u64 {
        self.cycles
    }
    /// Current fair-sharing weight of each ClusterQueue.
    pub fn fair_weights(&self) -> &[f64] {
        &self.fair_weights
    }
    /// Dominant resource share of `cq` now (per mille, divided by its weight).
    pub fn dominant_share(&self, cq: ClusterQueueId) -> f64 {
        self.share(cq, &[])
    }
    /// `cq`'s `nvidia.com/gpu`-seconds, decayed by its `usageHalfLife`, as of the last call with a `now`.
    pub fn decayed_usage(&self, cq: ClusterQueueId) -> f64 {
        self.decayed[cq.index()].value()
    }
    /// The LocalQueue's runtime estimate, if `resourceEstimation` is on and something finished.
    pub fn estimate(&self, lq: LocalQueueId) -> Option<Estimate> {
        self.runtimes[lq.index()].as_ref()?.estimate()
    }
    /// Workloads admitted in `cq` now.
    pub fn admitted_count(&self, cq: ClusterQueueId) -> usize {
        self.states[cq.index()].admitted.len()
    }
    /// Workloads waiting in `cq` now (queued or set aside).
    pub fn pending_count(&self, cq: ClusterQueueId) -> usize {
        let state = &self.states[cq.index()];
        state.queue.len() + state.parked.len()
    }

    /// Brings every ClusterQueue's decayed usage to `now` (usage changes only at call instants).
    fn advance_history(&mut self, now: Millis) {
        for (i, decayed) in self.decayed.iter_mut().enumerate() {
            let cq = ClusterQueueId(i as u32);
            let gpus: Amount = self
                .gpu_resources
                .iter()
                .map(|&fr| self.quota.usage(cq, fr))
                .sum();
            decayed.advance(now, gpus.as_f64());
        }
    }
    /// The earliest pending timer (backoff end, reclaim deadline, weight adjustment).
    pub fn next_timer(&self) -> Option<Millis> {
        let timer = self.timers.first().map(|t| t.0);
        // Weights only matter while something waits; otherwise a run could never end.
        let waiting = !self.active.is_empty() || self.states.iter().any(|s| !s.parked.is_empty());
        let adjust = self.next_fair_adjust.filter(|_| waiting);
        match (timer, adjust) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    /// Why the workload is not admitted, for people (empty if nothing to say).
    pub fn reason_text(&self, id: WorkloadId) -> String {
        let entry = &self.entries[id.index()];
        let cq = self.cluster.cluster_queue(entry.workload.cluster_queue);
        if entry.status == Status::Queued && cq.stop_policy != StopPolicy::None {
            return format!(
                "ClusterQueue {} is stopped (stopPolicy {:?})",
                cq.name, cq.stop_policy
            );
        }
        if entry.status == Status::Queued
            && entry.reason.is_none()
            && cq.strategy == QueueingStrategy::StrictFIFO
        {
            let state = &self.states[entry.workload.cluster_queue.index()];
            if let Some(head) = state.queue.first().filter(|h| h.id != id) {
                let head = &self.entries[head.id.index()].workload;
                return format!(
                    "waiting behind {}/{}, the head of StrictFIFO ClusterQueue {}",
                    head.namespace, head.name, cq.name
                );
            }
        }
        entry.reason.render(&self.cluster, &entry.workload)
    }

    fn ctx(&self) -> Context<'_> {
        Context {
            cluster: &self.cluster,
            quota: &self.quota,
            capacity: &self.capacity,
        }
    }

    /// Adds a workload at `now` (its queue time). It is scored and queued at the next cycle.
    pub fn submit(&mut self, workload: Workload, now: Millis) -> WorkloadId {
        let id = WorkloadId(self.entries.len() as u32);
        let cq = workload.cluster_queue;
        let mut reason = Reason::None;
        let mut status = Status::Scoring;
        if !self.cluster.namespace_allowed(cq, &workload.namespace) {
            status = Status::Unschedulable;
            reason = Reason::Text(format!(
                "namespace {} is not selected by ClusterQueue {}'s namespaceSelector",
                workload.namespace,
                self.cluster.cluster_queue(cq).name
            ));
        } else if let Some(why) = assign::never_fits(&self.ctx(), cq, &workload) {
            status = Status::Unschedulable;
            reason = Reason::Text(why);
        }
        self.entries.push(Entry {
            workload,
            status,
            queue_time: now,
            score: 0.0,
            tenant_score: None,
            slot: Slot {
                score: 0.0,
                queue_time: now,
                seq: id,
            },
            reason,
            retries: 0,
            evictions: 0,
            admission: None,
            epoch: 0,
            preempted_at: None,
        });
        if status == Status::Scoring {
            self.to_score.push(id);
        }
        id
    }

    /// The workload ran to completion at `now`: release its quota and nodes.
    pub fn finish(&mut self, id: WorkloadId, now: Millis) -> Vec<Event> {
        if self.entries[id.index()].status != Status::Admitted {
            return Vec::new();
        }
        self.advance_history(now);
        let entry = &self.entries[id.index()];
        if let (Some(history), Some(admission)) = (
            self.runtimes[entry.workload.local_queue.index()].as_mut(),
            &entry.admission,
        ) {
            history.record(now, now.saturating_sub(admission.at));
        }
        let released = self.release(id).map(|a| a.usage).unwrap_or_default();
        let entry = &mut self.entries[id.index()];
        entry.status = Status::Finished;
        entry.reason = Reason::None;
        vec![Event::Finished {
            workload: id,
            released,
        }]
    }

    /// The workload failed while running: evict it and retry per `retryPolicy`.
    pub fn fail(&mut self, id: WorkloadId, reason: &str, now: Millis) -> Vec<Event> {
        if self.entries[id.index()].status != Status::Admitted {
            return Vec::new();
        }
        self.advance_history(now);
        let mut events = Vec::new();
        self.evict(id, format!("failed: {reason}"), None, &mut events);
        self.retry(id, now, None, &mut events);
        events
    }

    /// Fires every timer due at or before `now`.
    pub fn fire_timers(&mut self, now: Millis, hooks: &mut dyn Hooks) -> Vec<Event> {
        hooks.begin(now);
        self.advance_history(now);
        let mut events = Vec::new();
        while let Some(&(at, kind, id, epoch)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let entry = &self.entries[id.index()];
            if entry.epoch != epoch {
                continue;
            }
            match kind {
                TimerKind::BackoffEnds if entry.status == Status::Backoff => {
                    self.enqueue(id);
                    events.push(Event::Requeued {
                        workload: id,
                        reason: "retry backoff is over".into(),
                    });
                }
                TimerKind::Reclaim if entry.status == Status::Admitted => {
                    let cq = self.cluster.cluster_queue(entry.workload.cluster_queue);
                    let timeout = cq.reclaim_timeout.unwrap_or(Millis::ZERO);
                    let reason = format!(
                        "reclaimed: admitted longer than ClusterQueue {}'s reclaimTimeout {}",
                        cq.name, timeout
                    );
                    self.evict(id, reason, None, &mut events);
                    // Without a retryPolicy a workload outliving the timeout would be
                    // re-admitted and reclaimed forever; the default policy bounds it.
                    self.retry(id, now, Some(RetryPolicy::DEFAULT), &mut events);
                }
                _ => {}
            }
        }
        if self.next_fair_adjust.is_some_and(|t| t <= now) {
            self.adjust_fair_weights(now, hooks);
        }
        events
    }

    fn adjust_fair_weights(&mut self, now: Millis, hooks: &mut dyn Hooks) {
        let shares: Vec<f64> = (0..self.cluster.cluster_queues.len())
            .map(|i| self.share(ClusterQueueId(i as u32), &[]))
            .collect();
        let request = FairShareRequest {
            state: self,
            shares: &shares,
            now,
        };
        let weights = hooks.fair_share(&request);
        if weights.len() == self.fair_weights.len() {
            for (i, w) in weights.into_iter().enumerate() {
                if w.is_finite() && w >= 0.0 {
                    self.fair_weights[i] = w;
                }
            }
        }
        let interval = self
            .cluster
            .cluster_queues
            .iter()
            .filter_map(|cq| cq.adaptive_interval)
            .min();
        self.next_fair_adjust = interval.map(|i| now.saturating_add(i.max(Millis(1))));
    }

    fn enqueue(&mut self, id: WorkloadId) {
        let entry = &mut self.entries[id.index()];
        entry.status = Status::Queued;
        let cq = entry.workload.cluster_queue;
        let tenant_scored = entry.tenant_score.is_some();
        let key = self.key_of(id);
        self.states[cq.index()].queue.insert(key);
        self.active.insert(cq);
        if tenant_scored {
            let workload = &self.entries[id.index()].workload;
            let group = (cq, workload.priority, workload.namespace.clone());
            self.tenant_groups
                .entry(group.clone())
                .or_default()
                .insert(id);
            self.permute(&group);
        }
    }

    /// Gives a tenant's waiting workloads (of one ClusterQueue and priority)
    /// the group's slots in the order of their tenant scores: the k-th best
    /// takes the k-th earliest slot. The set of slots is unchanged, so no
    /// other tenant's workload moves (DESIGN §3).
    fn permute(&mut self, group: &TenantGroup) {
        let Some(members) = self.tenant_groups.get_mut(group) else {
            return;
        };
        let entries = &self.entries;
        members.retain(|id| {
            matches!(
                entries[id.index()].status,
                Status::Queued | Status::Inadmissible
            )
        });
        if members.len() < 2 {
            if members.is_empty() {
                self.tenant_groups.remove(group);
            }
            return;
        }
        let members: Vec<WorkloadId> = members.iter().copied().collect();
        let mut slots: Vec<Slot> = members.iter().map(|id| entries[id.index()].slot).collect();
        slots.sort_by(Slot::queue_order);
        let mut ranked = members;
        ranked.sort_by(|a, b| {
            let (ea, eb) = (&entries[a.index()], &entries[b.index()]);
            let (ta, tb) = (
                ea.tenant_score.unwrap_or(0.0),
                eb.tenant_score.unwrap_or(0.0),
            );
            tb.total_cmp(&ta)
                .then_with(|| ea.slot.queue_order(&eb.slot))
        });
        let cq = group.0;
        for (id, slot) in ranked.into_iter().zip(slots) {
            if self.entries[id.index()].slot == slot {
                continue;
            }
            let old = self.key_of(id);
            let state = &mut self.states[cq.index()];
            if !state.queue.remove(&old) {
                state.parked.remove(&old);
            }
            self.entries[id.index()].slot = slot;
            self.entries[id.index()].status = Status::Queued;
            let new = self.key_of(id);
            self.states[cq.index()].queue.insert(new);
        }
        self.refresh_active(cq);
    }

    /// The next workload to examine in `cq`: the first of its queue and its live parked workloads.
    fn head(&self, cq: ClusterQueueId) -> Option<QueueKey> {
        let state = &self.states[cq.index()];
        let queued = state.queue.first().copied();
        let parked = state.live_after.and_then(|bound| {
            state
                .parked
                .range((bound, Bound::Unbounded))
                .next()
                .copied()
        });
        match (queued, parked) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn refresh_active(&mut self, cq: ClusterQueueId) {
        if self.head(cq).is_some() {
            self.active.insert(cq);
        } else {
            self.active.remove(&cq);
        }
    }

    fn key_of(&self, id: WorkloadId) -> QueueKey {
        let entry = &self.entries[id.index()];
        QueueKey {
            priority: Reverse(entry.workload.priority),
            score: Reverse(Score(entry.slot.score)),
            queue_time: entry.slot.queue_time,
            seq: entry.slot.seq,
            id,
        }
    }

    fn dequeue(&mut self, id: WorkloadId) {
        let cq = self.entries[id.index()].workload.cluster_queue;
        let key = self.key_of(id);
        let state = &mut self.states[cq.index()];
        if !state.queue.remove(&key) {
            state.parked.remove(&key);
        }
        self.refresh_active(cq);
    }

    /// Puts set-aside workloads of `cq`'s cohort tree (all trees if nodes were freed) back in their queues.
    fn wake(&mut self, cq: ClusterQueueId, nodes_freed: bool) {
        if nodes_freed {
            for member in 0..self.states.len() {
                self.wake_queue(ClusterQueueId(member as u32));
            }
        } else {
            let members = self.tree_members[cq.index()].clone();
            for &member in members.iter() {
                self.wake_queue(member);
            }
        }
    }

    fn wake_queue(&mut self, cq: ClusterQueueId) {
        let state = &mut self.states[cq.index()];
        if !state.parked.is_empty() {
            state.live_after = Some(Bound::Unbounded);
            self.active.insert(cq);
        }
    }

    fn release(&mut self, id: WorkloadId) -> Option<Admission> {
        let entry = &mut self.entries[id.index()];
        let admission = entry.admission.take()?;
        let cq = entry.workload.cluster_queue;
        for &(fr, amount) in &admission.usage {
            self.quota.add_usage(cq, fr, -amount);
        }
        self.capacity.release(&admission.placements);
        let priority = self.entries[id.index()].workload.priority;
        self.states[cq.index()].admitted.remove(&(priority, id));
        self.wake(cq, !admission.placements.is_empty());
        Some(admission)
    }

    fn evict(
        &mut self,
        id: WorkloadId,
        reason: String,
        by: Option<String>,
        events: &mut Vec<Event>,
    ) {
        let released = self.release(id).map(|a| a.usage).unwrap_or_default();
        let entry = &mut self.entries[id.index()];
        entry.evictions += 1;
        entry.epoch += 1;
        entry.reason = Reason::Text(reason.clone());
        events.push(Event::Evicted {
            workload: id,
            reason,
            by,
            released,
        });
    }

    /// After a failure or reclaim: back off and requeue, or deactivate past maxRetries.
    /// Unlike a preempted workload it queues from the eviction on, behind those that
    /// waited meanwhile (Kueue's `requeuingStrategy.timestamp: Eviction`), so a
    /// reclaimed workload does not take its quota straight back.
    /// `fallback` applies when the ClusterQueue has no retryPolicy.
    fn retry(
        &mut self,
        id: WorkloadId,
        now: Millis,
        fallback: Option<RetryPolicy>,
        events: &mut Vec<Event>,
    ) {
        let entry = &mut self.entries[id.index()];
        entry.retries += 1;
        entry.queue_time = now;
        entry.slot = Slot {
            score: entry.score,
            queue_time: now,
            seq: id,
        };
        let policy = self
            .cluster
            .cluster_queue(entry.workload.cluster_queue)
            .retry
            .or(fallback);
        match policy {
            None => {
                self.enqueue(id);
                events.push(Event::Requeued {
                    workload: id,
                    reason: "requeued at once (no retryPolicy)".into(),
                });
            }
            Some(p) if entry.retries > p.max_retries => {
                entry.status = Status::Deactivated;
                let reason = format!(
                    "deactivated after {} retries (retryPolicy.maxRetries {})",
                    entry.retries - 1,
                    p.max_retries
                );
                entry.reason = Reason::Text(reason.clone());
                events.push(Event::Deactivated {
                    workload: id,
                    reason,
                });
            }
            Some(p) => {
                let factor = 1i64 << (entry.retries - 1).min(30);
                let until = now.saturating_add(p.backoff.saturating_mul(factor));
                entry.status = Status::Backoff;
                let before = entry.reason.render(&self.cluster, &entry.workload);
                entry.reason = Reason::Text(format!(
                    "{before}; retry {} of {} after backoff until {}s",
                    entry.retries,
                    p.max_retries,
                    until.as_secs_f64()
                ));
                self.timers
                    .insert((until, TimerKind::BackoffEnds, id, entry.epoch));
            }
        }
    }

    /// Weighted dominant resource share of `cq` if it also used `extra`
    /// (per mille of its cohort tree's lendable capacity, divided by weight).
    fn share(&self, cq: ClusterQueueId, extra: &[(FlavorResource, Amount)]) -> f64 {
        let def = self.cluster.cluster_queue(cq);
        let Some(cohort) = def.cohort else { return 0.0 };
        let root = self.quota.cohort_node(self.cluster.root_cohort(cohort));
        let resources = self.cluster.resources.len();
        let mut borrowed = vec![Amount::ZERO; resources];
        let mut lendable = vec![Amount::ZERO; resources];
        for fr in 0..self.quota.flavor_resources() {
            let fr = FlavorResource(fr as u32);
            let (_, r) = self.cluster.split(fr);
            let add = extra
                .iter()
                .filter(|(f, _)| *f == fr)
                .map(|(_, a)| *a)
                .sum::<Amount>();
            borrowed[r.index()] +=
                (self.quota.usage(cq, fr) + add).positive_sub(self.quota.nominal(cq, fr));
            lendable[r.index()] += self.quota.root_capacity(root, fr);
        }
        let dominant = borrowed
            .iter()
            .zip(&lendable)
            .filter(|(_, l)| !l.is_zero())
            .map(|(b, l)| (b.milli() as i128 * 1000 / l.milli() as i128) as i64)
            .max()
            .unwrap_or(0);
        if dominant == 0 {
            return 0.0;
        }
        let weight = self.fair_weights[cq.index()];
        if weight <= 0.0 {
            f64::INFINITY
        } else {
            dominant as f64 / weight
        }
    }

    fn score_new(&mut self, now: Millis, hooks: &mut dyn Hooks) {
        if self.to_score.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.to_score);
        let requests: Vec<WeightRequest<'_>> = batch
            .iter()
            .map(|id| WeightRequest {
                state: self,
                entry: &self.entries[id.index()],
                now,
            })
            .collect();
        let weights = hooks.weight(&requests);
        drop(requests);
        for (i, id) in batch.into_iter().enumerate() {
            let weight = weights.get(i).copied().unwrap_or_default();
            let finite = |s: f64| if s.is_finite() { s } else { 0.0 };
            let entry = &mut self.entries[id.index()];
            entry.score = finite(weight.score);
            entry.slot.score = entry.score;
            entry.tenant_score = weight.tenant.map(finite);
            self.enqueue(id);
        }
    }

    /// Assigns flavors to a head; a workload with `minCount`s that does not fit
    /// whole is admitted with the most pods that fit (Kueue's partial admission:
    /// every reducible pod set shrinks in proportion, found by binary search).
    fn assign_head(&self, cq: ClusterQueueId, id: WorkloadId, hooks: &mut dyn Hooks) -> Assignment {
        let whole = self.assign_counts(cq, id, hooks, None);
        let pod_sets = &self.entries[id.index()].workload.pod_sets;
        let reducible: Vec<u32> = pod_sets
            .iter()
            .map(|ps| ps.count - ps.min_count.unwrap_or(ps.count).min(ps.count))
            .collect();
        let steps: u32 = reducible.iter().max().copied().unwrap_or(0);
        if whole.mode == Mode::Fit || steps == 0 {
            return whole;
        }
        // counts(k): each pod set gives up its reducible pods in proportion to k / steps.
        let counts = |k: u32| -> Vec<u32> {
            pod_sets
                .iter()
                .zip(&reducible)
                .map(|(ps, &r)| ps.count - (r as u64 * k as u64).div_ceil(steps as u64) as u32)
                .collect()
        };
        let fits = |k: u32, hooks: &mut dyn Hooks| {
            let assignment = self.assign_counts(cq, id, hooks, Some(&counts(k)));
            (assignment.mode == Mode::Fit).then_some(assignment)
        };
        let Some(mut best) = fits(steps, hooks) else {
            return whole;
        };
        let (mut lo, mut hi) = (1, steps);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match fits(mid, hooks) {
                Some(assignment) => {
                    best = assignment;
                    hi = mid;
                }
                None => lo = mid + 1,
            }
        }
        best
    }

    fn assign_counts(
        &self,
        cq: ClusterQueueId,
        id: WorkloadId,
        hooks: &mut dyn Hooks,
        counts: Option<&[u32]>,
    ) -> Assignment {
        let entry = &self.entries[id.index()];
        let candidates = &self.flavors_of[cq.index()];
        let preferred = if candidates.len() > 1 {
            hooks.flavor(&FlavorRequest {
                state: self,
                entry,
                cluster_queue: cq,
                candidates,
            })
        } else {
            None
        };
        let mut assignment = assign::assign(
            &self.ctx(),
            cq,
            &entry.workload,
            preferred.as_deref(),
            counts,
        );
        if assignment.mode != Mode::Preempt {
            return assignment;
        }
        assignment.candidates = self.preemption_candidates(cq, id, &assignment.usage);
        if !assignment.candidates.is_empty() {
            return assignment;
        }
        // As Kueue's preemption oracle: a flavor where preemption has no candidates
        // ranks below every viable one, so look again without the flavors that are short.
        let short: Vec<FlavorId> = assignment
            .usage
            .iter()
            .filter(|&&(fr, amount)| amount > self.quota.available(cq, fr))
            .map(|&(fr, _)| self.cluster.split(fr).0)
            .collect();
        let order: Vec<FlavorId> = preferred
            .as_deref()
            .unwrap_or(candidates)
            .iter()
            .copied()
            .filter(|f| !short.contains(f))
            .collect();
        let mut retry = assign::assign(&self.ctx(), cq, &entry.workload, Some(&order), counts);
        if retry.mode == Mode::Preempt {
            retry.candidates = self.preemption_candidates(cq, id, &retry.usage);
        }
        let viable = match retry.mode {
            Mode::Fit => true,
            Mode::Preempt => !retry.candidates.is_empty(),
            Mode::NoFit => false,
        };
        if viable {
            retry
        } else {
            assignment
        }
    }

    /// One scheduling cycle at `now`: score new arrivals, take every
    /// ClusterQueue's head, order them (DESIGN §3) and admit what fits,
    /// preempting where allowed.
    pub fn schedule(&mut self, now: Millis, hooks: &mut dyn Hooks) -> Cycle {
        self.cycles += 1;
        hooks.begin(now);
        self.advance_history(now);
        self.score_new(now, hooks);
        let mut cycle = Cycle::default();
        struct Head {
            cq: ClusterQueueId,
            id: WorkloadId,
            assignment: Assignment,
            order: (Score, bool, Reverse<i32>, Millis, WorkloadId),
        }
        let mut heads = Vec::with_capacity(self.active.len());
        let active: Vec<ClusterQueueId> = self.active.iter().copied().collect();
        for cq in active {
            let def = self.cluster.cluster_queue(cq);
            let Some(first) = self.head(cq) else {
                continue;
            };
            if def.stop_policy != StopPolicy::None {
                // Nothing is examined; `reason_text` says the queue is stopped.
                continue;
            }
            let assignment = self.assign_head(cq, first.id, hooks);
            let entry = &self.entries[first.id.index()];
            let share = if self.fair[cq.index()] {
                self.share(cq, &assignment.usage)
            } else {
                0.0
            };
            let order = (
                Score(share),
                assignment.borrowing,
                Reverse(entry.workload.priority),
                entry.slot.queue_time,
                entry.slot.seq,
            );
            heads.push(Head {
                cq,
                id: first.id,
                assignment,
                order,
            });
        }
        heads.sort_by_key(|h| h.order);
        let mut changed_trees: BTreeSet<usize> = BTreeSet::new();
        let mut nodes_changed = false;
        for head in heads {
            let Head {
                cq,
                id,
                mut assignment,
                ..
            } = head;
            if changed_trees.contains(&self.tree_of[cq.index()])
                || (nodes_changed && !assignment.placements.is_empty())
            {
                assignment = self.assign_head(cq, id, hooks);
            }
            let lq =
                &self.cluster.local_queues[self.entries[id.index()].workload.local_queue.index()];
            if lq.stop_policy != StopPolicy::None {
                let reason = format!(
                    "LocalQueue {}/{} is stopped (stopPolicy {:?})",
                    lq.namespace, lq.name, lq.stop_policy
                );
                // Whatever the queueing strategy: a stopped LocalQueue blocks nobody.
                self.entries[id.index()].reason = Reason::Text(reason);
                self.park(cq, id);
                cycle.progress = true;
                continue;
            }
            let admitted = match assignment.mode {
                Mode::Fit => self.try_admit(cq, id, assignment, now, hooks, &mut cycle),
                Mode::Preempt if self.entries[id.index()].preempted_at == Some(now) => {
                    let short = assignment
                        .not_fit
                        .map_or(Reason::None, Reason::NoFit)
                        .render(&self.cluster, &self.entries[id.index()].workload);
                    let reason = Reason::Text(format!(
                        "{short}; it was itself preempted at this instant and may preempt only once time moves on"
                    ));
                    cycle.progress |= self.set_aside(cq, id, reason);
                    false
                }
                Mode::Preempt => self.try_preempt(cq, id, assignment, now, hooks, &mut cycle),
                Mode::NoFit => {
                    let reason = assignment.not_fit.map_or(Reason::None, Reason::NoFit);
                    cycle.progress |= self.set_aside(cq, id, reason);
                    false
                }
            };
            if admitted {
                changed_trees.insert(self.tree_of[cq.index()]);
                nodes_changed |= self.entries[id.index()]
                    .admission
                    .as_ref()
                    .is_some_and(|a| !a.placements.is_empty());
                cycle.progress = true;
            }
        }
        cycle
    }

    /// The head can't be admitted now: BestEffortFIFO sets it aside, StrictFIFO keeps it at the head.
    fn set_aside(&mut self, cq: ClusterQueueId, id: WorkloadId, reason: Reason) -> bool {
        self.entries[id.index()].reason = reason;
        if self.cluster.cluster_queue(cq).strategy == QueueingStrategy::BestEffortFIFO {
            self.park(cq, id);
            true
        } else {
            false
        }
    }

    /// Takes a queued workload out of its queue until something in its cohort frees up.
    /// `id` must be the head of `cq`: every live parked workload comes after it.
    fn park(&mut self, cq: ClusterQueueId, id: WorkloadId) {
        let key = self.key_of(id);
        self.entries[id.index()].status = Status::Inadmissible;
        let state = &mut self.states[cq.index()];
        state.queue.remove(&key);
        state.parked.insert(key);
        // Those up to and including it are done for this wake; never revive any.
        state.live_after = match state.live_after {
            None => None,
            Some(Bound::Excluded(done)) if done > key => Some(Bound::Excluded(done)),
            Some(_) => Some(Bound::Excluded(key)),
        };
        self.refresh_active(cq);
    }

    fn try_admit(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        assignment: Assignment,
        now: Millis,
        hooks: &mut dyn Hooks,
        cycle: &mut Cycle,
    ) -> bool {
        let verdict = hooks.admission(&AdmissionRequest {
            state: self,
            entry: &self.entries[id.index()],
            flavors: &assignment.pod_sets,
            borrowing: assignment.borrowing,
            now,
        });
        match verdict {
            AdmissionVerdict::Allow => {
                self.admit(cq, id, assignment, now);
                cycle.events.push(Event::Admitted { workload: id });
                true
            }
            AdmissionVerdict::Deny {
                policy,
                reason,
                retryable: false,
            } => {
                self.dequeue(id);
                let entry = &mut self.entries[id.index()];
                entry.status = Status::Rejected;
                let text = format!("rejected by policy {policy}: {reason}");
                entry.reason = Reason::Text(text.clone());
                cycle.events.push(Event::Rejected {
                    workload: id,
                    reason: text,
                    by: Some(policy),
                });
                cycle.progress = true;
                false
            }
            AdmissionVerdict::Deny {
                policy,
                reason,
                retryable: true,
            } => {
                cycle.progress |= self.set_aside(
                    cq,
                    id,
                    Reason::Text(format!("denied by policy {policy} (will retry): {reason}")),
                );
                false
            }
        }
    }

    fn admit(&mut self, cq: ClusterQueueId, id: WorkloadId, assignment: Assignment, now: Millis) {
        self.dequeue(id);
        for &(fr, amount) in &assignment.usage {
            self.quota.add_usage(cq, fr, amount);
        }
        self.capacity.commit(&assignment.placements);
        let priority = self.entries[id.index()].workload.priority;
        self.states[cq.index()].admitted.insert((priority, id));
        let entry = &mut self.entries[id.index()];
        entry.epoch += 1;
        entry.status = Status::Admitted;
        entry.reason = Reason::None;
        entry.admission = Some(Admission {
            at: now,
            pod_sets: assignment.pod_sets,
            usage: assignment.usage,
            placements: assignment.placements,
            borrowing: assignment.borrowing,
            counts: assignment.counts,
        });
        if let Some(timeout) = self.cluster.cluster_queue(cq).reclaim_timeout {
            self.timers.insert((
                now.saturating_add(timeout),
                TimerKind::Reclaim,
                id,
                entry.epoch,
            ));
        }
    }

    fn fits(&self, cq: ClusterQueueId, usage: &[(FlavorResource, Amount)]) -> bool {
        usage
            .iter()
            .all(|&(fr, amount)| amount <= self.quota.available(cq, fr))
    }

    fn uses_any(&self, id: WorkloadId, frs: &[(FlavorResource, Amount)]) -> bool {
        self.entries[id.index()]
            .admission
            .as_ref()
            .is_some_and(|a| {
                a.usage
                    .iter()
                    .any(|(fr, _)| frs.iter().any(|(n, _)| n == fr))
            })
    }

    fn is_borrowing_on(&self, cq: ClusterQueueId, frs: &[(FlavorResource, Amount)]) -> bool {
        frs.iter()
            .any(|&(fr, _)| self.quota.usage(cq, fr) > self.quota.nominal(cq, fr))
    }

    fn charge(&mut self, id: WorkloadId, sign: i64) {
        let entry = &self.entries[id.index()];
        let cq = entry.workload.cluster_queue;
        if let Some(admission) = &entry.admission {
            for &(fr, amount) in &admission.usage {
                self.quota.add_usage(cq, fr, amount.saturating_mul(sign));
            }
        }
    }

    /// Candidates for preempting on behalf of `id`, in Kueue's order.
    fn preemption_candidates(
        &self,
        cq: ClusterQueueId,
        id: WorkloadId,
        needed: &[(FlavorResource, Amount)],
    ) -> Vec<WorkloadId> {
        let def = self.cluster.cluster_queue(cq);
        let me = &self.entries[id.index()];
        let priority = me.workload.priority;
        // (same queue, priority, newest admission first, newest first, id): Kueue's victim order.
        let mut candidates: Vec<CandidateKey> = Vec::new();
        let admitted_at = |w: WorkloadId| {
            self.entries[w.index()]
                .admission
                .as_ref()
                .map_or(Millis::ZERO, |a| a.at)
        };
        let below = (priority, WorkloadId(0));
        let up_to = (priority, WorkloadId(u32::MAX));
        let admitted = |queue: ClusterQueueId, inclusive: bool| {
            let set = &self.states[queue.index()].admitted;
            if inclusive {
                set.range(..=up_to)
            } else {
                set.range(..below)
            }
        };
        if def.within_cluster_queue != WithinClusterQueue::Never {
            let inclusive =
                def.within_cluster_queue == WithinClusterQueue::LowerOrNewerEqualPriority;
            for &(p, w) in admitted(cq, inclusive) {
                let other = &self.entries[w.index()];
                let allowed = match def.within_cluster_queue {
                    WithinClusterQueue::Never => false,
                    WithinClusterQueue::LowerPriority => p < priority,
                    WithinClusterQueue::LowerOrNewerEqualPriority => {
                        p < priority || (p == priority && other.queue_time > me.queue_time)
                    }
                };
                if allowed && self.uses_any(w, needed) {
                    candidates.push((true, p, Reverse(admitted_at(w)), Reverse(w), w));
                }
            }
        }
        let would_borrow = needed
            .iter()
            .any(|&(fr, amount)| self.quota.usage(cq, fr) + amount > self.quota.nominal(cq, fr));
        let fair = self.fair[cq.index()];
        if def.reclaim_within_cohort != ReclaimWithinCohort::Never && (fair || !would_borrow) {
            for &other_cq in self.tree_members[cq.index()].iter() {
                if other_cq == cq || !self.is_borrowing_on(other_cq, needed) {
                    continue;
                }
                let all = &self.states[other_cq.index()].admitted;
                let eligible: Box<dyn Iterator<Item = &(i32, WorkloadId)>> =
                    match def.reclaim_within_cohort {
                        ReclaimWithinCohort::Any => Box::new(all.iter()),
                        _ => Box::new(admitted(other_cq, false)),
                    };
                for &(p, w) in eligible {
                    if self.uses_any(w, needed) {
                        candidates.push((false, p, Reverse(admitted_at(w)), Reverse(w), w));
                    }
                }
            }
        }
        candidates.sort();
        candidates.into_iter().map(|c| c.4).collect()
    }

    /// Finds a minimal victim set by removing candidates in order until the
    /// preemptor fits, then putting back every victim not needed. Leaves the
    /// quota tree as it found it.
    fn minimal_victims(
        &mut self,
        cq: ClusterQueueId,
        needed: &[(FlavorResource, Amount)],
        candidates: &[WorkloadId],
        accept: &dyn Fn(&Scheduler, WorkloadId) -> bool,
    ) -> Option<Vec<WorkloadId>> {
        let mut removed: Vec<WorkloadId> = Vec::new();
        let mut found = false;
        for &w in candidates {
            let other_cq = self.entries[w.index()].workload.cluster_queue;
            if other_cq != cq && !self.is_borrowing_on(other_cq, needed) {
                continue;
            }
            if !accept(self, w) {
                continue;
            }
            self.charge(w, -1);
            removed.push(w);
            if self.fits(cq, needed) {
                found = true;
                break;
            }
        }
        if !found {
            for &w in &removed {
                self.charge(w, 1);
            }
            return None;
        }
        let mut victims = vec![true; removed.len()];
        for i in (0..removed.len().saturating_sub(1)).rev() {
            self.charge(removed[i], 1);
            if self.fits(cq, needed) {
                victims[i] = false;
            } else {
                self.charge(removed[i], -1);
            }
        }
        let chosen: Vec<WorkloadId> = removed
            .iter()
            .zip(&victims)
            .filter(|(_, v)| **v)
            .map(|(w, _)| *w)
            .collect();
        for &w in &chosen {
            self.charge(w, 1);
        }
        Some(chosen)
    }

    fn try_preempt(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        assignment: Assignment,
        now: Millis,
        hooks: &mut dyn Hooks,
        cycle: &mut Cycle,
    ) -> bool {
        let needed = &assignment.usage;
        let candidates = &assignment.candidates;
        let victims = if self.fair[cq.index()] {
            let mine_after = self.share(cq, needed);
            // Kueue's fair-sharing strategies: a victim's queue must keep at least the
            // preemptor's share — LessThanOrEqualToFinalShare (after removing the victim),
            // then LessThanInitialShare (strictly, before removing it).
            let by_share = |strict: bool| {
                move |sched: &Scheduler, w: WorkloadId| {
                    let other_cq = sched.entries[w.index()].workload.cluster_queue;
                    if other_cq == cq {
                        return true;
                    }
                    if strict {
                        return mine_after < sched.share(other_cq, &[]);
                    }
                    let without: Vec<_> = sched.entries[w.index()]
                        .admission
                        .iter()
                        .flat_map(|a| a.usage.iter().map(|&(fr, amount)| (fr, -amount)))
                        .collect();
                    mine_after <= sched.share(other_cq, &without)
                }
            };
            let mut ordered = candidates.clone();
            let shares: BTreeMap<WorkloadId, Score> = ordered
                .iter()
                .map(|&w| {
                    (
                        w,
                        Score(self.share(self.entries[w.index()].workload.cluster_queue, &[])),
                    )
                })
                .collect();
            ordered.sort_by_key(|w| Reverse(shares[w]));
            let first = by_share(false);
            match self.minimal_victims(cq, needed, &ordered, &first) {
                Some(v) => Some(v),
                None => {
                    let second = by_share(true);
                    self.minimal_victims(cq, needed, &ordered, &second)
                }
            }
        } else {
            self.minimal_victims(cq, needed, candidates, &|_, _| true)
        };
        let Some(victims) = victims.filter(|v| !v.is_empty()) else {
            let reason = Reason::PreemptionFailed {
                not_fit: assignment.not_fit.unwrap_or(reason::NotFit {
                    pod_set: 0,
                    problems: Vec::new(),
                }),
                candidates: candidates.len(),
            };
            cycle.progress |= self.set_aside(cq, id, reason);
            return false;
        };
        // Release the victims for real, then assign again: the preemptor now fits in quota;
        // it must also find room on nodes.
        let saved: Vec<(WorkloadId, Admission)> = victims
            .iter()
            .filter_map(|&w| self.entries[w.index()].admission.clone().map(|a| (w, a)))
            .collect();
        for (w, a) in &saved {
            let wcq = self.entries[w.index()].workload.cluster_queue;
            for &(fr, amount) in &a.usage {
                self.quota.add_usage(wcq, fr, -amount);
            }
            self.capacity.release(&a.placements);
        }
        let retry = self.assign_head(cq, id, hooks);
        // Restore; evict() releases again for real if we go ahead.
        for (w, a) in &saved {
            let wcq = self.entries[w.index()].workload.cluster_queue;
            for &(fr, amount) in &a.usage {
                self.quota.add_usage(wcq, fr, amount);
            }
            self.capacity.commit(&a.placements);
        }
        if retry.mode != Mode::Fit {
            let reason = Reason::PreemptionNotEnough {
                not_fit: assignment.not_fit.unwrap_or(reason::NotFit {
                    pod_set: 0,
                    problems: Vec::new(),
                }),
                victims: victims.len(),
                after: retry.not_fit,
            };
            cycle.progress |= self.set_aside(cq, id, reason);
            return false;
        }
        let verdict = hooks.admission(&AdmissionRequest {
            state: self,
            entry: &self.entries[id.index()],
            flavors: &retry.pod_sets,
            borrowing: retry.borrowing,
            now,
        });
        if verdict != AdmissionVerdict::Allow {
            return self.try_admit(cq, id, retry, now, hooks, cycle);
        }
        let preemptor = {
            let e = &self.entries[id.index()];
            format!("{}/{}", e.workload.namespace, e.workload.name)
        };
        for &w in &victims {
            let reason = {
                let e = &self.entries[id.index()];
                let v = &self.entries[w.index()];
                let place = if v.workload.cluster_queue == cq {
                    "within ClusterQueue".to_string()
                } else {
                    format!(
                        "reclaimed by ClusterQueue {}",
                        self.cluster.cluster_queue(cq).name
                    )
                };
                format!(
                    "preempted by {} (priority {}) {}",
                    preemptor, e.workload.priority, place
                )
            };
            self.evict(w, reason, Some(preemptor.clone()), &mut cycle.events);
            self.entries[w.index()].preempted_at = Some(now);
            self.enqueue(w);
            cycle.events.push(Event::Requeued {
                workload: w,
                reason: "requeued after preemption".into(),
            });
        }
        self.admit(cq, id, retry, now);
        cycle.events.push(Event::Admitted { workload: id });
        true
    }

    /// Asks the autoscale hook for node counts of flavors whose ClusterQueues enable autoscaling.
    /// Returns (flavor, ready nodes, desired nodes).
    pub fn autoscale(&self, now: Millis, hooks: &mut dyn Hooks) -> Vec<(FlavorId, u32, u32)> {
        hooks.begin(now);
        let mut loads = Vec::new();
        for flavor in self.capacity.pooled_flavors() {
            let users: Vec<_> = self
                .cluster
                .cluster_queues
                .iter()
                .zip(&self.flavors_of)
                .filter(|(cq, flavors)| cq.autoscaling.is_some() && flavors.contains(&flavor))
                .map(|(cq, _)| cq)
                .collect();
            if users.is_empty() {
                continue;
            }
            let (pool_min, pool_max) = self.capacity.node_bounds(flavor);
            let min = users
                .iter()
                .filter_map(|cq| cq.autoscaling.and_then(|a| a.min_replicas))
                .max()
                .unwrap_or(pool_min)
                .max(pool_min);
            let max = users
                .iter()
                .filter_map(|cq| cq.autoscaling.and_then(|a| a.max_replicas))
                .min()
                .unwrap_or(pool_max)
                .min(pool_max);
            let target = users
                .iter()
                .filter_map(|cq| cq.autoscaling.map(|a| a.target_utilization))
                .fold(f64::INFINITY, f64::min);
            let nodes = self.capacity.ready_nodes(flavor);
            let mut utilization: f64 = 0.0;
            let mut pending_nodes = 0.0;
            for r in 0..self.cluster.resources.len() {
                let r = crate::model::cluster::ResourceId(r as u16);
                let Some((used, total)) = self.capacity.usage(flavor, r) else {
                    continue;
                };
                if total.is_zero() {
                    continue;
                }
                utilization = utilization.max(used.as_f64() / total.as_f64());
                let per_node = self
                    .capacity
                    .node_allocatable(flavor, r)
                    .unwrap_or(Amount::ZERO);
                if per_node.is_zero() {
                    continue;
                }
                // Only the waiting workloads of queues that list the flavor: O(pending), not O(all).
                let waiting: Amount = (0..self.states.len())
                    .filter(|&q| self.flavors_of[q].contains(&flavor))
                    .flat_map(|q| {
                        let state = &self.states[q];
                        state.queue.iter().chain(&state.parked).map(|k| k.id)
                    })
                    .map(|id| &self.entries[id.index()])
                    .filter(|e| e.reason.waits_for_capacity())
                    .flat_map(|e| e.workload.pod_sets.iter().map(move |ps| ps.total(r)))
                    .sum();
                pending_nodes = f64::max(pending_nodes, waiting.as_f64() / per_node.as_f64());
            }
            loads.push(FlavorLoad {
                flavor,
                nodes,
                min_nodes: min,
                max_nodes: max,
                utilization,
                pending_nodes,
                target_utilization: target,
            });
        }
        if loads.is_empty() {
            return Vec::new();
        }
        let desired = hooks.autoscale(&AutoscaleRequest {
            state: self,
            flavors: &loads,
            now,
        });
        loads
            .iter()
            .zip(desired)
            .map(|(l, d)| {
                (
                    l.flavor,
                    l.nodes,
                    d.clamp(l.min_nodes, l.max_nodes.max(l.min_nodes)),
                )
            })
            .collect()
    }

    /// A node of `flavor` became ready (scale-up done).
    pub fn add_node(&mut self, flavor: FlavorId) -> bool {
        let added = self.capacity.add_node(flavor);
        if added {
            for i in 0..self.states.len() {
                self.wake(ClusterQueueId(i as u32), false);
            }
        }
        added
    }

    /// Removes one idle node of `flavor` (scale-down).
    pub fn remove_idle_node(&mut self, flavor: FlavorId) -> bool {
        self.capacity.remove_idle_node(flavor)
    }
}
