//! A workload's life outside the scheduling cycle: submission, finishing,
//! failing, withdrawal (the job was deleted), timers (retry backoff ends,
//! reclaim deadlines), eviction and the retry policy that follows it.
//! Releases quota and nodes; never admits anything (that is `cycle`).

use std::collections::BTreeMap;

use crate::model::cluster::{FlavorResource, RetryPolicy};
use crate::model::{Amount, Millis};

use super::assign;
use super::entry::{Backoff, Carried, Entry};
use super::hooks::Hooks;
use super::reason::{Eviction, Reason, Requeue};
use super::store::Vacancy;
use super::timers::{Timer, TimerKind};
use super::workload::{Admission, Slot, Status, Workload, WorkloadId};
use super::{Event, Scheduler};

/// Workloads submitted and not scored yet, in submission order (the next
/// weight-hook batch), and the backoffs some of them carried from before
/// a driver restart.
///
/// What it guarantees: the batch keeps the order workloads were put in,
/// and taking it leaves it empty; a carried backoff is handed out at most
/// once ([`Unscored::take_carried`]). What it never does: score, queue or
/// look at a workload's status — the scheduler puts in only workloads
/// waiting to be scored.
#[derive(Debug, Default)]
pub(super) struct Unscored {
    /// Submitted, not scored yet, in submission order.
    batch: Vec<WorkloadId>,
    /// Of those, the ones that were backing off before the driver
    /// restarted: until when, and why (they back off until then once scored).
    carried: BTreeMap<WorkloadId, (Millis, Backoff)>,
}

impl Unscored {
    /// `id` waits to be scored, after those before it.
    #[inline]
    pub fn push(&mut self, id: WorkloadId) {
        self.batch.push(id);
    }

    /// `id` no longer waits to be scored; a backoff it carried goes with it
    /// (a later workload in its slot must not inherit it).
    #[inline]
    pub fn remove(&mut self, id: WorkloadId) {
        self.batch.retain(|&w| w != id);
        self.carried.remove(&id);
    }

    /// Whether nothing waits to be scored.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// Takes the batch to score, in order, leaving none.
    #[inline]
    pub fn take_batch(&mut self) -> Vec<WorkloadId> {
        std::mem::take(&mut self.batch)
    }

    /// `id` was backing off, until `until`, before the driver restarted.
    #[inline]
    pub fn carry(&mut self, id: WorkloadId, until: Millis, why: Backoff) {
        self.carried.insert(id, (until, why));
    }

    /// The backoff `id` carried, once.
    #[inline]
    pub fn take_carried(&mut self, id: WorkloadId) -> Option<(Millis, Backoff)> {
        self.carried.remove(&id)
    }

    /// Across a reconfiguration (ids kept): the backoffs carried under `old`.
    pub fn carry_over(&mut self, old: &Unscored) {
        self.carried = old.carried.clone();
    }
}

impl Scheduler {
    /// Adds a workload at `now` (its queue time). It is scored and queued at
    /// the next cycle. A withdrawn workload's slot is reused, lowest first.
    /// `queue_time` (at most `now`) orders it in its queue: the submission
    /// time, or when the job was created for a driver that learns of jobs
    /// late (the operator after a restart).
    pub(super) fn submit(
        &mut self,
        workload: Workload,
        now: Millis,
        queue_time: Millis,
    ) -> WorkloadId {
        let queue_time = queue_time.min(now);
        let Vacancy { id, epoch, seq } = self.workloads.vacancy();
        let cq = workload.cluster_queue;
        for ps in &workload.pod_sets {
            let listed = &self.flavors_of[cq.index()];
            let eligible = assign::eligible_flavors(&self.cluster, listed, ps);
            // Every flavor the queue lists: no constraint worth remembering.
            let flavors = if eligible.len() == listed.len() {
                Vec::new()
            } else {
                eligible
            };
            self.history
                .record_pods(cq, &ps.per_pod, &flavors, ps.count);
        }
        let mut reason = Reason::None;
        let mut status = Status::Scoring;
        if !self.cluster.namespace_allowed(cq, &workload.namespace) {
            status = Status::Unschedulable;
            reason = Reason::NamespaceNotSelected;
        } else if let Some(why) = assign::never_fits(&self.ctx(), cq, &workload) {
            status = Status::Unschedulable;
            reason = Reason::NeverFits(why);
        }
        let entry = Entry {
            workload,
            status,
            queue_time,
            seq,
            score: 0.0,
            tenant_score: None,
            slot: Slot {
                score: 0.0,
                queue_time,
                seq,
            },
            reason,
            retries: 0,
            pods_ready_requeues: 0,
            evictions: 0,
            admission: None,
            epoch,
            held_by_tenant: false,
            preempted_at: None,
        };
        let added = self.workloads.add(entry);
        debug_assert_eq!(added, id);
        if status == Status::Scoring {
            self.unscored.push(id);
        }
        id
    }

    /// Gives a just-submitted workload what it carried from before the
    /// driver restarted: its counters, and its backoff if that has not
    /// ended (it then backs off once scored, its score and slot its own).
    pub(super) fn carry(&mut self, id: WorkloadId, carried: Carried, now: Millis) {
        let entry = &mut self.workloads[id];
        entry.retries = carried.retries;
        entry.pods_ready_requeues = carried.pods_ready_requeues;
        entry.evictions = carried.evictions;
        match carried.backoff {
            Some((until, why)) if until > now && entry.status == Status::Scoring => {
                self.unscored.carry(id, until, why);
            }
            _ => {}
        }
    }

    /// A scored workload that carried a backoff from before the restart
    /// backs off until then instead of being queued. Whether it does.
    pub(super) fn back_off_carried(&mut self, id: WorkloadId, now: Millis) -> bool {
        let Some((until, why)) = self.unscored.take_carried(id) else {
            return false;
        };
        if until <= now {
            return false;
        }
        let entry = &self.workloads[id];
        let reason = match why {
            Backoff::Retry => Reason::Backoff {
                after: Box::new(Reason::None),
                retry: entry.retries,
                max_retries: self
                    .cluster
                    .cluster_queue(entry.workload.cluster_queue)
                    .retry
                    .unwrap_or(RetryPolicy::DEFAULT)
                    .max_retries,
                until,
            },
            Backoff::PodsReady => {
                let policy = self.cluster.pods_ready;
                Reason::PodsReadyBackoff {
                    timeout: policy.map_or(Millis::ZERO, |p| p.timeout),
                    recovery: false,
                    requeue: entry.pods_ready_requeues,
                    limit: policy.and_then(|p| p.backoff_limit),
                    until,
                }
            }
        };
        let entry = &mut self.workloads[id];
        entry.status = Status::Backoff;
        entry.reason = reason;
        self.timers
            .arm(until, TimerKind::BackoffEnds, id, entry.epoch);
        true
    }

    /// The workload ran to completion at `now`: release its quota and nodes.
    pub(super) fn finish(&mut self, id: WorkloadId, now: Millis) -> Vec<Event> {
        self.finish_with(id, now, None)
    }

    /// [`Scheduler::finish`], with the failure that ended it, if any.
    fn finish_with(&mut self, id: WorkloadId, now: Millis, failure: Option<String>) -> Vec<Event> {
        let Some(entry) = self.get(id) else {
            return Vec::new();
        };
        if entry.status == Status::Detached {
            let released = self.release_detached(id);
            self.leftovers.forget(id);
            self.workloads[id].status = Status::Finished;
            return vec![Event::Finished {
                workload: id,
                released,
                failure: None,
            }];
        }
        if waiting(entry.status) {
            return self.finish_waiting(id, failure);
        }
        if entry.status != Status::Admitted {
            return Vec::new();
        }
        self.advance_history(now);
        let entry = &self.workloads[id];
        // Only a run to completion tells how long the queue's work runs.
        if let (Some(admission), None) = (&entry.admission, &failure) {
            let runtime = now.saturating_sub(admission.at);
            self.history
                .record_runtime(entry.workload.local_queue, now, runtime);
        }
        let released = self.release(id).map(|a| a.usage).unwrap_or_default();
        let entry = &mut self.workloads[id];
        entry.status = Status::Finished;
        entry.reason = Reason::None;
        vec![Event::Finished {
            workload: id,
            released,
            failure,
        }]
    }

    /// A waiting workload whose job ended anyway — it finished or failed as
    /// it was evicted, its end seen after the eviction: finished, as Kueue
    /// marks the Workload of a finished job whatever its admission, and out
    /// of its queue (admitted again, it would hold quota for a job that
    /// never runs). It holds nothing to release.
    fn finish_waiting(&mut self, id: WorkloadId, failure: Option<String>) -> Vec<Event> {
        self.leave_waiting(id);
        self.retire(id, Status::Finished);
        vec![Event::Finished {
            workload: id,
            released: Vec::new(),
            failure,
        }]
    }

    /// Takes a waiting workload out of where it waits (its queue, the list
    /// to score, the orphans); a backoff's timer goes stale with the epoch
    /// (`retire`).
    fn leave_waiting(&mut self, id: WorkloadId) {
        match self.workloads[id].status {
            Status::Queued | Status::Inadmissible => self.dequeue(id),
            Status::Scoring => self.unscored.remove(id),
            Status::Orphaned => self.leftovers.forget(id),
            _ => {}
        }
    }

    /// The workload's end in `status`: its timers (backoff, reclaim) no
    /// longer match, and it holds no admission or tenant score.
    fn retire(&mut self, id: WorkloadId, status: Status) {
        let entry = &mut self.workloads[id];
        entry.epoch = entry.epoch.wrapping_add(1);
        entry.status = status;
        entry.reason = Reason::None;
        entry.admission = None;
        entry.tenant_score = None;
    }

    /// The workload failed while running: evicted and retried per its
    /// ClusterQueue's `retryPolicy`; without one it is finished, failed
    /// (Kueue's rule: a failed job is not run again unless asked for).
    pub(super) fn fail(&mut self, id: WorkloadId, message: &str, now: Millis) -> Vec<Event> {
        let cause = Eviction::Failed {
            message: message.to_string(),
        };
        match self.get(id).map(|e| e.status) {
            Some(Status::Admitted) => {}
            Some(Status::Detached) => {
                // Its queue is gone, so it cannot retry there: it waits, as a
                // pending workload of a removed queue does, for the queue to return.
                self.release_detached(id);
                if let Some(portable) = self.leftovers.orphan_mut(id) {
                    portable.forget_admission();
                }
                let entry = &mut self.workloads[id];
                entry.evictions += 1;
                entry.retries += 1;
                entry.epoch = entry.epoch.wrapping_add(1);
                entry.status = Status::Orphaned;
                entry.reason = Reason::QueueRemoved {
                    namespace: entry.workload.namespace.clone(),
                    queue: entry.workload.queue_name.clone(),
                };
                return vec![Event::Evicted {
                    workload: id,
                    cause,
                    by: None,
                    released: Vec::new(),
                }];
            }
            // Failed while waiting (as it was evicted): not run again.
            Some(status) if waiting(status) => {
                return self.finish_waiting(id, Some(message.to_string()))
            }
            _ => return Vec::new(),
        }
        let cq = self.workloads[id].workload.cluster_queue;
        if self.cluster.cluster_queue(cq).retry.is_none() {
            return self.finish_with(id, now, Some(message.to_string()));
        }
        self.advance_history(now);
        let mut events = Vec::new();
        self.evict(id, cause, None, &mut events);
        self.retry(id, now, None, &mut events);
        events
    }

    /// The job was deleted: forget the workload whatever its state, releasing
    /// its quota and nodes. Nothing else changes here; what the freed quota
    /// allows is decided by the cycles that follow.
    pub(super) fn withdraw(&mut self, id: WorkloadId, now: Millis) -> Vec<Event> {
        let Some(entry) = self.get(id) else {
            return Vec::new();
        };
        let released = match entry.status {
            Status::Admitted => {
                self.advance_history(now);
                self.release(id).map(|a| a.usage).unwrap_or_default()
            }
            Status::Detached => {
                let released = self.release_detached(id);
                self.leftovers.forget(id);
                released
            }
            _ => {
                self.leave_waiting(id);
                Vec::new()
            }
        };
        self.retire(id, Status::Withdrawn);
        self.workloads.free(id);
        vec![Event::Withdrawn {
            workload: id,
            released,
        }]
    }

    /// Fires every timer due at or before `now`.
    pub(super) fn fire_timers(&mut self, now: Millis, hooks: &mut dyn Hooks) -> Vec<Event> {
        hooks.begin(now);
        self.advance_history(now);
        let mut events = Vec::new();
        while let Some(Timer {
            at,
            kind,
            id,
            epoch,
        }) = self.timers.pop_due(now)
        {
            let entry = &self.workloads[id];
            if entry.epoch != epoch {
                continue;
            }
            match kind {
                TimerKind::BackoffEnds if entry.status == Status::Backoff => {
                    self.enqueue(id);
                    events.push(Event::Requeued {
                        workload: id,
                        cause: Requeue::BackoffOver,
                    });
                }
                TimerKind::PodsReady
                    if entry.status == Status::Admitted
                        && self.unready.contains(id)
                        && self.unready.recovering_since(id).is_none() =>
                {
                    self.pods_ready_timeout(id, false, now, &mut events);
                    self.cluster_changed();
                }
                TimerKind::PodsRecovery
                    if entry.status == Status::Admitted && self.recovery_due(id, at) =>
                {
                    self.pods_ready_timeout(id, true, now, &mut events);
                    self.cluster_changed();
                }
                TimerKind::Reclaim if entry.status == Status::Admitted => {
                    let cq = self.cluster.cluster_queue(entry.workload.cluster_queue);
                    let cause = Eviction::Reclaimed {
                        cluster_queue: cq.name.clone(),
                        timeout: cq.reclaim_timeout.unwrap_or(Millis::ZERO),
                    };
                    self.evict(id, cause, None, &mut events);
                    // Without a retryPolicy a workload outliving the timeout would be
                    // re-admitted and reclaimed forever; the default policy bounds it.
                    self.retry(id, now, Some(RetryPolicy::DEFAULT), &mut events);
                    self.cluster_changed();
                }
                _ => {}
            }
        }
        if self.fair.adjust_due(now) {
            self.adjust_fair_weights(now, hooks);
        }
        events
    }

    /// Gives back an admitted workload's quota and nodes; wakes what may now fit.
    pub(super) fn release(&mut self, id: WorkloadId) -> Option<Admission> {
        if self.unready.forget(id) && self.block_admission() {
            self.wake_all();
        }
        let entry = &mut self.workloads[id];
        let admission = entry.admission.take()?;
        let cq = entry.workload.cluster_queue;
        for &(fr, amount) in &admission.usage {
            self.quota.add_usage(cq, fr, -amount);
        }
        self.capacity.release(&admission.placements);
        let priority = self.workloads[id].workload.priority;
        self.queues.release(cq, priority, id);
        self.wake(cq, !admission.placements.is_empty());
        Some(admission)
    }

    /// Gives back a detached workload's nodes (it holds no quota).
    fn release_detached(&mut self, id: WorkloadId) -> Vec<(FlavorResource, Amount)> {
        if let Some(placements) = self.leftovers.release(id) {
            self.capacity.release(&placements);
            if !placements.is_empty() {
                self.wake_all();
            }
        }
        self.workloads[id].reason = Reason::None;
        Vec::new()
    }

    pub(super) fn evict(
        &mut self,
        id: WorkloadId,
        cause: Eviction,
        by: Option<String>,
        events: &mut Vec<Event>,
    ) {
        let released = self.release(id).map(|a| a.usage).unwrap_or_default();
        let entry = &mut self.workloads[id];
        entry.evictions += 1;
        entry.epoch += 1;
        entry.reason = Reason::Evicted(cause.clone());
        events.push(Event::Evicted {
            workload: id,
            cause,
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
        let entry = &mut self.workloads[id];
        entry.retries += 1;
        entry.queue_time = now;
        // Queued from now on, with the platform score and input order of the
        // slot it was admitted from (its own, unless a tenant handed it that
        // of a workload asking the same): a tenant's order never changes
        // where a requeued workload goes.
        entry.slot = Slot {
            score: entry.slot.score,
            queue_time: now,
            seq: entry.slot.seq,
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
                    cause: Requeue::NoRetryPolicy,
                });
            }
            Some(p) if entry.retries > p.max_retries => {
                entry.status = Status::Deactivated;
                let (retries, max_retries) = (entry.retries - 1, p.max_retries);
                entry.reason = Reason::Deactivated {
                    retries,
                    max_retries,
                };
                events.push(Event::Deactivated {
                    workload: id,
                    retries,
                    max_retries,
                });
            }
            Some(p) => {
                let factor = 1i64 << (entry.retries - 1).min(30);
                let until = now.saturating_add(p.backoff.saturating_mul(factor));
                entry.status = Status::Backoff;
                let after = std::mem::take(&mut entry.reason);
                entry.reason = Reason::Backoff {
                    after: Box::new(after),
                    retry: entry.retries,
                    max_retries: p.max_retries,
                    until,
                };
                self.timers
                    .arm(until, TimerKind::BackoffEnds, id, entry.epoch);
            }
        }
    }
}

/// Whether a workload in `status` waits for admission (queued, set aside,
/// backing off, to be scored, or its queue gone).
fn waiting(status: Status) -> bool {
    matches!(
        status,
        Status::Scoring
            | Status::Queued
            | Status::Inadmissible
            | Status::Backoff
            | Status::Orphaned
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_keeps_its_order_and_taking_it_leaves_none() {
        let mut unscored = Unscored::default();
        assert!(unscored.is_empty());
        for id in [4, 1, 3] {
            unscored.push(WorkloadId(id));
        }
        unscored.remove(WorkloadId(1));
        assert_eq!(unscored.take_batch(), vec![WorkloadId(4), WorkloadId(3)]);
        assert!(unscored.is_empty() && unscored.take_batch().is_empty());
    }

    #[test]
    fn a_workload_that_stops_waiting_leaves_no_carried_backoff_behind() {
        let mut unscored = Unscored::default();
        unscored.push(WorkloadId(1));
        unscored.carry(WorkloadId(1), Millis(50), Backoff::PodsReady);
        unscored.remove(WorkloadId(1));
        assert_eq!(unscored.take_carried(WorkloadId(1)), None);
    }

    #[test]
    fn a_carried_backoff_is_handed_out_once_and_carries_over() {
        let mut unscored = Unscored::default();
        unscored.carry(WorkloadId(2), Millis(50), Backoff::PodsReady);
        let mut next = Unscored::default();
        next.carry_over(&unscored);
        assert_eq!(
            unscored.take_carried(WorkloadId(2)),
            Some((Millis(50), Backoff::PodsReady))
        );
        assert_eq!(unscored.take_carried(WorkloadId(2)), None);
        assert_eq!(next.take_carried(WorkloadId(1)), None);
        assert_eq!(
            next.take_carried(WorkloadId(2)),
            Some((Millis(50), Backoff::PodsReady))
        );
    }
}
