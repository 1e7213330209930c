//! Policy engine benchmarks (results in BENCHMARKS.md, "Policy engine"): one
//! weight batch of 1,000 workloads through `hooks::Weight::evaluate`, the path the
//! engine takes, with every cost included, beside native Rust closures
//! computing the same formulas over the same views:
//! - `policy/weight-1000/wasm-shortest-first`: the default bundle's WASM
//!   plugin — request JSON, a fresh instance, the call, response parsing and
//!   checks;
//! - `policy/weight-1000/native-shortest-first`: its formula in Rust;
//! - `policy/weight-1000/cel-multifactor`: the default bundle's CEL policy;
//! - `policy/weight-1000/native-multifactor`: its formula in Rust;
//! - `policy/weight-1000/request-json`: serialising the request alone, as
//!   `shortest-first` gets it (only `workloads.estimate`, which it declares),
//!   the part of the WASM cost spent before the plugin runs;
//! - `policy/weight-1000/request-json-whole`: the same request with whole
//!   views, as a plugin that declares no fields gets it.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;

use arbiter_policy::bundle::{self, Bundle, LoadOptions, Policy, Program};
use arbiter_policy::hooks::{self, HookKind};
use arbiter_policy::view::{
    ClusterQueueView, EstimateView, PodSetView, QueueView, TenantView, WeightFields, WeightInput,
    WeightRequest, WorkloadView,
};
use arbiter_policy::wasm::Runtime;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// The same allocator as the `arbiter` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BATCH: usize = 1_000;
const NAMESPACES: [&str; 4] = ["ai-research", "production", "development", "vision"];

/// A distributed training job as the engine builds its view: labels, a
/// launcher and a worker pod set, totals, an estimate for most.
fn workload(i: usize) -> WorkloadView {
    let namespace = NAMESPACES[i % NAMESPACES.len()];
    let workers = 1 + (i % 8) as u32;
    let gpus_per_worker = [1.0, 2.0, 4.0, 8.0][i % 4];
    let worker = BTreeMap::from([
        ("cpu".to_string(), 8.0),
        ("memory".to_string(), 64.0 * (1u64 << 30) as f64),
        ("nvidia.com/gpu".to_string(), gpus_per_worker),
    ]);
    let launcher = BTreeMap::from([
        ("cpu".to_string(), 1.0),
        ("memory".to_string(), 2.0 * (1u64 << 30) as f64),
    ]);
    let mut requests = BTreeMap::new();
    for (per_pod, count) in [(&launcher, 1.0), (&worker, workers as f64)] {
        for (r, a) in per_pod {
            *requests.entry(r.clone()).or_insert(0.0) += a * count;
        }
    }
    WorkloadView {
        name: format!("train-{i:05}"),
        namespace: namespace.to_string(),
        kind: "PyTorchJob".to_string(),
        labels: BTreeMap::from([
            (
                "app.kubernetes.io/name".to_string(),
                "llm-pretrain".to_string(),
            ),
            ("team".to_string(), format!("team-{}", i % 12)),
            (
                "kueue.x-k8s.io/queue-name".to_string(),
                format!("{namespace}-queue"),
            ),
        ]),
        priority: [50, 100, 200, 1000][i % 4],
        priority_class: Some(["batch", "standard", "high", "critical"][i % 4].to_string()),
        priority_weight: [0.5, 1.0, 1.5, 2.0][i % 4],
        queue_name: format!("{namespace}-queue"),
        cluster_queue: "ai-cluster-queue".to_string(),
        pod_sets: vec![
            PodSetView {
                name: "launcher".to_string(),
                count: 1,
                min_count: None,
                requests: launcher,
                eligible_flavors: Vec::new(),
            },
            PodSetView {
                name: "worker".to_string(),
                count: workers,
                min_count: Some(1),
                requests: worker,
                eligible_flavors: Vec::new(),
            },
        ],
        gpus: (gpus_per_worker * workers as f64) as i64,
        requests,
        age_seconds: (i * 37 % 7_200) as f64,
        retries: (i % 3) as u32,
        evictions: i.is_multiple_of(5) as u32,
        // One in ten has no estimate yet.
        estimate: (!i.is_multiple_of(10)).then(|| EstimateView {
            runtime_seconds: 300.0 + (i * 613 % 86_400) as f64,
            samples: 5 + (i % 40) as u32,
        }),
        ..WorkloadView::default()
    }
}

fn input() -> WeightInput {
    let workloads: Vec<WorkloadView> = (0..BATCH).map(workload).collect();
    let mut input = WeightInput {
        now: 86_400.0,
        ..WeightInput::default()
    };
    for (p, ns) in NAMESPACES.iter().enumerate() {
        let name = format!("{ns}-queue");
        input.queues.insert(
            format!("{ns}/{name}"),
            QueueView {
                name,
                namespace: ns.to_string(),
                priority: Some(100 + 50 * p as i64),
                cluster_queue: "ai-cluster-queue".to_string(),
            },
        );
        input.tenants.insert(
            ns.to_string(),
            TenantView {
                name: ns.to_string(),
                labels: BTreeMap::from([("tier".to_string(), "gold".to_string())]),
                ..TenantView::default()
            },
        );
    }
    input.cluster_queues.insert(
        "ai-cluster-queue".to_string(),
        ClusterQueueView {
            name: "ai-cluster-queue".to_string(),
            cohort: Some("ai".to_string()),
            nominal: BTreeMap::from([(
                "a100".to_string(),
                BTreeMap::from([("nvidia.com/gpu".to_string(), 64.0)]),
            )]),
            ..ClusterQueueView::default()
        },
    );
    input.workloads = workloads;
    input
}

fn param(policy: &Policy, name: &str) -> f64 {
    policy.params[name]
        .as_f64()
        .unwrap_or_else(|| panic!("{} has no numeric config {name}", policy.name))
}

fn bench(c: &mut Criterion) {
    let runtime = Runtime::new().expect("the WebAssembly runtime starts");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let bundle: Bundle = bundle::load_path(&dir, &runtime, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let policy = |name: &str| {
        bundle
            .policy(name)
            .unwrap_or_else(|| panic!("policies/ has no policy {name}"))
    };
    let (shortest, multifactor) = (policy("shortest-first"), policy("multifactor"));
    let input = input();

    let (scale, reference, unknown) = (
        param(shortest, "scale"),
        param(shortest, "referenceSeconds"),
        param(shortest, "unknownScore"),
    );
    let native_shortest = |input: &WeightInput| -> Vec<f64> {
        input
            .workloads
            .iter()
            .map(|w| match &w.estimate {
                Some(e) => scale / (1.0 + e.runtime_seconds.max(0.0) / reference),
                None => unknown,
            })
            .collect()
    };
    let (priority_factor, queue_factor, age_factor, max_age) = (
        param(multifactor, "priorityFactor"),
        param(multifactor, "queueFactor"),
        param(multifactor, "ageFactor"),
        param(multifactor, "maxAgeMinutes"),
    );
    let native_multifactor = |input: &WeightInput| -> Vec<f64> {
        input
            .workloads
            .iter()
            .map(|w| {
                let queue = input
                    .queues
                    .get(&format!("{}/{}", w.namespace, w.queue_name))
                    .and_then(|q| q.priority)
                    .map_or(0.0, |p| p as f64);
                w.priority as f64 * w.priority_weight * priority_factor
                    + queue * queue_factor
                    + (w.age_seconds / 60.0).min(max_age) * age_factor
            })
            .collect()
    };

    // The policies and their native twins agree before anything is timed.
    // (JSON carries the plugin's numbers, so they may differ in the last bit.)
    let mut logs = Vec::new();
    let same = |a: &[f64], b: &[f64]| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| (x - y).abs() <= 1e-12 * x.abs().max(1.0))
    };
    let wasm_scores =
        hooks::Weight::evaluate(shortest, &input, &mut logs).unwrap_or_else(|e| panic!("{e}"));
    assert!(same(&wasm_scores, &native_shortest(&input)));
    let cel_scores =
        hooks::Weight::evaluate(multifactor, &input, &mut logs).unwrap_or_else(|e| panic!("{e}"));
    assert!(same(&cel_scores, &native_multifactor(&input)));

    let mut group = c.benchmark_group("policy/weight-1000");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("wasm-shortest-first", |b| {
        b.iter(|| {
            logs.clear();
            hooks::Weight::evaluate(shortest, black_box(&input), &mut logs)
        })
    });
    group.bench_function("native-shortest-first", |b| {
        b.iter(|| native_shortest(black_box(&input)))
    });
    group.bench_function("cel-multifactor", |b| {
        b.iter(|| hooks::Weight::evaluate(multifactor, black_box(&input), &mut logs))
    });
    group.bench_function("native-multifactor", |b| {
        b.iter(|| native_multifactor(black_box(&input)))
    });
    // The request as `shortest-first` gets it: only the fields it declares.
    let Program::Wasm { weight_fields, .. } = &shortest.program else {
        panic!("shortest-first is not a WASM policy");
    };
    assert_eq!(weight_fields.names(), ["workloads.estimate"]);
    group.bench_function("request-json", |b| {
        b.iter(|| {
            serde_json::to_vec(&WeightRequest::new(
                black_box(&input),
                &shortest.params,
                weight_fields,
            ))
        })
    });
    // ... and whole, as a plugin that declares nothing gets it.
    group.bench_function("request-json-whole", |b| {
        b.iter(|| {
            serde_json::to_vec(&WeightRequest::new(
                black_box(&input),
                &shortest.params,
                &WeightFields::ALL,
            ))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
