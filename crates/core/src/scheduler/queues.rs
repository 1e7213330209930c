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

/// One ClusterQueue's waiting workloads. Set-aside (inadmissible) workloads
/// stay in `parked`, in queue order; waking them does not move them back:
/// `live_after` marks which of them are up for another try (those after the
/// bound), so a wake costs O(1) instead of one B-tree insert per workload.
#[derive(Clone, Debug, Default)]
pub(super) struct ClusterQueueState {
    pub(super) queue: std::collections::BTreeSet<QueueKey>,
    pub(super) parked: std::collections::BTreeSet<QueueKey>,
    /// `None`: no parked workload is up for a try; otherwise those after this bound are.
    pub(super) live_after: Option<Bound<QueueKey>>,
    /// Admitted workloads by (priority, id), so preemption looks only at lower priorities.
    pub(super) admitted: std::collections::BTreeSet<(i32, WorkloadId)>,
}

impl Scheduler {
    /// Scores the workloads submitted since the last cycle (one weight-hook
    /// batch) and queues them.
    pub(super) fn score_new(&mut self, now: Millis, hooks: &mut dyn Hooks) {
        if self.to_score.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.to_score);
        let requests: Vec<WeightRequest<'_>> = batch
            .iter()
            .map(|id| WeightRequest {
                state: self.hook_state(),
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
        let entry = &mut self.entries[id.index()];
        entry.status = Status::Queued;
        let cq = entry.workload.cluster_queue;
        let key = self.key_of(id);
        self.states[cq.index()].queue.insert(key);
        self.active.insert(cq);
        if let Some(group) = self.group_of(id) {
            self.tenant_groups.entry(group).or_default().insert(id);
        }
    }

    fn group_of(&self, id: WorkloadId) -> Option<TenantGroup> {
        let entry = &self.entries[id.index()];
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
        let Some(members) = self.tenant_groups.get_mut(group) else {
            return;
        };
        let entries = &self.entries;
        let cq = group.0;
        members.retain(|id| {
            let entry = &entries[id.index()];
            matches!(entry.status, Status::Queued | Status::Inadmissible)
                && entry.workload.cluster_queue == cq
        });
        if members.len() < 2 {
            if members.is_empty() {
                self.tenant_groups.remove(group);
            }
            return;
        }
        let now = self.now;
        let mut classes: Vec<Vec<WorkloadId>> = Vec::new();
        for &id in members.iter() {
            let entry = &entries[id.index()];
            let own = entry.held_by_tenant
                || entry.preempted_at == Some(now)
                || matches!(
                    entry.reason,
                    Reason::Denied { .. } | Reason::PreemptedThisInstant { .. }
                );
            if own {
                continue;
            }
            let same = classes.iter_mut().find(|class| {
                entries[class[0].index()]
                    .workload
                    .asks_same_as(&entry.workload)
            });
            match same {
                Some(class) => class.push(id),
                None => classes.push(vec![id]),
            }
        }
        let mut moved = false;
        for class in classes.into_iter().filter(|class| class.len() > 1) {
            // The class's positions in queue order: (slot, set aside, why).
            let mut places: Vec<(Slot, bool, Reason)> = class
                .iter()
                .map(|id| {
                    let entry = &self.entries[id.index()];
                    let parked = entry.status == Status::Inadmissible;
                    (entry.slot, parked, entry.reason.clone())
                })
                .collect();
            places.sort_by(|a, b| a.0.queue_order(&b.0));
            let mut ranked = class;
            let entries = &self.entries;
            ranked.sort_by(|a, b| {
                let (ea, eb) = (&entries[a.index()], &entries[b.index()]);
                let (ta, tb) = (
                    ea.tenant_score.unwrap_or(0.0),
                    eb.tenant_score.unwrap_or(0.0),
                );
                tb.total_cmp(&ta)
                    .then_with(|| ea.slot.queue_order(&eb.slot))
            });
            for (id, (slot, parked, reason)) in ranked.into_iter().zip(places) {
                if self.entries[id.index()].slot == slot {
                    continue;
                }
                moved = true;
                let old = self.key_of(id);
                let state = &mut self.states[cq.index()];
                if !state.queue.remove(&old) {
                    state.parked.remove(&old);
                }
                let entry = &mut self.entries[id.index()];
                entry.slot = slot;
                if parked {
                    entry.status = Status::Inadmissible;
                    entry.reason = reason;
                } else {
                    entry.status = Status::Queued;
                }
                let new = self.key_of(id);
                let state = &mut self.states[cq.index()];
                if parked {
                    // Up for a try again exactly if the position was.
                    if let Some(Bound::Excluded(done)) = state.live_after {
                        if done.same_place(&new) {
                            state.live_after = Some(Bound::Excluded(new));
                        }
                    }
                    state.parked.insert(new);
                } else {
                    state.queue.insert(new);
                }
            }
        }
        if moved {
            self.refresh_active(cq);
        }
    }

    /// The next workload to examine in `cq`: the first of its queue and its live parked workloads.
    pub(super) fn head(&self, cq: ClusterQueueId) -> Option<QueueKey> {
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

    pub(super) fn refresh_active(&mut self, cq: ClusterQueueId) {
        if self.head(cq).is_some() {
            self.active.insert(cq);
        } else {
            self.active.remove(&cq);
        }
    }

    pub(super) fn key_of(&self, id: WorkloadId) -> QueueKey {
        let entry = &self.entries[id.index()];
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
        let cq = self.entries[id.index()].workload.cluster_queue;
        let key = self.key_of(id);
        let state = &mut self.states[cq.index()];
        if !state.queue.remove(&key) {
            state.parked.remove(&key);
        }
        self.refresh_active(cq);
    }

    /// Puts set-aside workloads of `cq`'s cohort tree (all trees if nodes were freed) back in their queues.
    pub(super) fn wake(&mut self, cq: ClusterQueueId, nodes_freed: bool) {
        if nodes_freed {
            self.wake_all();
        } else {
            let members = self.tree_members[cq.index()].clone();
            for &member in members.iter() {
                self.wake_queue(member);
            }
        }
    }

    /// Puts every set-aside workload up for another try.
    pub(super) fn wake_all(&mut self) {
        for member in 0..self.states.len() {
            self.wake_queue(ClusterQueueId(member as u32));
        }
    }

    fn wake_queue(&mut self, cq: ClusterQueueId) {
        let state = &mut self.states[cq.index()];
        if !state.parked.is_empty() {
            state.live_after = Some(Bound::Unbounded);
            self.active.insert(cq);
        }
    }

    /// The head can't be admitted now: BestEffortFIFO sets it aside, StrictFIFO keeps it at the
    /// head — unless its own tenant's policy denied it before: such a workload never holds a queue.
    pub(super) fn set_aside(&mut self, cq: ClusterQueueId, id: WorkloadId, reason: Reason) -> bool {
        let entry = &mut self.entries[id.index()];
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
}
