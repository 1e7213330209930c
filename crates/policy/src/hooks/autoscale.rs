//! `autoscale` (export `arbiter_autoscale`): the desired node count per
//! flavor, clamped to the flavor's bounds; the first enforcing policy to
//! answer for a flavor decides. Platform bundles only. Without an answer a
//! flavor scales to its target utilisation.

use super::HookKind;
use crate::compiled::Policy;
use crate::eval::{self, Logs, PolicyError};
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
        eval::autoscale(policy, request, logs)
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
