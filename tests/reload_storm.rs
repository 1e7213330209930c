//! Hot reload under load: a cycle always sees one whole bundle, a storm of
//! reloads while the scheduler runs loses nothing, and 1,000 reloads of a
//! bundle with a WASM module leave the resident memory flat.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arbiter_core::scheduler::hooks::Hooks;
use arbiter_policy::bundle::{self, Bundle, Hook, LoadOptions};
use arbiter_policy::engine::{Engine, Sources};
use arbiter_policy::reload::{ReloadOutcome, Reloadable};
use arbiter_policy::wasm::Runtime;
use arbiter_sim::{driver, scenario};

/// A bundle whose one weight policy scores every workload `score` (CEL), plus a WASM policy.
fn write_bundle(dir: &Path, version: u32) {
    std::fs::create_dir_all(dir).unwrap();
    let wat = format!(
        r#"(module
          (memory (export "memory") 1)
          (data (i32.const 1024) "{{\"scores\":[]}}")
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param i32) (result i32) i32.const 4096)
          (func (export "arbiter_weight") (param i32 i32) (result i64) i64.const {}))
          (func (export "v{version}"))"#,
        (1024i64 << 32) | 13
    );
    let wat = wat.replace("))\n          (func (export", ")\n          (func (export") + ")";
    std::fs::write(dir.join("w.wasm"), wat::parse_str(&wat).unwrap()).unwrap();
    std::fs::write(
        dir.join("bundle.yaml"),
        format!(
            "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: storm, version: \"{version}\"}}\n\
             spec:\n  policies:\n  - {{name: score, hook: weight, cel: {{expression: 'double(params.v)'}}, config: {{v: {version}}}}}\n  \
             - {{name: idle, hook: weight, match: {{namespaces: [nobody]}}, wasm: {{module: w.wasm}}}}\n"
        ),
    )
    .unwrap();
}

fn load_dir(dir: &Path, runtime: &Runtime) -> Result<Bundle, bundle::BundleError> {
    bundle::load_path(dir, runtime, &LoadOptions::default())
}

fn generated_scenario(dir: &Path) -> scenario::Scenario {
    let file = dir.join("s.yaml");
    std::fs::write(
        &file,
        "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: f}\n---\n\
         apiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources: [{name: cpu, nominalQuota: \"10\"}]\n---\n\
         apiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: q, namespace: ns}\nspec: {clusterQueue: cq}\n---\n\
         apiVersion: sim.arbiter.dev/v1alpha1\nkind: WorkloadGenerator\nmetadata: {name: g}\nspec:\n  count: 3000\n  namespace: ns\n  queueName: q\n  interval: 100ms\n  runtime: 1s\n  podSets: [{name: main, count: 1, requests: {cpu: \"1\"}}]\n",
    )
    .unwrap();
    scenario::build(arbiter_sim::files::load_paths(&[file]).unwrap()).unwrap()
}

#[test]
fn reload_storm_while_scheduling_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bundle_dir = dir.path().join("bundle");
    write_bundle(&bundle_dir, 1);
    let runtime = Arc::new(Runtime::new().unwrap());
    let source = Arc::new(Reloadable::new(load_dir(&bundle_dir, &runtime).unwrap()));
    let mut engine = Engine::new(Sources {
        platform: vec![source.clone()],
        tenants: Default::default(),
    });
    let scenario = generated_scenario(dir.path());
    let stop = Arc::new(AtomicBool::new(false));
    let reloader = {
        let (source, runtime, stop) = (source.clone(), runtime.clone(), stop.clone());
        let dirs: Vec<_> = (1..=2)
            .map(|v| {
                let d = dir.path().join(format!("v{v}"));
                write_bundle(&d, v);
                d
            })
            .collect();
        std::thread::spawn(move || {
            let (mut swaps, mut attempt) = (0u32, 0usize);
            while !stop.load(Ordering::Relaxed) || swaps < 20 {
                attempt += 1;
                let d = &dirs[attempt % 2];
                if let ReloadOutcome::Swapped { .. } = source.reload_with(|| load_dir(d, &runtime))
                {
                    swaps += 1;
                }
            }
            swaps
        })
    };
    let report = driver::run(&scenario, &mut engine, &mut |_| {});
    stop.store(true, Ordering::Relaxed);
    let swaps = reloader.join().unwrap();
    assert!(swaps >= 20);
    assert_eq!(report.summary.workloads, 3000);
    assert_eq!(
        report.summary.finished, 3000,
        "every workload ran to the end"
    );
    // Every score came from one whole bundle: 1 or 2, never anything else.
    for d in engine.decisions().iter().filter(|d| d.hook == Hook::Weight) {
        let v = d.result.as_f64().unwrap();
        assert!(v == 1.0 || v == 2.0, "score {v}");
    }
}

#[test]
fn one_call_sees_one_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    write_bundle(&a, 1);
    write_bundle(&b, 2);
    let runtime = Runtime::new().unwrap();
    let source = Arc::new(Reloadable::new(load_dir(&a, &runtime).unwrap()));
    let mut engine = Engine::new(Sources {
        platform: vec![source.clone()],
        tenants: Default::default(),
    });
    engine.begin(arbiter_core::model::Millis::ZERO);
    let pinned = engine.bundles()[0].version.clone();
    let _ = source.reload_with(|| load_dir(&b, &runtime));
    // Still pinned until the next call begins.
    assert_eq!(engine.bundles()[0].version, pinned);
    engine.begin(arbiter_core::model::Millis(1));
    assert_eq!(engine.bundles()[0].version, "2");
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

#[test]
fn thousand_reloads_keep_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    let dirs: Vec<_> = (1..=2)
        .map(|v| {
            let d = dir.path().join(format!("v{v}"));
            write_bundle(&d, v);
            d
        })
        .collect();
    let runtime = Runtime::new().unwrap();
    let source = Reloadable::new(load_dir(&dirs[0], &runtime).unwrap());
    let reload = |i: usize| {
        let outcome = source.reload_with(|| load_dir(&dirs[i % 2], &runtime));
        assert!(
            matches!(outcome, ReloadOutcome::Swapped { .. }),
            "{outcome:?}"
        );
    };
    for i in 1..=100 {
        reload(i);
    }
    let before = rss_bytes();
    for i in 101..=1100 {
        reload(i);
    }
    let after = rss_bytes();
    let growth = after.saturating_sub(before);
    assert!(
        growth < 32 << 20,
        "RSS grew by {} MiB over 1,000 reloads ({} → {} MiB)",
        growth >> 20,
        before >> 20,
        after >> 20
    );
}
