//! The virtual-time driver: replays a scenario through the scheduler core.
//! It owns the clock and the outside world the core must not know about —
//! job arrivals, runtimes, node provisioning — and records what the core
//! decides into the report. It makes no scheduling decision itself: each
//! instant it hands the core what happened ([`Input`]s) through
//! [`Scheduler::step`] and enacts the decisions and the scale plan.
//! A run from a live cluster starts with the jobs admitted there restored
//! (`driver::prior`); the report is assembled at the end (`driver::finish`).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::ops::ControlFlow;

use arbiter_core::model::cluster::{ClusterQueueId, FlavorId, FlavorResource};
use arbiter_core::model::Millis;
use arbiter_core::scheduler::hooks::Hooks;
use arbiter_core::scheduler::intake::{intake, Intake};
use arbiter_core::scheduler::reason::{render_admission, Reason};
use arbiter_core::scheduler::{Event, Input, ScaleKind, Scheduler, Status, Step, WorkloadId};

use super::report::{HistoryEntry, HistoryEvent, PlacementReport, Report, Series, WorkloadState};
use super::scenario::Scenario;

mod finish;
mod flavors;
mod prior;

use finish::finish_report;
use flavors::{account, flavor_tracks, refresh_pooled, FlavorTrack, Integral};

/// Progress of a long run, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub arrived: usize,
    pub total: usize,
    pub now: Millis,
}

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
    let pools: Vec<_> = scenario.pools.iter().map(|p| p.spec.clone()).collect();
    let mut scheduler = Scheduler::new(scenario.cluster.clone(), &pools);
    if !scenario.cluster.topologies.is_empty() {
        let labels: Vec<_> = scenario.pools.iter().map(|p| p.labels.clone()).collect();
        scheduler.label_pools(&labels);
    }
    let (mut state, mut warnings) = RunState::start(scenario, &mut scheduler);
    let mut now = Millis::ZERO;
    let mut next_wake = None;
    while let Some(t) = state.next_instant(scenario, next_wake) {
        now = t.max(now);
        let mut inputs = Vec::new();
        let submitted_jobs = state.arrivals(scenario, now, &mut inputs);
        let readied = state.due_timers(&scheduler, now, &mut inputs);
        let mut first = true;
        let flavors = &mut state.flavors;
        let step = scheduler.step_observed(now, inputs, hooks, &mut |scheduler| {
            if std::mem::take(&mut first) {
                // The nodes that just became ready, counted before anything else moves.
                for &flavor in &readied {
                    refresh_pooled(scheduler, &mut flavors[flavor.index()], flavor, now);
                }
            }
            observer.cycle(scheduler);
        });
        state.enact(&step, now, &scheduler, scenario, &submitted_jobs);
        next_wake = step.next_wake;
        progress(Progress {
            arrived: state.next_arrival,
            total: state.order.len(),
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
    let workloads = state.records.iter().map(|r| r.workload).collect();
    let mut report = finish_report(scenario, &scheduler, state, end, cpu_seconds);
    report.warnings.append(&mut warnings);
    Run {
        report,
        scheduler,
        workloads,
    }
}

/// What a run keeps beside the scheduler from one instant to the next: per
/// job its record, the outside world's timers (finishes, pods ready, nodes
/// ready), which jobs have arrived, and the measures the report is made of.
struct RunState {
    /// Per job, in scenario order.
    records: Vec<Record>,
    /// Per workload id, the index of its job.
    record_of: Vec<usize>,
    finishes: prior::Timers,
    /// When admitted workloads' pods are all ready (`waitForPodsReady`).
    readies: prior::Timers,
    node_ready: BinaryHeap<Reverse<(Millis, FlavorId)>>,
    /// The jobs that arrive during the run, by arrival (then scenario order).
    order: Vec<usize>,
    /// How many of `order` have arrived.
    next_arrival: usize,
    /// Per ClusterQueue, its dominant usage over time.
    cq_usage: Vec<Integral>,
    flavors: Vec<FlavorTrack>,
    pending_now: usize,
    series: Series,
    preemptions: usize,
}

impl RunState {
    /// The state at time 0: the jobs admitted before the run restored (and
    /// counted in the usage measures), the others ordered by arrival; with
    /// a warning per job that could not be restored.
    fn start(scenario: &Scenario, scheduler: &mut Scheduler) -> (RunState, Vec<String>) {
        let mut records: Vec<Record> = (0..scenario.jobs.len())
            .map(|_| Record::default())
            .collect();
        let mut record_of: Vec<usize> = Vec::with_capacity(scenario.jobs.len());
        let mut finishes: prior::Timers = BinaryHeap::new();
        let mut readies: prior::Timers = BinaryHeap::new();
        // Admitted before the run (from a live cluster): admitted from the start.
        let (restored, warnings) = prior::restore(
            scenario,
            scheduler,
            &mut records,
            &mut record_of,
            &mut finishes,
            &mut readies,
        );
        let mut order: Vec<usize> = (0..scenario.jobs.len())
            .filter(|i| !restored.contains(i))
            .collect();
        order.sort_by_key(|&i| (scenario.jobs[i].arrival, i));
        let mut cq_usage: Vec<Integral> =
            vec![Integral::default(); scenario.cluster.cluster_queues.len()];
        let mut flavors = flavor_tracks(scheduler, scenario);
        for &i in &restored {
            let Some(id) = records[i].workload else {
                continue;
            };
            let entry = scheduler.entry(id);
            if let Some(admission) = &entry.admission {
                account(scheduler, &mut flavors, &admission.usage, 1, Millis::ZERO);
            }
            let cq = entry.workload.cluster_queue;
            cq_usage[cq.index()].set(Millis::ZERO, dominant_usage(scheduler, cq));
        }
        let state = RunState {
            records,
            record_of,
            finishes,
            readies,
            node_ready: BinaryHeap::new(),
            order,
            next_arrival: 0,
            cq_usage,
            flavors,
            pending_now: 0,
            series: Series::default(),
            preemptions: 0,
        };
        (state, warnings)
    }

    /// The next instant something happens (an arrival, a timer, the
    /// scheduler's wake-up); `None` when nothing will, or it is past the
    /// scenario's end.
    fn next_instant(&self, scenario: &Scenario, next_wake: Option<Millis>) -> Option<Millis> {
        let candidates = [
            self.order
                .get(self.next_arrival)
                .map(|&i| scenario.jobs[i].arrival),
            self.finishes.peek().map(|Reverse((t, _, _))| *t),
            self.readies.peek().map(|Reverse((t, _, _))| *t),
            self.node_ready.peek().map(|Reverse((t, _))| *t),
            next_wake,
        ];
        let t = candidates.into_iter().flatten().min()?;
        if scenario.until.is_some_and(|u| t > u) {
            return None;
        }
        Some(t)
    }

    /// The jobs arriving by `now` through intake: those queued become
    /// inputs (returned, in the inputs' order), the others are recorded
    /// with why they never reached the scheduler.
    fn arrivals(
        &mut self,
        scenario: &Scenario,
        now: Millis,
        inputs: &mut Vec<Input>,
    ) -> Vec<usize> {
        let mut submitted_jobs = Vec::new();
        while let Some(&i) = self.order.get(self.next_arrival) {
            let job = &scenario.jobs[i];
            if job.arrival > now {
                break;
            }
            self.next_arrival += 1;
            let record = &mut self.records[i];
            record.arrived = true;
            match intake(&scenario.cluster, &job.info, job.explicit_priority) {
                Intake::Queued(workload) => {
                    inputs.push(prior::submit(job, workload));
                    submitted_jobs.push(i);
                    record.waiting_since = Some(now);
                    self.pending_now += 1;
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
        submitted_jobs
    }

    /// The timers due by `now` as inputs: pods ready and finishes of
    /// admissions that still stand, then nodes ready (whose flavors are
    /// returned).
    fn due_timers(
        &mut self,
        scheduler: &Scheduler,
        now: Millis,
        inputs: &mut Vec<Input>,
    ) -> Vec<FlavorId> {
        inputs.extend(take_due(&mut self.readies, scheduler, now).map(Input::PodsReady));
        inputs.extend(take_due(&mut self.finishes, scheduler, now).map(Input::Finish));
        let mut readied = Vec::new();
        while let Some(&Reverse((at, flavor))) = self.node_ready.peek() {
            if at > now {
                break;
            }
            self.node_ready.pop();
            inputs.push(Input::NodeReady(flavor));
            readied.push(flavor);
        }
        readied
    }

    /// Enacts a step: notes the ids of the jobs submitted, records
    /// its events, provisions or releases nodes as its scale plan says,
    /// and samples the series.
    fn enact(
        &mut self,
        step: &Step,
        now: Millis,
        scheduler: &Scheduler,
        scenario: &Scenario,
        submitted_jobs: &[usize],
    ) {
        for (&job, &id) in submitted_jobs.iter().zip(&step.submitted) {
            self.records[job].workload = Some(id);
            if self.record_of.len() <= id.index() {
                self.record_of.resize(id.index() + 1, usize::MAX);
            }
            self.record_of[id.index()] = job;
        }
        for event in &step.events {
            self.handle(event, now, scheduler, scenario);
        }
        for request in &step.scale {
            let track = &mut self.flavors[request.flavor.index()];
            match request.kind {
                ScaleKind::Up => {
                    for _ in 0..request.nodes {
                        self.node_ready
                            .push(Reverse((now.saturating_add(track.delay), request.flavor)));
                    }
                }
                ScaleKind::Down => refresh_pooled(scheduler, track, request.flavor, now),
            }
        }
        self.series
            .pending
            .push((now.as_secs_f64(), self.pending_now));
        for track in &mut self.flavors {
            track.samples.push((now.as_secs_f64(), track.usage.value));
        }
    }
}

/// The workloads whose timer in `timers` is due by `now` and whose
/// admission it was set for still stands, taken off `timers`.
fn take_due(
    timers: &mut prior::Timers,
    scheduler: &Scheduler,
    now: Millis,
) -> impl Iterator<Item = WorkloadId> {
    let mut due = Vec::new();
    while let Some(&Reverse((at, id, epoch))) = timers.peek() {
        if at > now {
            break;
        }
        timers.pop();
        let entry = scheduler.entry(id);
        if entry.epoch == epoch && entry.status == Status::Admitted {
            due.push(id);
        }
    }
    due.into_iter()
}

/// Usage of the dominant resource as a fraction of nominal quota.
fn dominant_usage(scheduler: &Scheduler, cq: ClusterQueueId) -> f64 {
    (0..scheduler.cluster().flavor_resource_count())
        .map(|fr| FlavorResource(fr as u32))
        .filter(|&fr| !scheduler.nominal(cq, fr).is_zero())
        .map(|fr| scheduler.usage(cq, fr).as_f64() / scheduler.nominal(cq, fr).as_f64())
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

impl Record {
    /// Ends a wait under way at `at`, adding it to the time waited.
    fn stop_waiting(&mut self, at: Millis) {
        if let Some(since) = self.waiting_since.take() {
            self.waited = self.waited.saturating_add(at.saturating_sub(since));
        }
    }

    /// Says on the eviction that used up the last retry (at `at_seconds`)
    /// that the workload is deactivated, or records it as an eviction of
    /// its own.
    fn note_deactivation(&mut self, at_seconds: f64, reason: String) {
        match self
            .history
            .last_mut()
            .filter(|h| h.event == HistoryEvent::Evicted && h.at_seconds == at_seconds)
        {
            Some(eviction) => eviction.reason = format!("{}; {reason}", eviction.reason),
            None => self.history.push(HistoryEntry {
                at_seconds,
                event: HistoryEvent::Evicted,
                reason,
                flavors: None,
                by: None,
            }),
        }
    }
}

impl RunState {
    /// Records one event of a step in its job's record and the measures.
    fn handle(&mut self, event: &Event, now: Millis, scheduler: &Scheduler, scenario: &Scenario) {
        let at_seconds = now.as_secs_f64();
        let id = event.workload();
        let job_index = self.record_of[id.index()];
        let entry = scheduler.entry(id);
        let cq = entry.workload.cluster_queue;
        match event {
            Event::Admitted { .. } => {
                self.admitted(id, job_index, now, scheduler, scenario);
            }
            Event::Evicted {
                cause,
                by,
                released,
                ..
            } => {
                let record = &mut self.records[job_index];
                record.waiting_since = Some(now);
                self.pending_now += 1;
                if by.is_some() {
                    self.preemptions += 1;
                    record.preempted += 1;
                }
                account(scheduler, &mut self.flavors, released, -1, now);
                self.cq_usage[cq.index()].set(now, dominant_usage(scheduler, cq));
                record.history.push(HistoryEntry {
                    at_seconds,
                    event: HistoryEvent::Evicted,
                    reason: cause.to_string(),
                    flavors: None,
                    by: by.clone(),
                });
            }
            Event::Requeued { cause, .. } => {
                self.records[job_index].history.push(HistoryEntry {
                    at_seconds,
                    event: HistoryEvent::Requeued,
                    reason: cause.to_string(),
                    flavors: None,
                    by: None,
                });
            }
            Event::Finished { released, .. } => {
                account(scheduler, &mut self.flavors, released, -1, now);
                self.cq_usage[cq.index()].set(now, dominant_usage(scheduler, cq));
                let record = &mut self.records[job_index];
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
                self.pending_now = self.pending_now.saturating_sub(1);
                let record = &mut self.records[job_index];
                record.stop_waiting(now);
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
                self.records[job_index].note_deactivation(at_seconds, reason);
            }
            // The simulator never withdraws a job.
            Event::Withdrawn { .. } => {}
        }
    }

    /// Records an admission: the wait it ends, where and why it was
    /// admitted; sets when its pods are ready and when it finishes, and
    /// counts its usage.
    fn admitted(
        &mut self,
        id: WorkloadId,
        job_index: usize,
        now: Millis,
        scheduler: &Scheduler,
        scenario: &Scenario,
    ) {
        let entry = scheduler.entry(id);
        let cq = entry.workload.cluster_queue;
        let record = &mut self.records[job_index];
        let flavors_of = flavor_map(scheduler, id);
        record.stop_waiting(now);
        record.admitted_at = Some(now);
        record.ever_admitted = true;
        record.placement = entry
            .admission
            .as_ref()
            .map(|a| PlacementReport::of(scheduler.cluster(), &a.placements))
            .unwrap_or_default();
        self.pending_now = self.pending_now.saturating_sub(1);
        let reason = entry.admission.as_ref().map_or_else(String::new, |a| {
            render_admission(scheduler.cluster(), &entry.workload, a)
        });
        record.history.push(HistoryEntry {
            at_seconds: now.as_secs_f64(),
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
                self.readies.push(Reverse((started, id, entry.epoch)));
            }
            if let Some(runtime) = job.runtime {
                self.finishes
                    .push(Reverse((started.saturating_add(runtime), id, entry.epoch)));
            }
        }
        if let Some(admission) = &entry.admission {
            account(scheduler, &mut self.flavors, &admission.usage, 1, now);
        }
        self.cq_usage[cq.index()].set(now, dominant_usage(scheduler, cq));
    }
}
