//! What a guest can reach, and nothing more: the store data of one call
//! ([`CallState`]: its limiter, its lazily built WASI context, its log
//! buffer), the memory and table limits that remember a denied grow, the
//! `arbiter.log` import with its per-call budget, and a WASI p1 context with
//! no capabilities — no preopens, environment or arguments, clocks stopped
//! at the Unix epoch, a fixed-seed random stream, and no `poll_oneoff`.
//! Used by `runtime` (the linker), `module` and `instance` (the store).
//! It never grants a file, socket, real clock or real randomness.

use std::time::Duration;

use rand_chacha::rand_core::SeedableRng;
use wasmtime::{Caller, Engine, Linker, ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtxBuilder};

use super::{Limits, LogLevel, MAX_LOG_BYTES, MAX_LOG_LINES, MAX_TABLE_ELEMENTS};

/// Largest `random_get` a guest may ask for in one call.
const MAX_RANDOM_BYTES: u64 = 1 << 20;
/// Seed of the deterministic stream behind WASI `random_get`.
const RANDOM_SEED: u64 = 0x6172_6269_7465_7221;

impl LogLevel {
    /// ABI levels: 0 error, 1 warn, 2 info, 3 debug; anything else is a
    /// guest bug and is shown as debug rather than failing the policy.
    fn from_abi(level: i32) -> LogLevel {
        match level {
            0 => LogLevel::Error,
            1 => LogLevel::Warn,
            2 => LogLevel::Info,
            _ => LogLevel::Debug,
        }
    }
}

/// Store data of one call.
pub(super) struct CallState {
    limiter: Limiter,
    /// Built on the first WASI call, so plugins without WASI never pay for it.
    wasi: Option<WasiP1Ctx>,
    logs: LogBuffer,
}

impl CallState {
    pub(super) fn new(limits: &Limits) -> CallState {
        CallState {
            limiter: Limiter {
                limits: StoreLimitsBuilder::new()
                    .memory_size(limits.memory_bytes)
                    .table_elements(MAX_TABLE_ELEMENTS)
                    .instances(1)
                    .tables(1)
                    .memories(1)
                    .trap_on_grow_failure(false)
                    .build(),
                memory_denied: false,
            },
            wasi: None,
            logs: LogBuffer::default(),
        }
    }

    fn wasi(&mut self) -> &mut WasiP1Ctx {
        self.wasi.get_or_insert_with(sandbox_wasi)
    }

    /// The store's limiter (for `Store::limiter`).
    pub(super) fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        &mut self.limiter
    }

    /// Whether a memory grow was denied during the call: the trap that
    /// follows is the guest running out of memory.
    pub(super) fn memory_denied(&self) -> bool {
        self.limiter.memory_denied
    }

    /// The `arbiter.log` lines kept so far, and how many were dropped.
    pub(super) fn take_logs(&mut self) -> (Vec<(LogLevel, String)>, u32) {
        let logs = std::mem::take(&mut self.logs);
        (logs.lines, logs.dropped)
    }
}

/// [`StoreLimits`] that remembers a denied memory grow, so the trap a guest
/// raises after `memory.grow` returned -1 is reported as out of memory.
struct Limiter {
    limits: StoreLimits,
    memory_denied: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.limits.memory_growing(current, desired, maximum)?;
        self.memory_denied |= !allowed;
        Ok(allowed)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_denied = true;
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

#[derive(Default)]
struct LogBuffer {
    lines: Vec<(LogLevel, String)>,
    bytes: usize,
    dropped: u32,
}

/// The imports every plugin sees: `arbiter.log` and capability-free WASI p1.
pub(super) fn plugin_linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, CallState::wasi)?;
    // WASI's poll_oneoff sleeps the host thread for a relative clock
    // subscription, out of reach of the epoch deadline; a policy has no
    // reason to wait, so it is not provided (ENOSYS).
    linker.allow_shadowing(true);
    linker.func_wrap(
        "wasi_snapshot_preview1",
        "poll_oneoff",
        |_: i32, _: i32, _: i32, _: i32| -> i32 { WASI_ENOSYS },
    )?;
    linker.allow_shadowing(false);
    linker.func_wrap("arbiter", "log", log)?;
    Ok(linker)
}

/// WASI errno `nosys`.
const WASI_ENOSYS: i32 = 52;

/// `arbiter.log(level, ptr, len)`: keeps the line if the call's budget allows.
fn log(mut caller: Caller<'_, CallState>, level: i32, ptr: i32, len: i32) -> wasmtime::Result<()> {
    let (start, len) = (ptr as u32 as usize, len as u32 as usize);
    let logs = &caller.data().logs;
    if logs.lines.len() >= MAX_LOG_LINES || logs.bytes.saturating_add(len) > MAX_LOG_BYTES {
        caller.data_mut().logs.dropped = caller.data().logs.dropped.saturating_add(1);
        return Ok(());
    }
    let Some(memory) = caller.get_export("memory").and_then(|e| e.into_memory()) else {
        wasmtime::bail!("arbiter.log was called by a module without a `memory` export");
    };
    let Some(bytes) = memory.data(&caller).get(start..start.saturating_add(len)) else {
        wasmtime::bail!(
            "arbiter.log was given {start}..+{len}, outside the {}-byte memory",
            memory.data_size(&caller)
        );
    };
    let line = crate::text::clean(
        &String::from_utf8_lossy(bytes),
        crate::text::MAX_LOG_LINE_BYTES,
    );
    let logs = &mut caller.data_mut().logs;
    logs.bytes += len;
    logs.lines.push((LogLevel::from_abi(level), line));
    Ok(())
}

/// A WASI p1 context with no capabilities: no preopens, environment or
/// arguments, closed stdin, discarded stdout/stderr, clocks stopped at the
/// Unix epoch and a fixed-seed random stream.
fn sandbox_wasi() -> WasiP1Ctx {
    let mut wasi = WasiCtxBuilder::new();
    wasi.wall_clock(FixedClock)
        .monotonic_clock(FixedClock)
        .secure_random(rand_chacha::ChaCha8Rng::seed_from_u64(RANDOM_SEED))
        .insecure_random(rand_chacha::ChaCha8Rng::seed_from_u64(RANDOM_SEED))
        .insecure_random_seed(u128::from(RANDOM_SEED))
        .max_random_size(MAX_RANDOM_BYTES);
    wasi.build_p1()
}

/// A clock that always reads zero.
struct FixedClock;

impl HostWallClock for FixedClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FixedClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        0
    }
}
