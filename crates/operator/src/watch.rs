//! Reflectors over what the operator reads: the queue configuration kinds
//! (Arbiter's and Kueue's, whichever the API serves), Namespaces, Nodes and
//! each job integration's kind. Each keeps a kube-runtime `Store`, notes
//! which objects changed ([`Changes`], so the driver reads only those) and
//! wakes the driver; watch errors are retried with kube-runtime's default
//! backoff, never ending the operator.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;

use arbiter_core::jobs::Integrations;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::publish::WorkloadWatchEvent;

/// A store and the task filling it.
pub struct Watched<K: kube::runtime::reflector::Lookup + Clone + 'static>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    pub store: Store<K>,
    pub task: JoinHandle<()>,
    /// What is watched, for messages.
    pub what: String,
    /// The objects that changed since the driver last asked.
    pub changes: Arc<Changes>,
}

/// Which objects of a watch changed (their store already shows it) since
/// last taken: by namespace and name, or all of them after a relist; and
/// how many times the watch has listed.
#[derive(Debug)]
pub struct Changes {
    changed: Mutex<Changed>,
    /// Lists begun: the first, and one after each watch the API expired
    /// (`410 Gone`: it no longer holds the resourceVersion the watch
    /// would resume from, as after etcd compacted it) or a list that failed.
    lists: AtomicU64,
}

/// Counts changes seen by every watch, for [`Changed::objects`].
static SEEN: AtomicU64 = AtomicU64::new(0);

/// What [`Changes::take`] returns.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changed {
    /// Every object may have changed (the first list, a relist).
    pub all: bool,
    /// `(namespace, name)` with when it was first seen changed (a count
    /// shared by every watch of the process), in that order: jobs created
    /// in the same second (creation times have seconds) are queued in the
    /// order the operator saw them created, across kinds too, never in a
    /// hash's order.
    pub objects: IndexMap<(String, String), u64>,
}

impl Changed {
    pub fn is_empty(&self) -> bool {
        !self.all && self.objects.is_empty()
    }
}

impl Default for Changes {
    /// Everything is new to a reader that has not looked yet.
    fn default() -> Self {
        Changes {
            changed: Mutex::new(Changed {
                all: true,
                objects: IndexMap::new(),
            }),
            lists: AtomicU64::new(0),
        }
    }
}

impl Changes {
    /// Notes what a watch event (already applied to the store) changed.
    pub fn note<K: reflector::Lookup>(&self, event: &watcher::Event<K>) {
        if let watcher::Event::Init = event {
            self.lists.fetch_add(1, Ordering::Relaxed);
        }
        let mut changed = self.changed.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            watcher::Event::Apply(o) | watcher::Event::Delete(o) => {
                if !changed.all {
                    let namespace = o.namespace().map(|n| n.into_owned()).unwrap_or_default();
                    let name = o.name().map(|n| n.into_owned()).unwrap_or_default();
                    changed
                        .objects
                        .entry((namespace, name))
                        .or_insert_with(|| SEEN.fetch_add(1, Ordering::Relaxed));
                }
            }
            watcher::Event::Init | watcher::Event::InitApply(_) | watcher::Event::InitDone => {
                changed.all = true;
                changed.objects.clear();
            }
        }
    }

    /// What changed since last taken.
    pub fn take(&self) -> Changed {
        std::mem::take(&mut *self.changed.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// How many lists the watch has begun.
    pub fn lists(&self) -> u64 {
        self.lists.load(Ordering::Relaxed)
    }
}

fn drive<K, S>(what: String, stream: S, wake: Arc<Notify>, changes: Arc<Changes>) -> JoinHandle<()>
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    K: reflector::Lookup + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => {
                    changes.note(&event);
                    wake.notify_one()
                }
                Err(e) => {
                    tracing::warn!(watch = %what, error = %e, "watch failed; retrying with backoff")
                }
            }
        }
    })
}

/// A kind known at compile time (not found by discovery) that a reflector
/// can hold: what [`typed`] and the dashboard's watches take.
pub trait TypedKind:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}

impl<K> TypedKind for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// `store`, with the task that drives `stream` (its reflector) into it,
/// noting what changed and waking `wake`; `what` names it in messages.
fn watched<K, S>(what: String, store: Store<K>, stream: S, wake: Arc<Notify>) -> Watched<K>
where
    K: reflector::Lookup + Clone + Send + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let changes = Arc::new(Changes::default());
    let task = drive(what.clone(), stream, wake, changes.clone());
    Watched {
        store,
        task,
        what,
        changes,
    }
}

/// Watches a typed kind cluster-wide.
pub fn typed<K: TypedKind>(client: &Client, wake: Arc<Notify>) -> Watched<K> {
    typed_selected(client, wake, watcher::Config::default())
}

/// Watches the objects of a typed kind `config` selects, cluster-wide.
pub fn typed_selected<K: TypedKind>(
    client: &Client,
    wake: Arc<Notify>,
    config: watcher::Config,
) -> Watched<K> {
    let (store, stream) = reflect_typed(client, config);
    watched(K::kind(&()).to_string(), store, stream, wake)
}

/// The reflector of the objects of a typed kind `config` selects,
/// cluster-wide: its store, and the stream that fills it (the watch, with
/// kube-runtime's default backoff and managed fields dropped), which the
/// caller drives.
pub fn reflect_typed<K: TypedKind>(
    client: &Client,
    config: watcher::Config,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
) {
    let api: Api<K> = Api::all(client.clone());
    let (store, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|object: &mut K| object.meta_mut().managed_fields = None);
    (store, reflector::reflector(writer, stream))
}

/// Watches a kind the API serves, found by discovery; `None` when the API
/// does not serve it (its CRD is not installed).
pub async fn dynamic(
    client: &Client,
    gvk: &GroupVersionKind,
    wake: Arc<Notify>,
) -> Option<(ApiResource, Watched<DynamicObject>)> {
    let (resource, _caps) = discovery::pinned_kind(client, gvk).await.ok()?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let what = format!("{}/{} {}", gvk.group, gvk.version, gvk.kind);
    let watched = reflect(api, &resource, watcher::Config::default(), what, wake);
    Some((resource, watched))
}

/// Watches the objects of a kind the API serves in `namespace` that carry
/// label `label`; `None` when the API does not serve the kind.
pub async fn dynamic_in(
    client: &Client,
    gvk: &GroupVersionKind,
    namespace: &str,
    label: &str,
    wake: Arc<Notify>,
) -> Option<(ApiResource, Watched<DynamicObject>)> {
    let (resource, _caps) = discovery::pinned_kind(client, gvk).await.ok()?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let what = format!("{}/{} {} in {namespace}", gvk.group, gvk.version, gvk.kind);
    let config = watcher::Config::default().labels(label);
    let watched = reflect(api, &resource, config, what, wake);
    Some((resource, watched))
}

/// A reflector over `api`'s objects of `resource` that `config` selects.
fn reflect(
    api: Api<DynamicObject>,
    resource: &ApiResource,
    config: watcher::Config,
    what: String,
    wake: Arc<Notify>,
) -> Watched<DynamicObject> {
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    // List responses leave out each item's apiVersion and kind; the job
    // integrations and the manifest reader need them.
    let types = kube::core::TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    };
    // Nothing reads managedFields, and they are a good part of each
    // object (a replace without them keeps the server's).
    let stream =
        watcher(api, config)
            .default_backoff()
            .modify(move |object: &mut DynamicObject| {
                object.types = Some(types.clone());
                object.metadata.managed_fields = None;
            });
    watched(what, store, reflector::reflector(writer, stream), wake)
}

/// `apiVersion` (`group/version` or `version`) and kind as a GVK.
pub fn gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    GroupVersionKind::gvk(group, version, kind)
}

/// The watch of one integration's kind.
pub struct JobWatch {
    pub integration: usize,
    pub resource: ApiResource,
    pub watched: Watched<DynamicObject>,
}

/// Watches for the integrations `which` whose kind the API serves; returns
/// them and the indices of those it does not serve.
pub async fn discover_jobs(
    client: &Client,
    integrations: &Integrations,
    which: &[usize],
    wake: &Arc<Notify>,
) -> (Vec<JobWatch>, Vec<usize>) {
    let kinds: Vec<(usize, String, String)> = integrations
        .kinds()
        .enumerate()
        .filter(|(i, _)| which.contains(i))
        .map(|(i, (a, k))| (i, a.to_string(), k.to_string()))
        .collect();
    let mut found = Vec::new();
    let mut unserved = Vec::new();
    for (index, api_version, kind) in kinds {
        let gvk = gvk(&api_version, &kind);
        match dynamic(client, &gvk, wake.clone()).await {
            Some((resource, watched)) => found.push(JobWatch {
                integration: index,
                resource,
                watched,
            }),
            None => unserved.push(index),
        }
    }
    (found, unserved)
}

/// The queue configuration kinds, by API group, newest version first; the
/// first version the API serves is watched.
pub const CONFIG_KINDS: &[(&str, &[&str], &[&str])] = &[
    (
        "arbiter.dev",
        &["v1alpha1"],
        &[
            "ResourceFlavor",
            "Cohort",
            "ClusterQueue",
            "LocalQueue",
            "WorkloadPriorityClass",
            "Topology",
        ],
    ),
    (
        "kueue.x-k8s.io",
        &["v1beta2", "v1beta1"],
        &[
            "ResourceFlavor",
            "ClusterQueue",
            "LocalQueue",
            "WorkloadPriorityClass",
        ],
    ),
    ("kueue.x-k8s.io", &["v1beta2", "v1alpha1"], &["Cohort"]),
    (
        "kueue.x-k8s.io",
        &["v1beta2", "v1beta1", "v1alpha1"],
        &["Topology"],
    ),
];

/// Watches the queue configuration kinds the API serves (each in the first
/// of its versions served).
pub async fn config_kinds(client: &Client, wake: &Arc<Notify>) -> Vec<Watched<DynamicObject>> {
    config_kinds_of(client, wake, None).await
}

/// [`config_kinds`] of one API group only (`None`: of every group); the
/// shadow mode reads Kueue's alone.
pub async fn config_kinds_of(
    client: &Client,
    wake: &Arc<Notify>,
    only: Option<&str>,
) -> Vec<Watched<DynamicObject>> {
    let mut config = Vec::new();
    for (group, versions, kinds) in CONFIG_KINDS {
        if only.is_some_and(|only| only != *group) {
            continue;
        }
        for kind in *kinds {
            for version in *versions {
                let gvk = GroupVersionKind::gvk(group, version, kind);
                if let Some((_, watched)) = dynamic(client, &gvk, wake.clone()).await {
                    config.push(watched);
                    break;
                }
            }
        }
    }
    config
}

/// The uids of the jobs whose Workload was deleted (by anyone: the
/// operator deletes a Workload only with its job), for the driver to
/// write again.
pub type DeletedWorkloads = Arc<Mutex<Vec<String>>>;

/// Watches the Workloads (no store: each is handed on and dropped): every
/// one seen goes to `observed` (the publisher compares it with what it
/// wrote, and writes back one someone else changed), each one deleted
/// and the start and end of each relist too (the publisher no longer
/// counts as in the API a Workload deleted, or one a relist did not
/// show), and the owning job's uid of each one deleted is noted, waking
/// the driver. Watch errors are retried with the default backoff.
pub fn workloads(
    client: &Client,
    wake: Arc<Notify>,
    observed: impl Fn(WorkloadWatchEvent) + Send + 'static,
) -> (DeletedWorkloads, JoinHandle<()>) {
    let api: Api<arbiter_core::model::api::Workload> = Api::all(client.clone());
    let deleted: DeletedWorkloads = Arc::default();
    let noted = deleted.clone();
    let task = tokio::spawn(async move {
        let stream = watcher(api, watcher::Config::default()).default_backoff();
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Apply(workload) | watcher::Event::InitApply(workload)) => {
                    observed(WorkloadWatchEvent::Applied(workload))
                }
                Ok(watcher::Event::Init) => observed(WorkloadWatchEvent::Relisting),
                Ok(watcher::Event::InitDone) => observed(WorkloadWatchEvent::Relisted),
                Ok(watcher::Event::Delete(workload)) => {
                    let owner = workload
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .find(|o| o.controller == Some(true))
                        .map(|o| o.uid.clone());
                    if let Some(uid) = owner {
                        noted.lock().unwrap_or_else(|p| p.into_inner()).push(uid);
                        wake.notify_one();
                    }
                    observed(WorkloadWatchEvent::Deleted(workload));
                }
                Err(e) => {
                    tracing::warn!(watch = "Workload", error = %e, "watch failed; retrying with backoff")
                }
            }
        }
    });
    (deleted, task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    fn job(name: &str) -> Job {
        let mut job = Job::default();
        job.metadata.namespace = Some("team-a".into());
        job.metadata.name = Some(name.into());
        job
    }

    #[test]
    fn changes_come_back_in_the_order_first_seen() {
        let changes = Changes::default();
        assert!(
            changes.take().all,
            "everything is new before the first look"
        );
        for name in ["b", "a", "b", "c"] {
            changes.note(&watcher::Event::Apply(job(name)));
        }
        changes.note(&watcher::Event::Delete(job("a")));
        let taken = changes.take();
        assert!(!taken.all);
        let names: Vec<&str> = taken.objects.keys().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names, ["b", "a", "c"]);
        let seen: Vec<u64> = taken.objects.values().copied().collect();
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        assert!(changes.take().is_empty());

        changes.note(&watcher::Event::Apply(job("d")));
        assert_eq!(changes.lists(), 0);
        changes.note(&watcher::Event::<Job>::Init);
        changes.note(&watcher::Event::InitApply(job("d")));
        changes.note(&watcher::Event::<Job>::InitDone);
        let relisted = changes.take();
        assert!(relisted.all && relisted.objects.is_empty());
        assert_eq!(changes.lists(), 1, "a list counts once");
    }
}
