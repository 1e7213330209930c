//! Scheduler benchmarks (results in BENCHMARKS.md):
//! - `cycle/pending/N`: one step (a single scheduling cycle: nothing changes) over 10 ClusterQueues whose heads
//!   cannot be admitted, with N workloads pending behind them — the cost must
//!   not grow with N;
//! - `cycle/heads/K`: the same with K ClusterQueues (K heads) — it grows with K;
//! - `simulate/*`: whole simulations (the seed example, without and with its
//!   policies in force, and the Kueue baseline).

use std::hint::black_box;
use std::path::{Path, PathBuf};

use arbiter_core::model::Millis;
use arbiter_core::scheduler::hooks::DefaultHooks;
use arbiter_core::scheduler::intake::{intake, Intake};
use arbiter_core::scheduler::{Input, Scheduler};
use arbiter_policy::sources::{self, PolicyChoice};
use arbiter_sim::generate::PerfScenario;
use arbiter_sim::{driver, scenario};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// The same allocator as the `arbiter` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// K StrictFIFO ClusterQueues of 1 CPU, each filled by one admitted workload,
/// with `pending` more 1-CPU workloads spread over them.
fn blocked_scheduler(queues: usize, pending: usize) -> Scheduler {
    let mut yaml = String::from("kind: ResourceFlavor\napiVersion: arbiter.dev/v1alpha1\nmetadata: {name: default}\nspec: {}\n");
    let per_queue = pending / queues + 1;
    for q in 0..queues {
        yaml.push_str(&format!(
            "---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: cq-{q}}}
spec:
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: \"1\"}}]}}]
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {{name: lq, namespace: ns-{q}}}
spec: {{clusterQueue: cq-{q}}}
---
apiVersion: sim.arbiter.dev/v1alpha1
kind: WorkloadGenerator
metadata: {{name: w-{q}}}
spec: {{count: {per_queue}, namespace: ns-{q}, queueName: lq, podSets: [{{name: main, count: 1, requests: {{cpu: \"1\"}}}}]}}
"
        ));
    }
    let loaded = arbiter_core::model::load::load_str(&yaml, Path::new("bench.yaml"))
        .expect("bench scenario loads");
    let scenario = scenario::build(loaded).expect("bench scenario builds");
    let mut scheduler = Scheduler::new(scenario.cluster.clone(), &[]);
    let inputs = scenario
        .jobs
        .iter()
        .filter_map(
            |job| match intake(&scenario.cluster, &job.info, job.explicit_priority) {
                Intake::Queued(workload) => Some(Input::Submit(workload)),
                _ => None,
            },
        )
        .collect();
    // Admit the first workload of every queue; the rest now wait behind blocked heads.
    scheduler.step(Millis::ZERO, inputs, &mut DefaultHooks);
    scheduler
}

fn cycle_cost(c: &mut Criterion) {
    let mut group = c.benchmark_group("cycle/pending");
    for pending in [1_000usize, 10_000, 100_000] {
        let mut scheduler = blocked_scheduler(10, pending);
        group.bench_with_input(BenchmarkId::from_parameter(pending), &pending, |b, _| {
            b.iter(|| black_box(scheduler.step(Millis(1), Vec::new(), &mut DefaultHooks)))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("cycle/heads");
    for queues in [10usize, 100, 1_000] {
        let mut scheduler = blocked_scheduler(queues, 10_000);
        group.bench_with_input(BenchmarkId::from_parameter(queues), &queues, |b, _| {
            b.iter(|| black_box(scheduler.step(Millis(1), Vec::new(), &mut DefaultHooks)))
        });
    }
    group.finish();
}

fn simulations(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulate");
    group.sample_size(10);
    let seed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/seed");
    let seed = scenario::build(arbiter_sim::files::load_paths(&[seed]).expect("seed loads"))
        .expect("seed builds");
    group.bench_function("seed", |b| {
        b.iter(|| black_box(driver::run(&seed, &mut DefaultHooks, &mut |_| {})))
    });
    // The same with its policies (the default bundle) in force, as
    // `arbiter simulate examples/seed/` runs it; one engine, loaded once.
    let mut engine = sources::engine(&seed.policies, &PolicyChoice::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("examples/seed names no policies"));
    group.bench_function("seed-policies", |b| {
        b.iter(|| {
            let report = driver::run(&seed, &mut engine, &mut |_| {});
            engine.take_decisions();
            black_box(report)
        })
    });
    let yaml = PerfScenario::baseline().to_yaml();
    let baseline = scenario::build(
        arbiter_core::model::load::load_str(&yaml, Path::new("baseline.yaml")).expect("loads"),
    )
    .expect("builds");
    group.bench_function("kueue-baseline", |b| {
        b.iter(|| black_box(driver::run(&baseline, &mut DefaultHooks, &mut |_| {})))
    });
    group.finish();
}

criterion_group!(benches, cycle_cost, simulations);
criterion_main!(benches);
