//! The read-only web dashboard: the cohort tree with quota and usage per
//! flavor, the queues with pending and admitted, each workload's reasons,
//! conditions and Events, and the policy bundles' status — computed from
//! the API objects ([`model`]) on each request of `/dashboard/api/state`,
//! which the page (plain HTML, JavaScript and CSS compiled into the binary,
//! no build step) polls every few seconds. Served on the operator's admin
//! port and by `arbiter dashboard --kubeconfig FILE`. GET only: it writes
//! nothing, and the page renders every name with `textContent`.

//! The read-only web dashboard: the cohort tree with quota and usage per
//! flavor, the queues with pending and admitted, the workloads with their
//! position and reasons (one in detail: conditions, Events, the policy
//! decisions about it), the policy bundles' status and, served by the
//! operator, its engine's bundles in force and newest decisions. Computed
//! ([`model`]) from watches the first request starts ([`watches`]; they
//! stop when unused), at most once per [`FRESH`] whatever the number of
//! pages open; each page is sent a filtered, bounded part ([`page`]); a
//! workload's Events are listed when it is shown ([`detail`]). Plain HTML,
//! JavaScript and CSS compiled into the binary, no build step. Served by
//! `arbiter run` on its own address (loopback by default: reached with
//! `kubectl port-forward`, so whoever may port-forward to the operator's
//! pod may read it) and by `arbiter dashboard --kubeconfig FILE`. GET
//! only: it writes nothing, and the page renders every name with
//! `textContent`.

pub mod detail;
pub mod engine;
pub mod model;
pub mod page;
pub mod watches;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arbiter_policy::engine::RecentDecisions;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use kube::Client;
use serde::Deserialize;

pub use model::{Dashboard, DashboardObjects};

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("style.css");

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

/// Reads the policy engine's metrics text (the operator's registry).
pub type EngineText = Arc<dyn Fn() -> String + Send + Sync>;

/// What only the operator knows: its engine's bundles in force (read from
/// its metrics) and newest decisions. `arbiter dashboard` has neither.
#[derive(Clone, Default)]
pub struct Feeds {
    pub engine: Option<EngineText>,
    pub recent: Option<RecentDecisions>,
}

/// How long one computed state answers every page polling: with several
/// pages open the state is computed once per this, not once per poll
/// each (the page polls every 3 s).
pub const FRESH: Duration = Duration::from_secs(2);

/// The last state and when it was computed.
type Latest = Arc<tokio::sync::Mutex<Option<(Instant, Arc<Dashboard>)>>>;

#[derive(Clone)]
struct Serving {
    client: Client,
    feeds: Feeds,
    watches: Arc<watches::OnDemand>,
    /// The last state and when it was computed; the lock also makes
    /// concurrent requests wait for one computation instead of each
    /// computing.
    latest: Latest,
}

impl Serving {
    async fn dashboard(&self) -> Arc<Dashboard> {
        let mut latest = self.latest.lock().await;
        if let Some((at, dashboard)) = &*latest {
            if at.elapsed() < FRESH {
                return dashboard.clone();
            }
        }
        let mut dashboard = Dashboard::of(&self.watches.snapshot(&self.client).await);
        if let Some(text) = &self.feeds.engine {
            dashboard.engine = engine::bundles(&text());
        }
        if let Some(recent) = &self.feeds.recent {
            dashboard.decisions = recent.latest(page::DECISIONS_SHOWN);
        }
        let dashboard = Arc::new(dashboard);
        *latest = Some((Instant::now(), dashboard.clone()));
        dashboard
    }
}

fn json(body: Result<String, serde_json::Error>) -> Response {
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

async fn state(State(serving): State<Serving>, Query(filter): Query<page::Filter>) -> Response {
    let dashboard = serving.dashboard().await;
    let engine_runs = serving.feeds.recent.is_some();
    json(serde_json::to_string(&dashboard.page(&filter, engine_runs)))
}

/// The query of `/dashboard/api/workload`.
#[derive(Deserialize)]
struct Which {
    namespace: String,
    name: String,
}

async fn workload(State(serving): State<Serving>, Query(which): Query<Which>) -> Response {
    let snapshot = serving.watches.snapshot(&serving.client).await;
    let found = detail::detail(
        &serving.client,
        &snapshot,
        serving.feeds.recent.as_ref(),
        &which.namespace,
        &which.name,
    )
    .await;
    match found {
        Some(detail) => json(serde_json::to_string(&detail)),
        None => (
            StatusCode::NOT_FOUND,
            format!(
                "no Workload {}/{} (finished and deleted, or not readable)",
                which.namespace, which.name
            ),
        )
            .into_response(),
    }
}

/// The dashboard's routes, all GET: `/dashboard/` (the page),
/// `/dashboard/app.js`, `/dashboard/style.css`, `/dashboard/api/state`
/// (`?namespace=&clusterQueue=&state=&limit=`) and
/// `/dashboard/api/workload?namespace=&name=`. Returns the router and the
/// watches it starts on demand (for [`stop_idle`]).
pub fn router(client: Client, feeds: Feeds) -> (Router, Arc<watches::OnDemand>) {
    let watches = Arc::new(watches::OnDemand::default());
    let router = Router::new()
        .route(
            "/dashboard",
            get(|| async { Redirect::permanent("/dashboard/") }),
        )
        .route("/", get(|| async { Redirect::temporary("/dashboard/") }))
        .route("/dashboard/", get(index))
        .route("/dashboard/app.js", get(script))
        .route("/dashboard/style.css", get(style))
        .route("/dashboard/api/state", get(state))
        .route("/dashboard/api/workload", get(workload))
        .with_state(Serving {
            client,
            feeds,
            watches: watches.clone(),
            latest: Arc::default(),
        });
    (router, watches)
}

/// Stops `watches` whenever they have gone unused for [`watches::IDLE`];
/// runs until dropped.
pub async fn stop_idle(watches: Arc<watches::OnDemand>) {
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tick.tick().await;
        watches.stop_if_idle(watches::IDLE).await;
    }
}

/// Serves the dashboard on `listener` until the future is dropped.
pub async fn serve(
    listener: tokio::net::TcpListener,
    client: Client,
    feeds: Feeds,
) -> std::io::Result<()> {
    let (router, watches) = router(client, feeds);
    tokio::select! {
        served = axum::serve(listener, router) => served,
        () = stop_idle(watches) => Ok(()),
    }
}
