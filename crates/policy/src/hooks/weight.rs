//! `weight` (export `arbiter_weight`): one score per workload of a batch;
//! platform scores add up, a tenant bundle's go into the tenant's own
//! score. Tenant bundles may hold it; its successful decisions are
//! numerous (one per workload per batch). Without a policy every score
//! is 0.

use super::{close, HookKind};
use crate::cel::Vars;
use crate::compiled::Policy;
use crate::compiled::Program;
use crate::eval::{call_wasm, check_finite, check_len, sized};
use crate::eval::{Logs, PolicyError};
use crate::spec::Expect;
use crate::view::{ClusterQueueView, QueueView, TenantView, WeightRequest};
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
        evaluate(policy, request, logs)
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

/// Scores for `input.workloads`, in order.
fn evaluate(
    policy: &Policy,
    input: &WeightInput,
    logs: &mut Logs,
) -> Result<Vec<f64>, PolicyError> {
    let scores = match &policy.program {
        Program::Cel { expression, .. } => {
            let mut scores = Vec::with_capacity(input.workloads.len());
            let (no_queue, no_cq, no_tenant) = (
                QueueView::default(),
                ClusterQueueView::default(),
                TenantView::default(),
            );
            for w in &input.workloads {
                sized(w)?;
                let queue = input
                    .queues
                    .get(&format!("{}/{}", w.namespace, w.queue_name))
                    .unwrap_or(&no_queue);
                let vars = Vars {
                    workload: Some(w),
                    queue: Some(queue),
                    cluster_queue: Some(
                        input.cluster_queues.get(&w.cluster_queue).unwrap_or(&no_cq),
                    ),
                    tenant: Some(input.tenants.get(&w.namespace).unwrap_or(&no_tenant)),
                    cohort: None,
                    flavor: None,
                    now: input.now,
                    params: Some(&policy.cel_params),
                    ..Vars::default()
                };
                scores.push(expression.eval_number(&vars)?);
            }
            scores
        }
        Program::Wasm {
            plugin,
            weight_fields,
            ..
        } => {
            let request = WeightRequest::new(input, &policy.params, weight_fields);
            let out: WeightOutput = call_wasm(policy, plugin, &request, logs)?;
            out.scores
        }
    };
    check_len("scores", &scores, input.workloads.len())?;
    check_finite("scores", &scores)?;
    Ok(scores)
}
