//! Bounds on every CEL evaluation, policy and job-integration CEL alike
//! (docs/design.md §4: "CEL bounded by a cost estimate at load and a run-time
//! budget"): limits on the source and its tree checked before and after
//! parsing ([`CelLimits`], [`parse`]), a worst-case cost [`estimate`] made
//! at load from the [`ValueBound`]s of the variables, and a run-time meter
//! ([`instrument`], [`metered`]) that stops an evaluation spending more than
//! its budget or building a string or list over the caps. Costs are counted
//! in units — a node evaluated, an entry of a list or map built, 16 bytes
//! of a string built — so the same expression and input cost the same on
//! any machine. Used by `arbiter-policy`'s CEL compiler and by [`crate::jobs`].
//! Nothing here panics on an expression, or recurses over a tree the limits
//! have not measured.

mod estimate;
mod limits;
mod meter;
mod walk;

#[cfg(test)]
mod tests;

use cel::parser::Expression;

pub use estimate::{estimate, ValueBound};
pub use limits::{parse, CelLimits, LimitError};
use meter::instrument;
pub use meter::{metered, register, Overrun};
pub use walk::{children, children_mut};

/// The budget of one evaluation unless a policy's limits give another: the
/// cost units of a platform policy's default `limits.timeoutMs` (100 ms) at
/// [`UNITS_PER_MS`] — the per-call limit Kubernetes gives its own CEL.
pub const DEFAULT_BUDGET: u64 = 1_000_000;
/// Cost units per millisecond of a policy's `limits.timeoutMs`: its CEL
/// budget is the timeout times this. An evaluation spends about 40 ns a
/// unit on this project's benchmark machine (150 ns with both cores
/// oversubscribed; BENCHMARKS.md), so a budget runs out well inside its
/// timeout.
pub const UNITS_PER_MS: u64 = 10_000;
/// The longest string (or bytes) an evaluation may build.
pub const MAX_BUILT_STRING: usize = 64 * 1024;
/// The most entries of a list or map an evaluation may build.
pub const MAX_BUILT_LIST: usize = 10_000;
/// Bytes of a string built per cost unit.
pub const STRING_BYTES_PER_UNIT: u64 = 16;

/// An expression whose estimated worst case is over its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooCostly {
    /// The estimated worst case, in cost units.
    pub estimated: u64,
    /// The budget, in cost units.
    pub max: u64,
}

impl std::fmt::Display for TooCostly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "its worst case is estimated at {} cost units, over the budget of {} (a \
             comprehension costs its body once per element its range can hold, so nested \
             ones multiply): iterate over fewer elements, nest fewer comprehensions, build \
             smaller strings and lists, or raise limits.timeoutMs",
            self.estimated, self.max
        )
    }
}

/// Estimates `expression` (see [`estimate`]), refuses it when over
/// `limits.max_cost`, and instruments it for the run-time meter. Returns
/// the estimate.
pub fn bound(
    expression: &mut Expression,
    limits: &CelLimits,
    variable: &dyn Fn(&str) -> Option<ValueBound>,
    unknown_len: u64,
) -> Result<u64, LimitError> {
    let estimated = estimate(expression, variable, unknown_len);
    if estimated > limits.max_cost {
        return Err(LimitError::TooCostly(TooCostly {
            estimated,
            max: limits.max_cost,
        }));
    }
    instrument(expression, variable);
    Ok(estimated)
}
