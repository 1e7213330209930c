//! The operator's driver loop: the second driver of the core, beside the
//! simulator. Each tick it reads the stores the reflectors keep, rebuilds
//! the configuration when the queue objects, Namespaces or Nodes changed
//! (the core's `reconfigure`), turns what happened to jobs into `Input`s,
//! calls `Scheduler::step` with the wall clock, and carries out the
//! decisions by writing the jobs (`inject`). It makes no decision itself.
//!
//! Restart: on its first configuration the driver reads back every
//! released job that carries an `arbiter.dev/admission` record and hands
//! them to `Scheduler::restore` (no policy asked, nothing admitted twice);
//! a job whose record no longer fits the configuration is held again and
//! queued as new. Every write is a read-modify-replace carrying the
//! object's `resourceVersion`, retried on conflict, so a write lost or
//! repeated changes nothing twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arbiter_core::jobs::{Integration, Integrations};
use arbiter_core::model::Millis;
use arbiter_core::scheduler::hooks::Hooks;
use arbiter_core::scheduler::intake::{intake, Intake};
use arbiter_core::scheduler::Restored;
use arbiter_core::scheduler::{Input, Reason, Scheduler, WorkloadId};
use k8s_openapi::api::core::v1::{Namespace as KubeNamespace, Node};
use kube::api::DynamicObject;
use kube::Client;
use serde_json::Value;
use tokio::sync::Notify;

use crate::admin::{AdminState, OperatorMetrics};
use crate::config;
use crate::inject::{self, InjectError};
use crate::jobs::{self, job_finished, queue_label, template_paths, uid};
use crate::queue_status::QueueStatusWriter;
use crate::watch::{self, discover_jobs, JobWatch, Watched};

mod carry;
use crate::workloads::{Owner, Publisher};

/// How the driver runs.
#[derive(Clone, Debug)]
pub struct DriverOptions {
    /// How long to gather changes after a wake before stepping, so a burst
    /// of job creations is one step.
    pub batch_window: Duration,
    /// Step at least this often even when nothing is watched to change.
    pub resync: Duration,
    /// How often job kinds the API does not serve are looked for again.
    pub rediscover: Duration,
}

impl Default for DriverOptions {
    fn default() -> Self {
        DriverOptions {
            batch_window: Duration::from_millis(20),
            resync: Duration::from_secs(30),
            rediscover: Duration::from_secs(30),
        }
    }
}

/// A job, as the driver names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct JobKey {
    /// Index into `Driver::jobs`.
    watch: usize,
    namespace: String,
    name: String,
}

impl std::fmt::Display for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A job the scheduler knows.
#[derive(Clone, Debug)]
struct Tracked {
    id: WorkloadId,
    owner: Owner,
    template_paths: Vec<Option<String>>,
    finish_sent: bool,
    /// The last denial an Event was recorded for.
    denied: Option<String>,
    /// The last eviction: its code and sentence.
    eviction: Option<(String, String)>,
}

/// Everything the loop owns.
pub struct Driver {
    client: Client,
    options: DriverOptions,
    integrations: Integrations,
    /// In a mutex only so the driver is `Sync` (its futures are `Send`); one task uses it.
    hooks: std::sync::Mutex<Box<dyn Hooks + Send>>,
    wake: Arc<Notify>,
    config: Vec<Watched<DynamicObject>>,
    namespaces: Watched<KubeNamespace>,
    nodes: Watched<Node>,
    jobs: Vec<JobWatch>,
    /// Integrations whose kind the API did not serve when last looked for
    /// (a CRD installed after the operator started is found within
    /// `DriverOptions::rediscover`).
    unserved: Vec<usize>,
    discovered_at: std::time::Instant,
    scheduler: Option<Scheduler>,
    fingerprint: String,
    tracked: BTreeMap<JobKey, Tracked>,
    by_id: BTreeMap<WorkloadId, JobKey>,
    publisher: Publisher,
    queue_status: QueueStatusWriter,
    admin: Option<(Arc<AdminState>, OperatorMetrics)>,
    /// Events about jobs that cannot be queued, to publish after the step.
    unqueued_events: Vec<(Owner, &'static str, String)>,
    /// Last message logged per job that cannot be queued, so it is logged once.
    unqueued: BTreeMap<JobKey, String>,
    /// Job writes that failed during the tick running.
    write_failures: std::sync::atomic::AtomicU32,
    /// The wait before failed writes are tried again (`None`: none failed last tick).
    retry: Option<Duration>,
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Driver {
    /// Starts the reflectors and waits until each has listed once.
    pub async fn start(
        client: Client,
        integrations: Integrations,
        hooks: Box<dyn Hooks + Send>,
        options: DriverOptions,
    ) -> Driver {
        let wake = Arc::new(Notify::new());
        let config = watch::config_kinds(&client, &wake).await;
        let all: Vec<usize> = (0..integrations.kinds().count()).collect();
        let (jobs, unserved) = discover_jobs(&client, &integrations, &all, &wake).await;
        for kind in &unserved {
            let (api_version, kind) = integrations.kinds().nth(*kind).unwrap_or_default();
            tracing::info!(kind = %format!("{api_version} {kind}"), "the API does not serve this job kind yet; looked for again every {} s", options.rediscover.as_secs());
        }
        let namespaces = watch::typed::<KubeNamespace>(&client, wake.clone());
        let nodes = watch::typed::<Node>(&client, wake.clone());
        for watched in &config {
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
            "watching; stores listed"
        );
        let client_for_publisher = client.clone();
        Driver {
            client,
            options,
            integrations,
            hooks: std::sync::Mutex::new(hooks),
            wake,
            config,
            namespaces,
            nodes,
            jobs,
            unserved,
            discovered_at: std::time::Instant::now(),
            scheduler: None,
            fingerprint: String::new(),
            tracked: BTreeMap::new(),
            by_id: BTreeMap::new(),
            unqueued: BTreeMap::new(),
            unqueued_events: Vec::new(),
            publisher: Publisher::new(client_for_publisher),
            queue_status: QueueStatusWriter::default(),
            admin: None,
            write_failures: std::sync::atomic::AtomicU32::new(0),
            retry: None,
        }
    }

    /// What the validating webhook reads: the configuration, Namespace and Node stores.
    pub fn config_view(&self) -> crate::webhook::ConfigView {
        crate::webhook::ConfigView {
            config: self.config.iter().map(|w| w.store.clone()).collect(),
            namespaces: self.namespaces.store.clone(),
            nodes: self.nodes.store.clone(),
        }
    }

    /// The job integrations the driver serves.
    pub fn integrations(&self) -> &Integrations {
        &self.integrations
    }

    /// The driver's wake-up: notifying it makes the driver step again soon
    /// (after its batch window). The bundle watcher notifies it after every
    /// change of the bundles in force, so the next decision uses them.
    pub fn wake(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Reports readiness and metrics to the admin port's state.
    pub fn with_admin(mut self, state: Arc<AdminState>, metrics: OperatorMetrics) -> Driver {
        state
            .listed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.admin = Some((state, metrics));
        self
    }

    /// Runs until `shutdown` resolves.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let next = self.tick().await;
            let wait = match next {
                Some(at) => Duration::from_millis(at.0.saturating_sub(now_millis()).max(0) as u64)
                    .min(self.options.resync),
                None => self.options.resync,
            };
            let wait = if self.unserved.is_empty() {
                wait
            } else {
                wait.min(self.options.rediscover)
            };
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
                _ = &mut shutdown => return,
            }
            tokio::time::sleep(self.options.batch_window).await;
        }
    }

    fn integration(&self, watch: usize) -> &Integration {
        let index = self.jobs[watch].integration;
        let (api_version, kind) = self
            .integrations
            .kinds()
            .nth(index)
            .expect("job watches index the integrations");
        self.integrations
            .find(api_version, kind)
            .expect("a kind the integrations list")
    }

    /// Every job of every watched kind, as JSON, with its key.
    fn job_objects(&self) -> Vec<(JobKey, Value)> {
        let mut out = Vec::new();
        for (watch, job) in self.jobs.iter().enumerate() {
            for object in job.watched.store.state() {
                let Ok(value) = serde_json::to_value(object.as_ref()) else {
                    continue;
                };
                let key = JobKey {
                    watch,
                    namespace: object.metadata.namespace.clone().unwrap_or_default(),
                    name: object.metadata.name.clone().unwrap_or_default(),
                };
                out.push((key, value));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Rebuilds the configuration when it changed. Returns false while no
    /// valid configuration has been seen.
    async fn refresh_config(&mut self, jobs: &[(JobKey, Value)]) -> bool {
        let objects = config::api_objects(self.config.iter().flat_map(|w| w.store.state()));
        let namespaces = config::namespaces(&self.namespaces.store.state());
        let mut nodes: Vec<Node> = self
            .nodes
            .store
            .state()
            .iter()
            .map(|n| (**n).clone())
            .collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut resources: BTreeSet<String> = config::node_resources(&nodes).collect();
        for (key, object) in jobs {
            if let Ok(info) = self.integration(key.watch).extract(object) {
                for pod_set in &info.pod_sets {
                    resources.extend(pod_set.requests.keys().cloned());
                }
            }
        }
        let node_view: Vec<_> = nodes
            .iter()
            .map(|n| {
                (
                    &n.metadata.name,
                    &n.metadata.labels,
                    n.spec.as_ref().and_then(|s| s.unschedulable),
                    n.status.as_ref().and_then(|s| s.allocatable.as_ref()),
                )
            })
            .collect();
        let fingerprint = serde_json::json!({
            "objects": objects.iter().map(|o| &o.object).collect::<Vec<_>>(),
            "namespaces": namespaces.iter().map(|(k, v)| (k, (&v.labels, &v.annotations))).collect::<Vec<_>>(),
            "nodes": serde_json::to_value(&node_view).unwrap_or_default(),
            "resources": resources,
        })
        .to_string();
        if fingerprint == self.fingerprint {
            return self.scheduler.is_some();
        }
        self.fingerprint = fingerprint;
        let built = match config::build(&objects, &namespaces, resources) {
            Ok(built) => built,
            Err(errors) => {
                for error in &errors {
                    tracing::error!(%error, "the queue configuration is invalid; the last valid one stays in force");
                }
                return self.scheduler.is_some();
            }
        };
        for warning in &built.warnings {
            tracing::warn!(%warning, "queue configuration");
        }
        let cluster = Arc::new(built.cluster);
        let pools = config::pools(&cluster, &nodes);
        match &mut self.scheduler {
            Some(scheduler) => {
                let outcome = scheduler.reconfigure(cluster, &pools);
                tracing::info!(
                    detached = outcome.detached.len(),
                    orphaned = outcome.orphaned.len(),
                    adopted = outcome.adopted.len(),
                    "configuration changed"
                );
            }
            None => {
                let scheduler = Scheduler::new(cluster, &pools);
                self.scheduler = Some(scheduler);
                self.restore(jobs).await;
            }
        }
        true
    }

    /// Reads back the admitted jobs after a start (see the module docs).
    async fn restore(&mut self, jobs: &[(JobKey, Value)]) {
        let Some(cluster) = self.scheduler.as_ref().map(|s| s.cluster_arc().clone()) else {
            return;
        };
        let mut restored = Vec::new();
        let mut keys = Vec::new();
        let mut unreadable = Vec::new();
        for (key, object) in jobs {
            let integration = self.integration(key.watch);
            if integration.is_held(object) || job_finished(object) {
                continue;
            }
            let Some(record) = inject::recorded(object) else {
                continue;
            };
            let record = match record {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(job = %key, error = %e, "holding the job again and queueing it as new");
                    unreadable.push(key.clone());
                    continue;
                }
            };
            let Ok(info) = integration.extract(object) else {
                unreadable.push(key.clone());
                continue;
            };
            let Intake::Queued(workload) = intake(&cluster, &info, None) else {
                unreadable.push(key.clone());
                continue;
            };
            restored.push(Restored {
                workload,
                flavors: record.flavors.clone(),
                counts: record.counts.clone(),
                admitted_at: Millis(record.admitted_at),
                queue_time: Millis(record.queue_time),
            });
            keys.push((key.clone(), uid(object), template_paths(&info)));
        }
        let Some(scheduler) = self.scheduler.as_mut() else {
            return;
        };
        let results = scheduler.restore(restored);
        let count = results.iter().filter(|r| r.is_ok()).count();
        for (result, (key, uid, paths)) in results.into_iter().zip(keys) {
            match result {
                Ok(id) => {
                    self.by_id.insert(id, key.clone());
                    let owner = self.owner(&key, uid);
                    self.tracked.insert(
                        key,
                        Tracked {
                            owner,
                            id,
                            template_paths: paths,
                            finish_sent: false,
                            denied: None,
                            eviction: None,
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(job = %key, error = %e, "admission read back does not fit; holding the job again");
                    unreadable.push(key);
                }
            }
        }
        tracing::info!(restored = count, "admissions read back from the jobs");
        for key in unreadable {
            let held = self.write(&key, inject::hold).await;
            if let Err(e) = held.and(self.write(&key, inject::restore).await) {
                tracing::error!(job = %key, error = %e, "could not hold the job again");
            }
        }
    }

    /// Looks again for job kinds the API did not serve (see `unserved`).
    async fn rediscover(&mut self) {
        if self.unserved.is_empty() || self.discovered_at.elapsed() < self.options.rediscover {
            return;
        }
        self.discovered_at = std::time::Instant::now();
        let (found, unserved) =
            discover_jobs(&self.client, &self.integrations, &self.unserved, &self.wake).await;
        for job in &found {
            let _ = job.watched.store.wait_until_ready().await;
            tracing::info!(kind = %job.watched.what, "the API serves this job kind now; watching its jobs");
        }
        self.jobs.extend(found);
        self.unserved = unserved;
    }

    /// One pass: configuration, job changes, a step, the decisions written.
    /// Returns when the core asked to be woken.
    pub async fn tick(&mut self) -> Option<Millis> {
        self.rediscover().await;
        let jobs = self.job_objects();
        let configured = self.refresh_config(&jobs).await;
        if let Some((state, _)) = &self.admin {
            state
                .configured
                .store(configured, std::sync::atomic::Ordering::Relaxed);
        }
        if !configured {
            return None;
        }
        let now = now_millis();
        let mut inputs = Vec::new();
        let mut submits: Vec<(JobKey, String, Vec<Option<String>>)> = Vec::new();
        let mut seen = BTreeSet::new();
        let mut to_hold = Vec::new();
        let mut redo = Vec::new();
        {
            let scheduler = self.scheduler.as_ref().expect("configured");
            let cluster = scheduler.cluster_arc().clone();
            for (key, object) in &jobs {
                let extracted = self.integration(key.watch).extract(object);
                let held = self.integration(key.watch).is_held(object);
                let info = match extracted {
                    Ok(info) => info,
                    Err(e) => {
                        // Arbiter's job (it names a queue) that cannot be
                        // read: held, so it never runs unadmitted, and told.
                        if queue_label(object) && !self.tracked.contains_key(key) {
                            if !held {
                                to_hold.push(key.clone());
                            }
                            self.note_unqueued(key, uid(object), "InvalidJob", e.to_string());
                        }
                        continue;
                    }
                };
                // Being deleted (a finalizer may keep the object a while):
                // gone for the scheduler, its quota free at once.
                if info.queue_name.is_none()
                    || object.pointer("/metadata/deletionTimestamp").is_some()
                {
                    continue;
                }
                seen.insert(key.clone());
                let uid = uid(object);
                if let Some(tracked) = self.tracked.get_mut(key) {
                    if tracked.owner.uid != uid {
                        // Deleted and created again under the same name.
                        inputs.push(Input::Withdraw(tracked.id));
                        seen.remove(key);
                        continue;
                    }
                    if !tracked.finish_sent && job_finished(object) {
                        tracked.finish_sent = true;
                        inputs.push(Input::Finish(tracked.id));
                    }
                    if !tracked.finish_sent {
                        let admitted = self
                            .scheduler
                            .as_ref()
                            .is_some_and(|s| s.entry(tracked.id).admission.is_some());
                        if let Some(what) = carry::undone(admitted, held, object) {
                            redo.push((key.clone(), tracked.id, what));
                        }
                    }
                    continue;
                }
                if job_finished(object) {
                    continue;
                }
                match intake(&cluster, &info, None) {
                    Intake::Queued(workload) => {
                        self.unqueued.remove(key);
                        if !held {
                            to_hold.push(key.clone());
                        }
                        submits.push((key.clone(), uid, template_paths(&info)));
                        // Queued as of the job's creation (Kueue orders by
                        // it too), so jobs created while the operator was
                        // down keep their order.
                        inputs.push(match jobs::created_at(object) {
                            Some(queue_time) => Input::SubmitQueued {
                                workload,
                                queue_time,
                            },
                            None => Input::Submit(workload),
                        });
                    }
                    Intake::Rejected(rejection) => {
                        if !held {
                            to_hold.push(key.clone());
                        }
                        self.note_unqueued(key, uid, "Rejected", rejection.to_string());
                    }
                    Intake::Unqueued(why) => {
                        if !held {
                            to_hold.push(key.clone());
                        }
                        self.note_unqueued(key, uid, "Unqueued", why.to_string());
                    }
                }
            }
        }
        for (key, tracked) in &self.tracked {
            if !seen.contains(key) && !inputs.contains(&Input::Withdraw(tracked.id)) {
                inputs.push(Input::Withdraw(tracked.id));
            }
        }
        for key in to_hold {
            if let Err(e) = self
                .write(&key, |o, i| {
                    i.set_held(o, true).map_err(|e| InjectError::Job {
                        job: key.to_string(),
                        problem: e.to_string(),
                    })
                })
                .await
            {
                tracing::error!(job = %key, error = %e, "could not hold the job");
            }
        }
        self.redo(redo).await;
        let scheduler = self.scheduler.as_mut().expect("configured");
        let step = {
            let mut hooks = self.hooks.lock().unwrap_or_else(|p| p.into_inner());
            scheduler.step(Millis(now), inputs, hooks.as_mut())
        };
        for (id, (key, uid, template_paths)) in step.submitted.iter().zip(submits) {
            self.by_id.insert(*id, key.clone());
            let owner = self.owner(&key, uid);
            self.tracked.insert(
                key,
                Tracked {
                    owner,
                    id: *id,
                    template_paths,
                    finish_sent: false,
                    denied: None,
                    eviction: None,
                },
            );
        }
        if let (Some((_, metrics)), Some(scheduler)) = (&self.admin, &self.scheduler) {
            metrics.observe(scheduler, &step.events);
        }
        for event in &step.events {
            self.carry_out(event).await;
        }
        self.publish().await;
        for (owner, reason, message) in std::mem::take(&mut self.unqueued_events) {
            self.publisher.event(&owner, true, reason, message).await;
        }
        if let Some(scheduler) = &self.scheduler {
            self.queue_status.write(&self.client, scheduler).await;
            if let Some((_, metrics)) = &self.admin {
                metrics.set_queues(scheduler);
            }
        }
        // Writes that failed are tried again after a backoff (doubling
        // while they keep failing), whatever else wakes the loop.
        let failures = self
            .write_failures
            .swap(0, std::sync::atomic::Ordering::Relaxed);
        if failures == 0 {
            self.retry = None;
            return step.next_wake;
        }
        let retry = self
            .retry
            .map_or(carry::FIRST_RETRY, |r| (r * 2).min(carry::MAX_RETRY));
        self.retry = Some(retry);
        tracing::warn!(failures, retry_in = ?retry, "job writes failed; trying again");
        let at = Millis(now + retry.as_millis() as i64);
        Some(step.next_wake.map_or(at, |w| w.min(at)))
    }

    /// The job as a Workload's owner.
    fn owner(&self, key: &JobKey, uid: String) -> Owner {
        let resource = &self.jobs[key.watch].resource;
        Owner {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            uid,
        }
    }

    /// Workload objects and denial Events brought up to date.
    async fn publish(&mut self) {
        let Some(scheduler) = &self.scheduler else {
            return;
        };
        for tracked in self.tracked.values_mut() {
            let finished = tracked.finish_sent.then_some("The job finished");
            self.publisher
                .sync(
                    scheduler,
                    tracked.id,
                    &tracked.owner,
                    finished,
                    tracked.eviction.as_ref(),
                )
                .await;
            if let Reason::Denied { policy, message } = scheduler.reason(tracked.id) {
                let note = format!("admission policy {policy}: {message}");
                if tracked.denied.as_ref() != Some(&note) {
                    self.publisher
                        .event(&tracked.owner, true, "Denied", note.clone())
                        .await;
                    tracked.denied = Some(note);
                }
            }
        }
    }

    /// A job that names a queue but cannot be queued: logged and told in
    /// a Warning Event once per distinct message (published at the end of
    /// the tick).
    fn note_unqueued(&mut self, key: &JobKey, uid: String, reason: &'static str, message: String) {
        if self.unqueued.get(key) != Some(&message) {
            tracing::warn!(job = %key, %reason, %message, "job not queued");
            self.unqueued.insert(key.clone(), message.clone());
            let owner = self.owner(key, uid);
            self.unqueued_events.push((owner, reason, message));
        }
    }
}
