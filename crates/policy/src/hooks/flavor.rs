//! `flavor` (export `arbiter_flavor`): the preferred order of a workload's
//! candidate flavors (a subset of them), or with `orderByPlacement` the
//! flavors it may use, ordered by where placement would put each pod
//! set's pods. Platform bundles only. Without an answer the flavors a pod
//! set may use are tried in placement's order when a placement policy
//! takes the workload, else in the ClusterQueue's listed order.

use super::HookKind;
use crate::cel::Vars;
use crate::compiled::Policy;
use crate::compiled::Program;
use crate::eval::{bad_output, call_wasm, sized};
use crate::eval::{Logs, PolicyError};
use crate::spec::Expect;
use crate::view::{FlavorInput, FlavorOutput};
use crate::wasm::Hook;

/// The `flavor` hook.
pub struct Flavor;

impl HookKind for Flavor {
    const HOOK: Hook = Hook::Flavor;
    const ORDER_BY_PLACEMENT: bool = true;
    type Request = FlavorInput;
    type Response = FlavorOutput;
    /// The flavor names, in preferred order.
    type Answer = Vec<String>;

    fn evaluate(
        policy: &Policy,
        request: &FlavorInput,
        logs: &mut Logs,
    ) -> Result<Vec<String>, PolicyError> {
        evaluate(policy, request, logs)
    }

    fn to_json(flavors: Vec<String>) -> serde_json::Value {
        serde_json::json!({ "flavors": flavors })
    }

    fn check(expect: &Expect, flavors: Vec<String>) -> Result<(), String> {
        match &expect.flavors {
            Some(want) if want != &flavors => {
                Err(format!("expected flavors {want:?}, got {flavors:?}"))
            }
            _ => Ok(()),
        }
    }
}

/// Preferred flavor order, checked to be a subset of the candidates.
fn evaluate(
    policy: &Policy,
    input: &FlavorInput,
    logs: &mut Logs,
) -> Result<Vec<String>, PolicyError> {
    let flavors = match &policy.program {
        Program::Cel { expression, .. } => {
            sized(&input.workload)?;
            expression.eval_string_list(&Vars {
                workload: Some(&input.workload),
                queue: Some(&input.queue),
                cluster_queue: Some(&input.cluster_queue),
                tenant: Some(&input.tenant),
                now: input.now,
                params: Some(&policy.cel_params),
                ..Vars::default()
            })?
        }
        Program::Wasm { plugin, .. } => {
            let mut input = input.clone();
            input.params = policy.params.clone();
            let out: FlavorOutput = call_wasm(policy, plugin, &input, logs)?;
            out.flavors
        }
    };
    if let Some(f) = flavors.iter().find(|f| !input.candidates.contains(f)) {
        return Err(bad_output(format!(
            "flavor {f:?} is not one of the ClusterQueue's flavors {:?}",
            input.candidates
        )));
    }
    Ok(flavors)
}
