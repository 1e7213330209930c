//! The read-only web dashboard: the cohort tree with quota and usage per
//! flavor, the queues with pending and admitted, each workload's reasons,
//! conditions and Events, and the policy bundles' status — computed from
//! the API objects ([`model`]) on each request of `/dashboard/api/state`,
//! which the page (plain HTML, JavaScript and CSS compiled into the binary,
//! no build step) polls every few seconds. Served on the operator's admin
//! port and by `arbiter dashboard --kubeconfig FILE`. GET only: it writes
//! nothing, and the page renders every name with `textContent`.

pub mod engine;
pub mod model;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use arbiter_core::model::api::{ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, ListParams};
use kube::Client;
use serde::de::DeserializeOwned;

pub use model::{Dashboard, Snapshot};

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("style.css");

/// The client the dashboard reads through, set once it exists (the
/// operator builds its client after binding the admin port).
pub type Source = Arc<OnceLock<Client>>;

/// What to grant when listing `what` is forbidden.
fn rbac_hint(what: &str) -> &'static str {
    match what {
        // The operator's own role (deploy/rbac.yaml) creates Events but
        // reads none: on its admin port the dashboard shows conditions only.
        "Events" => "grant list on events (core) to show the Events about workloads and their jobs; the operator's own role does not, `arbiter dashboard` with a kubeconfig that may shows them",
        "policy bundle ConfigMaps" => "grant list on configmaps to show the bundles' status",
        _ => "bind the ClusterRole arbiter-queue-viewer (deploy/queue-manager.yaml) or a platform role",
    }
}

/// A list of every object of a kind, or a sentence saying why not.
async fn list<K>(client: &Client, what: &str, params: ListParams) -> Result<Vec<K>, String>
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    match api.list(&params).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(status)) if status.code == 403 => Err(format!(
            "cannot list {what}: forbidden ({}); {}",
            status.message,
            rbac_hint(what)
        )),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(format!(
            "cannot list {what}: the API server does not serve them (is Arbiter installed?)"
        )),
        Err(e) => Err(format!("cannot list {what}: {e}")),
    }
}

fn keep<K>(result: Result<Vec<K>, String>, errors: &mut Vec<String>) -> Vec<K> {
    result.unwrap_or_else(|e| {
        errors.push(e);
        Vec::new()
    })
}

/// Lists the objects the dashboard shows. What cannot be read is named in
/// `errors`; the rest is still shown.
pub async fn snapshot(client: &Client) -> Snapshot {
    let all = ListParams::default;
    let (flavors, cohorts, cluster_queues, local_queues, workloads, events, bundles) = tokio::join!(
        list::<ResourceFlavor>(client, "ResourceFlavors", all()),
        list::<Cohort>(client, "Cohorts", all()),
        list::<ClusterQueue>(client, "ClusterQueues", all()),
        list::<LocalQueue>(client, "LocalQueues", all()),
        list::<Workload>(client, "Workloads", all()),
        list::<Event>(client, "Events", all()),
        list::<ConfigMap>(
            client,
            "policy bundle ConfigMaps",
            all().labels(arbiter_policy::bundle::CONFIGMAP_LABEL)
        ),
    );
    let mut errors = Vec::new();
    Snapshot {
        flavors: keep(flavors, &mut errors),
        cohorts: keep(cohorts, &mut errors),
        cluster_queues: keep(cluster_queues, &mut errors),
        local_queues: keep(local_queues, &mut errors),
        workloads: keep(workloads, &mut errors),
        events: keep(events, &mut errors),
        bundles: keep(bundles, &mut errors),
        errors,
    }
}

fn no_store(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:",
            ),
        ],
        body,
    )
        .into_response()
}

async fn index() -> Response {
    no_store("text/html; charset=utf-8", INDEX)
}

async fn script() -> Response {
    no_store("text/javascript; charset=utf-8", SCRIPT)
}

async fn style() -> Response {
    no_store("text/css; charset=utf-8", STYLE)
}

/// Reads the policy engine's metrics text (the admin port's registry).
pub type EngineText = Arc<dyn Fn() -> String + Send + Sync>;

/// How long one computed state answers every page polling: with several
/// pages open the API server is listed once per this, not once per poll
/// each (the page polls every 3 s).
const FRESH: Duration = Duration::from_secs(2);

#[derive(Clone)]
struct Serving {
    source: Source,
    engine: Option<EngineText>,
    /// The last state's JSON and when it was computed; the lock also makes
    /// concurrent requests wait for one listing instead of each listing.
    latest: Arc<tokio::sync::Mutex<Option<(Instant, String)>>>,
}

async fn state(State(serving): State<Serving>) -> Response {
    let Some(client) = serving.source.get() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "the operator has no API client yet; try again in a moment",
        )
            .into_response();
    };
    let mut latest = serving.latest.lock().await;
    let body = match &*latest {
        Some((at, body)) if at.elapsed() < FRESH => Ok(body.clone()),
        _ => {
            let mut dashboard = Dashboard::of(&snapshot(client).await);
            if let Some(text) = &serving.engine {
                dashboard.engine = engine::bundles(&text());
            }
            let body = serde_json::to_string(&dashboard);
            if let Ok(body) = &body {
                *latest = Some((Instant::now(), body.clone()));
            }
            body
        }
    };
    drop(latest);
    match body {
        Ok(body) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The dashboard's routes, all GET: `/dashboard/` (the page),
/// `/dashboard/app.js`, `/dashboard/style.css`, `/dashboard/api/state`;
/// with `engine`, the state names the engine's bundles in force.
pub fn router(source: Source, engine: Option<EngineText>) -> Router {
    Router::new()
        .route(
            "/dashboard",
            get(|| async { Redirect::permanent("/dashboard/") }),
        )
        .route("/dashboard/", get(index))
        .route("/dashboard/app.js", get(script))
        .route("/dashboard/style.css", get(style))
        .route("/dashboard/api/state", get(state))
        .with_state(Serving {
            source,
            engine,
            latest: Arc::default(),
        })
}

/// Serves the dashboard alone on `listener` (for `arbiter dashboard`).
pub async fn serve(listener: tokio::net::TcpListener, source: Source) -> std::io::Result<()> {
    axum::serve(listener, router(source, None)).await
}
