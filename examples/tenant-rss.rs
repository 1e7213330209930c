//! Memory with many tenant plugins resident: writes N tenant bundle
//! directories (default 1,000) to a temporary directory, each a
//! `weight` policy on its own WebAssembly module with one bundle test, loads
//! them all as tenant bundles (`LoadOptions { tenant, run_tests: true }`)
//! into one `Engine::fixed`, evaluates one weight batch per tenant through
//! `hooks::Weight::evaluate`, and prints resident memory (`VmRSS`, and the peak
//! `VmHWM`, from /proc/self/status) before loading, after loading, after the
//! calls and after dropping the engine, with the load time.
//!
//! `cargo run --release --example tenant-rss [-- [N] [--small]]`
//!
//! By default every module is `policies/plugins/shortest-first.wasm` (about
//! 180 KB of Rust compiled to WebAssembly) with a custom section naming its
//! tenant appended: the same code, distinct bytes and digests, so the
//! runtime compiles and keeps each one separately, as it would 1,000
//! tenants' own builds. `--small` uses a tiny module from WAT instead (a
//! data segment naming the tenant and a constant answer). Linux only (it
//! reads /proc). Measured only, never asserted.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use arbiter_policy::bundle::{self, Hook, LoadOptions};
use arbiter_policy::engine::Engine;
use arbiter_policy::hooks::{self, HookKind};
use arbiter_policy::view::{EstimateView, WeightInput, WorkloadView};
use arbiter_policy::wasm::Runtime;

/// The same allocator as the `arbiter` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Workloads in each tenant's weight batch (`--small` modules answer for exactly this many).
const BATCH: usize = 10;

/// `module` with a custom section (id 0) named `arbiter-tenant` holding
/// `tenant` appended: the same code, different bytes and digest.
fn with_custom_section(module: &[u8], tenant: &str) -> Vec<u8> {
    use wasm_encoder::Section;
    let mut out = module.to_vec();
    wasm_encoder::CustomSection {
        name: "arbiter-tenant".into(),
        data: tenant.as_bytes().into(),
    }
    .append_to(&mut out);
    out
}

/// A tiny weight plugin answering `BATCH` scores of `i`, its data segment naming the tenant.
fn small_module(tenant: &str, i: usize) -> Result<Vec<u8>, wat::Error> {
    let scores = vec![i.to_string(); BATCH].join(",");
    let response = format!("{{\"scores\":[{scores}]}}");
    let wat = format!(
        r#"(module
  (memory (export "memory") 2)
  (data (i32.const 16) "{response}")
  (data (i32.const 4096) "{tenant}")
  (func (export "arbiter_abi_version") (result i32) i32.const 1)
  (func (export "arbiter_alloc") (param i32) (result i32) i32.const 8192)
  (func (export "arbiter_weight") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const {len}))))"#,
        len = response.len(),
    );
    wat::parse_str(wat)
}

fn bundle_yaml(tenant: &str, small: bool, i: usize) -> String {
    let (config, expect) = if small {
        (
            String::new(),
            format!("[{}]", vec![i.to_string(); BATCH].join(", ")),
        )
    } else {
        (
            "\n      config: {scale: 100.0, referenceSeconds: 3600.0, unknownScore: 0.0}"
                .to_string(),
            format!("[{}]", ["85.71428571428571"; BATCH].join(", ")),
        )
    };
    format!(
        r#"apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {{name: {tenant}-weights, version: "1"}}
spec:
  tenant: {tenant}
  policies:
  - name: shortest-first
    hook: weight
    wasm:
      module: weights.wasm{config}
  tests:
  - name: short-jobs-first
    policy: shortest-first
    input:
      workloads: [{workloads}]
    expect: {{scores: {expect}}}
"#,
        workloads =
            vec![
                format!("{{namespace: {tenant}, estimate: {{runtimeSeconds: 600, samples: 10}}}}");
                BATCH
            ]
            .join(", "),
    )
}

fn batch(tenant: &str) -> WeightInput {
    WeightInput {
        workloads: (0..BATCH)
            .map(|k| WorkloadView {
                name: format!("job-{k}"),
                namespace: tenant.to_string(),
                queue_name: "default".to_string(),
                priority: 100,
                gpus: 8,
                estimate: Some(EstimateView {
                    runtime_seconds: 600.0 * (k + 1) as f64,
                    samples: 10,
                }),
                ..WorkloadView::default()
            })
            .collect(),
        now: 3_600.0,
        ..WeightInput::default()
    }
}

/// `VmRSS` and `VmHWM` of this process, in MiB.
fn rss_mib() -> (f64, f64) {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kib| kib.parse::<f64>().ok())
            .map_or(f64::NAN, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn open_files() -> usize {
    fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

fn show(what: &str) {
    let (rss, hwm) = rss_mib();
    println!(
        "{what:<32} VmRSS {rss:8.1} MiB   VmHWM {hwm:8.1} MiB   open files {}",
        open_files()
    );
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tenant-rss: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let small = args.iter().any(|a| a == "--small");
    let tenants: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(1_000);
    let real = fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/plugins/shortest-first.wasm"),
    )?;

    let tmp = tempfile::tempdir()?;
    let mut module_bytes = 0;
    for i in 0..tenants {
        let tenant = format!("tenant-{i:04}");
        let dir = tmp.path().join(&tenant);
        fs::create_dir(&dir)?;
        let module = if small {
            small_module(&tenant, i)?
        } else {
            with_custom_section(&real, &tenant)
        };
        module_bytes += module.len();
        fs::write(dir.join("weights.wasm"), module)?;
        fs::write(dir.join("bundle.yaml"), bundle_yaml(&tenant, small, i))?;
    }
    println!(
        "{tenants} tenant bundles, {} modules, {:.0} KB each on average",
        if small {
            "small WAT"
        } else {
            "shortest-first.wasm + custom section"
        },
        module_bytes as f64 / tenants as f64 / 1e3
    );

    let runtime = Runtime::new()?;
    show("runtime started");
    let started = Instant::now();
    let mut bundles = BTreeMap::new();
    for i in 0..tenants {
        let tenant = format!("tenant-{i:04}");
        let options = LoadOptions {
            tenant: Some(tenant.clone()),
            run_tests: true,
        };
        let b = bundle::load_path(&tmp.path().join(&tenant), &runtime, &options)?;
        bundles.insert(tenant, b);
    }
    let load = started.elapsed();
    let engine = Engine::fixed(Vec::new(), bundles);
    println!(
        "loaded in {:.2} s ({:.1} ms per tenant: compile, ABI probe, bundle test); {} compiled modules",
        load.as_secs_f64(),
        load.as_secs_f64() * 1e3 / tenants as f64,
        runtime.compiled_modules()
    );
    show("after loading");

    let started = Instant::now();
    let mut logs = Vec::new();
    let mut calls = 0;
    for b in engine.bundles() {
        let tenant = b.tenant.clone().unwrap_or_default();
        let input = batch(&tenant);
        for policy in b.policies.iter().filter(|p| p.hook == Hook::Weight) {
            hooks::Weight::evaluate(policy, &input, &mut logs)
                .map_err(|e| format!("{tenant}: {e}"))?;
            calls += 1;
        }
    }
    let took = started.elapsed();
    println!(
        "{calls} weight batches of {BATCH} in {:.1} ms ({:.1} µs per batch)",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / calls as f64
    );
    show("after one batch per tenant");
    drop(engine);
    show("after dropping the engine");
    Ok(())
}
