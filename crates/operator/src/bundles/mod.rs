//! Policy bundles in the cluster (DESIGN §4, §7): the platform bundle
//! directories of `--policies` (a ConfigMap volume, say), each watched with
//! `reload::DirWatcher`, and the ConfigMaps labelled
//! `arbiter.dev/policy-bundle` (any value; WebAssembly modules in
//! `binaryData`) in every namespace, watched through the API. A labelled
//! ConfigMap in the operator's own namespace is a platform bundle; platform
//! bundles apply in order, the directories first, then those ConfigMaps by
//! name. One in any other namespace is that namespace's tenant bundle,
//! loaded under the tenant rules (`LoadOptions::tenant`); of two for one
//! tenant the oldest (creation time, then name) is used and the other is
//! told which one is (never built). A change of one ConfigMap looks at it
//! alone, or at its namespace when the namespace's oldest changes, so
//! thousands of them cost each change a scan, not a rebuild of the lot.
//!
//! Every bundle goes through the one reload pipeline
//! (`Reloadable::reload_with` over `bundle::load`), built on a blocking
//! thread (`spawn_blocking`; a directory's on its watcher's thread), never
//! on the driver's task: the scheduler keeps deciding with the last good
//! bundles meanwhile. The sources are the engine's `SharedSources`: a new
//! ConfigMap adds one, a deleted one (or one that lost its label) removes
//! its bundle — a tenant then has no tenant bundle. After a change the
//! driver is woken, so its next decision uses it. A ConfigMap is rebuilt
//! only when its `data`/`binaryData` change (their digest, not its
//! `resourceVersion`), so the status annotation written here triggers
//! nothing. Each result is told three ways: an Event on the ConfigMap
//! (`BundleLoaded`, `BundleRejected` with the loader's error and the bundle
//! that stays in force, `BundleIgnored`), the annotation
//! [`STATUS_ANNOTATION`] (written with a JSON merge patch carrying the
//! ConfigMap's `resourceVersion`, only when what it says changed), and the
//! `arbiter_policy_bundle_*` metrics, labelled with the bundle's source
//! (`ConfigMap NAMESPACE/NAME`, as its policies' series are).
//!
//! The telling is `tell`'s (only the replica that speaks, the leader,
//! writes; one that starts speaking announces what it loaded meanwhile;
//! a tenant namespace's Events are bounded, its annotations are not).
//!
//! It never makes a scheduling decision and never judges a bundle (the
//! loader does). `arbiter run` and the end-to-end tests start it beside
//! the driver ([`Bundles::watch`] takes the driver's wake-up).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbiter_policy::bundle::{self, Bundle, Files, LoadOptions};
use arbiter_policy::engine::{Engine, RecentDecisions, SharedSources, Sources};
use arbiter_policy::metrics::PolicyMetrics;
use arbiter_policy::reload::{
    self, DirWatcher, Identity, Loaded as _, ReloadOutcome, Reloadable, WatchError,
};
use arbiter_policy::text;
use arbiter_policy::wasm::Runtime;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::events::Recorder;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use sha2::{Digest, Sha256};
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;

mod roles;
mod tell;

use roles::{affected, in_namespace, roles_of};
pub use tell::{EVENT_BURST, EVENT_REFILL};

use crate::workloads::{self, MAX_NOTE};

/// The annotation on a bundle ConfigMap saying what became of it:
/// `loaded NAME@VERSION sha256:DIGEST at TIME`, `rejected …; in force: …`
/// or `ignored: …`.
pub const STATUS_ANNOTATION: &str = "arbiter.dev/bundle-status";

/// Most bytes of a loader's error kept in the status annotation.
const MAX_STATUS_ERROR: usize = 8 * 1024;

/// Where the operator's bundles come from.
#[derive(Clone, Debug)]
pub struct BundleOptions {
    /// The operator's own namespace: its labelled ConfigMaps are platform bundles.
    pub platform_namespace: String,
    /// Platform bundle directories (`--policies`), in order.
    pub dirs: Vec<PathBuf>,
}

/// Why the bundle sources could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BundleSetupError {
    #[error("starting the WebAssembly runtime: {0}")]
    Runtime(String),
    #[error("loading the policy bundle {path}: {error}")]
    Bundle { path: String, error: String },
    #[error(transparent)]
    Watch(#[from] WatchError),
}

/// The operator's bundle sources before they are watched: the directories
/// loaded, the set the engine will read.
pub struct Bundles {
    options: BundleOptions,
    runtime: Arc<Runtime>,
    metrics: Option<PolicyMetrics>,
    sources: Arc<SharedSources>,
    /// The directories' sources, in `options.dirs` order.
    dirs: Vec<Arc<Reloadable<Bundle>>>,
    /// Where its engines record their decisions.
    recent: RecentDecisions,
}

impl Bundles {
    /// Loads the directories (an error names the one that does not load).
    /// With `metrics`, every source reports its reload results there.
    pub fn load(
        options: BundleOptions,
        metrics: Option<&PolicyMetrics>,
    ) -> Result<Bundles, BundleSetupError> {
        let runtime = Runtime::new().map_err(|e| BundleSetupError::Runtime(e.to_string()))?;
        let runtime = Arc::new(runtime);
        let mut dirs = Vec::new();
        for dir in &options.dirs {
            let bundle = load_dir(dir, &runtime).map_err(|error| BundleSetupError::Bundle {
                path: dir.display().to_string(),
                error,
            })?;
            dirs.push(Arc::new(Reloadable::new(bundle)));
        }
        let sources = SharedSources::new(Sources {
            platform: dirs.clone(),
            tenants: BTreeMap::new(),
        });
        Ok(Bundles {
            options,
            runtime,
            metrics: metrics.cloned(),
            sources,
            dirs,
            recent: RecentDecisions::default(),
        })
    }

    /// The newest decisions of every engine made by [`Bundles::engine`]
    /// (what the dashboard shows).
    pub fn recent(&self) -> RecentDecisions {
        self.recent.clone()
    }

    /// The engine over every source, those found later included (feeding
    /// the metrics given to [`Bundles::load`]). Its decisions go to
    /// [`Bundles::recent`] (weights that succeeded left out: one per
    /// waiting workload each step), never to a log nobody takes.
    pub fn engine(&self) -> Engine {
        let mut engine = Engine::shared(self.sources.clone()).keep_recent(self.recent.clone());
        engine.log_weights = false;
        match &self.metrics {
            Some(metrics) => engine.with_metrics(metrics),
            None => engine,
        }
    }

    /// Starts watching the directories (each on its own thread) and the
    /// labelled ConfigMaps (a task), and returns once the ConfigMaps there
    /// at the start are loaded, so the first decision sees them. `wake` is
    /// the driver's: it is notified after every change in force. `speaks`
    /// says whether this replica writes (Events, the status annotation):
    /// with leader election only the leader does; every replica loads.
    pub async fn watch(
        self,
        client: Client,
        wake: Arc<Notify>,
        speaks: Arc<dyn Fn() -> bool + Send + Sync>,
    ) -> Result<Watching, BundleSetupError> {
        let mut dirs = Vec::new();
        for (dir, source) in self.options.dirs.iter().zip(&self.dirs) {
            if !dir.is_dir() {
                tracing::info!(file = %dir.display(), "a ConfigMap manifest file given as --policies is loaded once, not watched");
                continue;
            }
            let (path, source) = (dir.clone(), source.clone());
            let (runtime, wake) = (self.runtime.clone(), wake.clone());
            dirs.push(DirWatcher::spawn(
                dir,
                reload::DEFAULT_DEBOUNCE,
                move || {
                    let outcome = source.reload_with(|| load_dir(&path, &runtime));
                    if matches!(outcome, ReloadOutcome::Swapped { .. }) {
                        wake.notify_one();
                    }
                },
            )?);
        }
        let index = Index {
            platform_namespace: self.options.platform_namespace,
            runtime: self.runtime,
            metrics: self.metrics,
            sources: self.sources,
            dirs: self.dirs,
            recorder: workloads::recorder(client.clone()),
            client,
            wake,
            speaks,
            objects: BTreeMap::new(),
            loaded: BTreeMap::new(),
            ignored: BTreeMap::new(),
            budget: tell::EventBudget::default(),
        };
        let (listed, first_list) = oneshot::channel();
        let task = tokio::spawn(index.run(listed));
        // Dropped unsent only if the task ended, which it does not on its own.
        let _ = first_list.await;
        Ok(Watching { _dirs: dirs, task })
    }
}

/// The running watches; dropping it stops them.
pub struct Watching {
    _dirs: Vec<DirWatcher>,
    task: JoinHandle<()>,
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A platform bundle directory, loaded; a tenant bundle there is refused.
fn load_dir(dir: &Path, runtime: &Runtime) -> Result<Bundle, String> {
    let bundle =
        bundle::load_path(dir, runtime, &LoadOptions::default()).map_err(|e| e.to_string())?;
    match &bundle.tenant {
        Some(tenant) => Err(format!(
            "{}: bundle.yaml says spec.tenant: {tenant}, but --policies takes platform bundles; \
             ship {tenant}'s bundle as a ConfigMap labelled {} in namespace {tenant}",
            bundle.source,
            bundle::CONFIGMAP_LABEL
        )),
        None => Ok(bundle),
    }
}

/// A ConfigMap, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    namespace: String,
    name: String,
}

impl Key {
    fn of(cm: &ConfigMap) -> Key {
        Key {
            namespace: cm.metadata.namespace.clone().unwrap_or_default(),
            name: cm.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// The bundle's source, as the loader names it: the metrics' label.
    fn source(&self) -> String {
        format!("ConfigMap {self}")
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a labelled ConfigMap is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Role {
    Platform,
    /// The tenant bundle of this namespace.
    Tenant(String),
}

impl Role {
    fn tenant(&self) -> Option<String> {
        match self {
            Role::Platform => None,
            Role::Tenant(ns) => Some(ns.clone()),
        }
    }

    fn describe(&self) -> String {
        match self {
            Role::Platform => "a platform bundle".to_string(),
            Role::Tenant(ns) => format!("the tenant bundle of {ns}"),
        }
    }

    /// What is in force when its first version did not load.
    fn nothing_in_force(&self) -> String {
        match self {
            Role::Platform => "no bundle from this ConfigMap is in force".to_string(),
            Role::Tenant(ns) => format!("{ns} has no tenant bundle in force"),
        }
    }
}

/// The digest of what a bundle is built from: `data` and `binaryData`,
/// keys and values (lengths included, so no two contents collide by
/// shifting a boundary). Labels, annotations and `resourceVersion` are not in it.
fn content_digest(cm: &ConfigMap) -> String {
    let mut hasher = Sha256::new();
    let mut part = |tag: &[u8], bytes: &[u8]| {
        hasher.update(tag);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    for (key, value) in cm.data.iter().flatten() {
        part(b"k", key.as_bytes());
        part(b"d", value.as_bytes());
    }
    for (key, value) in cm.binary_data.iter().flatten() {
        part(b"k", key.as_bytes());
        part(b"b", &value.0);
    }
    bundle::hex(&hasher.finalize())
}

/// `name@version` as the ConfigMap's `bundle.yaml` claims it, read
/// leniently (the loader may refuse the rest); `None` if it does not say.
fn claimed(cm: &ConfigMap) -> Option<String> {
    let text = cm.data.as_ref()?.get("bundle.yaml")?;
    let value: serde_json::Value = serde_yaml_ng::from_str(text).ok()?;
    let name = value.pointer("/metadata/name")?.as_str()?;
    let version = match value.pointer("/metadata/version") {
        Some(serde_json::Value::String(v)) => v.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    Some(text::clean(&format!("{name}@{version}"), 300))
}

/// `name@version sha256:digest`.
fn shown(identity: &Identity) -> String {
    format!(
        "{}@{} sha256:{}",
        identity.name, identity.version, identity.digest
    )
}

/// `name@version`.
fn short(identity: &Identity) -> String {
    format!("{}@{}", identity.name, identity.version)
}

/// The note of a rejection: `rejected WHAT (ERROR); KEPT`, the error cut
/// so that the whole fits an Event and the part after it survives.
fn rejected_note(what: &str, error: &str, kept: &str) -> String {
    let around = "rejected  (); ".len() + what.len() + kept.len();
    // Room for `clean`'s note of how much it cut.
    let room = MAX_NOTE.saturating_sub(around + 32).max(64);
    format!("rejected {what} ({}); {kept}", text::clean(error, room))
}

/// The status annotation's text without its ` at TIME`.
fn status_of(annotation: &str) -> &str {
    annotation
        .rsplit_once(" at ")
        .map_or(annotation, |(status, _)| status)
}

/// A ConfigMap this watcher built.
struct Tracked {
    uid: String,
    /// [`content_digest`] of what it was built from.
    content: String,
    /// Its bundle source; `None` while no version of it has loaded.
    source: Option<Arc<Reloadable<Bundle>>>,
    /// What its status annotation says, and since when.
    status: String,
    at: Timestamp,
    /// The Event about its last result, not told because this replica
    /// did not speak then: told when it starts speaking (a new leader),
    /// unless the annotation shows the old leader told it.
    untold: Option<(bool, &'static str, String)>,
}

/// How often a replica looks whether it has started speaking (become the leader).
const SPEAKS_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// What one build brought.
enum Built {
    New(Bundle),
    Failed(String),
    Reloaded(ReloadOutcome),
}

/// The ConfigMap watcher's index: the labelled ConfigMaps as last seen,
/// what was built of them, and the set of sources the engine reads.
struct Index {
    platform_namespace: String,
    runtime: Arc<Runtime>,
    metrics: Option<PolicyMetrics>,
    sources: Arc<SharedSources>,
    dirs: Vec<Arc<Reloadable<Bundle>>>,
    client: Client,
    recorder: Recorder,
    wake: Arc<Notify>,
    /// Whether this replica writes Events and annotations (the leader does).
    speaks: Arc<dyn Fn() -> bool + Send + Sync>,
    objects: BTreeMap<Key, ConfigMap>,
    loaded: BTreeMap<Key, Tracked>,
    /// Tenant ConfigMaps not used: the one used instead, and since when.
    ignored: BTreeMap<Key, (Key, Timestamp)>,
    /// Bounds the Events told per tenant namespace.
    budget: tell::EventBudget,
}

impl Index {
    /// Follows the labelled ConfigMaps until the task is aborted; `listed`
    /// is told once the first list is loaded. Watch errors are retried with
    /// kube-runtime's default backoff.
    async fn run(mut self, listed: oneshot::Sender<()>) {
        let api: Api<ConfigMap> = Api::all(self.client.clone());
        let config = watcher::Config::default().labels(bundle::CONFIGMAP_LABEL);
        // Kept: what a bundle is built from and told on, not who wrote what.
        let stream = watcher(api, config)
            .default_backoff()
            .modify(|cm: &mut ConfigMap| cm.metadata.managed_fields = None);
        let mut stream = std::pin::pin!(stream);
        let mut listed = Some(listed);
        let mut listing: Option<BTreeMap<Key, ConfigMap>> = None;
        let mut spoke = (self.speaks)();
        let mut checks = tokio::time::interval(SPEAKS_CHECK);
        loop {
            let event = tokio::select! {
                event = stream.next() => event,
                _ = checks.tick() => {
                    let speaks = (self.speaks)();
                    if speaks && !spoke {
                        self.announce().await;
                    }
                    spoke = speaks;
                    continue;
                }
            };
            let Some(event) = event else {
                break;
            };
            match event {
                Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
                Ok(watcher::Event::InitApply(cm)) => {
                    listing.get_or_insert_default().insert(Key::of(&cm), cm);
                }
                Ok(watcher::Event::InitDone) => {
                    self.objects = listing.take().unwrap_or_default();
                    self.reconcile(None).await;
                    if let Some(listed) = listed.take() {
                        let _ = listed.send(());
                    }
                }
                Ok(watcher::Event::Apply(cm)) => {
                    let key = Key::of(&cm);
                    self.objects.insert(key.clone(), cm);
                    self.reconcile(Some(&key)).await;
                }
                Ok(watcher::Event::Delete(cm)) => {
                    let key = Key::of(&cm);
                    self.objects.remove(&key);
                    self.reconcile(Some(&key)).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "watching policy bundle ConfigMaps failed; retrying with backoff")
                }
            }
        }
    }

    /// Brings the sources in step with the ConfigMaps seen — after a change
    /// of `changed`, those of its namespace (thousands of ConfigMaps cost
    /// each change only theirs); after a list, all —: builds what changed,
    /// drops what is gone, tells each new result (and the changed one's
    /// again, should its annotation say otherwise), wakes the driver if
    /// anything in force changed.
    async fn reconcile(&mut self, changed: Option<&Key>) {
        let (roles, ignored, whole) = match changed {
            Some(key) => affected(&self.objects, &self.loaded, key, &self.platform_namespace),
            None => {
                let (roles, ignored) = roles_of(self.objects.iter(), &self.platform_namespace);
                (roles, ignored, true)
            }
        };
        // What is looked at: everything, a namespace, or `changed` alone.
        let namespace = changed.map(|k| k.namespace.as_str());
        let looked_at = |key: &Key| whole || changed == Some(key);
        let mut set_changed = false;
        let mut swapped = false;
        let gone: Vec<Key> = in_namespace(&self.loaded, namespace)
            .map(|(key, _)| key)
            .filter(|key| looked_at(key) && !roles.contains_key(*key))
            .cloned()
            .collect();
        for key in gone {
            if let Some(tracked) = self.loaded.remove(&key) {
                set_changed |= self.retire(&key, tracked);
                tracing::info!(configmap = %key, "policy bundle ConfigMap deleted, unlabelled or superseded; its bundle no longer applies");
            }
        }
        for (key, role) in &roles {
            let Some(cm) = self.objects.get(key).cloned() else {
                continue;
            };
            let content = content_digest(&cm);
            let uid = cm.metadata.uid.clone().unwrap_or_default();
            let built = self
                .loaded
                .get(key)
                .is_some_and(|t| t.uid == uid && t.content == content);
            if !built {
                let (set, swap) = self.build(key, &cm, role, uid, content).await;
                set_changed |= set;
                swapped |= swap;
            }
            let look = !built || changed.is_none_or(|c| c == key);
            if let Some(tracked) = self.loaded.get(key).filter(|_| look) {
                let (status, at) = (tracked.status.clone(), tracked.at);
                self.write_status(&cm, &status, at).await;
            }
        }
        let used: Vec<Key> = in_namespace(&self.ignored, namespace)
            .map(|(key, _)| key)
            .filter(|key| looked_at(key) && !ignored.contains_key(*key))
            .cloned()
            .collect();
        for key in used {
            self.ignored.remove(&key);
        }
        for (key, winner) in ignored {
            let look = changed.is_none_or(|c| *c == key);
            self.ignore(&key, winner, look).await;
        }
        if set_changed {
            self.publish();
        }
        if set_changed || swapped {
            self.wake.notify_one();
        }
    }

    /// Forgets a ConfigMap's source; whether one was in force.
    fn retire(&self, key: &Key, tracked: Tracked) -> bool {
        match tracked.source {
            Some(source) => {
                source.stop_reporting();
                true
            }
            None => {
                if let Some(metrics) = &self.metrics {
                    metrics.bundle(&key.source()).retire();
                }
                false
            }
        }
    }

    /// Builds ConfigMap `cm` as `role` off the async runtime, records the
    /// result and tells it. Returns (a source was added or removed, a
    /// bundle in force was swapped).
    async fn build(
        &mut self,
        key: &Key,
        cm: &ConfigMap,
        role: &Role,
        uid: String,
        content: String,
    ) -> (bool, bool) {
        let mut set_changed = false;
        let mut previous = self.loaded.remove(key);
        if previous.as_ref().is_some_and(|t| t.uid != uid) {
            // Deleted and created again under the same name meanwhile.
            if let Some(old) = previous.take() {
                set_changed |= self.retire(key, old);
            }
        }
        let existing = previous.as_ref().and_then(|t| t.source.clone());
        let before = existing.as_ref().map(|s| s.current().identity());
        let job = {
            let (cm, runtime, role) = (cm.clone(), self.runtime.clone(), role.clone());
            let existing = existing.clone();
            tokio::task::spawn_blocking(move || {
                let build = || load_configmap(&cm, &runtime, &role);
                let built = match existing {
                    Some(source) => Built::Reloaded(source.reload_with(build)),
                    None => match build() {
                        Ok(bundle) => Built::New(bundle),
                        Err(error) => Built::Failed(error),
                    },
                };
                (built, claimed(&cm))
            })
        };
        let (built, what) = job.await.unwrap_or_else(|e| {
            let error = format!(
                "building the bundle failed ({e}); this is a bug in Arbiter, please report it"
            );
            (Built::Failed(error), None)
        });
        let what = what.unwrap_or_else(|| "the bundle".to_string());
        let mut swapped = false;
        let (source, status, event) = match built {
            Built::New(bundle) => {
                let source = Arc::new(Reloadable::new(bundle));
                if let Some(metrics) = &self.metrics {
                    source.report_to(metrics, &key.source());
                }
                let identity = source.current().identity();
                set_changed = true;
                let note = format!("loaded {} as {}", shown(&identity), role.describe());
                (
                    Some(source),
                    format!("loaded {}", shown(&identity)),
                    Some((false, "BundleLoaded", note)),
                )
            }
            Built::Failed(error) => {
                if let Some(metrics) = &self.metrics {
                    metrics.bundle(&key.source()).refused();
                }
                let kept = role.nothing_in_force();
                let status = format!(
                    "rejected {what}: {}; in force: none",
                    text::clean(&error, MAX_STATUS_ERROR)
                );
                let note = rejected_note(&what, &error, &kept);
                (None, status, Some((true, "BundleRejected", note)))
            }
            Built::Reloaded(ReloadOutcome::Swapped { identity, .. }) => {
                swapped = true;
                let replaced = before.as_ref().map(short).unwrap_or_default();
                let note = format!(
                    "loaded {} as {}; it replaces {replaced}",
                    shown(&identity),
                    role.describe()
                );
                (
                    existing,
                    format!("loaded {}", shown(&identity)),
                    Some((false, "BundleLoaded", note)),
                )
            }
            Built::Reloaded(ReloadOutcome::Unchanged { identity }) => {
                let status = format!("loaded {}", shown(&identity));
                // Told only if it says something new (the content went back
                // to the bundle in force after a rejection, say).
                let event =
                    (previous.as_ref().map(|t| t.status.as_str()) != Some(&status)).then(|| {
                        let note = format!("{} is in force again", shown(&identity));
                        (false, "BundleLoaded", note)
                    });
                (existing, status, event)
            }
            Built::Reloaded(ReloadOutcome::Rejected { error, kept, .. }) => {
                let status = format!(
                    "rejected {what}: {}; in force: {}",
                    text::clean(&error, MAX_STATUS_ERROR),
                    shown(&kept)
                );
                let note =
                    rejected_note(&what, &error, &format!("{} stays in force", short(&kept)));
                (existing, status, Some((true, "BundleRejected", note)))
            }
        };
        let at = match &previous {
            Some(t) if t.status == status => t.at,
            _ => now(),
        };
        // Not speaking (a follower): kept to tell if this replica leads
        // before the next result; an older untold one is superseded.
        let mut untold = previous.and_then(|t| t.untold);
        if let Some((warning, reason, note)) = event {
            if (self.speaks)() {
                self.event(cm, warning, reason, &note).await;
                untold = None;
            } else {
                untold = Some((warning, reason, note));
            }
        }
        self.loaded.insert(
            key.clone(),
            Tracked {
                uid,
                content,
                source,
                status,
                at,
                untold,
            },
        );
        (set_changed, swapped)
    }

    /// Hands the engine the sources in force: the directories, the
    /// platform ConfigMaps by name, a tenant bundle per namespace.
    fn publish(&self) {
        let mut platform = self.dirs.clone();
        let mut tenants = BTreeMap::new();
        for (key, tracked) in &self.loaded {
            let Some(source) = &tracked.source else {
                continue;
            };
            if key.namespace == self.platform_namespace {
                platform.push(source.clone());
            } else {
                tenants.insert(key.namespace.clone(), source.clone());
            }
        }
        self.sources
            .update(|sources| *sources = Sources { platform, tenants });
    }
}

/// A bundle ConfigMap, loaded as `role`; a platform one that says it is a
/// tenant's is refused.
fn load_configmap(cm: &ConfigMap, runtime: &Runtime, role: &Role) -> Result<Bundle, String> {
    let options = LoadOptions {
        tenant: role.tenant(),
        run_tests: true,
    };
    let bundle =
        bundle::load(Files::ConfigMap(cm), runtime, &options).map_err(|e| e.to_string())?;
    match (role, &bundle.tenant) {
        (Role::Platform, Some(tenant)) => Err(format!(
            "{}: bundle.yaml says spec.tenant: {tenant}, but the ConfigMap is in the operator's own namespace, whose bundles are platform bundles; put {tenant}'s bundle in namespace {tenant}",
            bundle.source
        )),
        _ => Ok(bundle),
    }
}

/// A labelled ConfigMap the operator puts in force: `tenant` is the
/// namespace it is the tenant bundle of (`None`: a platform bundle).
#[derive(Clone, Debug)]
pub struct InForce<'a> {
    pub configmap: &'a ConfigMap,
    pub tenant: Option<String>,
    /// `ConfigMap namespace/name`, as the loader names the bundle's source.
    pub source: String,
}

/// Which of the labelled ConfigMaps `configmaps` the operator puts in
/// force, as the watch does (see the module docs): the platform ones by
/// name, then each tenant's oldest; and each one ignored, with the one in
/// force instead (`ConfigMap ns/name`). For a look at the cluster from
/// outside (`arbiter simulate --from-cluster`), which loads each with
/// [`load_as`].
pub fn in_force<'a>(
    configmaps: &'a [ConfigMap],
    platform_namespace: &str,
) -> (Vec<InForce<'a>>, Vec<(String, String)>) {
    let keyed: Vec<(Key, &ConfigMap)> = configmaps.iter().map(|cm| (Key::of(cm), cm)).collect();
    let (roles, ignored) = roles_of(keyed.iter().map(|(k, cm)| (k, *cm)), platform_namespace);
    let by_key: BTreeMap<&Key, &ConfigMap> = keyed.iter().map(|(k, cm)| (k, *cm)).collect();
    let mut platform = Vec::new();
    let mut tenants = Vec::new();
    for (key, role) in roles {
        let Some(&configmap) = by_key.get(&key) else {
            continue;
        };
        let entry = InForce {
            configmap,
            tenant: role.tenant(),
            source: key.source(),
        };
        match role {
            Role::Platform => platform.push(entry),
            Role::Tenant(_) => tenants.push(entry),
        }
    }
    platform.extend(tenants);
    let ignored = ignored
        .into_iter()
        .map(|(ignored, used)| (ignored.source(), used.source()))
        .collect();
    (platform, ignored)
}

/// Loads a bundle ConfigMap as the operator does: a platform bundle, or
/// `tenant`'s (under the tenant rules); the loader's error otherwise.
pub fn load_as(cm: &ConfigMap, runtime: &Runtime, tenant: Option<&str>) -> Result<Bundle, String> {
    let role = match tenant {
        Some(ns) => Role::Tenant(ns.to_string()),
        None => Role::Platform,
    };
    load_configmap(cm, runtime, &role)
}

/// Now, to the second (what a status line shows).
fn now() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::ByteString;

    fn configmap(namespace: &str, name: &str, created: i64, data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                creation_timestamp: Some(Time(Timestamp::from_second(created).expect("a time"))),
                ..ObjectMeta::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn the_content_digest_follows_data_and_binary_data_only() {
        let base = configmap("p", "rules", 1, &[("bundle.yaml", "a: 1")]);
        let digest = content_digest(&base);
        let mut annotated = base.clone();
        annotated.metadata.annotations = Some(BTreeMap::from([(
            STATUS_ANNOTATION.to_string(),
            "loaded x@1 at 2026-12-01T00:00:00Z".to_string(),
        )]));
        annotated.metadata.resource_version = Some("42".into());
        annotated.metadata.labels = Some(BTreeMap::from([(
            bundle::CONFIGMAP_LABEL.to_string(),
            "yes".to_string(),
        )]));
        assert_eq!(content_digest(&annotated), digest);
        let edited = configmap("p", "rules", 1, &[("bundle.yaml", "a: 2")]);
        assert_ne!(content_digest(&edited), digest);
        // A boundary moved between a key and its value is another content.
        let shifted = configmap("p", "rules", 1, &[("bundle.yam", "la: 1")]);
        assert_ne!(content_digest(&shifted), digest);
        let mut with_module = base.clone();
        with_module.binary_data = Some(BTreeMap::from([(
            "w.wasm".to_string(),
            ByteString(b"\0asm".to_vec()),
        )]));
        assert_ne!(content_digest(&with_module), digest);
    }

    #[test]
    fn the_claimed_version_is_read_even_from_a_bundle_the_loader_refuses() {
        let cm = configmap(
            "p",
            "rules",
            1,
            &[(
                "bundle.yaml",
                "metadata: {name: platform, version: \"2\"}\nspec: {policies: [{name: x, hook: wieght}]}\n",
            )],
        );
        assert_eq!(claimed(&cm).as_deref(), Some("platform@2"));
        let numeric = configmap(
            "p",
            "r",
            1,
            &[("bundle.yaml", "metadata: {name: p, version: 3}")],
        );
        assert_eq!(claimed(&numeric).as_deref(), Some("p@3"));
        let broken = configmap("p", "r", 1, &[("bundle.yaml", "metadata: [unclosed")]);
        assert_eq!(claimed(&broken), None);
        assert_eq!(claimed(&configmap("p", "r", 1, &[])), None);
        let sneaky = configmap(
            "p",
            "r",
            1,
            &[(
                "bundle.yaml",
                "metadata: {name: \"a\\e[2Jb\", version: \"1\"}",
            )],
        );
        assert_eq!(claimed(&sneaky).as_deref(), Some("a\\u{1b}[2Jb@1"));
    }

    #[test]
    fn a_long_error_is_cut_so_the_bundle_kept_is_still_named() {
        let error = format!("ConfigMap p/rules: {}", "x".repeat(5000));
        let note = rejected_note("platform@2", &error, "platform@1 stays in force");
        assert!(note.len() <= MAX_NOTE, "{} bytes", note.len());
        assert!(
            note.starts_with("rejected platform@2 (ConfigMap p/rules: xxx"),
            "{note}"
        );
        assert!(
            note.ends_with("bytes cut)); platform@1 stays in force"),
            "{note}"
        );
        let short = rejected_note("platform@2", "bad", "platform@1 stays in force");
        assert_eq!(
            short,
            "rejected platform@2 (bad); platform@1 stays in force"
        );
    }

    #[test]
    fn a_bundle_saying_spec_tenant_is_refused_as_a_platform_bundle() {
        let runtime = Runtime::new().expect("the WebAssembly runtime starts");
        let text = "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {name: t, version: \"1\"}\nspec:\n  tenant: team-a\n  policies:\n  - {name: w, hook: weight, cel: {expression: '1.0'}}\n";
        let cm = configmap("arbiter-system", "rules", 1, &[("bundle.yaml", text)]);
        let error = load_configmap(&cm, &runtime, &Role::Platform)
            .err()
            .expect("refused");
        assert_eq!(
            error,
            "ConfigMap arbiter-system/rules: bundle.yaml says spec.tenant: team-a, but the ConfigMap is in the operator's own namespace, whose bundles are platform bundles; put team-a's bundle in namespace team-a"
        );
        let cm = configmap("team-a", "rules", 1, &[("bundle.yaml", text)]);
        let bundle = load_configmap(&cm, &runtime, &Role::Tenant("team-a".into()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bundle.tenant.as_deref(), Some("team-a"));
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join("bundle.yaml"), text).expect("bundle.yaml");
        let error = load_dir(dir.path(), &runtime).err().expect("refused");
        assert!(
            error.ends_with("but --policies takes platform bundles; ship team-a's bundle as a ConfigMap labelled arbiter.dev/policy-bundle in namespace team-a"),
            "{error}"
        );
    }

    #[test]
    fn the_status_is_compared_without_its_time() {
        assert_eq!(
            status_of("rejected p@2: bundle.yaml is not valid YAML: x at line 3 column 1; in force: p@1 sha256:ab at 2026-12-01T00:00:00Z"),
            "rejected p@2: bundle.yaml is not valid YAML: x at line 3 column 1; in force: p@1 sha256:ab"
        );
        assert_eq!(status_of("hand-written"), "hand-written");
    }
}
