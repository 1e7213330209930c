//! `arbiter run`: the operator (DESIGN §7). Connects with the kubeconfig
//! given, else the in-cluster configuration or the default kubeconfig,
//! loads the platform bundle directories named by `--policies` and watches
//! them, watches the ConfigMaps labelled `arbiter.dev/policy-bundle`
//! (platform bundles in `--namespace`, tenant bundles elsewhere; none at
//! all: Kueue's behaviour), and drives the scheduler until SIGINT or
//! SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use arbiter_core::jobs::Integrations;
use arbiter_core::scheduler::hooks::Hooks;
use arbiter_operator::admin::{AdminState, OperatorMetrics};
use arbiter_operator::bundles::{BundleOptions, Bundles};
use arbiter_operator::{Driver, DriverOptions};
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
    /// The operator's namespace: ConfigMaps labelled arbiter.dev/policy-bundle there are platform bundles, elsewhere their namespace's tenant bundle (default: $POD_NAMESPACE, else arbiter-system).
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Gather changes this long after a wake-up before scheduling, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 20)]
    pub batch_window_ms: u64,
    /// Address of the admin port (/metrics, /healthz, /readyz).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    pub admin_address: std::net::SocketAddr,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ARBITER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    let mut registry = Registry::default();
    let policy_metrics = PolicyMetrics::register(&mut registry);
    let operator_metrics = OperatorMetrics::register(&mut registry);
    let namespace = args
        .namespace
        .clone()
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|ns| !ns.is_empty())
        })
        .unwrap_or_else(|| "arbiter-system".to_string());
    let bundles = Bundles::load(
        BundleOptions {
            platform_namespace: namespace.clone(),
            dirs: args.policies.clone(),
        },
        Some(&policy_metrics),
    )?;
    let hooks: Box<dyn Hooks + Send> = Box::new(bundles.engine());
    let admin = AdminState::new(registry);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
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
        let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
        let options = DriverOptions {
            batch_window: Duration::from_millis(args.batch_window_ms),
            ..DriverOptions::default()
        };
        let (bound, _server) = arbiter_operator::admin::serve(args.admin_address, admin.clone())
            .await
            .with_context(|| format!("binding the admin port {}; pass --admin-address", args.admin_address))?;
        tracing::info!(address = %bound, "admin port serving /metrics, /healthz, /readyz");
        let driver = Driver::start(client.clone(), Integrations::builtin(), hooks, options)
            .await
            .with_admin(admin, operator_metrics);
        tracing::info!(%namespace, "watching policy bundle ConfigMaps (platform bundles in this namespace, tenant bundles elsewhere)");
        let _bundles = bundles.watch(client, driver.wake()).await?;
        driver.run(shutdown()).await;
        tracing::info!("stopped");
        Ok(())
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
