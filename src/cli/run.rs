//! `arbiter run`: the operator (docs/design.md §7). Connects with the kubeconfig
//! given, else the in-cluster configuration or the default kubeconfig,
//! loads the platform bundle directories named by `--policies` and watches
//! them, watches the ConfigMaps labelled `arbiter.dev/policy-bundle`
//! (platform bundles in `--namespace`, tenant bundles elsewhere; none at
//! all: Kueue's behaviour), and drives the scheduler until SIGINT or
//! SIGTERM. With `--shadow` it runs beside Kueue deciding without acting
//! (`arbiter_operator::shadow`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use arbiter_core::model::cluster::{FairPreemptionStrategies, PodsReadyPolicy};
use arbiter_operator::admin::{AdminState, OperatorMetrics};
use arbiter_operator::leader::{Ended, LeaseOptions};
use arbiter_operator::multicluster::MultiClusterOptions;
use arbiter_operator::policy_sources::{BundleOptions, Bundles};
use arbiter_operator::shadow::ShadowOptions;
use arbiter_operator::webhook::{CertSource, Rotation, WebhookOptions};
use arbiter_operator::{DriverOptions, Operator, StartError};
use arbiter_policy::metrics::PolicyMetrics;
use clap::{Args, ValueEnum};
use kube::config::{KubeConfigOptions, Kubeconfig};
use prometheus_client::registry::Registry;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Kubeconfig file (default: in-cluster configuration, else $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Platform policy bundle directory, watched and hot-reloaded (repeatable; a mounted ConfigMap volume works).
    #[arg(long = "policies", value_name = "DIR")]
    pub policies: Vec<PathBuf>,
    /// File of JobIntegration manifests: job kinds beyond the built-in ones (repeatable).
    #[arg(long = "integrations", value_name = "FILE")]
    pub integrations: Vec<PathBuf>,
    /// Kueue's Configuration file (config.kueue.x-k8s.io v1beta2 or v1beta1,
    /// kind Configuration): its waitForPodsReady is in force (all-or-nothing
    /// admission), its fairSharing.preemptionStrategies is checked; other
    /// fields are reported as unused.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Gather changes this long after a wake-up before scheduling, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 20)]
    pub batch_window_ms: u64,
    /// Address of the admin port (/metrics, /healthz, /readyz).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    pub admin_address: std::net::SocketAddr,
    /// Address of the read-only web dashboard (/dashboard/). Loopback by
    /// default: reach it with `kubectl port-forward` (whoever may
    /// port-forward to the operator's pod may read it). It has no
    /// authentication of its own: bind it elsewhere only behind a
    /// proxy that authenticates.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    pub dashboard_address: std::net::SocketAddr,
    /// Serve no dashboard.
    #[arg(long, conflicts_with = "dashboard_address")]
    pub no_dashboard: bool,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// The operator's namespace: its certificate Secret and leader Lease live
    /// there, and ConfigMaps labelled arbiter.dev/policy-bundle there are platform
    /// bundles (elsewhere, their namespace's tenant bundle). Default: $POD_NAMESPACE,
    /// else arbiter-system.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Address of the webhook server (HTTPS).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:9443")]
    pub webhook_address: std::net::SocketAddr,
    /// Serve the webhooks with tls.crt and tls.key from this directory (a
    /// mounted Secret, e.g. cert-manager's; reloaded on change) instead of a
    /// generated certificate.
    #[arg(long, value_name = "DIR")]
    pub webhook_cert_dir: Option<PathBuf>,
    /// Secret (in --namespace) holding the generated webhook certificate; made when absent.
    #[arg(long, value_name = "NAME", default_value = "arbiter-webhook-tls")]
    pub webhook_secret: String,
    /// The webhook Service's name, for the generated certificate's DNS names.
    #[arg(long, value_name = "NAME", default_value = "arbiter")]
    pub webhook_service: String,
    /// The Mutating- and ValidatingWebhookConfiguration whose caBundle is kept
    /// equal to the certificate's CA ("" leaves caBundle alone, e.g. for cert-manager's CA injector).
    #[arg(long, value_name = "NAME", default_value = "arbiter")]
    pub webhook_configuration: String,
    /// Serve no webhooks (jobs are still held by the loop, but may start
    /// before it sees them).
    #[arg(long, conflicts_with = "webhook_cert_dir")]
    pub no_webhooks: bool,
    /// Run only while holding the Lease --lease-name in --namespace (run 2+ replicas).
    #[arg(long)]
    pub leader_election: bool,
    /// The leader Lease's name.
    #[arg(long, value_name = "NAME", default_value = "arbiter-leader")]
    pub lease_name: String,
    /// Seconds a leader lease not renewed stays held.
    #[arg(long, value_name = "S", default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub lease_duration: u64,
    /// Shadow mode, beside a running Kueue: read Kueue's queue objects
    /// (kueue.x-k8s.io) and the jobs it manages, decide with Arbiter's core
    /// and the bundles, write nothing to the cluster, and report per
    /// workload where Arbiter would decide otherwise than Kueue (metrics
    /// arbiter_shadow_*, GET /shadow on the admin port, --shadow-report).
    /// Serves no webhooks.
    #[arg(long, conflicts_with_all = ["leader_election", "webhook_cert_dir"])]
    pub shadow: bool,
    /// With --shadow: write the report (JSON) to this file, rewritten while
    /// it changes (at most every 10 s) and on shutdown.
    #[arg(long, value_name = "FILE", requires = "shadow")]
    pub shadow_report: Option<PathBuf>,
    /// With --shadow: admissions this many seconds apart count as the same
    /// time (both systems react to the same arrival a little apart).
    #[arg(long, value_name = "S", default_value_t = 5)]
    pub shadow_tolerance: u64,
    /// Seconds before expiry the leader renews.
    #[arg(long, value_name = "S", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lease_grace: u64,
    /// Run admitted jobs with spec.managedBy kueue.x-k8s.io/multikueue on
    /// worker clusters (MultiKueueConfig, MultiKueueCluster, kubeconfig
    /// Secrets in --namespace).
    #[arg(long, conflicts_with = "shadow")]
    pub multicluster: bool,
    /// Seconds a worker cluster may be unreachable before its jobs go to
    /// another (Kueue's workerLostTimeout).
    #[arg(long, value_name = "S", default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub worker_lost_timeout: u64,
    /// The origin label's value on the copies this manager makes (managers
    /// sharing a worker need different ones).
    #[arg(long, value_name = "NAME", default_value = "multikueue")]
    pub multicluster_origin: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    init_tracing(args.log_format);
    let mut registry = Registry::default();
    let policy_metrics = PolicyMetrics::register(&mut registry);
    let operator_metrics = OperatorMetrics::register(&mut registry);
    let namespace = platform_namespace(args);
    let bundles = Bundles::load(
        BundleOptions {
            platform_namespace: namespace.clone(),
            dirs: args.policies.clone(),
        },
        Some(&policy_metrics),
    )?;
    let (integrations, warnings) = arbiter_operator::integrations::read(&args.integrations)?;
    for warning in &warnings {
        tracing::warn!(%warning, "job integration");
    }
    let (pods_ready, preemption_strategies) = kueue_configuration(args)?;
    let options = DriverOptions {
        batch_window: Duration::from_millis(args.batch_window_ms),
        pods_ready,
        preemption_strategies,
        namespace: namespace.clone(),
        ..DriverOptions::default()
    };
    let admin = AdminState::new(registry);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let client = connect(args).await?;
        let mut operator = Operator::builder(client)
            .bundles(bundles)
            .integrations(integrations)
            .driver_options(options)
            .metrics(admin, operator_metrics)
            .admin_address(args.admin_address);
        if !args.no_dashboard {
            operator = operator.dashboard(args.dashboard_address);
        }
        if args.multicluster {
            operator = operator.multicluster(MultiClusterOptions {
                namespace: namespace.clone(),
                origin: args.multicluster_origin.clone(),
                worker_lost_timeout: Duration::from_secs(args.worker_lost_timeout),
                ..MultiClusterOptions::default()
            });
        }
        if args.shadow {
            operator = operator.shadow(ShadowOptions {
                report: args.shadow_report.clone(),
                tolerance: Duration::from_secs(args.shadow_tolerance),
                ..ShadowOptions::default()
            });
        } else if let Some(webhooks) = webhook_options(args, &namespace) {
            operator = operator.webhooks(args.webhook_address, webhooks);
        }
        let lease = args.leader_election.then(|| LeaseOptions {
            namespace: namespace.clone(),
            name: args.lease_name.clone(),
            identity: identity(),
            duration_seconds: args.lease_duration,
            grace_seconds: args.lease_grace,
        });
        if let Some(lease) = &lease {
            operator = operator.leader_election(lease.clone());
        }
        let operator = operator.start().await.map_err(start_error)?;
        let ended = operator.run_until(shutdown()).await;
        if let Some(lease) = &lease {
            let ended = ended.with_context(|| {
                format!("leader election on the Lease {namespace}/{}", lease.name)
            })?;
            if ended == Ended::LostLease {
                anyhow::bail!("lost the leader lease {namespace}/{} to another replica; exiting so this one restarts as a follower", lease.name);
            }
        }
        tracing::info!("stopped");
        Ok(())
    })
}

/// Logs to stderr, filtered by `ARBITER_LOG` (default `info`), as text or JSON.
fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ARBITER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// The operator's namespace: `--namespace`, else `$POD_NAMESPACE`, else
/// `arbiter-system`.
fn platform_namespace(args: &RunArgs) -> String {
    args.namespace
        .clone()
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|ns| !ns.is_empty())
        })
        .unwrap_or_else(|| "arbiter-system".to_string())
}

/// `--config`'s `waitForPodsReady` and `fairSharing.preemptionStrategies`,
/// checked (its other fields reported as unused); without `--config`, off
/// and Kueue's default strategies.
fn kueue_configuration(
    args: &RunArgs,
) -> anyhow::Result<(Option<PodsReadyPolicy>, FairPreemptionStrategies)> {
    let Some(path) = &args.config else {
        return Ok((None, FairPreemptionStrategies::default()));
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --config {}", path.display()))?;
    let source = arbiter_core::model::load::Source {
        file: path.clone(),
        document: 1,
    };
    let read = arbiter_core::model::configuration::read(&text, &source)
        .map_err(|e| anyhow::anyhow!("--config: {e}"))?;
    for warning in &read.warnings {
        tracing::warn!(%warning, "configuration");
    }
    Ok((read.pods_ready, read.preemption_strategies))
}

/// The API client: from `--kubeconfig`, else the in-cluster configuration
/// or the default kubeconfig.
async fn connect(args: &RunArgs) -> anyhow::Result<kube::Client> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("using the kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("finding the cluster: no in-cluster configuration and no usable kubeconfig; pass --kubeconfig")?,
    };
    kube::Client::try_from(config).context("building the Kubernetes client")
}

/// Why the operator did not start, with the flag that changes it.
fn start_error(error: StartError) -> anyhow::Error {
    match error {
        StartError::AdminPort { address, source } => anyhow::Error::new(source).context(format!(
            "binding the admin port {address}; pass --admin-address"
        )),
        StartError::Bundles(e) => e.into(),
        StartError::Webhooks(e) => anyhow::Error::new(e)
            .context("starting the webhooks (pass --no-webhooks to run without them)"),
        StartError::Shadow(e) => {
            anyhow::Error::new(e).context("starting the shadow mode (--shadow)")
        }
    }
}

/// How the webhooks are served, from the flags (`None`: not at all).
fn webhook_options(args: &RunArgs, namespace: &str) -> Option<WebhookOptions> {
    if args.no_webhooks {
        return None;
    }
    let certs = match &args.webhook_cert_dir {
        Some(dir) => CertSource::Dir(dir.clone()),
        None => CertSource::Secret {
            namespace: namespace.to_string(),
            name: args.webhook_secret.clone(),
            names: arbiter_operator::webhook::certs::service_names(
                &args.webhook_service,
                namespace,
            ),
            rotation: Rotation::default(),
        },
    };
    Some(WebhookOptions {
        certs,
        configuration: (!args.webhook_configuration.is_empty())
            .then(|| args.webhook_configuration.clone()),
    })
}

/// This replica's name in the Lease: the Pod's name, else host and process.
fn identity() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "arbiter".to_string());
            format!("{host}-{}", std::process::id())
        })
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
