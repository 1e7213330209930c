//! Preemption (docs/design.md §3, Kueue's): the candidates a head may preempt —
//! within its ClusterQueue by priority, reclaim from queues of its cohort
//! tree that use more than their quota — in Kueue's order, the victim set
//! (greedy, then every victim not needed put back), fair sharing's share
//! strategies, and the preemption itself once the preemptor is sure to fit.
//! Evicts only victims of an admission that then happens.
//!
//! Without fair sharing the victims are found as Kueue's classical
//! preemption finds them: candidates from the subtrees of the cohort tree
//! that exceed their quota, walking up from the preemptor's queue (those in
//! a subtree that holds the request are *hierarchical reclaim*; the others
//! may be taken only when the preemptor ends within its nominal quota,
//! unless `borrowWithinCohort` lets it borrow: lower priority, at most its
//! `maxPriorityThreshold`), then its own queue's; one attempt that may end
//! borrowing and one that may not, in Kueue's order; a candidate whose
//! queue (or a subtree below the common ancestor) is back within its quota
//! is passed over.

use std::cmp::Reverse;

use crate::model::api::{ReclaimWithinCohort, WithinClusterQueue};
use crate::model::cluster::{ClusterQueueId, FlavorResource};
use crate::model::{Amount, Millis};

use super::quota::{Node, QuotaTree};

use super::assign::{Assignment, Mode, Possibility, Victims};
use super::hooks::{AdmissionVerdict, Hooks};
use super::reason::{Eviction, NotFit, Reason, Requeue};
use super::workload::{Admission, WorkloadId};
use super::{Cycle, Event, ReservedTree, Scheduler};

/// How a candidate may be preempted (Kueue's `preemptionVariant`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    WithinQueue,
    /// The preemptor's subtree holds the request: it has the better claim.
    HierarchicalReclaim,
    /// Only if the preemptor then uses no more than its nominal quota.
    ReclaimWithoutBorrowing,
    /// Even if the preemptor then borrows (`borrowWithinCohort`).
    ReclaimWhileBorrowing,
}

pub(super) struct Candidate {
    pub(super) id: WorkloadId,
    /// The lowest common ancestor of its queue and the preemptor's.
    lca: Option<Node>,
    variant: Variant,
}

/// Who asks for what: the preemptor, its ClusterQueue, the flavor
/// resources that need preemption.
#[derive(Clone, Copy)]
pub(super) struct Ask<'a> {
    pub(super) cq: ClusterQueueId,
    pub(super) id: WorkloadId,
    pub(super) frs: &'a [(FlavorResource, Amount)],
}

/// Kueue's classical candidates: hierarchical reclaim, then other queues'
/// by priority, then the preemptor's own queue's, each in Kueue's order.
struct Classical {
    candidates: Vec<Candidate>,
    from_others: bool,
    for_hierarchical_reclaim: bool,
}

impl Scheduler {
    fn uses_any(&self, id: WorkloadId, frs: &[(FlavorResource, Amount)]) -> bool {
        self.workloads[id].admission.as_ref().is_some_and(|a| {
            a.usage
                .iter()
                .any(|(fr, _)| frs.iter().any(|(n, _)| n == fr))
        })
    }

    pub(super) fn is_borrowing_on(
        &self,
        cq: ClusterQueueId,
        frs: &[(FlavorResource, Amount)],
    ) -> bool {
        frs.iter()
            .any(|&(fr, _)| self.quota.usage(cq, fr) > self.quota.nominal(cq, fr))
    }

    pub(super) fn charge(&mut self, id: WorkloadId, sign: i64) {
        let entry = &self.workloads[id];
        let cq = entry.workload.cluster_queue;
        if let Some(admission) = &entry.admission {
            for &(fr, amount) in &admission.usage {
                self.quota.add_usage(cq, fr, amount.saturating_mul(sign));
            }
        }
    }

    /// Kueue's `classifyPreemptionVariant`: `None` when `w` may not be
    /// preempted for `id` (or uses none of `frs`).
    fn classify(&self, ask: Ask<'_>, w: WorkloadId, advantage: bool) -> Option<Variant> {
        let Ask { cq, id, frs } = ask;
        if !self.uses_any(w, frs) {
            return None;
        }
        let def = self.cluster.cluster_queue(cq);
        let me = &self.workloads[id];
        let other = &self.workloads[w];
        let (mine, theirs) = (me.workload.priority, other.workload.priority);
        let same = other.workload.cluster_queue == cq;
        let allowed = if same {
            match def.within_cluster_queue {
                WithinClusterQueue::Never => false,
                WithinClusterQueue::LowerPriority => theirs < mine,
                WithinClusterQueue::LowerOrNewerEqualPriority => {
                    theirs < mine || (theirs == mine && other.slot.queue_time > me.slot.queue_time)
                }
            }
        } else {
            match def.reclaim_within_cohort {
                ReclaimWithinCohort::Never => false,
                ReclaimWithinCohort::LowerPriority => theirs < mine,
                ReclaimWithinCohort::Any => true,
            }
        };
        if !allowed {
            return None;
        }
        Some(if same {
            Variant::WithinQueue
        } else if advantage {
            Variant::HierarchicalReclaim
        } else {
            match def.borrow_within_cohort {
                None => Variant::ReclaimWithoutBorrowing,
                Some(threshold) => {
                    if theirs >= mine || threshold.is_some_and(|t| theirs > t) {
                        Variant::ReclaimWithoutBorrowing
                    } else {
                        Variant::ReclaimWhileBorrowing
                    }
                }
            }
        })
    }

    /// The admitted workloads of `queue` that may be preempted for `id`.
    pub(super) fn candidates_in(
        &self,
        queue: ClusterQueueId,
        ask: Ask<'_>,
        lca: Option<Node>,
        advantage: bool,
        out: &mut Vec<Candidate>,
    ) {
        // The admitted set is ordered by priority: skip those no policy
        // lets this preemptor take (`classify` still decides each).
        let def = self.cluster.cluster_queue(ask.cq);
        let mine = self.workloads[ask.id].workload.priority;
        let below = (mine, WorkloadId(0));
        let up_to = (mine, WorkloadId(u32::MAX));
        let admitted = self.queues.admitted(queue);
        let eligible: Box<dyn Iterator<Item = &(i32, WorkloadId)>> = if queue == ask.cq {
            match def.within_cluster_queue {
                WithinClusterQueue::Never => return,
                WithinClusterQueue::LowerPriority => Box::new(admitted.range(..below)),
                WithinClusterQueue::LowerOrNewerEqualPriority => Box::new(admitted.range(..=up_to)),
            }
        } else {
            match def.reclaim_within_cohort {
                ReclaimWithinCohort::Never => return,
                ReclaimWithinCohort::LowerPriority => Box::new(admitted.range(..below)),
                ReclaimWithinCohort::Any => Box::new(admitted.iter()),
            }
        };
        for &(_, w) in eligible {
            if let Some(variant) = self.classify(ask, w, advantage) {
                out.push(Candidate {
                    id: w,
                    lca,
                    variant,
                });
            }
        }
    }

    /// Kueue's `collectCandidatesInSubtree`: the queues under `current`
    /// that use more than their quota at `frs`, skipping subtrees within
    /// it and the subtree already visited.
    #[allow(clippy::too_many_arguments)]
    fn collect_in_subtree(
        &self,
        current: Node,
        lca: Node,
        skip: Option<Node>,
        advantage: bool,
        ask: Ask<'_>,
        keys: &[FlavorResource],
        out: &mut Vec<Candidate>,
    ) {
        let cq = ask.cq;
        let children = self.quota.children(current);
        for &child in children {
            if self.quota.node_cq(child).is_some() || Some(child) == skip {
                continue;
            }
            if self.quota.within_nominal(child, keys) {
                continue;
            }
            self.collect_in_subtree(child, lca, skip, advantage, ask, keys, out);
        }
        for &child in children {
            let Some(queue) = self.quota.node_cq(child) else {
                continue;
            };
            if queue == cq || self.quota.within_nominal(child, keys) {
                continue;
            }
            self.candidates_in(queue, ask, Some(lca), advantage, out);
        }
    }

    /// Kueue's classical candidate list for `id` needing `frs` with its
    /// whole `usage` (see the module's note).
    fn classical_candidates(
        &self,
        cq: ClusterQueueId,
        id: WorkloadId,
        usage: &[(FlavorResource, Amount)],
        frs: &[(FlavorResource, Amount)],
    ) -> Classical {
        let ask = Ask { cq, id, frs };
        let def = self.cluster.cluster_queue(cq);
        let mut same = Vec::new();
        if def.within_cluster_queue != WithinClusterQueue::Never {
            self.candidates_in(cq, ask, None, false, &mut same);
        }
        let mut hierarchy = Vec::new();
        let mut others = Vec::new();
        let node = QuotaTree::cq_node(cq);
        let keys: Vec<FlavorResource> = frs.iter().map(|(fr, _)| *fr).collect();
        // Other queues' candidates that are not hierarchical reclaim serve
        // only an attempt without borrowing or with `borrowWithinCohort`;
        // without it, a preemptor not under its nominal quota makes no such
        // attempt, so they are not collected at all.
        let others_usable = def.borrow_within_cohort.is_some()
            || keys
                .iter()
                .all(|&fr| self.quota.usage(cq, fr) < self.quota.nominal(cq, fr));
        if def.reclaim_within_cohort != ReclaimWithinCohort::Never {
            let (mut advantage, mut remaining) = self.quota.fits_in_quota(node, usage);
            let mut previous = None;
            let mut current = self.quota.parent(node);
            while let Some(root) = current {
                let list = if advantage {
                    &mut hierarchy
                } else {
                    &mut others
                };
                if advantage || others_usable {
                    self.collect_in_subtree(root, root, previous, advantage, ask, &keys, list);
                }
                let (fits, rest) = self.quota.fits_in_quota(root, &remaining);
                remaining = rest;
                advantage |= fits;
                previous = Some(root);
                current = self.quota.parent(root);
            }
        }
        let key = |c: &Candidate| {
            let e = &self.workloads[c.id];
            let at = e.admission.as_ref().map_or(Millis::ZERO, |a| a.at);
            (e.workload.priority, Reverse(at), Reverse(e.slot.seq), c.id)
        };
        for list in [&mut hierarchy, &mut others, &mut same] {
            list.sort_by_key(|c| key(c));
        }
        let from_others = !hierarchy.is_empty() || !others.is_empty();
        let for_hierarchical_reclaim = !hierarchy.is_empty();
        let mut candidates = hierarchy;
        candidates.extend(others);
        candidates.extend(same);
        Classical {
            candidates,
            from_others,
            for_hierarchical_reclaim,
        }
    }

    /// Kueue's `candidateIsValid`, against the quota as the attempt left it.
    fn still_valid(
        &self,
        cq: ClusterQueueId,
        c: &Candidate,
        borrowing: bool,
        frs: &[FlavorResource],
    ) -> bool {
        let queue = self.workloads[c.id].workload.cluster_queue;
        if queue == cq {
            return true;
        }
        if borrowing && c.variant == Variant::ReclaimWithoutBorrowing {
            return false;
        }
        let mut node = QuotaTree::cq_node(queue);
        if self.quota.within_nominal(node, frs) {
            return false;
        }
        while let Some(parent) = self.quota.parent(node) {
            if Some(parent) == c.lca {
                break;
            }
            if self.quota.within_nominal(parent, frs) {
                return false;
            }
            node = parent;
        }
        true
    }

    /// Kueue's `workloadFits`: the preemptor's `usage` fits now, without
    /// borrowing unless `borrowing`.
    pub(super) fn fits_as(
        &self,
        cq: ClusterQueueId,
        usage: &[(FlavorResource, Amount)],
        borrowing: bool,
    ) -> bool {
        usage.iter().all(|&(fr, v)| {
            (borrowing || self.quota.usage(cq, fr) + v <= self.quota.nominal(cq, fr))
                && v <= self.quota.available(cq, fr)
        })
    }

    /// Kueue's `fillBackWorkloads`: with `targets` removed from the quota,
    /// every one but the last is put back (in reverse) if the preemptor
    /// still fits without it; those put back leave `targets`.
    pub(super) fn fill_back(
        &mut self,
        cq: ClusterQueueId,
        usage: &[(FlavorResource, Amount)],
        borrowing: bool,
        targets: &mut Vec<WorkloadId>,
    ) {
        for i in (0..targets.len().saturating_sub(1)).rev() {
            self.charge(targets[i], 1);
            if self.fits_as(cq, usage, borrowing) {
                targets.swap_remove(i);
            } else {
                self.charge(targets[i], -1);
            }
        }
    }

    /// Kueue's classical preemption: the victims that make `usage` fit
    /// (none when nothing would). Leaves the quota tree as it found it.
    fn classical_victims(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        usage: &[(FlavorResource, Amount)],
    ) -> Victims {
        let frs = self.needing_preemption(cq, usage);
        let keys: Vec<FlavorResource> = frs.iter().map(|(fr, _)| *fr).collect();
        let found = self.classical_candidates(cq, id, usage, &frs);
        let forbidden = self
            .cluster
            .cluster_queue(cq)
            .borrow_within_cohort
            .is_none();
        let under_nominal = keys
            .iter()
            .all(|&fr| self.quota.usage(cq, fr) < self.quota.nominal(cq, fr));
        let attempts: &[bool] = if !found.from_others || (forbidden && !under_nominal) {
            &[true]
        } else if forbidden && !found.for_hierarchical_reclaim {
            &[false, true]
        } else {
            &[true, false]
        };
        for &borrowing in attempts {
            let mut targets: Vec<WorkloadId> = Vec::new();
            let mut fits = false;
            for c in &found.candidates {
                if !self.still_valid(cq, c, borrowing, &keys) {
                    continue;
                }
                self.charge(c.id, -1);
                targets.push(c.id);
                if self.fits_as(cq, usage, borrowing) {
                    fits = true;
                    break;
                }
            }
            if fits {
                self.fill_back(cq, usage, borrowing, &mut targets);
            }
            for &w in &targets {
                self.charge(w, 1);
            }
            if fits {
                return Victims {
                    chosen: targets,
                    candidates: found.candidates.len(),
                };
            }
        }
        Victims {
            chosen: Vec::new(),
            candidates: found.candidates.len(),
        }
    }

    /// Kueue's `flavorResourcesNeedPreemption`: the flavor resources of
    /// `usage` that do not fit what the ClusterQueue can still take.
    pub(super) fn needing_preemption(
        &self,
        cq: ClusterQueueId,
        usage: &[(FlavorResource, Amount)],
    ) -> Vec<(FlavorResource, Amount)> {
        usage
            .iter()
            .copied()
            .filter(|&(fr, amount)| amount > self.quota.available(cq, fr))
            .collect()
    }

    /// Whether `assignment` needs preemption and victims would make it fit
    /// (Kueue's "preemption targets" found).
    pub(super) fn can_preempt_for(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        assignment: &Assignment,
    ) -> bool {
        if assignment.mode != Mode::Preempt {
            return false;
        }
        match &assignment.victims {
            Some(found) => !found.chosen.is_empty(),
            None => !self.victims(cq, id, &assignment.usage).chosen.is_empty(),
        }
    }

    /// Kueue's `SimulatePreemption`: what preempting for `need` of `fr`
    /// alone would do for `id`, and its borrowing level once the victims
    /// are gone; and the victims (none: nothing would do). Leaves the
    /// quota as it found it.
    pub(super) fn simulate_preemption(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        fr: FlavorResource,
        need: Amount,
    ) -> ((Possibility, u32), Victims) {
        let usage = [(fr, need)];
        let version = self.quota.version(cq);
        let found = self.victims(cq, id, &usage);
        if found.chosen.is_empty() {
            let level = self.quota.lowest_fitting_subtree(cq, fr, need).0;
            return ((Possibility::NoCandidates, level), found);
        }
        let victims = &found.chosen;
        for &w in victims {
            self.charge(w, -1);
        }
        let (level, _) = self.quota.lowest_fitting_subtree(cq, fr, need);
        for &w in victims {
            self.charge(w, 1);
        }
        self.quota.restore_version(cq, version);
        let within = victims
            .iter()
            .any(|w| self.workloads[*w].workload.cluster_queue == cq);
        let possibility = if within {
            Possibility::Preempt
        } else {
            Possibility::Reclaim
        };
        ((possibility, level), found)
    }

    /// The victims that make `needed` fit for `id` (none: nothing would):
    /// Kueue's fair-sharing preemption in a tree with fair sharing, else
    /// its classical one. Leaves the quota as it found it.
    fn victims(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        needed: &[(FlavorResource, Amount)],
    ) -> Victims {
        // The victims are all in `cq`'s tree; the searches undo each trial charge.
        let version = self.quota.version(cq);
        let found = if self.fair.enabled(cq) {
            self.fair_victims(cq, id, needed)
        } else {
            self.classical_victims(cq, id, needed)
        };
        self.quota.restore_version(cq, version);
        found
    }

    /// Kueue's `reserveCapacityForUnreclaimablePreempt`: a head that needs
    /// preemption but has nothing to preempt, in a queue that cannot always
    /// reclaim (`reclaimWithinCohort` other than `Any`), holds for the rest
    /// of the cycle the quota it could use — up to its borrowing limit when
    /// it borrows, else up to its nominal quota — so heads after it in the
    /// cohort cannot take it first.
    fn reserve_for_unreclaimable(
        &mut self,
        cq: ClusterQueueId,
        assignment: &Assignment,
        cycle: &mut Cycle,
    ) {
        if self.cluster.cluster_queue(cq).reclaim_within_cohort == ReclaimWithinCohort::Any {
            return;
        }
        let version = self.quota.version(cq);
        for &(fr, usage) in &assignment.usage {
            let used = self.quota.usage(cq, fr);
            let nominal = self.quota.nominal(cq, fr);
            let amount = if assignment.borrowing || assignment.borrow_level > 0 {
                match self.quota.borrowing_limit(cq, fr) {
                    None => usage,
                    Some(limit) => usage.min((nominal + limit).positive_sub(used)),
                }
            } else {
                usage.min(nominal.positive_sub(used))
            };
            if amount > Amount::ZERO {
                self.quota.add_usage(cq, fr, amount);
                cycle.reserved.push((cq, fr, amount));
            }
        }
        let after = self.quota.version(cq);
        if after == version {
            return;
        }
        let tree = self.trees.tree_of(cq);
        match cycle
            .reserved_trees
            .iter_mut()
            .find(|t| self.trees.tree_of(t.cq) == tree)
        {
            Some(t) => {
                t.only_reserved &= t.after == version;
                t.after = after;
            }
            None => cycle.reserved_trees.push(ReservedTree {
                cq,
                before: version,
                after,
                only_reserved: true,
            }),
        }
    }

    /// Preempts for a head that needs it: finds the victims, checks the
    /// head then fits (nodes included) and the admission hook allows it,
    /// evicts them and admits the head; else sets the head aside, told why.
    pub(super) fn try_preempt(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        assignment: Assignment,
        now: Millis,
        hooks: &mut dyn Hooks,
        cycle: &mut Cycle,
    ) -> bool {
        let found = match assignment.victims.clone() {
            Some(found) => found,
            None => self.victims(cq, id, &assignment.usage),
        };
        let Victims {
            chosen: victims,
            candidates,
        } = found;
        if victims.is_empty() {
            self.reserve_for_unreclaimable(cq, &assignment, cycle);
            let reason = Reason::PreemptionFailed {
                not_fit: assignment.not_fit.unwrap_or(NotFit {
                    pod_set: 0,
                    problems: Vec::new(),
                }),
                candidates,
            };
            cycle.progress |= self.set_aside(cq, id, reason);
            return false;
        }
        if self.repeats.repeats(self.epoch, id, &victims) {
            self.repeats.hold();
            let reason = Reason::PreemptionCycle {
                not_fit: assignment.not_fit,
                victims: victims
                    .iter()
                    .map(|&w| {
                        let v = &self.workloads[w].workload;
                        format!("{}/{}", v.namespace, v.name)
                    })
                    .collect(),
            };
            cycle.progress |= self.set_aside(cq, id, reason);
            return false;
        }
        // Release the victims for real, then assign again: the preemptor now fits in quota;
        // it must also find room on nodes.
        let versions = (self.quota.version(cq), self.capacity.version());
        let saved: Vec<(WorkloadId, Admission)> = victims
            .iter()
            .filter_map(|&w| self.workloads[w].admission.clone().map(|a| (w, a)))
            .collect();
        for (w, a) in &saved {
            let wcq = self.workloads[*w].workload.cluster_queue;
            for &(fr, amount) in &a.usage {
                self.quota.add_usage(wcq, fr, -amount);
            }
            self.capacity.release(&a.placements);
        }
        let retry = self.assign_head(cq, id, hooks);
        // Restore; evict() releases again for real if we go ahead.
        for (w, a) in &saved {
            let wcq = self.workloads[*w].workload.cluster_queue;
            for &(fr, amount) in &a.usage {
                self.quota.add_usage(wcq, fr, amount);
            }
            self.capacity.commit(&a.placements);
        }
        self.quota.restore_version(cq, versions.0);
        self.capacity.restore_version(versions.1);
        if retry.mode != Mode::Fit {
            let reason = Reason::PreemptionNotEnough {
                not_fit: assignment.not_fit.unwrap_or(NotFit {
                    pod_set: 0,
                    problems: Vec::new(),
                }),
                victims: victims.len(),
                after: retry.not_fit,
            };
            cycle.progress |= self.set_aside(cq, id, reason);
            return false;
        }
        // One admission question per attempt: a denial is carried out as is.
        let verdict = self.ask_admission(id, &retry, now, hooks);
        if verdict != AdmissionVerdict::Allow {
            return self.decide(cq, id, retry, verdict, now, hooks, cycle);
        }
        let preemptor = {
            let e = &self.workloads[id];
            format!("{}/{}", e.workload.namespace, e.workload.name)
        };
        let priority = self.workloads[id].workload.priority;
        for &w in &victims {
            let reclaimed_by = (self.workloads[w].workload.cluster_queue != cq)
                .then(|| self.cluster.cluster_queue(cq).name.clone());
            let cause = Eviction::Preempted {
                preemptor: preemptor.clone(),
                priority,
                reclaimed_by,
            };
            self.evict(w, cause, Some(preemptor.clone()), &mut cycle.events);
            self.workloads[w].preempted_at = Some(now);
            self.requeue_in_place(w);
            cycle.events.push(Event::Requeued {
                workload: w,
                cause: Requeue::Preempted,
            });
        }
        self.repeats.record(id, &victims);
        self.admit(cq, id, retry, now, hooks);
        cycle.events.push(Event::Admitted { workload: id });
        true
    }
}
