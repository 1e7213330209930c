//! docs/design.md §3's promise: a tenant's plugin orders only that tenant's own
//! workloads and sees nothing of anyone else's. Three hostile tenants — one
//! loops forever, one traps, one returns absurd scores — and every other
//! tenant's schedule is identical to the run without any tenant plugin; a
//! tenant scoring its workloads by size cannot hand a big one a small one's
//! earlier slot (issue 10's attack); a snooping plugin finds no trace of
//! another namespace in its request. `tests/tenant_properties.rs` proves the
//! guarantee over random scenarios.

use std::collections::BTreeMap;
use std::path::Path;

use arbiter_core::model::Millis;
use arbiter_core::scheduler::hooks::{DefaultHooks, Hooks, WeightRequest};
use arbiter_core::scheduler::intake::{intake, Intake};
use arbiter_core::scheduler::{Input, Scheduler};
use arbiter_policy::bundle::{self, LoadOptions};
use arbiter_policy::engine::Engine;
use arbiter_policy::wasm::Runtime;
use arbiter_sim::report::Report;
use arbiter_sim::{driver, scenario};

const TENANTS: [&str; 5] = ["t-loop", "t-trap", "t-absurd", "t-good1", "t-good2"];

fn scenario_yaml() -> String {
    let mut y = String::from(
        "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: gpu}\n---\n\
         apiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {name: shared}\nspec:\n  \
         resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: gpu\n      \
         resources: [{name: nvidia.com/gpu, nominalQuota: \"8\"}]\n",
    );
    for t in TENANTS {
        y += &format!(
            "---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {{name: q, namespace: {t}}}\nspec: {{clusterQueue: shared}}\n"
        );
    }
    // Every job arrives at once, in tenant-interleaved order; all the same size and runtime.
    for i in 0..6 {
        for t in TENANTS {
            y += &format!(
                "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {t}-{i}\n  namespace: {t}\n  \
                 labels: {{arbiter.dev/queue-name: q}}\n  annotations: {{sim.arbiter.dev/runtime: 10m}}\n\
                 spec:\n  template:\n    spec:\n      containers:\n      - name: main\n        \
                 resources: {{requests: {{nvidia.com/gpu: \"2\"}}}}\n"
            );
        }
    }
    y
}

/// A module whose `arbiter_weight` runs `body` (WAT instructions returning i64).
fn plugin(body: &str, data: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
          (memory (export "memory") 1)
          (data (i32.const 1024) "{data}")
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param i32) (result i32) i32.const 4096)
          (func (export "arbiter_weight") (param i32 i32) (result i64) {body}))"#
    ))
    .expect("test WAT is valid")
}

fn tenant_bundle(dir: &Path, tenant: &str, wasm: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("p.wasm"), wasm).unwrap();
    std::fs::write(
        dir.join("bundle.yaml"),
        format!(
            "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: {tenant}}}\n\
             spec:\n  tenant: {tenant}\n  policies:\n  - {{name: order, hook: weight, failurePolicy: Ignore, wasm: {{module: p.wasm}}}}\n"
        ),
    )
    .unwrap();
}

fn run(with_plugins: bool) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scenario.yaml");
    std::fs::write(&file, scenario_yaml()).unwrap();
    let scenario = scenario::build(arbiter_sim::files::load_paths(&[file]).unwrap()).unwrap();
    if !with_plugins {
        return driver::run(&scenario, &mut DefaultHooks, &mut |_| {});
    }
    let absurd = r#"{\"scores\":[-1e308,1e308,-5e307,7e307,0,1e300]}"#;
    let modules = [
        ("t-loop", plugin("(loop (br 0)) i64.const 0", "")),
        ("t-trap", plugin("unreachable", "")),
        (
            "t-absurd",
            plugin(
                &format!(
                    "i64.const {}",
                    (1024i64 << 32) | (absurd.len() - absurd.matches('\\').count()) as i64
                ),
                absurd,
            ),
        ),
    ];
    let runtime = Runtime::new().unwrap();
    let mut tenants = BTreeMap::new();
    for (tenant, wasm) in modules {
        let path = dir.path().join(tenant);
        tenant_bundle(&path, tenant, &wasm);
        let options = LoadOptions {
            tenant: Some(tenant.into()),
            run_tests: true,
        };
        tenants.insert(
            tenant.to_string(),
            bundle::load_path(&path, &runtime, &options).unwrap(),
        );
    }
    let mut engine = Engine::fixed(Vec::new(), tenants);
    let report = driver::run(&scenario, &mut engine, &mut |_| {});
    // The hostile plugins did run and fail as expected.
    let kinds: Vec<String> = engine
        .stats()
        .flat_map(|s| s.errors.keys().cloned())
        .collect();
    assert!(kinds.contains(&"out_of_fuel".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"trap".to_string()), "{kinds:?}");
    report
}

fn schedule(report: &Report, tenant: &str) -> Vec<(String, Option<f64>)> {
    report
        .workloads
        .iter()
        .filter(|w| w.namespace == tenant)
        .map(|w| (w.name.clone(), w.admitted_seconds))
        .collect()
}

#[test]
fn hostile_tenant_plugins_cannot_change_anyone_elses_schedule() {
    let without = run(false);
    let with = run(true);
    for tenant in ["t-good1", "t-good2", "t-loop", "t-trap"] {
        assert_eq!(
            schedule(&without, tenant),
            schedule(&with, tenant),
            "{tenant}'s schedule changed"
        );
    }
    // The absurd tenant's own order did change (its plugin took effect) ...
    let before = schedule(&without, "t-absurd");
    let after = schedule(&with, "t-absurd");
    assert_ne!(before, after);
    // ... but only among the times its workloads had anyway.
    let times = |s: &[(String, Option<f64>)]| {
        let mut t: Vec<String> = s.iter().map(|(_, a)| format!("{a:?}")).collect();
        t.sort();
        t
    };
    assert_eq!(times(&before), times(&after));
    // Its highest score (1e308, second workload) went first.
    let first = after
        .iter()
        .min_by(|a, b| a.1.partial_cmp(&b.1).unwrap())
        .unwrap();
    assert_eq!(first.0, "t-absurd-1");
}

/// A tenant bundle holding one `weight` policy with this CEL expression.
fn cel_tenant_bundle(
    dir: &Path,
    tenant: &str,
    expression: &str,
) -> arbiter_policy::compiled::Bundle {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("bundle.yaml"),
        format!(
            "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: {tenant}-order}}\n\
             spec:\n  tenant: {tenant}\n  policies:\n  - {{name: order, hook: weight, cel: {{expression: '{expression}'}}}}\n"
        ),
    )
    .unwrap();
    let options = LoadOptions {
        tenant: Some(tenant.into()),
        run_tests: true,
    };
    bundle::load_path(dir, &Runtime::new().unwrap(), &options).unwrap()
}

/// Issue 10's attack: one ClusterQueue of 8 GPUs; ns-a/a-small (1 GPU),
/// ns-b/b (7) and ns-a/a-big (8) arrive together. ns-a's bundle scores by
/// GPUs, which would hand a-big a-small's earlier slot: a-big would fill the
/// queue and b wait 600 s instead of 0. A workload may only take the slot of
/// one of its tenant's that asks the same, so nothing moves.
#[test]
fn a_tenant_cannot_hand_a_bigger_workload_a_smaller_ones_earlier_slot() {
    for strategy in ["BestEffortFIFO", "StrictFIFO"] {
        let mut y = format!(
            "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {{name: gpu}}\n---\n\
             apiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {{name: shared}}\nspec:\n  \
             queueingStrategy: {strategy}\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    \
             flavors:\n    - name: gpu\n      resources: [{{name: nvidia.com/gpu, nominalQuota: \"8\"}}]\n"
        );
        for ns in ["ns-a", "ns-b"] {
            y += &format!(
                "---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {{name: q, namespace: {ns}}}\nspec: {{clusterQueue: shared}}\n"
            );
        }
        for (ns, name, gpus) in [
            ("ns-a", "a-small", 1),
            ("ns-b", "b", 7),
            ("ns-a", "a-big", 8),
        ] {
            y += &format!(
                "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  namespace: {ns}\n  \
                 labels: {{arbiter.dev/queue-name: q}}\n  annotations: {{sim.arbiter.dev/runtime: 10m}}\n\
                 spec:\n  template:\n    spec:\n      containers:\n      - name: main\n        \
                 resources: {{requests: {{nvidia.com/gpu: \"{gpus}\"}}}}\n"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("scenario.yaml");
        std::fs::write(&file, y).unwrap();
        let scenario = scenario::build(arbiter_sim::files::load_paths(&[file]).unwrap()).unwrap();
        let without = driver::run(&scenario, &mut DefaultHooks, &mut |_| {});
        let tenants = BTreeMap::from([(
            "ns-a".to_string(),
            cel_tenant_bundle(&dir.path().join("a"), "ns-a", "double(workload.gpus)"),
        )]);
        let mut engine = Engine::fixed(Vec::new(), tenants);
        let with = driver::run(&scenario, &mut engine, &mut |_| {});
        // The tenant's policy did score its workloads ...
        let evaluations: u64 = engine.stats().map(|s| s.evaluations).sum();
        assert!(evaluations >= 2, "{strategy}: {evaluations} evaluations");
        let times = |r: &Report| {
            r.workloads
                .iter()
                .map(|w| (w.name.clone(), w.admitted_seconds))
                .collect::<Vec<_>>()
        };
        // ... and nobody's schedule changed: b starts at once.
        assert_eq!(times(&without), times(&with), "{strategy}");
        let b = with.workloads.iter().find(|w| w.name == "b").unwrap();
        assert_eq!(b.admitted_seconds, Some(0.0), "{strategy}");
    }
}

/// A tenant weight plugin that answers 2 if the request it gets holds the
/// bytes `other` anywhere, else 1 (for a batch of one).
fn snooping_plugin() -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
          (memory (export "memory") 1)
          (data (i32.const 1024) "{{\"scores\":[1]}}")
          (data (i32.const 1100) "{{\"scores\":[2]}}")
          (data (i32.const 2048) "other")
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param i32) (result i32) i32.const 4096)
          (func $found (param $ptr i32) (param $len i32) (result i32)
            (local $i i32) (local $j i32)
            (block $none
              (loop $outer
                (br_if $none (i32.gt_u (i32.add (local.get $i) (i32.const 5)) (local.get $len)))
                (local.set $j (i32.const 0))
                (block $miss
                  (loop $inner
                    (if (i32.eq (local.get $j) (i32.const 5)) (then (return (i32.const 1))))
                    (br_if $miss (i32.ne
                      (i32.load8_u (i32.add (local.get $ptr) (i32.add (local.get $i) (local.get $j))))
                      (i32.load8_u (i32.add (i32.const 2048) (local.get $j)))))
                    (local.set $j (i32.add (local.get $j) (i32.const 1)))
                    (br $inner)))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $outer)))
            (i32.const 0))
          (func (export "arbiter_weight") (param $p i32) (param $l i32) (result i64)
            (if (result i64) (call $found (local.get $p) (local.get $l))
              (then (i64.const {found}))
              (else (i64.const {clean})))))"#,
        found = (1100i64 << 32) | 14,
        clean = (1024i64 << 32) | 14,
    ))
    .expect("test WAT is valid")
}

/// docs/design.md §3: no tenant's policy sees another tenant's data. A weight batch
/// holds workloads of several namespaces; the tenant plugin of `mine` gets
/// only its own workload and the queue, namespace and ClusterQueue views
/// its own workloads use — nothing of namespace `other` (its labels,
/// annotations, LocalQueue, workloads or ClusterQueue).
#[test]
fn a_tenant_plugin_sees_nothing_of_another_tenant() {
    let mut y = String::from(
        "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: gpu}\n",
    );
    for cq in ["shared", "othercq"] {
        y += &format!(
            "---\napiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {{name: {cq}}}\nspec:\n  \
             resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: gpu\n      \
             resources: [{{name: nvidia.com/gpu, nominalQuota: \"8\"}}]\n"
        );
    }
    y += "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: mine, labels: {team: a}}\n\
          ---\napiVersion: v1\nkind: Namespace\nmetadata: {name: other, labels: {team: other-team}, annotations: {owner: other-owner}}\n\
          ---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: q, namespace: mine}\nspec: {clusterQueue: shared}\n\
          ---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: q, namespace: other}\nspec: {clusterQueue: shared}\n\
          ---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: q2, namespace: other}\nspec: {clusterQueue: othercq}\n";
    for (ns, name, queue) in [
        ("other", "o-1", "q"),
        ("mine", "m-1", "q"),
        ("other", "o-2", "q2"),
    ] {
        y += &format!(
            "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  namespace: {ns}\n  \
             labels: {{arbiter.dev/queue-name: {queue}, secret: {ns}-label}}\n  annotations: {{note: {ns}-note}}\n\
             spec:\n  template:\n    spec:\n      containers:\n      - name: main\n        \
             resources: {{requests: {{nvidia.com/gpu: \"1\"}}}}\n"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scenario.yaml");
    std::fs::write(&file, y).unwrap();
    let scenario = scenario::build(arbiter_sim::files::load_paths(&[file]).unwrap()).unwrap();
    let mut state = Scheduler::new(scenario.cluster.clone(), &[]);
    let inputs = scenario
        .jobs
        .iter()
        .map(
            |job| match intake(&scenario.cluster, &job.info, job.explicit_priority) {
                Intake::Queued(w) => Input::Submit(w),
                other => panic!("{} not queued: {other:?}", job.info.name),
            },
        )
        .collect();
    let ids = state
        .step(Millis::ZERO, inputs, &mut DefaultHooks)
        .submitted;
    let path = dir.path().join("mine");
    tenant_bundle(&path, "mine", &snooping_plugin());
    let options = LoadOptions {
        tenant: Some("mine".into()),
        run_tests: true,
    };
    let bundle = bundle::load_path(&path, &Runtime::new().unwrap(), &options).unwrap();
    let mut engine = Engine::fixed(Vec::new(), BTreeMap::from([("mine".to_string(), bundle)]));
    let now = Millis::from_secs(1);
    engine.begin(now);
    let batch: Vec<WeightRequest<'_>> = ids
        .iter()
        .map(|&id| WeightRequest {
            state: state.hook_state(),
            entry: state.entry(id),
            now,
        })
        .collect();
    let weights = engine.weight(&batch);
    let errors: Vec<String> = engine
        .stats()
        .flat_map(|s| s.errors.keys().cloned())
        .collect();
    assert!(errors.is_empty(), "the plugin failed: {errors:?}");
    // The order of the batch: o-1, m-1, o-2.
    assert_eq!(weights[0].tenant, None);
    assert_eq!(
        weights[1].tenant,
        Some(1.0),
        "the tenant plugin of `mine` saw data of namespace `other`"
    );
    assert_eq!(weights[2].tenant, None);
}
