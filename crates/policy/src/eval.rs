//! Evaluating one policy on one hook request: CEL or WASM, the same typed
//! input either way, the response checked before anyone acts on it.
//! Used by the engine (scheduler hooks), `arbiter policy test|eval|bench`
//! and the bundle's own tests — the one evaluation path. Errors come back
//! as [`PolicyError`] with a kind (a metrics label); nothing here panics on
//! what a policy does, and nothing here applies `failurePolicy` or `mode`
//! (the engine does).

use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::cel::{check_input_sizes, check_placement_sizes, EvalError, Vars};
use super::compiled::{Policy, Program};
use super::view::*;
use super::wasm;

/// Why one evaluation produced no usable result.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyError {
    /// `cel`, `cel_budget`, `wrong_type`, `not_finite`, `trap`, `out_of_fuel`, `timeout`,
    /// `out_of_memory`, `missing_export`, `bad_output`, `instantiate`,
    /// `input_too_large`.
    pub kind: &'static str,
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {}", self.kind, self.message)
    }
}

impl From<EvalError> for PolicyError {
    fn from(e: EvalError) -> PolicyError {
        let kind = match e {
            EvalError::Runtime(_) => "cel",
            EvalError::WrongType { .. } => "wrong_type",
            EvalError::NotFinite => "not_finite",
            EvalError::Budget(_) => "cel_budget",
        };
        PolicyError {
            kind,
            message: e.to_string(),
        }
    }
}

/// CEL comprehensions are bounded by input sizes: refuse oversized workloads.
fn sized(w: &WorkloadView) -> Result<(), PolicyError> {
    check_input_sizes(w).map_err(|e| PolicyError {
        kind: "input_too_large",
        message: e.to_string(),
    })
}

fn bad_output(message: String) -> PolicyError {
    PolicyError {
        kind: "bad_output",
        message,
    }
}

/// What a WASM call wrote with `arbiter.log`, for the caller to pass on.
pub type Logs = Vec<(wasm::LogLevel, String)>;

/// Calls a plugin with `input` (its `params` set to the policy's config) and decodes the response.
fn call_wasm<I: Serialize, O: DeserializeOwned>(
    policy: &Policy,
    plugin: &wasm::Plugin,
    input: &I,
    logs: &mut Logs,
) -> Result<O, PolicyError> {
    let output = with_request_buffer(|request| {
        serde_json::to_writer(&mut *request, input).map_err(|e| PolicyError {
            kind: "input_too_large",
            message: e.to_string(),
        })?;
        plugin
            .call(policy.hook, request, &policy.limits)
            .map_err(|e| PolicyError {
                kind: e.kind(),
                message: e.to_string(),
            })
    })?;
    logs.extend(output.logs);
    serde_json::from_str(&output.response).map_err(|e| {
        bad_output(format!(
            "the response is not a valid {} response: {e}",
            policy.hook
        ))
    })
}

/// Runs `f` with an empty buffer for a request's JSON: the thread's own,
/// reused from call to call (so a big batch does not fault in fresh heap
/// pages every time), unless it is in use or has grown past 16 MiB.
fn with_request_buffer<T>(f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    use std::cell::RefCell;
    const KEEP: usize = 16 << 20;
    thread_local! {
        static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    BUFFER.with(|buffer| match buffer.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            let out = f(&mut buffer);
            if buffer.capacity() > KEEP {
                *buffer = Vec::new();
            }
            out
        }
        Err(_) => f(&mut Vec::new()),
    })
}

fn check_len<T>(what: &str, got: &[T], want: usize) -> Result<(), PolicyError> {
    if got.len() == want {
        Ok(())
    } else {
        Err(bad_output(format!(
            "returned {} {what} for {want} inputs; return exactly one per input, in order",
            got.len()
        )))
    }
}

fn check_finite(what: &str, values: &[f64]) -> Result<(), PolicyError> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(bad_output(format!(
            "{what}[{i}] is {}; return finite numbers",
            values[i]
        ))),
    }
}

/// The policy's verdict on `input`; its reason cleaned of control
/// characters and capped (`text`), whichever language wrote it.
pub fn admission(
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

/// Scores for `input.workloads`, in order.
pub fn weight(
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

/// Weights for `input.clusterQueues`, in order.
pub fn fair_share(
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

/// Desired nodes for `input.flavors`, in order (not yet clamped).
pub fn autoscale(
    policy: &Policy,
    input: &AutoscaleInput,
    logs: &mut Logs,
) -> Result<Vec<i64>, PolicyError> {
    let nodes = match &policy.program {
        Program::Cel { expression, .. } => input
            .flavors
            .iter()
            .map(|f| {
                let n = expression.eval_number(&Vars {
                    flavor: Some(f),
                    now: input.now,
                    params: Some(&policy.cel_params),
                    ..Vars::default()
                })?;
                Ok(n.ceil().clamp(i64::MIN as f64, i64::MAX as f64) as i64)
            })
            .collect::<Result<Vec<i64>, PolicyError>>()?,
        Program::Wasm { plugin, .. } => {
            let mut input = input.clone();
            input.params = policy.params.clone();
            let out: AutoscaleOutput = call_wasm(policy, plugin, &input, logs)?;
            out.nodes
        }
    };
    check_len("node counts", &nodes, input.flavors.len())?;
    Ok(nodes)
}

/// Preferred flavor order, checked to be a subset of the candidates.
pub fn flavor(
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

/// A score per node of `input.nodes`, in order, and optionally a card per
/// node, each checked to name a card of a device that holds the pod's
/// request on one card. A CEL policy's expression is evaluated once per
/// node and picks no card.
pub fn placement(
    policy: &Policy,
    input: &PlacementInput,
    logs: &mut Logs,
) -> Result<PlacementOutput, PolicyError> {
    let output = match &policy.program {
        Program::Cel { expression, .. } => {
            check_placement_sizes(input, expression.names("typical")).map_err(|e| PolicyError {
                kind: "input_too_large",
                message: e.to_string(),
            })?;
            let scores = input
                .nodes
                .iter()
                .map(|node| {
                    expression.eval_number(&Vars {
                        workload: Some(&input.workload),
                        node: Some(node),
                        pod: Some(&input.pod),
                        typical: Some(&input.typical),
                        now: input.now,
                        params: Some(&policy.cel_params),
                        ..Vars::default()
                    })
                })
                .collect::<Result<Vec<f64>, _>>()?;
            PlacementOutput {
                scores,
                cards: None,
            }
        }
        Program::Wasm { plugin, .. } => {
            let mut input = input.clone();
            input.params = policy.params.clone();
            call_wasm(policy, plugin, &input, logs)?
        }
    };
    check_len("scores", &output.scores, input.nodes.len())?;
    check_finite("scores", &output.scores)?;
    if let Some(cards) = &output.cards {
        check_len("cards", cards, input.nodes.len())?;
        for (i, (card, node)) in cards.iter().zip(&input.nodes).enumerate() {
            let Some(card) = *card else { continue };
            let holds = node.devices.iter().any(|d| {
                let asked = input.pod.requests.get(&d.resource).copied().unwrap_or(0.0);
                asked > 0.0 && asked <= d.per_card && (card as usize) < d.cards.len()
            });
            if !holds {
                return Err(bad_output(format!(
                    "cards[{i}] is {card}, but node {} has no such card of a device \
                     the pod takes one card of; give the index of a card in that \
                     device's cards, or null",
                    node.name
                )));
            }
        }
    }
    Ok(output)
}
