//! `arbiter simulate`: load a scenario, run it through the scheduler in
//! virtual time, print the schedule and write the report and plot. The
//! runs and outputs here serve `--from-cluster` too (its scenario is the
//! live cluster, read by `what_if`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};
use prometheus_client::registry::Registry;

use arbiter_policy::engine::{
    Decision, Engine, MAX_DECISIONS_PER_POLICY, MAX_LOG_LINES_PER_POLICY,
    MAX_TENANT_DECISIONS_PER_POLICY, MAX_TENANT_LOG_LINES_PER_POLICY,
};
use arbiter_policy::metrics::PolicyMetrics;
use arbiter_policy::sources::{self, PolicyChoice};
use arbiter_sim::policies;
use arbiter_sim::report::{Report, SnapshotReport};
use arbiter_sim::{driver, plot, scenario, table};

fn write_decisions(path: &std::path::Path, decisions: &[Decision]) -> anyhow::Result<()> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("creating the decision log {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for d in decisions {
        serde_json::to_writer(&mut out, d).context("writing the decision log")?;
        writeln!(out).with_context(|| format!("writing the decision log {}", path.display()))?;
    }
    out.flush()
        .with_context(|| format!("writing the decision log {}", path.display()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// Scenario files or directories of YAML manifests (multi-document).
    #[arg(
        required_unless_present = "from_cluster",
        conflicts_with = "from_cluster",
        value_name = "FILE_OR_DIR"
    )]
    pub paths: Vec<PathBuf>,
    /// Replay the live cluster forward from now (what-if): its queues,
    /// Nodes, running and pending Workloads, under the bundles in force;
    /// with --policies, --tenant-policies or --no-policies also under that
    /// candidate, reporting the difference per workload and per queue.
    #[arg(long)]
    pub from_cluster: bool,
    /// With --from-cluster: the kubeconfig file (default: in-cluster
    /// configuration, else $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// With --from-cluster: the kubeconfig context to use.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// With --from-cluster: the operator's namespace, whose ConfigMaps labelled
    /// arbiter.dev/policy-bundle are the platform bundles in force [default: arbiter-system].
    #[arg(long, value_name = "NS")]
    pub operator_namespace: Option<String>,
    /// With --from-cluster: the runtime assumed for a workload with neither a
    /// sim.arbiter.dev/runtime annotation nor finished Workloads in its
    /// LocalQueue to estimate from (Go duration) [default: 1h].
    #[arg(long, value_name = "DURATION")]
    pub default_runtime: Option<String>,
    /// Write the JSON report here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write an SVG plot here: pending workloads and utilisation per flavor over time, wait times per ClusterQueue.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Exit 1 on any warning (unknown fields, workloads that can never be
    /// admitted), and refuse a scenario with an invalid queue object
    /// instead of simulating without it.
    #[arg(long)]
    pub strict: bool,
    /// Write 0 for the measured fields (`scheduler.cpuSeconds`, policy latencies), so reports are byte-identical across runs.
    #[arg(long)]
    pub reproducible: bool,
    /// Policy bundle (directory, or a ConfigMap YAML file) in force; repeat for several.
    /// Replaces the bundles the scenario's Simulation names in `spec.policies`
    /// (with --from-cluster: the candidate's platform bundles, in place of those in force).
    #[arg(long, value_name = "DIR")]
    pub policies: Vec<PathBuf>,
    /// A tenant's bundle: NAMESPACE=DIR (only weight and admission policies, for that namespace's workloads;
    /// with --from-cluster: the candidate's, in place of that tenant's bundle in force).
    #[arg(long, value_name = "NS=DIR", value_parser = parse_tenant)]
    pub tenant_policies: Vec<(String, PathBuf)>,
    /// Run without any policy bundle (Kueue's behaviour), ignoring `spec.policies`
    /// (with --from-cluster: the candidate is no bundle at all).
    #[arg(long, conflicts_with = "policies")]
    pub no_policies: bool,
    /// Write every policy decision here, one JSON object per line.
    #[arg(long, value_name = "FILE.jsonl")]
    pub decisions: Option<PathBuf>,
    /// Write the policy engine's Prometheus metrics here at the end of the run
    /// (text format, for node_exporter's textfile collector). Latencies are
    /// measured, also with --reproducible.
    #[arg(long, value_name = "FILE.prom")]
    pub metrics: Option<PathBuf>,
}

fn parse_tenant(text: &str) -> Result<(String, PathBuf), String> {
    match text.split_once('=') {
        Some((ns, dir)) if !ns.is_empty() && !dir.is_empty() => {
            Ok((ns.to_string(), PathBuf::from(dir)))
        }
        _ => Err(format!("{text:?} is not NAMESPACE=DIR")),
    }
}

pub fn simulate(args: &SimulateArgs) -> anyhow::Result<()> {
    for (flag, given) in [
        ("--kubeconfig", args.kubeconfig.is_some()),
        ("--context", args.context.is_some()),
        ("--operator-namespace", args.operator_namespace.is_some()),
        ("--default-runtime", args.default_runtime.is_some()),
    ] {
        if given {
            return Err(super::UsageError(format!(
                "{flag} reads the live cluster: give it with --from-cluster (and no scenario files)"
            ))
            .into());
        }
    }
    let loaded = arbiter_sim::files::load_paths(&args.paths)?;
    // A queue object with a problem is left out (and warned about) as the
    // operator leaves it out; --strict refuses the scenario instead.
    let built = if args.strict {
        scenario::build(loaded)
    } else {
        scenario::build_lenient(loaded)
    };
    let scenario = match built {
        Ok(scenario) => scenario,
        Err(e) => {
            // What was ignored or read differently may be why it failed.
            for w in &e.warnings {
                eprintln!("warning: {w}");
            }
            return Err(e.into());
        }
    };
    let choice = PolicyChoice {
        platform: (!args.policies.is_empty()).then(|| args.policies.clone()),
        tenants: args.tenant_policies.clone(),
        none: args.no_policies,
    };
    let engine = sources::engine(&scenario.policies, &choice)?;
    replay(args, &scenario, engine, None)
}

/// Runs `scenario` once under `engine` (Kueue's behaviour without one),
/// with a progress bar on a terminal for long runs (`what`: which run),
/// and prints what the plugins logged. Returns the report and every
/// decision.
pub(super) fn run_once(
    args: &SimulateArgs,
    scenario: &scenario::Scenario,
    engine: Option<&mut Engine>,
    what: &str,
) -> (Report, Vec<Decision>) {
    let total = scenario.jobs.len();
    let bar = (args.format == Format::Table && std::io::stderr().is_terminal() && total >= 1000)
        .then(|| {
            let bar = indicatif::ProgressBar::new(total as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(&format!(
                    "{{spinner}} {what} [{{bar:40}}] {{pos}}/{{len}} arrived, {{msg}}"
                ))
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
    let mut last_update = 0usize;
    let mut on_progress = |p: driver::Progress| {
        if let Some(bar) = &bar {
            if p.arrived >= last_update + 100 || p.arrived == p.total {
                last_update = p.arrived;
                bar.set_position(p.arrived as u64);
                bar.set_message(format!("t={}", p.now));
            }
        }
    };
    let mut engine = engine;
    let (report, decisions) = policies::run(
        scenario,
        engine.as_deref_mut(),
        args.reproducible,
        &mut on_progress,
    );
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(engine) = engine {
        for l in engine.take_plugin_logs() {
            let again = match l.repeats {
                0 => String::new(),
                n => format!(" (and {n} more times)"),
            };
            eprintln!(
                "plugin log ({:?}) {}/{}: {}{again}",
                l.level, l.source, l.policy, l.line
            );
        }
    }
    if let Some(p) = &report.policies {
        for s in p.by_policy.iter().filter(|s| s.log_lines_dropped > 0) {
            eprintln!(
                "plugin log: {}/{}: {} more lines not kept (a policy keeps at most {} distinct lines, {} in a tenant bundle)",
                s.source,
                s.policy,
                s.log_lines_dropped,
                MAX_LOG_LINES_PER_POLICY,
                MAX_TENANT_LOG_LINES_PER_POLICY
            );
        }
        if p.decisions_dropped > 0 && args.decisions.is_some() {
            eprintln!(
                "note: {} decisions not kept in the decision log (a policy keeps at most {} entries, {} in a tenant bundle; identical repeats are counted); byPolicy[].decisionsDropped in the report says whose",
                p.decisions_dropped, MAX_DECISIONS_PER_POLICY, MAX_TENANT_DECISIONS_PER_POLICY
            );
        }
    }
    (report, decisions)
}

/// The report's warnings and a line for each workload that can never be
/// admitted, printed on stderr.
pub(super) fn warn(report: &Report) -> Vec<String> {
    let mut warnings = report.warnings.clone();
    for w in &report.workloads {
        if w.never_admissible {
            warnings.push(format!(
                "{} {}/{} can never be admitted: {}",
                w.kind, w.namespace, w.name, w.reason
            ));
        }
    }
    warnings
}

/// Writes `value` as pretty JSON to `path`.
pub(super) fn write_json(
    path: &std::path::Path,
    value: &impl serde::Serialize,
) -> anyhow::Result<()> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("creating the report file {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    serde_json::to_writer_pretty(&mut out, value).context("writing the report")?;
    writeln!(out)
        .and_then(|_| out.flush())
        .with_context(|| format!("writing the report to {}", path.display()))
}

/// Prints `text` (the table) or `value` as JSON on stdout; a closed pipe is
/// not an error.
pub(super) fn print(
    format: Format,
    value: &impl serde::Serialize,
    text: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let printed = match format {
        Format::Json => serde_json::to_writer_pretty(&mut out, value)
            .map_err(std::io::Error::from)
            .and_then(|_| writeln!(out)),
        Format::Table => out.write_all(text().as_bytes()),
    };
    match printed.and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

/// Runs `scenario` under `engine` and writes what the arguments ask for:
/// the decision log, metrics, report, plot and the table or JSON on
/// stdout. `snapshot` says what a run from a live cluster started from.
pub(super) fn replay(
    args: &SimulateArgs,
    scenario: &scenario::Scenario,
    mut engine: Option<Engine>,
    snapshot: Option<SnapshotReport>,
) -> anyhow::Result<()> {
    for (flag, given) in [
        ("--decisions", args.decisions.is_some()),
        ("--metrics", args.metrics.is_some()),
    ] {
        if engine.is_none() && given {
            bail!("{flag} needs policies: no bundle is in force (give --policies or the Simulation's spec.policies)");
        }
    }
    let mut registry = Registry::default();
    if args.metrics.is_some() {
        let metrics = PolicyMetrics::register(&mut registry);
        engine = engine.map(|e| e.with_metrics(&metrics));
    }
    let (mut report, decisions) = run_once(args, scenario, engine.as_mut(), "simulating");
    report.snapshot = snapshot;
    if let Some(path) = &args.decisions {
        write_decisions(path, &decisions)?;
    }
    if let Some(path) = &args.metrics {
        super::write_metrics(path, &registry)?;
    }
    let warnings = warn(&report);
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    if let Some(path) = &args.plot {
        let svg = plot::render_svg(&report)?;
        std::fs::write(path, svg)
            .with_context(|| format!("writing the plot to {}", path.display()))?;
    }
    print(args.format, &report, || table::render(&report))?;
    if args.strict && !warnings.is_empty() {
        bail!("{} warning(s) and --strict is set", warnings.len());
    }
    Ok(())
}
