//! The runtime every bundle shares: one wasmtime engine (pooling
//! allocator sized by [`RuntimeConfig`], fuel metering, epoch interruption
//! with one ticker thread, Cranelift's per-function results cached across
//! module versions), one linker, and the load pipeline ([`Runtime::load`]):
//! check the module's complexity against its bundle's caps (`complexity`), compile
//! on a worker thread under a time budget, check against ABI v1
//! (`module`), probe `_initialize`, `arbiter_abi_version` and
//! `arbiter_weight_fields` under the bundle's own call limits (`instance`),
//! and share the compiled module among every load of identical bytes.
//! Called by the bundle loader, which runs on the reload path (a watcher's
//! or the CLI's thread), never inside a scheduling cycle. It never runs a
//! hook, and a module it refuses is a [`LoadError`], never a panic.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, Linker, Module, PoolingAllocationConfig,
};

use super::complexity::{self, ComplexityCaps, PLATFORM_COMPLEXITY_CAPS, TENANT_COMPLEXITY_CAPS};
use super::host::{plugin_linker, CallState};
use super::module::{check_exports, declares_weight_fields, hex_sha256, Compiled, Plugin};
use super::{Limits, LoadError, RuntimeError, MAX_TABLE_ELEMENTS, TICK};

/// How long compiling one platform module may take before it is given up
/// (and the bundle with it; the last good one stays in force). The complexity
/// caps and the size cap keep compilations below it: the dearest 8 MiB
/// module they allow takes 35 s on the 2-core machine of BENCHMARKS.md
/// ("Fuel"), `shortest-first` (166 KB) a fraction of a second; this bounds
/// what they do not foresee.
pub const COMPILE_BUDGET: Duration = Duration::from_secs(60);
/// The same for a tenant bundle's module (the dearest 2 MiB one the tenant
/// caps allow: 6 s).
pub const TENANT_COMPILE_BUDGET: Duration = Duration::from_secs(20);
/// Compilations given up but still running (Cranelift cannot be stopped):
/// while this many run, no new compilation starts.
const MAX_ABANDONED_COMPILES: usize = 2;

/// What loading one module runs under: its bundle's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadLimits {
    /// The limits of the load probe (`_initialize`, `arbiter_abi_version`,
    /// `arbiter_weight_fields`): the call limits of the policy naming the module.
    pub call: Limits,
    /// What the module may define ([`PLATFORM_COMPLEXITY_CAPS`], [`TENANT_COMPLEXITY_CAPS`]).
    pub complexity: ComplexityCaps,
    /// How long compiling it may take.
    pub compile_budget: Duration,
}

impl LoadLimits {
    /// A platform bundle's module, probed under `call`.
    pub fn platform(call: Limits) -> LoadLimits {
        LoadLimits {
            call,
            complexity: PLATFORM_COMPLEXITY_CAPS,
            compile_budget: COMPILE_BUDGET,
        }
    }

    /// A tenant bundle's module, probed under `call`.
    pub fn tenant(call: Limits) -> LoadLimits {
        LoadLimits {
            call,
            complexity: TENANT_COMPLEXITY_CAPS,
            compile_budget: TENANT_COMPILE_BUDGET,
        }
    }
}

impl Default for LoadLimits {
    /// A platform module probed under the default call limits.
    fn default() -> LoadLimits {
        LoadLimits::platform(Limits::default())
    }
}

/// Cranelift's per-function compilation results, kept so that a new
/// version of a module (a bundle update, or another tenant's copy of a
/// plugin) recompiles only the functions that changed. In memory, bounded:
/// past `max_bytes` it starts over, which costs only recompilation.
#[derive(Debug)]
pub(super) struct CompileCache {
    max_bytes: usize,
    entries: Mutex<Cached>,
}

/// The cached results, and their total size in bytes (keys included).
#[derive(Debug, Default)]
struct Cached {
    map: HashMap<Vec<u8>, Vec<u8>>,
    bytes: usize,
}

impl CompileCache {
    pub(super) fn new(max_bytes: usize) -> CompileCache {
        CompileCache {
            max_bytes,
            entries: Mutex::new(Cached::default()),
        }
    }
}

impl wasmtime::CacheStore for CompileCache {
    fn get(&self, key: &[u8]) -> Option<std::borrow::Cow<'_, [u8]>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .map
            .get(key)
            .map(|value| std::borrow::Cow::Owned(value.clone()))
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let size = key.len() + value.len();
        if size > self.max_bytes {
            return false;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let Cached { map, bytes } = &mut *entries;
        if let Some(old) = map.remove(key) {
            *bytes -= key.len() + old.len();
        }
        if *bytes + size > self.max_bytes {
            map.clear();
            *bytes = 0;
        }
        map.insert(key.to_vec(), value);
        *bytes += size;
        true
    }
}

/// Bound of the [`CompileCache`].
const COMPILE_CACHE_BYTES: usize = 64 << 20;

/// Sizing of a [`Runtime`]'s instance pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Plugin instances alive at once (calls in flight on all threads, plus
    /// load-time probes); one more fails with [`CallError::Instantiate`](super::CallError::Instantiate).
    /// Loaded modules are not limited by this.
    pub max_instances: u32,
    /// Ceiling of any [`Limits::memory_bytes`]; a larger limit is cut to it.
    pub max_memory_bytes: usize,
    /// Bytes of each pool slot's linear memory kept resident after an
    /// instance ends, where the kernel can tell which pages an instance
    /// dirtied (PAGEMAP_SCAN, Linux ≥ 6.7): those pages are reset in place
    /// rather than returned to the kernel, so the next instance in the slot
    /// takes no page faults there. At most `max_instances` × this much
    /// stays resident. Ignored on other kernels.
    pub keep_resident_bytes: usize,
}

impl Default for RuntimeConfig {
    fn default() -> RuntimeConfig {
        RuntimeConfig {
            max_instances: 64,
            max_memory_bytes: 256 << 20,
            keep_resident_bytes: 4 << 20,
        }
    }
}

/// One engine, one linker and the cache of compiled modules; shared by every
/// bundle. Cheap to share by reference across threads.
pub struct Runtime {
    engine: Engine,
    linker: Linker<CallState>,
    modules: Mutex<HashMap<String, Weak<Compiled>>>,
    /// Compilations given up on and still running.
    abandoned: Arc<Mutex<usize>>,
}

impl Runtime {
    pub fn new() -> Result<Runtime, RuntimeError> {
        Runtime::with_config(RuntimeConfig::default())
    }

    pub fn with_config(config: RuntimeConfig) -> Result<Runtime, RuntimeError> {
        let mut pool = PoolingAllocationConfig::new();
        pool.total_core_instances(config.max_instances)
            .total_memories(config.max_instances)
            .total_tables(config.max_instances)
            .total_stacks(0)
            .total_component_instances(0)
            .max_memories_per_module(1)
            .max_tables_per_module(1)
            .table_elements(MAX_TABLE_ELEMENTS)
            .max_memory_size(config.max_memory_bytes);
        // Where the kernel can tell which pages an instance dirtied
        // (PAGEMAP_SCAN, Linux ≥ 6.7), a slot's pages stay mapped between
        // instances and only those pages are reset: no `madvise` and no
        // page faults on the next call. Elsewhere keeping memory resident
        // would mean a memset of all of it per call, so memory is returned
        // to the kernel as before.
        if PoolingAllocationConfig::is_pagemap_scan_available() {
            pool.linear_memory_keep_resident(config.keep_resident_bytes)
                .pagemap_scan(wasmtime::Enabled::Yes);
        }
        let mut wasm = Config::new();
        wasm.epoch_interruption(true)
            .consume_fuel(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
            .enable_incremental_compilation(Arc::new(CompileCache::new(COMPILE_CACHE_BYTES)))
            .map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;
        // For `perf`: names JIT code by plugin function in /tmp/perf-<pid>.map.
        if std::env::var_os("ARBITER_WASM_PERFMAP").is_some() {
            wasm.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&wasm).map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;
        let linker = plugin_linker(&engine).map_err(|e| RuntimeError::Linker(format!("{e:#}")))?;
        spawn_ticker(&engine).map_err(RuntimeError::Ticker)?;
        Ok(Runtime {
            engine,
            linker,
            modules: Mutex::new(HashMap::new()),
            abandoned: Arc::new(Mutex::new(0)),
        })
    }

    /// Checks and compiles `bytes` as plugin `name` under `limits`, or
    /// reuses the module already compiled from identical bytes; either way
    /// its complexity is checked against `limits.complexity` and it is probed under
    /// `limits.call` ([`Plugin::probe`]).
    pub fn load(
        &self,
        name: &str,
        bytes: &[u8],
        limits: &LoadLimits,
    ) -> Result<Arc<Plugin>, LoadError> {
        complexity::check(name, bytes, &limits.complexity)?;
        let digest = hex_sha256(bytes);
        let compiled = {
            let mut modules = lock(&self.modules);
            modules.retain(|_, module| module.strong_count() > 0);
            match modules.get(&digest).and_then(Weak::upgrade) {
                Some(compiled) => compiled,
                None => {
                    let compiled = Arc::new(self.compile(
                        name,
                        bytes,
                        digest.clone(),
                        limits.compile_budget,
                    )?);
                    modules.insert(digest, Arc::downgrade(&compiled));
                    compiled
                }
            }
        };
        let weight_fields = compiled.probe(name, &limits.call)?;
        Ok(Arc::new(Plugin {
            name: name.to_string(),
            compiled,
            weight_fields,
        }))
    }

    /// Distinct compiled modules alive (held by at least one plugin).
    pub fn compiled_modules(&self) -> usize {
        let modules = lock(&self.modules);
        modules.values().filter(|m| m.strong_count() > 0).count()
    }

    /// Compiles (under `budget`) and checks a module (`module`) and links
    /// it, in that order: the first problem found is the one reported.
    fn compile(
        &self,
        name: &str,
        bytes: &[u8],
        digest: String,
        budget: Duration,
    ) -> Result<Compiled, LoadError> {
        let module = self.compile_within(name, bytes, budget)?;
        let exports = check_exports(name, &module)?;
        let pre = self
            .linker
            .instantiate_pre(&module)
            .map_err(|e| LoadError::Link {
                module: name.to_string(),
                reason: format!("{e:#}"),
            })?;
        let declares_fields = declares_weight_fields(name, &module)?;
        Ok(Compiled {
            digest,
            pre,
            hooks: exports.hooks,
            reactor: exports.reactor,
            declares_fields,
            probes: Mutex::new(Vec::new()),
        })
    }

    /// Compiles `bytes` under `budget` ([`within_budget`]).
    fn compile_within(
        &self,
        name: &str,
        bytes: &[u8],
        budget: Duration,
    ) -> Result<Module, LoadError> {
        let (engine, bytes) = (self.engine.clone(), bytes.to_vec());
        let compiled = within_budget(&self.abandoned, budget, move || {
            Module::new(&engine, &bytes).map_err(|e| format!("{e:#}"))
        });
        let module = name.to_string();
        match compiled {
            Ok(Ok(compiled)) => Ok(compiled),
            Ok(Err(reason)) => Err(LoadError::Compile { module, reason }),
            Err(OverBudget::Exceeded) => Err(LoadError::CompileTimeout { module, budget }),
            Err(OverBudget::Busy(running)) => Err(LoadError::CompileBusy { module, running }),
            Err(OverBudget::Spawn(e)) => Err(LoadError::Compile {
                module,
                reason: format!("cannot start a compiler thread: {e}"),
            }),
        }
    }
}

/// Why [`within_budget`] gave no result.
#[derive(Debug)]
pub(super) enum OverBudget {
    /// The work did not end within the budget; it goes on in the background.
    Exceeded,
    /// This many earlier works that exceeded their budget are still running.
    Busy(usize),
    Spawn(std::io::Error),
}

/// Runs `work` on a thread of its own and waits at most `budget` for its
/// result. Cranelift cannot be interrupted: work given up on runs to its
/// end in the background, counted in `abandoned`, and while
/// [`MAX_ABANDONED_COMPILES`] such run, no new work starts.
pub(super) fn within_budget<T: Send + 'static>(
    abandoned: &Arc<Mutex<usize>>,
    budget: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, OverBudget> {
    let running = *lock(abandoned);
    if running >= MAX_ABANDONED_COMPILES {
        return Err(OverBudget::Busy(running));
    }
    let job = Arc::new(Job::<T>::default());
    let worker = {
        let (job, abandoned) = (job.clone(), abandoned.clone());
        move || {
            let result = work();
            let mut state = lock(&job.state);
            if state.given_up {
                let mut running = lock(&abandoned);
                *running = running.saturating_sub(1);
            } else {
                state.result = Some(result);
                job.done.notify_all();
            }
        }
    };
    std::thread::Builder::new()
        .name("arbiter-wasm-compile".to_string())
        .spawn(worker)
        .map_err(OverBudget::Spawn)?;
    let deadline = Instant::now() + budget;
    let mut state = lock(&job.state);
    loop {
        if let Some(result) = state.result.take() {
            return Ok(result);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            state.given_up = true;
            *lock(abandoned) += 1;
            return Err(OverBudget::Exceeded);
        }
        state = job
            .done
            .wait_timeout(state, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Work on its worker thread: its result, or that nobody waits for it.
struct Job<T> {
    state: Mutex<JobState<T>>,
    done: Condvar,
}

impl<T> Default for Job<T> {
    fn default() -> Job<T> {
        Job {
            state: Mutex::new(JobState {
                result: None,
                given_up: false,
            }),
            done: Condvar::new(),
        }
    }
}

struct JobState<T> {
    result: Option<T>,
    given_up: bool,
}

/// Locks a mutex whose data stays consistent even if a holder panicked
/// (only whole values are stored under it).
fn lock<V>(mutex: &Mutex<V>) -> MutexGuard<'_, V> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Advances the engine's epoch every [`TICK`] until the engine is gone (the
/// runtime and every plugin compiled by it dropped).
fn spawn_ticker(engine: &Engine) -> std::io::Result<()> {
    let engine = engine.weak();
    std::thread::Builder::new()
        .name("arbiter-wasm-epoch".to_string())
        .spawn(move || {
            while let Some(engine) = engine.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        })?;
    Ok(())
}
