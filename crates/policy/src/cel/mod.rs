//! CEL policies: compiles a policy's expression once, at bundle load, and
//! evaluates it many times against the typed views of [`super::view`],
//! bound lazily — `workload.priority` reads the field of the borrowed
//! [`WorkloadView`] when the expression reaches it; nothing is converted up
//! front. Called by the policy engine (admission, weight, fairShare,
//! autoscale, flavor, placement hooks) with a [`Vars`] per evaluation; it never mutates
//! a view, never reads a clock (`now` is given), and never panics on any
//! expression or input: every failure is a [`CelError`] at load or an
//! [`EvalError`] at evaluation, which the engine handles by the policy's
//! `failurePolicy`.
//!
//! # Variables
//!
//! | variable | type | fields |
//! |---|---|---|
//! | `workload` | [`WorkloadView`] | `name, namespace, kind, labels, annotations, priority, priorityClass, priorityWeight, queueName, clusterQueue, podSets[] {name, count, minCount, requests, eligibleFlavors}, requests, gpus, ageSeconds, retries, evictions, estimate {runtimeSeconds, samples}, flavors, eligibleFlavors` |
//! | `queue` | [`QueueView`] | `name, namespace, priority, clusterQueue` |
//! | `clusterQueue` | [`ClusterQueueView`] | `name, cohort, weight, share, decayedUsage, nominal, usage, priorityWeight, admitted, pending, flavors` |
//! | `tenant` | [`TenantView`] | `name, labels, annotations` |
//! | `cohort` | [`CohortView`] | `name, parent` |
//! | `flavor` | [`FlavorView`] | `name, nodes, minNodes, maxNodes, utilization, pendingNodes, targetUtilization` |
//! | `node` | [`NodeView`] (placement) | `index, name, free, allocatable, devices[] {resource, perCard, cards}, labels` (topology labels) |
//! | `pod` | [`PodView`] (placement) | `requests` |
//! | `typical` | list of [`TypicalPodView`] (placement) | `[] {requests, share}` |
//! | `now` | `double` | seconds since the start (virtual time in the simulator) |
//! | `params` | JSON as CEL | the policy's `config`, converted once at load ([`Params`]) |
//!
//! Counts and integers (`priority`, `gpus`, `count`, `retries`, `nodes`,
//! `admitted`…) are CEL `int`; quantities, seconds, weights and fractions are
//! `double`; maps of quantities (`requests`, `nominal['a100']`) hold `double`s
//! in base units. Optional fields (`workload.priorityClass`,
//! `workload.estimate`, `podSets[i].minCount`, `queue.priority`,
//! `clusterQueue.cohort`, `cohort.parent`) are `null` when unset, so both
//! `workload.estimate != null` and `has(workload.estimate)` tell whether one
//! is set (`has()` on these fields is rewritten at load to mean "set and not
//! null"; elsewhere it keeps CEL's meaning). A variable the hook does not
//! provide (`flavor` in `weight`, say) is a runtime error naming it. JSON
//! integers in `params` are `int`, other numbers `double`.
//!
//! Functions: the CEL standard library, plus `quantity(string) -> double`,
//! a Kubernetes quantity in base units (`quantity('500m') == 0.5`,
//! `quantity('1Gi') == 1073741824.0`), and `lowerAscii()`, `upperAscii()`,
//! `trim()` (`arbiter_core::cel_bounds::register`). The `strings` extension
//! is left out on purpose: `replace` would make the cost exponential in the
//! expression's length.
//!
//! # Sharp edges of CEL (cel 0.15, as the spec says)
//!
//! - Arithmetic never mixes `int` and `double`: `workload.priority * 1.5` and
//!   `workload.gpus + 0.5` are runtime errors; write
//!   `double(workload.priority) * 1.5`. Comparisons do mix
//!   (`workload.ageSeconds > 60`, `workload.gpus <= 8.0` work).
//! - `int / int` truncates, and division or `%` by int zero is an error;
//!   `double / 0.0` is ±inf or NaN, which [`CelProgram::eval_number`] refuses.
//! - A missing map key (`workload.labels['team']` without that label) is an
//!   error, not `null`: guard with `'team' in workload.labels`, or use
//!   `workload.labels.?team.orValue('none')`.
//! - A view is not equal to anything, itself included (`workload == workload`
//!   is false); compare fields.
//!
//! # Limits
//!
//! Checked at load by [`compile_with`] with [`CelLimits`]
//! (`arbiter_core::cel_bounds`, shared with the job integrations): the
//! source is at most `max_expression_bytes` (16 KiB), its parsed expression
//! tree — macros expanded — at most `max_nesting` (32) deep (before
//! parsing, brackets alone may nest at most `max_nesting` deep and a
//! token-level over-estimate, operators included, at most 4× that, so the
//! recursive parser cannot overflow the stack), comprehensions nest at most
//! `max_comprehension_nesting` (2) deep, and a list or map literal holds at
//! most `max_literal_elements` (256) entries. Then the worst-case cost is
//! estimated from the [`ValueBound`](arbiter_core::cel_bounds::ValueBound)s of the
//! variables — the input caps the engine enforces with
//! [`check_input_sizes`] ([`MAX_LABELS`], [`MAX_POD_SETS`],
//! [`MAX_RESOURCES`]) and the policy's actual `params` — and must not pass
//! `max_cost`, which is also the budget the run-time meter gives each
//! evaluation: an overrun is [`EvalError::Budget`], whatever the expression
//! made of the error.
//!
//! # Where things are
//!
//! `compiler` ([`compile`]: parse, check names, rewrite `has()` and
//! `view.field`), `limits` ([`CelLimits`] and the input caps, measured
//! before and after parsing), `ast` (walking the parsed tree: children,
//! identifiers, the variables an expression names), `env` (the standard
//! library plus `quantity()` and the rewritten `has()`), `params` ([`Params`]
//! and folding scalar `params` into the program at load), `resolve`
//! ([`Vars`] and the resolver that answers variables and `view.field`
//! lookups), `values` (the views as CEL values, borrowed, field by field),
//! `evaluate` (running a program and checking the result type). This file
//! holds what they share: [`CelProgram`], [`VARIABLES`] and the errors.

mod ast;
mod compiler;
mod env;
mod evaluate;
mod limits;
mod params;
mod resolve;
mod values;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use arbiter_core::cel_bounds::{LimitError, TooCostly};
use cel::parser::Expression;
use cel::Env;

#[cfg(doc)]
use crate::view::{
    ClusterQueueView, CohortView, FlavorView, NodeView, PodView, QueueView, TenantView,
    TypicalPodView, WorkloadView,
};

pub use compiler::{compile, compile_with};
pub use limits::{
    cel_typical, check_input_sizes, check_placement_sizes, CelLimits, MAX_LABELS, MAX_POD_SETS,
    MAX_RESOURCES, MAX_TYPICAL,
};
pub use params::Params;
pub use resolve::Vars;

/// The names an expression may refer to, besides its comprehension variables.
pub const VARIABLES: [&str; 11] = [
    "workload",
    "queue",
    "clusterQueue",
    "tenant",
    "cohort",
    "flavor",
    "now",
    "params",
    "node",
    "pod",
    "typical",
];

/// Why an expression was refused at load. The caller adds the policy name.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum CelError {
    #[error("syntax error at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("expression is {bytes} bytes long; at most {max} are allowed")]
    TooLong { bytes: usize, max: usize },
    #[error(
        "expression nests {depth} deep; at most {max} is allowed — split it into simpler terms"
    )]
    TooDeep { depth: usize, max: usize },
    #[error(
        "comprehensions (all, exists, map, filter…) nest {depth} deep; at most {max} is allowed"
    )]
    TooManyComprehensions { depth: usize, max: usize },
    #[error("a list or map literal has {elements} elements; at most {max} are allowed")]
    LiteralTooLarge { elements: usize, max: usize },
    #[error("{0}")]
    TooCostly(TooCostly),
    #[error("unknown variable `{name}`; the variables are workload, queue, clusterQueue, tenant, cohort, flavor, node, pod, typical, now and params")]
    UnknownVariable { name: String },
}

/// Why one evaluation failed.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum EvalError {
    /// No such key, division by zero, a variable the hook does not provide…
    #[error("{0}")]
    Runtime(String),
    #[error("the expression must yield {expected}, got {got}")]
    WrongType { expected: &'static str, got: String },
    #[error("the expression yielded a number that is not finite (NaN or infinite)")]
    NotFinite,
    /// Stopped by the run-time meter: over budget, or a value built too large.
    #[error("{0}")]
    Budget(String),
}

impl From<LimitError> for CelError {
    fn from(e: LimitError) -> CelError {
        match e {
            LimitError::Syntax {
                line,
                column,
                message,
            } => CelError::Syntax {
                line,
                column,
                message,
            },
            LimitError::TooLong { bytes, max } => CelError::TooLong { bytes, max },
            LimitError::TooDeep { depth, max } => CelError::TooDeep { depth, max },
            LimitError::TooManyComprehensions { depth, max } => {
                CelError::TooManyComprehensions { depth, max }
            }
            LimitError::LiteralTooLarge { elements, max } => {
                CelError::LiteralTooLarge { elements, max }
            }
            LimitError::TooCostly(c) => CelError::TooCostly(c),
        }
    }
}

/// A compiled expression: parsed, checked and rewritten once; `Send + Sync`
/// and cheap to evaluate many times.
pub struct CelProgram {
    expression: Expression,
    env: Arc<Env>,
    /// Bit `i` set: the expression names [`VARIABLES`]`[i]`.
    variables: u16,
    /// Every identifier, after `view.field` flattening (sorted, distinct).
    idents: Vec<String>,
    /// Cost units one evaluation may spend (`CelLimits::max_cost`).
    budget: u64,
    /// The estimate made at load of the most one evaluation can spend.
    estimated: u64,
}

impl std::fmt::Debug for CelProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelProgram")
            .field("expression", &self.expression)
            .finish_non_exhaustive()
    }
}

impl CelProgram {
    /// Whether the expression names `variable` (one of [`VARIABLES`]).
    /// The load-time estimate of the most cost units one evaluation spends.
    pub fn estimated_cost(&self) -> u64 {
        self.estimated
    }

    pub fn names(&self, variable: &str) -> bool {
        VARIABLES
            .iter()
            .position(|&v| v == variable)
            .is_some_and(|i| self.variables & (1 << i) != 0)
    }

    /// Whether the expression may read `field` of view `variable`: it names
    /// `variable.field` (flattened), or the view itself in any other way
    /// (`has(variable.field)`, `variable[...]`, passing it whole, a
    /// comprehension variable of that name) — an over-estimate, never an under-.
    pub fn reads_field(&self, variable: &str, field: &str) -> bool {
        self.idents.iter().any(|ident| {
            ident == variable
                || ident
                    .strip_prefix(variable)
                    .and_then(|rest| rest.strip_prefix('.'))
                    == Some(field)
        })
    }
}
