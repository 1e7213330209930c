//! The report assembled at the end of a run: each job's record becomes its
//! workload report, tallied as it goes into the summary and per
//! ClusterQueue; then the wait statistics, fairness, per flavor, the
//! scheduler's counters and the plotted series (thinned). It reads the
//! scheduler as the run left it and decides nothing. Called by
//! [`super::run_with`].

use std::collections::BTreeMap;

use arbiter_core::model::cluster::Cluster;
use arbiter_core::model::Millis;
use arbiter_core::scheduler::{Scheduler, Status};

use super::{flavor_map, FlavorTrack, Integral, Record, RunState};
use crate::report::{
    jain, percentile, round6, ClusterQueueReport, DeviceReport, FlavorReport, HistoryEvent, Report,
    SchedulerReport, Series, Summary, WorkloadReport, WorkloadState,
};
use crate::scenario::{Scenario, SimJob};

/// Most points kept per plotted series.
const MAX_SAMPLES: usize = 2000;

/// Assembles the report from the run's records and measures: the
/// workloads (tallied per ClusterQueue as they go), the summary, per
/// ClusterQueue, per flavor, the scheduler's counters and the series.
pub(super) fn finish_report(
    scenario: &Scenario,
    scheduler: &Scheduler,
    run_state: RunState,
    end: Millis,
    cpu_seconds: f64,
) -> Report {
    let cluster = scheduler.cluster();
    let RunState {
        records,
        cq_usage,
        mut flavors,
        mut series,
        preemptions,
        ..
    } = run_state;
    let mut report = Report::default();
    let mut tally = Tally::new(scheduler);
    for (i, record) in records.into_iter().enumerate() {
        let workload = tally.workload(&scenario.jobs[i], record, scheduler, end);
        report.workloads.push(workload);
    }
    report.summary = tally.summary;
    report.summary.workloads = report.workloads.len();
    report.summary.preemptions = preemptions;
    report.summary.makespan_seconds = tally.makespan.as_secs_f64();
    report.summary.end_seconds = end.as_secs_f64();
    summarize_waits(&mut report.summary, tally.waits_all);
    let (by_cluster_queue, fairness) = cluster_queue_reports(cluster, tally.by_cq, cq_usage, end);
    report.summary.jain_fairness_index = fairness;
    report.by_cluster_queue = by_cluster_queue;
    report.by_flavor = flavor_reports(cluster, &mut flavors, &mut series, end);
    report.scheduler = SchedulerReport {
        cycles: scheduler.cycles(),
        cpu_seconds: round6(cpu_seconds),
    };
    report.warnings = scenario.warnings.clone();
    downsample(&mut series);
    report.series = series;
    report
}

/// What the workloads add up to as the report goes through them: the
/// summary's counts, every wait that counts, per ClusterQueue its report so
/// far and its waits, and the makespan.
struct Tally {
    summary: Summary,
    waits_all: Vec<f64>,
    by_cq: BTreeMap<String, (ClusterQueueReport, Vec<f64>)>,
    makespan: Millis,
}

impl Tally {
    /// Nothing counted yet, with a row for each ClusterQueue.
    fn new(scheduler: &Scheduler) -> Tally {
        Tally {
            summary: Summary::default(),
            waits_all: Vec::new(),
            by_cq: scheduler
                .cluster()
                .cluster_queues
                .iter()
                .map(|cq| (cq.name.clone(), (ClusterQueueReport::default(), Vec::new())))
                .collect(),
            makespan: Millis::ZERO,
        }
    }

    /// One job's report at `end` (a wait still under way ends there),
    /// counted in the tally.
    fn workload(
        &mut self,
        job: &SimJob,
        mut record: Record,
        scheduler: &Scheduler,
        end: Millis,
    ) -> WorkloadReport {
        let cluster = scheduler.cluster();
        record.stop_waiting(end);
        let entry = record.workload.map(|id| scheduler.entry(id));
        let (state, reason) = final_state(&record, job, scheduler);
        let cq_name = entry.map(|e| cluster.cluster_queue(e.workload.cluster_queue).name.clone());
        let wait = record.waited.as_secs_f64();
        // Never admitted as configured: its queue, priority class or a
        // resource it asks for does not exist (it never reached a queue), or
        // it asks for more than its ClusterQueue could ever give.
        let unqueued = matches!(record.outcome, Some((WorkloadState::Pending, _)));
        let never_admissible = state == WorkloadState::Pending
            && (unqueued
                || entry
                    .is_some_and(|e| e.status == Status::Unschedulable && e.reason.never_fits()));
        // A wait that could never end is not a wait: counted apart (`inadmissible`).
        let waited = state != WorkloadState::Rejected && !never_admissible && !record.before;
        if record.arrived && waited {
            self.waits_all.push(wait);
        }
        if let Some(t) = record.finished_at.or(record.admitted_at) {
            self.makespan = self.makespan.max(record.finished_at.unwrap_or(end).max(t));
        }
        if let Some((cqr, waits)) = cq_name.as_ref().and_then(|name| self.by_cq.get_mut(name)) {
            if record.ever_admitted {
                cqr.admitted += 1;
            }
            cqr.preempted += record.preempted;
            if state == WorkloadState::Pending {
                cqr.pending_at_end += 1;
            }
            cqr.inadmissible += usize::from(never_admissible);
            if waited {
                waits.push(wait);
            }
        }
        self.summary.admitted += usize::from(record.ever_admitted);
        self.summary.inadmissible += usize::from(never_admissible);
        match state {
            WorkloadState::Admitted => self.summary.running_at_end += 1,
            WorkloadState::Finished => self.summary.finished += 1,
            WorkloadState::Rejected => self.summary.rejected += 1,
            WorkloadState::Pending => self.summary.pending_at_end += 1,
        }
        WorkloadReport {
            kind: job.info.kind.clone(),
            namespace: job.info.namespace.clone(),
            name: job.info.name.clone(),
            cluster_queue: cq_name,
            priority: entry.map(|e| e.workload.priority),
            arrival_seconds: job.arrival.as_secs_f64(),
            admitted_seconds: record.admitted_at.map(Millis::as_secs_f64),
            finished_seconds: record.finished_at.map(Millis::as_secs_f64),
            wait_seconds: round6(wait),
            flavors: match (state, record.workload) {
                (WorkloadState::Admitted, Some(id)) => flavor_map(scheduler, id),
                _ => record
                    .history
                    .iter()
                    .rev()
                    .find(|h| h.event == HistoryEvent::Admitted)
                    .and_then(|h| h.flavors.clone())
                    .unwrap_or_default(),
            },
            evictions: entry.map_or(0, |e| e.evictions),
            state,
            reason,
            never_admissible,
            placement: record.placement,
            history: record.history,
        }
    }
}

/// A job's state at the end of the run and why: its outcome if it never
/// reached the scheduler, else its workload's status and reason.
fn final_state(record: &Record, job: &SimJob, scheduler: &Scheduler) -> (WorkloadState, String) {
    match (&record.outcome, record.workload) {
        (Some((state, reason)), _) => (*state, reason.clone()),
        (None, Some(id)) => {
            let text = scheduler.reason_text(id);
            match scheduler.entry(id).status {
                Status::Admitted => (WorkloadState::Admitted, String::new()),
                Status::Finished => (WorkloadState::Finished, String::new()),
                Status::Rejected => (WorkloadState::Rejected, text),
                _ if text.is_empty() => (
                    WorkloadState::Pending,
                    "waiting for the next scheduling cycle".to_string(),
                ),
                _ => (WorkloadState::Pending, text),
            }
        }
        (None, None) => (
            WorkloadState::Pending,
            format!(
                "arrives at {}s, after the end of the simulation",
                job.arrival.as_secs_f64()
            ),
        ),
    }
}

/// The summary's wait statistics over every wait that counts.
fn summarize_waits(summary: &mut Summary, mut waits_all: Vec<f64>) {
    waits_all.sort_by(f64::total_cmp);
    summary.mean_wait_seconds = round6(mean(&waits_all));
    summary.p50_wait_seconds = round6(percentile(&waits_all, 50.0));
    summary.p95_wait_seconds = round6(percentile(&waits_all, 95.0));
    summary.max_wait_seconds = round6(waits_all.last().copied().unwrap_or(0.0));
}

/// Per ClusterQueue its report, completed with its mean usage and wait;
/// and Jain's fairness index over the usage per configured weight of those
/// that had work.
fn cluster_queue_reports(
    cluster: &Cluster,
    mut by_cq: BTreeMap<String, (ClusterQueueReport, Vec<f64>)>,
    mut cq_usage: Vec<Integral>,
    end: Millis,
) -> (BTreeMap<String, ClusterQueueReport>, f64) {
    let mut fairness_inputs = Vec::new();
    for (i, cq) in cluster.cluster_queues.iter().enumerate() {
        if let Some((cqr, waits)) = by_cq.get_mut(&cq.name) {
            cqr.mean_usage = round6(cq_usage[i].mean(end));
            cqr.mean_wait_seconds = round6(mean(waits));
            if !waits.is_empty() || cqr.admitted > 0 {
                // The configured entitlement, not the adaptive weight in force at the end.
                let weight = cq.fair_weight;
                fairness_inputs.push(if weight > 0.0 {
                    cqr.mean_usage / weight
                } else {
                    cqr.mean_usage
                });
            }
        }
    }
    let fairness = round6(jain(&fairness_inputs));
    let reports = by_cq.into_iter().map(|(k, (v, _))| (k, v)).collect();
    (reports, fairness)
}

/// Per flavor its report (utilization, device allocation and
/// fragmentation); its utilization samples move into `series`.
fn flavor_reports(
    cluster: &Cluster,
    flavors: &mut [FlavorTrack],
    series: &mut Series,
    end: Millis,
) -> BTreeMap<String, FlavorReport> {
    let mut by_flavor = BTreeMap::new();
    for track in flavors {
        by_flavor.insert(
            track.name.clone(),
            FlavorReport {
                utilization: round6(track.usage.mean(end)),
                resource: cluster
                    .resources
                    .get(track.resource.index())
                    .cloned()
                    .unwrap_or_default(),
                peak_nodes: track.peak_nodes,
                device: track
                    .device
                    .as_mut()
                    .map(|(r, allocated, fragmented)| DeviceReport {
                        resource: cluster
                            .resources
                            .get(r.index())
                            .cloned()
                            .unwrap_or_default(),
                        allocation: round6(allocated.mean(end)),
                        fragmentation: round6(fragmented.mean(end)),
                    }),
            },
        );
        series
            .utilization
            .insert(track.name.clone(), std::mem::take(&mut track.samples));
    }
    by_flavor
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Keeps at most MAX_SAMPLES points per series, evenly spaced, always the last.
fn downsample(series: &mut Series) {
    fn thin<T: Clone>(points: &mut Vec<T>) {
        if points.len() <= MAX_SAMPLES {
            return;
        }
        let step = points.len().div_ceil(MAX_SAMPLES);
        let last = points.last().cloned();
        let mut kept: Vec<T> = points.iter().step_by(step).cloned().collect();
        if let Some(l) = last {
            kept.push(l);
        }
        *points = kept;
    }
    thin(&mut series.pending);
    for points in series.utilization.values_mut() {
        thin(points);
    }
}
