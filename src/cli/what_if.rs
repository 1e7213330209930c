//! `arbiter simulate --from-cluster`: what-if on the live cluster. Reads
//! the cluster (`snapshot`: get and list only, what `deploy/what-if.yaml`
//! grants), makes it the simulator's scenario as the operator would see
//! it (`objects`, then `arbiter_sim::live`: running workloads start the
//! replay admitted on their flavors, holding their quota; waiting ones
//! queued in their order; runtimes from the annotation, the LocalQueue's
//! history, or `--default-runtime`), and replays it forward under the
//! bundles in force (`bundles`). With a candidate (`--policies`,
//! `--tenant-policies`, `--no-policies`) it replays it under that too and
//! reports the difference (`arbiter_sim::diff`); without, the one replay
//! is reported as `arbiter simulate` reports a scenario.

mod bundles;
mod objects;
mod snapshot;

use anyhow::Context as _;
use arbiter_core::model::Millis;
use arbiter_policy::wasm::Runtime;
use arbiter_sim::diff::{self, WhatIf};
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::simulate::{self, SimulateArgs};
use super::UsageError;
use bundles::Candidate;

/// The runtime assumed without an annotation or history (`--default-runtime`).
const DEFAULT_RUNTIME: &str = "1h";
/// Where the operator runs unless `--operator-namespace` says (`deploy/`'s).
const OPERATOR_NAMESPACE: &str = "arbiter-system";

/// Connects as the kubeconfig (and context) given says, else as `kubectl`
/// would; returns the client and the API server's URL.
async fn connect(args: &SimulateArgs) -> anyhow::Result<(kube::Client, String)> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match (&args.kubeconfig, &args.context) {
        (Some(path), _) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .with_context(|| format!("using the kubeconfig {}", path.display()))?
        }
        (None, Some(context)) => kube::Config::from_kubeconfig(&options)
            .await
            .with_context(|| format!("using the context {context} of the default kubeconfig"))?,
        (None, None) => kube::Config::infer().await.context(
            "finding the cluster: no in-cluster configuration and no usable kubeconfig; pass --kubeconfig",
        )?,
    };
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    Ok((client, server))
}

pub fn run(args: &SimulateArgs) -> anyhow::Result<()> {
    let given = args.default_runtime.as_deref().unwrap_or(DEFAULT_RUNTIME);
    let default_runtime = Millis::parse(given)
        .ok()
        .filter(|d| *d > Millis::ZERO)
        .ok_or_else(|| {
            UsageError(format!(
                "--default-runtime {given:?} is not a positive duration (Go syntax: 30m, 1h, 2h30m)"
            ))
        })?;
    let operator_namespace = args
        .operator_namespace
        .as_deref()
        .unwrap_or(OPERATOR_NAMESPACE);
    let candidate = Candidate {
        platform: (!args.policies.is_empty()).then(|| args.policies.clone()),
        tenants: args.tenant_policies.clone(),
        none: args.no_policies,
    };
    let comparing = candidate.platform.is_some() || !candidate.tenants.is_empty() || candidate.none;
    if comparing {
        for (flag, given) in [
            ("--decisions", args.decisions.is_some()),
            ("--metrics", args.metrics.is_some()),
            ("--plot", args.plot.is_some()),
        ] {
            if given {
                return Err(UsageError(format!(
                    "{flag} describes one run; with --from-cluster and a candidate bundle there are two (leave out the candidate to replay the bundles in force alone)"
                ))
                .into());
            }
        }
    }
    let runtime =
        Runtime::new().map_err(|e| anyhow::anyhow!("starting the WebAssembly runtime: {e}"))?;
    // The candidate first: one that does not load is told before the cluster is read.
    let loaded = bundles::load_candidate(&candidate, &runtime)?;
    let snapshot = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(async {
            let (client, server) = connect(args).await?;
            snapshot::read(&client, &server).await
        })?;
    let (in_force, bundle_warnings) =
        bundles::from_cluster(&snapshot.bundles, operator_namespace, &runtime);
    let mut live = objects::live(&snapshot);
    live.warnings.extend(bundle_warnings);
    let (scenario, started) = arbiter_sim::live::scenario(live, default_runtime);
    if !comparing {
        return simulate::replay(args, &scenario, in_force.engine(), Some(started));
    }
    let mut engine = in_force.engine();
    let (mut before, _) = simulate::run_once(args, &scenario, engine.as_mut(), "in force");
    let mut engine = loaded.over(&in_force).engine();
    let (mut after, _) = simulate::run_once(args, &scenario, engine.as_mut(), "candidate");
    before.snapshot = Some(started.clone());
    after.snapshot = Some(started.clone());
    let mut warnings = simulate::warn(&before);
    for w in simulate::warn(&after) {
        if !warnings.contains(&w) {
            warnings.push(format!("under the candidate: {w}"));
        }
    }
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let what_if = WhatIf {
        snapshot: Some(started),
        difference: diff::compare(&before, &after),
        in_force: before,
        candidate: after,
    };
    if let Some(path) = &args.report {
        simulate::write_json(path, &what_if)?;
    }
    simulate::print(args.format, &what_if, || {
        diff::render(&what_if.difference, what_if.snapshot.as_ref())
    })?;
    if args.strict && !warnings.is_empty() {
        anyhow::bail!("{} warning(s) and --strict is set", warnings.len());
    }
    Ok(())
}
