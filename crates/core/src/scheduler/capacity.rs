//! Physical capacity: the nodes of each flavor's node pools and the pods
//! placed on them. A flavor without pools is unlimited (Kueue's model). A
//! workload fits only if every pod finds room on one node; pods are placed
//! best-fit (the node left with the least room), so fragmentation is real.
//! Pure data owned by the scheduler; the driver changes node counts.

use std::collections::BTreeMap;

use crate::model::cluster::{FlavorId, ResourceId};
use crate::model::Amount;

use super::workload::Placement;

/// A node pool as configured.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSpec {
    pub flavor: FlavorId,
    pub nodes: u32,
    /// Per node; resources not listed are not limited by the node.
    pub allocatable: Vec<(ResourceId, Amount)>,
    pub min_nodes: u32,
    pub max_nodes: u32,
}

#[derive(Clone, Debug)]
struct NodeState {
    pool: usize,
    /// Indexed by ResourceId; `Amount::MAX` where the node sets no limit.
    free: Vec<Amount>,
    ready: bool,
    pods: u32,
}

#[derive(Clone, Debug, Default)]
struct FlavorNodes {
    pools: Vec<PoolSpec>,
    nodes: Vec<NodeState>,
}

/// All node pools, by flavor.
#[derive(Clone, Debug, Default)]
pub struct Capacity {
    resources: usize,
    flavors: Vec<FlavorNodes>,
    /// The version of every node's free space and readiness (see
    /// [`Capacity::version`]).
    version: u64,
    /// The last version given out.
    last_version: u64,
}

/// Tentative copies of node free space, for placing a workload's pods before committing.
#[derive(Clone, Default)]
pub struct Scratch {
    free: BTreeMap<FlavorId, Vec<Vec<Amount>>>,
}

impl Capacity {
    pub fn new(flavors: usize, resources: usize, pools: &[PoolSpec]) -> Capacity {
        let mut capacity = Capacity {
            resources,
            flavors: vec![FlavorNodes::default(); flavors],
            version: 0,
            last_version: 0,
        };
        for pool in pools {
            let free = capacity.template(pool);
            let fl = &mut capacity.flavors[pool.flavor.index()];
            fl.pools.push(pool.clone());
            let index = fl.pools.len() - 1;
            // Straight onto the end: no node is idle-and-removed yet, and
            // looking for one per node made building a large pool quadratic.
            fl.nodes.extend((0..pool.nodes).map(|_| NodeState {
                pool: index,
                free: free.clone(),
                ready: true,
                pods: 0,
            }));
        }
        capacity
    }

    fn template(&self, pool: &PoolSpec) -> Vec<Amount> {
        let mut free = vec![Amount::MAX; self.resources];
        for &(r, a) in &pool.allocatable {
            free[r.index()] = a;
        }
        free
    }

    /// The version of the nodes' state: equal versions mean the same nodes
    /// ready with the same free space, so a placement found holds. Every
    /// change gives a version never seen before, unless a trial puts it
    /// back ([`Capacity::restore_version`]).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Gives back `version`, read before trial commits and releases that
    /// have all been undone since.
    pub fn restore_version(&mut self, version: u64) {
        self.version = version;
    }

    fn changed(&mut self) {
        self.last_version += 1;
        self.version = self.last_version;
    }

    fn add_node_to(&mut self, flavor: FlavorId, pool: usize) {
        self.changed();
        let free = self.template(&self.flavors[flavor.index()].pools[pool]);
        let fl = &mut self.flavors[flavor.index()];
        if let Some(node) = fl.nodes.iter_mut().find(|n| !n.ready && n.pool == pool) {
            node.free = free;
            node.ready = true;
            node.pods = 0;
        } else {
            fl.nodes.push(NodeState {
                pool,
                free,
                ready: true,
                pods: 0,
            });
        }
    }

    pub fn has_pools(&self, flavor: FlavorId) -> bool {
        !self.flavors[flavor.index()].pools.is_empty()
    }

    /// Flavors with node pools.
    pub fn pooled_flavors(&self) -> impl Iterator<Item = FlavorId> + '_ {
        self.flavors
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.pools.is_empty())
            .map(|(i, _)| FlavorId(i as u16))
    }

    pub fn ready_nodes(&self, flavor: FlavorId) -> u32 {
        self.flavors[flavor.index()]
            .nodes
            .iter()
            .filter(|n| n.ready)
            .count() as u32
    }

    pub fn node_bounds(&self, flavor: FlavorId) -> (u32, u32) {
        let pools = &self.flavors[flavor.index()].pools;
        (
            pools.iter().map(|p| p.min_nodes).sum(),
            pools.iter().map(|p| p.max_nodes).sum(),
        )
    }

    /// The pool node `node` of `flavor` belongs to, and whether it is ready; `None` past the last node.
    pub fn node(&self, flavor: FlavorId, node: u32) -> Option<(&PoolSpec, bool)> {
        let fl = &self.flavors[flavor.index()];
        let state = fl.nodes.get(node as usize)?;
        Some((&fl.pools[state.pool], state.ready))
    }

    /// Adds one node to the first pool of `flavor` below its maximum.
    pub fn add_node(&mut self, flavor: FlavorId) -> bool {
        let fl = &self.flavors[flavor.index()];
        let pool = (0..fl.pools.len()).find(|&p| {
            fl.nodes.iter().filter(|n| n.ready && n.pool == p).count()
                < fl.pools[p].max_nodes as usize
        });
        match pool {
            Some(p) => {
                self.add_node_to(flavor, p);
                true
            }
            None => false,
        }
    }

    /// Removes one empty node (the last), keeping each pool at or above its minimum.
    pub fn remove_idle_node(&mut self, flavor: FlavorId) -> bool {
        let fl = &mut self.flavors[flavor.index()];
        let counts: Vec<usize> = (0..fl.pools.len())
            .map(|p| fl.nodes.iter().filter(|n| n.ready && n.pool == p).count())
            .collect();
        let candidate = fl.nodes.iter().rposition(|n| {
            n.ready && n.pods == 0 && counts[n.pool] > fl.pools[n.pool].min_nodes as usize
        });
        match candidate {
            Some(i) => {
                fl.nodes[i].ready = false;
                self.changed();
                true
            }
            None => false,
        }
    }

    /// The most pods with these requests the flavor's nodes could ever hold
    /// at once: every pool at its largest size, every node empty. An upper
    /// bound, so a pod set above it can never be placed. `u64::MAX` when
    /// nothing limits them (no node pools, or no request a node limits).
    pub fn pods_could_ever_fit(&self, flavor: FlavorId, per_pod: &[(ResourceId, Amount)]) -> u64 {
        let fl = &self.flavors[flavor.index()];
        if fl.pools.is_empty() {
            return u64::MAX;
        }
        fl.pools
            .iter()
            .map(|pool| {
                let free = self.template(pool);
                let per_node = per_pod
                    .iter()
                    .filter(|&&(r, a)| a.milli() > 0 && free[r.index()] != Amount::MAX)
                    .map(|&(r, a)| (free[r.index()].milli().max(0) / a.milli()) as u64)
                    .min()
                    .unwrap_or(u64::MAX);
                per_node.saturating_mul(pool.max_nodes.max(pool.nodes) as u64)
            })
            .fold(0, u64::saturating_add)
    }

    /// Places `pods` pods on the flavor's nodes in `scratch`; `None` if they don't all fit.
    pub fn place(
        &self,
        scratch: &mut Scratch,
        flavor: FlavorId,
        pods: u32,
        per_pod: &[(ResourceId, Amount)],
    ) -> Option<Vec<Placement>> {
        let fl = &self.flavors[flavor.index()];
        if fl.pools.is_empty() {
            return Some(Vec::new());
        }
        let free = scratch.free.entry(flavor).or_insert_with(|| {
            fl.nodes
                .iter()
                .map(|n| if n.ready { n.free.clone() } else { Vec::new() })
                .collect()
        });
        let mut placed: BTreeMap<u32, u32> = BTreeMap::new();
        for _ in 0..pods {
            let best = free
                .iter()
                .enumerate()
                .filter(|(_, f)| !f.is_empty() && fits(f, per_pod))
                .map(|(i, f)| {
                    (
                        leftover(f, per_pod, &fl.pools[fl.nodes[i].pool].allocatable),
                        i,
                    )
                })
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let (_, node) = best?;
            for &(r, a) in per_pod {
                if free[node][r.index()] != Amount::MAX {
                    free[node][r.index()] -= a;
                }
            }
            *placed.entry(node as u32).or_default() += 1;
        }
        Some(
            placed
                .into_iter()
                .map(|(node, count)| Placement {
                    flavor,
                    node,
                    per_pod: per_pod.to_vec(),
                    pods: count,
                })
                .collect(),
        )
    }

    /// Would `placements` fit where they say, on ready nodes with room now?
    pub fn has_room(&self, placements: &[Placement]) -> bool {
        let mut needed: BTreeMap<(FlavorId, u32), Vec<Amount>> = BTreeMap::new();
        for p in placements {
            let Some(node) = self
                .flavors
                .get(p.flavor.index())
                .and_then(|f| f.nodes.get(p.node as usize))
            else {
                return false;
            };
            if !node.ready {
                return false;
            }
            let need = needed
                .entry((p.flavor, p.node))
                .or_insert_with(|| vec![Amount::ZERO; self.resources]);
            for &(r, a) in &p.per_pod {
                match need.get_mut(r.index()) {
                    Some(n) => *n += a.saturating_mul(p.pods as i64),
                    None => return false,
                }
            }
        }
        needed.iter().all(|(&(flavor, node), need)| {
            let free = &self.flavors[flavor.index()].nodes[node as usize].free;
            need.iter()
                .zip(free)
                .all(|(n, f)| *f == Amount::MAX || n <= f)
        })
    }

    pub fn commit(&mut self, placements: &[Placement]) {
        self.changed();
        for p in placements {
            let node = &mut self.flavors[p.flavor.index()].nodes[p.node as usize];
            for &(r, a) in &p.per_pod {
                if node.free[r.index()] != Amount::MAX {
                    node.free[r.index()] -= a.saturating_mul(p.pods as i64);
                }
            }
            node.pods += p.pods;
        }
    }

    pub fn release(&mut self, placements: &[Placement]) {
        self.changed();
        for p in placements {
            let node = &mut self.flavors[p.flavor.index()].nodes[p.node as usize];
            for &(r, a) in &p.per_pod {
                if node.free[r.index()] != Amount::MAX {
                    node.free[r.index()] += a.saturating_mul(p.pods as i64);
                }
            }
            node.pods = node.pods.saturating_sub(p.pods);
        }
    }

    /// (used, total) of `resource` over the flavor's ready nodes; `None` if the nodes don't limit it.
    pub fn usage(&self, flavor: FlavorId, resource: ResourceId) -> Option<(Amount, Amount)> {
        let fl = &self.flavors[flavor.index()];
        let mut used = Amount::ZERO;
        let mut total = Amount::ZERO;
        for node in fl.nodes.iter().filter(|n| n.ready) {
            let cap = fl.pools[node.pool]
                .allocatable
                .iter()
                .find(|(r, _)| *r == resource)?
                .1;
            total += cap;
            used += cap - node.free[resource.index()];
        }
        Some((used, total))
    }

    /// Per-node allocatable of `resource` in the flavor's first pool that lists it.
    pub fn node_allocatable(&self, flavor: FlavorId, resource: ResourceId) -> Option<Amount> {
        self.flavors[flavor.index()].pools.iter().find_map(|p| {
            p.allocatable
                .iter()
                .find(|(r, _)| *r == resource)
                .map(|(_, a)| *a)
        })
    }
}

fn fits(free: &[Amount], per_pod: &[(ResourceId, Amount)]) -> bool {
    per_pod.iter().all(|&(r, a)| free[r.index()] >= a)
}

/// Room left on the node after the pod, normalised per resource and summed
/// over the resources the node limits: smaller is a tighter (better) fit.
fn leftover(
    free: &[Amount],
    per_pod: &[(ResourceId, Amount)],
    allocatable: &[(ResourceId, Amount)],
) -> f64 {
    allocatable
        .iter()
        .filter(|(_, cap)| !cap.is_zero())
        .map(|&(r, cap)| {
            let need = per_pod
                .iter()
                .find(|(pr, _)| *pr == r)
                .map_or(Amount::ZERO, |(_, a)| *a);
            (free[r.index()] - need).as_f64() / cap.as_f64()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: ResourceId = ResourceId(0);
    const CPU: ResourceId = ResourceId(1);

    fn pool(nodes: u32) -> PoolSpec {
        PoolSpec {
            flavor: FlavorId(0),
            nodes,
            allocatable: vec![(GPU, Amount::from_units(8)), (CPU, Amount::from_units(96))],
            min_nodes: 0,
            max_nodes: 4,
        }
    }

    #[test]
    fn every_pod_needs_one_node() {
        let capacity = Capacity::new(1, 2, &[pool(2)]);
        let mut scratch = Scratch::default();
        // 2 nodes × 8 GPUs = 16, but a 12-GPU pod fits on neither.
        assert!(capacity
            .place(
                &mut scratch,
                FlavorId(0),
                1,
                &[(GPU, Amount::from_units(12))]
            )
            .is_none());
        let mut scratch = Scratch::default();
        let placed = capacity
            .place(
                &mut scratch,
                FlavorId(0),
                4,
                &[(GPU, Amount::from_units(4))],
            )
            .unwrap();
        assert_eq!(placed.iter().map(|p| p.pods).sum::<u32>(), 4);
    }

    #[test]
    fn best_fit_packs_before_spreading() {
        let mut capacity = Capacity::new(1, 2, &[pool(2)]);
        let mut scratch = Scratch::default();
        let first = capacity
            .place(
                &mut scratch,
                FlavorId(0),
                1,
                &[(GPU, Amount::from_units(2))],
            )
            .unwrap();
        capacity.commit(&first);
        let mut scratch = Scratch::default();
        let second = capacity
            .place(
                &mut scratch,
                FlavorId(0),
                1,
                &[(GPU, Amount::from_units(2))],
            )
            .unwrap();
        assert_eq!(
            first[0].node, second[0].node,
            "second pod goes to the fuller node"
        );
        capacity.commit(&second);
        // An 8-GPU pod still fits: the other node stayed empty.
        let mut scratch = Scratch::default();
        assert!(capacity
            .place(
                &mut scratch,
                FlavorId(0),
                1,
                &[(GPU, Amount::from_units(8))]
            )
            .is_some());
        capacity.release(&first);
        capacity.release(&second);
        assert_eq!(
            capacity.usage(FlavorId(0), GPU),
            Some((Amount::ZERO, Amount::from_units(16)))
        );
    }

    #[test]
    fn scaling_respects_pool_bounds() {
        let mut capacity = Capacity::new(1, 2, &[pool(1)]);
        assert!(capacity.add_node(FlavorId(0)));
        assert!(capacity.add_node(FlavorId(0)));
        assert!(capacity.add_node(FlavorId(0)));
        assert!(!capacity.add_node(FlavorId(0)), "max 4 nodes");
        assert_eq!(capacity.ready_nodes(FlavorId(0)), 4);
        assert!(capacity.remove_idle_node(FlavorId(0)));
        assert_eq!(capacity.ready_nodes(FlavorId(0)), 3);
    }
}
