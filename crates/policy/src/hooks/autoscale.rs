//! `autoscale` (export `arbiter_autoscale`): the desired node count per
//! flavor, clamped to the flavor's bounds; the first enforcing policy to
//! answer for a flavor decides. Platform bundles only. Without an answer a
//! flavor scales to its target utilisation.

use super::HookKind;
use crate::cel::Vars;
use crate::compiled::Policy;
use crate::compiled::Program;
use crate::eval::{call_wasm, check_len};
use crate::eval::{Logs, PolicyError};
use crate::spec::Expect;
use crate::view::{AutoscaleInput, AutoscaleOutput};
use crate::wasm::Hook;

/// The `autoscale` hook.
pub struct Autoscale;

impl HookKind for Autoscale {
    const HOOK: Hook = Hook::Autoscale;
    type Request = AutoscaleInput;
    type Response = AutoscaleOutput;
    /// The node counts, one per flavor in order (not yet clamped).
    type Answer = Vec<i64>;

    fn evaluate(
        policy: &Policy,
        request: &AutoscaleInput,
        logs: &mut Logs,
    ) -> Result<Vec<i64>, PolicyError> {
        evaluate(policy, request, logs)
    }

    fn to_json(nodes: Vec<i64>) -> serde_json::Value {
        serde_json::json!({ "nodes": nodes })
    }

    fn check(expect: &Expect, nodes: Vec<i64>) -> Result<(), String> {
        match &expect.nodes {
            Some(want) if want != &nodes => Err(format!("expected nodes {want:?}, got {nodes:?}")),
            _ => Ok(()),
        }
    }
}

/// Desired nodes for `input.flavors`, in order (not yet clamped).
fn evaluate(
    policy: &Policy,
    input: &AutoscaleInput,
    logs: &mut Logs,
) -> Result<Vec<i64>, PolicyError> {
    let nodes = match &policy.program {
        Program::Cel { expression, .. } => input
            .flavors
            .iter()
            .map(|f| {
                let n = expression.eval_number(&Vars {
                    flavor: Some(f),
                    now: input.now,
                    params: Some(&policy.cel_params),
                    ..Vars::default()
                })?;
                Ok(n.ceil().clamp(i64::MIN as f64, i64::MAX as f64) as i64)
            })
            .collect::<Result<Vec<i64>, PolicyError>>()?,
        Program::Wasm { plugin, .. } => {
            let mut input = input.clone();
            input.params = policy.params.clone();
            let out: AutoscaleOutput = call_wasm(policy, plugin, &input, logs)?;
            out.nodes
        }
    };
    check_len("node counts", &nodes, input.flavors.len())?;
    Ok(nodes)
}
