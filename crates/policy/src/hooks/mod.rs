//! One descriptor per hook: what the policy layer knows of each hook, in
//! that hook's own file — its request and response types (plugin ABI v1,
//! from `arbiter-abi`), how one policy of it is evaluated and what the
//! answer is as JSON, what a bundle may declare for it (whether tenant
//! bundles may hold it, `cel.messageExpression`/`cel.retryable`,
//! `orderByPlacement`), whether its successful decisions are numerous
//! enough to leave out of the decision log, how a bundle test's `expect`
//! is checked against an answer, and (in its doc) the built-in answer when
//! no policy gives one. The hook's identity — its name as bundles spell it
//! and its WASM export — is [`Hook`] (in `wasm`, whose sandbox calls
//! exports by it).
//!
//! A hook is a unit type implementing [`HookKind`]; [`descriptor`] is the
//! one lookup from a [`Hook`] to its [`Descriptor`], which `bundle`, `test`,
//! the engine and [`crate::schemas`] read instead of matching on the hook.
//! Nothing here reads a file or changes scheduler state.

mod admission;
mod autoscale;
mod fair_share;
mod flavor;
mod placement;
mod weight;

use schemars::{schema_for, JsonSchema, Schema};
use serde::de::DeserializeOwned;

use super::compiled::Policy;
use super::eval::{Logs, PolicyError};
use super::spec::{Expect, TestSpec};
use super::text;
use super::wasm::Hook;

pub use admission::Admission;
pub use autoscale::Autoscale;
pub use fair_share::FairShare;
pub use flavor::Flavor;
pub use placement::Placement;
pub use weight::Weight;

/// What one hook is to the policy layer, said once per hook by a unit type
/// in the hook's own file.
pub trait HookKind {
    /// The hook: its name as bundles spell it and its WASM export.
    const HOOK: Hook;
    /// A tenant bundle may hold policies of this hook.
    const TENANT: bool = false;
    /// A CEL policy of it may give `cel.messageExpression` and
    /// `cel.retryable` (its answer is a verdict with a reason).
    const VERDICT: bool = false;
    /// A policy of it may set `orderByPlacement`.
    const ORDER_BY_PLACEMENT: bool = false;
    /// Its successful decisions come one per workload of every batch: an
    /// engine told not to keep them leaves them out of the decision log.
    const NUMEROUS: bool = false;
    /// The request (plugin ABI), as a bundle test's `input` gives it.
    type Request: DeserializeOwned + JsonSchema;
    /// The response a plugin returns (plugin ABI).
    type Response: JsonSchema;
    /// The checked answer of one evaluation.
    type Answer;
    /// Evaluates `policy` on `request` through `eval`, the one evaluation path.
    fn evaluate(
        policy: &Policy,
        request: &Self::Request,
        logs: &mut Logs,
    ) -> Result<Self::Answer, PolicyError>;
    /// The answer as `arbiter policy eval` prints it: the response's JSON.
    fn to_json(answer: Self::Answer) -> serde_json::Value;
    /// Checks the answer against a bundle test's `expect` (only the fields
    /// it gives); `Err` says what differs.
    fn check(expect: &Expect, answer: Self::Answer) -> Result<(), String>;
}

/// A hook's [`HookKind`] as data, reachable from a [`Hook`] value
/// ([`descriptor`]).
pub struct Descriptor {
    /// [`HookKind::HOOK`].
    pub hook: Hook,
    /// [`HookKind::TENANT`].
    pub tenant: bool,
    /// [`HookKind::VERDICT`].
    pub verdict: bool,
    /// [`HookKind::ORDER_BY_PLACEMENT`].
    pub order_by_placement: bool,
    /// [`HookKind::NUMEROUS`].
    pub numerous: bool,
    /// The JSON Schemas of its request and response (`plugin-sdk/schema/`).
    pub schemas: fn() -> [Schema; 2],
    /// Evaluates a policy of this hook on a JSON request (omitted fields
    /// take their defaults); the answer as JSON, or why there is none.
    pub evaluate_json: fn(&Policy, &serde_json::Value) -> Result<serde_json::Value, String>,
    /// Runs one bundle test of a policy of this hook; `Err` says why it failed.
    pub run_test: fn(&Policy, &TestSpec) -> Result<(), String>,
}

/// The descriptor of `hook`: the one place a hook value picks its kind.
pub fn descriptor(hook: Hook) -> &'static Descriptor {
    match hook {
        Hook::Admission => const { &describe::<Admission>() },
        Hook::Weight => const { &describe::<Weight>() },
        Hook::FairShare => const { &describe::<FairShare>() },
        Hook::Autoscale => const { &describe::<Autoscale>() },
        Hook::Flavor => const { &describe::<Flavor>() },
        Hook::Placement => const { &describe::<Placement>() },
    }
}

/// The descriptor of the hook kind `H`.
const fn describe<H: HookKind>() -> Descriptor {
    Descriptor {
        hook: H::HOOK,
        tenant: H::TENANT,
        verdict: H::VERDICT,
        order_by_placement: H::ORDER_BY_PLACEMENT,
        numerous: H::NUMEROUS,
        schemas: schemas::<H>,
        evaluate_json: evaluate_json::<H>,
        run_test: run_test::<H>,
    }
}

fn schemas<H: HookKind>() -> [Schema; 2] {
    [schema_for!(H::Request), schema_for!(H::Response)]
}

/// Decodes a request given as JSON (`null` as `{}`); the error names the
/// field under `input.`.
fn request<H: HookKind>(input: &serde_json::Value) -> Result<H::Request, String> {
    let value = if input.is_null() {
        serde_json::json!({})
    } else {
        input.clone()
    };
    serde_path_to_error::deserialize(value).map_err(|e| {
        format!(
            "input.{}: {}; see plugin-sdk/schema for the request shape",
            e.path(),
            e.inner()
        )
    })
}

fn evaluate_json<H: HookKind>(
    policy: &Policy,
    request: &serde_json::Value,
) -> Result<serde_json::Value, String> {
    let request = self::request::<H>(request)?;
    H::evaluate(policy, &request, &mut Vec::new())
        .map(H::to_json)
        .map_err(|e| text::clean(&e.to_string(), text::MAX_ERROR_BYTES))
}

/// One bundle test: the request decoded, the policy evaluated, then either
/// the expected error kind or the expected answer checked.
fn run_test<H: HookKind>(policy: &Policy, test: &TestSpec) -> Result<(), String> {
    let request = request::<H>(&test.input)?;
    let expect = &test.expect;
    match (
        H::evaluate(policy, &request, &mut Vec::new()),
        &expect.error,
    ) {
        (Err(err), Some(kind)) if err.kind == kind => Ok(()),
        (Err(err), Some(kind)) => Err(format!("expected a {kind} error, got {err}")),
        (Err(err), None) => Err(format!("evaluation failed: {err}")),
        (Ok(_), Some(kind)) => Err(format!("expected a {kind} error, but it succeeded")),
        (Ok(answer), None) => H::check(expect, answer),
    }
}

/// Do the expected numbers `want` equal `got`, up to rounding?
fn close(want: &[f64], got: &[f64]) -> bool {
    want.len() == got.len()
        && want
            .iter()
            .zip(got)
            .all(|(x, y)| (x - y).abs() <= 1e-9 * x.abs().max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hook_has_its_own_descriptor() {
        for hook in Hook::ALL {
            assert_eq!(descriptor(hook).hook, hook);
        }
    }

    #[test]
    fn a_hook_is_named_as_bundles_spell_it() {
        for hook in Hook::ALL {
            let spelled = serde_json::to_value(hook).unwrap();
            assert_eq!(spelled, hook.to_string());
            assert_eq!(Hook::parse(&hook.to_string()), Some(hook));
        }
    }
}
