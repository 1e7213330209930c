//! The sandbox that runs WebAssembly policy plugins (plugin-sdk/ABI.md, ABI v1).
//!
//! Its job: turn module bytes into a checked, compiled [`Plugin`] once
//! ([`Runtime::load`]: the module's complexity checked against caps before it is
//! compiled, compilation under a time budget, the load probe under the
//! bundle's own limits), and run one hook call per evaluation batch in a
//! fresh instance under a fuel budget, a wall-clock backstop and a memory
//! cap ([`Plugin::call`]), handing the raw JSON response back. A call's
//! outcome depends only on the module and the request, never on the
//! machine's speed or load: the budget is counted in fuel (WebAssembly
//! instructions, host calls charged too; [`FUEL_PER_MS`]), and the clock
//! only stops a call that somehow outlives [`BACKSTOP_FACTOR`] times its
//! timeout. It must never panic, block past a call's backstop
//! or let a guest reach the host (no files, sockets, environment, arguments,
//! real clocks or real randomness): whatever a guest does becomes a
//! [`CallError`] for that one policy. It does not parse requests or responses
//! and does not decide what a failure means — the policy layer that owns
//! bundles calls it, builds the JSON and applies the policy's `failurePolicy`.
//!
//! `runtime` ([`Runtime`]: the one wasmtime engine and its configuration,
//! the epoch ticker, the load pipeline and the cache of modules compiled
//! once per sha256), `complexity` (the caps on a module's functions, locals and
//! bodies, checked before compiling), `module` (a compiled [`Plugin`] and
//! the checks of its imports and exports against ABI v1), `instance` (one
//! call: a fresh instance in its own store under the fuel budget, backstop
//! and memory cap, the request written in and the response copied out,
//! failures classified), `host` (what a guest can reach: per-store limits,
//! host calls charged in fuel, `arbiter.log` and a WASI p1 without
//! capabilities). This file holds the vocabulary they share
//! and the policy layer uses: [`Hook`], [`Limits`], the constants of the
//! ABI and the errors.

mod complexity;
mod host;
mod instance;
mod module;
mod runtime;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

pub use complexity::{ComplexityCaps, PLATFORM_COMPLEXITY_CAPS, TENANT_COMPLEXITY_CAPS};
pub use host::MONOTONIC_NOW;
pub use module::Plugin;
pub use runtime::{LoadLimits, Runtime, RuntimeConfig, COMPILE_BUDGET, TENANT_COMPILE_BUDGET};

/// How often the epoch ticker advances every running call's clock.
const TICK: Duration = Duration::from_millis(1);
/// A response larger than this is a bad output, not something to copy.
pub const MAX_RESPONSE_BYTES: usize = 4 << 20;
/// `arbiter.log` lines kept per call; later lines are dropped and counted.
pub const MAX_LOG_LINES: usize = 64;
/// `arbiter.log` bytes kept per call; a line that would pass this is dropped.
pub const MAX_LOG_BYTES: usize = 4 << 10;
/// Table elements one instance may have (Go and C# modules reach thousands).
const MAX_TABLE_ELEMENTS: usize = 20_000;
/// The ABI version this host speaks.
pub const ABI_VERSION: i32 = 1;
/// Optional export declaring the `weight` request fields a plugin reads.
pub const WEIGHT_FIELDS_EXPORT: &str = "arbiter_weight_fields";

/// Fuel one millisecond of `limits.timeoutMs` buys: the deterministic
/// budget of a call is `timeoutMs × FUEL_PER_MS` (the default 100 ms: 200
/// million; a tenant's 20 ms: 40 million). One unit of fuel is one
/// WebAssembly instruction (`memory.copy`/`memory.fill` one per byte; host
/// calls are charged too, see `host`). This machine runs about 10,000 fuel
/// per µs of compiled plugin code (`shortest-first` on 1,000 workloads:
/// 9,800; a tight loop: 13,600; BENCHMARKS.md "Fuel"), so the budget is
/// about a fifth of a timeout's worth here: a plugin that fits its budget
/// ends within its timeout on a machine, or under a load, five times
/// slower.
pub const FUEL_PER_MS: u64 = 2_000_000;

/// The wall-clock deadline of a call is this many times its timeout: a
/// backstop for what fuel does not count (a host starved of CPU, memory
/// stalls, instantiation), set far enough beyond the fuel budget that under
/// load the fuel trap, not the clock, decides. Only code that runs under
/// 200 fuel per µs — fifty times slower than real plugins, as a pointer
/// chase through tens of MiB does (63 per µs here) — can meet it first.
pub const BACKSTOP_FACTOR: u32 = 10;

/// The shortest wall-clock backstop: a thread may wait this long for a core
/// on a loaded machine, so a short timeout must not turn that wait into a
/// `timeout` instead of the deterministic outcome.
pub const MIN_BACKSTOP: Duration = Duration::from_millis(100);

/// Per-call limits of one policy (ABI.md "Life of a call").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    /// The budget of one hook call, instantiation included, in
    /// milliseconds of fuel ([`Limits::fuel`]); the wall-clock backstop is
    /// [`BACKSTOP_FACTOR`] times this ([`Limits::backstop`]).
    pub timeout: Duration,
    /// Largest linear memory the instance may have, in bytes.
    pub memory_bytes: usize,
}

impl Limits {
    /// The fuel budget of one call: [`FUEL_PER_MS`] per millisecond of
    /// `timeout` (at least 1).
    pub fn fuel(&self) -> u64 {
        let fuel = self
            .timeout
            .as_micros()
            .saturating_mul(u128::from(FUEL_PER_MS))
            / 1000;
        u64::try_from(fuel).unwrap_or(u64::MAX).max(1)
    }

    /// The wall-clock deadline of one call: [`BACKSTOP_FACTOR`] × `timeout`,
    /// at least [`MIN_BACKSTOP`].
    pub fn backstop(&self) -> Duration {
        self.timeout
            .saturating_mul(BACKSTOP_FACTOR)
            .max(MIN_BACKSTOP)
    }
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
    Placement,
}

impl Hook {
    pub const ALL: [Hook; 6] = [
        Hook::Admission,
        Hook::Weight,
        Hook::FairShare,
        Hook::Autoscale,
        Hook::Flavor,
        Hook::Placement,
    ];

    /// The hook named as bundles spell it (`fairShare`).
    pub fn parse(text: &str) -> Option<Hook> {
        Hook::ALL.into_iter().find(|h| h.to_string() == text)
    }

    /// The function a module exports to implement this hook.
    pub fn export_name(self) -> &'static str {
        self.names().1
    }

    /// The hook's name as bundles spell it and the function a plugin
    /// exports for it (plugin-sdk/ABI.md): the one place they are written.
    /// Everything else the policy layer knows of a hook is its descriptor
    /// (`crate::hooks`).
    const fn names(self) -> (&'static str, &'static str) {
        match self {
            Hook::Admission => ("admission", "arbiter_admission"),
            Hook::Weight => ("weight", "arbiter_weight"),
            Hook::FairShare => ("fairShare", "arbiter_fair_share"),
            Hook::Autoscale => ("autoscale", "arbiter_autoscale"),
            Hook::Flavor => ("flavor", "arbiter_flavor"),
            Hook::Placement => ("placement", "arbiter_placement"),
        }
    }
}

impl fmt::Display for Hook {
    /// The hook's name as bundles spell it (`hook: fairShare`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.names().0)
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

/// What one hook call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutput {
    /// The response, checked to be UTF-8 (not yet parsed as JSON).
    pub response: String,
    /// `arbiter.log` lines, in order, within the per-call bound.
    pub logs: Vec<(LogLevel, String)>,
    /// Lines beyond the bound, dropped.
    pub dropped_logs: u32,
    /// Fuel the call used, instantiation included (at most [`Limits::fuel`]).
    pub fuel_used: u64,
}

/// Why one hook call failed; it fails that policy only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("the plugin trapped: {0}")]
    Trap(String),
    #[error(
        "the plugin ran out of fuel: it used its whole budget of {fuel} units \
         (limits.timeoutMs × {FUEL_PER_MS} per ms; about one unit per WebAssembly instruction); \
         make it do less per call or raise limits.timeoutMs"
    )]
    OutOfFuel { fuel: u64 },
    #[error(
        "the plugin ran past its wall-clock backstop ({BACKSTOP_FACTOR}× limits.timeoutMs, \
         at least {} ms) before its fuel ran out: the machine was starved of CPU or the plugin spent its time \
         in the host", MIN_BACKSTOP.as_millis()
    )]
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
            CallError::OutOfFuel { .. } => "out_of_fuel",
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
    #[error(
        "plugin {module}: {what} is {found}, over the cap of {cap} (compiling such a module \
         takes too long or too much memory); split the work into smaller functions or a \
         smaller module"
    )]
    TooComplex {
        module: String,
        /// `function 12 (of 40) declares locals`, `the module defines functions`, …
        what: String,
        found: u64,
        cap: u64,
    },
    #[error(
        "plugin {module}: compiling it took more than its budget of {} s and was given up; \
         make the module smaller or simpler", .budget.as_secs()
    )]
    CompileTimeout { module: String, budget: Duration },
    #[error(
        "plugin {module}: not compiled: {running} earlier compilations that ran past their \
         budget are still running; try again once they end"
    )]
    CompileBusy { module: String, running: usize },
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
