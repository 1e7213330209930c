//! What a guest can reach, and nothing more: the store data of one call
//! ([`CallState`]: its limiter, its lazily built WASI context, its log
//! buffer), the memory and table limits that remember a denied grow, the
//! `arbiter.log` import with its per-call budget, and a WASI p1 context with
//! no capabilities — no preopens, environment or arguments, clocks stopped
//! (the wall clock at the Unix epoch, the monotonic one at
//! [`MONOTONIC_NOW`]), a fixed-seed random stream, and no `poll_oneoff`.
//! No host call is free: each is charged [`HOST_CALL_FUEL`] from the call's
//! fuel ([`charge_host_calls`]), those whose work grows with their
//! arguments (`arbiter.log`, `random_get`, `fd_write`) are charged per byte
//! or per buffer on top, and the work any other WASI call may do on guest
//! memory is capped at [`HOST_CALL_BYTES`]. Used by `runtime` (the linker),
//! `module` and `instance` (the store). It never grants a file, socket,
//! real clock or real randomness.

use std::time::Duration;

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wasmtime::{
    AsContextMut, CallHook, Caller, Engine, Linker, ResourceLimiter, StoreContextMut, StoreLimits,
    StoreLimitsBuilder, Trap,
};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtxBuilder};

use super::{Limits, LogLevel, MAX_LOG_BYTES, MAX_LOG_LINES, MAX_TABLE_ELEMENTS};

/// Largest `random_get` a guest may ask for in one call.
const MAX_RANDOM_BYTES: u64 = 1 << 20;
/// Seed of the deterministic stream behind WASI `random_get`.
const RANDOM_SEED: u64 = 0x6172_6269_7465_7221;
/// Fuel charged for every call from a guest into the host, whatever it
/// does: 2.5 µs at [`FUEL_PER_MS`](super::FUEL_PER_MS). The dearest call
/// left to wasmtime-wasi (`fd_read` over 64 KiB of iovecs) takes 0.4 µs
/// here, `sched_yield` 0.08 µs; a debug build takes up to 7 µs
/// (BENCHMARKS.md "Fuel"), still well inside the wall-clock backstop.
pub const HOST_CALL_FUEL: u64 = 5_000;
/// Fuel per byte `random_get` generates (each takes a ChaCha8 word,
/// about 1.6 ns here).
const RANDOM_FUEL_PER_BYTE: u64 = 8;
/// Fuel per iovec `fd_write` is given, and per byte `arbiter.log` copies.
const BUFFER_FUEL: u64 = 4;
/// Bytes of guest memory one WASI call may copy or scan (strings, iovec
/// lists); past it the call fails with `ENOMEM` (wasmtime's host-call
/// fuel, charged per byte).
pub const HOST_CALL_BYTES: usize = 64 << 10;

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
    /// The stream behind `random_get`, from its first use.
    random: Option<ChaCha8Rng>,
    logs: LogBuffer,
    /// The call's whole fuel budget, for the error that reports it spent.
    fuel_budget: u64,
}

impl CallState {
    pub(super) fn new(limits: &Limits) -> CallState {
        CallState {
            random: None,
            fuel_budget: limits.fuel(),
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

    /// The fuel the call started with.
    pub(super) fn fuel_budget(&self) -> u64 {
        self.fuel_budget
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
    // The two WASI calls whose work grows with their arguments beyond what
    // wasmtime's host-call byte cap covers, charged by what they do.
    linker.func_wrap("wasi_snapshot_preview1", "random_get", random_get)?;
    linker.func_wrap("wasi_snapshot_preview1", "fd_write", fd_write)?;
    linker.allow_shadowing(false);
    linker.func_wrap("arbiter", "log", log)?;
    Ok(linker)
}

/// WASI errno `nosys`.
const WASI_ENOSYS: i32 = 52;
/// WASI errno `badf`.
const WASI_EBADF: i32 = 8;

/// The store's call hook: charges [`HOST_CALL_FUEL`] for every call into
/// the host, so that a loop of host calls runs out of fuel like any other.
pub(super) fn charge_host_calls(
    mut store: StoreContextMut<'_, CallState>,
    hook: CallHook,
) -> wasmtime::Result<()> {
    if matches!(hook, CallHook::CallingHost) {
        // Each call may copy or scan only this much guest memory; set here
        // because the WASI glue starts every call from the store's value.
        store.set_hostcall_fuel(HOST_CALL_BYTES);
        charge(&mut store, HOST_CALL_FUEL)?;
    }
    Ok(())
}

/// Takes `cost` from the call's fuel, or traps out of fuel (leaving none).
fn charge(mut store: impl AsContextMut<Data = CallState>, cost: u64) -> wasmtime::Result<()> {
    let mut store = store.as_context_mut();
    let left = store.get_fuel()?;
    match left.checked_sub(cost) {
        Some(left) => store.set_fuel(left)?,
        None => {
            store.set_fuel(0)?;
            return Err(Trap::OutOfFuel.into());
        }
    }
    Ok(())
}

/// The guest's `memory`, or a trap naming the import that needed it.
fn memory(caller: &mut Caller<'_, CallState>, import: &str) -> wasmtime::Result<wasmtime::Memory> {
    match caller.get_export("memory").and_then(|e| e.into_memory()) {
        Some(memory) => Ok(memory),
        None => wasmtime::bail!("{import} was called by a module without a `memory` export"),
    }
}

/// WASI `random_get(buf, len)`: `len` bytes of the call's fixed-seed
/// stream (one ChaCha8 word per byte, as the WASI context draws them), at
/// [`RANDOM_FUEL_PER_BYTE`]; more than [`MAX_RANDOM_BYTES`] at once, or a
/// buffer outside memory, traps.
fn random_get(mut caller: Caller<'_, CallState>, ptr: i32, len: i32) -> wasmtime::Result<i32> {
    let (start, len) = (ptr as u32 as usize, len as u32 as usize);
    if len as u64 > MAX_RANDOM_BYTES {
        wasmtime::bail!(
            "random_get asked for {len} bytes; at most {MAX_RANDOM_BYTES} are given per call"
        );
    }
    charge(&mut caller, RANDOM_FUEL_PER_BYTE.saturating_mul(len as u64))?;
    let memory = memory(&mut caller, "random_get")?;
    let (data, state) = memory.data_and_store_mut(&mut caller);
    let Some(buffer) = data.get_mut(start..start.saturating_add(len)) else {
        wasmtime::bail!("random_get was given {start}..+{len}, outside the memory");
    };
    let random = state
        .random
        .get_or_insert_with(|| ChaCha8Rng::seed_from_u64(RANDOM_SEED));
    for byte in buffer {
        *byte = random.next_u32() as u8;
    }
    Ok(0)
}

/// WASI `fd_write(fd, iovs, iovs_len, nwritten)` as the capability-free
/// context answers it, without copying: stdout and stderr take the first
/// non-empty buffer whole and discard it, any other descriptor is `EBADF`.
/// Charged [`BUFFER_FUEL`] per iovec in the list, up front; a list or
/// buffer outside memory traps.
fn fd_write(
    mut caller: Caller<'_, CallState>,
    fd: i32,
    iovs: i32,
    iovs_len: i32,
    nwritten: i32,
) -> wasmtime::Result<i32> {
    let (start, count) = (iovs as u32 as usize, iovs_len as u32 as usize);
    charge(&mut caller, BUFFER_FUEL.saturating_mul(count as u64))?;
    let memory = memory(&mut caller, "fd_write")?;
    let data = memory.data(&caller);
    let Some(list) = count
        .checked_mul(8)
        .and_then(|len| data.get(start..start.checked_add(len)?))
    else {
        wasmtime::bail!("fd_write was given {count} iovecs at {start}, outside the memory");
    };
    let mut written = 0u32;
    for iov in list.chunks_exact(8) {
        let word = |k: usize| u32::from_le_bytes([iov[k], iov[k + 1], iov[k + 2], iov[k + 3]]);
        let (buf, len) = (word(0) as usize, word(4));
        if len == 0 {
            continue;
        }
        if buf.saturating_add(len as usize) > data.len() {
            wasmtime::bail!("fd_write was given a buffer {buf}..+{len} outside the memory");
        }
        written = len;
        break;
    }
    if fd != 1 && fd != 2 {
        return Ok(WASI_EBADF);
    }
    let at = nwritten as u32 as usize;
    match memory
        .data_mut(&mut caller)
        .get_mut(at..at.saturating_add(4))
    {
        Some(slot) => slot.copy_from_slice(&written.to_le_bytes()),
        None => wasmtime::bail!("fd_write was given nwritten at {at}, outside the memory"),
    }
    Ok(0)
}

/// `arbiter.log(level, ptr, len)`: keeps the line if the call's budget
/// allows, at [`BUFFER_FUEL`] per byte kept.
fn log(mut caller: Caller<'_, CallState>, level: i32, ptr: i32, len: i32) -> wasmtime::Result<()> {
    let (start, len) = (ptr as u32 as usize, len as u32 as usize);
    let logs = &caller.data().logs;
    if logs.lines.len() >= MAX_LOG_LINES || logs.bytes.saturating_add(len) > MAX_LOG_BYTES {
        caller.data_mut().logs.dropped = caller.data().logs.dropped.saturating_add(1);
        return Ok(());
    }
    charge(&mut caller, BUFFER_FUEL.saturating_mul(len as u64))?;
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

/// What the stopped monotonic clock reads, in nanoseconds: not zero, since
/// Go's runtime refuses to start on a monotonic clock reading zero
/// ("fatal error: nanotime returning zero"), which would make every Go
/// plugin trap in `_initialize`.
pub const MONOTONIC_NOW: u64 = 1_000_000_000;

/// A WASI p1 context with no capabilities: no preopens, environment or
/// arguments, closed stdin, discarded stdout/stderr, the wall clock stopped
/// at the Unix epoch and the monotonic one at [`MONOTONIC_NOW`], and a
/// fixed-seed random stream.
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

/// Clocks that never move: the wall clock reads the Unix epoch, the
/// monotonic clock [`MONOTONIC_NOW`].
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
        MONOTONIC_NOW
    }
}
