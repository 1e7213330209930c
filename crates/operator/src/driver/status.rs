//! What the Workloads say: each tracked workload's status computed from
//! the scheduler's entry and handed to `publish` only when what it
//! depends on changed (`Signature`), with a Warning Event the first time a
//! denial, or a workload that can never fit or whose namespace its
//! ClusterQueue does not select, reads so; every workload looked at at most every
//! `FULL_PUBLISH`, those the tick touched in between; an admission is
//! sealed for its job (`seal`), so a Workload can vouch for it after a
//! restart. A Workload someone deleted is written again (one someone
//! edited, `publish` writes back); and the queues' statuses and metrics,
//! computed at most every `QUEUE_STATUS` when something changed them.

use super::*;

/// Hands workload `tracked`'s status to the publisher if what it depends
/// on changed, with a Warning Event the first time a denial (or a
/// workload that never fits) reads so.
/// Its admission is sealed for the job with `sealer` (`seal`), if there is one.
pub(super) fn publish_one(
    scheduler: &Scheduler,
    publisher: &Publisher,
    sealer: Option<&crate::seal::Sealer>,
    tracked: &mut KnownJob,
) {
    let entry = scheduler.entry(tracked.id);
    let reason = scheduler.reason(tracked.id);
    // How it ended, once that is the end: a failure the scheduler retries
    // is not.
    let finished = tracked
        .ended
        .as_ref()
        .filter(|e| matches!(e, Ended::Succeeded) || entry.status == Status::Finished);
    let signature = Signature {
        status: entry.status,
        epoch: entry.epoch,
        evictions: entry.evictions,
        reason,
        finished: finished.is_some(),
        eviction: tracked.eviction.clone(),
        awaiting_pods: scheduler.awaiting_pods(tracked.id),
        refused: tracked.refused.clone(),
    };
    if tracked.published.as_ref() == Some(&signature) {
        return;
    }
    let mut status = desired(
        scheduler,
        tracked.id,
        finished,
        tracked.eviction.as_ref(),
        tracked.refused.as_deref(),
    );
    status.admission_seal = status
        .admission
        .as_ref()
        .zip(sealer)
        .map(|(admission, sealer)| sealer.seal_admission(&tracked.owner.uid, admission));
    publisher.workload(&tracked.owner, None, Some(status));
    // What will not pass as things stand is told on the job too, with the
    // reason its Workload says, once per distinct message.
    let warning = match &signature.reason {
        Reason::Denied { policy, message } => {
            Some(("Denied", format!("admission policy {policy}: {message}")))
        }
        Reason::NeverFits(_) | Reason::NamespaceNotSelected => {
            Some((signature.reason.code(), scheduler.reason_text(tracked.id)))
        }
        _ => None,
    };
    if let Some((reason, note)) = warning {
        if tracked.warned.as_ref() != Some(&note) {
            publisher.event(&tracked.owner, true, reason, note.clone());
            tracked.warned = Some(note);
        }
    }
    tracked.published = Some(signature);
}

/// What a Workload's status depends on: computed again only when it changes.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Signature {
    status: Status,
    epoch: u32,
    evictions: u32,
    reason: Reason,
    finished: bool,
    eviction: Option<(String, String)>,
    awaiting_pods: bool,
    refused: Option<String>,
}

impl Driver {
    /// Workload statuses and denial Events handed to the publisher, for
    /// the workloads whose state changed since they were last handed over.
    /// Every workload is looked at at most every [`FULL_PUBLISH`] (a
    /// pending one's reason changes without a decision); in between only
    /// those the tick touched. Returns whether a full pass is still owed.
    pub(super) fn publish(&mut self, touched: &BTreeSet<WorkloadId>) -> bool {
        let Some(scheduler) = &self.scheduler else {
            return false;
        };
        let full = self
            .published_at
            .is_none_or(|at| at.elapsed() >= FULL_PUBLISH);
        if full {
            self.published_at = Some(std::time::Instant::now());
            for tracked in self.tracked.values_mut() {
                // A finished workload's status, once handed over, is final.
                if tracked.published.as_ref().is_some_and(|p| p.finished) {
                    continue;
                }
                publish_one(scheduler, &self.publisher, self.sealer.as_ref(), tracked);
            }
        } else {
            for id in touched {
                if let Some(tracked) = self.by_id.get(id).and_then(|k| self.tracked.get_mut(k)) {
                    publish_one(scheduler, &self.publisher, self.sealer.as_ref(), tracked);
                }
            }
        }
        !full
    }
}

impl Driver {
    /// Writes again, spec and status, the Workloads of tracked jobs someone
    /// deleted (`watch::workloads`): a Workload says what was
    /// decided, and stays while its job does.
    pub(super) fn rewrite_deleted_workloads(&mut self) {
        let uids: HashSet<String> = std::mem::take(
            &mut *self
                .deleted_workloads
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
        .into_iter()
        .collect();
        if uids.is_empty() {
            return;
        }
        let Some(scheduler) = &self.scheduler else {
            return;
        };
        for (key, tracked) in &mut self.tracked {
            if !uids.contains(&tracked.owner.uid) {
                continue;
            }
            tracing::info!(job = %key, "its Workload was deleted; writing it again");
            let spec =
                crate::workloads::object(&tracked.owner, scheduler.entry(tracked.id), scheduler);
            // Deleted and written anew: the publisher forgets what it wrote.
            self.publisher.forget(&tracked.owner);
            self.publisher.workload(&tracked.owner, Some(spec), None);
            tracked.published = None;
        }
        self.published_at = None;
    }

    /// Queue statuses and metrics, computed again if something changed
    /// them and they were not computed within `QUEUE_STATUS`. Returns when
    /// they are due, if a change is not shown yet.
    pub(super) fn queue_statuses(&mut self) -> Option<Millis> {
        let scheduler = self.scheduler.as_ref()?;
        if !self.queues_changed {
            return None;
        }
        if let Some(wait) = self
            .queues_at
            .and_then(|at| QUEUE_STATUS.checked_sub(at.elapsed()))
            .filter(|wait| !wait.is_zero())
        {
            return Some(Millis(now_millis() + wait.as_millis() as i64 + 1));
        }
        self.queue_status
            .write(&self.publisher, scheduler, &mut self.activity);
        if let Some((_, metrics)) = &self.admin {
            metrics.set_queues(scheduler);
        }
        self.queues_at = Some(std::time::Instant::now());
        self.queues_changed = false;
        None
    }
}
