//! What every hook's evaluation shares (each hook's own is its
//! `HookKind::evaluate`, in `hooks/<hook>.rs`): the WASM call with the
//! same typed input a CEL policy reads, the checks of a response before
//! anyone acts on it, and [`PolicyError`] with a kind (a metrics label).
//! The one evaluation path, used by the engine (scheduler hooks),
//! `arbiter policy test|eval|bench` and the bundle's own tests. Nothing
//! here panics on what a policy does, and nothing here applies
//! `failurePolicy` or `mode` (the engine does).

use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::cel::{check_input_sizes, EvalError};
use super::compiled::Policy;
use super::view::WorkloadView;
use super::wasm;

/// Why one evaluation produced no usable result.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyError {
    /// `cel`, `cel_budget`, `wrong_type`, `not_finite`, `trap`, `out_of_fuel`, `timeout`,
    /// `out_of_memory`, `missing_export`, `bad_output`, `instantiate`,
    /// `input_too_large`.
    pub kind: &'static str,
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {}", self.kind, self.message)
    }
}

impl From<EvalError> for PolicyError {
    fn from(e: EvalError) -> PolicyError {
        let kind = match e {
            EvalError::Runtime(_) => "cel",
            EvalError::WrongType { .. } => "wrong_type",
            EvalError::NotFinite => "not_finite",
            EvalError::Budget(_) => "cel_budget",
        };
        PolicyError {
            kind,
            message: e.to_string(),
        }
    }
}

/// CEL comprehensions are bounded by input sizes: refuse oversized workloads.
pub(crate) fn sized(w: &WorkloadView) -> Result<(), PolicyError> {
    check_input_sizes(w).map_err(|e| PolicyError {
        kind: "input_too_large",
        message: e.to_string(),
    })
}

pub(crate) fn bad_output(message: String) -> PolicyError {
    PolicyError {
        kind: "bad_output",
        message,
    }
}

/// What a WASM call wrote with `arbiter.log`, for the caller to pass on.
pub type Logs = Vec<(wasm::LogLevel, String)>;

/// Calls a plugin with `input` (its `params` set to the policy's config) and decodes the response.
pub(crate) fn call_wasm<I: Serialize, O: DeserializeOwned>(
    policy: &Policy,
    plugin: &wasm::Plugin,
    input: &I,
    logs: &mut Logs,
) -> Result<O, PolicyError> {
    let output = with_request_buffer(|request| {
        serde_json::to_writer(&mut *request, input).map_err(|e| PolicyError {
            kind: "input_too_large",
            message: e.to_string(),
        })?;
        plugin
            .call(policy.hook, request, &policy.limits)
            .map_err(|e| PolicyError {
                kind: e.kind(),
                message: e.to_string(),
            })
    })?;
    logs.extend(output.logs);
    serde_json::from_str(&output.response).map_err(|e| {
        bad_output(format!(
            "the response is not a valid {} response: {e}",
            policy.hook
        ))
    })
}

/// Runs `f` with an empty buffer for a request's JSON: the thread's own,
/// reused from call to call (so a big batch does not fault in fresh heap
/// pages every time), unless it is in use or has grown past 16 MiB.
fn with_request_buffer<T>(f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    use std::cell::RefCell;
    const KEEP: usize = 16 << 20;
    thread_local! {
        static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    BUFFER.with(|buffer| match buffer.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            let out = f(&mut buffer);
            if buffer.capacity() > KEEP {
                *buffer = Vec::new();
            }
            out
        }
        Err(_) => f(&mut Vec::new()),
    })
}

pub(crate) fn check_len<T>(what: &str, got: &[T], want: usize) -> Result<(), PolicyError> {
    if got.len() == want {
        Ok(())
    } else {
        Err(bad_output(format!(
            "returned {} {what} for {want} inputs; return exactly one per input, in order",
            got.len()
        )))
    }
}

pub(crate) fn check_finite(what: &str, values: &[f64]) -> Result<(), PolicyError> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(bad_output(format!(
            "{what}[{i}] is {}; return finite numbers",
            values[i]
        ))),
    }
}
