//! The FGD paper's openb trace (Alibaba, `tests/data/traces/alibaba-gpu-v2023`)
//! replayed on per-card capacity in the artifact's submission order, for
//! every seed the paper uses (42–51) and both task lists: no card ever
//! holds more than one card's worth and no node more than its allocatable,
//! recounted from the placements alone; every task that fits is kept, and
//! the replay is the one `examples/openb.rs` measures (BENCHMARKS.md).
//! The order comes from Go's own `math/rand` (`examples/openb/order.go`),
//! so the test needs `go` (the README test command installs nothing more
//! for it: Go builds the test cluster too).
//!
//! And the scenario a user gives `arbiter simulate` for it
//! (`trace::manifests`, what `examples/openb.rs` runs): on a slice of the
//! trace, it loads strictly, runs with the shipped FGD bundle through the
//! simulator's driver, and no card or node is over-allocated, no pinned
//! task lands on another GPU model, and a task that did not fit when it
//! arrived is never admitted later.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arbiter_core::model::cluster::FlavorId;
use arbiter_core::model::load::load_str;
use arbiter_policy::sources::{self, PolicyChoice};
use arbiter_sim::trace::{self, manifests, Trace, CPU, GPU_MILLI, MEMORY};
use arbiter_sim::{policies, scenario};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/traces/alibaba-gpu-v2023")
}

#[test]
fn no_card_or_node_is_ever_over_allocated_on_the_trace() {
    let seeds: Vec<u64> = (42..=51).collect();
    for list in ["default", "gpuspec33"] {
        let tasks = data().join(format!("openb_pod_list_{list}.csv"));
        let trace = Trace::load(&data().join("openb_node_list_gpu_node.csv"), &tasks).unwrap();
        assert_eq!(trace.nodes.len(), 1213);
        assert_eq!(trace.gpu_capacity(), 6_212_000);
        let capacity = trace.capacity();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/openb/order.go");
        let nodes = data().join("openb_node_list_gpu_node.csv");
        let orders =
            trace::artifact_orders(&script, &tasks, &nodes, 1.3, &seeds).unwrap_or_else(|e| {
                panic!("{e} (the README test command needs Go for the test cluster too)")
            });
        for (seed, order) in orders {
            // The artifact tops the 8,152 tasks up to 130 % of the GPU.
            assert!(order.len() > trace.tasks.len(), "{list} {seed}: no copies");
            let replay = trace::replay(&trace, &order, None, seed);
            let mut cards: BTreeMap<(FlavorId, u32, u16), i64> = BTreeMap::new();
            let mut nodes: BTreeMap<(FlavorId, u32), [i64; 3]> = BTreeMap::new();
            let mut placed_gpu = 0;
            for (index, placed) in order.iter().zip(&replay.placed) {
                let task = &trace.tasks[*index];
                let Some(placements) = placed else { continue };
                assert_eq!(placements.len(), 1, "{list} {seed}: one pod, one node");
                let p = &placements[0];
                assert_eq!(p.pods, 1);
                // A share holds one card; whole GPUs hold that many full cards.
                let held: i64 = p.cards.iter().map(|u| u.amount.milli() / 1000).sum();
                assert_eq!(held, task.gpu_total(), "{list} {seed} {}", task.name);
                if task.num_gpu == 1 {
                    assert!(p.cards.len() <= 1, "{list} {seed} {}: {p:?}", task.name);
                } else if task.num_gpu > 1 {
                    assert_eq!(p.cards.len(), task.num_gpu as usize);
                    assert!(p.cards.iter().all(|u| u.amount.milli() == 1_000_000));
                }
                for u in &p.cards {
                    *cards.entry((p.flavor, p.node, u.card)).or_default() +=
                        u.amount.milli() / 1000;
                }
                let node = nodes.entry((p.flavor, p.node)).or_default();
                for &(r, a) in &p.per_pod {
                    node[r.index()] += a.milli();
                }
                placed_gpu += task.gpu_total();
            }
            for ((flavor, node, card), used) in &cards {
                let (pool, _) = capacity.node(*flavor, *node).unwrap();
                assert!(
                    *card < pool.devices[0].cards,
                    "{list} {seed}: no card {card}"
                );
                assert!(
                    *used <= 1000,
                    "{list} {seed}: card {card} of node {node} holds {used} milli-GPU"
                );
            }
            for ((flavor, node), used) in &nodes {
                let (pool, _) = capacity.node(*flavor, *node).unwrap();
                for r in [CPU, MEMORY, GPU_MILLI] {
                    let allocatable = pool
                        .allocatable
                        .iter()
                        .find(|(pr, _)| *pr == r)
                        .unwrap()
                        .1
                        .milli();
                    assert!(
                        used[r.index()] <= allocatable,
                        "{list} {seed}: node {node} over {r:?}"
                    );
                }
            }
            assert_eq!(placed_gpu, *replay.allocated.last().unwrap());
            // The paper's metric exists at 100 % arrived, within what could be.
            let at100 = replay.allocation_at(100).unwrap();
            assert!((80.0..100.0).contains(&at100), "{list} {seed}: {at100}");
        }
    }
}

/// A slice of the trace small enough for a debug build: every 25th node
/// (all models but one are among them; a pinned task of a model with no
/// node left can never be admitted) and 400 tasks, far more than those
/// nodes hold, in a fixed order that mixes the name-sorted tasks.
#[test]
fn the_user_scenario_of_a_slice_simulates_with_the_fgd_bundle() {
    let list = "gpuspec33";
    let mut trace = Trace::load(
        &data().join("openb_node_list_gpu_node.csv"),
        &data().join(format!("openb_pod_list_{list}.csv")),
    )
    .unwrap();
    trace.nodes = trace.nodes.iter().step_by(25).cloned().collect();
    let order: Vec<usize> = (0..400).map(|k| (k * 97) % trace.tasks.len()).collect();
    let text = manifests::scenario(&trace, &order);
    let built = scenario::build(load_str(&text, Path::new("openb.yaml")).unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(built.jobs.len(), order.len());
    // The shipped bundle alone: placement chooses each task's GPU model.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let choice = PolicyChoice {
        platform: Some(vec![root.join("policies/placement-fgd")]),
        tenants: Vec::new(),
        none: false,
    };
    let mut engine = sources::engine(&built.policies, &choice).unwrap().unwrap();
    let (report, _) = policies::run(&built, Some(&mut engine), true, &mut |_| {});
    let p = report.policies.as_ref().unwrap();
    assert_eq!(p.errors, 0, "{:?}", p.decisions);
    assert!(p.evaluations > 0);
    // Cards, nodes and GPU models recounted from the report's placements.
    let measured = manifests::measure(&trace, &order, &report).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        measured.admitted > 50 && measured.admitted < order.len(),
        "{} of {} admitted",
        measured.admitted,
        order.len()
    );
    // Each task tried once, when it arrived: admitted then, or never.
    for w in &report.workloads {
        if let Some(at) = w.admitted_seconds {
            assert_eq!(at, w.arrival_seconds, "{}", w.name);
        }
    }
    let last = *measured.allocated.last().unwrap();
    assert!(last > 0 && last <= trace.gpu_capacity());
}
