//! Physical capacity: the nodes of each flavor's node pools and the pods
//! placed on them. A flavor without pools is unlimited (Kueue's model). A
//! workload fits only if every pod finds room on one node; pods are placed
//! best-fit (the node left with the least room) unless a [`Scorer`] (the
//! placement hook) scores the nodes, so fragmentation is real.
//!
//! **Devices.** A pool may declare a resource a device ([`DeviceSpec`]):
//! each node has `cards` cards of `per_card` each, and the resource is
//! accounted per card, as the hardware holds it. A request up to one card
//! needs one card with that much free; a request of k whole cards needs k
//! fully free cards; any other amount never fits. A card is never
//! over-allocated (`tests/invariants.rs`). Count resources without a
//! device declaration (`nvidia.com/gpu`, `nvidia.com/mig-*`) stay one
//! number per node: each unit is a whole card or slice already.
//!
//! Pure data owned by the scheduler; the driver changes node counts.

use std::collections::BTreeMap;

use crate::model::cluster::{FlavorId, ResourceId};
use crate::model::Amount;

use super::workload::{amount_of, Placement};

mod domains;
mod place;

pub use domains::{DomainMiss, LevelRequest};
use place::fits;
pub use place::{By, Candidate, NodeScore, Scorer};

/// A resource a pool's nodes hold on separate cards.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    /// The device resource.
    pub resource: ResourceId,
    /// Cards per node (the node's allocatable of `resource` is `cards × per_card`).
    pub cards: u16,
    /// What one card holds.
    pub per_card: Amount,
}

/// A node pool as configured.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSpec {
    /// The flavor of its nodes.
    pub flavor: FlavorId,
    /// Nodes it has at the start.
    pub nodes: u32,
    /// Per node; resources not listed are not limited by the node.
    pub allocatable: Vec<(ResourceId, Amount)>,
    /// Fewest nodes autoscaling may leave it.
    pub min_nodes: u32,
    /// Most nodes autoscaling may give it.
    pub max_nodes: u32,
    /// The resources of `allocatable` held per card; at most one entry per resource.
    pub devices: Vec<DeviceSpec>,
    /// The nodes' names, in order, when the driver knows them (the
    /// operator: Node objects); empty for anonymous nodes (the simulator's,
    /// and nodes added by autoscaling). Placements carried across a
    /// reconfiguration or a restart find named nodes by name.
    pub names: Vec<String>,
}

impl PoolSpec {
    fn card_count(&self) -> usize {
        self.devices.iter().map(|d| d.cards as usize).sum()
    }
}

/// One node's free space: per resource (indexed by `ResourceId`,
/// `Amount::MAX` where the node sets no limit) and per card (the pool's
/// devices in order, each device's cards in order).
#[derive(Clone, Debug, PartialEq)]
struct Free {
    free: Vec<Amount>,
    cards: Vec<Amount>,
}

#[derive(Clone, Debug)]
struct NodeState {
    pool: usize,
    name: Option<std::sync::Arc<str>>,
    free: Free,
    ready: bool,
    pods: u32,
}

#[derive(Clone, Debug, Default)]
struct FlavorNodes {
    pools: Vec<PoolSpec>,
    /// Each pool's node labels (same index as `pools`): every node of the
    /// pool carries them ([`Capacity::label_pools`]); empty unless given.
    labels: Vec<BTreeMap<String, String>>,
    nodes: Vec<NodeState>,
    /// Named nodes' indices.
    named: std::collections::HashMap<std::sync::Arc<str>, u32>,
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
    /// Where each pool given to [`Capacity::new`] went: (flavor, index among its pools).
    pool_order: Vec<(FlavorId, usize)>,
}

/// Tentative copies of node free space, for placing a workload's pods
/// before committing. `None` for a node that is not ready.
#[derive(Clone, Default)]
pub struct Scratch {
    free: BTreeMap<FlavorId, Vec<Option<Free>>>,
}

/// A typical pod for [`Capacity::fragmentation`]: what it asks, the
/// flavors it may run on (empty: any), its share.
pub type TypicalShape<'a> = (&'a [(ResourceId, Amount)], &'a [FlavorId], f64);

/// A flavor's device capacity, free and fragmented (the FGD paper's
/// measure: free capacity no typical pod could use), in the device's units.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Fragmentation {
    /// All the flavor's capacity of the device.
    pub capacity: Amount,
    /// What is free of it.
    pub free: Amount,
    /// What is free but no typical pod could use.
    pub fragmented: f64,
}

impl Capacity {
    /// The nodes of `pools`, empty, for a configuration of `flavors` flavors and `resources` resources.
    pub fn new(flavors: usize, resources: usize, pools: &[PoolSpec]) -> Capacity {
        let mut capacity = Capacity {
            resources,
            flavors: vec![FlavorNodes::default(); flavors],
            version: 0,
            last_version: 0,
            pool_order: Vec::with_capacity(pools.len()),
        };
        for pool in pools {
            let free = capacity.template(pool);
            let fl = &mut capacity.flavors[pool.flavor.index()];
            fl.pools.push(pool.clone());
            fl.labels.push(BTreeMap::new());
            let index = fl.pools.len() - 1;
            capacity.pool_order.push((pool.flavor, index));
            // Straight onto the end: no node is idle-and-removed yet, and
            // looking for one per node made building a large pool quadratic.
            for i in 0..pool.nodes {
                let name: Option<std::sync::Arc<str>> =
                    pool.names.get(i as usize).map(|n| n.as_str().into());
                if let Some(name) = &name {
                    fl.named.insert(name.clone(), fl.nodes.len() as u32);
                }
                fl.nodes.push(NodeState {
                    pool: index,
                    name,
                    free: free.clone(),
                    ready: true,
                    pods: 0,
                });
            }
        }
        capacity
    }

    fn template(&self, pool: &PoolSpec) -> Free {
        let mut free = vec![Amount::MAX; self.resources];
        for &(r, a) in &pool.allocatable {
            free[r.index()] = a;
        }
        let mut cards = Vec::with_capacity(pool.card_count());
        for device in &pool.devices {
            cards.extend((0..device.cards).map(|_| device.per_card));
        }
        Free { free, cards }
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
    pub(crate) fn restore_version(&mut self, version: u64) {
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
                name: None,
                free,
                ready: true,
                pods: 0,
            });
        }
    }

    /// Does the flavor have node pools?
    pub fn has_pools(&self, flavor: FlavorId) -> bool {
        !self.flavors[flavor.index()].pools.is_empty()
    }

    /// Flavors with node pools.
    pub(crate) fn pooled_flavors(&self) -> impl Iterator<Item = FlavorId> + '_ {
        self.flavors
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.pools.is_empty())
            .map(|(i, _)| FlavorId(i as u16))
    }

    /// Ready nodes of the flavor.
    pub fn ready_nodes(&self, flavor: FlavorId) -> u32 {
        self.flavors[flavor.index()]
            .nodes
            .iter()
            .filter(|n| n.ready)
            .count() as u32
    }

    pub(crate) fn node_bounds(&self, flavor: FlavorId) -> (u32, u32) {
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

    /// Free per card of node `node` of `flavor` (the pool's devices in
    /// order, each device's cards in order); `None` past the last node.
    pub fn node_cards(&self, flavor: FlavorId, node: u32) -> Option<&[Amount]> {
        let fl = &self.flavors[flavor.index()];
        Some(&fl.nodes.get(node as usize)?.free.cards)
    }

    /// The name of node `node` of `flavor`, if the driver named it.
    pub fn node_name(&self, flavor: FlavorId, node: u32) -> Option<&str> {
        self.flavors[flavor.index()]
            .nodes
            .get(node as usize)?
            .name
            .as_deref()
    }

    /// The index of the node of `flavor` named `name`.
    pub fn node_named(&self, flavor: FlavorId, name: &str) -> Option<u32> {
        self.flavors[flavor.index()].named.get(name).copied()
    }

    /// Nodes of `flavor`, ready or not (indices run `0..nodes`).
    pub fn nodes(&self, flavor: FlavorId) -> u32 {
        self.flavors[flavor.index()].nodes.len() as u32
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
    pub(crate) fn remove_idle_node(&mut self, flavor: FlavorId) -> bool {
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
    pub(crate) fn pods_could_ever_fit(
        &self,
        flavor: FlavorId,
        per_pod: &[(ResourceId, Amount)],
    ) -> u64 {
        let fl = &self.flavors[flavor.index()];
        if fl.pools.is_empty() {
            return u64::MAX;
        }
        fl.pools
            .iter()
            .map(|pool| {
                let free = self.template(pool).free;
                let per_node = per_pod
                    .iter()
                    .filter(|&&(r, a)| a.milli() > 0 && free[r.index()] != Amount::MAX)
                    .map(
                        |&(r, a)| match pool.devices.iter().find(|d| d.resource == r) {
                            Some(device) => device.pods_per_node(a),
                            None => (free[r.index()].milli().max(0) / a.milli()) as u64,
                        },
                    )
                    .min()
                    .unwrap_or(u64::MAX);
                per_node.saturating_mul(pool.max_nodes.max(pool.nodes) as u64)
            })
            .fold(0, u64::saturating_add)
    }

    /// Would `placements` fit where they say, on ready nodes with room now
    /// (per card where they hold cards)?
    pub(crate) fn has_room(&self, placements: &[Placement]) -> bool {
        let mut needed: BTreeMap<(FlavorId, u32), (Vec<Amount>, Vec<Amount>)> = BTreeMap::new();
        for p in placements {
            let Some(fl) = self.flavors.get(p.flavor.index()) else {
                return false;
            };
            let Some(node) = fl.nodes.get(p.node as usize) else {
                return false;
            };
            if !node.ready {
                return false;
            }
            let pool = &fl.pools[node.pool];
            let need = needed.entry((p.flavor, p.node)).or_insert_with(|| {
                (
                    vec![Amount::ZERO; self.resources],
                    vec![Amount::ZERO; node.free.cards.len()],
                )
            });
            for &(r, a) in &p.per_pod {
                match need.0.get_mut(r.index()) {
                    Some(n) => *n += a.saturating_mul(p.pods as i64),
                    None => return false,
                }
            }
            for u in &p.cards {
                let Some(slot) = card_slot_of(pool, u.resource, u.card) else {
                    return false;
                };
                need.1[slot] += u.amount;
            }
        }
        needed.iter().all(|(&(flavor, node), (need, cards))| {
            let free = &self.flavors[flavor.index()].nodes[node as usize].free;
            need.iter()
                .zip(&free.free)
                .all(|(n, f)| *f == Amount::MAX || n <= f)
                && cards.iter().zip(&free.cards).all(|(n, f)| n <= f)
        })
    }

    /// Takes on their nodes what `placements` hold.
    pub fn commit(&mut self, placements: &[Placement]) {
        self.changed();
        for p in placements {
            let fl = &mut self.flavors[p.flavor.index()];
            let node = &mut fl.nodes[p.node as usize];
            let pool = &fl.pools[node.pool];
            for &(r, a) in &p.per_pod {
                if node.free.free[r.index()] != Amount::MAX {
                    node.free.free[r.index()] -= a.saturating_mul(p.pods as i64);
                }
            }
            for u in &p.cards {
                if let Some(slot) = card_slot_of(pool, u.resource, u.card) {
                    node.free.cards[slot] -= u.amount;
                }
            }
            node.pods += p.pods;
        }
    }

    /// Gives back on their nodes what `placements` held.
    pub fn release(&mut self, placements: &[Placement]) {
        self.changed();
        for p in placements {
            let fl = &mut self.flavors[p.flavor.index()];
            let node = &mut fl.nodes[p.node as usize];
            let pool = &fl.pools[node.pool];
            for &(r, a) in &p.per_pod {
                if node.free.free[r.index()] != Amount::MAX {
                    node.free.free[r.index()] += a.saturating_mul(p.pods as i64);
                }
            }
            for u in &p.cards {
                if let Some(slot) = card_slot_of(pool, u.resource, u.card) {
                    node.free.cards[slot] += u.amount;
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
            used += cap - node.free.free[resource.index()];
        }
        Some((used, total))
    }

    /// The resources the flavor's pools hold per card.
    pub fn device_resources(&self, flavor: FlavorId) -> Vec<ResourceId> {
        let mut out: Vec<ResourceId> = self.flavors[flavor.index()]
            .pools
            .iter()
            .flat_map(|p| p.devices.iter().map(|d| d.resource))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The FGD paper's fragmentation of device `resource` over the flavor's
    /// ready nodes that hold it per card: on each node, for each typical pod
    /// (weighted by its share), the free cards too small for it if it fits
    /// on the node (every resource it asks, and its cards) and may run on
    /// the flavor, or all free cards if not (a typical pod asking none of the device leaves
    /// them all idle). `None` if no pool holds `resource` per card.
    pub fn fragmentation(
        &self,
        flavor: FlavorId,
        resource: ResourceId,
        typical: &[TypicalShape<'_>],
    ) -> Option<Fragmentation> {
        let fl = &self.flavors[flavor.index()];
        let mut out = Fragmentation::default();
        let mut found = false;
        for node in fl.nodes.iter().filter(|n| n.ready) {
            let pool = &fl.pools[node.pool];
            let Some(d) = pool.devices.iter().position(|d| d.resource == resource) else {
                continue;
            };
            found = true;
            let device = &pool.devices[d];
            let offset = card_slot(pool, d, 0);
            let cards = &node.free.cards[offset..offset + device.cards as usize];
            let free = cards.iter().fold(Amount::ZERO, |sum, c| sum + *c);
            out.capacity += device.per_card.saturating_mul(device.cards as i64);
            out.free += free;
            for &(per_pod, flavors, share) in typical {
                let asked = amount_of(per_pod, resource);
                let allowed = flavors.is_empty() || flavors.contains(&flavor);
                let unusable = if allowed && asked.milli() > 0 && fits(pool, &node.free, per_pod) {
                    let need = asked.min(device.per_card);
                    cards
                        .iter()
                        .filter(|c| **c < need)
                        .fold(Amount::ZERO, |sum, c| sum + *c)
                } else {
                    free
                };
                out.fragmented += share * unusable.as_f64();
            }
        }
        found.then_some(out)
    }

    /// Per-node allocatable of `resource` in the flavor's first pool that lists it.
    pub(crate) fn node_allocatable(
        &self,
        flavor: FlavorId,
        resource: ResourceId,
    ) -> Option<Amount> {
        self.flavors[flavor.index()].pools.iter().find_map(|p| {
            p.allocatable
                .iter()
                .find(|(r, _)| *r == resource)
                .map(|(_, a)| *a)
        })
    }
}

impl DeviceSpec {
    /// A node's `total` of resource `name` held on `cards` equal cards;
    /// what is wrong with that, in words a configuration error can end
    /// with, if it cannot be (no card, more than
    /// [`crate::model::limits::MAX_CARDS_PER_NODE`], or an uneven split).
    pub fn split(
        resource: ResourceId,
        name: &str,
        total: Amount,
        cards: u64,
    ) -> Result<DeviceSpec, String> {
        let cap = crate::model::limits::MAX_CARDS_PER_NODE;
        if cards == 0 || cards > cap as u64 {
            return Err(format!("{cards} cards per node; give 1 to {cap}"));
        }
        if total.milli() % cards as i64 != 0 {
            return Err(format!(
                "{name} {total} does not split evenly into {cards} cards; give each node's total as cards × one card"
            ));
        }
        Ok(DeviceSpec {
            resource,
            cards: cards as u16,
            per_card: Amount::from_milli(total.milli() / cards as i64),
        })
    }

    /// How many pods asking `amount` of this device one empty node holds.
    fn pods_per_node(&self, amount: Amount) -> u64 {
        let (per_card, a) = (self.per_card.milli(), amount.milli());
        if a <= 0 {
            u64::MAX
        } else if a <= per_card {
            self.cards as u64 * (per_card / a) as u64
        } else if per_card > 0 && a % per_card == 0 {
            self.cards as u64 / (a / per_card) as u64
        } else {
            0
        }
    }
}

/// Where card `card` of device `device` is in a node's card list.
fn card_slot(pool: &PoolSpec, device: usize, card: u16) -> usize {
    pool.devices[..device]
        .iter()
        .map(|d| d.cards as usize)
        .sum::<usize>()
        + card as usize
}

fn card_slot_of(pool: &PoolSpec, resource: ResourceId, card: u16) -> Option<usize> {
    let device = pool.devices.iter().position(|d| d.resource == resource)?;
    (card < pool.devices[device].cards).then(|| card_slot(pool, device, card))
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
