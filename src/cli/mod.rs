//! The command line (docs/design.md §5): argument parsing, reading files, printing
//! results and mapping errors to exit codes (0 ok, 1 bad input, 2 usage).
//! The only place `anyhow` is used; everything it calls returns typed errors.

pub mod convert;
pub mod crds;
pub mod dashboard;
pub mod kubectl;
pub mod plugin;
pub mod policy;
pub mod run;
pub mod simulate;
pub mod what_if;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use prometheus_client::registry::Registry;

use arbiter_policy::metrics;

/// Queues and admits GPU training work under per-tenant quotas, with policy as code.
#[derive(Parser, Debug)]
#[command(name = "arbiter", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Replay a scenario (cluster manifests, node pools, jobs), or the live
    /// cluster (--from-cluster), through the real scheduler in virtual time
    /// and report the schedule.
    Simulate(simulate::SimulateArgs),
    /// Convert Kueue (v1beta1, v1beta2) and article manifests to arbiter.dev/v1alpha1 YAML
    /// on stdout; what changed or was ignored is reported on stderr.
    Convert {
        /// Manifest files, or directories of *.yaml/*.yml files (read recursively).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Print the CustomResourceDefinitions of the arbiter.dev kinds, generated from the code.
    Crds,
    /// Check, test, evaluate and measure policy bundles.
    Policy(policy::PolicyArgs),
    /// Scaffold WebAssembly policy plugins.
    Plugin(plugin::PluginArgs),
    /// Run the operator: hold, admit and evict jobs in a cluster.
    Run(run::RunArgs),
    /// Serve the read-only web dashboard (queues, usage, workloads, bundles) of a cluster locally.
    Dashboard(dashboard::DashboardArgs),
}

pub fn main() -> ExitCode {
    if kubectl::invoked_as_plugin() {
        return match kubectl::KubectlCli::try_parse() {
            Ok(cli) => exit(kubectl::run(cli)),
            Err(err) => parse_error(err),
        };
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return parse_error(err),
    };
    let result = match cli.command {
        Command::Simulate(args) if args.from_cluster => what_if::run(&args),
        Command::Simulate(args) => simulate::simulate(&args),
        Command::Convert { files } => run_convert(&files),
        Command::Crds => print_stdout(&crds::crds_yaml()),
        Command::Policy(args) => policy::run(&args),
        Command::Plugin(args) => plugin::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Dashboard(args) => dashboard::run(&args),
    };
    exit(result)
}

/// Clap's own error or help: printed, exit 2 for an error, 0 for help.
fn parse_error(err: clap::Error) -> ExitCode {
    let _ = err.print();
    if err.use_stderr() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// The exit code of a command's result (0, 1 bad input, 2 usage), its error printed.
fn exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.is::<UsageError>() => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(1)
        }
    }
}

/// A usage error found after the arguments parsed (exit 2, as clap's own):
/// an argument that names something that is not there, or is in the way.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn run_convert(files: &[PathBuf]) -> anyhow::Result<()> {
    let (yaml, warnings) = convert::convert(files)?;
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    print_stdout(&yaml)
}

/// Writes to stdout; a closed pipe (`arbiter crds | head`) is not an error.
fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(err) if err.kind() != io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("cannot write to stdout: {err}"))
        }
        _ => Ok(()),
    }
}

/// Writes the registry's metrics to `path` as node_exporter's textfile
/// collector expects: the Prometheus text format, replaced atomically (a
/// temporary file in the same directory, renamed over `path`), so a scrape
/// never reads half a file. The temporary name does not end in `.prom`, so
/// the collector never picks it up.
fn write_metrics(path: &Path, registry: &Registry) -> anyhow::Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("the metrics file {} names no file", path.display()))?;
    let mut temporary = name.to_os_string();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(temporary);
    let written = std::fs::write(&temporary, metrics::encode(registry))
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        // Nothing to clean up if it was never created.
        let _ = std::fs::remove_file(&temporary);
    }
    written.with_context(|| {
        format!(
            "cannot write the metrics file {}; check that its directory exists and is writable",
            path.display()
        )
    })
}
