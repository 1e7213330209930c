//! Queues and ordering: each ClusterQueue's waiting workloads in queue
//! order (priority, policy score, queue time, input order — of the slot a
//! workload holds), the tenant groups whose scores permute only their own
//! slots, and the set-aside (inadmissible) workloads with the O(1) wake
//! that puts them up for another try. Never decides admission.
//!
//! Tenant isolation (docs/design.md §3). A tenant's scores order only its own
//! waiting workloads of one ClusterQueue and priority, and a workload takes
//! only the queue position (slot) of one that asks the same
//! ([`Workload::asks_same_as`](super::Workload::asks_same_as): LocalQueue,
//! priority, pod sets alike but for their names). A one-sided "needs no
//! more" is not enough, for the workload a permutation moves back takes a
//! position too: in a StrictFIFO
//! queue of 8 GPUs holding v (4, tenant A), b (4, B), w (2, A), c (6, C),
//! moving w ahead of v gives w, b, v, c, and with equal runtimes c starts a
//! runtime later, v and c no longer fitting together. A position also keeps
//! its state — queued, or set aside with its reason — whoever takes it; a
//! workload a policy denied or that was preempted this instant keeps its own;
//! preemption's newest-first order and a requeue after eviction go by the
//! position a workload was admitted from; a victim requeued within a cycle
//! does not reorder its group before the cycle's heads are done. So every
//! position asks the scheduler for the same thing at the same time with a
//! tenant's scores as without them, and what holds is:
//!
//! - no jump: every waiting or admitted workload holds its own position or
//!   one of its tenant's whose workload asks the same;
//! - equal runtimes: every other tenant's workload is admitted at the same
//!   times (never later), whatever the strategy, preemption, borrowing,
//!   fair sharing, node pools or partial admission — as far as the core can
//!   know: given platform hooks that answer alike for workloads asking the
//!   same (a policy reading names, labels, age or retries can tell them
//!   apart), and driver events (a failure, a deletion) being about a job,
//!   not a position;
//! - different runtimes: the same positions in the same order, but a
//!   workload holds its capacity as long as it runs, so a longer job the
//!   tenant puts in an earlier position can make a later workload of
//!   another tenant start later (a shorter one, earlier);
//! - denials: a workload its own tenant denied (or failed on) is set aside
//!   whatever the strategy, at that try and every later one until it is
//!   admitted ([`Entry::held_by_tenant`](super::Entry::held_by_tenant)), and
//!   asks for no nodes: from that denial on the others go as if it had been
//!   withdrawn then — exactly where ClusterQueues share no cohort or node
//!   pool; within one, up to the order in which the queues' heads are taken
//!   at that instant (its try takes a cycle).
//!
//! `tests/tenant_properties.rs` checks each over random scenarios.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use crate::model::api::QueueingStrategy;
use crate::model::cluster::ClusterQueueId;
use crate::model::Millis;

use super::hooks::{Hooks, WeightRequest};
use super::reason::Reason;
use super::workload::{Seq, Slot, Status, WorkloadId};
use super::{Scheduler, Score};

/// Queue order: priority, then policy score (both descending), queue time,
/// input order — of the workload's [`Slot`], which a tenant's scores may
/// have swapped with another of the same tenant's workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct QueueKey {
    priority: Reverse<i32>,
    score: Reverse<Score>,
    queue_time: Millis,
    seq: Seq,
    pub(super) id: WorkloadId,
}

impl QueueKey {
    /// The same queue position, whichever workload holds it.
    fn same_place(&self, other: &QueueKey) -> bool {
        (self.priority, self.score, self.queue_time, self.seq)
            == (other.priority, other.score, other.queue_time, other.seq)
    }
}

/// The workloads of one tenant (namespace) with tenant scores, in one
/// ClusterQueue at one priority: the set a tenant's scores permute.
pub(super) type TenantGroup = (ClusterQueueId, i32, String);

/// The members of each tenant group: the workloads a tenant's scores
/// order among themselves.
///
/// What it guarantees: a workload is in a group at most once; a group
/// whose members have all gone is dropped when next ordered
/// ([`TenantGroups::retain`]), so groups never pile up. What it never
/// does: look at a workload — the scheduler says who still belongs.
#[derive(Debug, Default)]
pub(super) struct TenantGroups {
    groups: BTreeMap<TenantGroup, BTreeSet<WorkloadId>>,
}

impl TenantGroups {
    /// `id` belongs to `group`.
    #[inline]
    pub fn join(&mut self, group: TenantGroup, id: WorkloadId) {
        self.groups.entry(group).or_default().insert(id);
    }

    /// Keeps of `group` the members `belongs` says still belong, and drops
    /// the group if none does. The members left, if any.
    pub fn retain(
        &mut self,
        group: &TenantGroup,
        belongs: impl FnMut(&WorkloadId) -> bool,
    ) -> Option<&BTreeSet<WorkloadId>> {
        let members = self.groups.get_mut(group)?;
        members.retain(belongs);
        if members.is_empty() {
            self.groups.remove(group);
            return None;
        }
        self.groups.get(group)
    }

    /// How many groups are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.groups.len()
    }
}

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

impl ClusterQueueState {
    /// The first of its queue and its live parked workloads.
    fn head(&self) -> Option<QueueKey> {
        let queued = self.queue.first().copied();
        let parked = self
            .live_after
            .and_then(|bound| self.parked.range((bound, Bound::Unbounded)).next().copied());
        match (queued, parked) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Every ClusterQueue's waiting workloads (queued, or set aside) by
/// [`QueueKey`], its admitted workloads by priority, and which queues have
/// a workload up for a try.
///
/// What it guarantees: a ClusterQueue is active exactly when it has a head
/// ([`Queues::head`]: a queued workload, or a set-aside one woken since it
/// was set aside) — every change goes through a method that keeps it so;
/// a workload is in at most one of its queue's two sets; setting the head
/// aside never revives a set-aside workload, a wake revives them all.
/// What it never does: read an entry (keys come made: the scheduler knows
/// a workload's place), decide admission, or order a tenant's group.
#[derive(Debug)]
pub(super) struct Queues {
    states: Vec<ClusterQueueState>,
    /// ClusterQueues with a head.
    active: BTreeSet<ClusterQueueId>,
}

impl Queues {
    /// Empty queues for `cqs` ClusterQueues.
    pub fn new(cqs: usize) -> Queues {
        Queues {
            states: vec![ClusterQueueState::default(); cqs],
            active: BTreeSet::new(),
        }
    }

    /// How many ClusterQueues there are.
    #[inline]
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// The ClusterQueues with a head, in id order.
    #[inline]
    pub fn active(&self) -> &BTreeSet<ClusterQueueId> {
        &self.active
    }

    /// Whether anything waits, queued or set aside, in any ClusterQueue.
    pub fn anything_waits(&self) -> bool {
        !self.active.is_empty() || self.states.iter().any(|s| !s.parked.is_empty())
    }

    /// The next workload to examine in `cq`: the first of its queue and its live parked workloads.
    #[inline]
    pub fn head(&self, cq: ClusterQueueId) -> Option<QueueKey> {
        self.states[cq.index()].head()
    }

    /// The first queued (not set-aside) workload of `cq`.
    #[inline]
    pub fn first_queued(&self, cq: ClusterQueueId) -> Option<QueueKey> {
        self.states[cq.index()].queue.first().copied()
    }

    /// Workloads waiting in `cq` (queued or set aside).
    #[inline]
    pub fn waiting_count(&self, cq: ClusterQueueId) -> usize {
        let state = &self.states[cq.index()];
        state.queue.len() + state.parked.len()
    }

    /// The workloads waiting in `cq`: the queued ones, then the set-aside ones.
    pub fn waiting(&self, cq: ClusterQueueId) -> impl Iterator<Item = WorkloadId> + '_ {
        let state = &self.states[cq.index()];
        state.queue.iter().chain(&state.parked).map(|k| k.id)
    }

    /// The workloads waiting in `cq` in queue order: a set-aside workload
    /// keeps its place among the queued ones.
    pub fn waiting_in_order(&self, cq: ClusterQueueId) -> impl Iterator<Item = WorkloadId> + '_ {
        let state = &self.states[cq.index()];
        let mut queued = state.queue.iter().peekable();
        let mut parked = state.parked.iter().peekable();
        std::iter::from_fn(move || {
            let next = match (queued.peek(), parked.peek()) {
                (Some(a), Some(b)) if b < a => parked.next(),
                (Some(_), _) => queued.next(),
                (None, _) => parked.next(),
            };
            next.map(|key| key.id)
        })
    }

    /// Queues `key` in `cq`.
    #[inline]
    pub fn push(&mut self, cq: ClusterQueueId, key: QueueKey) {
        self.states[cq.index()].queue.insert(key);
        self.active.insert(cq);
    }

    /// Takes `key` out of `cq`, queued or set aside.
    pub fn remove(&mut self, cq: ClusterQueueId, key: &QueueKey) {
        self.take_out(cq, key);
        self.refresh(cq);
    }

    /// Takes `key` out of `cq`, queued or set aside, leaving `active` to
    /// [`Queues::refresh`].
    fn take_out(&mut self, cq: ClusterQueueId, key: &QueueKey) {
        let state = &mut self.states[cq.index()];
        if !state.queue.remove(key) {
            state.parked.remove(key);
        }
    }

    /// Moves the workload at `old` in `cq` to `new` (a tenant's scores gave
    /// it another position), queued or set aside; a set-aside one is up for
    /// a try again exactly if the position was.
    pub fn reposition(&mut self, cq: ClusterQueueId, old: &QueueKey, new: QueueKey, parked: bool) {
        self.take_out(cq, old);
        let state = &mut self.states[cq.index()];
        if parked {
            if let Some(Bound::Excluded(done)) = state.live_after {
                if done.same_place(&new) {
                    state.live_after = Some(Bound::Excluded(new));
                }
            }
            state.parked.insert(new);
        } else {
            state.queue.insert(new);
        }
        self.refresh(cq);
    }

    /// Sets the head `key` of `cq` aside until the next wake. Every live
    /// set-aside workload comes after it.
    pub fn park(&mut self, cq: ClusterQueueId, key: QueueKey) {
        let state = &mut self.states[cq.index()];
        state.queue.remove(&key);
        state.parked.insert(key);
        // Those up to and including it are done for this wake; never revive any.
        state.live_after = match state.live_after {
            None => None,
            Some(Bound::Excluded(done)) if done > key => Some(Bound::Excluded(done)),
            Some(_) => Some(Bound::Excluded(key)),
        };
        self.refresh(cq);
    }

    /// Puts every set-aside workload of `cq` up for another try.
    #[inline]
    pub fn wake(&mut self, cq: ClusterQueueId) {
        let state = &mut self.states[cq.index()];
        if !state.parked.is_empty() {
            state.live_after = Some(Bound::Unbounded);
            self.active.insert(cq);
        }
    }

    /// `cq` is active exactly when it has a head.
    fn refresh(&mut self, cq: ClusterQueueId) {
        if self.head(cq).is_some() {
            self.active.insert(cq);
        } else {
            self.active.remove(&cq);
        }
    }

    /// The workloads admitted in `cq`, by (priority, id).
    #[inline]
    pub fn admitted(&self, cq: ClusterQueueId) -> &BTreeSet<(i32, WorkloadId)> {
        &self.states[cq.index()].admitted
    }

    /// `id` (at `priority`) was admitted in `cq`.
    #[inline]
    pub fn admit(&mut self, cq: ClusterQueueId, priority: i32, id: WorkloadId) {
        self.states[cq.index()].admitted.insert((priority, id));
    }

    /// `id` (at `priority`) is no longer admitted in `cq`.
    #[inline]
    pub fn release(&mut self, cq: ClusterQueueId, priority: i32, id: WorkloadId) {
        self.states[cq.index()].admitted.remove(&(priority, id));
    }
}

impl Scheduler {
    /// Scores the workloads submitted since the last cycle (one weight-hook
    /// batch) and queues them.
    pub(super) fn score_new(&mut self, now: Millis, hooks: &mut dyn Hooks) {
        if self.unscored.is_empty() {
            return;
        }
        let batch = self.unscored.take_batch();
        let requests: Vec<WeightRequest<'_>> = batch
            .iter()
            .map(|id| WeightRequest {
                state: self.hook_state(),
                entry: &self.workloads[*id],
                now,
            })
            .collect();
        let weights = hooks.weight(&requests);
        drop(requests);
        for (i, id) in batch.into_iter().enumerate() {
            let weight = weights.get(i).copied().unwrap_or_default();
            let finite = |s: f64| if s.is_finite() { s } else { 0.0 };
            let entry = &mut self.workloads[id];
            entry.score = finite(weight.score);
            entry.slot.score = entry.score;
            entry.tenant_score = weight.tenant.map(finite);
            if !self.back_off_carried(id, now) {
                self.enqueue(id);
            }
        }
    }

    /// Queues a workload (back); a tenant-scored one joins its tenant group,
    /// which is ordered again.
    pub(super) fn enqueue(&mut self, id: WorkloadId) {
        self.requeue_in_place(id);
        if let Some(group) = self.group_of(id) {
            self.permute(&group);
        }
    }

    /// Queues a workload in the slot it holds; its tenant group is ordered
    /// again only at the group's next `enqueue`. For a victim requeued in
    /// the middle of a cycle, whose heads must keep their places.
    pub(super) fn requeue_in_place(&mut self, id: WorkloadId) {
        let entry = &mut self.workloads[id];
        entry.status = Status::Queued;
        let cq = entry.workload.cluster_queue;
        let key = self.key_of(id);
        self.queues.push(cq, key);
        if let Some(group) = self.group_of(id) {
            self.tenant_groups.join(group, id);
        }
    }

    fn group_of(&self, id: WorkloadId) -> Option<TenantGroup> {
        let entry = &self.workloads[id];
        entry.tenant_score.map(|_| {
            let workload = &entry.workload;
            (
                workload.cluster_queue,
                workload.priority,
                workload.namespace.clone(),
            )
        })
    }

    /// Orders a tenant's waiting workloads (of one ClusterQueue and
    /// priority) by their tenant scores, each only among the queue
    /// positions its group's workloads that ask the same as it hold
    /// ([`Workload::asks_same_as`](super::Workload::asks_same_as)): in such
    /// a class the k-th best takes the k-th earliest position. A position
    /// stays what it was — queued, or set aside with the reason it was set
    /// aside — whoever takes it, so every position asks the scheduler for
    /// what it asked before (docs/design.md §3; the module doc says what holds). A
    /// workload a policy denied, or preempted at this instant, keeps its own
    /// position: what set it aside is its own, not its position's.
    pub(super) fn permute(&mut self, group: &TenantGroup) {
        let entries = &self.workloads;
        let cq = group.0;
        let Some(members) = self.tenant_groups.retain(group, |id| {
            let entry = &entries[*id];
            matches!(entry.status, Status::Queued | Status::Inadmissible)
                && entry.workload.cluster_queue == cq
        }) else {
            return;
        };
        if members.len() < 2 {
            return;
        }
        let now = self.now;
        let mut classes: Vec<Vec<WorkloadId>> = Vec::new();
        for &id in members.iter() {
            let entry = &entries[id];
            let own = entry.held_by_tenant
                || entry.preempted_at == Some(now)
                || matches!(
                    entry.reason,
                    Reason::Denied { .. }
                        | Reason::PreemptedThisInstant { .. }
                        | Reason::PreemptionCycle { .. }
                );
            if own {
                continue;
            }
            let same = classes
                .iter_mut()
                .find(|class| entries[class[0]].workload.asks_same_as(&entry.workload));
            match same {
                Some(class) => class.push(id),
                None => classes.push(vec![id]),
            }
        }
        for class in classes.into_iter().filter(|class| class.len() > 1) {
            // The class's positions in queue order: (slot, set aside, why).
            let mut places: Vec<(Slot, bool, Reason)> = class
                .iter()
                .map(|id| {
                    let entry = &self.workloads[*id];
                    let parked = entry.status == Status::Inadmissible;
                    (entry.slot, parked, entry.reason.clone())
                })
                .collect();
            places.sort_by(|a, b| a.0.queue_order(&b.0));
            let mut ranked = class;
            let entries = &self.workloads;
            ranked.sort_by(|a, b| {
                let (ea, eb) = (&entries[*a], &entries[*b]);
                let (ta, tb) = (
                    ea.tenant_score.unwrap_or(0.0),
                    eb.tenant_score.unwrap_or(0.0),
                );
                tb.total_cmp(&ta)
                    .then_with(|| ea.slot.queue_order(&eb.slot))
            });
            for (id, (slot, parked, reason)) in ranked.into_iter().zip(places) {
                if self.workloads[id].slot == slot {
                    continue;
                }
                let old = self.key_of(id);
                let entry = &mut self.workloads[id];
                entry.slot = slot;
                if parked {
                    entry.status = Status::Inadmissible;
                    entry.reason = reason;
                } else {
                    entry.status = Status::Queued;
                }
                let new = self.key_of(id);
                self.queues.reposition(cq, &old, new, parked);
            }
        }
    }

    pub(super) fn key_of(&self, id: WorkloadId) -> QueueKey {
        let entry = &self.workloads[id];
        QueueKey {
            priority: Reverse(entry.workload.priority),
            score: Reverse(Score(entry.slot.score)),
            queue_time: entry.slot.queue_time,
            seq: entry.slot.seq,
            id,
        }
    }

    /// Takes a waiting workload out of its queue (queued or set aside).
    pub(super) fn dequeue(&mut self, id: WorkloadId) {
        let cq = self.workloads[id].workload.cluster_queue;
        let key = self.key_of(id);
        self.queues.remove(cq, &key);
    }

    /// Puts set-aside workloads of `cq`'s cohort tree (all trees if nodes were freed) back in their queues.
    pub(super) fn wake(&mut self, cq: ClusterQueueId, nodes_freed: bool) {
        if nodes_freed {
            self.wake_all();
        } else {
            let members = self.trees.members(cq).clone();
            for &member in members.iter() {
                self.queues.wake(member);
            }
        }
    }

    /// Puts every set-aside workload up for another try.
    pub(super) fn wake_all(&mut self) {
        for member in 0..self.queues.len() {
            self.queues.wake(ClusterQueueId(member as u32));
        }
    }

    /// The head can't be admitted now: BestEffortFIFO sets it aside, StrictFIFO keeps it at the
    /// head — unless its own tenant's policy denied it before: such a workload never holds a queue.
    pub(super) fn set_aside(&mut self, cq: ClusterQueueId, id: WorkloadId, reason: Reason) -> bool {
        let entry = &mut self.workloads[id];
        entry.reason = reason;
        if entry.held_by_tenant
            || self.cluster.cluster_queue(cq).strategy == QueueingStrategy::BestEffortFIFO
        {
            self.park(cq, id);
            true
        } else {
            false
        }
    }

    /// Takes a queued workload out of its queue until something in its cohort frees up.
    /// `id` must be the head of `cq`: every live parked workload comes after it.
    pub(super) fn park(&mut self, cq: ClusterQueueId, id: WorkloadId) {
        let key = self.key_of(id);
        self.workloads[id].status = Status::Inadmissible;
        self.queues.park(cq, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of workload `n` at priority `priority`, queued at `n`.
    fn key(n: u32, priority: i32) -> QueueKey {
        QueueKey {
            priority: Reverse(priority),
            score: Reverse(Score(0.0)),
            queue_time: Millis(n as i64),
            seq: Seq(n as u64),
            id: WorkloadId(n),
        }
    }

    const CQ: ClusterQueueId = ClusterQueueId(1);

    fn active(queues: &Queues) -> Vec<ClusterQueueId> {
        queues.active().iter().copied().collect()
    }

    #[test]
    fn a_queue_is_active_exactly_while_it_has_a_head() {
        let mut queues = Queues::new(2);
        assert!(active(&queues).is_empty() && !queues.anything_waits());
        queues.push(CQ, key(2, 0));
        queues.push(CQ, key(1, 0));
        assert_eq!(active(&queues), vec![CQ]);
        assert_eq!(queues.head(CQ).map(|k| k.id), Some(WorkloadId(1)));
        // Both set aside: waiting, but nothing to try until a wake.
        queues.park(CQ, key(1, 0));
        queues.park(CQ, key(2, 0));
        assert_eq!((queues.head(CQ), active(&queues)), (None, vec![]));
        assert!(queues.anything_waits());
        assert_eq!(queues.waiting_count(CQ), 2);
        // A wake of an empty queue activates nothing.
        queues.wake(ClusterQueueId(0));
        assert!(active(&queues).is_empty());
        queues.wake(CQ);
        assert_eq!(active(&queues), vec![CQ]);
        assert_eq!(queues.head(CQ).map(|k| k.id), Some(WorkloadId(1)));
        queues.remove(CQ, &key(1, 0));
        queues.remove(CQ, &key(2, 0));
        assert_eq!((queues.head(CQ), active(&queues)), (None, vec![]));
        assert!(!queues.anything_waits());
    }

    #[test]
    fn setting_the_head_aside_never_revives_the_ones_before_it() {
        let mut queues = Queues::new(2);
        for n in [1, 2, 3] {
            queues.push(CQ, key(n, 0));
            queues.park(CQ, key(n, 0));
        }
        queues.wake(CQ);
        // Tried in order: each set aside again leaves the next as head.
        queues.park(CQ, key(1, 0));
        assert_eq!(queues.head(CQ).map(|k| k.id), Some(WorkloadId(2)));
        queues.park(CQ, key(2, 0));
        assert_eq!(queues.head(CQ).map(|k| k.id), Some(WorkloadId(3)));
        // A newcomer ahead of the live ones is the head; parking it keeps 3 live.
        queues.push(CQ, key(0, 0));
        assert_eq!(queues.head(CQ).map(|k| k.id), Some(WorkloadId(0)));
        queues.park(CQ, key(0, 0));
        assert_eq!(queues.head(CQ).map(|k| k.id), Some(WorkloadId(3)));
        queues.park(CQ, key(3, 0));
        assert_eq!((queues.head(CQ), active(&queues)), (None, vec![]));
        assert_eq!(queues.waiting_count(CQ), 4);
    }

    #[test]
    fn waiting_in_order_keeps_a_set_aside_workloads_place() {
        let mut queues = Queues::new(2);
        for n in [1, 2, 3] {
            queues.push(CQ, key(n, 0));
        }
        queues.park(CQ, key(1, 0));
        queues.push(CQ, key(4, 5));
        let order: Vec<u32> = queues.waiting_in_order(CQ).map(|id| id.0).collect();
        assert_eq!(order, vec![4, 1, 2, 3]);
        let unordered: Vec<u32> = queues.waiting(CQ).map(|id| id.0).collect();
        assert_eq!(unordered, vec![4, 2, 3, 1]);
        assert_eq!(queues.first_queued(CQ).map(|k| k.id), Some(WorkloadId(4)));
    }

    #[test]
    fn a_repositioned_workload_is_up_for_a_try_exactly_if_its_new_position_was() {
        let mut queues = Queues::new(2);
        for n in [1, 2] {
            queues.push(CQ, key(n, 0));
            queues.park(CQ, key(n, 0));
        }
        queues.wake(CQ);
        queues.park(CQ, key(1, 0));
        // Workload 9 takes position 1 (done for this wake), set aside.
        let mut moved = key(1, 0);
        moved.id = WorkloadId(9);
        queues.reposition(CQ, &key(1, 0), moved, true);
        assert_eq!(queues.head(CQ).map(|k| k.id), Some(WorkloadId(2)));
        // Workload 2 moves to a queued position: the head, active.
        queues.reposition(CQ, &key(2, 0), key(0, 0), false);
        assert_eq!(queues.head(CQ).map(|k| k.id), Some(WorkloadId(0)));
        assert_eq!(queues.waiting_count(CQ), 2);
        queues.remove(CQ, &key(0, 0));
        assert_eq!((queues.head(CQ), active(&queues)), (None, vec![]));
    }

    #[test]
    fn a_tenant_group_holds_a_workload_once_and_goes_when_empty() {
        let mut groups = TenantGroups::default();
        let group: TenantGroup = (CQ, 0, "ns".into());
        groups.join(group.clone(), WorkloadId(3));
        groups.join(group.clone(), WorkloadId(3));
        groups.join(group.clone(), WorkloadId(1));
        let left = groups.retain(&group, |_| true).map(BTreeSet::len);
        assert_eq!(left, Some(2));
        let left = groups.retain(&group, |id| *id == WorkloadId(1));
        assert_eq!(
            left.map(|m| m.iter().copied().collect()),
            Some(vec![WorkloadId(1)])
        );
        assert!(groups.retain(&group, |_| false).is_none());
        assert_eq!(groups.len(), 0);
        // Gone: nothing is asked about it any more.
        assert!(groups.retain(&group, |_| panic!("no members")).is_none());
    }

    #[test]
    fn admitted_workloads_are_ordered_by_priority() {
        let mut queues = Queues::new(2);
        queues.admit(CQ, 5, WorkloadId(1));
        queues.admit(CQ, -1, WorkloadId(7));
        queues.admit(CQ, 5, WorkloadId(0));
        let ids: Vec<u32> = queues.admitted(CQ).iter().map(|&(_, id)| id.0).collect();
        assert_eq!(ids, vec![7, 0, 1]);
        queues.release(CQ, 5, WorkloadId(1));
        assert_eq!(queues.admitted(CQ).len(), 2);
        assert!(queues.admitted(ClusterQueueId(0)).is_empty());
        // Admitted workloads are not waiting ones.
        assert!(active(&queues).is_empty());
    }
}
