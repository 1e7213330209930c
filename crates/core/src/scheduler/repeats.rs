//! Preemption cycles (docs/design.md §3): a preemption that would repeat
//! one already made since the cluster last changed is held.
//!
//! Kueue's preemption rules can cycle. Each preemption of such a cycle is
//! allowed on its own — fair sharing's share rules, priority within a
//! ClusterQueue, borrowing quota that is free — yet together they bring the
//! same workloads back where they were, and the same preemptions follow
//! again, forever (kubernetes-sigs/kueue#3779, #6774, #14543 are such
//! cycles). One found here: a small low-priority workload takes quota back
//! from another queue by fair sharing, a bigger, higher-priority workload of
//! its own queue preempts it and borrows past the other queue's share, and
//! the other queue reclaims by fair sharing again.
//!
//! The scheduler is deterministic, so the same preemptor taking the same
//! victims twice with nothing arriving, finishing or changing in between
//! can only be such a cycle: the second time the preemptor is set aside
//! instead, told why, until the cluster changes. What counts as a change:
//! a workload submitted, finished, failed or withdrawn, a node or a
//! provisioning request changing, the configuration, the policies in force
//! or the fair-sharing weights changing, and evictions the scheduler's
//! timers make (pods not ready in time, a reclaim timeout) — each of which
//! Kueue would let preempt again. A workload's own pods becoming ready is
//! not: it follows from the scheduler's own admissions.

use std::collections::BTreeSet;

use super::workload::WorkloadId;
use super::Scheduler;

/// The preemptions made since the cluster last changed.
///
/// What it guarantees: [`Repeats::repeats`] is true only for a preemptor
/// and victim set [`Repeats::record`]ed since the last
/// [`Repeats::clear`]; victims are compared as a set. What it never does:
/// decide anything itself, or grow past the preemptions made between two
/// changes.
#[derive(Debug, Default)]
pub(super) struct Repeats {
    made: BTreeSet<(WorkloadId, Vec<WorkloadId>)>,
    /// The scheduler epoch (policies, fair-sharing weights) they were made in.
    epoch: u64,
    /// Whether a workload was set aside for repeating one.
    held: bool,
}

fn key(preemptor: WorkloadId, victims: &[WorkloadId]) -> (WorkloadId, Vec<WorkloadId>) {
    let mut victims = victims.to_vec();
    victims.sort_unstable();
    (preemptor, victims)
}

impl Repeats {
    /// Whether `preemptor` took exactly `victims` since the last change
    /// (`epoch` is the scheduler's now: a different one is a change).
    pub fn repeats(&mut self, epoch: u64, preemptor: WorkloadId, victims: &[WorkloadId]) -> bool {
        if epoch != self.epoch {
            self.made.clear();
            self.epoch = epoch;
        }
        self.made.contains(&key(preemptor, victims))
    }

    /// `preemptor` took `victims`.
    pub fn record(&mut self, preemptor: WorkloadId, victims: &[WorkloadId]) {
        self.made.insert(key(preemptor, victims));
    }

    /// A workload was set aside for repeating a preemption.
    pub fn hold(&mut self) {
        self.held = true;
    }

    /// The cluster changed: every preemption may be made again. Whether a
    /// workload was set aside for repeating one (it must be woken).
    pub fn clear(&mut self) -> bool {
        self.made.clear();
        std::mem::take(&mut self.held)
    }
}

impl Scheduler {
    /// The cluster changed (see the module's note): the preemptions made
    /// before may be made again, and what waited for that is woken.
    pub(super) fn cluster_changed(&mut self) {
        if self.repeats.clear() {
            self.wake_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preemption_repeats_until_the_cluster_changes() {
        let mut r = Repeats::default();
        let (a, b, c) = (WorkloadId(1), WorkloadId(2), WorkloadId(3));
        assert!(!r.repeats(0, a, &[b, c]));
        r.record(a, &[b, c]);
        assert!(r.repeats(0, a, &[c, b]), "victims compare as a set");
        assert!(
            !r.repeats(0, a, &[b]),
            "another victim set is another preemption"
        );
        assert!(!r.repeats(0, b, &[b, c]), "another preemptor");
        r.hold();
        assert!(r.clear(), "the held workload must be woken");
        assert!(!r.clear(), "only once");
        assert!(!r.repeats(0, a, &[b, c]));
        r.record(a, &[b, c]);
        assert!(!r.repeats(1, a, &[b, c]), "a new epoch is a change");
    }
}
