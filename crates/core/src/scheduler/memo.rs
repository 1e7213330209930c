//! The reuse of a ClusterQueue's last head assignment. After a release in
//! a cohort, every set-aside workload of its tree is up for another try,
//! and one queue's heads mostly ask the same as the head before them (a
//! stream of like jobs): assigning flavors again, with the preemption
//! oracle's victim searches, would find what it found a moment ago. So
//! each ClusterQueue keeps its last head's assignment with what it read —
//! the versions of its cohort tree's usage and of the nodes, and the
//! scheduler's epoch (policies and fair-sharing weights) — and a head that
//! asks the same ([`Workload::asks_same_as`]) gets a copy while none of
//! those changed. Decides nothing itself: a reused assignment is the one
//! [`Scheduler::assign_head`] would return.
//!
//! What an assignment depends on beyond what a head asks: the quota tree
//! (usage), the nodes (free space, readiness), the flavor hook's order
//! (so nothing is reused while a flavor policy is in force:
//! [`Hooks::orders_flavors`]), the fair-sharing weights, and, for a
//! `LowerOrNewerEqualPriority` queue, the head's queue time (which
//! same-priority workloads of its queue are newer).
//!
//! [`Workload::asks_same_as`]: super::Workload::asks_same_as

use crate::model::api::WithinClusterQueue;
use crate::model::cluster::ClusterQueueId;
use crate::model::Millis;

use super::assign::Assignment;
use super::hooks::Hooks;
use super::workload::{Seq, WorkloadId};
use super::Scheduler;

/// A ClusterQueue's last head assignment and what it was computed from.
#[derive(Clone, Debug)]
pub(super) struct HeadMemo {
    /// The head it was computed for, and that head's own input order (its
    /// slot may have been given to another workload since).
    head: WorkloadId,
    seq: Seq,
    queue_time: Millis,
    quota_version: u64,
    capacity_version: u64,
    epoch: u64,
    assignment: Assignment,
}

impl Scheduler {
    /// [`Scheduler::assign_head`], reusing the queue's last assignment when
    /// `id` asks the same as that head did against unchanged state.
    pub(super) fn assign_head_reusing(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        hooks: &mut dyn Hooks,
    ) -> Assignment {
        let reusable = self.flavors_of[cq.index()].len() <= 1 || !hooks.orders_flavors();
        if !reusable {
            return self.assign_head(cq, id, hooks);
        }
        if let Some(memo) = &self.head_memo[cq.index()] {
            if self.still_holds(cq, id, memo) {
                return memo.assignment.clone();
            }
        }
        let assignment = self.assign_head(cq, id, hooks);
        let entry = &self.workloads[id];
        self.head_memo[cq.index()] = Some(HeadMemo {
            head: id,
            seq: entry.seq,
            queue_time: entry.slot.queue_time,
            quota_version: self.quota.version(cq),
            capacity_version: self.capacity.version(),
            epoch: self.epoch,
            assignment: assignment.clone(),
        });
        assignment
    }

    fn still_holds(&self, cq: ClusterQueueId, id: WorkloadId, memo: &HeadMemo) -> bool {
        if memo.quota_version != self.quota.version(cq)
            || memo.capacity_version != self.capacity.version()
            || memo.epoch != self.epoch
        {
            return false;
        }
        let Some(template) = self.workloads.all().get(memo.head.index()) else {
            return false;
        };
        let head = &self.workloads[id];
        let newer_matters = self.cluster.cluster_queue(cq).within_cluster_queue
            == WithinClusterQueue::LowerOrNewerEqualPriority;
        template.seq == memo.seq
            && (!newer_matters || head.slot.queue_time == memo.queue_time)
            && (memo.head == id || template.workload.asks_same_as(&head.workload))
    }
}
