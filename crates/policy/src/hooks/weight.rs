//! `weight` (export `arbiter_weight`): one score per workload of a batch;
//! platform scores add up, a tenant bundle's go into the tenant's own
//! score. Tenant bundles may hold it; its successful decisions are
//! numerous (one per workload per batch). Without a policy every score
//! is 0.

use super::{close, HookKind};
use crate::compiled::Policy;
use crate::eval::{self, Logs, PolicyError};
use crate::spec::Expect;
use crate::view::{WeightInput, WeightOutput};
use crate::wasm::Hook;

/// The `weight` hook.
pub struct Weight;

impl HookKind for Weight {
    const HOOK: Hook = Hook::Weight;
    const TENANT: bool = true;
    const NUMEROUS: bool = true;
    type Request = WeightInput;
    type Response = WeightOutput;
    /// The scores, one per workload in order.
    type Answer = Vec<f64>;

    fn evaluate(
        policy: &Policy,
        request: &WeightInput,
        logs: &mut Logs,
    ) -> Result<Vec<f64>, PolicyError> {
        eval::weight(policy, request, logs)
    }

    fn to_json(scores: Vec<f64>) -> serde_json::Value {
        serde_json::json!({ "scores": scores })
    }

    fn check(expect: &Expect, scores: Vec<f64>) -> Result<(), String> {
        match &expect.scores {
            Some(want) if !close(want, &scores) => {
                Err(format!("expected scores {want:?}, got {scores:?}"))
            }
            _ => Ok(()),
        }
    }
}
