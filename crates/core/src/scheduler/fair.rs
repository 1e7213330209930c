//! Fair sharing (docs/design.md §3, Kueue's hierarchical fair sharing): the
//! dominant resource share (DRS) of every node of a cohort tree — a
//! ClusterQueue or a cohort, weighted by its `fairSharing.weight` —, the
//! tournament that picks which head of a tree goes next, the adaptive
//! weights the fair-share hook sets every `adjustmentInterval`, and the
//! decayed GPU usage policies read. Fair-sharing preemption, which
//! compares these shares, is in `fair_preemption`.

use std::cmp::{Ordering, Reverse};

use crate::model::cluster::{Cluster, ClusterQueueId, FlavorResource};
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
fn lendable_by_node(cluster: &Cluster, quota: &QuotaTree) -> Vec<Vec<Amount>> {
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

/// Fair sharing's state: each ClusterQueue's current weight, whether fair
/// sharing orders its tree's heads, what each cohort could ever lend its
/// children (the DRS denominators), and when the fair-share hook next
/// adjusts the weights.
///
/// What it guarantees: a weight is always finite and non-negative (an
/// adjustment that is not, or of the wrong length, changes nothing); the
/// next adjustment is set exactly when some ClusterQueue has adaptive
/// weights, first due at 0, and each adjustment sets the next at least
/// 1 ms later; what cohorts can lend depends on quota only, fixed for a
/// configuration. What it never does: compute shares (it has no usage;
/// the scheduler's `drs` does) or decide when an adjustment matters.
#[derive(Debug)]
pub(super) struct FairSharing {
    /// Per ClusterQueue: its weight now (the fair-share hook may change it).
    weights: Vec<f64>,
    /// Per ClusterQueue: does fair sharing decide among its tree's heads?
    enabled: Vec<bool>,
    /// Per quota-tree node, per resource: what its children could ever borrow from it.
    lendable: Vec<Vec<Amount>>,
    /// The shortest `adjustmentInterval` of the ClusterQueues with adaptive weights.
    interval: Option<Millis>,
    /// When the weights are next adjusted.
    next_adjust: Option<Millis>,
}

impl FairSharing {
    /// Fair sharing as `cluster` configures it, over `quota`.
    pub fn new(cluster: &Cluster, quota: &QuotaTree) -> FairSharing {
        let interval = cluster
            .cluster_queues
            .iter()
            .filter_map(|cq| cq.adaptive_interval)
            .min();
        FairSharing {
            weights: cluster
                .cluster_queues
                .iter()
                .map(|cq| cq.fair_weight)
                .collect(),
            enabled: (0..cluster.cluster_queues.len())
                .map(|i| cluster.fair_sharing_for(ClusterQueueId(i as u32)))
                .collect(),
            lendable: lendable_by_node(cluster, quota),
            interval,
            next_adjust: interval.map(|_| Millis::ZERO),
        }
    }

    /// Every ClusterQueue's weight now.
    #[inline]
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// `cq`'s weight now.
    #[inline]
    pub fn weight(&self, cq: ClusterQueueId) -> f64 {
        self.weights[cq.index()]
    }

    /// Whether fair sharing decides among the heads of `cq`'s tree.
    #[inline]
    pub fn enabled(&self, cq: ClusterQueueId) -> bool {
        self.enabled[cq.index()]
    }

    /// Per resource: what the children of quota-tree node `parent` could
    /// ever borrow from it.
    #[inline]
    pub fn lendable(&self, parent: Node) -> &[Amount] {
        &self.lendable[parent.0 as usize]
    }

    /// When the weights are next adjusted, if any ClusterQueue adapts them.
    #[inline]
    pub fn next_adjust(&self) -> Option<Millis> {
        self.next_adjust
    }

    /// Whether an adjustment is due at `now`.
    #[inline]
    pub fn adjust_due(&self, now: Millis) -> bool {
        self.next_adjust.is_some_and(|t| t <= now)
    }

    /// Takes the weights the fair-share hook returned at `now`, one per
    /// ClusterQueue (any other length: none), each only if finite and
    /// non-negative; sets the next adjustment. How many weights changed.
    pub fn adjust(&mut self, weights: Vec<f64>, now: Millis) -> u64 {
        let mut changed = 0;
        if weights.len() == self.weights.len() {
            for (i, w) in weights.into_iter().enumerate() {
                if w.is_finite() && w >= 0.0 && w != self.weights[i] {
                    self.weights[i] = w;
                    changed += 1;
                }
            }
        }
        self.next_adjust = self.interval.map(|i| now.saturating_add(i.max(Millis(1))));
        changed
    }

    /// After a reconfiguration: if weights adapt here, the next adjustment
    /// is when it was to be under `old`, or at once (`old_now`) if nothing
    /// adapted there.
    pub fn carry_over(&mut self, old: &FairSharing, old_now: Millis) {
        if self.next_adjust.is_some() {
            self.next_adjust = Some(old.next_adjust.unwrap_or(old_now));
        }
    }
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
            state: self.hook_state(),
            shares: &shares,
            now,
        };
        let weights = hooks.fair_share(&request);
        // Shares and so fair preemption depend on the weights.
        self.epoch += self.fair.adjust(weights, now);
    }

    /// The weight of a node: a ClusterQueue's current fair-sharing weight
    /// (the fair-share hook may change it), a cohort's `fairSharing.weight`.
    fn node_weight(&self, node: Node) -> f64 {
        match self.quota.node_cq(node) {
            Some(cq) => self.fair.weight(cq),
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
        let lendable = self.fair.lendable(parent);
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

    /// `fast` (weight 2, adaptive every 5m) and `slow` (adaptive every
    /// 1m) in cohort `c`; `plain` on its own, neither fair nor adaptive.
    const ADAPTIVE: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: fast}
spec:
  cohort: c
  fairSharing: {weight: "2"}
  scheduling:
    algorithm: fair-sharing
    adaptiveWeights: {enabled: true, adjustmentInterval: 5m}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: slow}
spec:
  cohort: c
  scheduling:
    algorithm: fair-sharing
    adaptiveWeights: {enabled: true, adjustmentInterval: 1m}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: plain}
"#;

    fn fair_sharing(yaml: &str) -> FairSharing {
        let cluster = build(yaml);
        FairSharing::new(&cluster, &QuotaTree::new(&cluster))
    }

    #[test]
    fn weights_stay_finite_and_non_negative() {
        let mut fair = fair_sharing(ADAPTIVE);
        assert_eq!(fair.weights(), &[2.0, 1.0, 1.0]);
        assert!(fair.enabled(ClusterQueueId(0)) && fair.enabled(ClusterQueueId(1)));
        assert!(!fair.enabled(ClusterQueueId(2)));
        let now = Millis::from_secs(10);
        // One weight per ClusterQueue, or none taken.
        assert_eq!(fair.adjust(vec![3.0], now), 0);
        assert_eq!(fair.weights(), &[2.0, 1.0, 1.0]);
        assert_eq!(fair.adjust(vec![f64::NAN, -1.0, f64::INFINITY], now), 0);
        assert_eq!(fair.weights(), &[2.0, 1.0, 1.0]);
        // Only those that change count.
        assert_eq!(fair.adjust(vec![2.0, 0.0, 4.5], now), 2);
        assert_eq!(fair.weights(), &[2.0, 0.0, 4.5]);
        assert_eq!(fair.weight(ClusterQueueId(2)), 4.5);
    }

    #[test]
    fn the_next_adjustment_is_set_exactly_when_weights_adapt() {
        let mut fair = fair_sharing(ADAPTIVE);
        // First due at once, then every shortest interval after each adjustment.
        assert_eq!(fair.next_adjust(), Some(Millis::ZERO));
        assert!(fair.adjust_due(Millis::ZERO));
        fair.adjust(Vec::new(), Millis::from_secs(30));
        assert_eq!(fair.next_adjust(), Some(Millis::from_secs(90)));
        assert!(!fair.adjust_due(Millis::from_secs(89)));
        assert!(fair.adjust_due(Millis::from_secs(90)));

        let mut fixed = fair_sharing(&ADAPTIVE.replace("enabled: true", "enabled: false"));
        assert_eq!(fixed.next_adjust(), None);
        fixed.adjust(Vec::new(), Millis::from_secs(30));
        assert_eq!(fixed.next_adjust(), None);
        fixed.carry_over(&fair, Millis::from_secs(40));
        assert_eq!(fixed.next_adjust(), None);

        // Across a reconfiguration: when it was to be, or at once.
        let mut next = fair_sharing(ADAPTIVE);
        next.carry_over(&fair, Millis::from_secs(40));
        assert_eq!(next.next_adjust(), Some(Millis::from_secs(90)));
        next.carry_over(&fixed, Millis::from_secs(40));
        assert_eq!(next.next_adjust(), Some(Millis::from_secs(40)));
    }

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
