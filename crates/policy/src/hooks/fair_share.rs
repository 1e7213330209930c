//! `fairShare` (export `arbiter_fair_share`): one weight ≥ 0 per
//! ClusterQueue; the first enforcing policy to answer for a ClusterQueue
//! decides. Platform bundles only. Without an answer a ClusterQueue keeps
//! its configured weight.

use super::{close, HookKind};
use crate::cel::Vars;
use crate::compiled::Policy;
use crate::compiled::Program;
use crate::eval::{bad_output, call_wasm, check_finite, check_len};
use crate::eval::{Logs, PolicyError};
use crate::spec::Expect;
use crate::view::{FairShareInput, FairShareOutput};
use crate::wasm::Hook;

/// The `fairShare` hook.
pub struct FairShare;

impl HookKind for FairShare {
    const HOOK: Hook = Hook::FairShare;
    type Request = FairShareInput;
    type Response = FairShareOutput;
    /// The weights, one per ClusterQueue in order.
    type Answer = Vec<f64>;

    fn evaluate(
        policy: &Policy,
        request: &FairShareInput,
        logs: &mut Logs,
    ) -> Result<Vec<f64>, PolicyError> {
        evaluate(policy, request, logs)
    }

    fn to_json(weights: Vec<f64>) -> serde_json::Value {
        serde_json::json!({ "weights": weights })
    }

    fn check(expect: &Expect, weights: Vec<f64>) -> Result<(), String> {
        match &expect.weights {
            Some(want) if !close(want, &weights) => {
                Err(format!("expected weights {want:?}, got {weights:?}"))
            }
            _ => Ok(()),
        }
    }
}

/// Weights for `input.clusterQueues`, in order.
fn evaluate(
    policy: &Policy,
    input: &FairShareInput,
    logs: &mut Logs,
) -> Result<Vec<f64>, PolicyError> {
    let weights = match &policy.program {
        Program::Cel { expression, .. } => input
            .cluster_queues
            .iter()
            .map(|cq| {
                expression.eval_number(&Vars {
                    cluster_queue: Some(cq),
                    now: input.now,
                    params: Some(&policy.cel_params),
                    ..Vars::default()
                })
            })
            .collect::<Result<Vec<f64>, _>>()?,
        Program::Wasm { plugin, .. } => {
            let mut input = input.clone();
            input.params = policy.params.clone();
            let out: FairShareOutput = call_wasm(policy, plugin, &input, logs)?;
            out.weights
        }
    };
    check_len("weights", &weights, input.cluster_queues.len())?;
    check_finite("weights", &weights)?;
    if let Some(i) = weights.iter().position(|w| *w < 0.0) {
        return Err(bad_output(format!(
            "weights[{i}] is {}; weights must be ≥ 0",
            weights[i]
        )));
    }
    Ok(weights)
}
