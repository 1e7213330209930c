//! The operator put together: [`Operator::builder`] names what runs beside
//! the driver (the policy bundles and their watches, the admin port, the
//! dashboard, the webhooks, leader election, multi-cluster dispatch) and [`OperatorBuilder::start`]
//! starts them in the one order they depend on, returning the running
//! [`Operator`], which owns the driver's loop (on a task of its own) and
//! everything started for it. `arbiter run`, the end-to-end tests and the
//! examples start the operator through it, so each wires it the same way.
//! It owns no decision and no watch of its own: it only wires the parts.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use arbiter_core::jobs::Integrations;
use arbiter_core::scheduler::hooks::{DefaultHooks, Hooks};
use kube::Client;
use kube_lease_manager::LeaseManagerError;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::admin::{AdminState, OperatorMetrics};
use crate::dashboard::Feeds;
use crate::driver::{Driver, DriverOptions};
use crate::leader::{run_as_leader, Ended, LeaseOptions};
use crate::multicluster::{Dispatcher, MultiClusterOptions};
use crate::policy_sources::{BundleSetupError, Bundles, Watching};
use crate::shadow::{Shadow, ShadowError, ShadowOptions};
use crate::webhook::{self, Webhook, WebhookError, WebhookOptions};

/// Why the operator did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("binding the admin port {address}: {source}")]
    AdminPort {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Bundles(#[from] BundleSetupError),
    #[error("starting the webhooks: {0}")]
    Webhooks(#[from] WebhookError),
    #[error(transparent)]
    Shadow(#[from] ShadowError),
}

/// Where the scheduler's hooks come from.
enum HookSource {
    /// Hooks given as they are (Kueue's own by default).
    Hooks(Box<dyn Hooks + Send>),
    /// The engine over policy bundles, watched while the operator runs.
    Bundles(Box<Bundles>),
}

/// What [`OperatorBuilder::start`] starts; see [`Operator::builder`].
pub struct OperatorBuilder {
    client: Client,
    hook_source: HookSource,
    integrations: Integrations,
    options: DriverOptions,
    admin: Option<(Arc<AdminState>, OperatorMetrics)>,
    admin_address: Option<SocketAddr>,
    dashboard: Option<SocketAddr>,
    webhooks: Option<(SocketAddr, WebhookOptions)>,
    lease: Option<LeaseOptions>,
    scheduling: bool,
    shadow: Option<ShadowOptions>,
    multicluster: Option<MultiClusterOptions>,
}

impl OperatorBuilder {
    /// The scheduler's hooks as they are (default: Kueue's,
    /// `DefaultHooks`); replaces [`OperatorBuilder::bundles`].
    pub fn hooks(mut self, hooks: Box<dyn Hooks + Send>) -> OperatorBuilder {
        self.hook_source = HookSource::Hooks(hooks);
        self
    }

    /// Decides with the engine over `bundles` (loaded with
    /// [`Bundles::load`]), whose directories and labelled ConfigMaps are
    /// watched from before the first decision; replaces
    /// [`OperatorBuilder::hooks`].
    pub fn bundles(mut self, bundles: Bundles) -> OperatorBuilder {
        self.hook_source = HookSource::Bundles(Box::new(bundles));
        self
    }

    /// The job kinds served (default: the built-in ones).
    pub fn integrations(mut self, integrations: Integrations) -> OperatorBuilder {
        self.integrations = integrations;
        self
    }

    /// How the driver runs (default: `DriverOptions::default()`).
    pub fn driver_options(mut self, options: DriverOptions) -> OperatorBuilder {
        self.options = options;
        self
    }

    /// Reports readiness, leadership and metrics to `state` and `metrics`
    /// (serving them needs [`OperatorBuilder::admin_address`]).
    pub fn metrics(mut self, state: Arc<AdminState>, metrics: OperatorMetrics) -> OperatorBuilder {
        self.admin = Some((state, metrics));
        self
    }

    /// Serves the admin port (`/metrics`, `/healthz`, `/readyz`) on
    /// `address`, from the state given to [`OperatorBuilder::metrics`].
    pub fn admin_address(mut self, address: SocketAddr) -> OperatorBuilder {
        self.admin_address = Some(address);
        self
    }

    /// Serves the read-only dashboard on `address`, fed the engine's
    /// metrics (with [`OperatorBuilder::metrics`]) and its newest decisions
    /// (with [`OperatorBuilder::bundles`]).
    pub fn dashboard(mut self, address: SocketAddr) -> OperatorBuilder {
        self.dashboard = Some(address);
        self
    }

    /// Runs multi-cluster dispatch (`crate::multicluster`) beside the
    /// driver: admitted jobs managed by `kueue.x-k8s.io/multikueue` run on
    /// worker clusters, chosen by the bundles' placement policies.
    pub fn multicluster(mut self, options: MultiClusterOptions) -> OperatorBuilder {
        self.multicluster = Some(options);
        self
    }

    /// Serves the admission webhooks on `address`; with a configuration
    /// named in `options`, its job-hold rules are kept to the kinds served.
    pub fn webhooks(mut self, address: SocketAddr, options: WebhookOptions) -> OperatorBuilder {
        self.webhooks = Some((address, options));
        self
    }

    /// Runs the driver's loop only while holding the Lease `lease`
    /// (every replica loads bundles and serves webhooks; only the leader
    /// tells about bundles).
    pub fn leader_election(mut self, lease: LeaseOptions) -> OperatorBuilder {
        self.lease = Some(lease);
        self
    }

    /// Starts the driver (its stores listed and kept, which the webhooks
    /// read) but never its loop: nothing is scheduled, held jobs stay
    /// held, and no Workload, status or Event is written but by what is
    /// served beside it; [`OperatorBuilder::leader_election`] is then not
    /// used. For serving the webhooks alone, as their end-to-end tests do.
    pub fn without_scheduling(mut self) -> OperatorBuilder {
        self.scheduling = false;
        self
    }

    /// Runs in shadow mode beside Kueue (`crate::shadow`): Kueue's queue
    /// objects are the configuration, its Workloads what is compared with,
    /// and nothing is written to the API — no webhooks, no leader election
    /// (both ignored if asked for), the bundle watch silent. The report is
    /// served at the admin port's `/shadow` (with [`OperatorBuilder::metrics`]).
    pub fn shadow(mut self, options: ShadowOptions) -> OperatorBuilder {
        self.shadow = Some(options);
        self
    }

    /// Starts the admin port, the dashboard, the driver (its stores
    /// listed), the bundle watches (the ConfigMaps there loaded), the
    /// webhooks, and then the driver's loop on a task of its own.
    pub async fn start(self) -> Result<Operator, StartError> {
        let OperatorBuilder {
            client,
            hook_source,
            integrations,
            options,
            admin,
            admin_address,
            dashboard,
            webhooks,
            lease,
            scheduling,
            shadow,
            multicluster,
        } = self;
        let admin_server = match (admin_address, &admin) {
            (Some(address), Some((state, _))) => Some(serve_admin(address, state.clone()).await?),
            _ => None,
        };
        let (hooks, bundles): (Box<dyn Hooks + Send>, _) = match hook_source {
            HookSource::Hooks(hooks) => (hooks, None),
            HookSource::Bundles(bundles) => (Box::new(bundles.engine()), Some(*bundles)),
        };
        let dashboard = match dashboard {
            Some(address) => {
                let feeds = Feeds {
                    engine: admin.as_ref().map(|(state, _)| state.metrics_text()),
                    recent: bundles.as_ref().map(Bundles::recent),
                };
                // The dashboard is read-only: one that cannot be served
                // must not keep the operator from scheduling.
                match serve_dashboard(address, client.clone(), feeds).await {
                    Ok(served) => Some(served),
                    Err(e) => {
                        tracing::error!(%address, error = %e, "the dashboard is not served (everything else runs); pass --dashboard-address with a free address, or --no-dashboard");
                        None
                    }
                }
            }
            None => None,
        };
        if let Some(shadow) = shadow {
            if webhooks.is_some() || lease.is_some() || multicluster.is_some() {
                tracing::warn!("shadow mode serves no webhooks, runs without leader election and dispatches to no worker cluster; those options are ignored");
            }
            let started = ShadowStart {
                client,
                integrations,
                hooks,
                options,
                shadow,
            };
            let (looping, stop, watching) = start_shadow(started, bundles, admin).await?;
            return Ok(Operator {
                looping,
                stop: Some(stop),
                webhook: None,
                admin_address: admin_server.as_ref().map(|(address, _)| *address),
                dashboard_address: dashboard.as_ref().map(|(address, _)| *address),
                _watching: watching,
                _rules: None,
                _admin_server: admin_server.map(|(_, task)| AbortOnDrop(task)),
                _dashboard: dashboard.map(|(_, task)| AbortOnDrop(task)),
                _dispatching: None,
            });
        }
        let mut driver = Driver::start(client.clone(), integrations, hooks, options).await;
        if let Some((state, metrics)) = &admin {
            driver = driver.with_admin(state.clone(), metrics.clone());
            // Every replica loads the bundles (a follower takes over warm);
            // only the leader tells about them.
            if lease.is_some() {
                state.following.store(true, Ordering::Relaxed);
            }
        }
        // The dispatcher ranks workers with its own engine over the same
        // bundles in force; it acts only while this replica speaks.
        let dispatching = multicluster.filter(|_| scheduling).map(|options| {
            let engine = bundles.as_ref().map(Bundles::engine);
            let speaks = speaks(admin.as_ref().map(|(state, _)| state.clone()));
            AbortOnDrop(tokio::spawn(
                Dispatcher::new(client.clone(), options, engine, speaks).run(),
            ))
        });
        let watching = match bundles {
            Some(bundles) => {
                let speaks = speaks(admin.as_ref().map(|(state, _)| state.clone()));
                Some(bundles.watch(client.clone(), driver.wake(), speaks).await?)
            }
            None => None,
        };
        let (webhook, rules) = match &webhooks {
            Some((address, options)) => {
                let (webhook, rules) = serve_webhooks(&client, &driver, *address, options).await?;
                (Some(webhook), rules)
            }
            None => (None, None),
        };
        let (stop, stopped) = oneshot::channel();
        let stopped = async {
            let _ = stopped.await;
        };
        let looping = if scheduling {
            tokio::spawn(run_loop(client, driver, admin, lease, stopped))
        } else {
            tokio::spawn(keep_without_loop(driver, stopped))
        };
        Ok(Operator {
            looping,
            stop: Some(stop),
            webhook,
            admin_address: admin_server.as_ref().map(|(address, _)| *address),
            dashboard_address: dashboard.as_ref().map(|(address, _)| *address),
            _watching: watching,
            _dispatching: dispatching,
            _rules: rules.map(AbortOnDrop),
            _admin_server: admin_server.map(|(_, task)| AbortOnDrop(task)),
            _dashboard: dashboard.map(|(_, task)| AbortOnDrop(task)),
        })
    }
}

/// What the shadow mode's loop is started from.
struct ShadowStart {
    client: Client,
    integrations: Integrations,
    hooks: Box<dyn Hooks + Send>,
    options: DriverOptions,
    shadow: ShadowOptions,
}

/// The loop's task, its stop and what runs for it.
type Started = (
    JoinHandle<Result<Ended, LeaseManagerError>>,
    oneshot::Sender<()>,
    Option<Watching>,
);

/// Starts the shadow mode's loop (and the bundles' watch, which never
/// speaks: the shadow writes nothing) on a task of its own.
async fn start_shadow(
    started: ShadowStart,
    bundles: Option<Bundles>,
    admin: Option<(Arc<AdminState>, OperatorMetrics)>,
) -> Result<Started, StartError> {
    let ShadowStart {
        client,
        integrations,
        hooks,
        options,
        shadow,
    } = started;
    let mut looping = Shadow::start(client.clone(), integrations, hooks, options, shadow).await?;
    if let Some((state, metrics)) = admin {
        looping = looping.with_admin(state, metrics);
    }
    let watching = match bundles {
        Some(bundles) => Some(
            bundles
                .watch(client, looping.wake(), Arc::new(|| false))
                .await?,
        ),
        None => None,
    };
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(async move {
        looping
            .run(async {
                let _ = stopped.await;
            })
            .await;
        Ok(Ended::Shutdown)
    });
    Ok((task, stop, watching))
}

/// Serves the admin port on `address` from `state`: where, and its task.
async fn serve_admin(
    address: SocketAddr,
    state: Arc<AdminState>,
) -> Result<(SocketAddr, JoinHandle<()>), StartError> {
    let (bound, server) = crate::admin::serve(address, state)
        .await
        .map_err(|source| StartError::AdminPort { address, source })?;
    tracing::info!(address = %bound, "admin port serving /metrics, /healthz and /readyz");
    Ok((bound, server))
}

/// Serves the dashboard on `address`, fed `feeds`: where, and its task.
async fn serve_dashboard(
    address: SocketAddr,
    client: Client,
    feeds: Feeds,
) -> std::io::Result<(SocketAddr, JoinHandle<std::io::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let serving = tokio::spawn(crate::dashboard::serve(listener, client, feeds));
    tracing::info!(address = %bound, "dashboard at http://{bound}/dashboard/ (read-only, no authentication of its own)");
    Ok((bound, serving))
}

/// Whether this replica writes about bundles (Events, the status
/// annotation): while it does not follow, as `state` says; without an
/// admin state, always.
fn speaks(state: Option<Arc<AdminState>>) -> Arc<dyn Fn() -> bool + Send + Sync> {
    match state {
        Some(state) => Arc::new(move || !state.following.load(Ordering::Relaxed)),
        None => Arc::new(|| true),
    }
}

/// Starts the webhooks for `driver`'s stores and job kinds; with a
/// configuration named, also the task keeping its job-hold rules to the
/// kinds served (every job kind served, user-defined ones too).
async fn serve_webhooks(
    client: &Client,
    driver: &Driver,
    address: SocketAddr,
    options: &WebhookOptions,
) -> Result<(Webhook, Option<JoinHandle<()>>), StartError> {
    let rules = options
        .configuration
        .clone()
        .map(|name| webhook::rules::keep_job_rules(client.clone(), name, driver.served_kinds()));
    let served = webhook::start(
        client,
        address,
        options,
        driver.integrations().clone(),
        driver.config_view(),
    )
    .await?;
    Ok((served, rules))
}

/// The driver's loop until `stopped` resolves: while holding the Lease
/// with leader election, else at once (this replica leads).
async fn run_loop(
    client: Client,
    driver: Driver,
    admin: Option<(Arc<AdminState>, OperatorMetrics)>,
    lease: Option<LeaseOptions>,
    stopped: impl Future<Output = ()>,
) -> Result<Ended, LeaseManagerError> {
    match lease {
        Some(lease) => run_as_leader(client, &lease, driver, admin, stopped).await,
        None => {
            if let Some((_, metrics)) = &admin {
                metrics.set_leader(true);
            }
            driver.run(stopped).await;
            Ok(Ended::Shutdown)
        }
    }
}

/// Keeps `driver` (its stores filled) without running its loop, until
/// `stopped` resolves ([`OperatorBuilder::without_scheduling`]).
async fn keep_without_loop(
    driver: Driver,
    stopped: impl Future<Output = ()>,
) -> Result<Ended, LeaseManagerError> {
    stopped.await;
    drop(driver);
    Ok(Ended::Shutdown)
}

/// The running operator: the driver's loop on its own task, and what was
/// started beside it. Dropping it stops everything at once; [`Operator::stop`]
/// stops gracefully (the writes decided are finished first).
pub struct Operator {
    looping: JoinHandle<Result<Ended, LeaseManagerError>>,
    stop: Option<oneshot::Sender<()>>,
    webhook: Option<Webhook>,
    admin_address: Option<SocketAddr>,
    dashboard_address: Option<SocketAddr>,
    _watching: Option<Watching>,
    _dispatching: Option<AbortOnDrop<()>>,
    _rules: Option<AbortOnDrop<()>>,
    _admin_server: Option<AbortOnDrop<()>>,
    _dashboard: Option<AbortOnDrop<std::io::Result<()>>>,
}

impl Operator {
    /// An operator over the API `client`: Kueue's hooks, the built-in job
    /// kinds, default driver options, and nothing beside the driver until
    /// the builder adds it.
    pub fn builder(client: Client) -> OperatorBuilder {
        OperatorBuilder {
            client,
            hook_source: HookSource::Hooks(Box::new(DefaultHooks)),
            integrations: Integrations::builtin(),
            options: DriverOptions::default(),
            admin: None,
            admin_address: None,
            dashboard: None,
            webhooks: None,
            lease: None,
            scheduling: true,
            shadow: None,
            multicluster: None,
        }
    }

    /// The webhooks served, if any.
    pub fn webhook(&self) -> Option<&Webhook> {
        self.webhook.as_ref()
    }

    /// Where the admin port is served, if it is.
    pub fn admin_address(&self) -> Option<SocketAddr> {
        self.admin_address
    }

    /// Where the dashboard is served, if it is.
    pub fn dashboard_address(&self) -> Option<SocketAddr> {
        self.dashboard_address
    }

    /// Whether the driver's loop has ended (the lease lost, or a panic).
    pub fn is_finished(&self) -> bool {
        self.looping.is_finished()
    }

    /// Runs until `shutdown` resolves, then stops gracefully; or until the
    /// loop ends on its own (the leader lease lost).
    pub async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<Ended, LeaseManagerError> {
        let ended = tokio::select! {
            ended = &mut self.looping => Some(joined(ended)),
            () = shutdown => None,
        };
        match ended {
            Some(ended) => ended,
            None => self.stop().await,
        }
    }

    /// Stops gracefully: the loop finishes the job writes handed over and
    /// the Workload, queue status and Event writes (a leader releases its
    /// lease); returns once it has.
    pub async fn stop(mut self) -> Result<Ended, LeaseManagerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        joined((&mut self.looping).await)
    }
}

/// The loop's result; its panic goes on.
fn joined(
    ended: Result<Result<Ended, LeaseManagerError>, tokio::task::JoinError>,
) -> Result<Ended, LeaseManagerError> {
    match ended {
        Ok(ended) => ended,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Ok(Ended::Shutdown),
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.looping.abort();
    }
}

/// Stops a task when dropped.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
