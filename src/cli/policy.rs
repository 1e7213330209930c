//! `arbiter policy check [--watch] | test | eval | bench | schema |
//! configmap`: the bundle pipeline from the command line. `check --watch`
//! runs the same reload pipeline the operator uses and prints one line per
//! reload result (and with `--metrics`, rewrites a Prometheus textfile after
//! each); `configmap` prints a bundle directory as the ConfigMap the
//! operator loads (`configmap`).

pub(super) mod configmap;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use prometheus_client::registry::Registry;

use arbiter_policy::bundle::{self, Bundle, Hook, LoadOptions};
use arbiter_policy::metrics::PolicyMetrics;
use arbiter_policy::reload::{DirWatcher, ReloadOutcome, Reloadable};
use arbiter_policy::wasm::Runtime;
use arbiter_policy::{self as engine_policy, test};

#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// Validate a bundle (parse, validate, compile, run its tests); with --watch,
    /// re-validate on every change and print one line per reload result.
    Check {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        #[arg(long)]
        watch: bool,
        /// With --watch: how long changes must settle before a reload.
        #[arg(long, default_value = "50ms", value_parser = parse_duration, requires = "watch")]
        debounce: Duration,
        /// With --watch: rewrite this Prometheus textfile (for node_exporter's
        /// textfile collector) atomically after every reload result.
        #[arg(long, value_name = "FILE.prom", requires = "watch")]
        metrics: Option<PathBuf>,
    },
    /// Run the bundle's own tests and print each result.
    Test {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Evaluate the bundle's policies of one hook on a request (JSON or YAML file, `-` for stdin).
    Eval {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// admission | weight | fairShare | autoscale | flavor | placement
        #[arg(long, value_parser = parse_hook)]
        hook: Hook,
        #[arg(long, value_name = "FILE")]
        input: PathBuf,
        /// Only this policy.
        #[arg(long)]
        policy: Option<String>,
    },
    /// Measure every policy on its tests' inputs.
    Bench {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Evaluations per policy.
        #[arg(long, default_value_t = 10_000)]
        iterations: u32,
    },
    /// Write the JSON Schemas of the hook requests/responses and bundle.yaml into DIR.
    Schema {
        #[arg(value_name = "DIR", default_value = "plugin-sdk/schema")]
        dir: PathBuf,
    },
    /// Print a bundle directory as a ConfigMap manifest (YAML) labelled
    /// arbiter.dev/policy-bundle: bundle.yaml under data, its modules under
    /// binaryData; checked to load through the bundle loader first.
    Configmap {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// The ConfigMap's name (default: the bundle's metadata.name).
        #[arg(long, value_name = "NAME", value_parser = parse_object_name)]
        name: Option<String>,
        /// The ConfigMap's namespace (default: none in the manifest; kubectl's -n decides).
        #[arg(long, value_name = "NAMESPACE", value_parser = parse_namespace)]
        namespace: Option<String>,
    },
}

#[derive(Args, Debug)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

fn parse_hook(text: &str) -> Result<Hook, String> {
    Hook::parse(text).ok_or_else(|| {
        let names: Vec<String> = Hook::ALL.iter().map(|h| h.to_string()).collect();
        format!("unknown hook {text:?}; one of {}", names.join(", "))
    })
}

fn parse_object_name(text: &str) -> Result<String, String> {
    configmap::check_object_name(text)
        .map(|()| text.to_string())
        .map_err(|problem| format!("not a ConfigMap name: {problem}"))
}

fn parse_namespace(text: &str) -> Result<String, String> {
    configmap::check_namespace(text)
        .map(|()| text.to_string())
        .map_err(|problem| format!("not a namespace name: {problem}"))
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    arbiter_core::model::Millis::parse(text)
        .map(|m| Duration::from_millis(m.0.max(0) as u64))
        .map_err(|e| e.to_string())
}

pub fn run(args: &PolicyArgs) -> anyhow::Result<()> {
    let runtime = Runtime::new().context("starting the WebAssembly runtime")?;
    match &args.command {
        PolicyCommand::Check {
            dir, watch: false, ..
        } => check(dir, &runtime),
        PolicyCommand::Check {
            dir,
            watch: true,
            debounce,
            metrics,
        } => check_watch(dir, *debounce, metrics.as_deref(), &runtime),
        PolicyCommand::Test { dir } => run_tests(dir, &runtime),
        PolicyCommand::Eval {
            dir,
            hook,
            input,
            policy,
        } => eval(dir, *hook, input, policy.as_deref(), &runtime),
        PolicyCommand::Bench { dir, iterations } => bench(dir, *iterations, &runtime),
        PolicyCommand::Schema { dir } => write_schemas(dir),
        PolicyCommand::Configmap {
            dir,
            name,
            namespace,
        } => print_configmap(dir, name.as_deref(), namespace.as_deref(), &runtime),
    }
}

fn print_configmap(
    dir: &Path,
    name: Option<&str>,
    namespace: Option<&str>,
    runtime: &Runtime,
) -> anyhow::Result<()> {
    let mut command = format!("arbiter policy configmap {}", dir.display());
    if let Some(name) = name {
        command.push_str(&format!(" --name {name}"));
    }
    if let Some(namespace) = namespace {
        command.push_str(&format!(" --namespace {namespace}"));
    }
    let rendered = configmap::render(dir, name, namespace, &command, runtime)?;
    for warning in &rendered.warnings {
        eprintln!("warning: {warning}");
    }
    super::print_stdout(&rendered.yaml)
}

fn describe(b: &Bundle) -> String {
    let cel = b.policies.iter().filter(|p| p.language() == "cel").count();
    format!(
        "bundle {} version {} digest {}: {} policies ({} cel, {} wasm), {} tests passed",
        b.name,
        if b.version.is_empty() {
            "-"
        } else {
            &b.version
        },
        short(&b.digest),
        b.policies.len(),
        cel,
        b.policies.len() - cel,
        b.tests.len()
    )
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

fn check(dir: &Path, runtime: &Runtime) -> anyhow::Result<()> {
    let b = bundle::load_path(dir, runtime, &LoadOptions::default())?;
    println!("ok: {}", describe(&b));
    Ok(())
}

/// `check --watch`: the first load and every reload go through
/// `Reloadable::reload_with`, starting from an empty bundle in force.
fn check_watch(
    dir: &Path,
    debounce: Duration,
    metrics_file: Option<&Path>,
    runtime: &Runtime,
) -> anyhow::Result<()> {
    if let Some(path) = metrics_file {
        refuse_metrics_inside(dir, path)?;
    }
    let options = LoadOptions::default();
    let current = Reloadable::new(Bundle::empty("(none)"));
    let mut registry = Registry::default();
    if metrics_file.is_some() {
        let metrics = PolicyMetrics::register(&mut registry);
        current.report_to(&metrics, &dir.display().to_string());
    }
    let outcome = current.reload_with(|| bundle::load_path(dir, runtime, &options));
    if let Some(path) = metrics_file {
        super::write_metrics(path, &registry)?;
    }
    let line = match outcome {
        ReloadOutcome::Swapped { .. } => format!("loaded: {}", describe(&current.current())),
        ReloadOutcome::Rejected { error, .. } => format!("rejected: {error}"),
        unchanged @ ReloadOutcome::Unchanged { .. } => reload_line(unchanged, &current),
    };
    println!("{} {line}", stamp());
    let (tx, rx) = mpsc::channel();
    let _watcher = DirWatcher::spawn(dir, debounce, move || {
        let _ = tx.send(Instant::now());
    })
    .with_context(|| format!("watching {}", dir.display()))?;
    println!(
        "{} watching {} (debounce {} ms); Ctrl-C to stop",
        stamp(),
        dir.display(),
        debounce.as_millis()
    );
    for _changed in rx {
        let outcome = current.reload_with(|| bundle::load_path(dir, runtime, &options));
        if let Some(path) = metrics_file {
            // The bundle is what is watched; a metrics file that cannot be
            // written now is reported, and written again after the next reload.
            if let Err(e) = super::write_metrics(path, &registry) {
                eprintln!("{} error: {e:#}", stamp());
            }
        }
        let line = match outcome {
            ReloadOutcome::Rejected { kept, .. } if !dir.exists() => format!(
                "missing: {} does not exist (removed or renamed away); keeping {} version {} ({}) until it is back",
                dir.display(),
                kept.name,
                kept.version,
                short(&kept.digest)
            ),
            outcome => reload_line(outcome, &current),
        };
        println!("{} {line}", stamp());
    }
    Ok(())
}

/// A metrics file in the watched directory would trigger a reload every time it is written.
fn refuse_metrics_inside(dir: &Path, metrics_file: &Path) -> anyhow::Result<()> {
    let parent = match metrics_file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    if let (Ok(parent), Ok(dir)) = (parent.canonicalize(), dir.canonicalize()) {
        if parent == dir {
            bail!(
                "the metrics file {} is in the watched directory {}, so writing it would trigger a reload each time; write it elsewhere",
                metrics_file.display(),
                dir.display()
            );
        }
    }
    Ok(())
}

fn reload_line(outcome: ReloadOutcome, current: &Reloadable<Bundle>) -> String {
    match outcome {
        ReloadOutcome::Swapped { took, .. } => {
            format!(
                "reloaded in {} ms: {}",
                took.as_millis(),
                describe(&current.current())
            )
        }
        ReloadOutcome::Unchanged { identity } => {
            format!("unchanged: digest {}", short(&identity.digest))
        }
        ReloadOutcome::Rejected { error, kept, .. } => format!(
            "rejected, keeping {} version {} ({}): {error}",
            kept.name,
            kept.version,
            short(&kept.digest)
        ),
    }
}

fn stamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
        now.subsec_millis()
    )
}

fn load_untested(dir: &Path, runtime: &Runtime) -> anyhow::Result<Bundle> {
    let options = LoadOptions {
        tenant: None,
        run_tests: false,
    };
    Ok(bundle::load_path(dir, runtime, &options)?)
}

fn run_tests(dir: &Path, runtime: &Runtime) -> anyhow::Result<()> {
    let b = load_untested(dir, runtime)?;
    let results = test::run(&b);
    let mut failed = 0;
    for r in &results {
        match &r.failure {
            None => println!("PASS {} ({})", r.name, r.policy),
            Some(f) => {
                failed += 1;
                println!("FAIL {} ({}): {f}", r.name, r.policy);
            }
        }
    }
    println!(
        "{} passed, {failed} failed, bundle {}",
        results.len() - failed,
        b.name
    );
    if failed > 0 {
        bail!("{failed} of {} tests failed", results.len());
    }
    Ok(())
}

fn read_input(path: &Path) -> anyhow::Result<serde_json::Value> {
    use arbiter_policy::bounded::{self, Refusal};
    use std::io::Read as _;
    // A hook request is kilobytes; this only keeps a wrong path from hurting.
    let cap: u64 = 16 << 20;
    let bytes = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(cap + 1)
            .read_to_end(&mut bytes)
            .context("reading the request from stdin")?;
        bytes
    } else {
        bounded::read(path, cap).map_err(|refusal| match refusal {
            Refusal::Io(e) => anyhow::anyhow!("reading the request {}: {e}", path.display()),
            Refusal::NotRegular(kind) => anyhow::anyhow!(
                "{} is {kind}, not a regular file; give a JSON or YAML request file",
                path.display()
            ),
            Refusal::TooLarge { .. } => anyhow::anyhow!(
                "{}: the request is over {cap} bytes; a hook request is far smaller",
                path.display()
            ),
        })?
    };
    if bytes.len() as u64 > cap {
        bail!(
            "{}: the request is over {} bytes; a hook request is far smaller",
            path.display(),
            cap
        );
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))?;
    serde_yaml_ng::from_str(&text)
        .with_context(|| format!("{} is not JSON or YAML", path.display()))
}

fn eval(
    dir: &Path,
    hook: Hook,
    input: &Path,
    only: Option<&str>,
    runtime: &Runtime,
) -> anyhow::Result<()> {
    let b = load_untested(dir, runtime)?;
    let request = read_input(input)?;
    let policies: Vec<_> = b
        .policies
        .iter()
        .filter(|p| p.hook == hook && only.is_none_or(|n| n == p.name))
        .collect();
    if policies.is_empty() {
        bail!(
            "bundle {} has no {hook} policy{}",
            b.name,
            only.map(|n| format!(" named {n}")).unwrap_or_default()
        );
    }
    let mut out = serde_json::Map::new();
    let mut failed = 0;
    for p in policies {
        let value = match test::evaluate(p, &request) {
            Ok(v) => v,
            Err(e) => {
                failed += 1;
                serde_json::json!({ "error": e })
            }
        };
        out.insert(p.name.clone(), value);
    }
    println!("{}", serde_json::to_string_pretty(&out)?);
    if failed > 0 {
        bail!("{failed} policy evaluation(s) failed");
    }
    Ok(())
}

fn bench(dir: &Path, iterations: u32, runtime: &Runtime) -> anyhow::Result<()> {
    let b = load_untested(dir, runtime)?;
    println!(
        "{:<28} {:<10} {:<5} {:>8} {:>12} {:>12}",
        "policy", "hook", "lang", "inputs", "mean µs", "p99 µs"
    );
    for p in &b.policies {
        let inputs: Vec<&serde_json::Value> = b
            .tests
            .iter()
            .filter(|t| t.policy == p.name)
            .map(|t| &t.input)
            .collect();
        if inputs.is_empty() {
            println!(
                "{:<28} {:<10} {:<5} no tests to take inputs from",
                p.name,
                p.hook.to_string(),
                p.language()
            );
            continue;
        }
        let mut samples = Vec::with_capacity(iterations as usize);
        for i in 0..iterations.max(1) {
            let input = inputs[i as usize % inputs.len()];
            let start = Instant::now();
            let _ = std::hint::black_box(test::evaluate(p, input));
            samples.push(start.elapsed().as_secs_f64() * 1e6);
        }
        samples.sort_by(f64::total_cmp);
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let p99 = samples[(samples.len() * 99 / 100).min(samples.len() - 1)];
        println!(
            "{:<28} {:<10} {:<5} {:>8} {:>12.2} {:>12.2}",
            p.name,
            p.hook.to_string(),
            p.language(),
            inputs.len(),
            mean,
            p99
        );
    }
    println!("(each evaluation includes decoding the request JSON, as `policy eval` does)");
    Ok(())
}

fn write_schemas(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, schema) in engine_policy::schemas() {
        let path = dir.join(name);
        std::fs::write(&path, engine_policy::schema_text(&schema))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    println!(
        "wrote {} schemas to {}",
        engine_policy::schemas().len(),
        dir.display()
    );
    Ok(())
}
