//! The sandbox's own invariants: modules shared by digest, the deadline in
//! epoch ticks, the bounded compile cache, digests. The ABI end to end is
//! in the root `tests/wasm_runtime.rs`.

use std::time::Duration;

use super::instance::deadline_ticks;
use super::module::hex_sha256;
use super::runtime::CompileCache;
use super::*;
use super::{complexity, host, runtime};

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
    let first = runtime
        .load("a.wasm", &bytes, &LoadLimits::default())
        .expect("loads");
    let second = runtime
        .load("b.wasm", &bytes, &LoadLimits::default())
        .expect("loads");
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

#[test]
fn the_fuel_budget_and_the_backstop_follow_the_timeout() {
    let limits = |ms| Limits {
        timeout: Duration::from_millis(ms),
        memory_bytes: 1 << 20,
    };
    assert_eq!(limits(20).fuel(), 20 * FUEL_PER_MS);
    assert_eq!(limits(100).fuel(), Limits::default().fuel());
    assert_eq!(limits(0).fuel(), 1);
    assert_eq!(limits(20).backstop(), Duration::from_millis(200));
    assert_eq!(limits(2).backstop(), MIN_BACKSTOP);
    let forever = Limits {
        timeout: Duration::MAX,
        memory_bytes: 1 << 20,
    };
    assert_eq!(forever.fuel(), u64::MAX);
    assert_eq!(forever.backstop(), Duration::MAX);
}

/// Runs `iterations × request length` loop iterations, then echoes.
const SPIN: &str = r#"(module
  (memory (export "memory") 1)
  (func (export "arbiter_abi_version") (result i32) i32.const 1)
  (func (export "arbiter_alloc") (param i32) (result i32) i32.const 1024)
  (func (export "arbiter_weight") (param $p i32) (param $n i32) (result i64)
    (local $i i32)
    (local.set $i (i32.mul (local.get $n) (i32.const ITERATIONS)))
    (block $done
      (loop $spin
        (br_if $done (i32.eqz (local.get $i)))
        (local.set $i (i32.sub (local.get $i) (i32.const 1)))
        (br $spin)))
    (i64.or (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32))
            (i64.extend_i32_u (local.get $n)))))"#;

fn spin(iterations: u32) -> Vec<u8> {
    wat::parse_str(SPIN.replace("ITERATIONS", &iterations.to_string())).expect("valid WAT")
}

#[test]
fn the_same_call_uses_the_same_fuel_and_fails_or_succeeds_the_same_on_every_repeat() {
    let runtime = Runtime::new().expect("runtime starts");
    let plugin = runtime
        .load("spin.wasm", &spin(50_000), &LoadLimits::default())
        .expect("loads");
    let limits = Limits {
        timeout: Duration::from_millis(5),
        memory_bytes: 1 << 20,
    };
    // Short requests fit the budget, long ones do not; where the line lies
    // is a count of instructions, the same on every call and any machine.
    let outcomes: Vec<Result<u64, CallError>> = (1..=200usize)
        .step_by(7)
        .map(|len| {
            plugin
                .call(Hook::Weight, &vec![b'x'; len], &limits)
                .map(|out| out.fuel_used)
        })
        .collect();
    assert!(outcomes.iter().any(Result::is_ok), "{outcomes:?}");
    assert!(
        outcomes.contains(&Err(CallError::OutOfFuel {
            fuel: limits.fuel()
        })),
        "{outcomes:?}"
    );
    for _ in 0..3 {
        let again: Vec<Result<u64, CallError>> = (1..=200usize)
            .step_by(7)
            .map(|len| {
                plugin
                    .call(Hook::Weight, &vec![b'x'; len], &limits)
                    .map(|out| out.fuel_used)
            })
            .collect();
        assert_eq!(again, outcomes);
    }
    // Fuel grows with the work: the longer request that fits used more.
    let used: Vec<u64> = outcomes.iter().filter_map(|r| r.clone().ok()).collect();
    assert!(used.windows(2).all(|w| w[0] < w[1]), "{used:?}");
}

/// Calls `import` (a WASI function taking no arguments but returning an
/// errno) `n` times, `n` the request length; or for ever if `n` is 0.
fn host_caller(import: &str, call: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
          {import}
          (memory (export "memory") 1)
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param i32) (result i32) i32.const 1024)
          (func (export "arbiter_weight") (param $p i32) (param $n i32) (result i64)
            (local $i i32)
            (local.set $i (local.get $n))
            (loop $again
              {call}
              (local.set $i (i32.sub (local.get $i) (i32.const 1)))
              (br_if $again (i32.ne (local.get $i) (i32.const 0))))
            (i64.const 0)))"#
    ))
    .expect("valid WAT")
}

#[test]
fn host_calls_are_charged_so_a_loop_of_them_runs_out_of_fuel() {
    let runtime = Runtime::new().expect("runtime starts");
    let yields = host_caller(
        r#"(import "wasi_snapshot_preview1" "sched_yield" (func $yield (result i32)))"#,
        "(drop (call $yield))",
    );
    let plugin = runtime
        .load("yield.wasm", &yields, &LoadLimits::default())
        .expect("loads");
    let limits = Limits::default();
    let used = |n: usize| {
        plugin
            .call(Hook::Weight, &vec![b'x'; n], &limits)
            .map(|out| out.fuel_used)
    };
    let (ten, twenty) = (used(10).expect("fits"), used(20).expect("fits"));
    assert!(twenty - ten >= 10 * host::HOST_CALL_FUEL, "{ten} {twenty}");
    // Counting down from 0 wraps: about four billion calls, far past the budget.
    assert_eq!(
        plugin.call(Hook::Weight, b"", &limits).map(|o| o.response),
        Err(CallError::OutOfFuel {
            fuel: limits.fuel()
        })
    );
    for (import, call) in [
        (
            r#"(import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))"#,
            "(drop (call $random (i32.const 0) (i32.const 16)))",
        ),
        (
            r#"(import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))"#,
            "(drop (call $write (i32.const 1) (i32.const 0) (i32.const 16) (i32.const 60000)))",
        ),
        (
            r#"(import "arbiter" "log" (func $log (param i32 i32 i32)))"#,
            "(call $log (i32.const 2) (i32.const 0) (i32.const 1000))",
        ),
    ] {
        let plugin = runtime
            .load(
                "host.wasm",
                &host_caller(import, call),
                &LoadLimits::default(),
            )
            .expect("loads");
        assert_eq!(
            plugin.call(Hook::Weight, b"", &limits).map(|o| o.response),
            Err(CallError::OutOfFuel {
                fuel: limits.fuel()
            }),
            "{call}"
        );
    }
}

#[test]
fn fd_write_answers_as_the_capability_free_context_did() {
    let runtime = Runtime::new().expect("runtime starts");
    // Two iovecs at 0: an empty one, then 5 bytes at 100; nwritten at 200;
    // the response is the errno then nwritten, 8 bytes at 300.
    let plugin = |fd: i32| {
        let text = format!(
            r#"(module
              (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
              (memory (export "memory") 1)
              (data (i32.const 0) "\00\00\00\00\00\00\00\00\64\00\00\00\05\00\00\00")
              (data (i32.const 200) "\07\07\07\07")
              (func (export "arbiter_abi_version") (result i32) i32.const 1)
              (func (export "arbiter_alloc") (param i32) (result i32) i32.const 1024)
              (func (export "arbiter_weight") (param i32 i32) (result i64)
                (i32.store (i32.const 300)
                  (call $write (i32.const {fd}) (i32.const 0) (i32.const 2) (i32.const 200)))
                (i32.store (i32.const 304) (i32.load (i32.const 200)))
                (i64.or (i64.shl (i64.const 300) (i64.const 32)) (i64.const 8))))"#
        );
        let bytes = wat::parse_str(text).expect("valid WAT");
        let plugin = runtime
            .load("write.wasm", &bytes, &LoadLimits::default())
            .expect("loads");
        let out = plugin
            .call(Hook::Weight, b"{}", &Limits::default())
            .expect("answers");
        out.response.into_bytes()
    };
    let words = |bytes: Vec<u8>| {
        [0, 4].map(|at| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")))
    };
    assert_eq!(
        words(plugin(1)),
        [0, 5],
        "stdout takes the first non-empty buffer"
    );
    assert_eq!(words(plugin(2)), [0, 5], "so does stderr");
    assert_eq!(
        words(plugin(0)),
        [8, 0x0707_0707],
        "stdin is EBADF, nwritten untouched"
    );
    assert_eq!(
        words(plugin(7)),
        [8, 0x0707_0707],
        "so is any other descriptor"
    );
}

/// A module whose one extra function declares `locals` i32 locals, all
/// live: each set from memory, then all summed.
fn with_live_locals(locals: usize) -> Vec<u8> {
    let mut text = String::from(
        r#"(module
          (memory (export "memory") 1)
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param i32) (result i32) i32.const 1024)
          (func (result i32) (local "#,
    );
    text += &"i32 ".repeat(locals);
    text += ")";
    for i in 0..locals {
        text += &format!("(local.set {i} (i32.load (i32.const {})))", i * 4 % 60_000);
    }
    text += "(i32.const 0)";
    for i in 0..locals {
        text += &format!("(local.get {i}) i32.add ");
    }
    text += "))";
    wat::parse_str(text).expect("valid WAT")
}

#[test]
fn a_module_over_the_shape_caps_is_refused_before_it_is_compiled() {
    let runtime = Runtime::new().expect("runtime starts");
    // The attack: one function of 30,000 live locals compiles for minutes;
    // refused at once, naming the module, the measure and the cap.
    let error = runtime
        .load(
            "locals.wasm",
            &with_live_locals(30_000),
            &LoadLimits::default(),
        )
        .expect_err("refused");
    assert_eq!(
        error,
        LoadError::TooComplex {
            module: "locals.wasm".into(),
            what: "the locals of its function 2 (counting defined functions from 0)".into(),
            found: 30_000,
            cap: PLATFORM_COMPLEXITY_CAPS.locals_per_function,
        }
    );
    assert!(
        error.to_string().contains(&format!(
            "is 30000, over the cap of {}",
            PLATFORM_COMPLEXITY_CAPS.locals_per_function
        )),
        "{error}"
    );
    assert_eq!(runtime.compiled_modules(), 0);
    // A tenant's caps are tighter than a platform's: this one is between.
    let between = with_live_locals(TENANT_COMPLEXITY_CAPS.locals_per_function as usize + 1);
    assert!(runtime
        .load("between.wasm", &between, &LoadLimits::default())
        .is_ok());
    let error = runtime
        .load(
            "between.wasm",
            &between,
            &LoadLimits::tenant(Limits::TENANT),
        )
        .expect_err("too many for a tenant");
    assert!(
        matches!(&error, LoadError::TooComplex { cap, .. } if *cap == TENANT_COMPLEXITY_CAPS.locals_per_function),
        "{error:?}"
    );
}

#[test]
fn shape_counts_functions_locals_and_bodies() {
    let bytes = wat::parse_str(
        r#"(module
          (func (param i32) (local i32 i64) (local f32))
          (func (local i32) nop nop nop nop nop nop nop nop nop nop nop nop))"#,
    )
    .expect("valid WAT");
    let found = complexity::measure(&bytes).expect("a module");
    assert_eq!(found.functions, 2);
    assert_eq!(found.max_locals, (3, 0));
    assert_eq!(found.total_locals, 4);
    assert_eq!(found.max_body.1, 1);
    assert_eq!(complexity::measure(b"\0asm but not really"), None);
}

#[test]
fn work_past_its_budget_is_given_up_and_counted_until_it_ends() {
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};
    let abandoned = Arc::new(Mutex::new(0));
    // Work that cannot end before the test lets it.
    let blocked = || {
        let (release, wait) = mpsc::channel::<()>();
        let (done, finished) = mpsc::channel::<()>();
        let work = move || {
            let _ = wait.recv();
            let _ = done.send(());
            7
        };
        (release, finished, work)
    };
    let (release_a, finished_a, a) = blocked();
    let over = runtime::within_budget(&abandoned, Duration::from_millis(1), a);
    assert!(
        matches!(over, Err(runtime::OverBudget::Exceeded)),
        "{over:?}"
    );
    assert_eq!(*abandoned.lock().unwrap(), 1);
    let (release_b, finished_b, b) = blocked();
    let over = runtime::within_budget(&abandoned, Duration::from_millis(1), b);
    assert!(
        matches!(over, Err(runtime::OverBudget::Exceeded)),
        "{over:?}"
    );
    // At the cap, no new work starts.
    let busy = runtime::within_budget(&abandoned, Duration::from_secs(60), || 1);
    assert!(
        matches!(busy, Err(runtime::OverBudget::Busy(2))),
        "{busy:?}"
    );
    // Abandoned work that ends is no longer counted.
    for (release, finished) in [(release_a, finished_a), (release_b, finished_b)] {
        release.send(()).expect("the work waits");
        finished.recv().expect("the work ends");
    }
    // The count drops right after `finished` is sent; wait for it without a clock.
    while *abandoned.lock().unwrap() > 0 {
        std::thread::yield_now();
    }
    let ok = runtime::within_budget(&abandoned, Duration::from_secs(60), || 3);
    assert!(matches!(ok, Ok(3)), "{ok:?}");
}

/// A reactor whose `_initialize` spends about `iterations` × 8 fuel.
fn slow_start(iterations: u64) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
          (memory (export "memory") 1)
          (func (export "_initialize")
            (local $i i64)
            (local.set $i (i64.const {iterations}))
            (loop $spin
              (local.set $i (i64.sub (local.get $i) (i64.const 1)))
              (br_if $spin (i64.ne (local.get $i) (i64.const 0)))))
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param i32) (result i32) i32.const 1024)
          (func (export "arbiter_weight") (param i32 i32) (result i64) i64.const 0))"#
    ))
    .expect("valid WAT")
}

#[test]
fn the_load_probe_runs_under_the_limits_it_is_given() {
    let runtime = Runtime::new().expect("runtime starts");
    // Between a tenant's budget and a platform's.
    let iterations = (Limits::TENANT.fuel() + Limits::PLATFORM.fuel()) / 2 / 8;
    let bytes = slow_start(iterations);
    let platform = runtime
        .load("slow.wasm", &bytes, &LoadLimits::platform(Limits::PLATFORM))
        .expect("fits a platform budget");
    let tenant = LoadLimits::tenant(Limits::TENANT);
    assert_eq!(
        runtime.load("slow.wasm", &bytes, &tenant).map(drop),
        Err(LoadError::AbiCheck {
            module: "slow.wasm".into(),
            source: CallError::OutOfFuel {
                fuel: Limits::TENANT.fuel()
            }
        })
    );
    // The module compiled once is probed again under other limits.
    assert_eq!(runtime.compiled_modules(), 1);
    assert!(matches!(
        platform.probe(&Limits::TENANT),
        Err(LoadError::AbiCheck { .. })
    ));
    assert_eq!(platform.probe(&Limits::PLATFORM_MAX), Ok(()));
}

#[test]
fn a_wasi_call_may_touch_at_most_64_kib_of_guest_memory() {
    let runtime = Runtime::new().expect("runtime starts");
    // fd_read from stdin with `count` empty iovecs; the errno is the response.
    let errno = |count: usize| {
        let text = format!(
            r#"(module
              (import "wasi_snapshot_preview1" "fd_read" (func $read (param i32 i32 i32 i32) (result i32)))
              (memory (export "memory") 2)
              (func (export "arbiter_abi_version") (result i32) i32.const 1)
              (func (export "arbiter_alloc") (param i32) (result i32) i32.const 100000)
              (func (export "arbiter_weight") (param i32 i32) (result i64)
                (i32.store8 (i32.const 120000)
                  (i32.add (i32.const 48)
                    (call $read (i32.const 0) (i32.const 0) (i32.const {count}) (i32.const 110000))))
                (i64.or (i64.shl (i64.const 120000) (i64.const 32)) (i64.const 1))))"#
        );
        let bytes = wat::parse_str(text).expect("valid WAT");
        let plugin = runtime
            .load("read.wasm", &bytes, &LoadLimits::default())
            .expect("loads");
        let out = plugin
            .call(Hook::Weight, b"{}", &Limits::default())
            .expect("answers");
        i32::from(out.response.as_bytes()[0]) - 48
    };
    let fits = host::HOST_CALL_BYTES / 8;
    assert_eq!(errno(fits), 0, "stdin is empty: nothing read, no error");
    assert_eq!(errno(fits + 1), 48, "one iovec more is ENOMEM");
}
