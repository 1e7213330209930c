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
//!
//! `runtime` ([`Runtime`]: the one wasmtime engine and its configuration,
//! the epoch ticker, the load pipeline and the cache of modules compiled
//! once per sha256), `module` (a compiled [`Plugin`] and the checks of its
//! imports and exports against ABI v1), `instance` (one call: a fresh
//! instance in its own store under the deadline and memory cap, the
//! request written in and the response copied out, failures classified),
//! `host` (what a guest can reach: per-store limits, `arbiter.log` and a
//! WASI p1 without capabilities). This file holds the vocabulary they share
//! and the policy layer uses: [`Hook`], [`Limits`], the constants of the
//! ABI and the errors.

mod host;
mod instance;
mod module;
mod runtime;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

pub use module::Plugin;
pub use runtime::{Runtime, RuntimeConfig};

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
