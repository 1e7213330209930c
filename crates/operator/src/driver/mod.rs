//! The operator's driver loop: the second driver of the core, beside the
//! simulator. Each tick it reads the stores the reflectors keep (only the
//! jobs a watch noted as changed: `index`), rebuilds the configuration
//! when the queue objects, Namespaces or Nodes changed (the core's
//! `reconfigure`), turns what happened to jobs into `Input`s (`changes`), calls
//! `Scheduler::step` with the wall clock, sets what each job must be
//! (`enact`: its want, `converge`) for the writer to bring it there
//! (`writer`, `inject`), and hands what the Workloads and queues should say
//! to `publish`; neither is waited for. It makes no decision itself.
//!
//! Restart: on its first configuration the driver reads back every
//! released job that carries an `arbiter.dev/admission` record and hands
//! them to `Scheduler::restore` (no policy asked, nothing admitted twice);
//! a job whose record no longer fits the configuration is held again and
//! queued as new. Every job write carries the object's `resourceVersion`
//! (or a uid precondition), so a write lost or repeated changes nothing
//! twice, and what is still to write follows from the wants again after a
//! restart or a failover.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arbiter_core::jobs::{Ended, Integrations};
use arbiter_core::model::cluster::{FairPreemptionStrategies, PodsReadyPolicy};
use arbiter_core::model::Millis;
use arbiter_core::scheduler::hooks::Hooks;
use arbiter_core::scheduler::intake::{intake, Intake};
use arbiter_core::scheduler::Restored;
use arbiter_core::scheduler::{Input, Reason, Scheduler, Status, Step, WorkloadId};
use k8s_openapi::api::core::v1::{Namespace as KubeNamespace, Node};
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use kube::Client;
use serde_json::Value;
use tokio::sync::Notify;

use crate::admin::{AdminState, OperatorMetrics};
use crate::config;
use crate::inject;
use crate::jobs::template_paths;
use crate::queue_status::QueueStatusWriter;
use crate::ungate::Ungater;
use crate::watch::{self, discover_jobs, JobWatch, Watched};

mod changes;
mod configure;
mod converge;
mod enact;
pub(crate) mod index;
mod readback;
mod scale;
mod status;
mod unqueued;
mod writer;
use converge::Want;
use index::JobIndex;
use status::Signature;
use writer::JobWriter;

use crate::publish::Publisher;
use crate::workloads::{desired, Owner};

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
    /// All-or-nothing admission (`--config`'s `waitForPodsReady`); `None`: off.
    pub pods_ready: Option<PodsReadyPolicy>,
    /// Fair sharing's preemption strategies (`--config`'s
    /// `fairSharing.preemptionStrategies`); Kueue's default pair by default.
    pub preemption_strategies: FairPreemptionStrategies,
    /// The operator's namespace: where its ProvisioningRequests live.
    pub namespace: String,
}

impl Default for DriverOptions {
    fn default() -> Self {
        DriverOptions {
            batch_window: Duration::from_millis(20),
            resync: Duration::from_secs(30),
            rediscover: Duration::from_secs(30),
            pods_ready: None,
            preemption_strategies: FairPreemptionStrategies::default(),
            namespace: "arbiter-system".to_string(),
        }
    }
}

/// A job, as the driver (and the shadow mode) names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct JobKey {
    /// Index into `Driver::jobs`.
    pub(crate) watch: usize,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl std::fmt::Display for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A job the scheduler knows.
#[derive(Clone, Debug)]
struct KnownJob {
    id: WorkloadId,
    owner: Owner,
    template_paths: Vec<Option<String>>,
    /// How the job ended, once told to the scheduler.
    ended: Option<Ended>,
    /// The last warning (a denial, a workload that never fits) an Event
    /// was recorded for.
    warned: Option<String>,
    /// The last eviction: its code and sentence.
    eviction: Option<(String, String)>,
    /// What its Workload's status was last computed from.
    published: Option<Signature>,
    /// While a failed job is being created anew to run again: the job to
    /// create and the uid of the failed one (`Want::Replaced`).
    recreate: Option<(Box<Value>, String)>,
    /// What the API said to the last write of the job it refused, until
    /// its writes go through.
    refused: Option<String>,
}

impl KnownJob {
    fn new(id: WorkloadId, owner: Owner, template_paths: Vec<Option<String>>) -> KnownJob {
        KnownJob {
            id,
            owner,
            template_paths,
            ended: None,
            warned: None,
            eviction: None,
            published: None,
            recreate: None,
            refused: None,
        }
    }
}

/// Whether a job read is one the scheduler should hold: readable, naming a
/// queue, not being deleted (a finalizer may keep the object a while: gone
/// for the scheduler, its quota free at once).
fn queued(seen: &index::ObservedJob) -> bool {
    seen.info.as_ref().is_ok_and(|i| i.queue_name.is_some()) && !seen.deleting
}

/// How often every tracked job is checked for being gone (between, only
/// the jobs that changed are).
const SWEEP: Duration = Duration::from_secs(5);

/// How often every Workload's status is looked at (see `Driver::publish`):
/// as often as `publish` writes an object at most (`publish::SETTLE`).
const FULL_PUBLISH: Duration = crate::publish::SETTLE;

/// How often queue statuses and metrics are computed at most (each pass
/// reads every queue and every live workload): a change is shown within
/// this (the tick wakes when they come due).
const QUEUE_STATUS: Duration = Duration::from_secs(1);

/// How long a graceful stop waits for the job writes handed over, and then
/// for the Workload, queue status and Event writes.
const FINISH_WRITES: Duration = Duration::from_secs(10);

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
    /// The resources jobs asked for when the configuration was last looked at.
    job_resources: Vec<String>,
    /// When every Workload's status was last looked at.
    published_at: Option<std::time::Instant>,
    index: JobIndex,
    tracked: HashMap<JobKey, KnownJob>,
    /// When every tracked job was last checked for being gone.
    swept_at: std::time::Instant,
    by_id: BTreeMap<WorkloadId, JobKey>,
    publisher: Publisher,
    queue_status: QueueStatusWriter,
    /// When queue statuses were last computed, and whether anything that
    /// changes them (a step's inputs or decisions, a new configuration)
    /// happened since.
    queues_at: Option<std::time::Instant>,
    queues_changed: bool,
    /// Which queue objects are in force, and since when.
    activity: crate::activity::Activity,
    /// Finalizer changes sent and not yet seen in the stores: (uid, add,
    /// the resourceVersion they were made from).
    finalizing: HashMap<(String, bool, String), std::time::Instant>,
    admin: Option<(Arc<AdminState>, OperatorMetrics)>,
    /// Events about jobs that cannot be queued, to publish after the step.
    unqueued_events: Vec<(Owner, &'static str, String)>,
    /// Per job that cannot be queued, its owner and the last message told,
    /// so it is told once.
    unqueued: BTreeMap<JobKey, (Owner, String)>,
    /// Brings each job to its want.
    writer: JobWriter,
    /// Admission Events to tell once the job's admission is written.
    announce: HashMap<JobKey, (Owner, String)>,
    /// Per job, what the API said to its last refused write (told once).
    refused: HashMap<JobKey, String>,
    /// Admitted preemptors whose release waits for their victims' hold:
    /// the uid, the want, the victims (`Driver::release_deferred`).
    deferred: HashMap<JobKey, (String, Want, Vec<JobKey>)>,
    /// Gives the pods of pod sets placed per card their node and cards.
    ungater: Ungater,
    /// Carries out the scale plan (ProvisioningRequests).
    provisioner: crate::provision::Provisioner,
    /// The node pools of the configuration in force.
    pools: Vec<arbiter_core::scheduler::capacity::PoolSpec>,
    /// The job kinds watched (served by the API), for the webhook's rules.
    served: Arc<std::sync::Mutex<Vec<kube::api::ApiResource>>>,
    /// What each job's Workload carried when read back after a start
    /// (counters, a backoff under way), by (namespace, Workload name), with
    /// the uid of the job owning it; taken when the job is queued.
    read_back: HashMap<(String, String), (String, arbiter_core::scheduler::Carried)>,
    /// Checks the admission records read back (`seal`).
    sealer: Option<crate::seal::Sealer>,
    /// Jobs (by uid) whose Workload someone deleted: written again.
    deleted_workloads: watch::DeletedWorkloads,
    _workload_watch: tokio::task::JoinHandle<()>,
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
        let publisher = Publisher::start(client.clone());
        let (deleted_workloads, workload_watch) =
            watch::workloads(&client, wake.clone(), publisher.observer());
        let nodes = watch::typed::<Node>(&client, wake.clone());
        for watched in &config {
            let _ = watched.store.wait_until_ready().await;
        }
        for job in &jobs {
            let _ = job.watched.store.wait_until_ready().await;
        }
        let _ = namespaces.store.wait_until_ready().await;
        let _ = nodes.store.wait_until_ready().await;
        // Not waited for: gated pods wait for its first list, and nothing
        // else does (a role without pods, from an older install, must not
        // keep the operator from starting; its watch errors say why).
        let ungater = Ungater::start(client.clone(), wake.clone());
        tracing::info!(
            config_kinds = config.len(),
            job_kinds = jobs.len(),
            "watching; stores listed"
        );
        let provisioner =
            crate::provision::Provisioner::start(client.clone(), &options.namespace, wake.clone())
                .await;
        let served = Arc::new(std::sync::Mutex::new(
            jobs.iter().map(|j| j.resource.clone()).collect(),
        ));
        let sealer = match crate::seal::load(&client, &options.namespace).await {
            Ok(sealer) => Some(sealer),
            Err(e) => {
                tracing::error!(error = %e, "admission records go unsealed: read back after a restart, each is trusted only if its Workload says the same admission");
                None
            }
        };
        let mut writer = JobWriter::new(
            client.clone(),
            integrations.clone(),
            wake.clone(),
            sealer.clone(),
        );
        for job in &jobs {
            writer.add(job);
        }
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
            job_resources: Vec::new(),
            published_at: None,
            index: JobIndex::default(),
            tracked: HashMap::new(),
            swept_at: std::time::Instant::now(),
            by_id: BTreeMap::new(),
            unqueued: BTreeMap::new(),
            unqueued_events: Vec::new(),
            publisher,
            queue_status: QueueStatusWriter::default(),
            queues_at: None,
            queues_changed: false,
            activity: crate::activity::Activity::default(),
            finalizing: HashMap::new(),
            admin: None,
            writer,
            announce: HashMap::new(),
            refused: HashMap::new(),
            deferred: HashMap::new(),
            ungater,
            provisioner,
            pools: Vec::new(),
            served,
            read_back: HashMap::new(),
            sealer,
            deleted_workloads,
            _workload_watch: workload_watch,
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

    /// The job kinds the driver watches (those of its integrations the API
    /// serves), growing as CRDs appear: what the job-hold webhook must cover.
    pub fn served_kinds(&self) -> Arc<std::sync::Mutex<Vec<kube::api::ApiResource>>> {
        self.served.clone()
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
        self.publisher.report_backlog(metrics.publish_backlog());
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
                _ = &mut shutdown => {
                    if !self.writer.finish(FINISH_WRITES).await {
                        tracing::warn!("stopping with job writes under way; the next leader makes what is left");
                    }
                    // What was decided is told before the process goes:
                    // Workloads, queue statuses and Events not settled yet.
                    if !self.publisher.flush(FINISH_WRITES).await {
                        tracing::warn!("stopping with Workload, queue status or Event writes under way; the next leader writes the statuses again, Events not written are lost");
                    }
                    return;
                }
            }
            tokio::time::sleep(self.options.batch_window).await;
        }
    }

    /// A job as JSON, from the reflector's copy.
    fn job_value(&self, key: &JobKey) -> Option<Value> {
        serde_json::to_value(self.store_copy(key)?).ok()
    }

    /// The reflector's copy of a job.
    fn store_copy(&self, key: &JobKey) -> Option<DynamicObject> {
        let watch = &self.jobs[key.watch];
        let reference = ObjectRef::<DynamicObject>::new_with(&key.name, watch.resource.clone())
            .within(&key.namespace);
        watch
            .watched
            .store
            .get(&reference)
            .map(|o| o.as_ref().clone())
    }

    /// One pass: configuration, job changes, a step, the decisions written.
    /// Returns when the core asked to be woken.
    pub async fn tick(&mut self) -> Option<Millis> {
        let started = std::time::Instant::now();
        self.written();
        self.rediscover().await;
        self.index.refresh(&self.jobs, &self.integrations);
        self.release_deferred();
        self.rewrite_deleted_workloads();
        let indexed = started.elapsed();
        let (configured, rebuilt) = self.refresh_config().await;
        let reconfigured = started.elapsed();
        self.report_watches(configured);
        if !configured {
            return None;
        }
        let now = now_millis();
        // Every job is looked at after a new configuration (one that could
        // not be queued may be now) and every `SWEEP`; in between only the
        // jobs that changed.
        let sweep = rebuilt || self.swept_at.elapsed() >= SWEEP;
        if sweep {
            self.swept_at = std::time::Instant::now();
        }
        let mut changes = self.read_changes(sweep);
        let read = started.elapsed();
        self.queues_changed |= rebuilt || !changes.inputs.is_empty();
        let step = {
            let scheduler = self.scheduler.as_mut().expect("configured");
            let mut hooks = self.hooks.lock().unwrap_or_else(|p| p.into_inner());
            let inputs = std::mem::take(&mut changes.inputs);
            scheduler.step(Millis(now), inputs, hooks.as_mut())
        };
        let stepped = started.elapsed();
        self.take_in(
            &step,
            changes.submits,
            changes.adopted,
            &mut changes.touched,
        );
        self.enact_step(&step, sweep);
        let carried = started.elapsed();
        let (owed, queues_due) = self.tell(&step, changes.touched);
        tracing::debug!(
            jobs = self.index.len(),
            events = step.events.len(),
            cycles = step.cycles,
            indexed_ms = indexed.as_millis() as u64,
            configured_ms = reconfigured.as_millis() as u64,
            read_ms = read.as_millis() as u64,
            stepped_ms = stepped.as_millis() as u64,
            carried_ms = carried.as_millis() as u64,
            total_ms = started.elapsed().as_millis() as u64,
            "tick"
        );
        if let Some((_, metrics)) = &self.admin {
            metrics.observe_tick(started.elapsed().as_secs_f64());
        }
        let publish_due = owed.then(|| Millis(now + FULL_PUBLISH.as_millis() as i64));
        [step.next_wake, publish_due, queues_due]
            .into_iter()
            .flatten()
            .min()
    }

    /// Tells the admin port whether a configuration is in force, and how
    /// often each watch listed.
    fn report_watches(&self, configured: bool) {
        let Some((state, metrics)) = &self.admin else {
            return;
        };
        state
            .configured
            .store(configured, std::sync::atomic::Ordering::Relaxed);
        let watches = (self.config.iter().map(|w| (&w.what, &w.changes)))
            .chain([
                (&self.namespaces.what, &self.namespaces.changes),
                (&self.nodes.what, &self.nodes.changes),
            ])
            .chain(
                self.jobs
                    .iter()
                    .map(|j| (&j.watched.what, &j.watched.changes)),
            );
        for (what, changes) in watches {
            metrics.set_watch_lists(what, changes.lists());
        }
    }

    /// Takes in what the step made of the jobs read: a job created anew
    /// owns its Workload again, each job submitted is tracked under the id
    /// the step gave it, and both get their Workload written.
    fn take_in(
        &mut self,
        step: &Step,
        submits: Vec<(JobKey, String, Vec<Option<String>>)>,
        adopted: Vec<JobKey>,
        touched: &mut BTreeSet<WorkloadId>,
    ) {
        let scheduler = self.scheduler.as_ref().expect("configured");
        // A job created anew owns its Workload from now on.
        for key in adopted {
            if let Some(tracked) = self.tracked.get(&key) {
                let spec = crate::workloads::object(
                    &tracked.owner,
                    scheduler.entry(tracked.id),
                    scheduler,
                );
                self.publisher.workload(&tracked.owner, Some(spec), None);
                touched.insert(tracked.id);
                self.writer.want(&key, &tracked.owner.uid, Want::Held);
            }
        }
        for (id, (key, uid, template_paths)) in step.submitted.iter().zip(submits) {
            self.by_id.insert(*id, key.clone());
            let owner = self.owner(&key, uid);
            let spec = crate::workloads::object(&owner, scheduler.entry(*id), scheduler);
            self.publisher.workload(&owner, Some(spec), None);
            self.tracked
                .insert(key, KnownJob::new(*id, owner, template_paths));
        }
    }

    /// Enacts the step's decisions: each job's want set from them,
    /// preemptors released once their victims are held, every job seen
    /// changed compared with its want again, the scale plan, the pods
    /// placed per card ungated (all of them on a `sweep`).
    fn enact_step(&mut self, step: &Step, sweep: bool) {
        if let (Some((_, metrics)), Some(scheduler)) = (&self.admin, &self.scheduler) {
            metrics.observe(scheduler, &step.events);
        }
        self.enact_events(&step.events);
        self.release_deferred();
        // Every job seen changed is compared with its want again.
        for key in &self.index.changed {
            self.writer.touch(key);
        }
        self.scale(&step.scale);
        self.ungate(sweep);
    }

    /// Hands what the Workloads, queues and jobs should say to the
    /// publisher: the Workloads `touched` (and the step's), the Events of
    /// jobs that cannot be queued, the queue statuses, the finalizers.
    /// Returns whether Workload statuses are owed, and when queue statuses
    /// come due.
    fn tell(&mut self, step: &Step, mut touched: BTreeSet<WorkloadId>) -> (bool, Option<Millis>) {
        touched.extend(step.submitted.iter().copied());
        touched.extend(step.events.iter().map(|e| e.workload()));
        let owed = self.publish(&touched);
        for (owner, reason, message) in std::mem::take(&mut self.unqueued_events) {
            self.publisher.event(&owner, true, reason, message);
        }
        self.queues_changed |= !step.events.is_empty() || !step.submitted.is_empty();
        let queues_due = self.queue_statuses();
        self.finalize();
        (owed, queues_due)
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
}
