//! Flavor assignment (Kueue's): for each pod set and each resource group it
//! uses, try the ClusterQueue's flavors in order (or the flavor hook's
//! order), honouring node selectors, taints, quota, physical capacity and
//! `flavorFungibility`. The result says whether the workload fits now, fits
//! only by preempting, or does not fit — and why, as data (`reason`).
//! Pure: reads the quota tree and capacity, changes nothing; what
//! preempting would do it asks an [`Oracle`] the scheduler answers.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::model::api::FlavorPreference;
use crate::model::cluster::{
    ClusterQueue, ClusterQueueId, FlavorId, FlavorResource, Fungibility, Group, ResourceId,
};
use crate::model::selector::{node_constraints_allow, untolerated_taint};
use crate::model::Amount;

use super::capacity::{By, Capacity, LevelRequest, Scratch};
use super::quota::QuotaTree;
use super::reason::{NeverFits, NotFit, Problem, TopologyMiss};
use super::workload::{Placement, PodSetFlavors, PodSetRequest, TopologyRequest, Workload};
use crate::model::cluster::Cluster;

/// How a workload (or one flavor for one pod set) fits; ordered best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    Fit,
    Preempt,
    NoFit,
}

#[derive(Clone, Debug)]
pub(crate) struct Assignment {
    pub pod_sets: Vec<PodSetFlavors>,
    /// Quota charged, aggregated by (flavor, resource), sorted.
    pub usage: Vec<(FlavorResource, Amount)>,
    pub placements: Vec<Placement>,
    pub mode: Mode,
    pub borrowing: bool,
    /// Kueue's borrowing level: the height of the lowest subtree of the
    /// cohort tree whose quota holds what the workload takes (0: its
    /// ClusterQueue's own nominal quota), the most over its resources.
    /// Counted for the resources that fit now; a resource that needs
    /// preemption counts 0.
    pub(crate) borrow_level: u32,
    /// Why the workload does not fit now (`None` when it fits).
    pub(crate) not_fit: Option<NotFit>,
    /// Pods per pod set this assignment is for (below `count` when partially admitted).
    pub counts: Vec<u32>,
    /// With `Mode::Preempt`: what the victim search for exactly `usage`
    /// found against the quota as it was when assigned, when the scheduler
    /// already searched.
    pub victims: Option<Victims>,
}

pub struct Context<'a> {
    pub cluster: &'a Cluster,
    pub quota: &'a QuotaTree,
    pub capacity: &'a Capacity,
    /// What preempting would do, per resource; `None`: every resource that
    /// needs preemption is taken to have victims, borrowing level 0.
    pub oracle: Option<&'a Oracle>,
}

/// What preempting for one flavor resource would do (Kueue's
/// `PreemptionPossibility`); ordered best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Possibility {
    /// Every victim is in another ClusterQueue.
    Reclaim,
    /// Some victim is in the preemptor's own ClusterQueue.
    Preempt,
    /// Nothing may be preempted that makes it fit.
    NoCandidates,
}

/// A victim search's outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Victims {
    /// The workloads to preempt; empty when no set of candidates would do.
    pub chosen: Vec<super::workload::WorkloadId>,
    /// How many candidates the search weighed.
    pub candidates: usize,
}

/// Kueue's preemption oracle for one workload: answers `(flavor resource,
/// amount) → (possibility, borrowing level after the preemptions)`. The
/// assigner cannot simulate preemption itself (that needs the scheduler's
/// workloads): it notes what it asked that has no answer yet, taking it as
/// `Preempt` at level 0, and the scheduler answers and assigns again until
/// nothing new is asked.
#[derive(Debug, Default)]
pub(crate) struct Oracle {
    pub answers: BTreeMap<(FlavorResource, Amount), (Possibility, u32)>,
    asked: RefCell<Vec<(FlavorResource, Amount)>>,
}

/// What the assigner takes an unanswered question's answer to be.
pub(crate) const ASSUMED: (Possibility, u32) = (Possibility::Preempt, 0);

impl Oracle {
    fn ask(&self, fr: FlavorResource, need: Amount) -> (Possibility, u32) {
        match self.answers.get(&(fr, need)) {
            Some(&answer) => answer,
            None => {
                self.asked.borrow_mut().push((fr, need));
                ASSUMED
            }
        }
    }

    /// The questions asked since the last call that have no answer.
    pub(crate) fn take_asked(&self) -> Vec<(FlavorResource, Amount)> {
        let mut asked = std::mem::take(&mut *self.asked.borrow_mut());
        asked.sort();
        asked.dedup();
        asked
    }
}

/// How one flavor (or one resource of it) fits, as Kueue ranks it:
/// Kueue's `granularMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Fit,
    Reclaim,
    Preempt,
    NoCandidates,
    NoFit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rank {
    kind: Kind,
    /// Kueue's borrowing level (after the preemptions, if any).
    level: u32,
}

/// Kueue's `isPreferred`: is `a` better than `b` under `preference`? A
/// flavor with no fit is worst, one with nothing to preempt next.
fn is_preferred(a: Rank, b: Rank, preference: FlavorPreference) -> bool {
    if a.kind == Kind::NoFit {
        return false;
    }
    if b.kind == Kind::NoFit {
        return true;
    }
    let (a_none, b_none) = (a.kind == Kind::NoCandidates, b.kind == Kind::NoCandidates);
    if a_none != b_none {
        return !a_none;
    }
    match preference {
        FlavorPreference::BorrowingOverPreemption => (a.kind, a.level) < (b.kind, b.level),
        FlavorPreference::PreemptionOverBorrowing => (a.level, a.kind) < (b.level, b.kind),
    }
}

struct Choice {
    flavor: FlavorId,
    mode: Mode,
    rank: Rank,
    borrowing: bool,
    scratch_after: Option<Scratch>,
    placements: Vec<Placement>,
}

fn charged(usage: &[(FlavorResource, Amount)], fr: FlavorResource) -> Amount {
    usage
        .iter()
        .find(|(f, _)| *f == fr)
        .map_or(Amount::ZERO, |(_, a)| *a)
}

/// The flavors of `candidates` a pod set's node selector, required
/// affinity and tolerations allow it on.
pub(crate) fn eligible_flavors(
    cluster: &crate::model::cluster::Cluster,
    candidates: &[FlavorId],
    ps: &super::workload::PodSetRequest,
) -> Vec<FlavorId> {
    candidates
        .iter()
        .copied()
        .filter(|&f| {
            let flavor = &cluster.flavors[f.index()];
            node_constraints_allow(
                &ps.node_selector,
                ps.required_affinity.as_ref(),
                &flavor.node_labels,
            ) && untolerated_taint(&flavor.node_taints, &[&ps.tolerations, &flavor.tolerations])
                .is_none()
        })
        .collect()
}

/// Assigns flavors to every pod set of `workload` in ClusterQueue `cq`.
/// `preferred` may give a pod set (by index) the flavors to try, in order
/// (the flavor hook's, or placement's: `flavor_order`); a pod set without
/// one tries the listed order. `counts` replaces the pod sets' counts
/// (partial admission).
pub fn assign(
    ctx: &Context<'_>,
    cq: ClusterQueueId,
    workload: &Workload,
    preferred: &[Option<Vec<FlavorId>>],
    counts: Option<&[u32]>,
) -> Assignment {
    let def = ctx.cluster.cluster_queue(cq);
    let mut scratch = Scratch::default();
    let mut out = Assignment {
        pod_sets: Vec::with_capacity(workload.pod_sets.len()),
        usage: Vec::new(),
        placements: Vec::new(),
        mode: Mode::Fit,
        borrowing: false,
        borrow_level: 0,
        not_fit: None,
        counts: Vec::with_capacity(workload.pod_sets.len()),
        victims: None,
    };
    for (ps_index, ps) in workload.pod_sets.iter().enumerate() {
        let count = counts
            .and_then(|c| c.get(ps_index).copied())
            .unwrap_or(ps.count);
        out.counts.push(count);
        let mut flavors_of_ps = PodSetFlavors {
            flavors: Vec::with_capacity(ps.per_pod.len()),
        };
        // Pods are placed on nodes for the first group that fits only.
        let mut placed = false;
        for group in &def.groups {
            let request = GroupRequest {
                ctx,
                cq,
                def,
                ps_index,
                ps,
                group,
                count,
                topology: workload
                    .topology_request(ps_index)
                    .filter(|_| ctx.cluster.topology_aware),
            };
            if request.requested().next().is_none() {
                continue;
            }
            let reordered: Vec<FlavorId>;
            let order: &[FlavorId] = match preferred.get(ps_index).and_then(Option::as_deref) {
                Some(p) => {
                    reordered = p
                        .iter()
                        .copied()
                        .filter(|f| group.flavors.contains(f))
                        .collect();
                    &reordered
                }
                None => &group.flavors,
            };
            let unplaced = (!placed).then_some(&scratch);
            let (best, problems) = request.choose(order, &out.usage, unplaced);
            if let Some(after) = request.record(best, problems, &mut out, &mut flavors_of_ps) {
                scratch = after;
                placed = true;
            }
        }
        out.pod_sets.push(flavors_of_ps);
    }
    out.usage.sort();
    out
}

/// One pod set's request in one resource group of its ClusterQueue: what
/// the flavor search for that group weighs.
struct GroupRequest<'a> {
    ctx: &'a Context<'a>,
    cq: ClusterQueueId,
    def: &'a ClusterQueue,
    ps_index: usize,
    ps: &'a PodSetRequest,
    group: &'a Group,
    /// Pods to assign (below the pod set's count when partially admitted).
    count: u32,
    /// The pod set's topology request, if any.
    topology: Option<&'a TopologyRequest>,
}

impl GroupRequest<'_> {
    /// What one pod asks for of the group's resources.
    fn requested(&self) -> impl Iterator<Item = (ResourceId, Amount)> + '_ {
        self.ps
            .per_pod
            .iter()
            .copied()
            .filter(|(r, _)| self.group.resources.contains(r))
    }

    /// Tries the flavors in `order` (Kueue's flavor search): the best
    /// choice under the queue's preference, if any flavor fits at all, and
    /// why each flavor tried falls short. `unplaced` is the nodes' state
    /// when this pod set's pods are not placed yet: then a flavor with
    /// node pools must hold them.
    fn choose(
        &self,
        order: &[FlavorId],
        usage: &[(FlavorResource, Amount)],
        unplaced: Option<&Scratch>,
    ) -> (Option<Choice>, Vec<Problem>) {
        let mut problems: Vec<Problem> = Vec::new();
        let mut best: Option<Choice> = None;
        for &f in order {
            if let Some(problem) = self.excluded(f) {
                problems.push(problem);
                continue;
            }
            let (rank, borrowing) = self.rank_flavor(f, usage, &mut problems);
            let mode = match rank.kind {
                Kind::Fit => Mode::Fit,
                Kind::NoFit => Mode::NoFit,
                _ => Mode::Preempt,
            };
            let mut choice = Choice {
                flavor: f,
                mode,
                rank,
                borrowing,
                scratch_after: None,
                placements: Vec::new(),
            };
            if let Some(scratch) = unplaced {
                let placed_on_nodes = self.ctx.capacity.has_pools(f) || self.topology.is_some();
                if mode == Mode::Fit && placed_on_nodes {
                    self.place(&mut choice, scratch, &mut problems);
                }
            }
            let stop = self.stops_search(choice.rank);
            let better = choice.mode != Mode::NoFit
                && best
                    .as_ref()
                    .is_none_or(|b| is_preferred(choice.rank, b.rank, self.def.preference));
            if better {
                best = Some(choice);
            }
            if stop {
                break;
            }
        }
        (best, problems)
    }

    /// Why flavor `f` cannot take this pod set at all: its node selector
    /// or required affinity excludes the flavor's nodes, a taint is not
    /// tolerated, or the flavor's Topology lacks the level the pod set asks
    /// for (Kueue: only a topology-aware flavor takes such a pod set).
    fn excluded(&self, f: FlavorId) -> Option<Problem> {
        let (ps, flavor) = (self.ps, &self.ctx.cluster.flavors[f.index()]);
        if let Some(request) = self.topology {
            if let Err(miss) = self.levels(f) {
                return Some(Problem::Topology {
                    flavor: f,
                    level: request.level().to_string(),
                    miss,
                });
            }
        }
        if !node_constraints_allow(
            &ps.node_selector,
            ps.required_affinity.as_ref(),
            &flavor.node_labels,
        ) {
            return Some(Problem::Excluded { flavor: f });
        }
        let taint =
            untolerated_taint(&flavor.node_taints, &[&ps.tolerations, &flavor.tolerations])?;
        let index = flavor
            .node_taints
            .iter()
            .position(|t| t == taint)
            .unwrap_or(0);
        Some(Problem::Taint {
            flavor: f,
            taint: index,
        })
    }

    /// How flavor `f` fits, as its worst resource under the preference
    /// (Kueue's representative mode), and whether it borrows; each
    /// resource that does not fit now is explained in `problems`.
    fn rank_flavor(
        &self,
        f: FlavorId,
        usage: &[(FlavorResource, Amount)],
        problems: &mut Vec<Problem>,
    ) -> (Rank, bool) {
        let (ctx, cq) = (self.ctx, self.cq);
        let mut rank = Rank {
            kind: Kind::Fit,
            level: 0,
        };
        let mut borrowing = false;
        for (r, per_pod) in self.requested() {
            let fr = ctx.cluster.flavor_resource(f, r);
            let need = per_pod.saturating_mul(self.count as i64) + charged(usage, fr);
            let (this, borrows) = self.rank_resource(fr, need);
            borrowing |= borrows;
            if is_preferred(rank, this, self.def.preference) {
                rank = this;
            }
            if this.kind != Kind::Fit {
                let available = ctx.quota.available(cq, fr);
                let nominal = ctx.quota.nominal(cq, fr);
                let own_free = nominal.positive_sub(ctx.quota.usage(cq, fr));
                problems.push(Problem::Quota {
                    flavor: f,
                    resource: r,
                    need,
                    available,
                    nominal,
                    borrowed: ctx.quota.borrowed(cq, fr),
                    cohort_lend: self.def.cohort.map(|_| available.positive_sub(own_free)),
                    potential: ctx.quota.potential(cq, fr),
                });
            }
        }
        (rank, borrowing)
    }

    /// How `need` of flavor resource `fr` fits: now (and whether that
    /// borrows), by preempting (as the oracle answers), or not at all.
    fn rank_resource(&self, fr: FlavorResource, need: Amount) -> (Rank, bool) {
        let (quota, cq) = (self.ctx.quota, self.cq);
        let available = quota.available(cq, fr);
        let potential = quota.potential(cq, fr);
        let nominal = quota.nominal(cq, fr);
        let (level, in_subtree) = quota.lowest_fitting_subtree(cq, fr, need);
        if need <= available {
            let borrows = quota.usage(cq, fr) + need > nominal;
            let rank = Rank {
                kind: Kind::Fit,
                level,
            };
            (rank, borrows)
        } else if need <= potential
            // Kueue's rule: preemption is tried only for a request
            // within the nominal quota, or one a subtree smaller than
            // the whole cohort tree can hold (hierarchical reclaim),
            // or when the queue may preempt while borrowing.
            && (need <= nominal || in_subtree || self.preempt_while_borrowing())
        {
            let (possibility, after) = match self.ctx.oracle {
                Some(oracle) => oracle.ask(fr, need),
                None => ASSUMED,
            };
            let kind = match possibility {
                Possibility::Reclaim => Kind::Reclaim,
                Possibility::Preempt => Kind::Preempt,
                Possibility::NoCandidates => Kind::NoCandidates,
            };
            (Rank { kind, level: after }, false)
        } else {
            let rank = Rank {
                kind: Kind::NoFit,
                level,
            };
            (rank, false)
        }
    }

    /// Kueue's `canPreemptWhileBorrowing`: `borrowWithinCohort`, or fair
    /// sharing with reclaim. (Asked only for a request beyond nominal
    /// quota that no subtree holds.)
    fn preempt_while_borrowing(&self) -> bool {
        self.def.borrow_within_cohort.is_some()
            || (self.def.reclaim_within_cohort != crate::model::api::ReclaimWithinCohort::Never
                && self.ctx.cluster.fair_sharing_for(self.cq))
    }

    /// Flavor `f`'s Topology levels and the index of the level this pod
    /// set asks for; why not, if the flavor has no Topology or it no such
    /// level.
    fn levels(&self, f: FlavorId) -> Result<LevelRequest<'_>, TopologyMiss> {
        topology_levels(self.ctx.cluster, f, self.topology.map_or("", |t| t.level()))
    }

    /// Places the pods on `choice`'s flavor's nodes from `scratch`: inside
    /// one domain of the level a topology request names (a preferred one
    /// tries wider levels, then anywhere), else best fit; when they do not
    /// fit, the choice does not fit either and `problems` says so.
    fn place(&self, choice: &mut Choice, scratch: &Scratch, problems: &mut Vec<Problem>) {
        let f = choice.flavor;
        if let (Some(request), Ok(levels)) = (self.topology, self.levels(f)) {
            let required = matches!(request, TopologyRequest::Required(_));
            let mut trial = scratch.clone();
            match self.ctx.capacity.place_in_topology(
                &mut trial,
                self.ps_index as u32,
                f,
                levels,
                required,
                self.count,
                &self.ps.per_pod,
                &mut By::BestFit,
            ) {
                Ok(p) => {
                    choice.placements = p;
                    choice.scratch_after = Some(trial);
                    return;
                }
                Err(miss) if required => {
                    choice.mode = Mode::NoFit;
                    choice.rank.kind = Kind::NoFit;
                    problems.push(Problem::Topology {
                        flavor: f,
                        level: request.level().to_string(),
                        miss: TopologyMiss::NoDomain {
                            pods: self.count,
                            largest: miss.largest,
                            domains: miss.domains,
                        },
                    });
                    return;
                }
                Err(_) => {}
            }
        }
        let mut trial = scratch.clone();
        match self.ctx.capacity.place(
            &mut trial,
            self.ps_index as u32,
            &[f],
            self.count,
            &self.ps.per_pod,
            &mut By::BestFit,
        ) {
            Some(p) => {
                choice.placements = p;
                choice.scratch_after = Some(trial);
            }
            None => {
                choice.mode = Mode::NoFit;
                choice.rank.kind = Kind::NoFit;
                problems.push(Problem::Capacity {
                    flavor: f,
                    pods: self.count,
                    nodes: self.ctx.capacity.ready_nodes(f),
                });
            }
        }
    }

    /// Kueue's `shouldTryNextFlavor`, negated: whether a flavor ranked
    /// `rank` ends the search under the queue's `flavorFungibility`.
    fn stops_search(&self, rank: Rank) -> bool {
        match rank.kind {
            Kind::NoFit | Kind::NoCandidates => false,
            kind => {
                let preempts = kind != Kind::Fit;
                let next_to_preempt =
                    preempts && self.def.when_can_preempt == Fungibility::TryNextFlavor;
                let next_to_borrow =
                    rank.level > 0 && self.def.when_can_borrow == Fungibility::TryNextFlavor;
                !(next_to_preempt || next_to_borrow)
            }
        }
    }

    /// Adds the search's outcome to the assignment: the chosen flavor's
    /// usage, flavors and placements, or that the pod set does not fit
    /// (with `problems` as the reason). Returns the nodes' state after the
    /// pods were placed, if they were.
    fn record(
        &self,
        best: Option<Choice>,
        problems: Vec<Problem>,
        out: &mut Assignment,
        flavors_of_ps: &mut PodSetFlavors,
    ) -> Option<Scratch> {
        let Some(choice) = best else {
            // A pod set with no flavor at all explains more than one that needs preemption.
            if out.mode != Mode::NoFit {
                out.not_fit = Some(NotFit {
                    pod_set: self.ps_index,
                    problems,
                });
            }
            out.mode = Mode::NoFit;
            return None;
        };
        for (r, per_pod) in self.requested() {
            let fr = self.ctx.cluster.flavor_resource(choice.flavor, r);
            let amount = per_pod.saturating_mul(self.count as i64);
            match out.usage.iter_mut().find(|(f, _)| *f == fr) {
                Some((_, total)) => *total += amount,
                None => out.usage.push((fr, amount)),
            }
            flavors_of_ps.flavors.push((r, choice.flavor));
        }
        out.placements.extend(choice.placements);
        out.mode = out.mode.max(choice.mode);
        out.borrowing |= choice.borrowing;
        out.borrow_level = out.borrow_level.max(choice.rank.level);
        if choice.mode != Mode::Fit && out.not_fit.is_none() {
            out.not_fit = Some(NotFit {
                pod_set: self.ps_index,
                problems,
            });
        }
        choice.scratch_after
    }
}

/// Why this workload can never be admitted in `cq` as configured, if so:
/// a resource no group covers, or a pod set larger than any flavor's quota,
/// node size or node count (pools at their largest) allows.
pub fn never_fits(ctx: &Context<'_>, cq: ClusterQueueId, workload: &Workload) -> Option<NeverFits> {
    let cluster = ctx.cluster;
    let def = cluster.cluster_queue(cq);
    for (pod_set, ps) in workload.pod_sets.iter().enumerate() {
        for &(r, _) in &ps.per_pod {
            if !def.groups.iter().any(|g| g.resources.contains(&r)) {
                return Some(NeverFits::Uncovered {
                    pod_set,
                    resource: r,
                });
            }
        }
        for group in &def.groups {
            let requested: Vec<_> = ps
                .per_pod
                .iter()
                .filter(|(r, _)| group.resources.contains(r))
                .copied()
                .collect();
            if requested.is_empty() {
                continue;
            }
            let possible = group.flavors.iter().any(|&f| {
                let flavor = &cluster.flavors[f.index()];
                node_constraints_allow(
                    &ps.node_selector,
                    ps.required_affinity.as_ref(),
                    &flavor.node_labels,
                ) && untolerated_taint(&flavor.node_taints, &[&ps.tolerations, &flavor.tolerations])
                    .is_none()
                    && requested.iter().all(|&(r, per_pod)| {
                        per_pod.saturating_mul(fewest(ps) as i64)
                            <= ctx.quota.potential(cq, cluster.flavor_resource(f, r))
                    })
                    && ctx.capacity.pods_could_ever_fit(f, &ps.per_pod)
                        >= u64::from(fewest(ps).max(1))
            });
            if !possible {
                return Some(NeverFits::PodSetTooBig {
                    pod_set,
                    wants: requested
                        .iter()
                        .map(|&(r, a)| (r, a.saturating_mul(fewest(ps) as i64)))
                        .collect(),
                    pods: fewest(ps),
                });
            }
        }
    }
    // Pod sets share the quota: a total beyond all of a group's flavors together never fits.
    for group in &def.groups {
        for &r in &group.resources {
            let total: Amount = workload
                .pod_sets
                .iter()
                .map(|ps| ps.per_pod_of(r).saturating_mul(fewest(ps) as i64))
                .sum();
            let potential: Amount = group
                .flavors
                .iter()
                .map(|&f| ctx.quota.potential(cq, cluster.flavor_resource(f, r)))
                .sum();
            if total > potential {
                return Some(NeverFits::TotalTooBig {
                    resource: r,
                    total,
                    potential,
                });
            }
        }
    }
    None
}

/// The fewest pods a pod set can run with (its `minCount`, else its count).
fn fewest(ps: &super::workload::PodSetRequest) -> u32 {
    ps.min_count.unwrap_or(ps.count).min(ps.count)
}

/// Flavor `f`'s Topology levels and the index of `level` among them; why
/// not, if the flavor has no Topology or it no such level.
pub(super) fn topology_levels<'c>(
    cluster: &'c crate::model::cluster::Cluster,
    f: FlavorId,
    level: &str,
) -> Result<LevelRequest<'c>, TopologyMiss> {
    let topology = cluster.flavors[f.index()]
        .topology
        .and_then(|t| cluster.topologies.get(t.index()))
        .ok_or(TopologyMiss::NoTopology)?;
    let index = topology.level(level).ok_or(TopologyMiss::NoLevel)?;
    Ok(LevelRequest {
        levels: &topology.levels,
        level: index,
    })
}

#[cfg(test)]
#[path = "assign_tests/mod.rs"]
mod tests;
