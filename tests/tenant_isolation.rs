//! DESIGN §3's promise: a tenant's plugin orders only that tenant's own
//! workloads. Three hostile tenants — one loops forever, one traps, one
//! returns absurd scores — and every other tenant's schedule is identical
//! to the run without any tenant plugin.

use std::collections::BTreeMap;
use std::path::Path;

use arbiter_core::scheduler::hooks::DefaultHooks;
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
