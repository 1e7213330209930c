//! Multi-cluster dispatch, MultiKueue's model: this (manager) cluster
//! queues and admits; worker clusters run. A job — a batch/v1 Job with
//! `spec.managedBy: kueue.x-k8s.io/multikueue`, or a Kubeflow v1 job
//! (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MPIJob) with
//! `spec.runPolicy.managedBy` so — in a ClusterQueue whose MultiKueue
//! AdmissionCheck names a MultiKueueConfig is admitted by the driver like
//! any other (quota, policies, preemption — the manager's own job
//! controller ignores it, as it ignores every job managed by another;
//! the Kubeflow training-operator does so from v1.9 — v1.8's CRDs have no
//! `runPolicy.managedBy`, so the API server drops it, the job is not
//! dispatched and runs on the manager, with a `NotManagedByMultiKueue`
//! Event; workers may run either);
//! once admitted, this module copies it to one worker, copies the worker's
//! status back, deletes the copy when the job is held again, finished or
//! deleted, and moves it to another worker when its worker is lost.
//!
//! It decides only where an admitted job runs, and that through the
//! placement policies (`Engine::rank_clusters`, one candidate per worker)
//! or, without one, the first reachable worker in the config's order. It
//! never admits, holds or evicts: the core does. Each pass observes (the
//! manager's dispatched jobs, the queue objects, each worker's copies
//! listed by the origin label), plans per job (`plan`, pure), and enacts
//! the plan with idempotent writes, each manager write carrying the
//! `resourceVersion` read. Started by `operator` beside the driver; only
//! the replica that leads acts.
//!
//! | module | owns |
//! |---|---|
//! | `plan` | the dispatch state machine (pure) |
//! | `route` | job → LocalQueue → ClusterQueue → AdmissionCheck → MultiKueueConfig (pure) |
//! | `mirror` | the job kinds, the worker's copy of a job and the status copied back (pure) |
//! | `workers` | a client per MultiKueueCluster from its Secret, and each worker's reach |

mod mirror;
mod plan;
mod route;
mod workers;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arbiter_core::model::api::{
    AdmissionCheck, ClusterQueue, LocalQueue, MultiKueueCluster, MultiKueueConfig,
    MULTIKUEUE_ORIGIN_LABEL,
};
use arbiter_core::model::Millis;
use arbiter_policy::engine::Engine;
use arbiter_policy::view::{NodeView, PlacementInput, WorkloadView};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions,
};
use kube::runtime::events::Recorder;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

pub use mirror::{CLUSTER_ANNOTATION, ORIGIN_UID_ANNOTATION};
pub use plan::{Action, JobFacts, Reach, WorkerFacts};

use mirror::{Kind, Kinds};
use route::{Route, Routes};
use workers::{Connection, Workers};

/// How the dispatcher runs (`arbiter run --multicluster`).
#[derive(Clone, Debug)]
pub struct MultiClusterOptions {
    /// The operator's namespace: where the workers' kubeconfig Secrets are.
    pub namespace: String,
    /// The origin label's value on the copies this manager makes (Kueue's
    /// `multiKueue.origin`, default `multikueue`): managers sharing a
    /// worker need different ones.
    pub origin: String,
    /// How long a worker may be unreachable before its jobs go elsewhere
    /// (Kueue's `multiKueue.workerLostTimeout`, default 15 minutes).
    pub worker_lost_timeout: Duration,
    /// How often the manager's jobs and the workers are looked at.
    pub interval: Duration,
}

impl Default for MultiClusterOptions {
    fn default() -> Self {
        MultiClusterOptions {
            namespace: "arbiter-system".to_string(),
            origin: "multikueue".to_string(),
            worker_lost_timeout: Duration::from_secs(15 * 60),
            interval: Duration::from_secs(2),
        }
    }
}

/// The dispatcher: the manager's client, the workers', and the placement
/// policies (if bundles are in force).
pub struct Dispatcher {
    client: Client,
    options: MultiClusterOptions,
    workers: Workers,
    engine: Option<Engine>,
    kinds: Arc<Kinds>,
    speaks: Arc<dyn Fn() -> bool + Send + Sync>,
    recorder: Recorder,
    started: Instant,
    /// Problems already logged (a broken route or a failing write), so each
    /// is told once until it changes.
    told: BTreeSet<String>,
}

/// A job: its kind, namespace and name.
type JobKey = (String, String, String);

/// What one pass saw of a worker: its copies by kind, namespace and name.
type Copies = BTreeMap<JobKey, DynamicObject>;

/// The key of `job` of `kind`.
fn key_of(kind: &Kind, job: &DynamicObject) -> JobKey {
    (
        kind.name().to_string(),
        job.namespace().unwrap_or_default(),
        job.name_any(),
    )
}

impl Dispatcher {
    /// A dispatcher over the manager `client`; `engine` ranks workers by
    /// the placement policies; it acts only while `speaks` says this
    /// replica leads.
    pub fn new(
        client: Client,
        options: MultiClusterOptions,
        engine: Option<Engine>,
        speaks: Arc<dyn Fn() -> bool + Send + Sync>,
    ) -> Dispatcher {
        Dispatcher {
            client: client.clone(),
            options,
            workers: Workers::default(),
            engine,
            kinds: Arc::new(Kinds::builtin()),
            speaks,
            recorder: crate::workloads::recorder(client.clone()),
            started: Instant::now(),
            told: BTreeSet::new(),
        }
    }

    /// Runs passes for ever (the caller aborts the task).
    pub async fn run(mut self) {
        loop {
            if (self.speaks)() {
                if let Err(e) = self.pass().await {
                    self.tell(format!(
                        "multi-cluster dispatch: reading the manager's objects: {e}"
                    ));
                }
            }
            tokio::time::sleep(self.options.interval).await;
        }
    }

    /// One pass: observe, plan per job, enact.
    pub async fn pass(&mut self) -> Result<(), kube::Error> {
        let kinds = self.kinds.clone();
        // Each kind's jobs on the manager; a kind whose CRD is not installed has none.
        let mut listed: Vec<(&Kind, Vec<DynamicObject>)> = Vec::new();
        for kind in kinds.iter() {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &kind.resource);
            match api.list(&ListParams::default()).await {
                Ok(list) => listed.push((kind, list.items)),
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let routes = Routes::new(
            list::<LocalQueue>(&self.client).await?,
            list::<ClusterQueue>(&self.client).await?,
            list::<AdmissionCheck>(&self.client).await?,
            list::<MultiKueueConfig>(&self.client).await?,
        );
        let clusters = list::<MultiKueueCluster>(&self.client).await?;
        self.workers
            .refresh(&self.client, &self.options.namespace, &clusters)
            .await;
        let now = Instant::now();
        let mut seen: BTreeMap<String, Copies> = BTreeMap::new();
        for (name, worker) in self.workers.iter_mut() {
            match list_copies(&worker.connection, &kinds, &self.options.origin).await {
                Ok(copies) => {
                    if worker.reach(now, Duration::MAX) != Reach::Up {
                        tracing::info!(cluster = %name, "worker cluster reachable again");
                    }
                    worker.answered();
                    seen.insert(name.clone(), copies);
                }
                Err(e) => {
                    if worker.failed(now) {
                        tracing::warn!(cluster = %name, error = %e, "worker cluster unreachable");
                    }
                }
            }
        }
        for cluster in &clusters {
            self.tell_active(cluster, seen.contains_key(&cluster.name_any()))
                .await;
        }
        let mut wanted: BTreeMap<JobKey, DynamicObject> = BTreeMap::new();
        for (kind, jobs) in listed {
            for job in jobs {
                if kind.is_dispatched(&job) {
                    wanted.insert(key_of(kind, &job), job.clone());
                    match routes.route(kind.name(), &job) {
                        Ok(route) => self.dispatch(kind, job, &route, &seen, now).await,
                        Err(why) => self.warn(kind, &job, "MultiClusterConfig", why).await,
                    }
                    continue;
                }
                // Kueue's webhook makes such a job managedBy MultiKueue;
                // Arbiter tells instead of changing the author's job.
                let unmanaged = kind.managed_by(&job).is_none()
                    && job.metadata.deletion_timestamp.is_none()
                    && !kind.is_finished(&job);
                if let (true, Ok(route)) = (unmanaged, routes.route(kind.name(), &job)) {
                    let why = format!("its ClusterQueue {} dispatches to worker clusters, but the {} has no {}: it runs on this cluster; create it with that field set to {}", route.cluster_queue, kind.name(), kind.managed_by_field(), arbiter_core::model::api::MULTIKUEUE_MANAGED_BY);
                    self.warn(kind, &job, "NotManagedByMultiKueue", why).await;
                }
            }
        }
        self.collect_orphans(&kinds, &seen, &wanted).await;
        Ok(())
    }

    /// Plans and enacts one job.
    async fn dispatch(
        &mut self,
        kind: &Kind,
        mut job: DynamicObject,
        route: &Route,
        seen: &BTreeMap<String, Copies>,
        now: Instant,
    ) {
        let key = key_of(kind, &job);
        let facts: Vec<WorkerFacts> = route
            .clusters
            .iter()
            .map(|name| WorkerFacts {
                name: name.clone(),
                reach: match (seen.get(name), self.workers.get(name)) {
                    (Some(_), _) => Reach::Up,
                    (None, Some(worker)) => {
                        match worker.reach(now, self.options.worker_lost_timeout) {
                            Reach::Up => Reach::Down,
                            reach => reach,
                        }
                    }
                    // Named by the config, no MultiKueueCluster: never reachable.
                    (None, None) => Reach::Lost,
                },
                has_copy: seen
                    .get(name)
                    .and_then(|copies| copies.get(&key))
                    .is_some_and(|copy| mirror::copies(copy, &job)),
            })
            .collect();
        let state = JobFacts {
            suspended: kind.is_suspended(&job),
            finished: kind.is_finished(&job),
            assigned: mirror::assigned(&job),
        };
        let elapsed = Millis(now.duration_since(self.started).as_millis() as i64);
        let mut pick =
            |candidates: &[usize]| self.pick(kind, &job, route, &facts, candidates, elapsed);
        let actions = plan::plan(&state, &facts, &mut pick);
        for action in actions {
            let done = self.enact(kind, &mut job, &action, seen).await;
            match done {
                Ok(()) => {}
                // The job changed since it was read: the next pass plans again.
                Err(Failed::Conflict) => return,
                Err(Failed::Other(e)) => {
                    let why = format!("{} {}/{}: {e}", key.0, key.1, key.2);
                    self.warn(kind, &job, "DispatchFailed", why).await;
                    return;
                }
            }
        }
    }

    /// The candidate the placement policies score highest (the first of
    /// equals), or the first in the config's order without an answer.
    fn pick(
        &mut self,
        kind: &Kind,
        job: &DynamicObject,
        route: &Route,
        workers: &[WorkerFacts],
        candidates: &[usize],
        now: Millis,
    ) -> usize {
        let Some(engine) = self.engine.as_mut() else {
            return candidates[0];
        };
        let input = PlacementInput {
            workload: WorkloadView {
                name: job.name_any(),
                namespace: job.namespace().unwrap_or_default(),
                kind: kind.name().to_string(),
                labels: job.labels().clone(),
                annotations: job.annotations().clone(),
                queue_name: route.queue.clone(),
                cluster_queue: route.cluster_queue.clone(),
                ..WorkloadView::default()
            },
            nodes: candidates
                .iter()
                .map(|&i| NodeView {
                    index: i as u32,
                    name: workers[i].name.clone(),
                    ..NodeView::default()
                })
                .collect(),
            now: now.0 as f64 / 1000.0,
            ..PlacementInput::default()
        };
        let Some(scores) = engine.rank_clusters(now, input) else {
            return candidates[0];
        };
        let mut best = 0;
        for (i, score) in scores.iter().enumerate() {
            if *score > scores[best] {
                best = i;
            }
        }
        candidates[best]
    }

    /// Carries out one action; `job` follows the manager's writes.
    async fn enact(
        &mut self,
        kind: &Kind,
        job: &mut DynamicObject,
        action: &Action,
        seen: &BTreeMap<String, Copies>,
    ) -> Result<(), Failed> {
        let (_, namespace, name) = key_of(kind, job);
        let key = key_of(kind, job);
        let jobs: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &namespace, &kind.resource);
        match action {
            Action::Assign(_) | Action::Unassign => {
                let value = match action {
                    Action::Assign(cluster) => json!(cluster),
                    _ => serde_json::Value::Null,
                };
                let patch = json!({"metadata": {
                    "resourceVersion": job.resource_version(),
                    "annotations": {CLUSTER_ANNOTATION: value},
                }});
                let before = mirror::assigned(job);
                *job = jobs
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| manager_write("recording the worker cluster", e))?;
                if let Action::Assign(cluster) = action {
                    let (reason, note) = match before {
                        Some(lost) => ("Redispatched", format!("moved to worker cluster {cluster}: worker cluster {lost} did not answer for the lost-worker timeout")),
                        None => ("Dispatched", format!("running on worker cluster {cluster}")),
                    };
                    tracing::info!(job = %format!("{namespace}/{name}"), %cluster, "{note}");
                    let regarding = job.object_ref(&kind.resource);
                    crate::workloads::record_event(
                        &self.recorder,
                        &regarding,
                        false,
                        reason,
                        "Dispatch",
                        &note,
                    )
                    .await;
                }
            }
            Action::Create(cluster) => {
                let remote = self.remote(kind, cluster, &namespace)?;
                let copy = kind.copy_of(job, &self.options.origin);
                match remote.create(&PostParams::default(), &copy).await {
                    Ok(_) => {}
                    // Made by an earlier pass whose list did not see it yet.
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => {
                        return Err(Failed::Other(format!(
                            "creating the copy on worker cluster {cluster}: {e}"
                        )))
                    }
                }
            }
            Action::Delete(cluster) => {
                let copy = seen.get(cluster).and_then(|c| c.get(&key));
                let uid = copy.and_then(|c| c.metadata.uid.clone());
                let remote = self.remote(kind, cluster, &namespace)?;
                delete_copy(&remote, &name, uid)
                    .await
                    .map_err(|e| format!("deleting the copy on worker cluster {cluster}: {e}"))?;
                tracing::info!(job = %format!("{namespace}/{name}"), %cluster, "copy deleted from worker cluster");
            }
            Action::Sync(cluster) => {
                let Some(copy) = seen.get(cluster).and_then(|c| c.get(&key)) else {
                    return Ok(());
                };
                if let Some(patch) = mirror::synced(job, copy) {
                    *job = jobs
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map_err(|e| {
                            manager_write(
                                &format!("copying the status back from worker cluster {cluster}"),
                                e,
                            )
                        })?;
                }
            }
        }
        Ok(())
    }

    /// The API of `kind` on `cluster` in `namespace`, if it has a client.
    fn remote(
        &self,
        kind: &Kind,
        cluster: &str,
        namespace: &str,
    ) -> Result<Api<DynamicObject>, String> {
        match self.workers.get(cluster).map(|w| &w.connection) {
            Some(Connection::Ready { client, .. }) => Ok(Api::namespaced_with(
                client.clone(),
                namespace,
                &kind.resource,
            )),
            _ => Err(format!("worker cluster {cluster} has no client")),
        }
    }

    /// Deletes the copies on reachable workers whose manager job is gone
    /// or is another object of the same name (Kueue's garbage collection).
    async fn collect_orphans(
        &mut self,
        kinds: &Kinds,
        seen: &BTreeMap<String, Copies>,
        wanted: &BTreeMap<JobKey, DynamicObject>,
    ) {
        for (cluster, copies) in seen {
            for (key, copy) in copies {
                if wanted.get(key).is_some_and(|job| mirror::copies(copy, job)) {
                    continue;
                }
                let (kind_name, namespace, name) = key;
                let Some(kind) = kinds.iter().find(|k| k.name() == kind_name) else {
                    continue;
                };
                let Ok(remote) = self.remote(kind, cluster, namespace) else {
                    continue;
                };
                match delete_copy(&remote, name, copy.metadata.uid.clone()).await {
                    Ok(()) => {
                        tracing::info!(job = %format!("{kind_name} {namespace}/{name}"), %cluster, "orphaned copy deleted from worker cluster")
                    }
                    Err(e) => {
                        self.tell(format!("deleting the orphaned copy {kind_name} {namespace}/{name} on worker cluster {cluster}: {e}"));
                    }
                }
            }
        }
    }

    /// Writes the MultiKueueCluster's `Active` condition when it changes
    /// (Kueue's: True while its API answers, else False with why).
    async fn tell_active(&mut self, cluster: &MultiKueueCluster, answered: bool) {
        let name = cluster.name_any();
        let (status, reason, message) =
            match (answered, self.workers.get(&name).map(|w| &w.connection)) {
                (true, _) => ("True", "Active", "Connected".to_string()),
                (false, Some(Connection::Broken(why))) => ("False", "BadConfig", why.clone()),
                (false, _) => (
                    "False",
                    "ClientConnectionFailed",
                    "its API server does not answer".to_string(),
                ),
            };
        let current = cluster
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Active"));
        if current.is_some_and(|c| c.status == status && c.reason == reason && c.message == message)
        {
            return;
        }
        let patch = json!({
            "metadata": {"resourceVersion": cluster.resource_version()},
            "status": {"conditions": [{
                "type": "Active",
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
                "observedGeneration": cluster.metadata.generation,
            }]},
        });
        let api: Api<MultiKueueCluster> = Api::all(self.client.clone());
        if let Err(e) = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            self.tell(format!(
                "MultiKueueCluster {name}: writing its Active condition: {e}"
            ));
        }
    }

    /// Logs `problem` once; returns whether it was new.
    fn tell(&mut self, problem: String) -> bool {
        if self.told.len() > 1000 {
            self.told.clear();
        }
        let new = self.told.insert(problem.clone());
        if new {
            tracing::warn!("{problem}");
        }
        new
    }

    /// Logs `problem` about `job` once, and tells it in a Warning Event.
    async fn warn(&mut self, kind: &Kind, job: &DynamicObject, reason: &str, problem: String) {
        if self.tell(problem.clone()) {
            let regarding = job.object_ref(&kind.resource);
            crate::workloads::record_event(
                &self.recorder,
                &regarding,
                true,
                reason,
                "Dispatch",
                &problem,
            )
            .await;
        }
    }
}

/// Why an action was not carried out.
enum Failed {
    /// A write to the manager's job found it changed since it was read.
    Conflict,
    /// Anything else, said for people.
    Other(String),
}

impl From<String> for Failed {
    fn from(message: String) -> Failed {
        Failed::Other(message)
    }
}

/// A failed write to the manager's job: a conflict, or what was tried and why it failed.
fn manager_write(what: &str, e: kube::Error) -> Failed {
    match e {
        kube::Error::Api(status) if status.code == 409 => Failed::Conflict,
        e => Failed::Other(format!("{what}: {e}")),
    }
}

/// Every object of an arbiter.dev kind.
async fn list<K>(client: &Client) -> Result<Vec<K>, kube::Error>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items)
}

/// The copies this manager made on a worker, by kind, namespace and
/// name; a kind the worker does not serve has none.
async fn list_copies(
    connection: &Connection,
    kinds: &Kinds,
    origin: &str,
) -> Result<Copies, String> {
    let Connection::Ready { client, .. } = connection else {
        return Err("no client".to_string());
    };
    let selector = format!("{MULTIKUEUE_ORIGIN_LABEL}={origin}");
    let mut copies = Copies::new();
    for kind in kinds.iter() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.resource);
        let listed = match api.list(&ListParams::default().labels(&selector)).await {
            Ok(listed) => listed.items,
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(e) => return Err(e.to_string()),
        };
        for job in listed {
            copies.insert(key_of(kind, &job), job);
        }
    }
    Ok(copies)
}

/// Deletes a copy (its pods with it), if it is still the object `uid`.
async fn delete_copy(
    remote: &Api<DynamicObject>,
    name: &str,
    uid: Option<String>,
) -> Result<(), kube::Error> {
    let params = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match remote.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
