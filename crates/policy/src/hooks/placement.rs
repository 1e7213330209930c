//! `placement` (export `arbiter_placement`): a score for each node one pod
//! of an admitted workload fits on, and optionally the card to put it on;
//! the first enforcing policy to answer decides. Platform bundles only.
//! Without an answer the pod is placed best-fit.

use super::{close, HookKind};
use crate::compiled::Policy;
use crate::eval::{self, Logs, PolicyError};
use crate::spec::Expect;
use crate::view::{PlacementInput, PlacementOutput};
use crate::wasm::Hook;

/// The `placement` hook.
pub struct Placement;

impl HookKind for Placement {
    const HOOK: Hook = Hook::Placement;
    type Request = PlacementInput;
    type Response = PlacementOutput;
    type Answer = PlacementOutput;

    fn evaluate(
        policy: &Policy,
        request: &PlacementInput,
        logs: &mut Logs,
    ) -> Result<PlacementOutput, PolicyError> {
        eval::placement(policy, request, logs)
    }

    fn to_json(answer: PlacementOutput) -> serde_json::Value {
        serde_json::json!(answer)
    }

    fn check(expect: &Expect, answer: PlacementOutput) -> Result<(), String> {
        match &expect.scores {
            Some(want) if !close(want, &answer.scores) => {
                Err(format!("expected scores {want:?}, got {:?}", answer.scores))
            }
            _ => Ok(()),
        }
    }
}
