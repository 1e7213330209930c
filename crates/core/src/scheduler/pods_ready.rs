//! All-or-nothing admission, Kueue's `waitForPodsReady`
//! (`Cluster::pods_ready`): an admitted workload's pods must all be ready
//! within the timeout (the driver says so with `Input::PodsReady`), and,
//! with `recoveryTimeout`, all ready again within it once they are not
//! (`Input::PodsNotReady`: a pod failed, its node went away), or it
//! is evicted (`PodsReadyTimeout`) and queued again after a backoff that
//! doubles with each requeue, deactivated past the requeuing limit; with
//! `blockAdmission`, nothing is admitted while an admitted workload's pods
//! are not all ready. Never admits anything itself; only `cycle` does.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::Millis;

use super::reason::{Eviction, Reason};
use super::timers::TimerKind;
use super::workload::{Status, WorkloadId};
use super::{Event, Scheduler};

/// Admitted workloads whose pods are not all ready yet, while
/// `waitForPodsReady` is on, and of those, the ones recovering: whose pods
/// were all ready once, with since when they are not.
///
/// What it guarantees: every recovering workload is unready too; a workload
/// said ready (or forgotten) is neither; [`Unready::first`] is the lowest
/// unready id. What it never does: look at a workload's status, arm a
/// timer or evict — the scheduler does, from what this answers.
#[derive(Debug, Default)]
pub(super) struct Unready {
    /// Admitted workloads whose pods are not all ready.
    waiting: BTreeSet<WorkloadId>,
    /// Of `waiting`, those whose pods were all ready once: since when they
    /// are not (`recoveryTimeout` counts from then).
    recovering: BTreeMap<WorkloadId, Millis>,
}

impl Unready {
    /// `id` was admitted: its pods are not all ready yet.
    #[inline]
    pub fn admitted(&mut self, id: WorkloadId) {
        self.waiting.insert(id);
    }

    /// `id`'s pods, all ready once, are not since `since`.
    #[inline]
    pub fn lost_since(&mut self, id: WorkloadId, since: Millis) {
        self.waiting.insert(id);
        self.recovering.insert(id, since);
    }

    /// `id`'s pods are all ready, or it is no longer admitted: whether it
    /// was waiting.
    #[inline]
    pub fn forget(&mut self, id: WorkloadId) -> bool {
        self.recovering.remove(&id);
        self.waiting.remove(&id)
    }

    /// Whether `id`'s pods are not all ready.
    #[inline]
    pub fn contains(&self, id: WorkloadId) -> bool {
        self.waiting.contains(&id)
    }

    /// Since when `id`'s pods, all ready once, are not; `None` unless it is
    /// recovering.
    #[inline]
    pub fn recovering_since(&self, id: WorkloadId) -> Option<Millis> {
        self.recovering.get(&id).copied()
    }

    /// Whether no admitted workload waits for its pods.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The lowest unready workload: the one `blockAdmission` names.
    #[inline]
    pub fn first(&self) -> Option<WorkloadId> {
        self.waiting.first().copied()
    }

    /// Every unready workload, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = WorkloadId> + '_ {
        self.waiting.iter().copied()
    }
}

impl Scheduler {
    /// After an admission: watch for its pods, until the timeout.
    pub(super) fn await_pods_ready(&mut self, id: WorkloadId) {
        let Some(policy) = self.cluster.pods_ready else {
            return;
        };
        let entry = &self.workloads[id];
        let Some(at) = entry.admission.as_ref().map(|a| a.at) else {
            return;
        };
        self.unready.admitted(id);
        self.timers.arm(
            at.saturating_add(policy.timeout),
            TimerKind::PodsReady,
            id,
            entry.epoch,
        );
    }

    /// After pods all ready once were not (since `since`): watch for them,
    /// until the recovery timeout. Without one, nothing waits: Kueue's
    /// rule, the workload stays admitted.
    pub(super) fn await_recovery(&mut self, id: WorkloadId, since: Millis) {
        let Some(recovery) = self.cluster.pods_ready.and_then(|p| p.recovery_timeout) else {
            return;
        };
        self.unready.lost_since(id, since);
        let epoch = self.workloads[id].epoch;
        self.timers.arm(
            since.saturating_add(recovery),
            TimerKind::PodsRecovery,
            id,
            epoch,
        );
    }

    /// The driver saw the pods of admitted workload `id`, all ready once,
    /// no longer all ready. Whether that changed anything.
    pub(super) fn pods_not_ready(&mut self, id: WorkloadId, now: Millis) -> bool {
        let admitted = self.get(id).is_some_and(|e| e.status == Status::Admitted);
        if !admitted || self.unready.contains(id) || self.cluster.pods_ready.is_none() {
            return false;
        }
        self.await_recovery(id, now);
        self.unready.contains(id)
    }

    /// Whether the recovery timer of `id` due `at` is the one in force
    /// (not one of an earlier time its pods were not ready).
    pub(super) fn recovery_due(&self, id: WorkloadId, at: Millis) -> bool {
        let recovery = self.cluster.pods_ready.and_then(|p| p.recovery_timeout);
        match (self.unready.recovering_since(id), recovery) {
            (Some(since), Some(recovery)) => since.saturating_add(recovery) == at,
            _ => false,
        }
    }

    /// The driver saw every pod of admitted workload `id` ready (or done).
    /// Whether that changed anything.
    pub(super) fn pods_ready(&mut self, id: WorkloadId) -> bool {
        let admitted = self.get(id).is_some_and(|e| e.status == Status::Admitted);
        if !admitted || !self.unready.forget(id) {
            return false;
        }
        if self.block_admission() && self.unready.is_empty() {
            self.wake_all();
        }
        true
    }

    /// Its pods were not all ready in time (`recovery`: again, within
    /// `recoveryTimeout`): evicted, and queued again after
    /// `backoffBaseSeconds` doubling with each requeue (at most
    /// `backoffMaxSeconds`), or deactivated past `backoffLimitCount`.
    pub(super) fn pods_ready_timeout(
        &mut self,
        id: WorkloadId,
        recovery: bool,
        now: Millis,
        events: &mut Vec<Event>,
    ) {
        let Some(policy) = self.cluster.pods_ready else {
            return;
        };
        let timeout = match (recovery, policy.recovery_timeout) {
            (true, Some(recovery)) => recovery,
            _ => policy.timeout,
        };
        let cause = Eviction::PodsReadyTimeout { timeout, recovery };
        self.evict(id, cause, None, events);
        let entry = &mut self.workloads[id];
        entry.pods_ready_requeues += 1;
        let requeues = entry.pods_ready_requeues;
        if policy.backoff_limit.is_some_and(|limit| requeues > limit) {
            let limit = policy.backoff_limit.unwrap_or_default();
            entry.status = Status::Deactivated;
            entry.reason = Reason::RequeuingLimitExceeded {
                requeues: requeues - 1,
                limit,
            };
            events.push(Event::Deactivated {
                workload: id,
                retries: requeues - 1,
                max_retries: limit,
            });
            return;
        }
        if !policy.requeue_at_creation {
            // Kueue's `timestamp: Eviction`: queued from now on, behind
            // those that waited meanwhile; the slot's score and input
            // order stay its own.
            entry.queue_time = now;
            entry.slot.queue_time = now;
        }
        let until = now.saturating_add(policy.backoff(requeues));
        entry.status = Status::Backoff;
        entry.reason = Reason::PodsReadyBackoff {
            timeout,
            recovery,
            requeue: requeues,
            limit: policy.backoff_limit,
            until,
        };
        self.timers
            .arm(until, TimerKind::BackoffEnds, id, entry.epoch);
    }

    /// Whether `blockAdmission` is in force.
    pub(super) fn block_admission(&self) -> bool {
        self.cluster.pods_ready.is_some_and(|p| p.block_admission)
    }

    /// With `blockAdmission`, the admitted workload (`namespace/name`)
    /// whose pods all admission waits for; `None` when nothing blocks it.
    pub(crate) fn admission_blocked_by(&self) -> Option<String> {
        if !self.block_admission() {
            return None;
        }
        let id = self.unready.first()?;
        let workload = &self.workloads[id].workload;
        Some(format!("{}/{}", workload.namespace, workload.name))
    }

    /// Whether admitted workload `id` still waits for its pods to be ready
    /// (`waitForPodsReady` on, not yet said ready).
    pub fn awaiting_pods(&self, id: WorkloadId) -> bool {
        self.unready.contains(id)
    }

    /// Whether admitted workload `id` waits for its pods to be all ready
    /// again (`recoveryTimeout`), having had them all ready once.
    pub fn recovering_pods(&self, id: WorkloadId) -> bool {
        self.unready.recovering_since(id).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recovering_workload_is_unready_and_ready_clears_both() {
        let mut unready = Unready::default();
        assert!(unready.is_empty() && unready.first().is_none());
        unready.admitted(WorkloadId(4));
        unready.lost_since(WorkloadId(2), Millis(7));
        assert!(unready.contains(WorkloadId(2)) && unready.contains(WorkloadId(4)));
        assert_eq!(unready.recovering_since(WorkloadId(2)), Some(Millis(7)));
        assert_eq!(unready.recovering_since(WorkloadId(4)), None);
        assert_eq!(unready.first(), Some(WorkloadId(2)));
        assert!(unready.forget(WorkloadId(2)));
        assert!(!unready.contains(WorkloadId(2)));
        assert_eq!(unready.recovering_since(WorkloadId(2)), None);
        assert!(!unready.forget(WorkloadId(2)));
        assert_eq!(unready.iter().collect::<Vec<_>>(), vec![WorkloadId(4)]);
        assert!(unready.forget(WorkloadId(4)) && unready.is_empty());
    }

    #[test]
    fn losing_pods_again_moves_the_recovery_start() {
        let mut unready = Unready::default();
        unready.lost_since(WorkloadId(1), Millis(3));
        unready.forget(WorkloadId(1));
        unready.lost_since(WorkloadId(1), Millis(9));
        assert_eq!(unready.recovering_since(WorkloadId(1)), Some(Millis(9)));
        assert_eq!(unready.iter().count(), 1);
    }
}
