//! The labelled ConfigMaps' watcher: a task following every ConfigMap
//! labelled `arbiter.dev/policy-bundle` (kube-runtime's `watcher`), an
//! index of what it saw and built, each changed one built off the async
//! runtime (`spawn_blocking`) through the one reload pipeline, and the
//! engine's sources set to what is in force (the directories first, the
//! platform ConfigMaps by name, one tenant bundle per namespace), the
//! driver woken after every change in force. Which ConfigMap is what is
//! `roles`'; telling the results is `tell`'s. It never judges a bundle
//! (the loader does) and never decides anything about jobs. Started by
//! [`Bundles::watch`](super::Bundles::watch).

use std::collections::BTreeMap;
use std::sync::Arc;

use arbiter_policy::bundle::{self, Bundle};
use arbiter_policy::engine::{SharedSources, Sources};
use arbiter_policy::metrics::PolicyMetrics;
use arbiter_policy::reload::{Identity, Loaded as _, ReloadOutcome, Reloadable};
use arbiter_policy::text;
use arbiter_policy::wasm::Runtime;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::events::Recorder;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;

mod tell;

pub use tell::{EVENT_BURST, EVENT_REFILL};

use super::configmap::{claimed, content_digest, load_configmap, Key, Role};
use super::roles::{affected, in_namespace, roles_of};
use super::Bundles;
use crate::workloads::{self, MAX_NOTE};

/// Most bytes of a loader's error kept in the status annotation.
const MAX_STATUS_ERROR: usize = 8 * 1024;

/// Starts the watcher's task over `bundles`' sources, and returns it once
/// the labelled ConfigMaps there at the start are loaded, so the first
/// decision sees them. `wake` and `speaks` are as [`Bundles::watch`] says.
pub(super) async fn start(
    bundles: Bundles,
    client: Client,
    wake: Arc<Notify>,
    speaks: Arc<dyn Fn() -> bool + Send + Sync>,
) -> JoinHandle<()> {
    let index = Index {
        platform_namespace: bundles.options.platform_namespace,
        runtime: bundles.runtime,
        metrics: bundles.metrics,
        sources: bundles.sources,
        dirs: bundles.dirs,
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
    task
}

/// Builds ConfigMap `cm` as `role` on a blocking thread: anew, or as a new
/// version of `existing`. Also returns what the ConfigMap claims to be
/// (`name@version`, else "the bundle").
async fn build_off_runtime(
    cm: ConfigMap,
    runtime: Arc<Runtime>,
    role: Role,
    existing: Option<Arc<Reloadable<Bundle>>>,
) -> (BuildResult, String) {
    let job = tokio::task::spawn_blocking(move || {
        let build = || load_configmap(&cm, &runtime, &role);
        let built = match existing {
            Some(source) => BuildResult::Reloaded(source.reload_with(build)),
            None => match build() {
                Ok(bundle) => BuildResult::New(bundle),
                Err(error) => BuildResult::Failed(error),
            },
        };
        (built, claimed(&cm))
    });
    let (built, what) = job.await.unwrap_or_else(|e| {
        let error =
            format!("building the bundle failed ({e}); this is a bug in Arbiter, please report it");
        (BuildResult::Failed(error), None)
    });
    (built, what.unwrap_or_else(|| "the bundle".to_string()))
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
pub(super) struct BuiltConfigMap {
    pub(super) uid: String,
    /// [`content_digest`] of what it was built from.
    pub(super) content: String,
    /// Its bundle source; `None` while no version of it has loaded.
    pub(super) source: Option<Arc<Reloadable<Bundle>>>,
    /// What its status annotation says, and since when.
    pub(super) status: String,
    pub(super) at: Timestamp,
    /// The Event about its last result, not told because this replica
    /// did not speak then: told when it starts speaking (a new leader),
    /// unless the annotation shows the old leader told it.
    pub(super) untold: Option<(bool, &'static str, String)>,
}

/// How often a replica looks whether it has started speaking (become the leader).
const SPEAKS_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// What one build brought.
enum BuildResult {
    New(Bundle),
    Failed(String),
    Reloaded(ReloadOutcome),
}

/// What one build comes to (`Index::outcome`).
struct BuildOutcome {
    /// The ConfigMap's source in force after it (`None`: none has loaded).
    source: Option<Arc<Reloadable<Bundle>>>,
    /// Its status annotation's text, without the time.
    status: String,
    /// The Event to tell: (a warning, its reason, its note).
    event: Option<(bool, &'static str, String)>,
    /// A source was added to the set.
    added: bool,
    /// A bundle in force was swapped.
    swapped: bool,
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
    loaded: BTreeMap<Key, BuiltConfigMap>,
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
    fn retire(&self, key: &Key, tracked: BuiltConfigMap) -> bool {
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
        let (built, what) =
            build_off_runtime(cm.clone(), self.runtime.clone(), role.clone(), existing).await;
        let outcome = self.outcome(key, role, built, &what, previous.as_ref(), before);
        set_changed |= outcome.added;
        let at = match &previous {
            Some(t) if t.status == outcome.status => t.at,
            _ => now(),
        };
        // Not speaking (a follower): kept to tell if this replica leads
        // before the next result; an older untold one is superseded.
        let mut untold = previous.and_then(|t| t.untold);
        if let Some((warning, reason, note)) = outcome.event {
            if (self.speaks)() {
                self.event(cm, warning, reason, &note).await;
                untold = None;
            } else {
                untold = Some((warning, reason, note));
            }
        }
        self.loaded.insert(
            key.clone(),
            BuiltConfigMap {
                uid,
                content,
                source: outcome.source,
                status: outcome.status,
                at,
                untold,
            },
        );
        (set_changed, outcome.swapped)
    }

    /// What a build of ConfigMap `key` (claiming to be `what`) comes to:
    /// the source in force after it, its status line and the Event to
    /// tell. `previous` is what was recorded of it before, and `before`
    /// the bundle of its source then.
    fn outcome(
        &self,
        key: &Key,
        role: &Role,
        built: BuildResult,
        what: &str,
        previous: Option<&BuiltConfigMap>,
        before: Option<Identity>,
    ) -> BuildOutcome {
        let existing = previous.and_then(|t| t.source.clone());
        let told = |source, status, event| BuildOutcome {
            source,
            status,
            event,
            added: false,
            swapped: false,
        };
        match built {
            BuildResult::New(bundle) => {
                let source = Arc::new(Reloadable::new(bundle));
                if let Some(metrics) = &self.metrics {
                    source.report_to(metrics, &key.source());
                }
                let identity = source.current().identity();
                let note = format!("loaded {} as {}", shown(&identity), role.describe());
                BuildOutcome {
                    added: true,
                    ..told(
                        Some(source),
                        format!("loaded {}", shown(&identity)),
                        Some((false, "BundleLoaded", note)),
                    )
                }
            }
            BuildResult::Failed(error) => {
                if let Some(metrics) = &self.metrics {
                    metrics.bundle(&key.source()).refused();
                }
                let kept = role.nothing_in_force();
                let status = format!(
                    "rejected {what}: {}; in force: none",
                    text::clean(&error, MAX_STATUS_ERROR)
                );
                let note = rejected_note(what, &error, &kept);
                told(None, status, Some((true, "BundleRejected", note)))
            }
            BuildResult::Reloaded(ReloadOutcome::Swapped { identity, .. }) => {
                let replaced = before.as_ref().map(short).unwrap_or_default();
                let note = format!(
                    "loaded {} as {}; it replaces {replaced}",
                    shown(&identity),
                    role.describe()
                );
                BuildOutcome {
                    swapped: true,
                    ..told(
                        existing,
                        format!("loaded {}", shown(&identity)),
                        Some((false, "BundleLoaded", note)),
                    )
                }
            }
            BuildResult::Reloaded(ReloadOutcome::Unchanged { identity }) => {
                let status = format!("loaded {}", shown(&identity));
                // Told only if it says something new (the content went back
                // to the bundle in force after a rejection, say).
                let event = (previous.map(|t| t.status.as_str()) != Some(&status)).then(|| {
                    let note = format!("{} is in force again", shown(&identity));
                    (false, "BundleLoaded", note)
                });
                told(existing, status, event)
            }
            BuildResult::Reloaded(ReloadOutcome::Rejected { error, kept, .. }) => {
                let status = format!(
                    "rejected {what}: {}; in force: {}",
                    text::clean(&error, MAX_STATUS_ERROR),
                    shown(&kept)
                );
                let note = rejected_note(what, &error, &format!("{} stays in force", short(&kept)));
                told(existing, status, Some((true, "BundleRejected", note)))
            }
        }
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

/// Now, to the second (what a status line shows).
fn now() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_status_is_compared_without_its_time() {
        assert_eq!(
            status_of("rejected p@2: bundle.yaml is not valid YAML: x at line 3 column 1; in force: p@1 sha256:ab at 2026-12-01T00:00:00Z"),
            "rejected p@2: bundle.yaml is not valid YAML: x at line 3 column 1; in force: p@1 sha256:ab"
        );
        assert_eq!(status_of("hand-written"), "hand-written");
    }
}
