//! Fair-sharing preemption (docs/design.md §3, Kueue's `fairPreemptions`): in a
//! cohort tree with fair sharing, the victims of a head that needs
//! preemption. Candidates are its own queue's (by `withinClusterQueue`) and
//! those of every queue of the tree that borrows on what it needs (by
//! `reclaimWithinCohort`), in Kueue's candidate order. With the preemptor's
//! usage added, queues are visited from the root by highest share (Kueue's
//! target ordering, pruning what does not borrow); a victim from another
//! queue is taken only if it passes the first configured strategy
//! (`Cluster::preemption_strategies`, Kueue's
//! `fairSharing.preemptionStrategies`) comparing the share of the
//! preemptor's side at the lowest common ancestor with the target side's:
//! at most the target side's after removing it
//! (`LessThanOrEqualToFinalShare`) or strictly below the target side's
//! before (`LessThanInitialShare`); with Kueue's default pair, what the
//! first pass passed over gets a second pass under `LessThanInitialShare`,
//! at most one victim per queue. The share rules are waived when the
//! preemptor then stays within its nominal quota (Kueue's
//! `FairSharingPreemptWithinNominal`). Then every victim not needed is put
//! back.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::model::cluster::{ClusterQueueId, FlavorResource, PreemptionStrategy};
use crate::model::{Amount, Millis};

use super::assign::Victims;
use super::fair::Drs;
use super::preemption::Ask;
use super::quota::{Node, QuotaTree};
use super::workload::{Seq, WorkloadId};
use super::Scheduler;

/// Kueue's `CandidatesOrdering`: other queues' workloads before the
/// preemptor's own, then lower priority, then most recently admitted, then
/// input order (newest first).
type CandidateKey = (bool, i32, Reverse<Millis>, Reverse<Seq>, WorkloadId);

/// Kueue's `TargetClusterQueueOrdering`: the queues to take victims from,
/// highest share first, walking down from the root.
struct Targets {
    preemptor: ClusterQueueId,
    /// The cohorts above the preemptor's queue.
    preemptor_path: Vec<Node>,
    /// Candidates left, per queue, in candidate order.
    queues: BTreeMap<ClusterQueueId, VecDeque<WorkloadId>>,
    pruned: BTreeSet<u32>,
    root: Option<Node>,
}

impl Targets {
    fn new(sched: &Scheduler, preemptor: ClusterQueueId, candidates: &[WorkloadId]) -> Targets {
        let mut preemptor_path = Vec::new();
        let mut node = QuotaTree::cq_node(preemptor);
        while let Some(parent) = sched.quota.parent(node) {
            preemptor_path.push(parent);
            node = parent;
        }
        let mut queues: BTreeMap<ClusterQueueId, VecDeque<WorkloadId>> = BTreeMap::new();
        for &w in candidates {
            let cq = sched.workloads[w].workload.cluster_queue;
            queues.entry(cq).or_default().push_back(w);
        }
        Targets {
            preemptor,
            root: preemptor_path.last().copied(),
            preemptor_path,
            queues,
            pruned: BTreeSet::new(),
        }
    }

    fn has_workload(&self, cq: ClusterQueueId) -> bool {
        self.queues.get(&cq).is_some_and(|q| !q.is_empty())
    }

    fn pop(&mut self, cq: ClusterQueueId) -> Option<WorkloadId> {
        self.queues.get_mut(&cq).and_then(VecDeque::pop_front)
    }

    fn drop_queue(&mut self, cq: ClusterQueueId) {
        self.pruned.insert(QuotaTree::cq_node(cq).0);
    }

    /// The next queue to take a victim from, `None` when there is none
    /// left. The caller takes or drops a candidate of it before asking again.
    fn next(&mut self, sched: &Scheduler) -> Option<ClusterQueueId> {
        let Some(root) = self.root else {
            let own = QuotaTree::cq_node(self.preemptor).0;
            return (!self.pruned.contains(&own) && self.has_workload(self.preemptor))
                .then_some(self.preemptor);
        };
        while !self.pruned.contains(&root.0) {
            if let Some(cq) = self.next_under(sched, root) {
                return Some(cq);
            }
        }
        None
    }

    /// Kueue's `nextTarget`: the child of `cohort` with the highest share
    /// (a cohort on a tie), pruning children that cannot yield victims;
    /// `None` when this call only pruned.
    fn next_under(&mut self, sched: &Scheduler, cohort: Node) -> Option<ClusterQueueId> {
        let mut best_cq: Option<(ClusterQueueId, Drs)> = None;
        let mut best_cohort: Option<(Node, Drs)> = None;
        for &child in sched.quota.children(cohort) {
            if self.pruned.contains(&child.0) {
                continue;
            }
            let drs = sched.drs(child);
            match sched.quota.node_cq(child) {
                Some(cq) => {
                    if (!drs.borrowing() && cq != self.preemptor) || !self.has_workload(cq) {
                        self.pruned.insert(child.0);
                        continue;
                    }
                    best_cq = match best_cq {
                        None => Some((cq, drs)),
                        Some((best, best_drs)) => match drs.compare(&best_drs) {
                            Ordering::Greater => Some((cq, drs)),
                            Ordering::Equal if self.first_before(sched, cq, best) => {
                                Some((cq, drs))
                            }
                            _ => Some((best, best_drs)),
                        },
                    };
                }
                None => {
                    if !drs.borrowing() && !self.preemptor_path.contains(&child) {
                        self.pruned.insert(child.0);
                        continue;
                    }
                    let best = best_cohort.map_or(Drs::NEGATIVE, |(_, d)| d);
                    if drs.compare(&best) != Ordering::Less {
                        best_cohort = Some((child, drs));
                    }
                }
            }
        }
        let cq_drs = best_cq.map_or(Drs::NEGATIVE, |(_, d)| d);
        match (best_cohort, best_cq) {
            (None, None) => {
                self.pruned.insert(cohort.0);
                None
            }
            (Some((child, drs)), _) if drs.compare(&cq_drs) != Ordering::Less => {
                self.next_under(sched, child)
            }
            (_, Some((cq, _))) => Some(cq),
            (Some((child, _)), None) => self.next_under(sched, child),
        }
    }

    /// On equal shares: whether `a`'s first candidate comes before `b`'s.
    fn first_before(&self, sched: &Scheduler, a: ClusterQueueId, b: ClusterQueueId) -> bool {
        let first = |cq: ClusterQueueId| self.queues.get(&cq).and_then(|q| q.front().copied());
        match (first(a), first(b)) {
            (Some(x), Some(y)) => {
                sched.candidate_key(self.preemptor, x) < sched.candidate_key(self.preemptor, y)
            }
            _ => false,
        }
    }
}

/// How the first pass runs: the rule it applies, and whether the
/// preemptor stays within its nominal quota (every rule waived).
#[derive(Clone, Copy)]
struct FirstPass {
    rule: PreemptionStrategy,
    within_nominal: bool,
}

/// Kueue's strategy functions (`fairsharing/strategy.go`): whether taking
/// a workload of the target passes `rule`, from the preemptor side's
/// share with it admitted and the target side's before and after losing
/// the workload.
fn passes(
    rule: PreemptionStrategy,
    preemptor_new: &Drs,
    target_old: &Drs,
    target_new: &Drs,
) -> bool {
    match rule {
        PreemptionStrategy::LessThanOrEqualToFinalShare => {
            preemptor_new.compare(target_new) != Ordering::Greater
        }
        PreemptionStrategy::LessThanInitialShare => {
            preemptor_new.compare(target_old) == Ordering::Less
        }
    }
}

impl Scheduler {
    fn candidate_key(&self, preemptor: ClusterQueueId, w: WorkloadId) -> CandidateKey {
        let e = &self.workloads[w];
        let at = e.admission.as_ref().map_or(Millis::ZERO, |a| a.at);
        (
            e.workload.cluster_queue == preemptor,
            e.workload.priority,
            Reverse(at),
            Reverse(e.slot.seq),
            w,
        )
    }

    /// Kueue's `findCandidates` under fair sharing, in `CandidatesOrdering`:
    /// the preemptor's own queue's (by `withinClusterQueue`) and every
    /// queue of its tree that borrows on `frs` (by `reclaimWithinCohort`),
    /// each using some of `frs`.
    pub(super) fn fair_candidates(
        &self,
        cq: ClusterQueueId,
        id: WorkloadId,
        frs: &[(FlavorResource, Amount)],
    ) -> Vec<WorkloadId> {
        let ask = Ask { cq, id, frs };
        let mut found = Vec::new();
        self.candidates_in(cq, ask, None, false, &mut found);
        if self.cluster.cluster_queue(cq).cohort.is_some() {
            for &other in self.trees.members(cq).iter() {
                if other != cq && self.is_borrowing_on(other, frs) {
                    self.candidates_in(other, ask, None, false, &mut found);
                }
            }
        }
        let mut keys: Vec<CandidateKey> =
            found.iter().map(|c| self.candidate_key(cq, c.id)).collect();
        keys.sort();
        keys.into_iter().map(|k| k.4).collect()
    }

    /// The node on `cq`'s path whose parent is `lca` (Kueue's "almost LCA").
    fn below(&self, cq: ClusterQueueId, lca: Node) -> Node {
        let mut node = QuotaTree::cq_node(cq);
        while let Some(parent) = self.quota.parent(node) {
            if parent == lca {
                break;
            }
            node = parent;
        }
        node
    }

    /// The shares compared when `target` loses a workload to the
    /// preemptor: the preemptor's side and the target's side, each the
    /// child of their lowest common ancestor on its path.
    fn sides(&self, targets: &Targets, target: ClusterQueueId) -> (Node, Node) {
        let mut node = QuotaTree::cq_node(target);
        let mut lca = None;
        while let Some(parent) = self.quota.parent(node) {
            if targets.preemptor_path.contains(&parent) {
                lca = Some(parent);
                break;
            }
            node = parent;
        }
        match lca {
            Some(lca) => (self.below(targets.preemptor, lca), self.below(target, lca)),
            None => (
                QuotaTree::cq_node(targets.preemptor),
                QuotaTree::cq_node(target),
            ),
        }
    }

    /// Kueue's `workloadFitsForFairSharing`: with the preemptor's usage
    /// (added for the shares) taken out again, whether it fits, borrowing
    /// allowed.
    fn fits_for_fair_sharing(
        &mut self,
        cq: ClusterQueueId,
        usage: &[(FlavorResource, Amount)],
    ) -> bool {
        self.add_all(cq, usage, -1);
        let fits = self.fits_as(cq, usage, true);
        self.add_all(cq, usage, 1);
        fits
    }

    fn add_all(&mut self, cq: ClusterQueueId, usage: &[(FlavorResource, Amount)], sign: i64) {
        for &(fr, amount) in usage {
            self.quota.add_usage(cq, fr, amount.saturating_mul(sign));
        }
    }

    /// Kueue's fair-sharing preemption for `id` needing `usage` (see the
    /// module's note): the victims (none when nothing would do). Leaves the
    /// quota as it found it.
    pub(super) fn fair_victims(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        usage: &[(FlavorResource, Amount)],
    ) -> Victims {
        let frs = self.needing_preemption(cq, usage);
        let candidates = self.fair_candidates(cq, id, &frs);
        let none = Victims {
            chosen: Vec::new(),
            candidates: candidates.len(),
        };
        if candidates.is_empty() {
            return none;
        }
        // Shares are compared with the preemptor admitted.
        self.add_all(cq, usage, 1);
        let within_nominal = frs
            .iter()
            .all(|&(fr, _)| self.quota.usage(cq, fr) <= self.quota.nominal(cq, fr));
        let strategies = self.cluster.preemption_strategies;
        let mut victims = Vec::new();
        let mut retry = Vec::new();
        let first = FirstPass {
            rule: strategies.first(),
            within_nominal,
        };
        let mut fits = self.first_strategy(cq, usage, &candidates, first, &mut victims, &mut retry);
        if !fits && strategies.then_initial_share() {
            fits = self.second_strategy(cq, usage, &retry, &mut victims);
        }
        self.add_all(cq, usage, -1);
        if !fits {
            for &w in &victims {
                self.charge(w, 1);
            }
            return none;
        }
        self.fill_back(cq, usage, true, &mut victims);
        for &w in &victims {
            self.charge(w, 1);
        }
        Victims {
            chosen: victims,
            candidates: candidates.len(),
        }
    }

    /// Kueue's `runFirstFsStrategy` under the first configured strategy:
    /// removes victims from the quota as it takes them; what it passes over
    /// goes to `retry`. Whether the preemptor fits.
    fn first_strategy(
        &mut self,
        cq: ClusterQueueId,
        usage: &[(FlavorResource, Amount)],
        candidates: &[WorkloadId],
        pass: FirstPass,
        victims: &mut Vec<WorkloadId>,
        retry: &mut Vec<WorkloadId>,
    ) -> bool {
        let FirstPass {
            rule,
            within_nominal,
        } = pass;
        let mut targets = Targets::new(self, cq, candidates);
        while let Some(target) = targets.next(self) {
            if target == cq || within_nominal {
                // Within its own queue, or the preemptor stays within its
                // nominal quota: no share to compare.
                let Some(w) = targets.pop(target) else {
                    continue;
                };
                self.charge(w, -1);
                victims.push(w);
                if self.fits_for_fair_sharing(cq, usage) {
                    return true;
                }
                continue;
            }
            let (mine, theirs) = self.sides(&targets, target);
            let preemptor_new = self.drs(mine);
            let target_old = self.drs(theirs);
            if preemptor_new.weighted().is_infinite() && !target_old.weighted().is_infinite() {
                // A weight-0 borrower is above every other share: nobody here can pass.
                while let Some(w) = targets.pop(target) {
                    retry.push(w);
                }
                continue;
            }
            while let Some(w) = targets.pop(target) {
                self.charge(w, -1);
                let target_new = self.drs(theirs);
                if passes(rule, &preemptor_new, &target_old, &target_new) {
                    victims.push(w);
                    if self.fits_for_fair_sharing(cq, usage) {
                        return true;
                    }
                    // Shares moved: choose the queue again.
                    break;
                }
                self.charge(w, 1);
                retry.push(w);
            }
        }
        false
    }

    /// Kueue's `runSecondFsStrategy` over what the first pass passed over:
    /// `LessThanInitialShare` (the only second strategy Kueue accepts), at
    /// most one victim per queue.
    fn second_strategy(
        &mut self,
        cq: ClusterQueueId,
        usage: &[(FlavorResource, Amount)],
        retry: &[WorkloadId],
        victims: &mut Vec<WorkloadId>,
    ) -> bool {
        let mut targets = Targets::new(self, cq, retry);
        while let Some(target) = targets.next(self) {
            let (mine, theirs) = self.sides(&targets, target);
            let target_old = self.drs(theirs);
            let passed = passes(
                PreemptionStrategy::LessThanInitialShare,
                &self.drs(mine),
                &target_old,
                &target_old,
            );
            if let Some(w) = targets.pop(target) {
                if passed {
                    self.charge(w, -1);
                    victims.push(w);
                    if self.fits_for_fair_sharing(cq, usage) {
                        return true;
                    }
                }
            }
            targets.drop_queue(target);
        }
        false
    }
}

#[cfg(test)]
mod tests {
    //! Each configured strategy set on Kueue's "preempt lower priority
    //! first, even if big" (TestFairPreemptions): which of b's workloads
    //! a's preemptor takes.

    use std::sync::Arc;

    use crate::model::cluster::tests::build;
    use crate::model::cluster::FairPreemptionStrategies;
    use crate::model::Millis;
    use crate::scheduler::hooks::DefaultHooks;
    use crate::scheduler::{Event, Input, Scheduler};

    /// Three ClusterQueues of 3 GPUs in cohort `all`, fair sharing on.
    const CLUSTER: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: a}
spec:
  cohort: all
  scheduling: {algorithm: fair-sharing}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: default, resources: [{name: nvidia.com/gpu, nominalQuota: 3}]}]
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: b}
spec:
  cohort: all
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: default, resources: [{name: nvidia.com/gpu, nominalQuota: 3}]}]
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: c}
spec:
  cohort: all
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: default, resources: [{name: nvidia.com/gpu, nominalQuota: 3}]}]
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: a, name: q}
spec: {clusterQueue: a}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: b, name: q}
spec: {clusterQueue: b}
"#;

    fn submit(s: &mut Scheduler, now: i64, jobs: &[(&str, &str, i64, i32)]) -> Vec<Event> {
        let cluster = s.cluster_arc().clone();
        let inputs = jobs
            .iter()
            .map(|&(ns, name, gpus, priority)| {
                Input::Submit(crate::scheduler::tests::workload(
                    &cluster, ns, name, gpus, priority,
                ))
            })
            .collect();
        s.step(Millis::from_secs(now), inputs, &mut DefaultHooks)
            .events
    }

    /// The names of the workloads `a-incoming` preempts under `strategies`.
    fn victims(strategies: FairPreemptionStrategies) -> Vec<String> {
        let mut cluster = build(CLUSTER);
        cluster.preemption_strategies = strategies;
        let mut s = Scheduler::new(Arc::new(cluster), &[]);
        // a full; b borrows 3 (333 of 9): b-low (priority 0) and b-high (1).
        let events = submit(
            &mut s,
            0,
            &[
                ("a", "a1", 3, 0),
                ("b", "b-low", 5, 0),
                ("b", "b-high", 1, 1),
            ],
        );
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, Event::Admitted { .. }))
                .count(),
            3
        );
        // a after a-incoming borrows 1 (111).
        let events = submit(&mut s, 1, &[("a", "a-incoming", 1, 0)]);
        events
            .iter()
            .filter_map(|e| match e {
                Event::Evicted { workload, by, .. } => {
                    assert_eq!(by.as_deref(), Some("a/a-incoming"));
                    Some(s.entry(*workload).workload.name.clone())
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn less_than_initial_share_takes_the_lower_priority_however_big() {
        // 111 < 333: the first candidate, lower priority first.
        assert_eq!(
            victims(FairPreemptionStrategies::InitialShareOnly),
            ["b-low"]
        );
    }

    #[test]
    fn less_than_or_equal_to_final_share_takes_what_keeps_the_target_above() {
        // Without b-low b is at 0 < 111, without b-high at 222 >= 111.
        assert_eq!(
            victims(FairPreemptionStrategies::FinalShareOnly),
            ["b-high"]
        );
        assert_eq!(
            victims(FairPreemptionStrategies::FinalThenInitialShare),
            ["b-high"]
        );
    }
}
