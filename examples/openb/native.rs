//! The FGD paper's scores as the artifact computes them, as native
//! scorers of the core's `Capacity::place` (`examples/openb.rs --policy
//! native-bestfit|native-fgd|native-fgd-exact`): the reference the
//! policies run through `arbiter simulate` are compared with.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

use arbiter_core::model::cluster::{FlavorId, ResourceId};
use arbiter_core::model::Amount;
use arbiter_core::scheduler::capacity::{Candidate, NodeScore, Scorer};
use arbiter_core::scheduler::workload::amount_of;
use arbiter_sim::trace::{self, Trace, CPU, GPU_MILLI};

/// The artifact's BestFit (`best_fit_score.go`): the CPU and GPU left on
/// the node after the pod, each normalised by the largest node (128 CPUs,
/// 8 GPUs) and weighted ½, turned into an integer 0–100, higher better.
pub struct PaperBestFit;

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
pub struct Typical {
    cpu: i64,
    milli: i64,
    gpus: u32,
    models: Vec<usize>,
    share: f64,
}

/// The artifact's typical tasks (`GetTypicalPods`): every task of the
/// trace counted by (CPU, GPU milli, GPUs, GPU models), most frequent
/// first, until they cover `cover` of the tasks (the artifact: 0.95);
/// shares renormalised.
pub fn typical_tasks(trace: &Trace, cover: f64) -> Vec<Typical> {
    let mut counts: BTreeMap<(i64, i64, u32, String), u64> = BTreeMap::new();
    for t in &trace.tasks {
        *counts
            .entry((t.cpu_milli, t.gpu_milli, t.num_gpu, t.gpu_spec.join("|")))
            .or_default() += 1;
    }
    most_frequent(&trace.models, counts, cover)
}

/// The most frequent of `counts` (by CPU, GPU milli, GPUs, GPU models
/// joined by `|`) until they cover `cover` of them, shares renormalised.
fn most_frequent(
    models: &[String],
    counts: BTreeMap<(i64, i64, u32, String), u64>,
    cover: f64,
) -> Vec<Typical> {
    let total: u64 = counts.values().sum();
    let mut list: Vec<_> = counts.into_iter().collect();
    // Count descending, then (as `sort.Reverse` of `Less`) the larger spec first.
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    let mut covered = 0u64;
    let mut out = Vec::new();
    for ((cpu, milli, gpus, spec), count) in list {
        if covered as f64 >= cover * total as f64 {
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
                .filter_map(|m| models.iter().position(|x| x == m))
                .collect(),
            share: count as f64,
        });
    }
    for t in &mut out {
        t.share /= covered.max(1) as f64;
    }
    out
}

/// The tasks arrived last, as the core's history keeps a ClusterQueue's
/// pods (`PodShapes::WINDOW`): the typical tasks of `native-fgd-history`.
#[derive(Default)]
pub struct Arrivals {
    /// (CPU milli, GPU milli per GPU, GPUs, GPU models joined by `|`), oldest first.
    recent: VecDeque<(i64, i64, u32, String)>,
    /// Tasks arrived in all.
    arrived: u64,
}

impl Arrivals {
    /// Tasks remembered, as the core's history.
    pub const WINDOW: usize = 2_000;

    /// Records a task asking `per_pod` that may run on `flavors` (empty: any).
    pub fn record(
        &mut self,
        trace: &Trace,
        per_pod: &[(ResourceId, Amount)],
        flavors: &[FlavorId],
    ) {
        let cpu = amount_of(per_pod, CPU).milli();
        let total = amount_of(per_pod, GPU_MILLI).milli() / 1000;
        let (milli, gpus) = match total {
            0 => (0, 0),
            t if t < 1000 => (t, 1),
            t => (1000, (t / 1000) as u32),
        };
        let spec = flavors
            .iter()
            .map(|f| trace.models[f.index()].as_str())
            .collect::<Vec<_>>()
            .join("|");
        self.recent.push_back((cpu, milli, gpus, spec));
        if self.recent.len() > Self::WINDOW {
            self.recent.pop_front();
        }
        self.arrived += 1;
    }
}

/// The paper's FGD with the typical tasks of the last [`Arrivals::WINDOW`]
/// arrivals instead of the whole trace: the native twin of the
/// `placement-fgd` bundle, whose typical pods are the core's history.
pub struct HistoryFgd {
    arrivals: Rc<RefCell<Arrivals>>,
    /// The trace's GPU models, by flavor index.
    models: Vec<String>,
    fgd: PaperFgd,
    /// `Arrivals::arrived` when the typical tasks were last counted.
    counted: Option<u64>,
    cover: f64,
}

impl HistoryFgd {
    pub fn new(
        arrivals: Rc<RefCell<Arrivals>>,
        trace: &Trace,
        steps: u32,
        cover: f64,
    ) -> HistoryFgd {
        HistoryFgd {
            arrivals,
            models: trace.models.clone(),
            fgd: PaperFgd {
                typical: Vec::new(),
                steps: Some(steps),
            },
            counted: None,
            cover,
        }
    }
}

impl Scorer for HistoryFgd {
    fn score(
        &mut self,
        per_pod: &[(ResourceId, Amount)],
        candidates: &[Candidate<'_>],
    ) -> Option<Vec<NodeScore>> {
        let arrivals = self.arrivals.borrow();
        if self.counted != Some(arrivals.arrived) {
            let mut counts: BTreeMap<(i64, i64, u32, String), u64> = BTreeMap::new();
            for t in &arrivals.recent {
                *counts.entry(t.clone()).or_default() += 1;
            }
            self.fgd.typical = most_frequent(&self.models, counts, self.cover);
            self.counted = Some(arrivals.arrived);
        }
        drop(arrivals);
        self.fgd.score(per_pod, candidates)
    }
}

/// The artifact's FGD (`fgd_score.go`, `NodeGpuShareFragAmountScore`):
/// the expected GPU no typical task could use on the node, before and
/// after the pod; score = ⌊σ((before − after)/1000) × 100⌋. A share is
/// tried on every card that holds it, and the best card is chosen.
pub struct PaperFgd {
    pub typical: Vec<Typical>,
    /// Scores rounded down to steps of 100 / `steps` (the artifact: 100,
    /// integers; the `placement-fgd` bundle's default: 50); `None`:
    /// unrounded.
    pub steps: Option<u32>,
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
                        let step = self.steps.map(|n| 100.0 / n.max(1) as f64);
                        let score = |after: f64| {
                            let s = sigmoid((before - after) / 1000.0) * 100.0;
                            match step {
                                Some(step) => (s / step).trunc() * step,
                                None => s,
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

/// Cards and node totals the placements hold, recounted from the
/// placements alone: nothing over any card or node.
pub fn check_no_over_allocation(trace: &Trace, replay: &trace::Replay) -> Result<(), String> {
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
