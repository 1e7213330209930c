//! The virtual-time driver: replays a scenario through the scheduler core.
//! It owns the clock and the outside world the core must not know about —
//! job arrivals, runtimes, node provisioning — and records what the core
//! decides into the report. It makes no scheduling decision itself: each
//! instant it hands the core what happened ([`Input`]s) through
//! [`Scheduler::step`] and carries out the decisions and the scale plan.
//! A run from a live cluster starts with the jobs admitted there restored
//! (`driver::prior`).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::ops::ControlFlow;

use arbiter_core::model::cluster::{ClusterQueueId, FlavorId, FlavorResource};
use arbiter_core::model::Millis;
use arbiter_core::scheduler::hooks::Hooks;
use arbiter_core::scheduler::intake::{intake, Intake};
use arbiter_core::scheduler::reason::{render_admission, Reason};
use arbiter_core::scheduler::{Event, Input, ScaleKind, Scheduler, Status, Step, WorkloadId};

use super::report::{
    jain, percentile, round6, ClusterQueueReport, DeviceReport, FlavorReport, HistoryEntry,
    HistoryEvent, PlacementReport, Report, SchedulerReport, Series, WorkloadReport, WorkloadState,
};
use super::scenario::Scenario;

mod flavors;
mod prior;

use flavors::{account, flavor_tracks, refresh_pooled, FlavorTrack, Integral};

/// Progress of a long run, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub arrived: usize,
    pub total: usize,
    pub now: Millis,
}

/// Most points kept per plotted series.
const MAX_SAMPLES: usize = 2000;

#[derive(Default)]
struct Record {
    workload: Option<WorkloadId>,
    /// Set when the job never reached the scheduler (intake rejected or could not queue it).
    outcome: Option<(WorkloadState, String)>,
    arrived: bool,
    history: Vec<HistoryEntry>,
    waited: Millis,
    waiting_since: Option<Millis>,
    admitted_at: Option<Millis>,
    finished_at: Option<Millis>,
    ever_admitted: bool,
    preempted: usize,
    /// Where its pods were placed at its latest admission.
    placement: Vec<PlacementReport>,
    /// Admitted before the run began (from a live cluster): it waited none
    /// of the run's time, so it is left out of the wait statistics.
    before: bool,
}

/// Watches a run from inside, for checks that must hold at every point
/// (the property tests); the simulator itself uses `()`.
pub trait Observer {
    /// After a step's inputs are applied, after its timers fired and after each of its cycles.
    fn cycle(&mut self, _scheduler: &Scheduler) {}
    /// After each step; `Break` ends the run there (the report describes that moment).
    fn step(&mut self, _now: Millis, _scheduler: &Scheduler, _step: &Step) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

impl Observer for () {}

/// A finished run: the report, the scheduler as the run left it, and per
/// job (scenario order) its workload id if it reached the scheduler.
pub struct Run {
    pub report: Report,
    pub scheduler: Scheduler,
    pub workloads: Vec<Option<WorkloadId>>,
}

/// Runs the scenario to its end (or `until`) and reports.
pub fn run(
    scenario: &Scenario,
    hooks: &mut dyn Hooks,
    progress: &mut dyn FnMut(Progress),
) -> Report {
    run_with(scenario, hooks, progress, &mut ()).report
}

/// [`run`], with an observer watching every step and cycle.
pub fn run_with(
    scenario: &Scenario,
    hooks: &mut dyn Hooks,
    progress: &mut dyn FnMut(Progress),
    observer: &mut dyn Observer,
) -> Run {
    let cpu_start = cpu_time::ProcessTime::now();
    let cluster = scenario.cluster.clone();
    let pools: Vec<_> = scenario.pools.iter().map(|p| p.spec.clone()).collect();
    let mut scheduler = Scheduler::new(cluster.clone(), &pools);
    let mut records: Vec<Record> = (0..scenario.jobs.len())
        .map(|_| Record::default())
        .collect();
    let mut record_of: Vec<usize> = Vec::with_capacity(scenario.jobs.len());
    let mut finishes: prior::Timers = BinaryHeap::new();
    // When admitted workloads' pods are all ready (`waitForPodsReady`).
    let mut readies: prior::Timers = BinaryHeap::new();
    let mut node_ready: BinaryHeap<Reverse<(Millis, FlavorId)>> = BinaryHeap::new();
    // Admitted before the run (from a live cluster): admitted from the start.
    let (restored, mut warnings) = prior::restore(
        scenario,
        &mut scheduler,
        &mut records,
        &mut record_of,
        &mut finishes,
        &mut readies,
    );
    let mut order: Vec<usize> = (0..scenario.jobs.len())
        .filter(|i| !restored.contains(i))
        .collect();
    order.sort_by_key(|&i| (scenario.jobs[i].arrival, i));
    let mut next_arrival = 0usize;

    let mut cq_usage: Vec<Integral> = vec![Integral::default(); cluster.cluster_queues.len()];
    let mut flavors = flavor_tracks(&scheduler, scenario);
    for &i in &restored {
        let Some(id) = records[i].workload else {
            continue;
        };
        let entry = scheduler.entry(id);
        if let Some(admission) = &entry.admission {
            account(&scheduler, &mut flavors, &admission.usage, 1, Millis::ZERO);
        }
        let cq = entry.workload.cluster_queue;
        cq_usage[cq.index()].set(Millis::ZERO, dominant_usage(&scheduler, cq));
    }
    let mut pending_now: usize = 0;
    let mut series = Series::default();
    let mut preemptions = 0usize;
    let mut now = Millis::ZERO;
    let mut next_wake = None;

    loop {
        let candidates = [
            order.get(next_arrival).map(|&i| scenario.jobs[i].arrival),
            finishes.peek().map(|Reverse((t, _, _))| *t),
            readies.peek().map(|Reverse((t, _, _))| *t),
            node_ready.peek().map(|Reverse((t, _))| *t),
            next_wake,
        ];
        let Some(t) = candidates.into_iter().flatten().min() else {
            break;
        };
        if scenario.until.is_some_and(|u| t > u) {
            break;
        }
        now = t.max(now);

        let mut inputs = Vec::new();
        let mut submitted_jobs = Vec::new();
        while let Some(&i) = order.get(next_arrival) {
            let job = &scenario.jobs[i];
            if job.arrival > now {
                break;
            }
            next_arrival += 1;
            let record = &mut records[i];
            record.arrived = true;
            match intake(&cluster, &job.info, job.explicit_priority) {
                Intake::Queued(workload) => {
                    inputs.push(prior::submit(job, workload));
                    submitted_jobs.push(i);
                    record.waiting_since = Some(now);
                    pending_now += 1;
                }
                Intake::Rejected(reason) => {
                    let reason = reason.to_string();
                    record.history.push(HistoryEntry {
                        at_seconds: now.as_secs_f64(),
                        event: HistoryEvent::Rejected,
                        reason: reason.clone(),
                        ..Default::default()
                    });
                    record.outcome = Some((WorkloadState::Rejected, reason));
                }
                Intake::Unqueued(reason) => {
                    record.waiting_since = Some(now);
                    record.outcome = Some((WorkloadState::Pending, reason.to_string()));
                }
            }
        }
        while let Some(&Reverse((at, id, epoch))) = readies.peek() {
            if at > now {
                break;
            }
            readies.pop();
            let entry = scheduler.entry(id);
            if entry.epoch == epoch && entry.status == Status::Admitted {
                inputs.push(Input::PodsReady(id));
            }
        }
        while let Some(&Reverse((at, id, epoch))) = finishes.peek() {
            if at > now {
                break;
            }
            finishes.pop();
            let entry = scheduler.entry(id);
            if entry.epoch == epoch && entry.status == Status::Admitted {
                inputs.push(Input::Finish(id));
            }
        }
        let mut readied = Vec::new();
        while let Some(&Reverse((at, flavor))) = node_ready.peek() {
            if at > now {
                break;
            }
            node_ready.pop();
            inputs.push(Input::NodeReady(flavor));
            readied.push(flavor);
        }
        let mut first = true;
        let step = scheduler.step_observed(now, inputs, hooks, &mut |scheduler| {
            if std::mem::take(&mut first) {
                // The nodes that just became ready, counted before anything else moves.
                for &flavor in &readied {
                    refresh_pooled(scheduler, &mut flavors[flavor.index()], flavor, now);
                }
            }
            observer.cycle(scheduler);
        });
        for (&job, &id) in submitted_jobs.iter().zip(&step.submitted) {
            records[job].workload = Some(id);
            if record_of.len() <= id.index() {
                record_of.resize(id.index() + 1, usize::MAX);
            }
            record_of[id.index()] = job;
        }
        for event in &step.events {
            handle(
                event,
                now,
                &scheduler,
                scenario,
                &record_of,
                &mut records,
                &mut finishes,
                &mut readies,
                &mut cq_usage,
                &mut flavors,
                &mut pending_now,
                &mut preemptions,
            );
        }
        for request in &step.scale {
            let track = &mut flavors[request.flavor.index()];
            match request.kind {
                ScaleKind::Up => {
                    for _ in 0..request.nodes {
                        node_ready.push(Reverse((now.saturating_add(track.delay), request.flavor)));
                    }
                }
                ScaleKind::Down => refresh_pooled(&scheduler, track, request.flavor, now),
            }
        }
        next_wake = step.next_wake;
        series.pending.push((now.as_secs_f64(), pending_now));
        for track in &mut flavors {
            track.samples.push((now.as_secs_f64(), track.usage.value));
        }
        progress(Progress {
            arrived: next_arrival,
            total: order.len(),
            now,
        });
        if observer.step(now, &scheduler, &step).is_break() {
            break;
        }
    }
    let end = match scenario.until {
        Some(u) => u.max(now),
        None => now,
    };
    let cpu_seconds = cpu_start.elapsed().as_secs_f64();
    let workloads = records.iter().map(|r| r.workload).collect();
    let mut report = finish_report(
        scenario,
        &scheduler,
        records,
        cq_usage,
        flavors,
        series,
        preemptions,
        end,
        cpu_seconds,
    );
    report.warnings.append(&mut warnings);
    Run {
        report,
        scheduler,
        workloads,
    }
}

/// Usage of the dominant resource as a fraction of nominal quota.
fn dominant_usage(scheduler: &Scheduler, cq: ClusterQueueId) -> f64 {
    let quota = scheduler.quota();
    (0..quota.flavor_resources())
        .map(|fr| FlavorResource(fr as u32))
        .filter(|&fr| !quota.nominal(cq, fr).is_zero())
        .map(|fr| quota.usage(cq, fr).as_f64() / quota.nominal(cq, fr).as_f64())
        .fold(0.0, f64::max)
}

fn flavor_map(scheduler: &Scheduler, id: WorkloadId) -> BTreeMap<String, BTreeMap<String, String>> {
    let cluster = scheduler.cluster();
    let mut map = BTreeMap::new();
    let entry = scheduler.entry(id);
    if let Some(admission) = &entry.admission {
        for (ps, spec) in admission.pod_sets.iter().zip(&entry.workload.pod_sets) {
            let inner: BTreeMap<String, String> = ps
                .flavors
                .iter()
                .map(|(r, f)| {
                    (
                        cluster.resource_name(*r).to_string(),
                        cluster.flavors[f.index()].name.clone(),
                    )
                })
                .collect();
            map.insert(spec.name.clone(), inner);
        }
    }
    map
}

#[allow(clippy::too_many_arguments)]
fn handle(
    event: &Event,
    now: Millis,
    scheduler: &Scheduler,
    scenario: &Scenario,
    record_of: &[usize],
    records: &mut [Record],
    finishes: &mut BinaryHeap<Reverse<(Millis, WorkloadId, u32)>>,
    readies: &mut BinaryHeap<Reverse<(Millis, WorkloadId, u32)>>,
    cq_usage: &mut [Integral],
    flavors: &mut [FlavorTrack],
    pending_now: &mut usize,
    preemptions: &mut usize,
) {
    let at_seconds = now.as_secs_f64();
    let id = event.workload();
    let job_index = record_of[id.index()];
    let record = &mut records[job_index];
    let entry = scheduler.entry(id);
    let cq = entry.workload.cluster_queue;
    match event {
        Event::Admitted { .. } => {
            let flavors_of = flavor_map(scheduler, id);
            if let Some(since) = record.waiting_since.take() {
                record.waited = record.waited.saturating_add(now.saturating_sub(since));
            }
            record.admitted_at = Some(now);
            record.ever_admitted = true;
            record.placement = entry
                .admission
                .as_ref()
                .map(|a| PlacementReport::of(scheduler.cluster(), &a.placements))
                .unwrap_or_default();
            *pending_now = pending_now.saturating_sub(1);
            let reason = entry.admission.as_ref().map_or_else(String::new, |a| {
                render_admission(scheduler.cluster(), &entry.workload, a)
            });
            record.history.push(HistoryEntry {
                at_seconds,
                event: HistoryEvent::Admitted,
                reason,
                flavors: Some(flavors_of),
                by: None,
            });
            // Its pods start after its start-up time (never, for
            // `startup: never`); its runtime counts from then.
            let job = &scenario.jobs[job_index];
            if let Some(started) = job.startup.map(|s| now.saturating_add(s)) {
                if scheduler.awaiting_pods(id) {
                    readies.push(Reverse((started, id, entry.epoch)));
                }
                if let Some(runtime) = job.runtime {
                    finishes.push(Reverse((started.saturating_add(runtime), id, entry.epoch)));
                }
            }
            if let Some(admission) = &entry.admission {
                account(scheduler, flavors, &admission.usage, 1, now);
            }
            cq_usage[cq.index()].set(now, dominant_usage(scheduler, cq));
        }
        Event::Evicted {
            cause,
            by,
            released,
            ..
        } => {
            record.waiting_since = Some(now);
            *pending_now += 1;
            if by.is_some() {
                *preemptions += 1;
                record.preempted += 1;
            }
            account(scheduler, flavors, released, -1, now);
            cq_usage[cq.index()].set(now, dominant_usage(scheduler, cq));
            record.history.push(HistoryEntry {
                at_seconds,
                event: HistoryEvent::Evicted,
                reason: cause.to_string(),
                flavors: None,
                by: by.clone(),
            });
        }
        Event::Requeued { cause, .. } => {
            record.history.push(HistoryEntry {
                at_seconds,
                event: HistoryEvent::Requeued,
                reason: cause.to_string(),
                flavors: None,
                by: None,
            });
        }
        Event::Finished { released, .. } => {
            account(scheduler, flavors, released, -1, now);
            cq_usage[cq.index()].set(now, dominant_usage(scheduler, cq));
            record.finished_at = Some(now);
            record.history.push(HistoryEntry {
                at_seconds,
                event: HistoryEvent::Finished,
                reason: "ran to completion".into(),
                flavors: None,
                by: None,
            });
        }
        Event::Rejected {
            policy, message, ..
        } => {
            *pending_now = pending_now.saturating_sub(1);
            if let Some(since) = record.waiting_since.take() {
                record.waited = record.waited.saturating_add(now.saturating_sub(since));
            }
            let reason = Reason::Rejected {
                policy: policy.clone(),
                message: message.clone(),
            };
            record.history.push(HistoryEntry {
                at_seconds,
                event: HistoryEvent::Rejected,
                reason: reason.render(scheduler.cluster(), &entry.workload),
                flavors: None,
                by: Some(policy.clone()),
            });
        }
        Event::Deactivated {
            retries,
            max_retries,
            ..
        } => {
            let reason = Reason::Deactivated {
                retries: *retries,
                max_retries: *max_retries,
            }
            .render(scheduler.cluster(), &entry.workload);
            // Deactivation follows the eviction that used up the last retry: say so there.
            match record
                .history
                .last_mut()
                .filter(|h| h.event == HistoryEvent::Evicted && h.at_seconds == at_seconds)
            {
                Some(eviction) => eviction.reason = format!("{}; {reason}", eviction.reason),
                None => record.history.push(HistoryEntry {
                    at_seconds,
                    event: HistoryEvent::Evicted,
                    reason,
                    flavors: None,
                    by: None,
                }),
            }
        }
        // The simulator never withdraws a job.
        Event::Withdrawn { .. } => {}
    }
}

#[allow(clippy::too_many_arguments)]
fn finish_report(
    scenario: &Scenario,
    scheduler: &Scheduler,
    records: Vec<Record>,
    mut cq_usage: Vec<Integral>,
    mut flavors: Vec<FlavorTrack>,
    mut series: Series,
    preemptions: usize,
    end: Millis,
    cpu_seconds: f64,
) -> Report {
    let cluster = scheduler.cluster();
    let mut report = Report::default();
    let mut waits_all = Vec::new();
    let mut by_cq: BTreeMap<String, (ClusterQueueReport, Vec<f64>)> = cluster
        .cluster_queues
        .iter()
        .map(|cq| (cq.name.clone(), (ClusterQueueReport::default(), Vec::new())))
        .collect();
    let mut makespan = Millis::ZERO;
    for (i, mut record) in records.into_iter().enumerate() {
        let job = &scenario.jobs[i];
        if let Some(since) = record.waiting_since.take() {
            record.waited = record.waited.saturating_add(end.saturating_sub(since));
        }
        let entry = record.workload.map(|id| scheduler.entry(id));
        let (state, reason) = match (&record.outcome, record.workload) {
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
        };
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
            waits_all.push(wait);
        }
        if let Some(t) = record.finished_at.or(record.admitted_at) {
            makespan = makespan.max(record.finished_at.unwrap_or(end).max(t));
        }
        if let Some(name) = &cq_name {
            if let Some((cqr, waits)) = by_cq.get_mut(name) {
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
        }
        let summary = &mut report.summary;
        summary.admitted += usize::from(record.ever_admitted);
        summary.inadmissible += usize::from(never_admissible);
        match state {
            WorkloadState::Admitted => summary.running_at_end += 1,
            WorkloadState::Finished => summary.finished += 1,
            WorkloadState::Rejected => summary.rejected += 1,
            WorkloadState::Pending => summary.pending_at_end += 1,
        }
        report.workloads.push(WorkloadReport {
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
        });
    }
    report.summary.workloads = report.workloads.len();
    report.summary.preemptions = preemptions;
    report.summary.makespan_seconds = makespan.as_secs_f64();
    report.summary.end_seconds = end.as_secs_f64();
    waits_all.sort_by(f64::total_cmp);
    report.summary.mean_wait_seconds = round6(mean(&waits_all));
    report.summary.p50_wait_seconds = round6(percentile(&waits_all, 50.0));
    report.summary.p95_wait_seconds = round6(percentile(&waits_all, 95.0));
    report.summary.max_wait_seconds = round6(waits_all.last().copied().unwrap_or(0.0));

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
    report.summary.jain_fairness_index = round6(jain(&fairness_inputs));
    report.by_cluster_queue = by_cq.into_iter().map(|(k, (v, _))| (k, v)).collect();
    for track in &mut flavors {
        report.by_flavor.insert(
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
    report.scheduler = SchedulerReport {
        cycles: scheduler.cycles(),
        cpu_seconds: round6(cpu_seconds),
    };
    report.warnings = scenario.warnings.clone();
    downsample(&mut series);
    report.series = series;
    report
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
