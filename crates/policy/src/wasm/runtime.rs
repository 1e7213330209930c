//! The runtime every bundle shares: one wasmtime engine (pooling
//! allocator sized by [`RuntimeConfig`], epoch interruption with one ticker
//! thread, Cranelift's per-function results cached across module versions),
//! one linker, and the load pipeline ([`Runtime::load`]): compile, check
//! against ABI v1 (`module`), probe `arbiter_abi_version` and
//! `arbiter_weight_fields` (`instance`), and share the result among every
//! load of identical bytes. Called by the bundle loader. It never runs a
//! hook, and a module it refuses is a [`LoadError`], never a panic.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, Linker, Module, PoolingAllocationConfig,
};

use super::host::{plugin_linker, CallState};
use super::module::{check_exports, declares_weight_fields, hex_sha256, Compiled, Plugin};
use super::{Limits, LoadError, RuntimeError, ABI_VERSION, MAX_TABLE_ELEMENTS, TICK};

/// Deadline for the `arbiter_abi_version` probe made at load.
const ABI_CHECK_TIMEOUT: Duration = Duration::from_millis(100);

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
    max_memory_bytes: usize,
    modules: Mutex<HashMap<String, Weak<Compiled>>>,
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
            max_memory_bytes: config.max_memory_bytes,
            modules: Mutex::new(HashMap::new()),
        })
    }

    /// Checks and compiles `bytes` as plugin `name`, or reuses the module
    /// already compiled from identical bytes.
    pub fn load(&self, name: &str, bytes: &[u8]) -> Result<Arc<Plugin>, LoadError> {
        let digest = hex_sha256(bytes);
        // A poisoned lock only means another load panicked; the map is intact.
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        modules.retain(|_, module| module.strong_count() > 0);
        let compiled = match modules.get(&digest).and_then(Weak::upgrade) {
            Some(compiled) => compiled,
            None => {
                let compiled = Arc::new(self.compile(name, bytes, digest.clone())?);
                modules.insert(digest, Arc::downgrade(&compiled));
                compiled
            }
        };
        Ok(Arc::new(Plugin {
            name: name.to_string(),
            compiled,
        }))
    }

    /// Distinct compiled modules alive (held by at least one plugin).
    pub fn compiled_modules(&self) -> usize {
        let modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        modules.values().filter(|m| m.strong_count() > 0).count()
    }

    /// Compiles and checks a module (`module`), links it, and probes its
    /// ABI version and declared weight fields (`instance`), in that order:
    /// the first problem found is the one reported.
    fn compile(&self, name: &str, bytes: &[u8], digest: String) -> Result<Compiled, LoadError> {
        let module = Module::new(&self.engine, bytes).map_err(|e| LoadError::Compile {
            module: name.to_string(),
            reason: format!("{e:#}"),
        })?;
        let exports = check_exports(name, &module)?;
        let pre = self
            .linker
            .instantiate_pre(&module)
            .map_err(|e| LoadError::Link {
                module: name.to_string(),
                reason: format!("{e:#}"),
            })?;
        let declares_fields = declares_weight_fields(name, &module)?;
        let mut compiled = Compiled {
            digest,
            pre,
            hooks: exports.hooks,
            reactor: exports.reactor,
            weight_fields: None,
        };
        let probe = Limits {
            timeout: ABI_CHECK_TIMEOUT,
            memory_bytes: self.max_memory_bytes,
        };
        let found = compiled
            .abi_version(&probe)
            .map_err(|source| LoadError::AbiCheck {
                module: name.to_string(),
                source,
            })?;
        if found != ABI_VERSION {
            return Err(LoadError::AbiVersion {
                module: name.to_string(),
                found,
            });
        }
        if declares_fields {
            let fields =
                compiled
                    .weight_fields(&probe)
                    .map_err(|reason| LoadError::WeightFields {
                        module: name.to_string(),
                        reason,
                    })?;
            compiled.weight_fields = Some(fields);
        }
        Ok(compiled)
    }
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
