//! Where policy bundles come from in the cluster (docs/design.md §4, §7): the platform bundle
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
//! The telling is `watcher::tell`'s (only the replica that speaks, the
//! leader, writes; one that starts speaking announces what it loaded
//! meanwhile; a tenant namespace's Events are bounded, its annotations are
//! not).
//!
//! | module | job |
//! |---|---|
//! | this one | [`Bundles`]: the directories loaded, the engine over every source, the watches started |
//! | `dirs` | the `--policies` directories: loaded (platform bundles only), each watched on its own thread |
//! | `configmap` | what one labelled ConfigMap is (`Key`, `Role`), its content digest, how it loads |
//! | `roles` | which labelled ConfigMap is what, what one change affects, the outside view ([`in_force`]) |
//! | `watcher` | the labelled ConfigMaps' watch: the index, the builds off the runtime, the sources in force; `watcher::tell` tells the results |
//!
//! It never makes a scheduling decision and never judges a bundle (the
//! loader does). `arbiter run` and the end-to-end tests start it beside
//! the driver ([`Bundles::watch`] takes the driver's wake-up).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arbiter_policy::bundle::Bundle;
use arbiter_policy::engine::{Engine, RecentDecisions, SharedSources, Sources};
use arbiter_policy::metrics::PolicyMetrics;
use arbiter_policy::reload::{DirWatcher, Reloadable, WatchError};
use arbiter_policy::wasm::Runtime;
use kube::Client;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

mod configmap;
mod dirs;
mod roles;
mod watcher;

pub use roles::{in_force, load_as, InForce};
pub use watcher::{EVENT_BURST, EVENT_REFILL};

/// The annotation on a bundle ConfigMap saying what became of it:
/// `loaded NAME@VERSION sha256:DIGEST at TIME`, `rejected …; in force: …`
/// or `ignored: …`.
pub const STATUS_ANNOTATION: &str = "arbiter.dev/bundle-status";

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
        let mut loaded = Vec::new();
        for dir in &options.dirs {
            let bundle = dirs::load(dir, &runtime).map_err(|error| BundleSetupError::Bundle {
                path: dir.display().to_string(),
                error,
            })?;
            loaded.push(Arc::new(Reloadable::new(bundle)));
        }
        let sources = SharedSources::new(Sources {
            platform: loaded.clone(),
            tenants: BTreeMap::new(),
        });
        Ok(Bundles {
            options,
            runtime,
            metrics: metrics.cloned(),
            sources,
            dirs: loaded,
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
        tracing::info!(namespace = %self.options.platform_namespace, "watching policy bundle ConfigMaps (platform bundles in this namespace, tenant bundles elsewhere)");
        let dirs = dirs::watch(&self.options.dirs, &self.dirs, &self.runtime, &wake)?;
        let task = watcher::start(self, client, wake, speaks).await;
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
