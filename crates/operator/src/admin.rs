//! The admin port: `/metrics` (Prometheus text format), `/healthz` (the
//! process serves) and `/readyz` (the stores have listed, and a replica
//! that leads has a valid queue configuration in force; a follower is
//! ready to answer webhooks once listed), and in shadow mode `/shadow`
//! (the comparison with Kueue, JSON). The `arbiter_*` families mirror Kueue's
//! main ones; the policy engine's `arbiter_policy_*` families are in the
//! same registry when the engine was built with it. The web dashboard has
//! its own address ([`crate::dashboard`]): the admin port is reached by
//! Prometheus from across the cluster, the dashboard only by port-forward.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arbiter_core::model::cluster::ClusterQueueId;
use arbiter_core::scheduler::{Event, Scheduler};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    cluster_queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PendingLabels {
    cluster_queue: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    cluster_queue: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabels {
    kind: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatchLabels {
    watch: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UsageLabels {
    cluster_queue: String,
    flavor: String,
    resource: String,
}

/// The operator's own families (Kueue's names, `arbiter_` instead of `kueue_`).
#[derive(Clone)]
pub struct OperatorMetrics {
    pending: Family<PendingLabels, Gauge>,
    admitted_active: Family<QueueLabels, Gauge>,
    admitted_total: Family<QueueLabels, Counter>,
    evicted_total: Family<ReasonLabels, Counter>,
    preempted_total: Family<ReasonLabels, Counter>,
    finished_total: Family<ReasonLabels, Counter>,
    wait_time: Family<QueueLabels, Histogram, fn() -> Histogram>,
    usage: Family<UsageLabels, Gauge<f64, AtomicU64>>,
    nominal: Family<UsageLabels, Gauge<f64, AtomicU64>>,
    share: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    leader: Gauge,
    publish_backlog: Gauge,
    queue_objects: Family<ObjectLabels, Gauge>,
    watch_lists: Family<WatchLabels, Counter>,
    tick_duration: Histogram,
}

/// Tick buckets: 100 µs to about 26 s, doubling.
fn tick_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 19))
}

/// Admission wait buckets: 1 s to about 4.5 h, doubling.
fn wait_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

impl OperatorMetrics {
    /// Registers the `arbiter_*` families into `registry`.
    pub fn register(registry: &mut Registry) -> OperatorMetrics {
        let m = OperatorMetrics {
            pending: Family::default(),
            admitted_active: Family::default(),
            admitted_total: Family::default(),
            evicted_total: Family::default(),
            preempted_total: Family::default(),
            finished_total: Family::default(),
            wait_time: Family::new_with_constructor(wait_histogram),
            usage: Family::default(),
            nominal: Family::default(),
            leader: Gauge::default(),
            publish_backlog: Gauge::default(),
            queue_objects: Family::default(),
            share: Family::default(),
            watch_lists: Family::default(),
            tick_duration: tick_histogram(),
        };
        registry.register(
            "arbiter_pending_workloads",
            "Workloads waiting per ClusterQueue; status active (in the queue) or inadmissible (set aside until something frees up)",
            m.pending.clone(),
        );
        registry.register(
            "arbiter_admitted_active_workloads",
            "Workloads admitted and not finished, per ClusterQueue",
            m.admitted_active.clone(),
        );
        registry.register(
            "arbiter_admitted_workloads",
            "Admissions, per ClusterQueue",
            m.admitted_total.clone(),
        );
        registry.register(
            "arbiter_evicted_workloads",
            "Evictions by reason (Preempted, Reclaimed, Failed), per ClusterQueue",
            m.evicted_total.clone(),
        );
        registry.register(
            "arbiter_preempted_workloads",
            "Preemptions by the preemptor's ClusterQueue; reason InClusterQueue or InCohortReclamation",
            m.preempted_total.clone(),
        );
        registry.register(
            "arbiter_finished_workloads",
            "Workloads that ran to their end, per ClusterQueue, by reason: Succeeded, Failed (in a ClusterQueue without retryPolicy), Deactivated (failed or evicted more often than retryPolicy.maxRetries allows)",
            m.finished_total.clone(),
        );
        registry.register_with_unit(
            "arbiter_admission_wait_time",
            "Time from a workload's queueing to its admission, per ClusterQueue",
            Unit::Seconds,
            m.wait_time.clone(),
        );
        registry.register(
            "arbiter_cluster_queue_resource_usage",
            "Quota in use per ClusterQueue, flavor and resource (in the resource's units; cpu in cores)",
            m.usage.clone(),
        );
        registry.register(
            "arbiter_cluster_queue_nominal_quota",
            "Nominal quota per ClusterQueue, flavor and resource",
            m.nominal.clone(),
        );
        registry.register(
            "arbiter_cluster_queue_weighted_share",
            "Weighted dominant share of each ClusterQueue (per mille of what its cohort can lend, divided by its weight)",
            m.share.clone(),
        );
        registry.register(
            "arbiter_leader",
            "1 while this replica holds the leader lease (or runs without leader election), else 0",
            m.leader.clone(),
        );
        registry.register(
            "arbiter_queue_objects",
            "Queue objects (ClusterQueue, LocalQueue, Cohort, ResourceFlavor, WorkloadPriorityClass) by kind and state: active (in force) or inactive (left out: invalid, or depending on one)",
            m.queue_objects.clone(),
        );
        registry.register(
            "arbiter_publish_backlog",
            "Objects (Workloads, queue statuses) and Events decided but not yet written to the API",
            m.publish_backlog.clone(),
        );
        registry.register(
            "arbiter_watch_lists",
            "Lists per watch: its first, and one each time the API expired the watch (410 Gone: the resourceVersion it would resume from was compacted away) or a list failed",
            m.watch_lists.clone(),
        );
        registry.register_with_unit(
            "arbiter_tick_duration",
            "Time of one pass of the leader's loop: read what changed, step the scheduler, hand the decisions to the writers (the count is the number of passes)",
            Unit::Seconds,
            m.tick_duration.clone(),
        );
        m
    }

    /// Records one pass of the driver's loop that took `seconds`.
    pub fn observe_tick(&self, seconds: f64) {
        self.tick_duration.observe(seconds);
    }

    /// Brings the watch `watch`'s list count up to `lists`.
    pub fn set_watch_lists(&self, watch: &str, lists: u64) {
        let counter = self.watch_lists.get_or_create(&WatchLabels {
            watch: watch.to_string(),
        });
        let shown = counter.get();
        if lists > shown {
            counter.inc_by(lists - shown);
        }
    }

    /// Sets the queue objects by kind and state from `counts` (kind →
    /// (active, inactive)).
    pub fn set_queue_objects(&self, counts: &std::collections::BTreeMap<String, (usize, usize)>) {
        self.queue_objects.clear();
        for (kind, (active, inactive)) in counts {
            for (state, n) in [("active", active), ("inactive", inactive)] {
                self.queue_objects
                    .get_or_create(&ObjectLabels {
                        kind: kind.clone(),
                        state: state.into(),
                    })
                    .set(*n as i64);
            }
        }
    }

    /// The gauge the publisher keeps its backlog in.
    pub fn publish_backlog(&self) -> Gauge {
        self.publish_backlog.clone()
    }

    /// Records whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts one step's decisions.
    pub fn observe(&self, scheduler: &Scheduler, events: &[Event]) {
        let cluster = scheduler.cluster();
        let queue_of = |id| {
            scheduler.get(id).map(|e| {
                cluster.cluster_queues[e.workload.cluster_queue.index()]
                    .name
                    .clone()
            })
        };
        for event in events {
            match event {
                Event::Admitted { workload } => {
                    let Some(cq) = queue_of(*workload) else {
                        continue;
                    };
                    let entry = scheduler.entry(*workload);
                    let labels = QueueLabels { cluster_queue: cq };
                    self.admitted_total.get_or_create(&labels).inc();
                    if let Some(admission) = &entry.admission {
                        let wait = admission.at.saturating_sub(entry.queue_time);
                        self.wait_time
                            .get_or_create(&labels)
                            .observe(wait.as_secs_f64());
                    }
                }
                Event::Evicted {
                    workload,
                    cause,
                    by,
                    ..
                } => {
                    let Some(cq) = queue_of(*workload) else {
                        continue;
                    };
                    self.evicted_total
                        .get_or_create(&ReasonLabels {
                            cluster_queue: cq.clone(),
                            reason: cause.code().to_string(),
                        })
                        .inc();
                    if by.is_some() {
                        let reason = match cause {
                            arbiter_core::scheduler::Eviction::Preempted {
                                reclaimed_by: Some(_),
                                ..
                            } => "InCohortReclamation",
                            _ => "InClusterQueue",
                        };
                        let preemptor = match cause {
                            arbiter_core::scheduler::Eviction::Preempted {
                                reclaimed_by: Some(other),
                                ..
                            } => other.clone(),
                            _ => cq,
                        };
                        self.preempted_total
                            .get_or_create(&ReasonLabels {
                                cluster_queue: preemptor,
                                reason: reason.into(),
                            })
                            .inc();
                    }
                }
                Event::Finished {
                    workload, failure, ..
                } => {
                    let Some(cq) = queue_of(*workload) else {
                        continue;
                    };
                    let reason = if failure.is_some() {
                        "Failed"
                    } else {
                        "Succeeded"
                    };
                    self.finished_total
                        .get_or_create(&ReasonLabels {
                            cluster_queue: cq,
                            reason: reason.into(),
                        })
                        .inc();
                }
                Event::Deactivated { workload, .. } => {
                    let Some(cq) = queue_of(*workload) else {
                        continue;
                    };
                    self.finished_total
                        .get_or_create(&ReasonLabels {
                            cluster_queue: cq,
                            reason: "Deactivated".into(),
                        })
                        .inc();
                }
                _ => {}
            }
        }
    }

    /// Sets the per-queue gauges from the scheduler's state.
    pub fn set_queues(&self, scheduler: &Scheduler) {
        let cluster = scheduler.cluster();
        // Inadmissible workloads per ClusterQueue, in one pass.
        let mut inadmissible = vec![0i64; cluster.cluster_queues.len()];
        for (_, entry) in scheduler.live() {
            if entry.status == arbiter_core::scheduler::Status::Inadmissible {
                if let Some(count) = inadmissible.get_mut(entry.workload.cluster_queue.0 as usize) {
                    *count += 1;
                }
            }
        }
        for (index, cq) in cluster.cluster_queues.iter().enumerate() {
            let id = ClusterQueueId(index as u32);
            let labels = QueueLabels {
                cluster_queue: cq.name.clone(),
            };
            let pending = scheduler.pending_count(id) as i64;
            let parked = inadmissible[index];
            for (status, value) in [("active", pending - parked), ("inadmissible", parked)] {
                self.pending
                    .get_or_create(&PendingLabels {
                        cluster_queue: cq.name.clone(),
                        status: status.into(),
                    })
                    .set(value.max(0));
            }
            self.admitted_active
                .get_or_create(&labels)
                .set(scheduler.admitted_count(id) as i64);
            let share = scheduler.dominant_share(id);
            self.share
                .get_or_create(&labels)
                .set(if share.is_finite() { share } else { f64::MAX });
            for group in &cq.groups {
                for &flavor in &group.flavors {
                    for &resource in &group.resources {
                        let fr = cluster.flavor_resource(flavor, resource);
                        let labels = UsageLabels {
                            cluster_queue: cq.name.clone(),
                            flavor: cluster.flavors[flavor.index()].name.clone(),
                            resource: cluster.resource_name(resource).to_string(),
                        };
                        self.usage
                            .get_or_create(&labels)
                            .set(scheduler.usage(id, fr).as_f64());
                        self.nominal
                            .get_or_create(&labels)
                            .set(scheduler.nominal(id, fr).as_f64());
                    }
                }
            }
        }
    }
}

/// What the admin port serves from.
pub struct AdminState {
    pub registry: Mutex<Registry>,
    /// The stores have listed (the webhooks can answer).
    pub listed: AtomicBool,
    /// A valid queue configuration is in force (set by the driver's loop).
    pub configured: AtomicBool,
    /// This replica waits for the leader lease (so it schedules nothing and
    /// needs no configuration in force to be ready: it serves webhooks).
    pub following: AtomicBool,
    /// The shadow mode's report as JSON, served at `/shadow` (unset: not
    /// in shadow mode).
    shadow: std::sync::OnceLock<ShadowFeed>,
}

/// Renders the shadow mode's report (JSON).
pub type ShadowFeed = Arc<dyn Fn() -> String + Send + Sync>;

impl AdminState {
    pub fn new(registry: Registry) -> Arc<AdminState> {
        Arc::new(AdminState {
            registry: Mutex::new(registry),
            listed: AtomicBool::new(false),
            configured: AtomicBool::new(false),
            following: AtomicBool::new(false),
            shadow: std::sync::OnceLock::new(),
        })
    }

    /// Ready: listed, and either following or with a valid configuration in force.
    /// Serves `feed` at `/shadow` (the first feed given stays).
    pub fn serve_shadow(&self, feed: ShadowFeed) {
        let _ = self.shadow.set(feed);
    }

    pub fn ready(&self) -> bool {
        self.listed.load(Ordering::Relaxed)
            && (self.following.load(Ordering::Relaxed) || self.configured.load(Ordering::Relaxed))
    }
}

async fn metrics(State(state): State<Arc<AdminState>>) -> impl IntoResponse {
    let text = {
        let registry = state.registry.lock().unwrap_or_else(|p| p.into_inner());
        arbiter_policy::metrics::encode(&registry)
    };
    // The classic Prometheus text format `encode` writes, labelled as such:
    // Prometheus picks its parser by this header, and its OpenMetrics
    // parser refuses a page without `# EOF`.
    (
        [(
            header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )],
        text,
    )
}

async fn shadow(State(state): State<Arc<AdminState>>) -> axum::response::Response {
    match state.shadow.get() {
        Some(feed) => ([(header::CONTENT_TYPE, "application/json")], feed()).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "not in shadow mode: start `arbiter run --shadow` beside Kueue for this report",
        )
            .into_response(),
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<Arc<AdminState>>) -> (StatusCode, &'static str) {
    if state.ready() {
        (StatusCode::OK, "ok")
    } else if !state.listed.load(Ordering::Relaxed) {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the stores have not listed yet",
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: leading, but no valid queue configuration is in force (see the log)",
        )
    }
}

/// The admin router: the metrics and the probes.
pub fn router(state: Arc<AdminState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/shadow", get(shadow))
        .with_state(state)
}

impl AdminState {
    /// Reads the metrics registry's text, for the dashboard's view of the
    /// engine's bundles in force.
    pub fn metrics_text(self: &Arc<AdminState>) -> crate::dashboard::EngineText {
        let state = self.clone();
        Arc::new(move || {
            let registry = state.registry.lock().unwrap_or_else(|p| p.into_inner());
            arbiter_policy::metrics::encode(&registry)
        })
    }
}

/// Binds `address` and serves the admin port until the task is dropped.
/// Returns the bound address (port 0 picks a free one).
pub async fn serve(
    address: SocketAddr,
    state: Arc<AdminState>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(state)).await {
            tracing::error!(error = %e, "the admin server stopped");
        }
    });
    Ok((bound, task))
}
