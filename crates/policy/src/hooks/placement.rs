//! `placement` (export `arbiter_placement`): a score for each node one pod
//! of an admitted workload fits on, and optionally the card to put it on;
//! the first enforcing policy to answer decides. Platform bundles only.
//! Without an answer the pod is placed best-fit.

use super::{close, HookKind};
use crate::cel::{cel_typical, check_placement_sizes, Vars};
use crate::compiled::Policy;
use crate::compiled::Program;
use crate::eval::{bad_output, call_wasm, check_finite, check_len};
use crate::eval::{Logs, PolicyError};
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
        evaluate(policy, request, logs)
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

/// A score per node of `input.nodes`, in order, and optionally a card per
/// node, each checked to name a card of a device that holds the pod's
/// request on one card. A CEL policy's expression is evaluated once per
/// node and picks no card.
fn evaluate(
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
                        typical: Some(cel_typical(&input.typical)),
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
