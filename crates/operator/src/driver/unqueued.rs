//! Jobs that name a queue but cannot be queued (their LocalQueue missing
//! or inactive, a resource no ClusterQueue covers, outside their queue's
//! bounds, unreadable): told once per distinct message in a Warning Event
//! and, when the job could be read, in a Workload of their own whose
//! conditions carry the same reason; forgotten (that Workload deleted)
//! once the job is queued, gone or no longer names a queue.

use arbiter_core::jobs::JobInfo;

use super::*;

impl Driver {
    /// Whether what job `key` (`uid`) is told about not being queued
    /// would change with `message` (it is told once per distinct message).
    pub(super) fn unqueued_changed(&self, key: &JobKey, uid: &str, message: &str) -> bool {
        self.unqueued
            .get(key)
            .is_none_or(|(owner, told)| owner.uid != uid || told != message)
    }

    /// A job that names a queue but cannot be queued: logged, told in a
    /// Warning Event (published at the end of the tick) and, when it could
    /// be read (`job`), in its Workload's conditions with the same reason.
    pub(super) fn note_unqueued(
        &mut self,
        key: &JobKey,
        uid: String,
        reason: &'static str,
        message: String,
        job: Option<&JobInfo>,
    ) {
        tracing::warn!(job = %key, %reason, %message, "job not queued");
        let owner = self.owner(key, uid);
        if let Some(job) = job {
            let spec = crate::workloads::of_unqueued(&owner, job);
            let status = crate::workloads::not_queued(reason, &message);
            self.publisher.workload(&owner, Some(spec), Some(status));
        }
        self.unqueued_events
            .push((owner.clone(), reason, message.clone()));
        self.unqueued.insert(key.clone(), (owner, message));
    }

    /// Jobs told they could not be queued and now queued, gone or no
    /// longer naming a queue: forgotten, and the Workload of one gone or
    /// unlabelled deleted (a queued one's Workload is the scheduler's now).
    /// Only jobs read again or dropped can have changed so; all are looked
    /// at on a `sweep`.
    pub(super) fn forget_unqueued(&mut self, sweep: bool) {
        let keys: Vec<JobKey> = if sweep {
            self.unqueued.keys().cloned().collect()
        } else {
            self.index
                .changed
                .iter()
                .filter(|k| self.unqueued.contains_key(*k))
                .cloned()
                .collect()
        };
        for key in keys {
            let seen = self.index.get(&key);
            let (owner, _) = &self.unqueued[&key];
            let same = seen.is_some_and(|s| s.uid == owner.uid);
            if self.tracked.contains_key(&key) && same {
                self.unqueued.remove(&key);
            } else if !same || !seen.is_some_and(|s| s.queue_label && !s.deleting) {
                let (owner, _) = self.unqueued.remove(&key).expect("looked up");
                self.publisher.forget(&owner);
            }
        }
    }
}
