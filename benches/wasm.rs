//! WebAssembly plugin benchmarks (results in BENCHMARKS.md): the cost of one
//! hook call, which always pays for a fresh instance (ABI.md: no state
//! survives between calls):
//! - `wasm/call/trivial`: a weight hook that returns a constant;
//! - `wasm/call/echo-4KiB`: a 4 KiB request written through `arbiter_alloc`
//!   and echoed back;
//! - `wasm/call/wasi`: a hook that calls `random_get` (answered by the host;
//!   until issue 10 it built the WASI context).

use std::hint::black_box;

use arbiter_policy::wasm::{Hook, Limits, LoadLimits, Runtime};
use criterion::{criterion_group, criterion_main, Criterion};

/// The same allocator as the `arbiter` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PLUGIN: &str = r#"(module
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"scores\":[1]}")
  (func (export "arbiter_abi_version") (result i32) i32.const 1)
  (func (export "arbiter_alloc") (param i32) (result i32) i32.const 1024)
  (func (export "arbiter_weight") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 14)))
  (func (export "arbiter_admission") (param $p i32) (param $n i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32))
            (i64.extend_i32_u (local.get $n))))
  (func (export "arbiter_flavor") (param i32 i32) (result i64)
    (drop (call $random_get (i32.const 64) (i32.const 16)))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 14))))"#;

fn calls(c: &mut Criterion) {
    let runtime = Runtime::new().expect("runtime starts");
    let bytes = wat::parse_str(PLUGIN).expect("valid WAT");
    let plugin = runtime
        .load("bench.wasm", &bytes, &LoadLimits::default())
        .expect("plugin loads");
    let limits = Limits::default();
    let request = vec![b'x'; 4096];
    let mut group = c.benchmark_group("wasm/call");
    group.bench_function("trivial", |b| {
        b.iter(|| plugin.call(Hook::Weight, black_box(b"{}"), &limits))
    });
    group.bench_function("echo-4KiB", |b| {
        b.iter(|| plugin.call(Hook::Admission, black_box(&request), &limits))
    });
    group.bench_function("wasi", |b| {
        b.iter(|| plugin.call(Hook::Flavor, black_box(b"{}"), &limits))
    });
    group.finish();
}

criterion_group!(benches, calls);
criterion_main!(benches);
