//! What the plugin sandbox promises (plugin-sdk/ABI.md): well-behaved plugins
//! answer, misbehaving ones fail their own call with the right error kind and
//! never the host, bad modules are refused at load with a message naming the
//! problem, and WASI plugins run deterministically.

use std::time::Duration;

use arbiter_policy::wasm::{
    CallError, Hook, Limits, LoadError, LoadLimits, LogLevel, Runtime, MONOTONIC_NOW,
};

/// A plugin whose `arbiter_alloc` is a bump allocator that grows memory on
/// demand, with `extra` spliced into the module.
fn plugin(extra: &str) -> Vec<u8> {
    plugin_with_imports("", extra)
}

fn plugin_with_imports(imports: &str, extra: &str) -> Vec<u8> {
    let text = format!(
        r#"(module
          {imports}
          (memory (export "memory") 1)
          (global $heap (mut i32) (i32.const 4096))
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param $len i32) (result i32)
            (local $p i32)
            (local.set $p (global.get $heap))
            (global.set $heap (i32.add (global.get $heap) (local.get $len)))
            (block $done
              (loop $grow
                (br_if $done (i32.le_u (global.get $heap)
                                       (i32.mul (memory.size) (i32.const 65536))))
                (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))
                (br $grow)))
            (local.get $p))
          {extra})"#
    );
    wat::parse_str(&text).expect("test module is valid WAT")
}

/// `(ptr << 32) | len` as WAT.
fn packed(ptr: &str, len: &str) -> String {
    format!("(i64.or (i64.shl (i64.extend_i32_u {ptr}) (i64.const 32)) (i64.extend_i32_u {len}))")
}

fn runtime() -> Runtime {
    Runtime::new().expect("runtime starts")
}

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_millis(50),
        memory_bytes: 16 << 20,
    }
}

fn call(bytes: &[u8], hook: Hook, request: &str) -> Result<String, CallError> {
    let runtime = runtime();
    let plugin = runtime
        .load("test.wasm", bytes, &LoadLimits::default())
        .expect("plugin loads");
    plugin
        .call(hook, request.as_bytes(), &limits())
        .map(|out| out.response)
}

fn load_error(bytes: &[u8]) -> LoadError {
    runtime()
        .load("bad.wasm", bytes, &LoadLimits::default())
        .expect_err("the module is refused")
}

fn echo() -> String {
    format!(
        r#"(func (export "arbiter_admission") (param $p i32) (param $n i32) (result i64)
             {})"#,
        packed("(local.get $p)", "(local.get $n)")
    )
}

#[test]
fn weight_plugin_returns_its_scores() {
    let response = r#"{"scores":[1.5,2,-3]}"#;
    let bytes = plugin(&format!(
        r#"(data (i32.const 16) "{}")
           (func (export "arbiter_weight") (param i32 i32) (result i64)
             {})"#,
        response.replace('"', "\\\""),
        packed("(i32.const 16)", &format!("(i32.const {})", response.len()))
    ));
    let runtime = runtime();
    let plugin = runtime
        .load("weights.wasm", &bytes, &LoadLimits::default())
        .expect("plugin loads");
    assert!(plugin.exports_hook(Hook::Weight));
    assert!(!plugin.exports_hook(Hook::Admission));
    assert_eq!(plugin.digest().len(), 64);
    let out = plugin
        .call(Hook::Weight, br#"{"workloads":[]}"#, &limits())
        .expect("call succeeds");
    assert_eq!(out.response, response);
    assert!(out.logs.is_empty());
    assert_eq!(out.dropped_logs, 0);
    let missing = plugin
        .call(Hook::Admission, b"{}", &limits())
        .expect_err("admission is not exported");
    assert_eq!(
        missing,
        CallError::MissingExport("arbiter_admission".into())
    );
    assert_eq!(missing.kind(), "missing_export");
}

#[test]
fn echo_plugin_sees_the_request_even_when_alloc_must_grow_memory() {
    let request = format!(r#"{{"params":"{}"}}"#, "x".repeat(300_000));
    assert_eq!(
        call(&plugin(&echo()), Hook::Admission, &request),
        Ok(request)
    );
}

#[test]
fn every_call_starts_from_the_pristine_module() {
    // Reports what it finds — the data byte at 1024 (7 in the module), its
    // global (0), memory.size (1 page) and the byte at 3000 (0) — as four
    // digits, then changes all four and writes into a page it grew. Pool
    // slots keep their pages resident between instances (and reset only
    // the dirtied ones), so nothing of that may show in the next call.
    let bytes = plugin(&format!(
        r#"(data (i32.const 1024) "\07")
           (data (i32.const 2048) "{{\"scores\":[0,0,0,0]}}")
           (global $calls (mut i32) (i32.const 0))
           (func (export "arbiter_weight") (param i32 i32) (result i64)
             (i32.store8 (i32.const 2059) (i32.add (i32.load8_u (i32.const 1024)) (i32.const 48)))
             (i32.store8 (i32.const 2061) (i32.add (global.get $calls) (i32.const 48)))
             (i32.store8 (i32.const 2063) (i32.add (memory.size) (i32.const 48)))
             (i32.store8 (i32.const 2065) (i32.add (i32.load8_u (i32.const 3000)) (i32.const 48)))
             (i32.store8 (i32.const 1024) (i32.const 1))
             (global.set $calls (i32.add (global.get $calls) (i32.const 5)))
             (i32.store8 (i32.const 3000) (i32.const 9))
             (drop (memory.grow (i32.const 2)))
             (i32.store8 (i32.const 131172) (i32.const 9))
             {})"#,
        packed("(i32.const 2048)", "(i32.const 20)")
    ));
    let runtime = runtime();
    let plugin = runtime
        .load("traces.wasm", &bytes, &LoadLimits::default())
        .expect("plugin loads");
    for call in 0..5 {
        let out = plugin
            .call(Hook::Weight, b"{}", &limits())
            .unwrap_or_else(|e| panic!("call {call}: {e}"));
        assert_eq!(out.response, r#"{"scores":[7,0,1,0]}"#, "call {call}");
    }
}

#[test]
fn infinite_loop_runs_out_of_fuel_and_the_plugin_still_works_afterwards() {
    // Loops forever when the request starts with 'L', echoes otherwise.
    let bytes = plugin(&format!(
        r#"(func (export "arbiter_admission") (param $p i32) (param $n i32) (result i64)
             (if (i32.eq (i32.load8_u (local.get $p)) (i32.const 76))
               (then (loop $forever (br $forever))))
             {})"#,
        packed("(local.get $p)", "(local.get $n)")
    ));
    let runtime = runtime();
    let plugin = runtime
        .load("spin.wasm", &bytes, &LoadLimits::default())
        .expect("plugin loads");
    let error = plugin
        .call(Hook::Admission, b"L", &limits())
        .expect_err("the loop is interrupted");
    // Fuel is sized to the timeout: which of the two stops the loop first
    // depends on how much CPU the test gets (on a loaded machine, the
    // clock). Either is the sandbox doing its job. Running out of fuel
    // itself is asserted where fuel goes fast, by host calls
    // (`crates/policy/src/wasm/tests.rs`).
    assert!(
        error
            == CallError::OutOfFuel {
                fuel: limits().fuel()
            }
            || error == CallError::Timeout,
        "{error:?}"
    );
    let out = plugin
        .call(Hook::Admission, b"{}", &limits())
        .expect("a fresh instance answers");
    assert_eq!(out.response, "{}");
}

#[test]
fn memory_bomb_is_out_of_memory() {
    // Grows a page at a time until memory.grow fails, then aborts the way a
    // guest allocator does.
    let bytes = plugin(
        r#"(func (export "arbiter_weight") (param i32 i32) (result i64)
             (loop $more
               (br_if $more (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
             unreachable)"#,
    );
    let error = call(&bytes, Hook::Weight, "{}").expect_err("the bomb is stopped");
    assert_eq!(error, CallError::OutOfMemory);
    assert_eq!(error.kind(), "out_of_memory");
}

#[test]
fn a_denied_grow_the_plugin_handles_is_not_an_error() {
    let bytes = plugin(&format!(
        r#"(func (export "arbiter_weight") (param $p i32) (param $n i32) (result i64)
             (drop (memory.grow (i32.const 60000)))
             {})"#,
        packed("(local.get $p)", "(local.get $n)")
    ));
    assert_eq!(call(&bytes, Hook::Weight, "{}"), Ok("{}".to_string()));
}

#[test]
fn initial_memory_above_the_limit_is_out_of_memory() {
    let text = r#"(module
      (memory (export "memory") 512)
      (func (export "arbiter_abi_version") (result i32) i32.const 1)
      (func (export "arbiter_alloc") (param i32) (result i32) i32.const 0)
      (func (export "arbiter_weight") (param i32 i32) (result i64) i64.const 0))"#;
    let bytes = wat::parse_str(text).expect("valid WAT");
    let runtime = runtime();
    let plugin = runtime
        .load("big.wasm", &bytes, &LoadLimits::default())
        .expect("fits the runtime's ceiling");
    let small = Limits {
        timeout: Duration::from_millis(50),
        memory_bytes: 1 << 20,
    };
    assert_eq!(
        plugin.call(Hook::Weight, b"{}", &small).map(|o| o.response),
        Err(CallError::OutOfMemory)
    );
}

#[test]
fn unreachable_is_a_trap() {
    let bytes =
        plugin(r#"(func (export "arbiter_flavor") (param i32 i32) (result i64) unreachable)"#);
    let error = call(&bytes, Hook::Flavor, "{}").expect_err("traps");
    assert!(matches!(&error, CallError::Trap(message) if message.contains("unreachable")));
    assert_eq!(error.kind(), "trap");
}

#[test]
fn response_outside_memory_is_bad_output() {
    let bytes = plugin(&format!(
        r#"(func (export "arbiter_autoscale") (param i32 i32) (result i64) {})"#,
        packed("(i32.const 65530)", "(i32.const 100)")
    ));
    let error = call(&bytes, Hook::Autoscale, "{}").expect_err("out of bounds");
    assert!(matches!(&error, CallError::BadOutput(m) if m.contains("outside")));
    assert_eq!(error.kind(), "bad_output");
}

#[test]
fn huge_response_is_bad_output() {
    let bytes = plugin(&format!(
        r#"(func (export "arbiter_autoscale") (param i32 i32) (result i64) {})"#,
        packed("(i32.const 0)", "(i32.const -1)")
    ));
    let error = call(&bytes, Hook::Autoscale, "{}").expect_err("too large");
    assert!(matches!(&error, CallError::BadOutput(m) if m.contains("at most")));
}

#[test]
fn non_utf8_response_is_bad_output() {
    let bytes = plugin(&format!(
        r#"(data (i32.const 16) "ok\ff")
           (func (export "arbiter_fair_share") (param i32 i32) (result i64) {})"#,
        packed("(i32.const 16)", "(i32.const 3)")
    ));
    let error = call(&bytes, Hook::FairShare, "{}").expect_err("not UTF-8");
    assert!(matches!(&error, CallError::BadOutput(m) if m.contains("UTF-8")));
}

#[test]
fn alloc_returning_a_pointer_outside_memory_is_bad_output() {
    let text = format!(
        r#"(module
          (memory (export "memory") 1)
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param i32) (result i32) i32.const -16)
          (func (export "arbiter_weight") (param i32 i32) (result i64) {}))"#,
        packed("(i32.const 0)", "(i32.const 0)")
    );
    let bytes = wat::parse_str(text).expect("valid WAT");
    let error = call(&bytes, Hook::Weight, "{}").expect_err("cannot write the request");
    assert!(matches!(&error, CallError::BadOutput(m) if m.contains("arbiter_alloc")));
}

#[test]
fn missing_required_exports_are_named() {
    let abi = r#"(func (export "arbiter_abi_version") (result i32) i32.const 1)"#;
    let alloc = r#"(func (export "arbiter_alloc") (param i32) (result i32) i32.const 0)"#;
    let memory = r#"(memory (export "memory") 1)"#;
    for (missing, parts) in [
        ("memory", [abi, alloc]),
        ("arbiter_abi_version", [memory, alloc]),
        ("arbiter_alloc", [memory, abi]),
    ] {
        let bytes = wat::parse_str(format!("(module {} {})", parts[0], parts[1])).expect("WAT");
        let error = load_error(&bytes);
        assert_eq!(
            error,
            LoadError::MissingExport {
                module: "bad.wasm".into(),
                export: missing.into()
            }
        );
        let message = error.to_string();
        assert!(message.contains("bad.wasm") && message.contains(&format!("`{missing}`")));
    }
}

#[test]
fn abi_version_2_is_refused() {
    let text = r#"(module
      (memory (export "memory") 1)
      (func (export "arbiter_abi_version") (result i32) i32.const 2)
      (func (export "arbiter_alloc") (param i32) (result i32) i32.const 0))"#;
    let error = load_error(&wat::parse_str(text).expect("valid WAT"));
    assert_eq!(
        error,
        LoadError::AbiVersion {
            module: "bad.wasm".into(),
            found: 2
        }
    );
    assert!(error.to_string().contains("rebuild"));
}

#[test]
fn abi_version_that_traps_is_refused() {
    let text = r#"(module
      (memory (export "memory") 1)
      (func (export "arbiter_abi_version") (result i32) (loop $l (br $l)) i32.const 1)
      (func (export "arbiter_alloc") (param i32) (result i32) i32.const 0))"#;
    let error = load_error(&wat::parse_str(text).expect("valid WAT"));
    // Out of fuel, or out of time on a loaded machine (see above).
    let fuel = LoadError::AbiCheck {
        module: "bad.wasm".into(),
        source: CallError::OutOfFuel {
            fuel: Limits::default().fuel(),
        },
    };
    let time = LoadError::AbiCheck {
        module: "bad.wasm".into(),
        source: CallError::Timeout,
    };
    assert!(error == fuel || error == time, "{error:?}");
}

#[test]
fn unexpected_import_is_named() {
    let bytes = plugin_with_imports(
        r#"(import "env" "open" (func (param i32) (result i32)))"#,
        "",
    );
    let error = load_error(&bytes);
    assert!(matches!(&error, LoadError::ForbiddenImport { import, .. } if import == "env.open"));
    assert!(error.to_string().contains("`env.open`"));
}

#[test]
fn hook_with_the_wrong_signature_is_refused() {
    let bytes = plugin(r#"(func (export "arbiter_weight") (param i32) (result i32) i32.const 0)"#);
    let error = load_error(&bytes);
    assert_eq!(
        error,
        LoadError::ExportType {
            module: "bad.wasm".into(),
            export: "arbiter_weight".into(),
            expected: "a function (i32, i32) -> i64".into(),
            found: "a function (i32) -> i32".into(),
        }
    );
}

#[test]
fn bytes_that_are_not_wasm_are_refused() {
    let error = load_error(b"\0asm but not really");
    assert!(matches!(error, LoadError::Compile { .. }));
}

/// Hex of 16 bytes of `random_get`, 8 bytes of the realtime clock and 8 of
/// the monotonic clock.
const WASI_PROBE: &str = r#"
  (data (i32.const 0) "0123456789abcdef")
  (func (export "arbiter_weight") (param i32 i32) (result i64)
    (local $i i32) (local $b i32)
    (drop (call $random_get (i32.const 96) (i32.const 16)))
    (drop (call $clock_time_get (i32.const 0) (i64.const 1) (i32.const 112)))
    (drop (call $clock_time_get (i32.const 1) (i64.const 1) (i32.const 120)))
    ;; iovec at 300 -> "hello\n" at 200, written to stdout (discarded)
    (i32.store8 (i32.const 200) (i32.const 104))
    (i32.store (i32.const 300) (i32.const 200))
    (i32.store (i32.const 304) (i32.const 1))
    (drop (call $fd_write (i32.const 1) (i32.const 300) (i32.const 1) (i32.const 308)))
    (block $done
      (loop $hex
        (br_if $done (i32.eq (local.get $i) (i32.const 32)))
        (local.set $b (i32.load8_u (i32.add (i32.const 96) (local.get $i))))
        (i32.store8 (i32.add (i32.const 400) (i32.shl (local.get $i) (i32.const 1)))
                    (i32.load8_u (i32.shr_u (local.get $b) (i32.const 4))))
        (i32.store8 (i32.add (i32.const 401) (i32.shl (local.get $i) (i32.const 1)))
                    (i32.load8_u (i32.and (local.get $b) (i32.const 15))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $hex)))
    (i64.or (i64.shl (i64.const 400) (i64.const 32)) (i64.const 64)))"#;

const WASI_IMPORTS: &str = r#"
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get"
    (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))"#;

#[test]
fn wasi_imports_work_and_are_deterministic() {
    let bytes = plugin_with_imports(WASI_IMPORTS, WASI_PROBE);
    let runtime = runtime();
    let plugin = runtime
        .load("wasi.wasm", &bytes, &LoadLimits::default())
        .expect("a WASI plugin loads");
    let first = plugin
        .call(Hook::Weight, b"{}", &limits())
        .expect("WASI calls succeed")
        .response;
    let second = plugin
        .call(Hook::Weight, b"{}", &limits())
        .expect("WASI calls succeed")
        .response;
    assert_eq!(first, second, "randomness and clocks are fixed");
    let (random, clock) = first.split_at(32);
    // The fixed-seed stream, the same bytes as before random_get was
    // charged in fuel (a plugin's decisions must not change with it).
    assert_eq!(
        random, "2ad0667f2ecbbdad90ccb42deed3bf29",
        "random_get filled the buffer"
    );
    let (wall, monotonic) = clock.split_at(16);
    assert_eq!(wall, "0".repeat(16), "the wall clock reads the Unix epoch");
    // Stopped, but not at zero: Go's runtime refuses a monotonic clock at 0.
    assert_eq!(
        monotonic,
        MONOTONIC_NOW
            .to_le_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
        "the monotonic clock reads MONOTONIC_NOW"
    );
    assert_ne!(MONOTONIC_NOW, 0);
    let other_runtime = call(&bytes, Hook::Weight, "{}").expect("WASI calls succeed");
    assert_eq!(
        first, other_runtime,
        "another runtime gives the same stream"
    );
}

#[test]
fn proc_exit_is_a_trap() {
    let bytes = plugin_with_imports(
        r#"(import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))"#,
        r#"(func (export "arbiter_weight") (param i32 i32) (result i64)
             (call $exit (i32.const 3)) i64.const 0)"#,
    );
    let error = call(&bytes, Hook::Weight, "{}").expect_err("exit fails the call");
    assert!(matches!(&error, CallError::Trap(m) if m.contains("proc_exit(3)")));
}

#[test]
fn poll_oneoff_is_not_provided_so_a_plugin_cannot_sleep_the_host() {
    let bytes = plugin_with_imports(
        r#"(import "wasi_snapshot_preview1" "poll_oneoff"
             (func $poll (param i32 i32 i32 i32) (result i32)))"#,
        r#"(data (i32.const 16) "52")
           (func (export "arbiter_weight") (param i32 i32) (result i64)
             ;; a relative clock subscription of one hour
             (i64.store (i32.const 1024) (i64.const 3600000000000))
             (if (i32.ne (call $poll (i32.const 1000) (i32.const 2000) (i32.const 1)
                                     (i32.const 3000))
                         (i32.const 52))
               (then unreachable))
             (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 2)))"#,
    );
    assert_eq!(call(&bytes, Hook::Weight, "{}"), Ok("52".to_string()));
}

#[test]
fn logs_are_captured_and_bounded() {
    let bytes = plugin_with_imports(
        r#"(import "arbiter" "log" (func $log (param i32 i32 i32)))"#,
        &format!(
            r#"(data (i32.const 16) "hello")
               (func (export "arbiter_admission") (param $p i32) (param $n i32) (result i64)
                 (local $i i32)
                 (call $log (i32.const 0) (i32.const 16) (i32.const 5))
                 (call $log (i32.const 9) (i32.const 16) (i32.const 5))
                 (loop $more
                   (call $log (i32.const 2) (i32.const 16) (i32.const 5))
                   (local.set $i (i32.add (local.get $i) (i32.const 1)))
                   (br_if $more (i32.lt_u (local.get $i) (i32.const 100))))
                 {})"#,
            packed("(local.get $p)", "(local.get $n)")
        ),
    );
    let runtime = runtime();
    let plugin = runtime
        .load("chatty.wasm", &bytes, &LoadLimits::default())
        .expect("plugin loads");
    let out = plugin
        .call(Hook::Admission, b"{}", &limits())
        .expect("logging never fails a call");
    assert_eq!(out.logs.len(), 64);
    assert_eq!(out.dropped_logs, 102 - 64);
    assert_eq!(out.logs[0], (LogLevel::Error, "hello".to_string()));
    assert_eq!(
        out.logs[1].0,
        LogLevel::Debug,
        "unknown levels read as debug"
    );
    assert_eq!(out.logs[2], (LogLevel::Info, "hello".to_string()));
}

#[test]
fn log_bytes_are_bounded_too() {
    let bytes = plugin_with_imports(
        r#"(import "arbiter" "log" (func $log (param i32 i32 i32)))"#,
        &format!(
            r#"(func (export "arbiter_admission") (param $p i32) (param $n i32) (result i64)
                 (call $log (i32.const 2) (i32.const 0) (i32.const 3000))
                 (call $log (i32.const 2) (i32.const 0) (i32.const 3000))
                 (call $log (i32.const 2) (i32.const 0) (i32.const 1000))
                 {})"#,
            packed("(local.get $p)", "(local.get $n)")
        ),
    );
    let runtime = runtime();
    let plugin = runtime
        .load("chatty.wasm", &bytes, &LoadLimits::default())
        .expect("plugin loads");
    let out = plugin
        .call(Hook::Admission, b"{}", &limits())
        .expect("logging never fails a call");
    // The budget counts the bytes the plugin wrote: the first and the third
    // line fit (3000 + 1000 of 4096), the second does not. What is kept is
    // made safe to show: the zero bytes escaped, each line capped.
    let kept: Vec<&str> = out.logs.iter().map(|(_, line)| line.as_str()).collect();
    let zeros = |n: usize| {
        arbiter_policy::text::clean(&"\0".repeat(n), arbiter_policy::text::MAX_LOG_LINE_BYTES)
    };
    assert_eq!(kept, [zeros(3000), zeros(1000)]);
    assert!(
        kept[0].starts_with(r"\u{0}\u{0}") && kept[0].ends_with("bytes cut)"),
        "{}",
        kept[0]
    );
    assert_eq!(out.dropped_logs, 1);
}

#[test]
fn log_outside_memory_is_a_trap() {
    let bytes = plugin_with_imports(
        r#"(import "arbiter" "log" (func $log (param i32 i32 i32)))"#,
        r#"(func (export "arbiter_admission") (param i32 i32) (result i64)
             (call $log (i32.const 2) (i32.const 65535) (i32.const 10))
             i64.const 0)"#,
    );
    let error = call(&bytes, Hook::Admission, "{}").expect_err("bad pointer");
    assert!(matches!(&error, CallError::Trap(m) if m.contains("arbiter.log")));
}

#[test]
fn reactor_initialize_runs_before_each_call() {
    let bytes = plugin(&format!(
        r#"(global $ready (mut i32) (i32.const 0))
           (func (export "_initialize") (global.set $ready (i32.const 1)))
           (func (export "arbiter_weight") (param $p i32) (param $n i32) (result i64)
             (if (i32.eqz (global.get $ready)) (then unreachable))
             {})"#,
        packed("(local.get $p)", "(local.get $n)")
    ));
    assert_eq!(call(&bytes, Hook::Weight, "{}"), Ok("{}".to_string()));
}

/// ABI.md "Reactors": `_initialize` runs exactly once on every fresh
/// instance, before `arbiter_alloc`, the hook and the load probe's exports.
#[test]
fn reactor_initialize_runs_once_per_instance_before_everything_else() {
    let text = r#"(module
      (memory (export "memory") 1)
      (global $inits (mut i32) (i32.const 0))
      (func $once (if (i32.ne (global.get $inits) (i32.const 1)) (then unreachable)))
      (func (export "_initialize") (global.set $inits (i32.add (global.get $inits) (i32.const 1))))
      (func (export "arbiter_abi_version") (result i32) (call $once) i32.const 1)
      (func (export "arbiter_weight_fields") (result i64)
        (call $once)
        (i32.store8 (i32.const 0) (i32.const 91))
        (i32.store8 (i32.const 1) (i32.const 93))
        i64.const 2)
      (func (export "arbiter_alloc") (param i32) (result i32) (call $once) i32.const 1024)
      (func (export "arbiter_weight") (param $p i32) (param $n i32) (result i64)
        (call $once)
        (i64.or (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32))
                (i64.extend_i32_u (local.get $n)))))"#;
    let bytes = wat::parse_str(text).expect("valid WAT");
    let runtime = runtime();
    let plugin = runtime
        .load("reactor.wasm", &bytes, &LoadLimits::default())
        .expect("the load probe sees one _initialize per instance");
    for call in 0..3 {
        let out = plugin
            .call(Hook::Weight, b"{}", &limits())
            .unwrap_or_else(|e| panic!("call {call}: {e}"));
        assert_eq!(out.response, "{}", "call {call}");
    }
}

#[test]
fn identical_bytes_compile_once_and_are_released_when_unused() {
    let runtime = runtime();
    let bytes = plugin(&echo());
    let first = runtime
        .load("a.wasm", &bytes, &LoadLimits::default())
        .expect("loads");
    let second = runtime
        .load("b.wasm", &bytes, &LoadLimits::default())
        .expect("loads");
    assert_eq!(runtime.compiled_modules(), 1);
    assert_eq!(first.digest(), second.digest());
    assert_eq!(second.name(), "b.wasm");
    let other = runtime
        .load(
            "c.wasm",
            &plugin(&format!("{} (func)", echo())),
            &LoadLimits::default(),
        )
        .expect("loads");
    assert_eq!(runtime.compiled_modules(), 2);
    assert_ne!(first.digest(), other.digest());
    drop((first, second));
    assert_eq!(runtime.compiled_modules(), 1);
}

#[test]
fn hooks_name_their_exports() {
    let names: Vec<String> = Hook::ALL
        .iter()
        .map(|h| format!("{h}={}", h.export_name()))
        .collect();
    assert_eq!(
        names,
        [
            "admission=arbiter_admission",
            "weight=arbiter_weight",
            "fairShare=arbiter_fair_share",
            "autoscale=arbiter_autoscale",
            "flavor=arbiter_flavor",
            "placement=arbiter_placement",
        ]
    );
}

/// A weight plugin declaring `declaration` (raw bytes at offset 2048) through
/// `arbiter_weight_fields` with the given WAT result type.
fn declaring(declaration: &str, result: &str) -> Vec<u8> {
    plugin(&format!(
        r#"(data (i32.const 2048) "{}")
           (func (export "arbiter_weight_fields") (result {result})
             {})
           (func (export "arbiter_weight") (param i32 i32) (result i64) i64.const 0)"#,
        declaration.replace('"', "\\\""),
        if result == "i64" {
            packed(
                "(i32.const 2048)",
                &format!("(i32.const {})", declaration.len()),
            )
        } else {
            "i32.const 0".to_string()
        }
    ))
}

#[test]
fn weight_fields_declaration_is_read_once_at_load() {
    let runtime = runtime();
    let plugin = runtime
        .load(
            "lean.wasm",
            &declaring(r#"["workloads.estimate","queues"]"#, "i64"),
            &LoadLimits::default(),
        )
        .expect("plugin loads");
    assert_eq!(
        plugin.weight_fields(),
        Some(&["workloads.estimate".to_string(), "queues".to_string()][..])
    );
    let whole = runtime
        .load(
            "whole.wasm",
            &plugin_bytes_without_declaration(),
            &LoadLimits::default(),
        )
        .unwrap();
    assert_eq!(whole.weight_fields(), None);
}

fn plugin_bytes_without_declaration() -> Vec<u8> {
    plugin(r#"(func (export "arbiter_weight") (param i32 i32) (result i64) i64.const 0)"#)
}

#[test]
fn unusable_weight_fields_declarations_are_refused_at_load() {
    match load_error(&declaring("workloads.estimate", "i64")) {
        LoadError::WeightFields { module, reason } => {
            assert_eq!(module, "bad.wasm");
            assert!(reason.contains("not a JSON list of strings"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let error = load_error(&declaring("[]", "i32"));
    assert!(
        matches!(&error, LoadError::ExportType { export, .. } if export == "arbiter_weight_fields"),
        "{error:?}"
    );
    assert!(error.to_string().contains("() -> i64"), "{error}");
}
