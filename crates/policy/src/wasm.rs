//! The sandbox that runs WebAssembly policy plugins (plugin-sdk/ABI.md, ABI v1).
//!
//! Its job: turn module bytes into a checked, compiled [`Plugin`] once
//! ([`Runtime::load`]), and run one hook call per evaluation batch in a fresh
//! instance under a deadline and a memory cap ([`Plugin::call`]), handing the
//! raw JSON response back. It must never panic, block past a call's deadline
//! or let a guest reach the host (no files, sockets, environment, arguments,
//! real clocks or real randomness): whatever a guest does becomes a
//! [`CallError`] for that one policy. It does not parse requests or responses
//! and does not decide what a failure means — the policy layer that owns
//! bundles calls it, builds the JSON and applies the policy's `failurePolicy`.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rand_chacha::rand_core::SeedableRng;
use sha2::{Digest, Sha256};
use wasmtime::{
    Caller, Config, Engine, ExternType, FuncType, InstanceAllocationStrategy, InstancePre, Linker,
    Module, PoolingAllocationConfig, ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder, Trap,
};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, I32Exit, WasiCtxBuilder};

/// How often the epoch ticker advances every running call's clock.
const TICK: Duration = Duration::from_millis(1);
/// A response larger than this is a bad output, not something to copy.
pub const MAX_RESPONSE_BYTES: usize = 4 << 20;
/// `arbiter.log` lines kept per call; later lines are dropped and counted.
pub const MAX_LOG_LINES: usize = 64;
/// `arbiter.log` bytes kept per call; a line that would pass this is dropped.
pub const MAX_LOG_BYTES: usize = 4 << 10;
/// Deadline for the `arbiter_abi_version` probe made at load.
const ABI_CHECK_TIMEOUT: Duration = Duration::from_millis(100);
/// Table elements one instance may have (Go and C# modules reach thousands).
const MAX_TABLE_ELEMENTS: usize = 20_000;
/// Largest `random_get` a guest may ask for in one call.
const MAX_RANDOM_BYTES: u64 = 1 << 20;
/// Seed of the deterministic stream behind WASI `random_get`.
const RANDOM_SEED: u64 = 0x6172_6269_7465_7221;
/// The ABI version this host speaks.
pub const ABI_VERSION: i32 = 1;
/// Optional export declaring the `weight` request fields a plugin reads.
pub const WEIGHT_FIELDS_EXPORT: &str = "arbiter_weight_fields";

/// Per-call limits of one policy (ABI.md "Life of a call").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall time one hook call may run, instantiation included.
    pub timeout: Duration,
    /// Largest linear memory the instance may have, in bytes.
    pub memory_bytes: usize,
}

impl Default for Limits {
    /// The defaults of ABI.md: 100 ms and 64 MiB.
    fn default() -> Limits {
        Limits {
            timeout: Duration::from_millis(100),
            memory_bytes: 64 << 20,
        }
    }
}

/// A policy hook: the decision point a policy serves (`hook:` in a bundle)
/// and the function a plugin exports for it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Hook {
    Admission,
    Weight,
    FairShare,
    Autoscale,
    Flavor,
}

impl Hook {
    pub const ALL: [Hook; 5] = [
        Hook::Admission,
        Hook::Weight,
        Hook::FairShare,
        Hook::Autoscale,
        Hook::Flavor,
    ];

    /// The hook named as bundles spell it (`fairShare`).
    pub fn parse(text: &str) -> Option<Hook> {
        Hook::ALL.into_iter().find(|h| h.to_string() == text)
    }

    /// The function a module exports to implement this hook.
    pub fn export_name(self) -> &'static str {
        match self {
            Hook::Admission => "arbiter_admission",
            Hook::Weight => "arbiter_weight",
            Hook::FairShare => "arbiter_fair_share",
            Hook::Autoscale => "arbiter_autoscale",
            Hook::Flavor => "arbiter_flavor",
        }
    }
}

impl fmt::Display for Hook {
    /// The hook's name as bundles spell it (`hook: fairShare`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hook::Admission => "admission",
            Hook::Weight => "weight",
            Hook::FairShare => "fairShare",
            Hook::Autoscale => "autoscale",
            Hook::Flavor => "flavor",
        })
    }
}

/// Level of an `arbiter.log` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

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

/// What one hook call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutput {
    /// The response, checked to be UTF-8 (not yet parsed as JSON).
    pub response: String,
    /// `arbiter.log` lines, in order, within the per-call bound.
    pub logs: Vec<(LogLevel, String)>,
    /// Lines beyond the bound, dropped.
    pub dropped_logs: u32,
}

/// Why one hook call failed; it fails that policy only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("the plugin trapped: {0}")]
    Trap(String),
    #[error("the plugin ran past its deadline")]
    Timeout,
    #[error("the plugin ran out of memory: it needed more than its memory limit")]
    OutOfMemory,
    #[error("the plugin does not export `{0}`")]
    MissingExport(String),
    #[error("the plugin returned a bad output: {0}")]
    BadOutput(String),
    #[error("the plugin could not be instantiated: {0}")]
    Instantiate(String),
}

impl CallError {
    /// The metrics label (`arbiter_policy_errors_total{kind}`).
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Trap(_) => "trap",
            CallError::Timeout => "timeout",
            CallError::OutOfMemory => "out_of_memory",
            CallError::MissingExport(_) => "missing_export",
            CallError::BadOutput(_) => "bad_output",
            CallError::Instantiate(_) => "instantiate",
        }
    }
}

/// Why a module was refused at load; the bundle holding it is rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error(
        "plugin {module}: not a usable WebAssembly module: {reason}; build a core module \
         (not a component) for wasm32-unknown-unknown or wasm32-wasip1"
    )]
    Compile { module: String, reason: String },
    #[error(
        "plugin {module} does not export `{export}`; every plugin exports `memory`, \
         `arbiter_abi_version` and `arbiter_alloc` (plugin-sdk/ABI.md)"
    )]
    MissingExport { module: String, export: String },
    #[error(
        "plugin {module} exports `{export}` as {found}, but ABI v1 wants {expected} \
         (plugin-sdk/ABI.md)"
    )]
    ExportType {
        module: String,
        export: String,
        expected: String,
        found: String,
    },
    #[error(
        "plugin {module} imports `{import}`, which the sandbox does not provide; a plugin may \
         import only `arbiter.log` and `wasi_snapshot_preview1.*` — remove the code that needs it"
    )]
    ForbiddenImport { module: String, import: String },
    #[error("plugin {module}: its imports cannot be satisfied: {reason}")]
    Link { module: String, reason: String },
    #[error(
        "plugin {module} speaks plugin ABI {found}, this arbiter speaks ABI {ABI_VERSION}; \
         rebuild it against plugin-sdk ABI v{ABI_VERSION}"
    )]
    AbiVersion { module: String, found: i32 },
    #[error("plugin {module}: calling `arbiter_abi_version` failed: {source}")]
    AbiCheck { module: String, source: CallError },
    #[error(
        "plugin {module}: its `arbiter_weight_fields` declaration is unusable: {reason} \
         (plugin-sdk/ABI.md \"Lean weight requests\")"
    )]
    WeightFields { module: String, reason: String },
}

/// Why the runtime itself could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot create the WebAssembly engine: {0}")]
    Engine(String),
    #[error("cannot set up the plugin imports: {0}")]
    Linker(String),
    #[error("cannot start the plugin deadline ticker thread: {0}")]
    Ticker(std::io::Error),
}

/// Cranelift's per-function compilation results, kept so that a new
/// version of a module (a bundle update, or another tenant's copy of a
/// plugin) recompiles only the functions that changed. In memory, bounded:
/// past `max_bytes` it starts over, which costs only recompilation.
#[derive(Debug)]
struct CompileCache {
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
    fn new(max_bytes: usize) -> CompileCache {
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
    /// load-time probes); one more fails with [`CallError::Instantiate`].
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

/// A loaded plugin: a compiled, checked module under the name a bundle gave it.
pub struct Plugin {
    name: String,
    compiled: Arc<Compiled>,
}

/// What identical module bytes share, whoever loaded them.
struct Compiled {
    digest: String,
    pre: InstancePre<CallState>,
    hooks: Vec<Hook>,
    reactor: bool,
    /// What `arbiter_weight_fields` declared, when the module exports it.
    weight_fields: Option<Vec<String>>,
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

    fn compile(&self, name: &str, bytes: &[u8], digest: String) -> Result<Compiled, LoadError> {
        let module = Module::new(&self.engine, bytes).map_err(|e| LoadError::Compile {
            module: name.to_string(),
            reason: format!("{e:#}"),
        })?;
        check_imports(name, &module)?;
        check_export(name, &module, "memory", |ty| match ty {
            ExternType::Memory(memory) if !memory.is_64() => Ok(()),
            ExternType::Memory(_) => Err("a 64-bit memory".to_string()),
            other => Err(describe_extern(other)),
        })?;
        check_func_export(name, &module, "arbiter_abi_version", "() -> i32")?;
        check_func_export(name, &module, "arbiter_alloc", "(i32) -> i32")?;
        let mut hooks = Vec::new();
        for hook in Hook::ALL {
            if module.get_export(hook.export_name()).is_some() {
                check_func_export(name, &module, hook.export_name(), "(i32, i32) -> i64")?;
                hooks.push(hook);
            }
        }
        let reactor = match module.get_export("_initialize") {
            Some(_) => {
                check_func_export(name, &module, "_initialize", "() -> ()")?;
                true
            }
            None => false,
        };
        let pre = self
            .linker
            .instantiate_pre(&module)
            .map_err(|e| LoadError::Link {
                module: name.to_string(),
                reason: format!("{e:#}"),
            })?;
        let declares_fields = match module.get_export(WEIGHT_FIELDS_EXPORT) {
            Some(_) => {
                check_func_export(name, &module, WEIGHT_FIELDS_EXPORT, "() -> i64")?;
                true
            }
            None => false,
        };
        let mut compiled = Compiled {
            digest,
            pre,
            hooks,
            reactor,
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

impl Plugin {
    /// The names `arbiter_weight_fields` returned at load, if it is exported.
    pub fn weight_fields(&self) -> Option<&[String]> {
        self.compiled.weight_fields.as_deref()
    }

    /// The name the bundle gave this module.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Hex sha256 of the module bytes.
    pub fn digest(&self) -> &str {
        &self.compiled.digest
    }

    pub fn exports_hook(&self, hook: Hook) -> bool {
        self.compiled.hooks.contains(&hook)
    }

    /// One evaluation batch: a fresh instance, `request` written through
    /// `arbiter_alloc`, `arbiter_<hook>` called, the response copied out.
    pub fn call(
        &self,
        hook: Hook,
        request: &[u8],
        limits: &Limits,
    ) -> Result<CallOutput, CallError> {
        if !self.exports_hook(hook) {
            return Err(CallError::MissingExport(hook.export_name().to_string()));
        }
        let mut run = self.compiled.start(limits)?;
        let response = run.call_hook(hook, request);
        let logs = std::mem::take(&mut run.store.data_mut().logs);
        Ok(CallOutput {
            response: response?,
            logs: logs.lines,
            dropped_logs: logs.dropped,
        })
    }

    #[cfg(test)]
    fn shares_module_with(&self, other: &Plugin) -> bool {
        Arc::ptr_eq(&self.compiled, &other.compiled)
    }
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("digest", &self.compiled.digest)
            .field("hooks", &self.compiled.hooks)
            .finish()
    }
}

/// One live instance in its own store, for the length of one call.
struct Run {
    store: Store<CallState>,
    instance: wasmtime::Instance,
}

impl Compiled {
    /// A fresh instance under `limits`, with `_initialize` run for reactors.
    fn start(&self, limits: &Limits) -> Result<Run, CallError> {
        let engine = self.pre.module().engine();
        let mut store = Store::new(engine, CallState::new(limits));
        store.limiter(|state| &mut state.limiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(deadline_ticks(limits.timeout));
        let instance = match self.pre.instantiate(&mut store) {
            Ok(instance) => instance,
            Err(e) => {
                return Err(match classify(&e, store.data()) {
                    CallError::Trap(message) => CallError::Instantiate(message),
                    other => other,
                })
            }
        };
        let mut run = Run { store, instance };
        if self.reactor {
            let init = run.func::<(), ()>("_initialize")?;
            init.call(&mut run.store, ())
                .map_err(|e| classify(&e, run.store.data()))?;
        }
        Ok(run)
    }

    /// Calls `arbiter_weight_fields` and reads the JSON list of names it returns.
    fn weight_fields(&self, limits: &Limits) -> Result<Vec<String>, String> {
        let mut run = self.start(limits).map_err(|e| e.to_string())?;
        let declare = run
            .func::<(), i64>(WEIGHT_FIELDS_EXPORT)
            .map_err(|e| e.to_string())?;
        let packed = declare
            .call(&mut run.store, ())
            .map_err(|e| classify(&e, run.store.data()).to_string())?;
        let bytes = run
            .response(WEIGHT_FIELDS_EXPORT, packed)
            .map_err(|e| e.to_string())?;
        serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "it returned {:?}, not a JSON list of strings: {e}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            )
        })
    }

    fn abi_version(&self, limits: &Limits) -> Result<i32, CallError> {
        let mut run = self.start(limits)?;
        let version = run.func::<(), i32>("arbiter_abi_version")?;
        version
            .call(&mut run.store, ())
            .map_err(|e| classify(&e, run.store.data()))
    }
}

impl Run {
    fn func<P, R>(&mut self, name: &str) -> Result<wasmtime::TypedFunc<P, R>, CallError>
    where
        P: wasmtime::WasmParams,
        R: wasmtime::WasmResults,
    {
        self.instance
            .get_typed_func::<P, R>(&mut self.store, name)
            .map_err(|_| CallError::MissingExport(name.to_string()))
    }

    fn call_hook(&mut self, hook: Hook, request: &[u8]) -> Result<String, CallError> {
        let memory = self
            .instance
            .get_memory(&mut self.store, "memory")
            .ok_or_else(|| CallError::MissingExport("memory".to_string()))?;
        let len = i32::try_from(request.len()).map_err(|_| CallError::OutOfMemory)?;
        let alloc = self.func::<i32, i32>("arbiter_alloc")?;
        let ptr = alloc
            .call(&mut self.store, len)
            .map_err(|e| classify(&e, self.store.data()))?;
        memory
            .write(&mut self.store, ptr as u32 as usize, request)
            .map_err(|_| {
                CallError::BadOutput(format!(
                    "arbiter_alloc({len}) returned {}, but {len} bytes there lie outside \
                     the {}-byte memory",
                    ptr as u32,
                    memory.data_size(&self.store)
                ))
            })?;
        let entry = self.func::<(i32, i32), i64>(hook.export_name())?;
        let packed = entry
            .call(&mut self.store, (ptr, len))
            .map_err(|e| classify(&e, self.store.data()))?;
        let bytes = self.response(hook.export_name(), packed)?;
        String::from_utf8(bytes).map_err(|e| {
            CallError::BadOutput(format!(
                "{} returned a response that is not UTF-8 (bad byte at offset {})",
                hook.export_name(),
                e.utf8_error().valid_up_to()
            ))
        })
    }

    /// Copies out the `(out_ptr << 32) | out_len` result of `export`.
    fn response(&mut self, export: &str, packed: i64) -> Result<Vec<u8>, CallError> {
        let memory = self
            .instance
            .get_memory(&mut self.store, "memory")
            .ok_or_else(|| CallError::MissingExport("memory".to_string()))?;
        let out_ptr = (packed as u64 >> 32) as usize;
        let out_len = (packed as u64 & 0xffff_ffff) as usize;
        if out_len > MAX_RESPONSE_BYTES {
            return Err(CallError::BadOutput(format!(
                "{export} returned a {out_len}-byte response; at most {MAX_RESPONSE_BYTES} \
                 bytes are accepted"
            )));
        }
        let data = memory.data(&self.store);
        out_ptr
            .checked_add(out_len)
            .and_then(|end| data.get(out_ptr..end))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| {
                CallError::BadOutput(format!(
                    "{export} returned the response at {out_ptr}..+{out_len}, outside the \
                     {}-byte memory",
                    data.len()
                ))
            })
    }
}

/// Store data of one call.
struct CallState {
    limiter: Limiter,
    /// Built on the first WASI call, so plugins without WASI never pay for it.
    wasi: Option<WasiP1Ctx>,
    logs: LogBuffer,
}

impl CallState {
    fn new(limits: &Limits) -> CallState {
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

/// Turns a failed guest call into the one thing a policy author must fix.
fn classify(error: &wasmtime::Error, state: &CallState) -> CallError {
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => CallError::Timeout,
        _ if state.limiter.memory_denied => CallError::OutOfMemory,
        Some(trap) => CallError::Trap(trap.to_string()),
        None => match error.downcast_ref::<I32Exit>() {
            Some(exit) => CallError::Trap(format!("the plugin called proc_exit({})", exit.0)),
            None => CallError::Trap(format!("{error:#}")),
        },
    }
}

/// Epoch ticks for `timeout`, plus one: the epoch may advance right after
/// the deadline is set.
fn deadline_ticks(timeout: Duration) -> u64 {
    let ticks = timeout.as_nanos().div_ceil(TICK.as_nanos());
    u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1)
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

/// The imports every plugin sees: `arbiter.log` and capability-free WASI p1.
fn plugin_linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
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
    let line = String::from_utf8_lossy(bytes).into_owned();
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

fn check_imports(name: &str, module: &Module) -> Result<(), LoadError> {
    for import in module.imports() {
        let allowed = match import.module() {
            "arbiter" => import.name() == "log",
            "wasi_snapshot_preview1" => true,
            _ => false,
        };
        if !allowed {
            return Err(LoadError::ForbiddenImport {
                module: name.to_string(),
                import: format!("{}.{}", import.module(), import.name()),
            });
        }
    }
    Ok(())
}

fn check_export(
    name: &str,
    module: &Module,
    export: &str,
    check: impl FnOnce(&ExternType) -> Result<(), String>,
) -> Result<(), LoadError> {
    let Some(ty) = module.get_export(export) else {
        return Err(LoadError::MissingExport {
            module: name.to_string(),
            export: export.to_string(),
        });
    };
    check(&ty).map_err(|found| LoadError::ExportType {
        module: name.to_string(),
        export: export.to_string(),
        expected: "a 32-bit memory".to_string(),
        found,
    })
}

fn check_func_export(
    name: &str,
    module: &Module,
    export: &str,
    signature: &str,
) -> Result<(), LoadError> {
    let Some(ty) = module.get_export(export) else {
        return Err(LoadError::MissingExport {
            module: name.to_string(),
            export: export.to_string(),
        });
    };
    let found = describe_extern(&ty);
    if found == format!("a function {signature}") {
        return Ok(());
    }
    Err(LoadError::ExportType {
        module: name.to_string(),
        export: export.to_string(),
        expected: format!("a function {signature}"),
        found,
    })
}

fn describe_extern(ty: &ExternType) -> String {
    match ty {
        ExternType::Func(func) => format!("a function {}", describe_func(func)),
        ExternType::Global(_) => "a global".to_string(),
        ExternType::Table(_) => "a table".to_string(),
        ExternType::Memory(_) => "a memory".to_string(),
        ExternType::Tag(_) => "a tag".to_string(),
    }
}

/// `(i32, i32) -> i64`, `() -> ()`.
fn describe_func(func: &FuncType) -> String {
    let params: Vec<String> = func.params().map(|p| p.to_string()).collect();
    let results: Vec<String> = func.results().map(|r| r.to_string()).collect();
    let results = match results.as_slice() {
        [one] => one.clone(),
        _ => format!("({})", results.join(", ")),
    };
    format!("({}) -> {results}", params.join(", "))
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
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
}
