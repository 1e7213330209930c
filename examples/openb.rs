//! The FGD paper's workload-inflation experiment (*Beware of
//! Fragmentation*, Weng et al., USENIX ATC'23, Fig. 7/9), rebuilt on
//! Arbiter's per-card placement: Alibaba's openb trace (1,213 GPU nodes,
//! 6,212 GPUs; 8,152 tasks) submitted in the artifact's order — tasks
//! sorted by name, shuffled with Go's `math/rand` seeded 42…51, topped up
//! with random copies to 130 % of the GPU capacity (`examples/openb/
//! order.go`, run with `go run`) — each task tried once, nothing departing.
//! The metric is the GPU allocated, as a percentage of capacity, when the
//! tasks that arrived ask 100 % of it.
//!
//! cargo run --release --example openb -- [--trace default|gpuspec33]...
//!     [--policy bestfit|fgd|builtin]... [--seeds 42-51] [--json FILE]
//!
//! `bestfit` and `fgd` are the paper's scores as the artifact computes them
//! (`best_fit_score.go`, `fgd_score.go`: integer scores 0–100, typical
//! tasks from the whole trace), handed to the core as a placement scorer;
//! `builtin` is Arbiter's own best fit (no policy).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;

use arbiter_core::model::cluster::ResourceId;
use arbiter_core::model::Amount;
use arbiter_core::scheduler::capacity::{Candidate, NodeScore, Scorer};
use arbiter_core::scheduler::history::PodShapes;
use arbiter_core::scheduler::workload::amount_of;
use arbiter_policy::bundle::{self, LoadOptions};
use arbiter_policy::compiled::{Bundle, Policy};
use arbiter_policy::eval::Logs;
use arbiter_policy::hooks::{self, HookKind};
use arbiter_policy::view::{build, PlacementInput, PodView, TypicalPodView};
use arbiter_policy::wasm::Runtime;
use arbiter_sim::trace::{self, Trace, CPU, GPU_MILLI};

/// The paper's published means at 100 % arrived (the artifact's
/// `experiments/analysis/expected_results/analysis_allo_discrete.csv`, 10 seeds).
const PAPER: &[(&str, &str, f64)] = &[
    ("default", "bestfit", 92.862),
    ("default", "fgd", 95.227),
    ("gpuspec33", "bestfit", 80.395),
    ("gpuspec33", "fgd", 87.836),
];

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/traces/alibaba-gpu-v2023")
}

struct Args {
    traces: Vec<String>,
    policies: Vec<String>,
    seeds: Vec<u64>,
    json: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        traces: Vec::new(),
        policies: Vec::new(),
        seeds: (42..=51).collect(),
        json: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--trace" => match value()?.as_str() {
                t @ ("default" | "gpuspec33") => args.traces.push(t.to_owned()),
                t => return Err(format!("--trace {t}: give default or gpuspec33")),
            },
            "--policy" => match value()?.as_str() {
                p @ ("bestfit" | "fgd" | "fgd-exact" | "builtin") => {
                    args.policies.push(p.to_owned())
                }
                p if p.starts_with("bundle:") => args.policies.push(p.to_owned()),
                p => {
                    return Err(format!(
                        "--policy {p}: give bestfit, fgd, fgd-exact, builtin or bundle:DIR"
                    ))
                }
            },
            "--seeds" => {
                let v = value()?;
                let (lo, hi) = v.split_once('-').unwrap_or((&v, &v));
                let lo: u64 = lo
                    .parse()
                    .map_err(|_| format!("--seeds {v}: give N or N-M"))?;
                let hi: u64 = hi
                    .parse()
                    .map_err(|_| format!("--seeds {v}: give N or N-M"))?;
                if hi < lo {
                    return Err(format!("--seeds {v}: the range is empty"));
                }
                args.seeds = (lo..=hi).collect();
            }
            "--json" => args.json = Some(PathBuf::from(value()?)),
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

/// The artifact's BestFit (`best_fit_score.go`): the CPU and GPU left on
/// the node after the pod, each normalised by the largest node (128 CPUs,
/// 8 GPUs) and weighted ½, turned into an integer 0–100, higher better.
struct PaperBestFit;

impl Scorer for PaperBestFit {
    fn score(
        &mut self,
        per_pod: &[(ResourceId, Amount)],
        candidates: &[Candidate<'_>],
    ) -> Option<Vec<NodeScore>> {
        let ask = |r: ResourceId| amount_of(per_pod, r).milli();
        let (cpu, gpu) = (ask(CPU), ask(GPU_MILLI) / 1000);
        Some(
            candidates
                .iter()
                .map(|c| {
                    let cpu_left = (c.free[CPU.index()].milli() - cpu) as f64;
                    let gpu_left = (c.free[GPU_MILLI.index()].milli() / 1000 - gpu) as f64;
                    let left = cpu_left / 128_000.0 * 0.5 + gpu_left / 8_000.0 * 0.5;
                    NodeScore {
                        score: ((1.0 - left) * 100.0).trunc(),
                        card: None,
                    }
                })
                .collect(),
        )
    }
}

/// A typical task: CPU milli, GPU milli per GPU, GPUs, allowed models
/// (flavor indices; empty = any), share (0–1).
#[derive(Clone, Debug)]
struct Typical {
    cpu: i64,
    milli: i64,
    gpus: u32,
    models: Vec<usize>,
    share: f64,
}

/// The artifact's typical tasks (`GetTypicalPods`): every task of the
/// trace counted by (CPU, GPU milli, GPUs, GPU models), most frequent
/// first, until they cover 95 % of the tasks; shares renormalised.
fn typical_tasks(trace: &Trace) -> Vec<Typical> {
    let mut counts: BTreeMap<(i64, i64, u32, String), u64> = BTreeMap::new();
    for t in &trace.tasks {
        *counts
            .entry((t.cpu_milli, t.gpu_milli, t.num_gpu, t.gpu_spec.join("|")))
            .or_default() += 1;
    }
    let mut list: Vec<_> = counts.into_iter().collect();
    // Count descending, then (as `sort.Reverse` of `Less`) the larger spec first.
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    let total = trace.tasks.len() as f64;
    let mut covered = 0u64;
    let mut out = Vec::new();
    for ((cpu, milli, gpus, spec), count) in list {
        if covered as f64 >= 0.95 * total {
            break;
        }
        covered += count;
        out.push(Typical {
            cpu,
            milli,
            gpus,
            models: spec
                .split('|')
                .filter(|m| !m.is_empty())
                .filter_map(|m| trace.model_index(m))
                .collect(),
            share: count as f64,
        });
    }
    for t in &mut out {
        t.share /= covered as f64;
    }
    out
}

/// The artifact's FGD (`fgd_score.go`, `NodeGpuShareFragAmountScore`):
/// the expected GPU no typical task could use on the node, before and
/// after the pod; score = ⌊σ((before − after)/1000) × 100⌋. A share is
/// tried on every card that holds it, and the best card is chosen.
struct PaperFgd {
    typical: Vec<Typical>,
    /// Scores as integers 0–100, as the artifact (`false`: unrounded).
    integer: bool,
}

impl PaperFgd {
    /// Fragmented GPU milli of a node with `cpu_left` and `cards` free.
    fn frag(&self, model: usize, cpu_left: i64, cards: &[i64]) -> f64 {
        let left: i64 = cards.iter().sum();
        let mut frag = 0.0;
        for t in &self.typical {
            let amount = if t.milli == 0 {
                // CPU tasks: every idle GPU counts (the artifact's XL/XR).
                left
            } else if !t.models.is_empty() && !t.models.contains(&model) {
                left
            } else {
                let fitting = cards.iter().filter(|&&c| c >= t.milli).count() as u32;
                if fitting >= t.gpus && cpu_left >= t.cpu {
                    cards.iter().filter(|&&c| c < t.milli).sum()
                } else {
                    left
                }
            };
            frag += t.share * amount as f64;
        }
        frag
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

impl Scorer for PaperFgd {
    fn score(
        &mut self,
        per_pod: &[(ResourceId, Amount)],
        candidates: &[Candidate<'_>],
    ) -> Option<Vec<NodeScore>> {
        let ask = |r: ResourceId| amount_of(per_pod, r).milli();
        let cpu = ask(CPU);
        let gpu = ask(GPU_MILLI) / 1000;
        // Identical nodes score the same: remember per (model, CPU, cards).
        let mut seen: HashMap<(usize, i64, Vec<i64>), NodeScore> = HashMap::new();
        let scores = candidates
            .iter()
            .map(|c| {
                let model = c.flavor.index();
                let cpu_left = c.free[CPU.index()].milli();
                let cards: Vec<i64> = c.cards.iter().map(|a| a.milli() / 1000).collect();
                *seen
                    .entry((model, cpu_left, cards.clone()))
                    .or_insert_with(|| {
                        let before = self.frag(model, cpu_left, &cards);
                        let integer = self.integer;
                        let score = |after: f64| {
                            let s = sigmoid((before - after) / 1000.0) * 100.0;
                            if integer {
                                s.trunc()
                            } else {
                                s
                            }
                        };
                        if gpu > 0 && gpu < 1000 {
                            let mut best: Option<NodeScore> = None;
                            for (i, &free) in cards.iter().enumerate() {
                                if free < gpu {
                                    continue;
                                }
                                let mut after = cards.clone();
                                after[i] -= gpu;
                                let s = score(self.frag(model, cpu_left - cpu, &after));
                                if best.is_none_or(|b| s > b.score) {
                                    best = Some(NodeScore {
                                        score: s,
                                        card: Some(i as u16),
                                    });
                                }
                            }
                            best.unwrap_or(NodeScore {
                                score: 0.0,
                                card: None,
                            })
                        } else {
                            // Whole GPUs: the lowest-numbered free cards.
                            let mut after = cards.clone();
                            let mut need = gpu / 1000;
                            for c in after.iter_mut() {
                                if need > 0 && *c == 1000 {
                                    *c = 0;
                                    need -= 1;
                                }
                            }
                            NodeScore {
                                score: score(self.frag(model, cpu_left - cpu, &after)),
                                card: None,
                            }
                        }
                    })
            })
            .collect();
        Some(scores)
    }
}

/// A placement policy of a bundle, evaluated per pod on the path the
/// engine takes (`arbiter_policy::hooks::Placement::evaluate`, the response checked),
/// with the typical pods the scheduler's history would give: the shapes of
/// the last pods that arrived.
struct BundlePolicy<'b> {
    policy: &'b Policy,
    models: Vec<String>,
    shapes: Rc<RefCell<PodShapes>>,
    logs: Logs,
    calls: u64,
    failures: u64,
    last_error: Option<String>,
}

fn quantities(per_pod: &[(ResourceId, Amount)]) -> BTreeMap<String, f64> {
    per_pod
        .iter()
        .map(|&(r, a)| (trace::RESOURCES[r.index()].to_owned(), a.as_f64()))
        .collect()
}

impl Scorer for BundlePolicy<'_> {
    fn score(
        &mut self,
        per_pod: &[(ResourceId, Amount)],
        candidates: &[Candidate<'_>],
    ) -> Option<Vec<NodeScore>> {
        let name = |r: ResourceId| trace::RESOURCES[r.index()].to_owned();
        let nodes = candidates
            .iter()
            .map(|c| build::node_named(c, self.models[c.flavor.index()].clone(), &name))
            .collect();
        let input = PlacementInput {
            pod: PodView {
                requests: quantities(per_pod),
            },
            nodes,
            typical: self
                .shapes
                .borrow()
                .typical()
                .iter()
                .map(|t| TypicalPodView {
                    requests: quantities(&t.per_pod),
                    flavors: t
                        .flavors
                        .iter()
                        .map(|f| self.models[f.index()].clone())
                        .collect(),
                    share: t.share,
                })
                .collect(),
            ..PlacementInput::default()
        };
        self.calls += 1;
        match hooks::Placement::evaluate(self.policy, &input, &mut self.logs) {
            Ok(out) => Some(
                out.scores
                    .iter()
                    .enumerate()
                    .map(|(i, &score)| NodeScore {
                        score,
                        card: out.cards.as_ref().and_then(|c| c[i]).map(|c| c as u16),
                    })
                    .collect(),
            ),
            Err(e) => {
                // As the engine: a failing policy leaves the pod to best fit.
                self.failures += 1;
                self.last_error = Some(e.to_string());
                None
            }
        }
    }
}

/// Cards and node totals the placements hold, recounted from the
/// placements alone: nothing over any card or node.
fn check_no_over_allocation(trace: &Trace, replay: &trace::Replay) -> Result<(), String> {
    let capacity = trace.capacity();
    let mut per_card: BTreeMap<(u16, u32, u16), i64> = BTreeMap::new();
    for p in replay.placed.iter().flatten().flatten() {
        for u in &p.cards {
            *per_card.entry((p.flavor.0, p.node, u.card)).or_default() += u.amount.milli();
        }
    }
    for ((flavor, node, card), used) in per_card {
        let (pool, _) = capacity
            .node(arbiter_core::model::cluster::FlavorId(flavor), node)
            .ok_or("a placement on a node that does not exist")?;
        let per_card = pool.devices[0].per_card.milli();
        if used > per_card {
            return Err(format!(
                "flavor {flavor} node {node} card {card}: {used} held of {per_card}"
            ));
        }
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
    let dir = data_dir();
    let nodes = dir.join("openb_node_list_gpu_node.csv");
    // Each `bundle:DIR` loaded once (its tests run), with its placement policy.
    let runtime = match Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("openb: the WebAssembly runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let bundles: BTreeMap<String, Result<(Bundle, String), String>> = args
        .policies
        .iter()
        .filter_map(|p| Some((p.clone(), p.strip_prefix("bundle:")?)))
        .map(|(p, path)| {
            let loaded = bundle::load_path(Path::new(path), &runtime, &LoadOptions::default())
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    let name = b
                        .policies
                        .iter()
                        .find(|x| x.hook == arbiter_policy::wasm::Hook::Placement)
                        .map(|x| x.name.clone())
                        .ok_or(format!("{path}: the bundle holds no placement policy"))?;
                    Ok((b, name))
                });
            (p, loaded)
        })
        .collect();
    let mut results = Vec::new();
    println!(
        "{:<10} {:<8} {:>9} {:>9} {:>7} {:>10} {:>9}  per seed",
        "trace", "policy", "mean %", "paper %", "diff", "µs/pod", "unplaced"
    );
    for name in &args.traces {
        let tasks = dir.join(format!("openb_pod_list_{name}.csv"));
        let trace = match Trace::load(&nodes, &tasks) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("openb: {e}");
                return ExitCode::from(1);
            }
        };
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/openb/order.go");
        let orders = match trace::artifact_orders(&script, &tasks, &nodes, 1.3, &args.seeds) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("openb: {e}");
                return ExitCode::from(1);
            }
        };
        let typical = typical_tasks(&trace);
        for policy in &args.policies {
            let mut per_seed = Vec::new();
            let mut pods = 0usize;
            let mut unplaced = 0usize;
            let started = Instant::now();
            for (&seed, order) in &orders {
                let replay = match policy.as_str() {
                    "bestfit" => trace::replay(&trace, order, Some(&mut PaperBestFit), seed),
                    "fgd" | "fgd-exact" => trace::replay(
                        &trace,
                        order,
                        Some(&mut PaperFgd {
                            typical: typical.clone(),
                            integer: policy == "fgd",
                        }),
                        seed,
                    ),
                    p if p.starts_with("bundle:") => {
                        let (dir, policy) = match &bundles[p] {
                            Ok(b) => b,
                            Err(e) => {
                                eprintln!("openb: {e}");
                                return ExitCode::from(1);
                            }
                        };
                        let shapes = Rc::new(RefCell::new(PodShapes::default()));
                        let mut scorer = BundlePolicy {
                            policy: dir.policy(policy).expect("found at load"),
                            models: trace.models.clone(),
                            shapes: shapes.clone(),
                            logs: Logs::new(),
                            calls: 0,
                            failures: 0,
                            last_error: None,
                        };
                        let replay = trace::replay_observed(
                            &trace,
                            order,
                            Some(&mut scorer),
                            seed,
                            &mut |pod, flavors| shapes.borrow_mut().record(pod, flavors, 1),
                        );
                        if scorer.failures > 0 {
                            eprintln!(
                                "openb: {p}: {} of {} calls failed (left to best fit); the last: {}",
                                scorer.failures,
                                scorer.calls,
                                scorer.last_error.unwrap_or_default()
                            );
                        }
                        replay
                    }
                    _ => trace::replay(&trace, order, None, seed),
                };
                if let Err(e) = check_no_over_allocation(&trace, &replay) {
                    eprintln!("openb: {name} {policy} seed {seed}: over-allocated: {e}");
                    return ExitCode::from(1);
                }
                pods += order.len();
                unplaced += replay.placed.iter().filter(|p| p.is_none()).count();
                per_seed.push((seed, replay.allocation_at(100).unwrap_or(f64::NAN)));
            }
            let elapsed = started.elapsed();
            let mean = per_seed.iter().map(|(_, a)| a).sum::<f64>() / per_seed.len() as f64;
            let paper = PAPER
                .iter()
                .find(|(t, p, _)| t == name && p == policy)
                .map(|(_, _, v)| *v);
            println!(
                "{:<10} {:<8} {:>9.2} {:>9} {:>7} {:>10.1} {:>9}  {}",
                name,
                policy,
                mean,
                paper.map_or("-".into(), |p| format!("{p:.2}")),
                paper.map_or("-".into(), |p| format!("{:+.2}", mean - p)),
                elapsed.as_secs_f64() * 1e6 / pods as f64,
                unplaced,
                per_seed
                    .iter()
                    .map(|(s, a)| format!("{s}:{a:.2}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            results.push(serde_json::json!({
                "trace": name,
                "policy": policy,
                "mean": mean,
                "paper": paper,
                "usPerPod": elapsed.as_secs_f64() * 1e6 / pods as f64,
                "unplaced": unplaced,
                "seeds": per_seed.iter().map(|(s, a)| (s.to_string(), *a)).collect::<BTreeMap<_, _>>(),
            }));
        }
    }
    if let Some(path) = args.json {
        let text = serde_json::to_string_pretty(&results).expect("numbers and strings");
        if let Err(e) = std::fs::write(&path, text + "\n") {
            eprintln!("openb: {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
