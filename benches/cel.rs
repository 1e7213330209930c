//! CEL policy benchmarks (results in BENCHMARKS.md): one evaluation of the
//! multifactor weight formula
//! `double(workload.priority) * workload.priorityWeight * 10.0 + workload.ageSeconds / 60.0 + double(queue.priority) * 5.0`
//! - `cel/lazy`: as the engine runs it, the views bound lazily;
//! - `cel/eager`: the same program with the views first converted to
//!   `cel::Value` maps, as binding by value would;
//! - `cel/native`: the same formula as a Rust closure, the floor;
//! - `cel/bundle-multifactor`: the default bundle's `multifactor` policy
//!   itself (its params, the LocalQueue-priority null check and the age
//!   cap), as loaded, with its `config` folded in; `-native` is its twin.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::sync::Arc;

use arbiter_policy::bundle::{self, LoadOptions, Program};
use arbiter_policy::cel::{compile, CelLimits, Vars};
use arbiter_policy::view::{PodSetView, QueueView, WorkloadView};
use arbiter_policy::wasm::Runtime;
use cel::objects::{Key, Map};
use criterion::{criterion_group, criterion_main, Criterion};

/// The same allocator as the `arbiter` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FORMULA: &str = "double(workload.priority) * workload.priorityWeight * 10.0 + workload.ageSeconds / 60.0 + double(queue.priority) * 5.0";

fn views() -> (WorkloadView, QueueView) {
    let workload = WorkloadView {
        name: "train-llm".into(),
        namespace: "research".into(),
        kind: "Job".into(),
        labels: BTreeMap::from([
            ("team".into(), "nlp".into()),
            ("urgent".into(), "true".into()),
        ]),
        priority: 100,
        priority_weight: 2.0,
        queue_name: "research".into(),
        cluster_queue: "gpu".into(),
        pod_sets: vec![PodSetView {
            name: "workers".into(),
            count: 4,
            min_count: None,
            requests: BTreeMap::from([("cpu".into(), 8.0), ("nvidia.com/gpu".into(), 2.0)]),
            eligible_flavors: Vec::new(),
        }],
        requests: BTreeMap::from([("cpu".into(), 32.0), ("nvidia.com/gpu".into(), 8.0)]),
        gpus: 8,
        age_seconds: 600.0,
        ..WorkloadView::default()
    };
    let queue = QueueView {
        name: "research".into(),
        namespace: "research".into(),
        priority: Some(3),
        cluster_queue: "gpu".into(),
    };
    (workload, queue)
}

/// A view as a `cel::Value` map, through its JSON.
fn to_value(view: &impl serde::Serialize) -> cel::Value {
    fn convert(value: &serde_json::Value) -> cel::Value {
        use serde_json::Value as Json;
        match value {
            Json::Null => cel::Value::Null,
            Json::Bool(b) => cel::Value::Bool(*b),
            Json::Number(n) => match n.as_i64() {
                Some(i) => cel::Value::Int(i),
                None => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::String(s) => cel::Value::String(Arc::new(s.clone())),
            Json::Array(items) => cel::Value::List(Arc::new(items.iter().map(convert).collect())),
            Json::Object(fields) => cel::Value::Map(Map {
                map: Arc::new(
                    fields
                        .iter()
                        .map(|(k, v)| (Key::String(Arc::new(k.clone())), convert(v)))
                        .collect::<HashMap<_, _>>(),
                ),
            }),
        }
    }
    convert(&serde_json::to_value(view).unwrap_or_default())
}

fn bench(c: &mut Criterion) {
    let (workload, queue) = views();
    let program = compile(FORMULA, &CelLimits::default()).unwrap_or_else(|e| panic!("{e}"));
    let vars = Vars {
        workload: Some(&workload),
        queue: Some(&queue),
        ..Vars::default()
    };
    c.bench_function("cel/lazy", |b| {
        b.iter(|| program.eval_number(black_box(&vars)))
    });

    let env = Arc::new(cel::Env::stdlib());
    let eager = env.compile(FORMULA).unwrap_or_else(|e| panic!("{e}"));
    c.bench_function("cel/eager", |b| {
        b.iter(|| {
            let mut context = cel::Context::with_env(Arc::clone(&env));
            context.add_variable_from_value("workload", to_value(black_box(&workload)));
            context.add_variable_from_value("queue", to_value(black_box(&queue)));
            eager.execute(&context)
        })
    });

    let native = |w: &WorkloadView, q: &QueueView| {
        w.priority as f64 * w.priority_weight * 10.0
            + w.age_seconds / 60.0
            + q.priority.unwrap_or(0) as f64 * 5.0
    };
    c.bench_function("cel/native", |b| {
        b.iter(|| native(black_box(&workload), black_box(&queue)))
    });
}

/// The default bundle's `multifactor` policy as loaded (its `config` folded
/// in), one evaluation, beside the same formula in Rust.
fn bundle_multifactor(c: &mut Criterion) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let runtime = Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let bundle = bundle::load_path(&dir, &runtime, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let policy = bundle
        .policy("multifactor")
        .unwrap_or_else(|| panic!("policies/ has no multifactor policy"));
    let Program::Cel { expression, .. } = &policy.program else {
        panic!("multifactor is not a CEL policy");
    };
    let (workload, queue) = views();
    let vars = Vars {
        workload: Some(&workload),
        queue: Some(&queue),
        params: Some(&policy.cel_params),
        ..Vars::default()
    };
    let param = |name: &str| policy.params[name].as_f64().unwrap_or(f64::NAN);
    let (priority_factor, queue_factor, age_factor, max_age) = (
        param("priorityFactor"),
        param("queueFactor"),
        param("ageFactor"),
        param("maxAgeMinutes"),
    );
    let native = |w: &WorkloadView, q: &QueueView| {
        w.priority as f64 * w.priority_weight * priority_factor
            + q.priority.map_or(0.0, |p| p as f64) * queue_factor
            + (w.age_seconds / 60.0).min(max_age) * age_factor
    };
    let score = expression
        .eval_number(&vars)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        score,
        native(&workload, &queue),
        "policy and native twin agree"
    );
    c.bench_function("cel/bundle-multifactor", |b| {
        b.iter(|| expression.eval_number(black_box(&vars)))
    });
    c.bench_function("cel/bundle-multifactor-native", |b| {
        b.iter(|| native(black_box(&workload), black_box(&queue)))
    });
}

/// The slowest evaluations the budgets allow: a nested comprehension whose
/// load-time estimate is just under the platform budget (1,000,000 units),
/// run in full; and a tenant policy (200,000 units) that the run-time meter
/// stops, building strings from an annotation longer than the estimate
/// assumes. Each prints its cost units once, for ns per unit.
fn budgets(c: &mut Criterion) {
    let (mut workload, queue) = views();
    workload.annotations = BTreeMap::from([("blob".into(), "y".repeat(60 * 1024))]);
    let list = format!("[{}]", vec!["1"; 250].join(", "));
    let full = format!("{list}.all(a, {list}.all(b, a != b || a == b))");
    let program = compile(&full, &CelLimits::default()).unwrap_or_else(|e| panic!("{e}"));
    let vars = Vars {
        workload: Some(&workload),
        queue: Some(&queue),
        ..Vars::default()
    };
    eprintln!(
        "cel/at-estimate: estimated {} units",
        program.estimated_cost()
    );
    assert_eq!(program.eval_bool(&vars), Ok(true));
    c.bench_function("cel/at-estimate", |b| {
        b.iter(|| program.eval_bool(black_box(&vars)))
    });
    let tenant = CelLimits {
        max_cost: 200_000,
        ..CelLimits::default()
    };
    let overrun = format!("size({list}.map(i, workload.annotations['blob'] + 'z')) > 0");
    let program = compile(&overrun, &tenant).unwrap_or_else(|e| panic!("{e}"));
    assert!(program.eval_bool(&vars).is_err(), "stopped by the meter");
    c.bench_function("cel/stopped-at-tenant-budget", |b| {
        b.iter(|| program.eval_bool(black_box(&vars)))
    });
}

criterion_group!(benches, bench, bundle_multifactor, budgets);
criterion_main!(benches);
