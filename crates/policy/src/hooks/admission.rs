//! `admission` (export `arbiter_admission`): may this workload be admitted
//! with these flavors? A verdict with a reason, and whether a denial is
//! for good. Tenant bundles may hold it. Without a policy, or without an
//! enforcing denial, the workload is admitted.

use super::HookKind;
use crate::cel::Vars;
use crate::compiled::Policy;
use crate::compiled::Program;
use crate::eval::{call_wasm, sized};
use crate::eval::{Logs, PolicyError};
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
        evaluate(policy, request, logs)
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

/// The policy's verdict on `input`; its reason cleaned of control
/// characters and capped (`text`), whichever language wrote it.
fn evaluate(
    policy: &Policy,
    input: &AdmissionInput,
    logs: &mut Logs,
) -> Result<AdmissionOutput, PolicyError> {
    let mut output = admission_raw(policy, input, logs)?;
    output.reason = output
        .reason
        .map(|r| crate::text::clean(&r, crate::text::MAX_REASON_BYTES));
    Ok(output)
}

fn admission_raw(
    policy: &Policy,
    input: &AdmissionInput,
    logs: &mut Logs,
) -> Result<AdmissionOutput, PolicyError> {
    match &policy.program {
        Program::Cel {
            expression,
            message,
            retryable,
        } => {
            sized(&input.workload)?;
            let vars = Vars {
                workload: Some(&input.workload),
                queue: Some(&input.queue),
                cluster_queue: Some(&input.cluster_queue),
                tenant: Some(&input.tenant),
                cohort: input.cohort.as_ref(),
                flavor: None,
                now: input.now,
                params: Some(&policy.cel_params),
                ..Vars::default()
            };
            let allowed = expression.eval_bool(&vars)?;
            let reason = match (allowed, message) {
                (true, _) => None,
                // The denial stands whatever the message does: a failing
                // message is reported in the reason, never as an evaluation
                // error (which `failurePolicy: Ignore` would turn into an admit).
                (false, Some(m)) => Some(m.eval_string(&vars).unwrap_or_else(|e| {
                    format!(
                        "denied by {} (its messageExpression failed: {e})",
                        policy.name
                    )
                })),
                (false, None) => Some(format!("denied by {}", policy.name)),
            };
            Ok(AdmissionOutput {
                allowed,
                reason,
                retryable: Some(*retryable),
            })
        }
        Program::Wasm { plugin, .. } => {
            let mut input = input.clone();
            input.params = policy.params.clone();
            call_wasm(policy, plugin, &input, logs)
        }
    }
}
