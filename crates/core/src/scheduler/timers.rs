//! The scheduler's timers: when a backoff ends, a reclaim deadline or a
//! pods-ready timeout is due. Only the set of due times and what each is
//! for; what a timer does when it fires is `lifecycle`'s and
//! `pods_ready`'s. Never reads a clock: "now" is always the caller's.

use std::collections::BTreeSet;

use crate::model::Millis;

use super::workload::WorkloadId;

/// What a timer does when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TimerKind {
    /// A backoff ends: the workload is queued again.
    BackoffEnds,
    /// `resourceReclaim.reclaimTimeout` after an admission.
    Reclaim,
    /// `waitForPodsReady.timeout` after an admission.
    PodsReady,
    /// `waitForPodsReady.recoveryTimeout` after pods all ready once were not.
    PodsRecovery,
}

/// One armed timer: due at `at`, for the workload `id` as it was in its
/// admission epoch `epoch` (a timer whose workload moved on since is stale).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Timer {
    /// When it is due.
    pub at: Millis,
    /// What it is for.
    pub kind: TimerKind,
    /// The workload it is about.
    pub id: WorkloadId,
    /// The workload's [`Entry::epoch`](super::Entry::epoch) when it was armed.
    pub epoch: u32,
}

/// The armed timers, earliest first.
///
/// What it guarantees: timers come out in (due time, kind, workload, epoch)
/// order, each at most once, and never before they are due; arming the
/// same timer twice arms it once. What it never does: cancel or skip a
/// stale timer — a workload that moved on (a new epoch, another status)
/// leaves its old timers armed, and whoever fires them checks the epoch.
#[derive(Debug, Default)]
pub(super) struct Timers {
    armed: BTreeSet<Timer>,
}

impl Timers {
    /// Arms a timer due at `at`.
    #[inline]
    pub fn arm(&mut self, at: Millis, kind: TimerKind, id: WorkloadId, epoch: u32) {
        self.armed.insert(Timer {
            at,
            kind,
            id,
            epoch,
        });
    }

    /// When the earliest armed timer is due.
    #[inline]
    pub fn next_due(&self) -> Option<Millis> {
        self.armed.first().map(|t| t.at)
    }

    /// Takes out the earliest timer if it is due at or before `now`.
    #[inline]
    pub fn pop_due(&mut self, now: Millis) -> Option<Timer> {
        if self.armed.first()?.at > now {
            return None;
        }
        self.armed.pop_first()
    }

    /// How many timers are armed.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.armed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: i64) -> Millis {
        Millis(n)
    }

    #[test]
    fn timers_come_out_earliest_first_and_only_when_due() {
        let mut timers = Timers::default();
        timers.arm(ms(30), TimerKind::Reclaim, WorkloadId(1), 0);
        timers.arm(ms(10), TimerKind::PodsReady, WorkloadId(2), 3);
        timers.arm(ms(10), TimerKind::BackoffEnds, WorkloadId(5), 1);
        assert_eq!(timers.next_due(), Some(ms(10)));
        assert_eq!(timers.pop_due(ms(9)), None);
        let first = timers.pop_due(ms(10)).expect("due");
        assert_eq!(
            (first.kind, first.id, first.epoch),
            (TimerKind::BackoffEnds, WorkloadId(5), 1)
        );
        let second = timers.pop_due(ms(20)).expect("due");
        assert_eq!(
            (second.kind, second.id),
            (TimerKind::PodsReady, WorkloadId(2))
        );
        assert_eq!(timers.pop_due(ms(29)), None);
        assert_eq!(timers.next_due(), Some(ms(30)));
        assert_eq!(timers.pop_due(ms(100)).map(|t| t.at), Some(ms(30)));
        assert_eq!((timers.pop_due(ms(100)), timers.next_due()), (None, None));
    }

    #[test]
    fn arming_the_same_timer_twice_arms_it_once() {
        let mut timers = Timers::default();
        timers.arm(ms(5), TimerKind::Reclaim, WorkloadId(0), 2);
        timers.arm(ms(5), TimerKind::Reclaim, WorkloadId(0), 2);
        assert_eq!(timers.len(), 1);
        // Another epoch is another timer: the stale one stays for the caller to skip.
        timers.arm(ms(5), TimerKind::Reclaim, WorkloadId(0), 3);
        assert_eq!(timers.len(), 2);
        assert_eq!(timers.pop_due(ms(5)).map(|t| t.epoch), Some(2));
        assert_eq!(timers.pop_due(ms(5)).map(|t| t.epoch), Some(3));
    }
}
