//! The same tenant plugin in each SDK language, measured (issue 13, item 6;
//! results in BENCHMARKS.md, "Plugin languages"): for each
//! `examples/plugins/<language>/urgent-first.wasm` (built by
//! `scripts/build-plugins.sh`; a language not built is skipped, saying so)
//! it prints
//! - the module's size;
//! - `load`: `Runtime::load` of its bytes on a fresh runtime, as a tenant
//!   module — shape checks, Cranelift compilation and the load probe (one
//!   instance: `_initialize` for Go's reactor, `arbiter_abi_version`,
//!   `arbiter_weight_fields`);
//! - `empty`: `hooks::Weight::evaluate` on a batch of no workloads: a fresh instance
//!   (and `_initialize`), the request, the call, the response — the fixed
//!   cost of any call;
//! - `ns/workload`: `hooks::Weight::evaluate` on a 1,000-workload batch — the engine's
//!   path with every cost included: the lean request's JSON (the three
//!   fields the plugin declares), a fresh instance, the guest's decoding,
//!   scoring and encoding, the response's parsing and checks — divided by
//!   1,000;
//!
//! beside the native Rust closure computing the same formula on the same
//! views. Every language's scores are checked to equal the closure's, bit
//! for bit, before anything is timed. Times are medians of repeated runs;
//! the load average is printed before and after, since the machine may be
//! shared.
//!
//! `cargo run --release --example plugin-languages-perf [-- --runs N]`
//!
//! `--only LANGUAGE|native --batch N --calls K` instead loads one module
//! (or none, for `native`) and makes K calls on a batch of N workloads in
//! `measured_calls`, printing nothing else: for counting instructions with
//! `valgrind --tool=callgrind --toggle-collect='*measured_calls*'`
//! (BENCHMARKS.md has the command); its runtime pools two instances, as
//! valgrind cannot reserve the default pool. Measured only, never asserted.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use arbiter_policy::bundle::{self, Bundle, Limits, LoadOptions, Policy};
use arbiter_policy::hooks::{self, HookKind};
use arbiter_policy::view::{WeightInput, WorkloadView};
use arbiter_policy::wasm::{LoadLimits, Runtime, RuntimeConfig};

/// The same allocator as the `arbiter` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const LANGUAGES: [&str; 5] = ["rust", "go", "c", "assemblyscript", "zig"];
const TENANT: &str = "ml-team";
const BATCH: usize = 1_000;

/// One of the tenant's waiting jobs: one in eight labelled urgent=true and
/// one in eight urgent=false; 0 to 64 GPUs; ages up to a day, in fractions
/// of a second; other labels as real jobs carry them.
fn workload(i: usize) -> WorkloadView {
    let mut labels = BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            "llm-finetune".to_string(),
        ),
        ("team".to_string(), format!("team-{}", i % 12)),
        (
            "kueue.x-k8s.io/queue-name".to_string(),
            "ml-team-queue".to_string(),
        ),
    ]);
    match i % 8 {
        0 => labels.insert("urgent".to_string(), "true".to_string()),
        1 => labels.insert("urgent".to_string(), "false".to_string()),
        _ => None,
    };
    WorkloadView {
        name: format!("finetune-{i:05}"),
        namespace: TENANT.to_string(),
        kind: "PyTorchJob".to_string(),
        labels,
        queue_name: "ml-team-queue".to_string(),
        cluster_queue: "ai-cluster-queue".to_string(),
        gpus: [0, 1, 2, 4, 8, 16, 64][i % 7],
        age_seconds: (i * 7_919 % 86_400) as f64 + 0.25 * (i % 4) as f64,
        ..WorkloadView::default()
    }
}

fn input(workloads: usize) -> WeightInput {
    WeightInput {
        now: 86_400.0,
        workloads: (0..workloads).map(workload).collect(),
        ..WeightInput::default()
    }
}

/// The policy of examples/plugins/README.md in Rust: urgent × 2^46 +
/// (16383 − gpus) × 2^32 + whole seconds of age.
fn native(input: &WeightInput) -> Vec<f64> {
    const MAX_GPUS: u64 = (1 << 14) - 1;
    const MAX_AGE: u64 = (1 << 32) - 1;
    input
        .workloads
        .iter()
        .map(|w| {
            let urgent = u64::from(w.labels.get("urgent").is_some_and(|v| v == "true"));
            let gpus = w.gpus.clamp(0, MAX_GPUS as i64) as u64;
            let age = if w.age_seconds >= MAX_AGE as f64 {
                MAX_AGE
            } else if w.age_seconds > 0.0 {
                w.age_seconds.floor() as u64
            } else {
                0
            };
            (urgent << 46 | (MAX_GPUS - gpus) << 32 | age) as f64
        })
        .collect()
}

fn bundle_dir(language: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/plugins")
        .join(language)
}

/// The language's bundle loaded as `ml-team`'s (its tests run); `None`
/// when its module is not built.
fn load_bundle(runtime: &Runtime, language: &str) -> Result<Option<Bundle>, String> {
    let dir = bundle_dir(language);
    if !dir.join("urgent-first.wasm").is_file() {
        return Ok(None);
    }
    let options = LoadOptions {
        tenant: Some(TENANT.to_string()),
        run_tests: true,
    };
    bundle::load_path(&dir, runtime, &options)
        .map(Some)
        .map_err(|e| format!("{}: {e}", dir.display()))
}

fn urgent_first(bundle: &Bundle) -> Result<&Policy, String> {
    bundle
        .policy("urgent-first")
        .ok_or_else(|| format!("bundle {} has no policy urgent-first", bundle.name))
}

/// The median of `runs` timings of `f`, after two untimed runs.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    f();
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// The median time of `Runtime::load` of `bytes` as a tenant module, each
/// on a fresh runtime, so nothing compiled before is reused.
fn load_time(bytes: &[u8], runs: usize) -> Result<Duration, String> {
    let limits = LoadLimits::tenant(Limits::TENANT);
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let runtime = Runtime::new().map_err(|e| e.to_string())?;
        let start = Instant::now();
        let plugin = runtime
            .load("urgent-first.wasm", bytes, &limits)
            .map_err(|e| e.to_string())?;
        times.push(start.elapsed());
        drop(plugin);
    }
    times.sort();
    Ok(times[times.len() / 2])
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_string())
}

struct Args {
    runs: usize,
    only: Option<String>,
    batch: usize,
    calls: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        runs: 31,
        only: None,
        batch: BATCH,
        calls: 1,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let mut value = || given.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |text: String| {
            text.parse::<usize>()
                .map_err(|_| format!("{flag}: {text:?} is not a count"))
        };
        match flag.as_str() {
            "--runs" => args.runs = number(value()?)?.max(1),
            "--batch" => args.batch = number(value()?)?,
            "--calls" => args.calls = number(value()?)?,
            "--only" => {
                let only = value()?;
                if only != "native" && !LANGUAGES.contains(&only.as_str()) {
                    return Err(format!(
                        "--only {only}: expected native or one of {}",
                        LANGUAGES.join(", ")
                    ));
                }
                args.only = Some(only);
            }
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: plugin-languages-perf [--runs N] \
                     [--only LANGUAGE|native --batch N --calls K]"
                ))
            }
        }
    }
    Ok(args)
}

/// The calls callgrind counts: `calls` evaluations of `input`, by the
/// plugin, or by the native closure when there is none.
#[inline(never)]
fn measured_calls(policy: Option<&Policy>, input: &WeightInput, calls: usize) -> usize {
    let mut logs = Vec::new();
    let mut scored = 0;
    for _ in 0..calls {
        let scores = match policy {
            Some(policy) => {
                hooks::Weight::evaluate(policy, black_box(input), &mut logs).unwrap_or_default()
            }
            None => native(black_box(input)),
        };
        scored += scores.len();
    }
    scored
}

/// `--only`: one module (or the closure), `calls` calls, nothing timed.
fn count_only(language: &str, args: &Args) -> Result<(), String> {
    // A pool of two instances: valgrind cannot reserve the default pool's
    // address space (64 slots).
    let config = RuntimeConfig {
        max_instances: 2,
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::with_config(config).map_err(|e| e.to_string())?;
    let bundle = match language {
        "native" => None,
        _ => Some(
            load_bundle(&runtime, language)?
                .ok_or_else(|| format!("{language}: urgent-first.wasm is not built"))?,
        ),
    };
    let policy = bundle.as_ref().map(urgent_first).transpose()?;
    let input = input(args.batch);
    // One call before the counted ones, outside `measured_calls`, so
    // lazily initialised state is not counted.
    let mut logs = Vec::new();
    if let Some(policy) = policy {
        hooks::Weight::evaluate(policy, &input, &mut logs)
            .map_err(|e| format!("{language}: {e}"))?;
    }
    let scored = measured_calls(policy, &input, args.calls);
    if scored != args.batch * args.calls {
        return Err(format!(
            "{language}: {scored} scores for {} calls of {}",
            args.calls, args.batch
        ));
    }
    Ok(())
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    if let Some(language) = &args.only {
        return count_only(language, &args);
    }
    println!(
        "plugin-languages-perf: {BATCH}-workload weight batch, tenant {TENANT}, medians of {} runs; load average {}",
        args.runs,
        load_average()
    );
    let runtime = Runtime::new().map_err(|e| e.to_string())?;
    let batch = input(BATCH);
    let empty = input(0);
    let expected = native(&batch);
    let native_time = median(args.runs.max(101), || {
        black_box(native(black_box(&batch)));
    });
    let native_ns = native_time.as_nanos() as f64 / BATCH as f64;

    println!(
        "{:<15} {:>10} {:>10} {:>11} {:>13} {:>12} {:>9}",
        "language", "module", "load ms", "empty µs", "batch µs", "ns/workload", "× native"
    );
    let mut logs = Vec::new();
    for language in LANGUAGES {
        let Some(bundle) = load_bundle(&runtime, language)? else {
            println!("{language:<15} not built (scripts/build-plugins.sh)");
            continue;
        };
        let policy = urgent_first(&bundle)?;
        let module = bundle_dir(language).join("urgent-first.wasm");
        let bytes = std::fs::read(&module).map_err(|e| format!("{}: {e}", module.display()))?;
        let scores = hooks::Weight::evaluate(policy, &batch, &mut logs)
            .map_err(|e| format!("{language}: the 1,000-workload batch failed: {e}"))?;
        let same = scores.len() == expected.len()
            && scores
                .iter()
                .zip(&expected)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        if !same {
            return Err(format!(
                "{language}: its scores differ from the native closure's"
            ));
        }
        let load = load_time(&bytes, args.runs.min(11))?;
        let mut call = |input: &WeightInput| {
            logs.clear();
            black_box(hooks::Weight::evaluate(policy, black_box(input), &mut logs).ok());
        };
        let empty_time = median(args.runs * 4, || call(&empty));
        let batch_time = median(args.runs, || call(&batch));
        let ns = batch_time.as_nanos() as f64 / BATCH as f64;
        println!(
            "{language:<15} {:>7} KB {:>10.1} {:>11.1} {:>13.1} {:>12.0} {:>9.0}",
            bytes.len().div_ceil(1000),
            load.as_secs_f64() * 1e3,
            empty_time.as_secs_f64() * 1e6,
            batch_time.as_secs_f64() * 1e6,
            ns,
            ns / native_ns,
        );
    }
    println!(
        "{:<15} {:>10} {:>10} {:>11} {:>13.1} {:>12.1} {:>9}",
        "native closure",
        "-",
        "-",
        "-",
        native_time.as_secs_f64() * 1e6,
        native_ns,
        "1"
    );
    println!("load average after: {}", load_average());
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("plugin-languages-perf: {message}");
            ExitCode::FAILURE
        }
    }
}
