//! `fgd`: the placement policy of *Beware of Fragmentation: Scheduling
//! GPU-Sharing Workloads with Fragmentation Gradient Descent* (Weng et al.,
//! USENIX ATC'23). A node's GPU **fragmentation** is the GPU capacity left
//! on it that a typical pod could not use, weighted by how common each
//! typical pod is:
//!
//! ```text
//! frag(node) = Σ_t share_t × (free GPU on cards too small for t, if t fits on the node;
//!                             all free GPU,                         if it does not)
//! ```
//!
//! (a pod asking no GPU counts all free GPU: it leaves it idle). FGD places
//! each pod where it increases fragmentation least:
//!
//! ```text
//! score = 100 × σ((frag(before) − frag(after)) / perCard)
//! ```
//!
//! rounded down to a step of 100 / `scoreSteps` (40 steps of 2.5 points
//! by default). Nodes whose fragmentation would change by about the same
//! amount then score the same, and the core's fixed tie order sends the
//! pods to the same nodes first, which packs. The paper's scheduler
//! truncates to an integer (`scoreSteps: 100`); coarser steps allocate
//! more on its benchmark and unrounded scores (`integerScores: false`)
//! less, because they spread pods over nodes whose fragmentation differs by
//! a few milli-GPU (BENCHMARKS.md). A pod that fits on one card is tried on every card
//! that holds it and the best card is returned with the score (among
//! equal ones, the lowest-numbered, as the paper's scheduler takes it: the
//! fullest measured less on its benchmark, BENCHMARKS.md); whole
//! cards are the lowest-numbered free ones, as the core takes them.
//!
//! The typical pods are the request's `typical`: the shapes of the pods
//! last submitted to the workload's ClusterQueue, each with its share (the
//! core's history). They are grouped by their CPU and GPU requests (other
//! resources do not bear on GPU fragmentation) and the flavors they may run
//! on: on a node of another flavor, all its free GPU is of no use to them,
//! as the paper counts a task constrained to other GPU models. All of them
//! count by default; the paper keeps the most frequent that make up 95 %
//! (`typicalCover: 0.95`), which placed less on its own benchmark.
//!
//! Params (the policy's `config`), all optional: `gpuResource`
//! (`example.com/gpu-milli`), `cpuResource` (`cpu`), `scoreSteps` (`40`,
//! 1–1000), `typicalCover` (`1`, above 0 up to 1: the share of the recent
//! pods the most frequent typical shapes kept must make up),
//! `integerScores` (`true`; `false` leaves scores unrounded),
//! `tieBreak` (`none`; `bestFit` or `gpu` add below the step a part of it
//! larger the fuller the node is left, see [`TieBreak`]). An unknown or
//! out-of-range param fails the call.

use std::collections::{BTreeMap, HashMap};

use arbiter_plugin_sdk::{export_placement, serde_json, Node, PlacementRequest, PlacementResponse};
use serde::Deserialize;

/// The policy's `config`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Params {
    /// The device resource whose cards are shared.
    pub gpu_resource: String,
    pub cpu_resource: String,
    /// How many equal steps of 0–100 scores are rounded down to (the
    /// paper's scheduler: 100, integers).
    pub score_steps: u32,
    /// The share of the typical pods the most frequent shapes kept make up
    /// (the paper: 0.95; 1: all).
    pub typical_cover: f64,
    /// Round scores down to a step (`false`: unrounded).
    pub integer_scores: bool,
    /// How equal rounded scores are told apart ([`TieBreak`]).
    pub tie_break: TieBreak,
}

/// How equal rounded scores are told apart: a part of the step below the
/// next one, larger the fuller the node is left ([`best_fit`]), or none.
/// Measured on the paper's benchmark (BENCHMARKS.md, `gpuspec33`, seeds
/// 42–45): packing ties raises the allocation at 130 % arrived by about
/// 0.4 points and lowers it at 100 % by about 0.7, so the default is the
/// paper's: none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TieBreak {
    /// The node left with the least GPU and CPU (each as a fraction of
    /// what the node holds, weighted equally).
    BestFit,
    /// The node left with the least GPU.
    Gpu,
    /// Equal scores stay equal: the core's fixed node order decides, as
    /// the paper's scheduler's node names do.
    None,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            gpu_resource: "example.com/gpu-milli".to_owned(),
            cpu_resource: "cpu".to_owned(),
            score_steps: Params::SCORE_STEPS,
            typical_cover: 1.0,
            integer_scores: true,
            tie_break: TieBreak::None,
        }
    }
}

/// How full a node is left, 0 to 0.99: one minus the mean of the parts
/// (each 0–1: what is left as a fraction of what the node holds) given,
/// scaled by 0.99 so that it stays below the next step of the score. A part
/// whose total is unknown (0) counts as left empty (1).
pub fn best_fit(parts: &[(f64, f64)]) -> f64 {
    let part = |(left, total): (f64, f64)| {
        if total > 0.0 && left.is_finite() {
            (left / total).clamp(0.0, 1.0)
        } else {
            1.0
        }
    };
    let mean = parts.iter().map(|&p| part(p)).sum::<f64>() / parts.len().max(1) as f64;
    0.99 * (1.0 - mean)
}

impl Params {
    /// Reads and checks the request's `params` (`null` means all defaults).
    pub fn parse(params: &serde_json::Value) -> Result<Params, String> {
        if params.is_null() {
            return Ok(Params::default());
        }
        let params: Params =
            serde_json::from_value(params.clone()).map_err(|e| format!("params: {e}"))?;
        if !(1..=1000).contains(&params.score_steps) {
            return Err(format!(
                "params: scoreSteps is {}; give 1 to 1000 (100: the paper's integer scores)",
                params.score_steps
            ));
        }
        if !(params.typical_cover > 0.0 && params.typical_cover <= 1.0) {
            return Err(format!(
                "params: typicalCover is {}; give a share above 0 up to 1 (0.95: the paper's)",
                params.typical_cover
            ));
        }
        Ok(params)
    }

    /// The default `scoreSteps`. Measured on the paper's benchmark
    /// (BENCHMARKS.md; seeds 42–51 and, held out, 52–61, both traces): 40
    /// steps allocate more than the paper's 100 at 100 % and 130 % arrived.
    pub const SCORE_STEPS: u32 = 40;

    /// Points per score step.
    fn step(&self) -> f64 {
        100.0 / self.score_steps as f64
    }
}

/// A typical pod: CPU and GPU per pod, the flavors it may run on (empty:
/// any), and its share (0–1).
#[derive(Debug, Clone, PartialEq)]
pub struct Typical {
    pub cpu: f64,
    pub gpu: f64,
    pub flavors: Vec<String>,
    pub share: f64,
}

/// The typical pods of the request grouped by (CPU, GPU, flavors), shares
/// summed; the most frequent of them until they make up `typicalCover` of
/// the shares, renormalised to sum to 1.
pub fn typical(request: &PlacementRequest, params: &Params) -> Vec<Typical> {
    let mut grouped: BTreeMap<(u64, u64, Vec<String>), f64> = BTreeMap::new();
    for t in &request.typical {
        let get = |r: &str| t.requests.get(r).copied().unwrap_or(0.0).max(0.0);
        let mut flavors = t.flavors.clone();
        flavors.sort();
        let key = (
            get(&params.cpu_resource).to_bits(),
            get(&params.gpu_resource).to_bits(),
            flavors,
        );
        *grouped.entry(key).or_default() += t.share.max(0.0);
    }
    let mut all: Vec<Typical> = grouped
        .into_iter()
        .map(|((cpu, gpu, flavors), share)| Typical {
            cpu: f64::from_bits(cpu),
            gpu: f64::from_bits(gpu),
            flavors,
            share,
        })
        .collect();
    if params.typical_cover >= 1.0 {
        return all;
    }
    // Most frequent first (equal shares: in key order, the sort is stable).
    all.sort_by(|a, b| b.share.total_cmp(&a.share));
    let total: f64 = all.iter().map(|t| t.share).sum();
    let mut covered = 0.0;
    let mut kept = Vec::new();
    for t in all {
        if covered >= params.typical_cover * total {
            break;
        }
        covered += t.share;
        kept.push(t);
    }
    for t in &mut kept {
        t.share /= covered;
    }
    kept
}

/// The GPU on `cards` (free per card, each holding `per_card`) of a node
/// of `flavor` with `cpu_left` CPU free that the typical pods could not use.
pub fn fragmentation(
    typical: &[Typical],
    flavor: &str,
    cpu_left: f64,
    cards: &[f64],
    per_card: f64,
) -> f64 {
    let left: f64 = cards.iter().sum();
    typical
        .iter()
        .map(|t| {
            let amount = if t.gpu <= 0.0
                || (!t.flavors.is_empty() && !t.flavors.iter().any(|f| f == flavor))
            {
                // It asks no GPU, or may not run here: it uses none of it.
                left
            } else {
                // One card of t.gpu, or t.gpu / perCard whole cards.
                let (need, count) = if t.gpu <= per_card {
                    (t.gpu, 1.0)
                } else {
                    (per_card, t.gpu / per_card)
                };
                let fitting = cards.iter().filter(|&&c| c >= need).count() as f64;
                if count.fract() == 0.0 && fitting >= count && cpu_left >= t.cpu {
                    cards.iter().filter(|&&c| c < need).sum()
                } else {
                    left
                }
            };
            t.share * amount
        })
        .sum()
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Node's score and the card for a one-card pod.
fn node_score(
    node: &Node,
    params: &Params,
    typical: &[Typical],
    pod_cpu: f64,
    pod_gpu: f64,
) -> (f64, Option<u32>) {
    let cpu_left = node
        .free
        .get(&params.cpu_resource)
        .copied()
        .unwrap_or(f64::INFINITY);
    let device = node
        .devices
        .iter()
        .find(|d| d.resource == params.gpu_resource);
    let (cards, per_card) = match device {
        Some(d) if d.per_card > 0.0 => (d.cards.clone(), d.per_card),
        _ => (Vec::new(), 1000.0),
    };
    let flavor = node.flavor.as_str();
    let before = fragmentation(typical, flavor, cpu_left, &cards, per_card);
    let step = params.step();
    let score = |after: f64| {
        let s = sigmoid((before - after) / per_card) * 100.0;
        if params.integer_scores {
            (s / step).trunc() * step
        } else {
            s
        }
    };
    let cpu_after = cpu_left - pod_cpu;
    let gpu_total = per_card * cards.len() as f64;
    let cpu_total = node
        .allocatable
        .get(&params.cpu_resource)
        .copied()
        .unwrap_or(0.0);
    // Only rounded scores have ties to break; the part stays below the step.
    let tie = |after: &[f64], cpu_after: f64| match (params.tie_break, params.integer_scores) {
        (TieBreak::BestFit, true) => {
            step * best_fit(&[(after.iter().sum(), gpu_total), (cpu_after, cpu_total)])
        }
        (TieBreak::Gpu, true) => step * best_fit(&[(after.iter().sum(), gpu_total)]),
        _ => 0.0,
    };
    if pod_gpu > 0.0 && pod_gpu < per_card {
        let mut best: Option<(f64, u32)> = None;
        for (i, &free) in cards.iter().enumerate() {
            if free < pod_gpu {
                continue;
            }
            let mut after = cards.clone();
            after[i] -= pod_gpu;
            let s = score(fragmentation(typical, flavor, cpu_after, &after, per_card));
            // Among equal scores, the lowest-numbered card.
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, i as u32));
            }
        }
        match best {
            Some((s, card)) => {
                let mut after = cards.clone();
                after[card as usize] -= pod_gpu;
                (s + tie(&after, cpu_after), Some(card))
            }
            None => (0.0, None),
        }
    } else {
        let mut after = cards;
        let mut whole = (pod_gpu / per_card).round() as usize;
        for c in after.iter_mut() {
            if whole > 0 && *c >= per_card {
                *c -= per_card;
                whole -= 1;
            }
        }
        let s = score(fragmentation(typical, flavor, cpu_after, &after, per_card));
        (s + tie(&after, cpu_after), None)
    }
}

/// What makes two nodes score the same: flavor, CPU free and allocatable
/// (the tie-break reads it), cards free.
type NodeKey<'a> = (&'a str, u64, u64, Vec<u64>);

/// The hook: a score per node, and the card for a pod that fits on one.
pub fn placement(request: PlacementRequest) -> Result<PlacementResponse, String> {
    let params = Params::parse(&request.params)?;
    let typical = typical(&request, &params);
    let get = |r: &str| request.pod.requests.get(r).copied().unwrap_or(0.0);
    let (pod_cpu, pod_gpu) = (get(&params.cpu_resource), get(&params.gpu_resource));
    // Identical nodes score the same: once per (flavor, CPU, cards).
    let mut seen: HashMap<NodeKey<'_>, (f64, Option<u32>)> = HashMap::new();
    let mut scores = Vec::with_capacity(request.nodes.len());
    let mut cards = Vec::with_capacity(request.nodes.len());
    for node in &request.nodes {
        let key = (
            node.flavor.as_str(),
            node.free
                .get(&params.cpu_resource)
                .copied()
                .unwrap_or(f64::INFINITY)
                .to_bits(),
            node.allocatable
                .get(&params.cpu_resource)
                .copied()
                .unwrap_or(0.0)
                .to_bits(),
            node.devices
                .iter()
                .filter(|d| d.resource == params.gpu_resource)
                .flat_map(|d| d.cards.iter().map(|c| c.to_bits()))
                .collect(),
        );
        let (score, card) = *seen
            .entry(key)
            .or_insert_with(|| node_score(node, &params, &typical, pod_cpu, pod_gpu));
        scores.push(score);
        cards.push(card);
    }
    Ok(PlacementResponse {
        scores,
        cards: Some(cards),
    })
}

export_placement!(placement);

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_plugin_sdk::{Device, Pod, TypicalPod};

    fn node(cpu: f64, cards: &[f64]) -> Node {
        Node {
            free: [("cpu".to_owned(), cpu)].into(),
            devices: vec![Device {
                resource: "example.com/gpu-milli".to_owned(),
                per_card: 1000.0,
                cards: cards.to_vec(),
            }],
            ..Node::default()
        }
    }

    fn typical(cpu: f64, gpu: f64, share: f64) -> TypicalPod {
        TypicalPod {
            requests: [
                ("cpu".to_owned(), cpu),
                ("example.com/gpu-milli".to_owned(), gpu),
            ]
            .into(),
            flavors: Vec::new(),
            share,
        }
    }

    fn request(
        pod_cpu: f64,
        pod_gpu: f64,
        nodes: Vec<Node>,
        typical: Vec<TypicalPod>,
    ) -> PlacementRequest {
        PlacementRequest {
            pod: Pod {
                requests: [
                    ("cpu".to_owned(), pod_cpu),
                    ("example.com/gpu-milli".to_owned(), pod_gpu),
                ]
                .into(),
            },
            nodes,
            typical,
            ..PlacementRequest::default()
        }
    }

    #[test]
    fn fragmentation_counts_what_typical_pods_cannot_use() {
        let typical = |gpu: f64, flavors: &[&str]| Typical {
            cpu: 1.0,
            gpu,
            flavors: flavors.iter().map(|f| f.to_string()).collect(),
            share: 1.0,
        };
        let half = |t: Typical| Typical { share: 0.5, ..t };
        let t = [half(typical(500.0, &[])), half(typical(1000.0, &[]))];
        // Cards 300 and 1000 free: the half-GPU pod fits (300 is too small
        // for it), the whole-GPU pod fits (300 too small again).
        assert_eq!(
            fragmentation(&t, "t4", 8.0, &[300.0, 1000.0], 1000.0),
            300.0
        );
        // No CPU left: nothing fits, all 1300 free is fragmented.
        assert_eq!(
            fragmentation(&t, "t4", 0.5, &[300.0, 1000.0], 1000.0),
            1300.0
        );
        // A CPU-only typical pod leaves every free GPU idle.
        let cpu = [typical(0.0, &[])];
        assert_eq!(
            fragmentation(&cpu, "t4", 8.0, &[300.0, 1000.0], 1000.0),
            1300.0
        );
        // A typical pod that may only run on a10 can use nothing of a t4 node.
        let a10 = [typical(500.0, &["a10"])];
        assert_eq!(
            fragmentation(&a10, "t4", 8.0, &[300.0, 1000.0], 1000.0),
            1300.0
        );
        assert_eq!(
            fragmentation(&a10, "a10", 8.0, &[300.0, 1000.0], 1000.0),
            300.0
        );
    }

    #[test]
    fn a_share_goes_where_it_fragments_least() {
        // Typical pods are half GPUs. A 0.5 share on node a's half-used
        // card fills it exactly (frag stays 0); on node b's empty card it
        // leaves 0.5 usable; both are fine, but on node c (0.7 free) it
        // would leave 0.2 that no typical pod can use.
        let t = vec![typical(1.0, 500.0, 1.0)];
        let nodes = vec![
            node(8.0, &[500.0]),
            node(8.0, &[1000.0]),
            node(8.0, &[700.0]),
        ];
        let out = placement(request(1.0, 500.0, nodes.clone(), t.clone())).unwrap();
        // 100 × σ(−0.2) = 45.02, rounded down to a step of 2.5 (the
        // default): 45. With 50 steps of 2 points it is 44.
        assert_eq!(out.scores, vec![50.0, 50.0, 45.0]);
        let mut r = request(1.0, 500.0, nodes.clone(), t.clone());
        r.params = serde_json::json!({ "scoreSteps": 50 });
        assert_eq!(placement(r).unwrap().scores, vec![50.0, 50.0, 44.0]);
        assert_eq!(out.cards, Some(vec![Some(0), Some(0), Some(0)]));
        // With `tieBreak: bestFit`, the tie between a and b goes to the
        // node left fuller: a's card is left empty (GPU part 0), b's half
        // free (0.5), c's 0.2; none says what CPU it holds (CPU part 1):
        // 0.99 × (1 − ½ (0 + 1)) = 0.495, 0.99 × (1 − ½ (0.5 + 1)) =
        // 0.2475, 0.99 × (1 − ½ (0.2 + 1)) = 0.396. With `gpu`, the GPU
        // part alone: 0.99 × (1 − 0) = 0.99, 0.99 × (1 − 0.5) = 0.495,
        // 0.99 × (1 − 0.2) = 0.792.
        for (tie, expect) in [
            ("bestFit", [50.495, 50.2475, 45.396]),
            ("gpu", [50.99, 50.495, 45.792]),
        ] {
            let mut r = request(1.0, 500.0, nodes.clone(), t.clone());
            r.params = serde_json::json!({ "tieBreak": tie, "scoreSteps": 100 });
            let scores = placement(r).unwrap().scores;
            for (s, e) in scores.iter().zip(expect) {
                assert!((s - e).abs() < 1e-9, "{tie}: {scores:?}");
            }
        }
    }

    #[test]
    fn coarser_steps_make_nearly_equal_changes_equal() {
        // Typical pods ask half a GPU. A 0.06 share on node a fills its
        // 0.06 remnant (fragmentation falls by 60), on node b it leaves
        // 0.94 usable (no change): 100 × σ(0.06) = 51.5 against 50. The
        // paper's integer scores tell them apart; the default 40 steps of
        // 2.5 points do not, and the core's tie order decides.
        let t = vec![typical(1.0, 500.0, 1.0)];
        let nodes = vec![node(8.0, &[60.0]), node(8.0, &[1000.0])];
        let mut r = request(1.0, 60.0, nodes, t);
        assert_eq!(placement(r.clone()).unwrap().scores, vec![50.0, 50.0]);
        r.params = serde_json::json!({ "scoreSteps": 100 });
        assert_eq!(placement(r.clone()).unwrap().scores, vec![51.0, 50.0]);
        r.params = serde_json::json!({ "scoreSteps": 0 });
        let err = placement(r).unwrap_err();
        assert!(err.contains("scoreSteps is 0"), "{err}");
    }

    #[test]
    fn typical_cover_keeps_the_most_frequent_shapes() {
        // 0.2 GPU pods are 60 % of the recent pods, 0.5 GPU 30 %, whole
        // GPUs 10 % (in two entries that group into one shape).
        let mut r = request(
            1.0,
            500.0,
            vec![node(8.0, &[1000.0])],
            vec![
                typical(1.0, 500.0, 0.3),
                typical(1.0, 200.0, 0.6),
                typical(1.0, 1000.0, 0.05),
                typical(1.0, 1000.0, 0.05),
            ],
        );
        let shares = |r: &PlacementRequest| {
            let params = Params::parse(&r.params).unwrap();
            let mut t: Vec<(f64, f64)> = super::typical(r, &params)
                .iter()
                .map(|t| (t.gpu, (t.share * 1e9).round() / 1e9))
                .collect();
            t.sort_by(|a, b| a.0.total_cmp(&b.0));
            t
        };
        // All of them by default.
        assert_eq!(shares(&r), vec![(200.0, 0.6), (500.0, 0.3), (1000.0, 0.1)]);
        // The paper's 95 %: 0.6 + 0.3 make up 90 %, so whole GPUs are kept too.
        r.params = serde_json::json!({ "typicalCover": 0.95 });
        assert_eq!(shares(&r), vec![(200.0, 0.6), (500.0, 0.3), (1000.0, 0.1)]);
        // 85 %: the two most frequent, renormalised.
        r.params = serde_json::json!({ "typicalCover": 0.85 });
        assert_eq!(shares(&r), vec![(200.0, 0.666666667), (500.0, 0.333333333)]);
        r.params = serde_json::json!({ "typicalCover": 0 });
        let err = placement(r).unwrap_err();
        assert!(err.contains("typicalCover is 0"), "{err}");
    }

    #[test]
    fn best_fit_is_below_one_and_larger_the_fuller() {
        assert_eq!(best_fit(&[(0.0, 8000.0), (0.0, 96.0)]), 0.99);
        assert_eq!(best_fit(&[(8000.0, 8000.0), (96.0, 96.0)]), 0.0);
        assert!(
            best_fit(&[(1000.0, 8000.0), (10.0, 96.0)])
                > best_fit(&[(2000.0, 8000.0), (10.0, 96.0)])
        );
        // Nothing known of a resource: counted as left empty.
        assert_eq!(best_fit(&[(0.0, 8000.0), (f64::INFINITY, 0.0)]), 0.495);
    }

    #[test]
    fn equal_cards_go_to_the_lowest_numbered() {
        // Typical pods ask 0.2: a 0.2 share leaves either card's remnant
        // usable (0.6 or 0.8 left, no fragmentation either way), so both
        // cards score the same and card 0 is taken, as the paper's
        // scheduler takes it, though card 1 is fuller.
        let t = vec![typical(1.0, 200.0, 1.0)];
        let out = placement(request(1.0, 200.0, vec![node(8.0, &[1000.0, 800.0])], t)).unwrap();
        assert_eq!(out.cards, Some(vec![Some(0)]));
    }

    #[test]
    fn the_best_card_of_a_node_is_returned() {
        let t = vec![typical(1.0, 600.0, 1.0)];
        // Card 0 has 1000 free, card 1 has 700: a 0.4 share on card 0
        // leaves 600 (usable), on card 1 leaves 300 (fragmented).
        let out = placement(request(1.0, 400.0, vec![node(8.0, &[1000.0, 700.0])], t)).unwrap();
        assert_eq!(out.cards, Some(vec![Some(0)]));
    }

    #[test]
    fn unrounded_scores_on_request_and_bad_params_fail() {
        let mut r = request(
            1.0,
            500.0,
            vec![node(8.0, &[700.0])],
            vec![typical(1.0, 500.0, 1.0)],
        );
        r.params = serde_json::json!({"integerScores": false});
        let s = placement(r.clone()).unwrap().scores[0];
        assert!((s - 100.0 / (1.0 + (0.2f64).exp())).abs() < 1e-9, "{s}");
        r.params = serde_json::json!({"integerScore": false});
        assert!(placement(r).unwrap_err().contains("integerScore"));
    }
}
