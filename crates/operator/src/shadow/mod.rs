//! Shadow mode (`arbiter run --shadow`): Arbiter beside a running Kueue,
//! deciding without acting, to show a platform team before it switches
//! where Arbiter would decide otherwise. The loop reads Kueue's queue
//! objects (`kueue.x-k8s.io` only) as the configuration, the jobs Kueue
//! manages (its `kueue.x-k8s.io/queue-name` label, which Arbiter reads too)
//! as arrivals, and steps its own `Scheduler` with the hooks in force (the
//! bundles); a job that ended under Kueue ends in Arbiter's shadow too
//! (finished if Arbiter had admitted it, else withdrawn). Kueue's
//! `Workload` objects tell what Kueue decided (`kueue`); each workload's
//! two stories are compared (`compare`) and reported (`report`): metrics,
//! the admin port's `/shadow`, a report file, one log line per new
//! difference.
//!
//! It never writes to the API: it holds no writer, publisher or event
//! recorder, serves no webhooks, and the bundle watch it starts does not
//! speak. Called by `OperatorBuilder::start` in place of the driver's loop.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbiter_core::jobs::{Ended, Integrations};
use arbiter_core::model::Millis;
use arbiter_core::scheduler::hooks::Hooks;
use arbiter_core::scheduler::{Event, Scheduler, WorkloadId};
use k8s_openapi::api::core::v1::{Namespace as KubeNamespace, Node};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::ObjectRef;
use kube::Client;
use tokio::sync::Notify;

use crate::admin::{AdminState, OperatorMetrics};
use crate::driver::index::JobIndex;
use crate::driver::{DriverOptions, JobKey};
use crate::watch::{self, JobWatch, Watched};

pub mod compare;
mod jobs;
pub mod kueue;
pub mod report;

use compare::{Difference, Moment, Outcome, Side};
use kueue::KueueHistory;
use report::{Counts, Report, Row, ShadowMetrics};

/// Kueue's API group: the only one whose queue objects the shadow reads.
const KUEUE_GROUP: &str = "kueue.x-k8s.io";

/// How often the comparison is made again when nothing is watched to
/// change (one side's admission turns into a difference once the other has
/// not followed within the tolerance).
const REEVALUATE: Duration = Duration::from_secs(1);

/// How the shadow mode runs.
#[derive(Clone, Debug)]
pub struct ShadowOptions {
    /// Where the report is written (rewritten every `report_every` while it
    /// changes, and on shutdown); `None`: not written.
    pub report: Option<PathBuf>,
    /// Admissions this close count as the same time.
    pub tolerance: Duration,
    /// How often the report file is rewritten at most.
    pub report_every: Duration,
}

impl Default for ShadowOptions {
    fn default() -> Self {
        ShadowOptions {
            report: None,
            tolerance: Duration::from_secs(5),
            report_every: Duration::from_secs(10),
        }
    }
}

/// Why the shadow mode did not start.
#[derive(Debug, thiserror::Error)]
pub enum ShadowError {
    /// Kueue is not installed (its Workload kind is not served).
    #[error("Kueue's Workload kind (kueue.x-k8s.io v1beta2 or v1beta1) is not served by the API: the shadow mode runs beside an installed Kueue, whose decisions it reads from its Workloads")]
    NoKueue,
}

/// One job the shadow tracks: Arbiter's side of its story.
#[derive(Debug)]
struct Tracked {
    uid: String,
    /// Its workload in the shadow scheduler (`None`: not queued there, or withdrawn).
    id: Option<WorkloadId>,
    created: Option<i64>,
    /// Whether the shadow saw it arrive.
    timed: bool,
    /// When it ended (under Kueue).
    ended_at: Option<i64>,
    /// Refused at intake (cannot be queued by Arbiter): read again after
    /// the configuration changes.
    unqueued: bool,
    arbiter: Side,
    /// The differences already told (logged, counted).
    told: BTreeSet<Difference>,
    outcome: Outcome,
}

impl Tracked {
    fn new(uid: String, created: Option<i64>, timed: bool) -> Tracked {
        Tracked {
            uid,
            id: None,
            created,
            timed,
            ended_at: None,
            unqueued: false,
            arbiter: Side::default(),
            told: BTreeSet::new(),
            outcome: Outcome::Waiting,
        }
    }
}

/// The shadow mode's loop and everything it owns.
pub struct Shadow {
    integrations: Integrations,
    hooks: Box<dyn Hooks + Send>,
    wake: Arc<Notify>,
    options: DriverOptions,
    shadow: ShadowOptions,
    config: Vec<Watched<DynamicObject>>,
    namespaces: Watched<KubeNamespace>,
    nodes: Watched<Node>,
    jobs: Vec<JobWatch>,
    workloads: (ApiResource, Watched<DynamicObject>),
    index: JobIndex,
    scheduler: Option<Scheduler>,
    fingerprint: String,
    /// The resources jobs asked for when the configuration was last looked at.
    job_resources: Vec<String>,
    tracked: BTreeMap<JobKey, Tracked>,
    by_id: HashMap<WorkloadId, JobKey>,
    /// Jobs by uid and by `namespace/name` (how the core names a preemptor).
    by_uid: HashMap<String, JobKey>,
    by_name: HashMap<String, JobKey>,
    kueue: KueueHistory,
    /// The last outcomes of the jobs deleted since the start.
    settled: Counts,
    started_at: i64,
    report: Arc<Mutex<Report>>,
    metrics: Option<ShadowMetrics>,
    admin: Option<(Arc<AdminState>, OperatorMetrics)>,
    /// When the report file was last written, and whether the report
    /// changed since.
    written_at: Option<std::time::Instant>,
    unwritten: bool,
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Watches Kueue's Workloads (the first version served).
async fn kueue_workloads(
    client: &Client,
    wake: &Arc<Notify>,
) -> Option<(ApiResource, Watched<DynamicObject>)> {
    for version in ["v1beta2", "v1beta1"] {
        let gvk = GroupVersionKind::gvk(KUEUE_GROUP, version, "Workload");
        if let Some(found) = watch::dynamic(client, &gvk, wake.clone()).await {
            return Some(found);
        }
    }
    None
}

impl Shadow {
    /// Starts the watches (Kueue's queue objects and Workloads, Namespaces,
    /// Nodes, the job kinds served) and waits until each has listed.
    pub async fn start(
        client: Client,
        integrations: Integrations,
        hooks: Box<dyn Hooks + Send>,
        options: DriverOptions,
        shadow: ShadowOptions,
    ) -> Result<Shadow, ShadowError> {
        let wake = Arc::new(Notify::new());
        let workloads = kueue_workloads(&client, &wake)
            .await
            .ok_or(ShadowError::NoKueue)?;
        let config = watch::config_kinds_of(&client, &wake, Some(KUEUE_GROUP)).await;
        let all: Vec<usize> = (0..integrations.kinds().count()).collect();
        let (jobs, unserved) = watch::discover_jobs(&client, &integrations, &all, &wake).await;
        for kind in &unserved {
            let (api_version, kind) = integrations.kinds().nth(*kind).unwrap_or_default();
            tracing::info!(kind = %format!("{api_version} {kind}"), "the API does not serve this job kind; the shadow mode does not compare its jobs (restart it once the kind is installed)");
        }
        let namespaces = watch::typed::<KubeNamespace>(&client, wake.clone());
        let nodes = watch::typed::<Node>(&client, wake.clone());
        for watched in config.iter().chain([&workloads.1]) {
            let _ = watched.store.wait_until_ready().await;
        }
        for job in &jobs {
            let _ = job.watched.store.wait_until_ready().await;
        }
        let _ = namespaces.store.wait_until_ready().await;
        let _ = nodes.store.wait_until_ready().await;
        tracing::info!(
            config_kinds = config.len(),
            job_kinds = jobs.len(),
            "shadow mode: watching Kueue's queue objects, Workloads and jobs; writing nothing"
        );
        let report = Report {
            tolerance_seconds: shadow.tolerance.as_secs_f64(),
            ..Report::default()
        };
        Ok(Shadow {
            integrations,
            hooks,
            wake,
            options,
            shadow,
            config,
            namespaces,
            nodes,
            jobs,
            workloads,
            index: JobIndex::default(),
            scheduler: None,
            fingerprint: String::new(),
            job_resources: Vec::new(),
            tracked: BTreeMap::new(),
            by_id: HashMap::new(),
            by_uid: HashMap::new(),
            by_name: HashMap::new(),
            kueue: KueueHistory::default(),
            settled: Counts::of(std::iter::empty()),
            started_at: now_millis(),
            report: Arc::new(Mutex::new(report)),
            metrics: None,
            admin: None,
            written_at: None,
            unwritten: false,
        })
    }

    /// The loop's wake-up (the bundle watcher notifies it after a change).
    pub fn wake(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Reports readiness to the admin state, its `arbiter_shadow_*`
    /// families into its registry and the report at its `/shadow`; the
    /// `arbiter_*` families tell the shadow scheduler's decisions.
    pub fn with_admin(mut self, state: Arc<AdminState>, metrics: OperatorMetrics) -> Shadow {
        let shadow_metrics = {
            let mut registry = state.registry.lock().unwrap_or_else(|p| p.into_inner());
            ShadowMetrics::register(&mut registry)
        };
        let report = self.report.clone();
        state.serve_shadow(Arc::new(move || {
            report.lock().unwrap_or_else(|p| p.into_inner()).to_json()
        }));
        state
            .listed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        metrics.set_leader(true);
        self.metrics = Some(shadow_metrics);
        self.admin = Some((state, metrics));
        self
    }

    /// Runs until `shutdown` resolves; writes the report a last time.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            self.tick();
            self.write_report(false);
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(REEVALUATE) => {}
                _ = &mut shutdown => {
                    self.write_report(true);
                    return;
                }
            }
            tokio::time::sleep(self.options.batch_window).await;
        }
    }

    /// One pass: configuration, jobs, a step of the shadow scheduler,
    /// Kueue's Workloads, the comparison.
    fn tick(&mut self) {
        let now = now_millis();
        self.index.refresh(&self.jobs, &self.integrations);
        let rebuilt = self.refresh_config();
        if let Some((state, _)) = &self.admin {
            state.configured.store(
                self.scheduler.is_some(),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        if self.scheduler.is_none() {
            return;
        }
        let (inputs, submits) = self.read_jobs(now, rebuilt);
        let step = {
            let scheduler = self.scheduler.as_mut().expect("configured");
            scheduler.step(Millis(now), inputs, self.hooks.as_mut())
        };
        for (id, key) in step.submitted.iter().zip(submits) {
            self.by_id.insert(*id, key.clone());
            if let Some(tracked) = self.tracked.get_mut(&key) {
                tracked.id = Some(*id);
            }
        }
        self.record(&step.events);
        if let (Some((_, metrics)), Some(scheduler)) = (&self.admin, &self.scheduler) {
            metrics.observe(scheduler, &step.events);
            metrics.set_queues(scheduler);
        }
        self.read_kueue();
        self.compare(now);
    }

    /// Rebuilds the configuration from Kueue's queue objects, Namespaces
    /// and Nodes when they (or the resources jobs ask for) changed — looked
    /// at only when a watch noted a change; returns whether it did.
    fn refresh_config(&mut self) -> bool {
        let mut noted = false;
        for changes in self
            .config
            .iter()
            .map(|w| &w.changes)
            .chain([&self.namespaces.changes, &self.nodes.changes])
        {
            noted |= !changes.take().is_empty();
        }
        if !noted && self.index.resources().eq(self.job_resources.iter()) {
            return false;
        }
        self.job_resources = self.index.resources().cloned().collect();
        let crate::config::ConfigInputs {
            objects,
            namespaces,
            nodes,
            resources,
            fingerprint,
        } = crate::config::ConfigInputs::read(
            self.config.iter().flat_map(|w| w.store.state()),
            &self.namespaces.store.state(),
            &self.nodes.store.state(),
            self.index.resources().cloned(),
        );
        if fingerprint == self.fingerprint {
            return false;
        }
        self.fingerprint = fingerprint;
        let built = crate::config::build_lenient(&objects, &namespaces, resources);
        for warning in &built.warnings {
            tracing::warn!(%warning, "Kueue's queue configuration");
        }
        for inactive in &built.cluster.inactive {
            tracing::warn!(object = ?inactive, "left out of the shadow's configuration");
        }
        let mut cluster = built.cluster;
        // Nothing runs the shadow's admissions: waiting for pods that
        // will never start would evict them all.
        cluster.pods_ready = None;
        cluster.preemption_strategies = self.options.preemption_strategies;
        let cluster = Arc::new(cluster);
        let node_pools = crate::config::pools(&cluster, &nodes);
        // Topology labels are given after every build: a reconfiguration
        // forgets them.
        let scheduler = match &mut self.scheduler {
            Some(scheduler) => {
                scheduler.reconfigure(cluster, &node_pools.pools);
                tracing::info!("shadow mode: Kueue's queue configuration changed");
                scheduler
            }
            None => self
                .scheduler
                .insert(Scheduler::new(cluster, &node_pools.pools)),
        };
        scheduler.label_pools(&node_pools.labels);
        true
    }

    /// Takes in what the step decided: admissions (time, flavors),
    /// preemptions (the preemptor's victims), refusals. (A workload
    /// withdrawn was forgotten when its input was made: its id may already
    /// name a job submitted in the same step.)
    fn record(&mut self, events: &[Event]) {
        let scheduler = self.scheduler.as_ref().expect("configured");
        let cluster = scheduler.cluster();
        for event in events {
            let Some(key) = self.by_id.get(&event.workload()).cloned() else {
                continue;
            };
            match event {
                Event::Admitted { workload } => {
                    let Some(admission) = &scheduler.entry(*workload).admission else {
                        continue;
                    };
                    let Some(tracked) = self.tracked.get_mut(&key) else {
                        continue;
                    };
                    if tracked.arbiter.admitted_at.is_none() {
                        tracked.arbiter.admitted_at = Some(admission.at.0);
                        tracked.arbiter.flavors = admission
                            .pod_sets
                            .iter()
                            .map(|set| {
                                set.flavors
                                    .iter()
                                    .map(|(resource, flavor)| {
                                        (
                                            cluster.resource_name(*resource).to_string(),
                                            cluster.flavors[flavor.index()].name.clone(),
                                        )
                                    })
                                    .collect()
                            })
                            .collect();
                    }
                }
                Event::Evicted { by: Some(by), .. } => {
                    let victim = format!("{}/{}", key.namespace, key.name);
                    if let Some(preemptor) =
                        self.by_name.get(by).and_then(|p| self.tracked.get_mut(p))
                    {
                        preemptor.arbiter.victims.insert(victim);
                    }
                }
                Event::Rejected {
                    policy, message, ..
                } => {
                    if let Some(tracked) = self.tracked.get_mut(&key) {
                        tracked.arbiter.refused =
                            Some(format!("rejected by policy {policy}: {message}"));
                    }
                }
                Event::Deactivated {
                    retries,
                    max_retries,
                    ..
                } => {
                    if let Some(tracked) = self.tracked.get_mut(&key) {
                        tracked.arbiter.refused = Some(format!(
                            "deactivated: evicted {retries} times, retryPolicy.maxRetries is {max_retries}"
                        ));
                    }
                }
                _ => {}
            }
        }
    }

    /// Takes in the Kueue Workloads that changed (all of them after a list).
    fn read_kueue(&mut self) {
        let (resource, watched) = &self.workloads;
        let changed = watched.changes.take();
        let objects: Vec<Arc<DynamicObject>> = if changed.all {
            watched.store.state()
        } else {
            changed
                .objects
                .keys()
                .filter_map(|(namespace, name)| {
                    let reference = ObjectRef::<DynamicObject>::new_with(name, resource.clone())
                        .within(namespace);
                    watched.store.get(&reference)
                })
                .collect()
        };
        for object in objects {
            if let Ok(value) = serde_json::to_value(object.as_ref()) {
                self.kueue.observe(&kueue::read(&value));
            }
        }
    }

    /// Compares every tracked job's two sides: the report made anew, the
    /// metrics set, each new difference logged and counted.
    fn compare(&mut self, now: i64) {
        let scheduler = self.scheduler.as_ref().expect("configured");
        let tolerance_ms = self.shadow.tolerance.as_millis() as i64;
        let mut rows = Vec::with_capacity(self.tracked.len());
        for (key, tracked) in &mut self.tracked {
            let mut arbiter = tracked.arbiter.clone();
            arbiter.pending = tracked
                .id
                .filter(|_| arbiter.admitted_at.is_none() && arbiter.refused.is_none())
                .map(|id| scheduler.reason_text(id))
                .filter(|r| !r.is_empty());
            let by_uid = &self.by_uid;
            let kueue = self.kueue.side(&tracked.uid, |uid| {
                by_uid
                    .get(uid)
                    .map(|k| format!("{}/{}", k.namespace, k.name))
            });
            let moment = Moment {
                now,
                tolerance_ms,
                ended_at: tracked.ended_at,
                timed: tracked.timed,
            };
            let outcome = compare::compare(&arbiter, &kueue, moment);
            let job = format!(
                "{} {}/{}",
                self.jobs[key.watch].resource.kind, key.namespace, key.name
            );
            for kind in outcome.differences() {
                if tracked.told.insert(kind) {
                    tracing::info!(
                        %job,
                        difference = kind.name(),
                        arbiter = %serde_json::to_string(&arbiter).unwrap_or_default(),
                        kueue = %serde_json::to_string(&kueue).unwrap_or_default(),
                        "shadow: Arbiter would decide otherwise than Kueue"
                    );
                    if let Some(metrics) = &self.metrics {
                        metrics.found(kind);
                    }
                }
            }
            tracked.outcome = outcome.clone();
            rows.push(Row {
                job,
                created_at: tracked.created,
                ended_at: tracked.ended_at,
                timed: tracked.timed,
                outcome: outcome.name(),
                differences: outcome.differences().into_iter().collect(),
                arbiter,
                kueue,
            });
        }
        let current = Counts::of(self.tracked.values().map(|t| &t.outcome));
        if let Some(metrics) = &self.metrics {
            metrics.set(&current);
        }
        let mut report = self.report.lock().unwrap_or_else(|p| p.into_inner());
        let changed = report.current != current
            || report.settled != self.settled
            || report.workloads != rows
            || !report.configured;
        report.generated_at = now;
        report.configured = true;
        report.current = current;
        report.settled = self.settled.clone();
        report.workloads = rows;
        self.unwritten |= changed;
    }

    /// Writes the report file when it is due (or `last`), if one is asked for.
    fn write_report(&mut self, last: bool) {
        let Some(path) = &self.shadow.report else {
            return;
        };
        let due = self
            .written_at
            .is_none_or(|at| at.elapsed() >= self.shadow.report_every);
        if !(last || (self.unwritten && due) || self.written_at.is_none()) {
            return;
        }
        let report = self
            .report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match report.write(path) {
            Ok(()) => {
                self.written_at = Some(std::time::Instant::now());
                self.unwritten = false;
            }
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, "the shadow report could not be written; pass --shadow-report with a writable path (the summary is still at /shadow)");
                self.written_at = Some(std::time::Instant::now());
            }
        }
    }

    /// Whether the job `key` ended, as its integration reads it.
    fn ended(&self, key: &JobKey) -> Option<Ended> {
        self.index.get(key).and_then(|seen| seen.ended.clone())
    }
}
