//! Placement by policy: at admission, the placement hook scores the nodes
//! each pod fits on and the pods go where it ranks first. Which flavor,
//! and whether the pods fit at all, was settled before by the best-fit
//! trial of flavor assignment (trying the flavors in the order
//! `rank_by_placement` gives `flavor_order`); this only moves pods among
//! the nodes (and cards) that hold them. If the scores cannot place every
//! pod, the trial's best-fit placement stands, so a policy never loses an
//! admission. A pod set with a topology request goes to the domain (of the
//! level the trial found one at, or a wider one for a preferred request)
//! holding the node the hook ranks first, and inside it where the hook
//! ranks: the hook ranks domains through its node scores, each node
//! showing its topology labels.

use crate::model::cluster::{FlavorId, ResourceId};
use crate::model::{Amount, Millis};

use super::assign::{topology_levels, Assignment};
use super::capacity::{By, Candidate, NodeScore, Scorer, Scratch};
use super::hooks::{Hooks, PlacementRequest};
use super::workload::{Placement, TopologyRequest, WorkloadId};
use super::Scheduler;

/// The placement hook seen as the capacity's [`Scorer`] for one pod set.
struct PolicyScorer<'a, 'h> {
    state: &'a Scheduler,
    id: WorkloadId,
    pod_set: usize,
    now: Millis,
    hooks: &'h mut dyn Hooks,
}

impl Scorer for PolicyScorer<'_, '_> {
    fn score(
        &mut self,
        per_pod: &[(ResourceId, Amount)],
        candidates: &[Candidate<'_>],
    ) -> Option<Vec<NodeScore>> {
        self.hooks.placement(&PlacementRequest {
            state: self.state.hook_state(),
            entry: &self.state.workloads[self.id],
            pod_set: self.pod_set,
            per_pod,
            candidates,
            now: self.now,
        })
    }
}

impl Scheduler {
    /// The placements the placement hook chooses for `assignment`'s pods,
    /// or `None` to keep the trial's (no policy places, or its scores do
    /// not place every pod).
    pub(super) fn placed_by_policy(
        &self,
        id: WorkloadId,
        assignment: &Assignment,
        now: Millis,
        hooks: &mut dyn Hooks,
    ) -> Option<Vec<Placement>> {
        if !hooks.places() || assignment.placements.is_empty() {
            return None;
        }
        let workload = &self.workloads[id].workload;
        let mut scratch = Scratch::default();
        let mut placements = Vec::with_capacity(assignment.placements.len());
        for (pod_set, ((ps, chosen), &count)) in workload
            .pod_sets
            .iter()
            .zip(&assignment.pod_sets)
            .zip(&assignment.counts)
            .enumerate()
        {
            let Some(flavor) = chosen
                .flavors
                .iter()
                .map(|&(_, f)| f)
                .find(|&f| self.capacity.has_pools(f))
            else {
                continue;
            };
            let mut scorer = PolicyScorer {
                state: self,
                id,
                pod_set,
                now,
                hooks: &mut *hooks,
            };
            let mut by = By::Score {
                scorer: &mut scorer,
                salt: TIE_ORDER,
            };
            let request = workload
                .topology_request(pod_set)
                .filter(|_| self.cluster.topology_aware);
            let levels = request.map(|r| (r, topology_levels(&self.cluster, flavor, r.level())));
            let in_domain = match levels {
                Some((request, Ok(levels))) => self
                    .capacity
                    .place_in_topology(
                        &mut scratch,
                        pod_set as u32,
                        flavor,
                        levels,
                        matches!(request, TopologyRequest::Required(_)),
                        count,
                        &ps.per_pod,
                        &mut by,
                    )
                    .ok(),
                _ => None,
            };
            let placed = match in_domain {
                Some(placed) => placed,
                // A required request the trial placed in a domain must be
                // placed in one here too: else the trial's stands.
                None if matches!(request, Some(TopologyRequest::Required(_))) => return None,
                None => self.capacity.place(
                    &mut scratch,
                    pod_set as u32,
                    &[flavor],
                    count,
                    &ps.per_pod,
                    &mut by,
                )?,
            };
            placements.extend(placed);
        }
        Some(placements)
    }
}

impl Scheduler {
    /// `flavors` in the order of where the placement hook would put one
    /// pod of pod set `pod_set` of the workload now: the flavor of its
    /// best-scored node first; flavors none of whose nodes the pod fits on,
    /// and flavors without node pools, follow in their given order. `None`
    /// if the pod fits no node of theirs or the hook does not answer.
    pub(super) fn rank_by_placement(
        &self,
        id: WorkloadId,
        pod_set: usize,
        flavors: &[FlavorId],
        hooks: &mut dyn Hooks,
    ) -> Option<Vec<FlavorId>> {
        let ps = self.workloads[id].workload.pod_sets.get(pod_set)?;
        let mut scorer = PolicyScorer {
            state: self,
            id,
            pod_set,
            now: self.now,
            hooks,
        };
        self.capacity
            .rank_flavors(flavors, &ps.per_pod, &mut scorer, TIE_ORDER)
    }
}

/// The salt of the node order that breaks ties between equal scores: one
/// fixed order for every placement, so ties keep packing the same nodes.
const TIE_ORDER: u64 = 0;
