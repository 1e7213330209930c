//! `fairShare` (export `arbiter_fair_share`): one weight ≥ 0 per
//! ClusterQueue; the first enforcing policy to answer for a ClusterQueue
//! decides. Platform bundles only. Without an answer a ClusterQueue keeps
//! its configured weight.

use super::{close, HookKind};
use crate::compiled::Policy;
use crate::eval::{self, Logs, PolicyError};
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
        eval::fair_share(policy, request, logs)
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
