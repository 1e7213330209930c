//! Fair sharing (docs/design.md §3, Kueue's hierarchical fair sharing): the
//! dominant resource share (DRS) of every node of a cohort tree — a
//! ClusterQueue or a cohort, weighted by its `fairSharing.weight` —, the
//! tournament that picks which head of a tree goes next, the adaptive
//! weights the fair-share hook sets every `adjustmentInterval`, and the
//! decayed GPU usage policies read. Fair-sharing preemption, which
//! compares these shares, is in `fair_preemption`.

use std::cmp::{Ordering, Reverse};

use crate::model::cluster::{ClusterQueueId, FlavorResource};
use crate::model::{Amount, Millis};

use super::hooks::{FairShareRequest, Hooks};
use super::quota::{Node, QuotaTree};
use super::workload::Seq;
use super::Scheduler;

/// Kueue's dominant resource share of one node of a cohort tree: per
/// resource (all flavors together), what the node uses beyond its subtree
/// quota × 1000 ÷ what its parent could ever lend it (Kueue's
/// `potentialAvailable` at the parent); the largest such ratio, divided by
/// the node's weight. A root, or a node within its quota, has 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Drs {
    weight: f64,
    /// The largest per-resource ratio, unweighted (Kueue's `unweightedRatio`).
    ratio: f64,
    /// The node uses more than its subtree quota at some flavor resource.
    borrowing: bool,
}

impl Drs {
    /// Below every real share: where a comparison starts.
    pub(crate) const NEGATIVE: Drs = Drs {
        weight: 1.0,
        ratio: -1.0,
        borrowing: false,
    };

    /// The share as Kueue reports it (`weightedShare`, before rounding):
    /// 0 within quota, +∞ for a weight-0 node that borrows.
    pub fn weighted(&self) -> f64 {
        if self.ratio == 0.0 {
            0.0
        } else if self.weight == 0.0 {
            f64::INFINITY
        } else {
            self.ratio / self.weight
        }
    }

    pub fn borrowing(&self) -> bool {
        self.borrowing
    }

    fn zero_weight_borrows(&self) -> bool {
        self.weight == 0.0 && self.ratio != 0.0
    }

    /// Kueue's `CompareDRS`: the lower share is preferred for admission,
    /// the higher for preemption; two weight-0 borrowers compare by their
    /// unweighted ratios, and either is above every other share.
    pub fn compare(&self, other: &Drs) -> Ordering {
        match (self.zero_weight_borrows(), other.zero_weight_borrows()) {
            (true, true) => self.ratio.total_cmp(&other.ratio),
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => self.weighted().total_cmp(&other.weighted()),
        }
    }
}

/// Per node of the quota tree: for each resource, what the node's parent
/// could ever lend (Kueue's `calculateLendable` at the node): the sum over
/// the resource's flavors of the parent's potential. Quota only, so fixed
/// for a configuration. Empty for ClusterQueues (they are nobody's parent).
pub(super) fn lendable_by_node(
    cluster: &crate::model::cluster::Cluster,
    quota: &QuotaTree,
) -> Vec<Vec<Amount>> {
    quota
        .nodes()
        .map(|node| {
            if quota.node_cq(node).is_some() {
                return Vec::new();
            }
            let mut lendable = vec![Amount::ZERO; cluster.resources.len()];
            for fr in 0..quota.flavor_resources() {
                let fr = FlavorResource(fr as u32);
                let (_, r) = cluster.split(fr);
                lendable[r.index()] =
                    lendable[r.index()].saturating_add(quota.potential_of(node, fr));
            }
            lendable
        })
        .collect()
}

/// One head in a fair-sharing tournament.
pub(super) struct Contender<'a> {
    pub cq: ClusterQueueId,
    /// What admitting it would charge (its nominated assignment's usage).
    pub usage: &'a [(FlavorResource, Amount)],
    pub priority: i32,
    pub queue_time: Millis,
    pub seq: Seq,
}

/// A contender's standing at one cohort of the tournament: whether the
/// child of that cohort on its path would borrow on what it asks for, and
/// that child's share once it is admitted.
type Standing = (bool, Drs);

impl Scheduler {
    /// Brings every ClusterQueue's decayed usage to `now` (usage changes only at call instants).
    pub(super) fn advance_history(&mut self, now: Millis) {
        // Within one instant the integrals do not move (a step calls this
        // from its timers, every cycle and the autoscale plan).
        self.history.advance(now, &self.quota);
    }

    pub(super) fn adjust_fair_weights(&mut self, now: Millis, hooks: &mut dyn Hooks) {
        let shares: Vec<f64> = (0..self.cluster.cluster_queues.len())
            .map(|i| self.share(ClusterQueueId(i as u32), &[]))
            .collect();
        let request = FairShareRequest {
            state: self,
            shares: &shares,
            now,
        };
        let weights = hooks.fair_share(&request);
        if weights.len() == self.fair_weights.len() {
            for (i, w) in weights.into_iter().enumerate() {
                if w.is_finite() && w >= 0.0 && w != self.fair_weights[i] {
                    self.fair_weights[i] = w;
                    // Shares and so fair preemption depend on the weights.
                    self.epoch += 1;
                }
            }
        }
        let interval = self
            .cluster
            .cluster_queues
            .iter()
            .filter_map(|cq| cq.adaptive_interval)
            .min();
        self.next_fair_adjust = interval.map(|i| now.saturating_add(i.max(Millis(1))));
    }

    /// The weight of a node: a ClusterQueue's current fair-sharing weight
    /// (the fair-share hook may change it), a cohort's `fairSharing.weight`.
    fn node_weight(&self, node: Node) -> f64 {
        match self.quota.node_cq(node) {
            Some(cq) => self.fair_weights[cq.index()],
            None => self
                .quota
                .node_cohort(node)
                .map_or(1.0, |c| self.cluster.cohorts[c.index()].fair_weight),
        }
    }

    /// Kueue's `dominantResourceShare` of `node`, its usage at each flavor
    /// resource given by `usage`.
    fn drs_from(&self, node: Node, usage: impl Fn(FlavorResource) -> Amount) -> Drs {
        let mut drs = Drs {
            weight: self.node_weight(node),
            ratio: 0.0,
            borrowing: false,
        };
        let Some(parent) = self.quota.parent(node) else {
            return drs;
        };
        let mut borrowed = vec![Amount::ZERO; self.cluster.resources.len()];
        for fr in 0..self.quota.flavor_resources() {
            let fr = FlavorResource(fr as u32);
            let over = usage(fr) - self.quota.subtree_quota(node, fr);
            if over > Amount::ZERO {
                let (_, r) = self.cluster.split(fr);
                borrowed[r.index()] = borrowed[r.index()].saturating_add(over);
                drs.borrowing = true;
            }
        }
        let lendable = &self.lendable[parent.0 as usize];
        for (b, l) in borrowed.iter().zip(lendable) {
            if *b > Amount::ZERO && *l > Amount::ZERO {
                let ratio = b.milli() as f64 * 1000.0 / l.milli() as f64;
                drs.ratio = drs.ratio.max(ratio);
            }
        }
        drs
    }

    /// The node's share as the quota tree stands.
    pub(super) fn drs(&self, node: Node) -> Drs {
        self.drs_from(node, |fr| self.quota.node_usage(node, fr))
    }

    /// The ClusterQueue's share if it also used `extra`.
    pub(super) fn drs_with(&self, cq: ClusterQueueId, extra: &[(FlavorResource, Amount)]) -> Drs {
        self.drs_from(QuotaTree::cq_node(cq), |fr| {
            let add: Amount = extra
                .iter()
                .filter(|(f, _)| *f == fr)
                .map(|(_, a)| *a)
                .sum();
            self.quota.usage(cq, fr) + add
        })
    }

    /// The ClusterQueue's weighted share if it also used `extra` (0
    /// outside a cohort), what status, metrics and the fair-share hook show.
    pub(super) fn share(&self, cq: ClusterQueueId, extra: &[(FlavorResource, Amount)]) -> f64 {
        self.drs_with(cq, extra).weighted()
    }

    /// Kueue's fair-sharing tournament over the heads of one cohort tree
    /// (each of a different ClusterQueue of it): every cohort, from the
    /// leaves up, nominates the best of its children's nominees, comparing
    /// each by its child on the path to them — one that would not borrow
    /// on what it asks for first, then the lower share after admitting it
    /// (Kueue's `FairSharingPrioritizeNonBorrowing` and DRS), then higher
    /// priority, earlier queue time, input order. Returns the index of the
    /// root's nominee. Leaves the quota as it found it.
    pub(super) fn tournament(&mut self, contenders: &[Contender<'_>]) -> usize {
        // Each contender's standing at every cohort on its path, computed with its usage added.
        let mut standings: Vec<Vec<(Node, Standing)>> = Vec::with_capacity(contenders.len());
        // All in one tree: one version to put back.
        let version = contenders.first().map(|c| (c.cq, self.quota.version(c.cq)));
        for c in contenders {
            for &(fr, amount) in c.usage {
                self.quota.add_usage(c.cq, fr, amount);
            }
            let mut path = Vec::new();
            let mut node = QuotaTree::cq_node(c.cq);
            while let Some(parent) = self.quota.parent(node) {
                let borrowing_on = c.usage.iter().any(|&(fr, amount)| {
                    amount > Amount::ZERO
                        && self.quota.node_usage(node, fr) > self.quota.subtree_quota(node, fr)
                });
                path.push((parent, (borrowing_on, self.drs(node))));
                node = parent;
            }
            for &(fr, amount) in c.usage {
                self.quota.add_usage(c.cq, fr, -amount);
            }
            standings.push(path);
        }
        // Every trial charge is undone: the tree is as it was.
        if let Some((cq, version)) = version {
            self.quota.restore_version(cq, version);
        }
        let Some(root) = standings.first().and_then(|p| p.last()).map(|(n, _)| *n) else {
            return 0;
        };
        let standing = |i: usize, at: Node| {
            standings[i]
                .iter()
                .find(|(n, _)| *n == at)
                .map_or((false, Drs::NEGATIVE), |(_, s)| *s)
        };
        let better = |a: usize, b: usize, at: Node| {
            let ((a_borrows, a_drs), (b_borrows, b_drs)) = (standing(a, at), standing(b, at));
            if a_borrows != b_borrows {
                return !a_borrows;
            }
            match a_drs.compare(&b_drs) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => {
                    let (x, y) = (&contenders[a], &contenders[b]);
                    (Reverse(x.priority), x.queue_time, x.seq)
                        < (Reverse(y.priority), y.queue_time, y.seq)
                }
            }
        };
        self.nominee(root, contenders, &better).unwrap_or(0)
    }

    /// The best contender under `cohort`, by `better` at `cohort`.
    fn nominee(
        &self,
        cohort: Node,
        contenders: &[Contender<'_>],
        better: &dyn Fn(usize, usize, Node) -> bool,
    ) -> Option<usize> {
        let mut best: Option<usize> = None;
        for &child in self.quota.children(cohort) {
            let nominee = match self.quota.node_cq(child) {
                Some(cq) => contenders.iter().position(|c| c.cq == cq),
                None => self.nominee(child, contenders, better),
            };
            if let Some(n) = nominee {
                best = match best {
                    Some(b) if !better(n, b, cohort) => Some(b),
                    _ => Some(n),
                };
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::cluster::tests::build;
    use crate::model::cluster::FlavorId;

    /// `cq` (nominal NOMINAL) in `child` (weight 2, own quota CHILD) under
    /// `root` (ROOT GPUs), `cq` using 10 GPUs: the shares of Kueue's
    /// pkg/cache/scheduler/fair_sharing_test.go, TestDominantResourceShare.
    fn shares(nominal: &str, child: &str, root: &str) -> (f64, f64, f64) {
        let yaml = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: root}
spec:
  resourceGroups:
  - coveredResources: [example.com/gpu]
    flavors: [{name: default, resources: [{name: example.com/gpu, nominalQuota: ROOT}]}]
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: child}
spec:
  parent: root
  CHILD
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohort: child
  resourceGroups:
  - coveredResources: [example.com/gpu]
    flavors: [{name: default, resources: [{name: example.com/gpu, nominalQuota: NOMINAL}]}]
"#
        .replace("ROOT", root)
        .replace("CHILD", child)
        .replace("NOMINAL", nominal);
        let cluster = Arc::new(build(&yaml));
        let gpu = cluster.resource_id("example.com/gpu").unwrap();
        let fr = cluster.flavor_resource(FlavorId(0), gpu);
        let mut s = Scheduler::new(cluster.clone(), &[]);
        s.quota
            .add_usage(ClusterQueueId(0), fr, Amount::from_units(10));
        let cq = QuotaTree::cq_node(ClusterQueueId(0));
        let child = s.quota.parent(cq).unwrap();
        let root = s.quota.parent(child).unwrap();
        (
            s.drs(cq).weighted(),
            s.drs(child).weighted(),
            s.drs(root).weighted(),
        )
    }

    #[test]
    fn shares_at_every_level_as_kueue_computes_them() {
        // "cohort has resource share": 5 borrowed of 50 → 100; the child
        // cohort (weight 2) borrows the same 5 → 50; a root has none.
        let weighted = r#"fairSharing: {weight: "2"}"#;
        assert_eq!(shares("5", weighted, "45"), (100.0, 50.0, 0.0));
        // "resource share defined for resources only available at the root cohort".
        assert_eq!(shares("0", weighted, "50"), (200.0, 100.0, 0.0));
        // "resource share affected by borrowing limit": the child may take
        // only 10 from the root, so the queue's 10 are all it could borrow.
        let limited = r#"resourceGroups:
  - coveredResources: [example.com/gpu]
    flavors: [{name: default, resources: [{name: example.com/gpu, nominalQuota: 0, borrowingLimit: 10}]}]"#;
        assert_eq!(shares("0", limited, "50"), (1000.0, 200.0, 0.0));
    }

    #[test]
    fn weight_zero_borrowers_compare_by_unweighted_ratio_above_everyone_else() {
        let drs = |weight: f64, ratio: f64| Drs {
            weight,
            ratio,
            borrowing: ratio > 0.0,
        };
        // Kueue's CompareDRS.
        assert_eq!(drs(0.0, 10.0).compare(&drs(0.0, 20.0)), Ordering::Less);
        assert_eq!(drs(0.0, 10.0).compare(&drs(1.0, 900.0)), Ordering::Greater);
        assert_eq!(drs(1.0, 900.0).compare(&drs(0.0, 10.0)), Ordering::Less);
        assert_eq!(drs(0.0, 0.0).compare(&drs(1.0, 0.0)), Ordering::Equal);
        assert_eq!(drs(2.0, 300.0).compare(&drs(1.0, 150.0)), Ordering::Equal);
        assert_eq!(drs(0.0, 10.0).weighted(), f64::INFINITY);
        assert_eq!(Drs::NEGATIVE.compare(&drs(1.0, 0.0)), Ordering::Less);
    }
}
