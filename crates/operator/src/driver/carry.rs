//! Carrying out the step's decisions on the jobs (admission injected and
//! released, eviction held and restored, Events told), and the retry of
//! what a failed write left undone: each tick, before the step, a tracked
//! job whose object disagrees with the scheduler (admitted but held,
//! pending but released) is written again, and the tick asks to be woken
//! again after a backoff while writes fail. Every write changes nothing
//! when the object already is as wanted.
//!
//! Jobs are written [`CONCURRENCY`] at a time, each job's writes in order
//! (an eviction is a hold, then a restore that starts from the API's
//! answer to the hold). A write starts from the reflector's copy; the job
//! is read only on a conflict. A job just written is not checked against
//! the scheduler again until the reflector has seen a version after the
//! one the write replaced, so a stale copy does not cause a second write.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use arbiter_core::scheduler::reason::render_admission;
use arbiter_core::scheduler::{Event, WorkloadId};
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::ObjectRef;

use super::{Driver, JobKey};
use crate::inject::{self, PodSetAdmission, Recorded};
use crate::jobs;

/// The first wait before writes that failed are tried again; it doubles
/// while they keep failing, up to `MAX_RETRY`.
pub(super) const FIRST_RETRY: Duration = Duration::from_millis(500);
pub(super) const MAX_RETRY: Duration = Duration::from_secs(30);

/// Jobs written at once.
pub const CONCURRENCY: usize = 32;

/// What a tracked job's object must be brought to.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Undone {
    /// Admitted by the scheduler, still held in the API.
    Admit,
    /// Not admitted, released in the API after Arbiter admitted it: held and restored.
    Evict,
    /// Not admitted, released without an admission of Arbiter's: held.
    Hold,
}

/// Whether the object agrees with the scheduler (`admitted`: the entry has
/// an admission; `recorded`: the object carries Arbiter's admission record).
pub(super) fn undone(admitted: bool, held: bool, recorded: bool) -> Option<Undone> {
    match (admitted, held) {
        (true, true) => Some(Undone::Admit),
        (false, false) if recorded => Some(Undone::Evict),
        (false, false) => Some(Undone::Hold),
        _ => None,
    }
}

/// One write of one job.
#[derive(Clone, Debug)]
pub(super) enum JobWrite {
    /// Inject, record and release.
    Admit(Vec<PodSetAdmission>, Recorded),
    Hold,
    /// Take out what admission injected (after a hold).
    Restore,
}

/// Writes to make, per job, in order.
#[derive(Default)]
pub(super) struct Plan {
    jobs: Vec<(JobKey, Vec<JobWrite>)>,
    at: BTreeMap<JobKey, usize>,
}

impl Plan {
    pub fn push(&mut self, key: &JobKey, writes: impl IntoIterator<Item = JobWrite>) {
        match self.at.get(key) {
            Some(&i) => self.jobs[i].1.extend(writes),
            None => {
                self.at.insert(key.clone(), self.jobs.len());
                self.jobs.push((key.clone(), writes.into_iter().collect()));
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}

impl Driver {
    /// The step's decisions: job writes made, Events told, the Workload of
    /// a withdrawn job deleted.
    pub(super) async fn carry_out(&mut self, events: &[Event]) {
        let mut plan = Plan::default();
        let mut admitted = Vec::new();
        for event in events {
            let id = event.workload();
            let Some(key) = self.by_id.get(&id).cloned() else {
                continue;
            };
            match event {
                Event::Admitted { .. } => {
                    if let Some((pod_sets, record)) = self.admission(id, &key) {
                        plan.push(&key, [JobWrite::Admit(pod_sets, record)]);
                        admitted.push((key, id));
                    }
                }
                Event::Evicted { cause, .. } => {
                    let reason = cause.to_string();
                    if let Some(tracked) = self.tracked.get_mut(&key) {
                        let sentence = format!("Evicted: {reason}");
                        tracked.eviction = Some((cause.code().to_string(), sentence.clone()));
                        self.publisher
                            .event(&tracked.owner, false, cause.code(), sentence);
                    }
                    tracing::info!(job = %key, %reason, "evicted; holding it again");
                    plan.push(&key, [JobWrite::Hold, JobWrite::Restore]);
                }
                Event::Rejected {
                    policy, message, ..
                } => {
                    tracing::info!(job = %key, %policy, %message, "rejected");
                    if let Some(tracked) = self.tracked.get(&key) {
                        let note = format!("admission policy {policy}: {message}");
                        self.publisher.event(&tracked.owner, true, "Rejected", note);
                    }
                }
                Event::Deactivated {
                    retries,
                    max_retries,
                    ..
                } => {
                    tracing::info!(job = %key, retries, "deactivated after too many retries");
                    if let Some(tracked) = self.tracked.get(&key) {
                        let note = format!("evicted {retries} times, more than retryPolicy.maxRetries {max_retries}; it stays out");
                        self.publisher
                            .event(&tracked.owner, true, "Deactivated", note);
                    }
                }
                Event::Withdrawn { .. } => {
                    self.by_id.remove(&id);
                    self.written_over.remove(&key);
                    if let Some(tracked) = self.tracked.remove(&key) {
                        self.publisher.forget(&tracked.owner);
                    }
                }
                Event::Requeued { .. } | Event::Finished { .. } => {}
            }
        }
        let failed: BTreeSet<JobKey> = self
            .write_jobs(plan)
            .await
            .into_iter()
            .filter_map(|(key, result)| match result {
                Ok(()) => None,
                Err(e) => {
                    tracing::error!(job = %key, error = %e, "could not carry out the decision on the job; written again next tick");
                    Some(key)
                }
            })
            .collect();
        for (key, id) in admitted {
            if failed.contains(&key) {
                continue;
            }
            tracing::info!(job = %key, "admitted");
            let (Some(scheduler), Some(tracked)) = (&self.scheduler, self.tracked.get(&key)) else {
                continue;
            };
            let entry = scheduler.entry(id);
            if let Some(admission) = &entry.admission {
                let note = format!(
                    "Admitted by {}",
                    render_admission(scheduler.cluster(), &entry.workload, admission)
                );
                self.publisher
                    .event(&tracked.owner, false, "Admitted", note);
            }
        }
    }

    /// What the job needs to know of workload `id`'s admission.
    pub(super) fn admission(
        &self,
        id: WorkloadId,
        key: &JobKey,
    ) -> Option<(Vec<PodSetAdmission>, Recorded)> {
        let paths = &self.tracked.get(key)?.template_paths;
        inject::admission_of(self.scheduler.as_ref()?, id, paths)
    }

    /// The reflector's copy of a job.
    pub(super) fn store_copy(&self, key: &JobKey) -> Option<DynamicObject> {
        let watch = &self.jobs[key.watch];
        let reference = ObjectRef::<DynamicObject>::new_with(&key.name, watch.resource.clone())
            .within(&key.namespace);
        watch
            .watched
            .store
            .get(&reference)
            .map(|o| o.as_ref().clone())
    }

    /// Makes the planned writes (see the module's note). Returns each job's
    /// result; failures are counted for the tick's backoff.
    pub(super) async fn write_jobs(&mut self, plan: Plan) -> Vec<(JobKey, Result<(), String>)> {
        if plan.is_empty() {
            return Vec::new();
        }
        let this = &*self;
        let results: Vec<(JobKey, Result<(), String>, Option<String>)> =
            futures::stream::iter(plan.jobs)
                .map(|(key, writes)| async move {
                    let (result, over) = this.write_job(&key, &writes).await;
                    (key, result, over)
                })
                .buffer_unordered(CONCURRENCY)
                .collect()
                .await;
        let mut out = Vec::with_capacity(results.len());
        for (key, result, over) in results {
            if result.is_err() {
                self.write_failures
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            if let Some(version) = over {
                self.written_over.insert(key.clone(), version);
            }
            out.push((key, result));
        }
        out
    }

    /// One job's writes, in order. Also returns the version of the
    /// reflector's copy when anything was written.
    async fn write_job(
        &self,
        key: &JobKey,
        writes: &[JobWrite],
    ) -> (Result<(), String>, Option<String>) {
        let watch = &self.jobs[key.watch];
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &key.namespace, &watch.resource);
        let integration = super::index::integration(&self.integrations, watch);
        let copy = self.store_copy(key);
        let copied = copy
            .as_ref()
            .and_then(|o| o.metadata.resource_version.clone());
        let mut known = copy.map(|o| (o, false));
        let mut wrote = false;
        for write in writes {
            let result = match write {
                JobWrite::Admit(pod_sets, record) => {
                    jobs::write(&api, &key.name, integration, known.take(), |o, i| {
                        inject::admit(o, i, pod_sets, record.clone())
                    })
                    .await
                }
                JobWrite::Hold => {
                    jobs::write(&api, &key.name, integration, known.take(), inject::hold).await
                }
                JobWrite::Restore => {
                    jobs::write(&api, &key.name, integration, known.take(), inject::restore).await
                }
            };
            match result {
                Ok(done) => {
                    wrote |= done.replaced.is_some();
                    known = done.object.map(|o| (o, true));
                }
                Err(e) => return (Err(e), copied.filter(|_| wrote)),
            }
        }
        (Ok(()), copied.filter(|_| wrote))
    }

    /// The writes that bring a job that disagrees with the scheduler back in line.
    pub(super) fn redo_writes(&self, id: WorkloadId, key: &JobKey, what: &Undone) -> Vec<JobWrite> {
        match what {
            Undone::Admit => match self.admission(id, key) {
                Some((pod_sets, record)) => vec![JobWrite::Admit(pod_sets, record)],
                None => Vec::new(),
            },
            Undone::Evict => vec![JobWrite::Hold, JobWrite::Restore],
            Undone::Hold => vec![JobWrite::Hold],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_that_disagrees_with_the_scheduler_is_written_again() {
        assert_eq!(undone(true, true, false), Some(Undone::Admit));
        assert_eq!(undone(true, false, true), None);
        assert_eq!(undone(false, true, false), None);
        assert_eq!(undone(false, false, true), Some(Undone::Evict));
        assert_eq!(undone(false, false, false), Some(Undone::Hold));
    }
}
