//! `flavor` (export `arbiter_flavor`): the preferred order of a workload's
//! candidate flavors (a subset of them), or with `orderByPlacement` the
//! flavors it may use, ordered by where placement would put its first pod.
//! Platform bundles only. Without an answer the ClusterQueue's listed
//! order stands.

use super::HookKind;
use crate::compiled::Policy;
use crate::eval::{self, Logs, PolicyError};
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
        eval::flavor(policy, request, logs)
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
