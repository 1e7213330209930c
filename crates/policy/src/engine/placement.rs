//! The placement hook: the platform bundles' `placement` policies score the
//! nodes one pod fits on. Policies are tried in bundle order; those whose
//! `match` takes the workload (and `match.flavors` the flavor) are
//! evaluated, and the first enforcing one to answer decides; a failure or
//! a `DryRun` answer is logged and the next policy is tried, and without an
//! answer the core places best-fit. Tenant bundles never hold placement
//! policies (the loader refuses them). Called by `hooks` through
//! [`Hooks::placement`]; the request is built only once a policy is there
//! to read it.

use std::time::Instant;

use super::decisions::Answer;
use super::inputs::{placement_input, workload_name};
use super::Engine;
use crate::hooks::{self, HookKind};
use crate::spec::Mode;
use crate::view::{PlacementInput, PlacementOutput};
use crate::wasm::Hook;
use arbiter_core::model::Millis;
use arbiter_core::scheduler::capacity::NodeScore;
#[cfg(doc)]
use arbiter_core::scheduler::hooks::Hooks;
use arbiter_core::scheduler::hooks::PlacementRequest;
use arbiter_core::scheduler::{Entry, HookState};

impl Engine {
    /// Does some platform bundle in force hold a placement policy?
    pub(super) fn has_placement(&self) -> bool {
        self.pinned
            .platform
            .iter()
            .any(|b| b.policies.iter().any(|p| p.hook == Hook::Placement))
    }

    /// Does a placement policy of a platform bundle in force take this
    /// workload (its `match` of namespaces, kinds and ClusterQueues)?
    pub(super) fn places_for(&self, state: HookState<'_>, entry: &Entry) -> bool {
        let w = &entry.workload;
        let cluster_queue = &state.cluster().cluster_queue(w.cluster_queue).name;
        self.pinned.platform.iter().any(|b| {
            b.policies.iter().any(|p| {
                p.hook == Hook::Placement && p.applies_to(&w.namespace, &w.kind, cluster_queue)
            })
        })
    }

    /// The scores of the first enforcing placement policy that answers for
    /// this pod, or `None` for the built-in best fit.
    pub(super) fn place(&mut self, request: &PlacementRequest<'_>) -> Option<Vec<NodeScore>> {
        if !self.has_placement() {
            return None;
        }
        self.first_placement(request.now, || placement_input(request))
            .map(node_scores)
    }

    /// Ranks worker clusters for multi-cluster dispatch with the same
    /// placement policies: `input.nodes` holds one candidate per worker
    /// cluster (its `name` the MultiKueueCluster's, its `flavor` empty),
    /// and the first enforcing policy to answer gives one score per
    /// candidate, highest first. `None`: no policy answered (the caller's
    /// default choice stands). Pins the bundles in force at `now`, as a
    /// scheduler call does, and records the answer like any other.
    pub fn rank_clusters(&mut self, now: Millis, input: PlacementInput) -> Option<Vec<f64>> {
        self.now = now;
        self.pin();
        if !self.has_placement() {
            return None;
        }
        let candidates = input.nodes.len();
        self.first_placement(now, || input)
            .map(|output| output.scores)
            .filter(|scores| scores.len() == candidates)
    }

    /// The loop both share: each platform placement policy taking the
    /// workload (and `match.flavors` the flavor), in bundle order, until an
    /// enforcing one answers; the input is built only once a policy reads it.
    fn first_placement(
        &mut self,
        now: Millis,
        make_input: impl FnOnce() -> PlacementInput,
    ) -> Option<PlacementOutput> {
        let mut make_input = Some(make_input);
        let mut input: Option<PlacementInput> = None;
        for bundle in self.pinned.platform.clone() {
            for policy in bundle.policies.iter().filter(|p| p.hook == Hook::Placement) {
                let input = match (&mut input, make_input.take()) {
                    (Some(input), _) => input,
                    (slot, Some(make)) => slot.insert(make()),
                    (None, None) => return None,
                };
                let w = &input.workload;
                let flavors = &policy.matches.flavors;
                if !policy.applies_to(&w.namespace, &w.kind, &w.cluster_queue)
                    || !(flavors.is_empty() || flavors.contains(&input.flavor))
                {
                    continue;
                }
                let start = Instant::now();
                let result = hooks::Placement::evaluate(policy, input, &mut self.written);
                let micros = start.elapsed().as_secs_f64() * 1e6;
                let result = self.settle(&bundle, policy, result);
                let who = Some(workload_name(&input.workload));
                match result {
                    Ok(output) => {
                        self.record(Answer {
                            workload: who,
                            ..Answer::given(&bundle, policy, now, micros, summary(input, &output))
                        });
                        if policy.mode == Mode::Enforce {
                            return Some(output);
                        }
                    }
                    Err(e) => self.record(Answer {
                        workload: who,
                        ..Answer::failed(&bundle, policy, now, micros, &e)
                    }),
                }
            }
        }
        None
    }
}

/// The checked output as the core's scores (card indices were checked
/// against the node's cards, so they fit a `u16`).
fn node_scores(output: PlacementOutput) -> Vec<NodeScore> {
    let cards = output.cards.unwrap_or_default();
    output
        .scores
        .iter()
        .enumerate()
        .map(|(i, &score)| NodeScore {
            score,
            card: cards
                .get(i)
                .copied()
                .flatten()
                .and_then(|c| u16::try_from(c).ok()),
        })
        .collect()
}

/// What the decision log records of an answer: the pod set, flavor and
/// number of nodes scored, and the node ranked first (the first of the
/// highest; the core breaks ties its own way) with its score and card.
fn summary(input: &PlacementInput, output: &PlacementOutput) -> serde_json::Value {
    let best = output.scores.iter().enumerate().fold(
        None,
        |best: Option<(usize, f64)>, (i, &s)| match best {
            Some((_, b)) if b >= s => best,
            _ => Some((i, s)),
        },
    );
    let mut result = serde_json::json!({
        "podSet": input.pod_set,
        "flavor": input.flavor,
        "nodes": input.nodes.len(),
    });
    if let Some((i, score)) = best {
        result["best"] = input.nodes[i].name.clone().into();
        result["score"] = score.into();
        if let Some(card) = output.cards.as_ref().and_then(|c| c[i]) {
            result["card"] = card.into();
        }
    }
    result
}
