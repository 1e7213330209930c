//! Carrying out the step's decisions on the jobs (admission injected and
//! released, eviction held and restored, Events told), and the retry of
//! what a failed write left undone: each tick, before the step, a tracked
//! job whose object disagrees with the scheduler (admitted but held,
//! pending but released) is written again, once no write of it is on its
//! way and its backoff (0.5 s doubling to 30 s while its writes keep
//! failing) has passed. Every write changes nothing when the object
//! already is as wanted.
//!
//! The writes themselves are made by the `carrier` task, so a tick hands
//! them over and goes on; their results are read at the next tick. A job
//! just written is not checked against the scheduler again until the
//! reflector has seen a version after the one the write replaced, so a
//! stale copy does not cause a second write.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use arbiter_core::scheduler::reason::render_admission;
use arbiter_core::scheduler::{Event, Eviction, Status, WorkloadId};

use super::carrier::{JobWrite, Order, Place};
use super::{Driver, JobKey};
use crate::inject::{self, PodSetAdmission, Recorded};
use crate::workloads::Owner;

/// The first wait before a job whose writes failed is written again; it
/// doubles while they keep failing, up to `MAX_RETRY`.
pub(super) const FIRST_RETRY: Duration = Duration::from_millis(500);
pub(super) const MAX_RETRY: Duration = Duration::from_secs(30);

/// What to tell once a job's writes are made: its admission Event.
pub(super) type Then = Option<(Owner, String)>;

/// Jobs whose last writes failed: when to write them again, and the wait
/// that led there.
#[derive(Default)]
pub(super) struct Backoff {
    jobs: HashMap<JobKey, (Instant, Duration)>,
}

impl Backoff {
    fn failed(&mut self, key: &JobKey) -> Duration {
        let wait = self
            .jobs
            .get(key)
            .map_or(FIRST_RETRY, |(_, wait)| (*wait * 2).min(MAX_RETRY));
        self.jobs.insert(key.clone(), (Instant::now() + wait, wait));
        wait
    }

    pub fn forget(&mut self, key: &JobKey) {
        self.jobs.remove(key);
    }

    /// Whether `key` may be written again now.
    pub fn due(&self, key: &JobKey) -> bool {
        self.jobs
            .get(key)
            .is_none_or(|(at, _)| *at <= Instant::now())
    }

    /// The jobs whose backoff passed.
    pub fn passed(&self) -> impl Iterator<Item = JobKey> + '_ {
        let now = Instant::now();
        self.jobs
            .iter()
            .filter(move |(_, (at, _))| *at <= now)
            .map(|(key, _)| key.clone())
    }

    /// The first retry still ahead.
    pub fn next(&self) -> Option<Instant> {
        let now = Instant::now();
        self.jobs
            .values()
            .map(|(at, _)| *at)
            .filter(|at| *at > now)
            .min()
    }
}

/// What a tracked job's object must be brought to.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Undone {
    /// Admitted by the scheduler, still held in the API.
    Admit,
    /// Not admitted, released in the API after Arbiter admitted it: held and restored.
    Evict,
    /// Not admitted, released without an admission of Arbiter's: held.
    Hold,
    /// Not admitted, held, but still carrying what admission injected (an
    /// eviction's second write failed): restored.
    Restore,
}

/// Whether the object agrees with the scheduler (`admitted`: the entry has
/// an admission; `recorded`: the object carries Arbiter's admission record).
pub(super) fn undone(admitted: bool, held: bool, recorded: bool) -> Option<Undone> {
    match (admitted, held) {
        (true, true) => Some(Undone::Admit),
        (false, false) if recorded => Some(Undone::Evict),
        (false, false) => Some(Undone::Hold),
        (false, true) if recorded => Some(Undone::Restore),
        _ => None,
    }
}

/// Writes to make, per job, in order.
#[derive(Default)]
pub(super) struct Plan {
    jobs: Vec<(JobKey, Vec<JobWrite>, Then)>,
    at: BTreeMap<JobKey, usize>,
}

impl Plan {
    pub fn push(&mut self, key: &JobKey, writes: impl IntoIterator<Item = JobWrite>) {
        let i = self.entry(key);
        self.jobs[i].1.extend(writes);
    }

    /// An admission Event to tell once `key`'s writes are made.
    fn then(&mut self, key: &JobKey, event: (Owner, String)) {
        let i = self.entry(key);
        self.jobs[i].2 = Some(event);
    }

    fn entry(&mut self, key: &JobKey) -> usize {
        match self.at.get(key) {
            Some(&i) => i,
            None => {
                self.at.insert(key.clone(), self.jobs.len());
                self.jobs.push((key.clone(), Vec::new(), None));
                self.jobs.len() - 1
            }
        }
    }
}

impl Driver {
    /// The step's decisions: job writes handed over, Events told, the
    /// Workload of a withdrawn job forgotten.
    pub(super) fn carry_out(&mut self, events: &[Event]) {
        let mut plan = Plan::default();
        for event in events {
            let id = event.workload();
            let Some(key) = self.by_id.get(&id).cloned() else {
                continue;
            };
            match event {
                Event::Admitted { .. } => {
                    if let Some((pod_sets, record)) = self.admission(id, &key) {
                        plan.push(&key, [JobWrite::Admit(pod_sets, record)]);
                        if let Some(note) = self.admitted_note(id, &key) {
                            plan.then(&key, note);
                        }
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
                    if matches!(cause, Eviction::Failed { .. }) {
                        // A failed job cannot be held and run again: it is
                        // created anew, unless it is not to run again.
                        if let Some(write) = self.recreate(id, &key) {
                            tracing::info!(job = %key, %reason, "failed; creating it anew to run again after its backoff");
                            plan.push(&key, [write]);
                        }
                        continue;
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
                Event::Deactivated { retries, .. } => {
                    tracing::info!(job = %key, retries, "deactivated after too many retries");
                    let why = self
                        .scheduler
                        .as_ref()
                        .map(|s| s.reason_text(id))
                        .unwrap_or_default();
                    if let Some(tracked) = self.tracked.get(&key) {
                        let note = format!("{why}; it stays out until it is created again");
                        self.publisher
                            .event(&tracked.owner, true, "Deactivated", note);
                    }
                }
                Event::Withdrawn { .. } => {
                    self.by_id.remove(&id);
                    self.written_over.remove(&key);
                    self.backoff.forget(&key);
                    if let Some(tracked) = self.tracked.remove(&key) {
                        self.publisher.forget(&tracked.owner);
                    }
                }
                Event::Requeued { .. } | Event::Finished { .. } => {}
            }
        }
        self.write_jobs(plan);
    }

    /// The write that runs failed workload `id`'s job again, and the job
    /// to create remembered until it is seen (`Tracked::recreate`); none
    /// when the workload is deactivated (the failed job stays as it is, to
    /// be looked at) or the job is gone.
    fn recreate(&mut self, id: WorkloadId, key: &JobKey) -> Option<JobWrite> {
        let scheduler = self.scheduler.as_ref()?;
        let entry = scheduler.entry(id);
        if entry.status == Status::Deactivated {
            return None;
        }
        let failed = self.job_value(key)?;
        let integration = super::index::integration(&self.integrations, &self.jobs[key.watch]);
        let fresh = match crate::inject::recreated(&failed, integration, entry.retries) {
            Ok(fresh) => Box::new(fresh),
            Err(e) => {
                tracing::warn!(job = %key, error = %e, "cannot create the failed job anew; it is not run again");
                return None;
            }
        };
        let tracked = self.tracked.get_mut(key)?;
        let replaces = tracked.owner.uid.clone();
        tracked.recreate = Some((fresh.clone(), replaces.clone()));
        Some(JobWrite::Recreate { fresh, replaces })
    }

    /// The admission Event of workload `id`, told once its job is released.
    fn admitted_note(&self, id: WorkloadId, key: &JobKey) -> Option<(Owner, String)> {
        let scheduler = self.scheduler.as_ref()?;
        let tracked = self.tracked.get(key)?;
        let entry = scheduler.entry(id);
        let admission = entry.admission.as_ref()?;
        let note = format!(
            "Admitted by {}",
            render_admission(scheduler.cluster(), &entry.workload, admission)
        );
        Some((tracked.owner.clone(), note))
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

    /// Hands the planned writes to the carrier (see the module's note).
    pub(super) fn write_jobs(&mut self, plan: Plan) {
        for (key, writes, then) in plan.jobs {
            if writes.is_empty() {
                continue;
            }
            let watch = &self.jobs[key.watch];
            let place = Place {
                resource: watch.resource.clone(),
                store: watch.watched.store.clone(),
                integration: watch.integration,
            };
            self.carrier.send(Order {
                key,
                place,
                writes,
                then,
            });
        }
    }

    /// Reads what became of the writes handed over: a job written is not
    /// looked at again until the reflector has its new version, a failed
    /// one is written again after its backoff, an admission made is told.
    pub(super) fn written(&mut self) {
        for done in self.carrier.results() {
            match done.result {
                Ok(()) => {
                    self.backoff.forget(&done.key);
                    if let Some((owner, note)) = done.then {
                        tracing::info!(job = %done.key, "admitted");
                        self.publisher.event(&owner, false, "Admitted", note);
                    }
                }
                Err(error) => {
                    let retry_in = self.backoff.failed(&done.key);
                    tracing::warn!(job = %done.key, %error, ?retry_in, "could not write the job; it is written again after a backoff");
                }
            }
            if let Some(version) = done.over {
                self.written_over.insert(done.key, version);
            }
        }
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
            Undone::Restore => vec![JobWrite::Restore],
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
        assert_eq!(undone(false, true, true), Some(Undone::Restore));
        assert_eq!(undone(false, false, true), Some(Undone::Evict));
        assert_eq!(undone(false, false, false), Some(Undone::Hold));
    }
}
