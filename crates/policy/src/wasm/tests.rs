//! The sandbox's own invariants: modules shared by digest, the deadline in
//! epoch ticks, the bounded compile cache, digests. The ABI end to end is
//! in the root `tests/wasm_runtime.rs`.

use std::time::Duration;

use super::instance::deadline_ticks;
use super::module::hex_sha256;
use super::runtime::CompileCache;
use super::*;

const ECHO: &str = r#"(module
  (memory (export "memory") 1)
  (func (export "arbiter_abi_version") (result i32) i32.const 1)
  (func (export "arbiter_alloc") (param i32) (result i32) i32.const 1024)
  (func (export "arbiter_weight") (param $p i32) (param $n i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32))
            (i64.extend_i32_u (local.get $n)))))"#;

#[test]
fn identical_bytes_share_one_compiled_module() {
    let runtime = Runtime::new().expect("runtime starts");
    let bytes = wat::parse_str(ECHO).expect("valid WAT");
    let first = runtime.load("a.wasm", &bytes).expect("loads");
    let second = runtime.load("b.wasm", &bytes).expect("loads");
    assert!(first.shares_module_with(&second));
    let out = second
        .call(Hook::Weight, b"[1]", &Limits::default())
        .expect("answers");
    assert_eq!(out.response, "[1]");
}

#[test]
fn runtime_and_plugins_are_shared_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Runtime>();
    send_sync::<Plugin>();
}

#[test]
fn deadline_covers_the_timeout_plus_one_tick() {
    assert_eq!(deadline_ticks(Duration::ZERO), 1);
    assert_eq!(deadline_ticks(Duration::from_micros(1500)), 3);
    assert_eq!(deadline_ticks(Duration::from_millis(20)), 21);
    assert_eq!(deadline_ticks(Duration::MAX), u64::MAX);
}

#[test]
fn the_compile_cache_is_bounded_and_starts_over_when_full() {
    use wasmtime::CacheStore;
    let cache = CompileCache::new(100);
    assert!(cache.insert(b"a", vec![1; 40]));
    assert!(cache.insert(b"b", vec![2; 40]));
    assert_eq!(cache.get(b"a").as_deref(), Some(&[1u8; 40][..]));
    // Replacing an entry does not count it twice.
    assert!(cache.insert(b"a", vec![3; 40]));
    assert_eq!(cache.get(b"b").as_deref(), Some(&[2u8; 40][..]));
    // Past the bound it starts over with the new entry only.
    assert!(cache.insert(b"c", vec![4; 40]));
    assert_eq!(cache.get(b"a"), None);
    assert_eq!(cache.get(b"c").as_deref(), Some(&[4u8; 40][..]));
    // An entry larger than the bound is refused.
    assert!(!cache.insert(b"d", vec![5; 200]));
    assert_eq!(cache.get(b"d"), None);
}

#[test]
fn digests_are_lowercase_hex_sha256() {
    assert_eq!(
        hex_sha256(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}
