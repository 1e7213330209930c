//! The start of a run from a live cluster: the jobs admitted before it
//! began (`Prior::admission`) are handed to `Scheduler::restore` — the
//! operator's read-back after a restart, no policy asked — so they start
//! the run admitted on their flavors, holding their quota and nodes, and
//! finish at their admission time plus their runtime (at once if that is
//! past). One whose admission no longer fits (its flavor gone from its
//! ClusterQueue, say) is told in a warning and queued as pending. Jobs
//! queued before the run began go in with their queue time
//! ([`submit`]). It decides nothing: what is admitted is what the cluster
//! said.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use arbiter_core::model::Millis;
use arbiter_core::scheduler::intake::{intake, Intake};
use arbiter_core::scheduler::reason::render_admission;
use arbiter_core::scheduler::workload::Workload;
use arbiter_core::scheduler::{Input, Restored, Scheduler, WorkloadId};

use super::{flavor_map, HistoryEntry, HistoryEvent, PlacementReport, Record};
use crate::scenario::{Scenario, SimJob};

/// Timers of the admitted: (when, workload, its admission epoch).
pub(super) type Timers = BinaryHeap<Reverse<(Millis, WorkloadId, u32)>>;

/// Restores every job the scenario says was admitted before the run;
/// returns the indices of those restored (they do not arrive again) and
/// a warning for each that could not be.
pub(super) fn restore(
    scenario: &Scenario,
    scheduler: &mut Scheduler,
    records: &mut [Record],
    record_of: &mut Vec<usize>,
    finishes: &mut Timers,
    readies: &mut Timers,
) -> (BTreeSet<usize>, Vec<String>) {
    let cluster = scenario.cluster.clone();
    let mut warnings = Vec::new();
    let mut asked = Vec::new();
    let mut jobs = Vec::new();
    for (i, job) in scenario.jobs.iter().enumerate() {
        let Some(prior) = &job.prior else { continue };
        let Some(admission) = &prior.admission else {
            continue;
        };
        match intake(&cluster, &job.info, job.explicit_priority) {
            Intake::Queued(workload) => {
                asked.push(Restored {
                    workload,
                    flavors: admission.flavors.clone(),
                    counts: admission.counts.clone(),
                    admitted_at: admission.at,
                    queue_time: prior.queue_time,
                    placements: Vec::new(),
                    carried: prior.carried,
                });
                jobs.push(i);
            }
            Intake::Rejected(why) => warnings.push(not_restored(job, &why.to_string())),
            Intake::Unqueued(why) => warnings.push(not_restored(job, &why.to_string())),
        }
    }
    let mut restored = BTreeSet::new();
    for (result, i) in scheduler.restore(asked).into_iter().zip(jobs) {
        let id = match result {
            Ok(id) => id,
            Err(e) => {
                warnings.push(not_restored(&scenario.jobs[i], &e.to_string()));
                continue;
            }
        };
        restored.insert(i);
        if record_of.len() <= id.index() {
            record_of.resize(id.index() + 1, usize::MAX);
        }
        record_of[id.index()] = i;
        let entry = scheduler.entry(id);
        let Some(admission) = &entry.admission else {
            continue;
        };
        let record = &mut records[i];
        record.workload = Some(id);
        record.arrived = true;
        record.before = true;
        record.ever_admitted = true;
        record.admitted_at = Some(admission.at);
        record.placement = PlacementReport::of(&cluster, &admission.placements);
        record.history.push(HistoryEntry {
            at_seconds: admission.at.as_secs_f64(),
            event: HistoryEvent::Admitted,
            reason: format!(
                "{} (admitted before the run began)",
                render_admission(&cluster, &entry.workload, admission)
            ),
            flavors: Some(flavor_map(scheduler, id)),
            by: None,
        });
        // Its pods run already; its runtime counted from its admission.
        if scheduler.awaiting_pods(id) {
            readies.push(Reverse((Millis::ZERO, id, entry.epoch)));
        }
        if let Some(runtime) = scenario.jobs[i].runtime {
            let end = admission.at.saturating_add(runtime).max(Millis::ZERO);
            finishes.push(Reverse((end, id, entry.epoch)));
        }
    }
    (restored, warnings)
}

fn not_restored(job: &SimJob, why: &str) -> String {
    format!(
        "{}: {} {}/{} was admitted before the run, but that admission cannot be restored ({why}); it is queued as pending",
        job.source, job.info.kind, job.info.namespace, job.info.name
    )
}

/// The input submitting `workload` of `job`: with the queue time and
/// counters it brings from before the run, if any.
pub(super) fn submit(job: &SimJob, workload: Workload) -> Input {
    match &job.prior {
        Some(prior) => Input::SubmitQueued {
            workload,
            queue_time: prior.queue_time,
            carried: prior.carried,
        },
        None => Input::Submit(workload),
    }
}
