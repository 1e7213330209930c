//! Carrying out the step's decisions on the jobs (admission injected and
//! released, eviction held and restored, Events told), and the retry of
//! what a failed write left undone: each tick, before the step, a tracked
//! job whose object disagrees with the scheduler (admitted but held,
//! pending but released) is written again, and the tick asks to be woken
//! again after a backoff while writes fail. Every write reads the object
//! fresh and changes nothing when it already is as wanted.

use std::time::Duration;

use arbiter_core::jobs::Integration;
use arbiter_core::scheduler::reason::render_admission;
use arbiter_core::scheduler::{Event, WorkloadId};
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::{Driver, JobKey};
use crate::inject::{self, InjectError, PodSetAdmission, Recorded};
use crate::jobs;

/// The first wait before writes that failed are tried again; it doubles
/// while they keep failing, up to `MAX_RETRY`.
pub(super) const FIRST_RETRY: Duration = Duration::from_millis(500);
pub(super) const MAX_RETRY: Duration = Duration::from_secs(30);

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

/// Whether the object agrees with the scheduler (`admitted`: the entry has an admission).
pub(super) fn undone(admitted: bool, held: bool, object: &Value) -> Option<Undone> {
    match (admitted, held) {
        (true, true) => Some(Undone::Admit),
        (false, false) if inject::recorded(object).is_some() => Some(Undone::Evict),
        (false, false) => Some(Undone::Hold),
        _ => None,
    }
}

impl Driver {
    pub(super) async fn carry_out(&mut self, event: &Event) {
        let id = event.workload();
        let Some(key) = self.by_id.get(&id).cloned() else {
            return;
        };
        match event {
            Event::Admitted { .. } => {
                let Some((pod_sets, record)) = self.admission(id, &key) else {
                    return;
                };
                match self
                    .write(&key, |o, i| inject::admit(o, i, &pod_sets, record.clone()))
                    .await
                {
                    Ok(()) => {
                        tracing::info!(job = %key, "admitted");
                        if let (Some(scheduler), Some(tracked)) =
                            (&self.scheduler, self.tracked.get(&key))
                        {
                            let entry = scheduler.entry(id);
                            if let Some(admission) = &entry.admission {
                                let note = format!(
                                    "Admitted by {}",
                                    render_admission(
                                        scheduler.cluster(),
                                        &entry.workload,
                                        admission
                                    )
                                );
                                self.publisher
                                    .event(&tracked.owner, false, "Admitted", note)
                                    .await;
                            }
                        }
                    }
                    Err(e) => {
                        tracing::error!(job = %key, error = %e, "could not release the admitted job")
                    }
                }
            }
            Event::Evicted { cause, .. } => {
                let reason = cause.to_string();
                if let Some(tracked) = self.tracked.get_mut(&key) {
                    tracked.eviction =
                        Some((cause.code().to_string(), format!("Evicted: {reason}")));
                    self.publisher
                        .event(
                            &tracked.owner,
                            false,
                            cause.code(),
                            format!("Evicted: {reason}"),
                        )
                        .await;
                }
                let held = self.write(&key, inject::hold).await;
                match held.and(self.write(&key, inject::restore).await) {
                    Ok(()) => tracing::info!(job = %key, %reason, "evicted; held again"),
                    Err(e) => {
                        tracing::error!(job = %key, error = %e, "could not hold the evicted job")
                    }
                }
            }
            Event::Rejected {
                policy, message, ..
            } => {
                tracing::info!(job = %key, %policy, %message, "rejected");
                if let Some(tracked) = self.tracked.get(&key) {
                    let note = format!("admission policy {policy}: {message}");
                    self.publisher
                        .event(&tracked.owner, true, "Rejected", note)
                        .await;
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
                        .event(&tracked.owner, true, "Deactivated", note)
                        .await;
                }
            }
            Event::Withdrawn { .. } => {
                self.by_id.remove(&id);
                if let Some(tracked) = self.tracked.remove(&key) {
                    self.publisher.forget(&tracked.owner).await;
                }
            }
            Event::Requeued { .. } | Event::Finished { .. } => {}
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

    /// Writes one job (see `jobs::write`).
    pub(super) async fn write(
        &self,
        key: &JobKey,
        change: impl Fn(&mut Value, &Integration) -> Result<(), InjectError>,
    ) -> Result<(), String> {
        let watch = &self.jobs[key.watch];
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &key.namespace, &watch.resource);
        jobs::write(&api, &key.name, self.integration(key.watch), change).await
    }

    /// Writes again what failed before (see the module's note).
    pub(super) async fn redo(&mut self, undone: Vec<(JobKey, WorkloadId, Undone)>) {
        for (key, id, what) in undone {
            let result = match what {
                Undone::Admit => match self.admission(id, &key) {
                    Some((pod_sets, record)) => {
                        self.write(&key, |o, i| inject::admit(o, i, &pod_sets, record.clone()))
                            .await
                    }
                    None => Ok(()),
                },
                Undone::Evict => {
                    let held = self.write(&key, inject::hold).await;
                    held.and(self.write(&key, inject::restore).await)
                }
                Undone::Hold => self.write(&key, inject::hold).await,
            };
            match result {
                Ok(()) => tracing::info!(job = %key, ?what, "written again after a failed write"),
                Err(e) => {
                    tracing::warn!(job = %key, ?what, error = %e, "writing the job failed again; retried with backoff")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_job_that_disagrees_with_the_scheduler_is_written_again() {
        let plain = json!({});
        let admitted_before =
            json!({"metadata": {"annotations": {inject::ADMISSION_ANNOTATION: "{}"}}});
        assert_eq!(undone(true, true, &plain), Some(Undone::Admit));
        assert_eq!(undone(true, false, &plain), None);
        assert_eq!(undone(false, true, &plain), None);
        assert_eq!(undone(false, false, &admitted_before), Some(Undone::Evict));
        assert_eq!(undone(false, false, &plain), Some(Undone::Hold));
    }
}
