//! Cohort trees: which ClusterQueues share quota through a cohort (at any
//! depth), so what frees up in one may let another's workloads in. Fixed
//! for a configuration; built once by the scheduler, read by waking,
//! the cycle's per-tree bookkeeping and preemption.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::cluster::{Cluster, ClusterQueueId};

/// Per ClusterQueue: the ClusterQueues of its cohort tree and the tree's index.
///
/// What it guarantees: every ClusterQueue is in exactly one tree — its
/// root cohort's, or a tree of its own without a cohort; two ClusterQueues
/// have the same [`CohortTrees::tree_of`] exactly when each is among the
/// other's [`CohortTrees::members`]; members are listed in id order, and a
/// tree's list is shared, not copied per member. What it never does:
/// change after it is built (a new configuration builds new trees).
#[derive(Debug)]
pub(super) struct CohortTrees {
    /// Per ClusterQueue: the ClusterQueues of its cohort tree (itself alone without a cohort).
    members: Vec<Arc<[ClusterQueueId]>>,
    /// Per ClusterQueue: index of its tree.
    tree_of: Vec<usize>,
}

impl CohortTrees {
    /// The cohort trees of `cluster`'s ClusterQueues.
    pub fn new(cluster: &Cluster) -> CohortTrees {
        let cqs = cluster.cluster_queues.len();
        let mut trees: BTreeMap<Option<usize>, Vec<ClusterQueueId>> = BTreeMap::new();
        let mut tree_of = vec![0; cqs];
        for (i, cq) in cluster.cluster_queues.iter().enumerate() {
            let key = cq.cohort.map(|c| cluster.root_cohort(c).index());
            let key = key.map_or(Some(usize::MAX - i), Some);
            trees.entry(key).or_default().push(ClusterQueueId(i as u32));
        }
        let mut members = vec![Arc::<[ClusterQueueId]>::from(Vec::new()); cqs];
        for (t, tree) in trees.into_values().enumerate() {
            let shared: Arc<[ClusterQueueId]> = tree.into();
            for &m in shared.iter() {
                members[m.index()] = shared.clone();
                tree_of[m.index()] = t;
            }
        }
        CohortTrees { members, tree_of }
    }

    /// The ClusterQueues of `cq`'s cohort tree, `cq` among them, in id order.
    #[inline]
    pub fn members(&self, cq: ClusterQueueId) -> &Arc<[ClusterQueueId]> {
        &self.members[cq.index()]
    }

    /// The index of `cq`'s cohort tree.
    #[inline]
    pub fn tree_of(&self, cq: ClusterQueueId) -> usize {
        self.tree_of[cq.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cluster::tests::build;

    /// `a` and `b` in cohort `child` under `root`, `c` directly under
    /// `root`, `solo` without a cohort, `d` in cohort `other`.
    const CLUSTER: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: root}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: child}
spec: {parent: root}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: a}
spec: {cohort: child}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: solo}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: b}
spec: {cohort: child}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: d}
spec: {cohort: other}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: c}
spec: {cohort: root}
"#;

    #[test]
    fn every_cluster_queue_is_in_exactly_one_tree_shared_by_its_members() {
        let cluster = build(CLUSTER);
        let trees = CohortTrees::new(&cluster);
        let id = |name: &str| cluster.cluster_queue_id(name).unwrap();
        let names = |cq: &str| -> Vec<String> {
            trees
                .members(id(cq))
                .iter()
                .map(|&m| cluster.cluster_queue(m).name.clone())
                .collect()
        };
        assert_eq!(names("a"), vec!["a", "b", "c"]);
        assert_eq!(names("solo"), vec!["solo"]);
        assert_eq!(names("d"), vec!["d"]);
        assert!(Arc::ptr_eq(trees.members(id("a")), trees.members(id("c"))));
        let all: Vec<ClusterQueueId> = (0..cluster.cluster_queues.len())
            .map(|i| ClusterQueueId(i as u32))
            .collect();
        for &x in &all {
            assert!(trees.members(x).contains(&x));
            assert!(trees.members(x).windows(2).all(|w| w[0] < w[1]));
            for &y in &all {
                assert_eq!(
                    trees.tree_of(x) == trees.tree_of(y),
                    trees.members(x).contains(&y),
                    "{x:?} {y:?}"
                );
            }
        }
    }
}
