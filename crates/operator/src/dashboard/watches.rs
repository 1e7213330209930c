//! What the dashboard reads: watches (kube-runtime reflectors) over the
//! queue objects, the Workloads and the bundle ConfigMaps' metadata,
//! started when the page is first asked for and stopped after
//! [`IDLE`] without a request, so the API server is listed once per
//! start, not once per refresh, and an operator nobody looks at pays
//! nothing. A watch that fails (forbidden, not served) is retried with
//! kube-runtime's backoff; its latest error is named on the page until it
//! succeeds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arbiter_core::model::api::{ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::Client;
use tokio::task::JoinHandle;

use super::model::DashboardObjects;
use crate::watch::TypedKind;

/// Watches nobody asked for this long are stopped.
pub const IDLE: Duration = Duration::from_secs(600);

/// How long a first request waits for the watches' first lists (a watch
/// that is forbidden never lists; the page then names why).
const FIRST_LIST: Duration = Duration::from_secs(10);

/// The latest error of each watch that has not recovered, by what it reads.
type Errors = Arc<Mutex<BTreeMap<&'static str, String>>>;

/// What to grant when reading `what` is forbidden.
fn rbac_hint(what: &str) -> &'static str {
    match what {
        "policy bundle ConfigMaps" => "grant list and watch on configmaps to show the bundles' status",
        _ => "bind the ClusterRole arbiter-queue-viewer (deploy/queue-manager.yaml) or a platform role",
    }
}

/// One sentence saying why watching `what` failed.
fn describe(what: &str, error: &watcher::Error) -> String {
    let api = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => match e {
            kube::Error::Api(status) => Some((status.code, status.message.clone())),
            _ => None,
        },
        watcher::Error::WatchError(status) => Some((status.code, status.message.clone())),
        watcher::Error::NoResourceVersion => None,
    };
    match api {
        Some((403, message)) => {
            format!(
                "cannot list {what}: forbidden ({message}); {}",
                rbac_hint(what)
            )
        }
        Some((404, _)) => {
            format!(
                "cannot list {what}: the API server does not serve them (is Arbiter installed?)"
            )
        }
        _ => format!("cannot list {what}: {error}"),
    }
}

/// Drives `stream` into nothing but `errors`: each error is noted under
/// `what`, each success clears it.
fn follow<T>(
    what: &'static str,
    stream: impl futures::Stream<Item = Result<T, watcher::Error>> + Send + 'static,
    errors: Errors,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut failing = false;
        while let Some(item) = stream.next().await {
            let mut errors = errors.lock().unwrap_or_else(PoisonError::into_inner);
            match item {
                Ok(_) if failing => {
                    errors.remove(what);
                    failing = false;
                }
                Ok(_) => {}
                Err(e) => {
                    errors.insert(what, describe(what, &e));
                    failing = true;
                }
            }
        }
    })
}

/// Watches the objects of `K` that `config` selects, noting its errors
/// under `what`: the store, and the task that keeps it filled.
fn watch<K: TypedKind>(
    client: &Client,
    what: &'static str,
    config: watcher::Config,
    errors: &Errors,
) -> (Store<K>, JoinHandle<()>) {
    let (store, stream) = crate::watch::reflect_typed(client, config);
    (store, follow(what, stream, errors.clone()))
}

/// The running watches.
pub struct Watches {
    flavors: Store<ResourceFlavor>,
    cohorts: Store<Cohort>,
    cluster_queues: Store<ClusterQueue>,
    local_queues: Store<LocalQueue>,
    workloads: Store<Workload>,
    bundles: Store<PartialObjectMeta<ConfigMap>>,
    errors: Errors,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Watches {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Watches {
    /// Starts every watch and waits (at most [`FIRST_LIST`]) for their first lists.
    pub async fn start(client: &Client) -> Watches {
        let errors = Errors::default();
        let all = watcher::Config::default;
        let (flavors, t1) = watch(client, "ResourceFlavors", all(), &errors);
        let (cohorts, t2) = watch(client, "Cohorts", all(), &errors);
        let (cluster_queues, t3) = watch(client, "ClusterQueues", all(), &errors);
        let (local_queues, t4) = watch(client, "LocalQueues", all(), &errors);
        let (workloads, t5) = watch(client, "Workloads", all(), &errors);
        // Metadata only: the status is an annotation, and the data (wasm
        // modules among it) is never needed here.
        let labelled = all().labels(arbiter_policy::bundle::CONFIGMAP_LABEL);
        let (bundles, t6) = watch(client, "policy bundle ConfigMaps", labelled, &errors);
        let watches = Watches {
            flavors,
            cohorts,
            cluster_queues,
            local_queues,
            workloads,
            bundles,
            errors,
            tasks: vec![t1, t2, t3, t4, t5, t6],
        };
        let _ = tokio::time::timeout(FIRST_LIST, async {
            let _ = tokio::join!(
                watches.flavors.wait_until_ready(),
                watches.cohorts.wait_until_ready(),
                watches.cluster_queues.wait_until_ready(),
                watches.local_queues.wait_until_ready(),
                watches.workloads.wait_until_ready(),
                watches.bundles.wait_until_ready(),
            );
        })
        .await;
        watches
    }

    /// What the stores hold now, and what could not be read.
    pub fn snapshot(&self) -> DashboardObjects {
        DashboardObjects {
            flavors: self.flavors.state(),
            cohorts: self.cohorts.state(),
            cluster_queues: self.cluster_queues.state(),
            local_queues: self.local_queues.state(),
            workloads: self.workloads.state(),
            bundles: self
                .bundles
                .state()
                .iter()
                .map(|m| m.metadata.clone())
                .collect(),
            errors: self
                .errors
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .values()
                .cloned()
                .collect(),
        }
    }
}

/// The watches of one dashboard: started on demand, stopped when idle.
#[derive(Default)]
pub struct OnDemand {
    running: tokio::sync::Mutex<Option<(Watches, Instant)>>,
}

impl OnDemand {
    /// The stores' snapshot, starting the watches first if they are not running.
    pub async fn snapshot(&self, client: &Client) -> DashboardObjects {
        let mut running = self.running.lock().await;
        if running.is_none() {
            tracing::info!("dashboard asked for: watching the queue objects, Workloads and bundle ConfigMaps until it goes unused for {} s", IDLE.as_secs());
            *running = Some((Watches::start(client).await, Instant::now()));
        }
        let (watches, used) = running.as_mut().expect("started above");
        *used = Instant::now();
        watches.snapshot()
    }

    /// Stops the watches if unused for `idle`; returns whether it did.
    pub async fn stop_if_idle(&self, idle: Duration) -> bool {
        let mut running = self.running.lock().await;
        if running
            .as_ref()
            .is_some_and(|(_, used)| used.elapsed() >= idle)
        {
            *running = None;
            tracing::info!("dashboard unused: its watches stopped");
            return true;
        }
        false
    }
}
