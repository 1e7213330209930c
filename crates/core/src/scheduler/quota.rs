//! Quota accounting over the cohort tree: nominal quota, borrowing and
//! lending limits, hierarchical cohorts. Kueue's model: each node (a
//! ClusterQueue or a cohort) keeps the part of its quota it does not lend
//! (`guaranteed`) and stores the rest in its parent; usage above the
//! guaranteed part is usage of the parent. Pure data; owned by the scheduler.

use crate::model::cluster::{Cluster, ClusterQueueId, CohortId, FlavorResource, Quota};
use crate::model::Amount;

/// A node of the tree: ClusterQueues first (`0..cqs`), then cohorts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node(pub u32);

#[derive(Clone, Debug)]
struct NodeQuota {
    parent: Option<Node>,
    /// Per FlavorResource: the node's subtree quota.
    subtree: Vec<Amount>,
    /// Per FlavorResource: the part not lent to the parent.
    guaranteed: Vec<Amount>,
    /// Per FlavorResource: most it may take from the parent beyond what it stored there.
    borrowing_limit: Vec<Option<Amount>>,
    /// Per FlavorResource: current usage (for a cohort: its children's usage above their guaranteed part).
    usage: Vec<Amount>,
}

/// Usage and limits for every ClusterQueue and cohort.
#[derive(Clone, Debug)]
pub struct QuotaTree {
    nodes: Vec<NodeQuota>,
    /// Per node: its height (a ClusterQueue 0; a cohort one more than its
    /// highest child cohort, at least 1 when it has members).
    heights: Vec<u32>,
    /// Per node: the nodes whose parent it is (ClusterQueues and cohorts), in index order.
    children: Vec<Vec<Node>>,
    cluster_queues: usize,
    frs: usize,
    /// Per node: the root of its tree.
    roots: Vec<Node>,
    /// Per root node: the version of its tree's usage, changed by every
    /// [`QuotaTree::add_usage`] to a value the tree never had before (see
    /// [`QuotaTree::version`]).
    versions: Vec<u64>,
    /// The last version given out, to any tree.
    last_version: u64,
}

impl QuotaTree {
    /// The quota tree of `cluster`, with no usage.
    pub fn new(cluster: &Cluster) -> QuotaTree {
        let frs = cluster.flavor_resource_count();
        let cqs = cluster.cluster_queues.len();
        let mut nodes: Vec<NodeQuota> = Vec::with_capacity(cqs + cluster.cohorts.len());
        let empty = |parent| NodeQuota {
            parent,
            subtree: vec![Amount::ZERO; frs],
            guaranteed: vec![Amount::ZERO; frs],
            borrowing_limit: vec![None; frs],
            usage: vec![Amount::ZERO; frs],
        };
        let cohort_node = |c: CohortId| Node((cqs + c.index()) as u32);
        for cq in &cluster.cluster_queues {
            nodes.push(empty(cq.cohort.map(cohort_node)));
        }
        for cohort in &cluster.cohorts {
            nodes.push(empty(cohort.parent.map(cohort_node)));
        }
        let heights = vec![0; nodes.len()];
        let mut children = vec![Vec::new(); nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            if let Some(parent) = n.parent {
                children[parent.0 as usize].push(Node(i as u32));
            }
        }
        let roots = (0..nodes.len())
            .map(|i| {
                let mut node = Node(i as u32);
                while let Some(parent) = nodes[node.0 as usize].parent {
                    node = parent;
                }
                node
            })
            .collect();
        let versions = vec![0; nodes.len()];
        let mut tree = QuotaTree {
            nodes,
            heights,
            children,
            cluster_queues: cqs,
            frs,
            roots,
            versions,
            last_version: 0,
        };
        for (i, cq) in cluster.cluster_queues.iter().enumerate() {
            tree.set_own_quota(Node(i as u32), &cq.quotas);
        }
        for (i, cohort) in cluster.cohorts.iter().enumerate() {
            tree.set_own_quota(Node((cqs + i) as u32), &cohort.quotas);
        }
        // Cohorts' subtree quota: own quota plus what children lend, bottom-up.
        // Depth-first from every ClusterQueue and cohort: add its lendable part to each ancestor
        // until a lending limit caps it.
        let order = tree.bottom_up_order();
        for &node in &order {
            if let Some(parent) = tree.nodes[node.0 as usize].parent {
                let height = tree.heights[node.0 as usize] + 1;
                let slot = &mut tree.heights[parent.0 as usize];
                *slot = (*slot).max(height);
            }
        }
        for node in order {
            let lendable: Vec<Amount> = (0..frs).map(|fr| tree.lendable(node, fr)).collect();
            if let Some(parent) = tree.nodes[node.0 as usize].parent {
                for (fr, amount) in lendable.into_iter().enumerate() {
                    tree.nodes[parent.0 as usize].subtree[fr] += amount;
                }
            }
        }
        // Guaranteed parts, now that subtree quotas are known.
        for node in 0..tree.nodes.len() {
            for fr in 0..frs {
                let lendable = tree.lendable(Node(node as u32), fr);
                let n = &mut tree.nodes[node];
                n.guaranteed[fr] = if n.parent.is_some() {
                    n.subtree[fr] - lendable
                } else {
                    n.subtree[fr]
                };
            }
        }
        tree
    }

    fn set_own_quota(&mut self, node: Node, quotas: &[Option<Quota>]) {
        let n = &mut self.nodes[node.0 as usize];
        for (fr, quota) in quotas.iter().enumerate() {
            if let Some(q) = quota {
                n.subtree[fr] = q.nominal;
                n.borrowing_limit[fr] = q.borrowing_limit;
                // Stash the lending limit in `guaranteed` until subtree quotas are final.
                n.guaranteed[fr] = q.lending_limit.unwrap_or(Amount::MAX);
            } else {
                n.guaranteed[fr] = Amount::MAX;
            }
        }
    }

    /// During construction `guaranteed` holds the lending limit.
    fn lendable(&self, node: Node, fr: usize) -> Amount {
        let n = &self.nodes[node.0 as usize];
        n.subtree[fr].min(n.guaranteed[fr])
    }

    /// Nodes ordered so that every child comes before its parent.
    fn bottom_up_order(&self) -> Vec<Node> {
        let depth = |mut node: Node| {
            let mut d = 0usize;
            while let Some(p) = self.nodes[node.0 as usize].parent {
                d += 1;
                node = p;
            }
            d
        };
        let mut order: Vec<(usize, Node)> = (0..self.nodes.len())
            .map(|i| (depth(Node(i as u32)), Node(i as u32)))
            .collect();
        order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1 .0.cmp(&b.1 .0)));
        order.into_iter().map(|(_, n)| n).collect()
    }

    /// The tree node of a cohort.
    pub fn cohort_node(&self, cohort: CohortId) -> Node {
        Node((self.cluster_queues + cohort.index()) as u32)
    }
    /// Flavor-resource pairs in the configuration.
    pub fn flavor_resources(&self) -> usize {
        self.frs
    }

    /// What the ClusterQueue uses of a flavor's resource.
    pub fn usage(&self, cq: ClusterQueueId, fr: FlavorResource) -> Amount {
        self.nodes[cq.index()].usage[fr.index()]
    }
    /// What the cohort uses of a flavor's resource.
    pub fn cohort_usage(&self, cohort: CohortId, fr: FlavorResource) -> Amount {
        self.nodes[self.cohort_node(cohort).0 as usize].usage[fr.index()]
    }
    /// The ClusterQueue's nominal quota (its subtree quota).
    pub fn nominal(&self, cq: ClusterQueueId, fr: FlavorResource) -> Amount {
        self.nodes[cq.index()].subtree[fr.index()]
    }
    /// Amount used above nominal quota.
    pub fn borrowed(&self, cq: ClusterQueueId, fr: FlavorResource) -> Amount {
        self.usage(cq, fr).positive_sub(self.nominal(cq, fr))
    }

    /// What the ClusterQueue can still take at `fr` now, borrowing included.
    pub fn available(&self, cq: ClusterQueueId, fr: FlavorResource) -> Amount {
        self.available_at(Node(cq.0), fr.index()).max(Amount::ZERO)
    }

    fn available_at(&self, node: Node, fr: usize) -> Amount {
        let n = &self.nodes[node.0 as usize];
        match n.parent {
            None => n.subtree[fr] - n.usage[fr],
            Some(parent) => {
                let local = n.guaranteed[fr].positive_sub(n.usage[fr]);
                let mut from_parent = self.available_at(parent, fr).max(Amount::ZERO);
                if let Some(limit) = n.borrowing_limit[fr] {
                    let stored_in_parent = n.subtree[fr] - n.guaranteed[fr];
                    let used_in_parent = n.usage[fr].positive_sub(n.guaranteed[fr]);
                    from_parent = from_parent.min(stored_in_parent - used_in_parent + limit);
                }
                local + from_parent.max(Amount::ZERO)
            }
        }
    }

    /// Kueue's borrowing level: the height of the lowest subtree (the
    /// ClusterQueue alone is height 0, its cohort 1, …) whose quota holds
    /// `val` more of `fr` beyond what is used now — the whole tree's height
    /// when none does — and whether that subtree is smaller than the whole
    /// tree (a ClusterQueue in a cohort fitting alone counts as smaller).
    pub(crate) fn lowest_fitting_subtree(
        &self,
        cq: ClusterQueueId,
        fr: FlavorResource,
        val: Amount,
    ) -> (u32, bool) {
        let fr = fr.index();
        let node = &self.nodes[cq.index()];
        let borrowing_with = |n: &NodeQuota, val: Amount| n.subtree[fr] < n.usage[fr] + val;
        let local_available = |n: &NodeQuota| n.guaranteed[fr].positive_sub(n.usage[fr]);
        let Some(mut parent) = node.parent else {
            return (0, false);
        };
        if !borrowing_with(node, val) {
            return (0, true);
        }
        let mut remaining = val - local_available(node);
        loop {
            let p = &self.nodes[parent.0 as usize];
            if !borrowing_with(p, remaining) {
                return (self.heights[parent.0 as usize], p.parent.is_some());
            }
            match p.parent {
                Some(next) => {
                    remaining -= local_available(p);
                    parent = next;
                }
                None => return (self.heights[parent.0 as usize], false),
            }
        }
    }

    /// The ClusterQueue's borrowing limit at `fr` (`None`: unlimited).
    pub fn borrowing_limit(&self, cq: ClusterQueueId, fr: FlavorResource) -> Option<Amount> {
        self.nodes[cq.0 as usize].borrowing_limit[fr.index()]
    }

    /// The node's parent cohort.
    pub fn parent(&self, node: Node) -> Option<Node> {
        self.nodes[node.0 as usize].parent
    }

    /// The ClusterQueue's node.
    pub(crate) fn cq_node(cq: ClusterQueueId) -> Node {
        Node(cq.0)
    }

    /// The ClusterQueue a node is, if it is one.
    pub(crate) fn node_cq(&self, node: Node) -> Option<ClusterQueueId> {
        ((node.0 as usize) < self.cluster_queues).then_some(ClusterQueueId(node.0))
    }

    /// The cohort a node is, if it is one.
    pub(crate) fn node_cohort(&self, node: Node) -> Option<CohortId> {
        (node.0 as usize)
            .checked_sub(self.cluster_queues)
            .map(|i| CohortId(i as u32))
    }

    /// Every node of the tree (ClusterQueues, then cohorts).
    pub fn nodes(&self) -> impl Iterator<Item = Node> {
        (0..self.nodes.len() as u32).map(Node)
    }

    /// The nodes whose parent is `node` (ClusterQueues and cohorts), in index order.
    pub fn children(&self, node: Node) -> &[Node] {
        &self.children[node.0 as usize]
    }

    /// Kueue's `IsWithinNominalInResources`: the node uses no more than its
    /// subtree quota at each of `frs`.
    pub(crate) fn within_nominal(&self, node: Node, frs: &[FlavorResource]) -> bool {
        let n = &self.nodes[node.0 as usize];
        frs.iter()
            .all(|fr| n.usage[fr.index()] <= n.subtree[fr.index()])
    }

    /// Kueue's `QuantitiesFitInQuota`: whether `requests` more fit in the
    /// node's subtree quota, and what of them its local (unlent) quota
    /// leaves for its parent.
    pub(crate) fn fits_in_quota(
        &self,
        node: Node,
        requests: &[(FlavorResource, Amount)],
    ) -> (bool, Vec<(FlavorResource, Amount)>) {
        let n = &self.nodes[node.0 as usize];
        let mut fits = true;
        let mut remaining = Vec::with_capacity(requests.len());
        for &(fr, v) in requests {
            let i = fr.index();
            if n.subtree[i] < n.usage[i] + v {
                fits = false;
            }
            let local = if n.parent.is_some() {
                n.guaranteed[i].positive_sub(n.usage[i])
            } else {
                Amount::ZERO
            };
            remaining.push((fr, v.positive_sub(local)));
        }
        (fits, remaining)
    }

    /// A node's usage at `fr` (for a cohort: what its children use beyond
    /// their unlent quota).
    pub(crate) fn node_usage(&self, node: Node, fr: FlavorResource) -> Amount {
        self.nodes[node.0 as usize].usage[fr.index()]
    }

    /// A node's subtree quota at `fr` (a ClusterQueue's: its nominal quota).
    pub(crate) fn subtree_quota(&self, node: Node, fr: FlavorResource) -> Amount {
        self.nodes[node.0 as usize].subtree[fr.index()]
    }

    /// Kueue's `potentialAvailable`: the most the node could ever have at
    /// `fr`, everything else idle, borrowing limits respected.
    pub(crate) fn potential_of(&self, node: Node, fr: FlavorResource) -> Amount {
        self.potential_at(node, fr.index())
    }

    /// The most the ClusterQueue could ever have at `fr` (everything else idle).
    pub(crate) fn potential(&self, cq: ClusterQueueId, fr: FlavorResource) -> Amount {
        self.potential_at(Node(cq.0), fr.index())
    }

    fn potential_at(&self, node: Node, fr: usize) -> Amount {
        let n = &self.nodes[node.0 as usize];
        match n.parent {
            None => n.subtree[fr],
            Some(parent) => {
                let mut from_parent = self.potential_at(parent, fr);
                if let Some(limit) = n.borrowing_limit[fr] {
                    from_parent = from_parent.min(n.subtree[fr] - n.guaranteed[fr] + limit);
                }
                n.guaranteed[fr] + from_parent
            }
        }
    }

    /// The version of the usage of `cq`'s cohort tree: equal versions mean
    /// equal usage throughout the tree, so what was computed from it holds.
    /// Every change of usage gives the tree a version never seen before,
    /// unless a trial puts it back ([`QuotaTree::restore_version`]).
    pub fn version(&self, cq: ClusterQueueId) -> u64 {
        self.versions[self.roots[cq.index()].0 as usize]
    }

    /// Gives `cq`'s tree back `version`, read before trial changes of usage
    /// in that tree that have all been undone since: the usage is again
    /// what that version stood for.
    pub(crate) fn restore_version(&mut self, cq: ClusterQueueId, version: u64) {
        self.versions[self.roots[cq.index()].0 as usize] = version;
    }

    /// Adds `delta` (may be negative) to a ClusterQueue's usage and propagates
    /// what exceeds each node's guaranteed part up the tree.
    pub(crate) fn add_usage(&mut self, cq: ClusterQueueId, fr: FlavorResource, delta: Amount) {
        self.last_version += 1;
        self.versions[self.roots[cq.index()].0 as usize] = self.last_version;
        let mut node = Node(cq.0);
        let mut delta = delta;
        let fr = fr.index();
        loop {
            let n = &mut self.nodes[node.0 as usize];
            let old = n.usage[fr];
            let new = old + delta;
            n.usage[fr] = new;
            let Some(parent) = n.parent else { return };
            let old_above = old.positive_sub(n.guaranteed[fr]);
            let new_above = new.positive_sub(n.guaranteed[fr]);
            if old_above == new_above {
                return;
            }
            delta = new_above - old_above;
            node = parent;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cluster::ClusterBuilder;

    fn tree(yaml: &str) -> (Cluster, QuotaTree) {
        let mut builder = ClusterBuilder::new();
        for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
            let value = serde_yaml_ng::Value::deserialize(doc).unwrap();
            match value["kind"].as_str().unwrap() {
                "ResourceFlavor" => {
                    builder.flavor("test", serde_yaml_ng::from_value(value).unwrap())
                }
                "ClusterQueue" => {
                    builder.cluster_queue("test", serde_yaml_ng::from_value(value).unwrap())
                }
                "Cohort" => builder.cohort("test", serde_yaml_ng::from_value(value).unwrap()),
                other => panic!("{other}"),
            }
        }
        let cluster = builder.build().unwrap();
        let tree = QuotaTree::new(&cluster);
        (cluster, tree)
    }
    use serde::Deserialize;

    const TWO_QUEUES: &str = r#"
kind: ResourceFlavor
metadata: {name: a100}
spec: {}
---
kind: ClusterQueue
metadata: {name: ml}
spec:
  cohort: gpu
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 4}]
---
kind: ClusterQueue
metadata: {name: finance}
spec:
  cohort: gpu
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8, lendingLimit: 6}]
"#;

    fn gpus(n: i64) -> Amount {
        Amount::from_units(n)
    }

    #[test]
    fn borrowing_is_capped_by_limit_and_lending() {
        let (cluster, mut tree) = tree(TWO_QUEUES);
        let ml = cluster.cluster_queue_id("ml").unwrap();
        let finance = cluster.cluster_queue_id("finance").unwrap();
        let fr = cluster.flavor_resource(
            cluster.flavor_id("a100").unwrap(),
            cluster.resource_id("nvidia.com/gpu").unwrap(),
        );
        // ml: 8 own + min(borrowingLimit 4, finance lends 6) = 12.
        assert_eq!(tree.available(ml, fr), gpus(12));
        assert_eq!(tree.potential(ml, fr), gpus(12));
        // finance: 8 own + ml lends all 8 = 16.
        assert_eq!(tree.available(finance, fr), gpus(16));
        tree.add_usage(ml, fr, gpus(12));
        assert_eq!(tree.borrowed(ml, fr), gpus(4));
        assert_eq!(tree.available(ml, fr), gpus(0));
        // finance keeps its 2 guaranteed plus the 2 lent it does not need back yet.
        assert_eq!(tree.available(finance, fr), gpus(4));
        tree.add_usage(ml, fr, -gpus(12));
        assert_eq!(tree.available(finance, fr), gpus(16));
    }

    #[test]
    fn hierarchical_cohort_lends_its_own_quota() {
        let yaml = format!(
            "{TWO_QUEUES}\n---\nkind: Cohort\nmetadata: {{name: gpu}}\nspec:\n  parent: org\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: a100\n      resources: [{{name: nvidia.com/gpu, nominalQuota: 4}}]\n"
        );
        let (cluster, tree) = tree(&yaml);
        let finance = cluster.cluster_queue_id("finance").unwrap();
        let fr = cluster.flavor_resource(
            cluster.flavor_id("a100").unwrap(),
            cluster.resource_id("nvidia.com/gpu").unwrap(),
        );
        // 8 own + 8 lent by ml + 4 of the cohort's own quota.
        assert_eq!(tree.available(finance, fr), gpus(20));
    }

    #[test]
    fn borrowing_level_is_the_height_of_the_lowest_subtree_that_holds_it() {
        // org (8 own) > gpu (4 own) > ml (8, lends all), finance (8, lends 6).
        let yaml = format!(
            "{TWO_QUEUES}\n---\nkind: Cohort\nmetadata: {{name: gpu}}\nspec:\n  parent: org\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: a100\n      resources: [{{name: nvidia.com/gpu, nominalQuota: 4}}]\n---\nkind: Cohort\nmetadata: {{name: org}}\nspec:\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: a100\n      resources: [{{name: nvidia.com/gpu, nominalQuota: 8}}]\n"
        );
        let (cluster, mut tree) = tree(&yaml);
        let finance = cluster.cluster_queue_id("finance").unwrap();
        let fr = cluster.flavor_resource(
            cluster.flavor_id("a100").unwrap(),
            cluster.resource_id("nvidia.com/gpu").unwrap(),
        );
        // Within its 8: level 0, in a subtree smaller than the tree.
        assert_eq!(tree.lowest_fitting_subtree(finance, fr, gpus(8)), (0, true));
        // finance keeps 2 it does not lend; gpu holds 4 + 8 (ml lends) + 6
        // (finance lends) = 18 more.
        assert_eq!(
            tree.lowest_fitting_subtree(finance, fr, gpus(20)),
            (1, true)
        );
        // Beyond: org, the root, height 2, not smaller than the tree.
        assert_eq!(
            tree.lowest_fitting_subtree(finance, fr, gpus(21)),
            (2, false)
        );
        assert_eq!(
            tree.lowest_fitting_subtree(finance, fr, gpus(99)),
            (2, false)
        );
        // With 6 used by ml in gpu, 15 for finance reach the root.
        let ml = cluster.cluster_queue_id("ml").unwrap();
        tree.add_usage(ml, fr, gpus(6));
        assert_eq!(
            tree.lowest_fitting_subtree(finance, fr, gpus(14)),
            (1, true)
        );
        assert_eq!(
            tree.lowest_fitting_subtree(finance, fr, gpus(15)),
            (2, false)
        );
    }
}
