//! docs/design.md §4's deterministic budget: a plugin's budget is counted in fuel
//! (WebAssembly instructions), not wall time, so a plugin running near its
//! budget decides the same on any machine and under any load, and
//! `arbiter simulate --reproducible` writes the same report every time —
//! here with every core kept busy by other threads while it runs.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use assert_cmd::Command;
use serde_json::Value;

/// Iterations of the plugin's loop per byte of its request.
const SPIN_PER_BYTE: u64 = 1_000;

/// An admission plugin that spins `SPIN_PER_BYTE` × its request's length
/// (about 8 fuel an iteration), then allows. Requests differ in length by
/// the workloads' padding annotation, so some calls fit the budget and
/// the longer ones run out of fuel.
fn spinning_plugin() -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
          (memory (export "memory") 1)
          (data (i32.const 16) "{{\"allowed\":true}}")
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param i32) (result i32) i32.const 1024)
          (func (export "arbiter_admission") (param $p i32) (param $n i32) (result i64)
            (local $i i64)
            (local.set $i (i64.mul (i64.extend_i32_u (local.get $n)) (i64.const {SPIN_PER_BYTE})))
            (block $done
              (loop $spin
                (br_if $done (i64.eqz (local.get $i)))
                (local.set $i (i64.sub (local.get $i) (i64.const 1)))
                (br $spin)))
            (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 16))))"#
    ))
    .expect("test WAT is valid")
}

/// One ClusterQueue with room for everyone, and 41 jobs whose admission
/// requests grow by 250 bytes each: from ~1 KB (about 8 million fuel, within
/// the 10 million of `timeoutMs: 5`) to ~11 KB (about 88 million).
fn scenario(dir: &Path) {
    let mut yaml = String::from(
        "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: gpu}\n---\n\
         apiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {name: shared}\nspec:\n  \
         resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: gpu\n      \
         resources: [{name: nvidia.com/gpu, nominalQuota: \"1000\"}]\n---\n\
         apiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: q, namespace: team}\n\
         spec: {clusterQueue: shared}\n",
    );
    for i in 0..41 {
        yaml += &format!(
            "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: job-{i:02}\n  namespace: team\n  \
             labels: {{arbiter.dev/queue-name: q}}\n  annotations: {{sim.arbiter.dev/runtime: 10m, \
             example.com/pad: \"{}\"}}\nspec:\n  template:\n    spec:\n      containers:\n      \
             - name: main\n        resources: {{requests: {{nvidia.com/gpu: \"1\"}}}}\n",
            "x".repeat(i * 250)
        );
    }
    std::fs::write(dir.join("scenario.yaml"), yaml).expect("writes the scenario");
    let bundle = dir.join("bundle");
    std::fs::create_dir_all(&bundle).expect("creates the bundle directory");
    std::fs::write(bundle.join("spin.wasm"), spinning_plugin()).expect("writes the module");
    std::fs::write(
        bundle.join("bundle.yaml"),
        "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {name: spin}\nspec:\n  \
         policies:\n  - name: spin\n    hook: admission\n    failurePolicy: Ignore\n    \
         wasm: {module: spin.wasm}\n    limits: {timeoutMs: 5}\n",
    )
    .expect("writes bundle.yaml");
}

fn simulate(dir: &Path) -> String {
    let output = Command::cargo_bin("arbiter")
        .unwrap_or_else(|e| panic!("arbiter binary: {e}"))
        .current_dir(dir)
        .args([
            "simulate",
            "scenario.yaml",
            "--policies",
            "bundle",
            "--reproducible",
            "--format",
            "json",
        ])
        .output()
        .expect("arbiter runs");
    assert!(
        output.status.success(),
        "simulate failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("the report is UTF-8")
}

/// Keeps every core busy until dropped.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start() -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Fails naming the first line where two reports differ (they are long).
fn same(what: &str, a: &str, b: &str) {
    let mut lines = a.lines().zip(b.lines()).enumerate();
    if let Some((at, (x, y))) = lines.find(|(_, (x, y))| x != y) {
        panic!("{what} differ at line {}:\n  {x}\n  {y}", at + 1);
    }
    assert_eq!(
        a.lines().count(),
        b.lines().count(),
        "{what} differ in length"
    );
}

#[test]
fn a_plugin_near_its_budget_gives_identical_reproducible_reports_under_cpu_load() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    scenario(dir.path());
    let quiet = simulate(dir.path());
    let (first, second) = {
        let _load = Load::start();
        (simulate(dir.path()), simulate(dir.path()))
    };
    same("two runs under load", &first, &second);
    same("a run under load and one without", &first, &quiet);
    // Not vacuous: the plugin did run near its budget, fitting it on some
    // calls and running out of fuel on others.
    let report: Value = serde_json::from_str(&first).expect("the report is JSON");
    let stats = &report["policies"]["byPolicy"][0];
    let evaluations = stats["evaluations"].as_u64().expect("evaluations counted");
    let out_of_fuel = stats["errors"]["out_of_fuel"].as_u64().unwrap_or(0);
    assert!(
        out_of_fuel > 0 && out_of_fuel < evaluations,
        "{out_of_fuel} of {evaluations} calls ran out of fuel: {stats:#}"
    );
    assert_eq!(
        stats["errors"].as_object().map(|e| e.len()),
        Some(1),
        "{stats:#}"
    );
}
