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

/// What a head assignment was computed against: the version of its
/// cohort tree's usage, of the nodes, and the scheduler's epoch (policies
/// and fair-sharing weights).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Read {
    quota_version: u64,
    capacity_version: u64,
    epoch: u64,
}

/// A ClusterQueue's last head assignment and what it was computed from.
#[derive(Clone, Debug)]
pub(super) struct HeadMemo {
    /// The head it was computed for, and that head's own input order (its
    /// slot may have been given to another workload since).
    head: WorkloadId,
    seq: Seq,
    queue_time: Millis,
    read: Read,
    assignment: Assignment,
}

/// Per ClusterQueue: its last head's assignment, for reuse.
///
/// What it guarantees: one memo per ClusterQueue, the last remembered; a
/// memo is handed out only against exactly the [`Read`] it was computed
/// with — any change of the tree's usage, the nodes or the epoch since
/// makes it unavailable. What it never does: decide whether the head
/// asks the same as the memo's (the scheduler checks that, with the
/// entries), or compute an assignment.
#[derive(Debug)]
pub(super) struct HeadMemos {
    memos: Vec<Option<HeadMemo>>,
}

impl HeadMemos {
    /// No memo for any of `cqs` ClusterQueues.
    pub fn new(cqs: usize) -> HeadMemos {
        HeadMemos {
            memos: vec![None; cqs],
        }
    }

    /// `cq`'s memo, if it was computed against `read`.
    #[inline]
    pub fn current(&self, cq: ClusterQueueId, read: Read) -> Option<&HeadMemo> {
        self.memos[cq.index()]
            .as_ref()
            .filter(|memo| memo.read == read)
    }

    /// Remembers `memo` as `cq`'s, in place of the one before.
    #[inline]
    pub fn remember(&mut self, cq: ClusterQueueId, memo: HeadMemo) {
        self.memos[cq.index()] = Some(memo);
    }
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
        // The flavor hook's and the placement hook's answers (when the
        // latter orders the flavors) are not among what a memo's reuse checks.
        let reusable = self.flavors_of[cq.index()].len() <= 1
            || !(hooks.orders_flavors()
                || hooks.places_workload(self.hook_state(), &self.workloads[id]));
        if !reusable {
            return self.assign_head(cq, id, hooks);
        }
        let read = self.read(cq);
        if let Some(memo) = self.head_memos.current(cq, read) {
            if self.still_holds(cq, id, memo) {
                return memo.assignment.clone();
            }
        }
        let assignment = self.assign_head(cq, id, hooks);
        let entry = &self.workloads[id];
        let memo = HeadMemo {
            head: id,
            seq: entry.seq,
            queue_time: entry.slot.queue_time,
            read: self.read(cq),
            assignment: assignment.clone(),
        };
        self.head_memos.remember(cq, memo);
        assignment
    }

    /// What an assignment of `cq`'s head reads now.
    fn read(&self, cq: ClusterQueueId) -> Read {
        Read {
            quota_version: self.quota.version(cq),
            capacity_version: self.capacity.version(),
            epoch: self.epoch,
        }
    }

    /// Whether `memo`, computed against what `cq`'s head reads now, is
    /// what head `id` would get: it asks the same as the memo's head.
    fn still_holds(&self, cq: ClusterQueueId, id: WorkloadId, memo: &HeadMemo) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::assign::Mode;

    fn memo(head: u32, read: Read) -> HeadMemo {
        HeadMemo {
            head: WorkloadId(head),
            seq: Seq(head as u64),
            queue_time: Millis::ZERO,
            read,
            assignment: Assignment {
                pod_sets: Vec::new(),
                usage: Vec::new(),
                placements: Vec::new(),
                mode: Mode::Fit,
                borrowing: false,
                borrow_level: 0,
                not_fit: None,
                counts: Vec::new(),
                victims: None,
            },
        }
    }

    #[test]
    fn a_memo_is_handed_out_only_against_what_it_read() {
        let read = Read {
            quota_version: 3,
            capacity_version: 5,
            epoch: 1,
        };
        let (cq, other) = (ClusterQueueId(0), ClusterQueueId(1));
        let mut memos = HeadMemos::new(2);
        assert!(memos.current(cq, read).is_none());
        memos.remember(cq, memo(7, read));
        assert_eq!(memos.current(cq, read).map(|m| m.head), Some(WorkloadId(7)));
        assert!(memos.current(other, read).is_none());
        let changed = [
            Read {
                quota_version: 4,
                ..read
            },
            Read {
                capacity_version: 6,
                ..read
            },
            Read { epoch: 2, ..read },
        ];
        for changed in changed {
            assert!(memos.current(cq, changed).is_none(), "{changed:?}");
        }
        // The last remembered replaces the one before.
        memos.remember(cq, memo(8, changed[2]));
        assert!(memos.current(cq, read).is_none());
        assert_eq!(
            memos.current(cq, changed[2]).map(|m| m.head),
            Some(WorkloadId(8))
        );
    }
}
