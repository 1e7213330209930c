//! The FGD paper's workload-inflation experiment (*Beware of
//! Fragmentation*, Weng et al., USENIX ATC'23, Fig. 7/9) as a user runs it
//! with `arbiter simulate`: Alibaba's openb trace (1,213 GPU nodes, 6,212
//! GPUs; 8,152 tasks) submitted in the artifact's order — tasks sorted by
//! name, shuffled with Go's `math/rand` seeded 42…51, topped up with random
//! copies to 130 % of the GPU capacity (`examples/openb/order.go`, run with
//! `go run`) — each task tried once, nothing departing. The metric is the
//! GPU allocated, as a percentage of capacity, when the tasks that arrived
//! ask 100 % (and 130 %) of it.
//!
//! cargo run --release --example openb -- [--trace default|gpuspec33]...
//!     [--policy fgd|bestfit|none|bundle:DIR|native-bestfit|native-fgd|native-fgd-exact|native-fgd-history|native-builtin]...
//!     [--seeds 42-51] [--flavor-order none|generated] [--json FILE] [--write-scenario DIR]
//!     [--score-steps 100] [--typical-cover 0.95]
//!
//! `fgd`, `bestfit`, `none` and `bundle:DIR` build the scenario a user
//! would give `arbiter simulate` (`arbiter_sim::trace::manifests`: a
//! ResourceFlavor per GPU model, node pools declaring their cards, one
//! ClusterQueue, a Workload per task with a node selector or affinity for
//! the models it is pinned to), load it through the simulator's loader and
//! run it through its driver with the bundle in force — `fgd` is
//! `policies/placement-fgd`, `bestfit` is `policies/placement-bestfit`,
//! `none` no bundle — and read the metric off the run's report, recounting
//! every card and node from its placements. With a placement bundle in
//! force the core tries a workload's GPU models in the order of where
//! placement would put it (no flavor policy needed); `--flavor-order
//! generated` adds the flavor policy a user needed before that (with
//! `orderByPlacement: true`, listing the scenario's flavors), which decides
//! the same. `--write-scenario DIR` writes each run's scenario to
//! `DIR/<trace>-<seed>/scenario.yaml` (and that flavor policy to
//! `DIR/flavor-order/`), to run as
//! `arbiter simulate DIR/<trace>-<seed> --policies policies/placement-fgd`.
//!
//! `native-*` are the paper's scores as the artifact computes them
//! (`best_fit_score.go`, `fgd_score.go`: integer scores 0–100 — or
//! unrounded, `native-fgd-exact` — typical tasks from the whole trace)
//! handed to the core's `Capacity::place` as scorers, pod by pod, ties
//! broken in an order drawn from the seed as the artifact's node names
//! are; `native-builtin` is the core's own best fit. They are the
//! reference, not what a user runs. `native-fgd-history` is the native
//! twin of the `fgd` bundle: the typical tasks are the last 2,000 arrived
//! (the core's history), ties in the core's one fixed order.
//! `--score-steps N` rounds the native FGD scores down to steps of 100 / N
//! (the paper's: 100; the bundle's default `scoreSteps`: 40) and
//! `--typical-cover C` keeps the most frequent typical tasks that make up
//! C of them (the paper's: 0.95; the bundle's default: 1, all), so that
//! `--policy native-fgd-history --score-steps 40 --typical-cover 1` runs
//! what the bundle decides in seconds per seed where the bundle takes a
//! minute.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;

use arbiter_core::model::load::load_str;
use arbiter_policy::sources::{self, PolicyChoice};
use arbiter_sim::trace::{self, manifests, Trace};
use arbiter_sim::{policies, scenario};

#[path = "openb/native.rs"]
mod native;

/// The paper's published means at 100 % and 130 % arrived (the artifact's
/// `experiments/analysis/expected_results/analysis_allo_discrete.csv`, 10
/// seeds; columns `100` and `130`).
const PAPER: &[(&str, &str, f64, f64)] = &[
    ("default", "bestfit", 92.862, 93.076),
    ("default", "fgd", 95.227, 95.391),
    ("gpuspec33", "bestfit", 80.395, 93.093),
    ("gpuspec33", "fgd", 87.836, 94.547),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn data_dir() -> PathBuf {
    root().join("tests/data/traces/alibaba-gpu-v2023")
}

struct Args {
    traces: Vec<String>,
    policies: Vec<String>,
    seeds: Vec<u64>,
    flavor_order: bool,
    json: Option<PathBuf>,
    write: Option<PathBuf>,
    /// The native FGD scorers' score steps (the paper's: 100).
    score_steps: u32,
    /// The share of the tasks the native FGD's typical tasks make up (the paper's: 0.95).
    typical_cover: f64,
}

const POLICIES: &[&str] = &[
    "fgd",
    "bestfit",
    "none",
    "native-bestfit",
    "native-fgd",
    "native-fgd-exact",
    "native-fgd-history",
    "native-builtin",
];

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        traces: Vec::new(),
        policies: Vec::new(),
        seeds: (42..=51).collect(),
        flavor_order: false,
        json: None,
        write: None,
        score_steps: 100,
        typical_cover: 0.95,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--trace" => match value()?.as_str() {
                t @ ("default" | "gpuspec33") => args.traces.push(t.to_owned()),
                t => return Err(format!("--trace {t}: give default or gpuspec33")),
            },
            "--policy" => match value()? {
                p if POLICIES.contains(&p.as_str()) || p.starts_with("bundle:") => {
                    args.policies.push(p)
                }
                p => {
                    return Err(format!(
                        "--policy {p}: give {} or bundle:DIR",
                        POLICIES.join(", ")
                    ))
                }
            },
            "--seeds" => {
                let v = value()?;
                let (lo, hi) = v.split_once('-').unwrap_or((&v, &v));
                let parse = |s: &str| {
                    s.parse::<u64>()
                        .map_err(|_| format!("--seeds {v}: give N or N-M"))
                };
                let (lo, hi) = (parse(lo)?, parse(hi)?);
                if hi < lo {
                    return Err(format!("--seeds {v}: the range is empty"));
                }
                args.seeds = (lo..=hi).collect();
            }
            "--flavor-order" => match value()?.as_str() {
                "generated" => args.flavor_order = true,
                "none" => args.flavor_order = false,
                v => return Err(format!("--flavor-order {v}: give generated or none")),
            },
            "--json" => args.json = Some(PathBuf::from(value()?)),
            "--score-steps" => {
                let v = value()?;
                args.score_steps = match v.parse::<u32>() {
                    Ok(n @ 1..=1000) => n,
                    _ => return Err(format!("--score-steps {v}: give 1 to 1000")),
                };
            }
            "--typical-cover" => {
                let v = value()?;
                args.typical_cover = match v.parse::<f64>() {
                    Ok(c) if c > 0.0 && c <= 1.0 => c,
                    _ => return Err(format!("--typical-cover {v}: give a share above 0 up to 1")),
                };
            }
            "--write-scenario" => args.write = Some(PathBuf::from(value()?)),
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    if args.traces.is_empty() {
        args.traces = vec!["default".into(), "gpuspec33".into()];
    }
    if args.policies.is_empty() {
        args.policies = vec!["bestfit".into(), "fgd".into()];
    }
    Ok(args)
}

/// One seed's outcome: allocation at 100 % and 130 % arrived, tasks not placed.
struct SeedResult {
    seed: u64,
    at100: f64,
    at130: f64,
    unplaced: usize,
}

/// The bundles a simulated policy puts in force, or `None` for a native one.
fn bundles_of(policy: &str, flavor_order: Option<&Path>) -> Option<Vec<PathBuf>> {
    let placement = match policy {
        "fgd" => Some(root().join("policies/placement-fgd")),
        "bestfit" => Some(root().join("policies/placement-bestfit")),
        "none" => None,
        p => Some(PathBuf::from(p.strip_prefix("bundle:")?)),
    };
    let mut bundles: Vec<PathBuf> = placement.into_iter().collect();
    if let (Some(order), false) = (flavor_order, bundles.is_empty()) {
        bundles.push(order.to_path_buf());
    }
    Some(bundles)
}

/// Runs `order` of `trace` as `arbiter simulate` runs the scenario written
/// for it, with `bundles` in force (none: Kueue's behaviour).
fn simulate(
    trace: &Trace,
    order: &[usize],
    text: &str,
    bundles: &[PathBuf],
) -> Result<SeedResult, String> {
    let loaded = load_str(text, Path::new("openb.yaml")).map_err(|e| e.to_string())?;
    let scenario = scenario::build(loaded).map_err(|e| e.to_string())?;
    let choice = PolicyChoice {
        platform: Some(bundles.to_vec()),
        tenants: Vec::new(),
        none: bundles.is_empty(),
    };
    let mut engine = sources::engine(&scenario.policies, &choice).map_err(|e| e.to_string())?;
    let (report, _) = policies::run(&scenario, engine.as_mut(), true, &mut |_| {});
    if let Some(p) = &report.policies {
        if p.errors > 0 {
            let last = p.decisions.iter().rev().find_map(|d| {
                d.error
                    .as_ref()
                    .map(|e| format!("{e}: {}", d.reason.clone().unwrap_or_default()))
            });
            eprintln!(
                "openb: {} policy errors (those pods left to best fit); the last: {}",
                p.errors,
                last.unwrap_or_default()
            );
        }
    }
    let measured = manifests::measure(trace, order, &report)?;
    Ok(SeedResult {
        seed: 0,
        at100: measured.allocation_at(100).unwrap_or(f64::NAN),
        at130: measured.allocation_at(130).unwrap_or(f64::NAN),
        unplaced: order.len() - measured.admitted,
    })
}

/// Replays `order` through `Capacity::place` with a native scorer.
fn replay_native(
    trace: &Trace,
    order: &[usize],
    policy: &str,
    seed: u64,
    steps: u32,
    cover: f64,
) -> Result<SeedResult, String> {
    let replay = match policy {
        "native-bestfit" => trace::replay(trace, order, Some(&mut native::PaperBestFit), seed),
        "native-fgd" | "native-fgd-exact" => trace::replay(
            trace,
            order,
            Some(&mut native::PaperFgd {
                typical: native::typical_tasks(trace, cover),
                steps: (policy == "native-fgd").then_some(steps),
            }),
            seed,
        ),
        "native-fgd-history" => {
            let arrivals = Rc::new(RefCell::new(native::Arrivals::default()));
            let mut scorer = native::HistoryFgd::new(arrivals.clone(), trace, steps, cover);
            // The core's tie order (one for every run, salt 0), as the bundle's.
            trace::replay_observed(
                trace,
                order,
                Some(&mut scorer),
                0,
                &mut |per_pod, flavors| arrivals.borrow_mut().record(trace, per_pod, flavors),
            )
        }
        _ => trace::replay(trace, order, None, seed),
    };
    native::check_no_over_allocation(trace, &replay).map_err(|e| format!("over-allocated: {e}"))?;
    Ok(SeedResult {
        seed,
        at100: replay.allocation_at(100).unwrap_or(f64::NAN),
        at130: replay.allocation_at(130).unwrap_or(f64::NAN),
        unplaced: replay.placed.iter().filter(|p| p.is_none()).count(),
    })
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    v.iter().sum::<f64>() / v.len() as f64
}

fn run(args: &Args) -> Result<(), String> {
    let dir = data_dir();
    let nodes = dir.join("openb_node_list_gpu_node.csv");
    // The flavor policy, written where the runs (and the user) read it.
    let order_dir = match &args.write {
        Some(d) => d.join("flavor-order"),
        None => std::env::temp_dir().join(format!("openb-flavor-order-{}", std::process::id())),
    };
    let mut results = Vec::new();
    println!(
        "{:<10} {:<16} {:>7} {:>7} {:>6} {:>7} {:>7} {:>6} {:>8} {:>8}  per seed (100 % / 130 %)",
        "trace", "policy", "@100", "paper", "diff", "@130", "paper", "diff", "ms/task", "unplaced"
    );
    for name in &args.traces {
        let tasks = dir.join(format!("openb_pod_list_{name}.csv"));
        let trace = Trace::load(&nodes, &tasks).map_err(|e| e.to_string())?;
        if args.flavor_order {
            write_file(
                &order_dir.join("bundle.yaml"),
                &manifests::flavor_order_bundle(&trace),
            )?;
        }
        let script = root().join("examples/openb/order.go");
        let orders = trace::artifact_orders(&script, &tasks, &nodes, 1.3, &args.seeds)?;
        let texts: BTreeMap<u64, String> = orders
            .iter()
            .map(|(&seed, order)| (seed, manifests::scenario(&trace, order)))
            .collect();
        if let Some(out) = &args.write {
            for (seed, text) in &texts {
                write_file(&out.join(format!("{name}-{seed}/scenario.yaml")), text)?;
            }
        }
        for policy in &args.policies {
            let bundles = bundles_of(policy, args.flavor_order.then_some(order_dir.as_path()));
            let started = Instant::now();
            let mut per_seed = Vec::new();
            let mut tasks_run = 0;
            for (&seed, order) in &orders {
                let result = match &bundles {
                    Some(bundles) => simulate(&trace, order, &texts[&seed], bundles),
                    None => replay_native(
                        &trace,
                        order,
                        policy,
                        seed,
                        args.score_steps,
                        args.typical_cover,
                    ),
                }
                .map_err(|e| format!("{name} {policy} seed {seed}: {e}"))?;
                tasks_run += order.len();
                eprintln!(
                    "openb: {name} {policy} seed {seed}: {:.2} / {:.2} ({:.0} s so far)",
                    result.at100,
                    result.at130,
                    started.elapsed().as_secs_f64()
                );
                per_seed.push(SeedResult { seed, ..result });
            }
            let ms = started.elapsed().as_secs_f64() * 1e3 / tasks_run as f64;
            let (m100, m130) = (
                mean(per_seed.iter().map(|r| r.at100)),
                mean(per_seed.iter().map(|r| r.at130)),
            );
            let paper = PAPER
                .iter()
                .find(|(t, p, _, _)| t == name && policy.trim_start_matches("native-") == *p)
                .map(|&(_, _, a, b)| (a, b));
            let show = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
            let diff =
                |v: Option<f64>, m: f64| v.map_or("-".to_owned(), |v| format!("{:+.2}", m - v));
            println!(
                "{:<10} {:<16} {:>7.2} {:>7} {:>6} {:>7.2} {:>7} {:>6} {:>8.2} {:>8}  {}",
                name,
                policy,
                m100,
                show(paper.map(|p| p.0)),
                diff(paper.map(|p| p.0), m100),
                m130,
                show(paper.map(|p| p.1)),
                diff(paper.map(|p| p.1), m130),
                ms,
                per_seed.iter().map(|r| r.unplaced).sum::<usize>(),
                per_seed
                    .iter()
                    .map(|r| format!("{}:{:.2}/{:.2}", r.seed, r.at100, r.at130))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            results.push(serde_json::json!({
                "trace": name,
                "policy": policy,
                "flavorOrder": args.flavor_order,
                "mean100": m100,
                "mean130": m130,
                "paper100": paper.map(|p| p.0),
                "paper130": paper.map(|p| p.1),
                "msPerTask": ms,
                "seeds": per_seed
                    .iter()
                    .map(|r| (r.seed.to_string(), serde_json::json!({"100": r.at100, "130": r.at130, "unplaced": r.unplaced})))
                    .collect::<BTreeMap<_, _>>(),
            }));
        }
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&results).expect("numbers and strings");
        write_file(path, &(text + "\n"))?;
    }
    if args.write.is_none() && args.flavor_order {
        let _ = std::fs::remove_dir_all(&order_dir);
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("openb: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("openb: {e}");
            ExitCode::FAILURE
        }
    }
}
