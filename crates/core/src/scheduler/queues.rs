//! Queues and ordering: each ClusterQueue's waiting workloads in queue
//! order (priority, policy score, queue time, input order — of the slot a
//! workload holds), the tenant groups whose scores permute only their own
//! slots (DESIGN §3), and the set-aside (inadmissible) workloads with the
//! O(1) wake that puts them up for another try. Never decides admission.

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

    pub(super) fn enqueue(&mut self, id: WorkloadId) {
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
    pub(super) fn permute(&mut self, group: &TenantGroup) {
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

    /// The head can't be admitted now: BestEffortFIFO sets it aside, StrictFIFO keeps it at the head.
    pub(super) fn set_aside(&mut self, cq: ClusterQueueId, id: WorkloadId, reason: Reason) -> bool {
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
