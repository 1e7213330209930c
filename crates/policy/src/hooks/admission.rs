//! `admission` (export `arbiter_admission`): may this workload be admitted
//! with these flavors? A verdict with a reason, and whether a denial is
//! for good. Tenant bundles may hold it. Without a policy, or without an
//! enforcing denial, the workload is admitted.

use super::HookKind;
use crate::compiled::Policy;
use crate::eval::{self, Logs, PolicyError};
use crate::spec::Expect;
use crate::view::{AdmissionInput, AdmissionOutput};
use crate::wasm::Hook;

/// The `admission` hook.
pub struct Admission;

impl HookKind for Admission {
    const HOOK: Hook = Hook::Admission;
    const TENANT: bool = true;
    const VERDICT: bool = true;
    type Request = AdmissionInput;
    type Response = AdmissionOutput;
    type Answer = AdmissionOutput;

    fn evaluate(
        policy: &Policy,
        request: &AdmissionInput,
        logs: &mut Logs,
    ) -> Result<AdmissionOutput, PolicyError> {
        eval::admission(policy, request, logs)
    }

    fn to_json(answer: AdmissionOutput) -> serde_json::Value {
        serde_json::json!(answer)
    }

    fn check(expect: &Expect, answer: AdmissionOutput) -> Result<(), String> {
        if let Some(allowed) = expect.allowed {
            if answer.allowed != allowed {
                return Err(format!(
                    "expected allowed={allowed}, got allowed={} ({})",
                    answer.allowed,
                    answer.reason.unwrap_or_default()
                ));
            }
        }
        if let Some(text) = &expect.reason_contains {
            let reason = answer.reason.unwrap_or_default();
            if !reason.contains(text.as_str()) {
                return Err(format!(
                    "expected the reason to contain {text:?}, got {reason:?}"
                ));
            }
        }
        if let Some(retryable) = expect.retryable {
            if answer.retryable.unwrap_or(true) != retryable {
                return Err(format!("expected retryable={retryable}"));
            }
        }
        Ok(())
    }
}
