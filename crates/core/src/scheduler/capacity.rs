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

use super::workload::{CardUse, Placement};

/// A resource a pool's nodes hold on separate cards.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    pub resource: ResourceId,
    /// Cards per node (the node's allocatable of `resource` is `cards × per_card`).
    pub cards: u16,
    /// What one card holds.
    pub per_card: Amount,
}

/// A node pool as configured.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSpec {
    pub flavor: FlavorId,
    pub nodes: u32,
    /// Per node; resources not listed are not limited by the node.
    pub allocatable: Vec<(ResourceId, Amount)>,
    pub min_nodes: u32,
    pub max_nodes: u32,
    /// The resources of `allocatable` held per card; at most one entry per resource.
    pub devices: Vec<DeviceSpec>,
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
    free: Free,
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
    pub capacity: Amount,
    pub free: Amount,
    pub fragmented: f64,
}

/// A node a pod fits on, as a [`Scorer`] sees it.
pub struct Candidate<'a> {
    pub flavor: FlavorId,
    /// The node's index in its flavor.
    pub node: u32,
    /// Free per resource, indexed by `ResourceId`; `Amount::MAX` where the node sets no limit.
    pub free: &'a [Amount],
    pub allocatable: &'a [(ResourceId, Amount)],
    pub devices: &'a [DeviceSpec],
    /// Free per card: the devices in order, each device's cards in order.
    pub cards: &'a [Amount],
}

/// A scorer's answer for one candidate node: higher is better. `card`
/// picks the card (index among the device's cards) for a request that fits
/// on one card; without it, or if the card cannot hold the pod, the
/// fullest card that can is taken.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeScore {
    pub score: f64,
    pub card: Option<u16>,
}

/// Scores the candidate nodes for one pod (the placement hook).
pub trait Scorer {
    /// One score per candidate, in order; `None` leaves this pod to the
    /// built-in best fit.
    fn score(
        &mut self,
        per_pod: &[(ResourceId, Amount)],
        candidates: &[Candidate<'_>],
    ) -> Option<Vec<NodeScore>>;
}

/// What [`Capacity::place`] places by: the built-in best fit, or a scorer.
/// `salt` breaks ties between equal scores: among them the node with the
/// smallest hash of (salt, flavor, node) wins — a fixed order of the nodes,
/// drawn from the salt, so equal scores keep filling the same nodes first
/// (packing) without favouring low node numbers, and the same inputs
/// always place the same. (The FGD paper's scheduler breaks ties the same
/// way: by node names given random prefixes.)
pub enum By<'s> {
    BestFit,
    Score {
        scorer: &'s mut dyn Scorer,
        salt: u64,
    },
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

    /// Free per card of node `node` of `flavor` (the pool's devices in
    /// order, each device's cards in order); `None` past the last node.
    pub fn node_cards(&self, flavor: FlavorId, node: u32) -> Option<&[Amount]> {
        let fl = &self.flavors[flavor.index()];
        Some(&fl.nodes.get(node as usize)?.free.cards)
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

    /// Places `pods` pods on the nodes of `flavors` in `scratch`, one at a
    /// time, each on the node `by` ranks first among those it fits on
    /// (with several flavors, their nodes compete: placement decides the
    /// flavor); `None` if they don't all fit. Flavors without node pools
    /// are unlimited: if none of `flavors` has pools, nothing is placed.
    pub fn place(
        &self,
        scratch: &mut Scratch,
        flavors: &[FlavorId],
        pods: u32,
        per_pod: &[(ResourceId, Amount)],
        by: &mut By<'_>,
    ) -> Option<Vec<Placement>> {
        let pooled: Vec<FlavorId> = flavors
            .iter()
            .copied()
            .filter(|&f| self.has_pools(f))
            .collect();
        if pooled.is_empty() {
            return Some(Vec::new());
        }
        for &flavor in &pooled {
            scratch.free.entry(flavor).or_insert_with(|| {
                self.flavors[flavor.index()]
                    .nodes
                    .iter()
                    .map(|n| n.ready.then(|| n.free.clone()))
                    .collect()
            });
        }
        // Per node placed on: pods, and what they hold per card.
        let mut placed: BTreeMap<(FlavorId, u32), (u32, Vec<CardUse>)> = BTreeMap::new();
        for _ in 0..pods {
            let ((flavor, node), cards) = match by {
                By::BestFit => self.best_fit(scratch, &pooled, per_pod)?,
                By::Score { scorer, salt } => {
                    match self.scored(scratch, &pooled, per_pod, &mut **scorer, *salt) {
                        Scored::Placed(at, cards) => (at, cards),
                        Scored::NoFit => return None,
                        Scored::Unanswered => self.best_fit(scratch, &pooled, per_pod)?,
                    }
                }
            };
            let fl = &self.flavors[flavor.index()];
            let node_free = scratch
                .free
                .get_mut(&flavor)
                .and_then(|nodes| nodes[node].as_mut())
                .expect("a candidate node is ready");
            for &(r, a) in per_pod {
                if node_free.free[r.index()] != Amount::MAX {
                    node_free.free[r.index()] -= a;
                }
            }
            let pool = &fl.pools[fl.nodes[node].pool];
            let entry = placed.entry((flavor, node as u32)).or_default();
            entry.0 += 1;
            for (device, card, amount) in cards {
                node_free.cards[card_slot(pool, device, card)] -= amount;
                let resource = pool.devices[device].resource;
                match entry
                    .1
                    .iter_mut()
                    .find(|u| u.resource == resource && u.card == card)
                {
                    Some(u) => u.amount += amount,
                    None => entry.1.push(CardUse {
                        resource,
                        card,
                        amount,
                    }),
                }
            }
        }
        Some(
            placed
                .into_iter()
                .map(|((flavor, node), (count, mut cards))| {
                    cards.sort();
                    Placement {
                        flavor,
                        node,
                        per_pod: per_pod.to_vec(),
                        pods: count,
                        cards,
                    }
                })
                .collect(),
        )
    }

    /// The built-in best fit: the node left with the least room, normalised
    /// per resource (ties: the first flavor listed, then the lowest index).
    fn best_fit(
        &self,
        scratch: &Scratch,
        flavors: &[FlavorId],
        per_pod: &[(ResourceId, Amount)],
    ) -> Option<Taken> {
        let mut best: Option<(f64, FlavorId, usize)> = None;
        for &flavor in flavors {
            let fl = &self.flavors[flavor.index()];
            for (i, f) in scratch.free[&flavor].iter().enumerate() {
                let Some(f) = f else { continue };
                let pool = &fl.pools[fl.nodes[i].pool];
                if !fits(pool, f, per_pod) {
                    continue;
                }
                let room = leftover(&f.free, per_pod, &pool.allocatable);
                if best.is_none_or(|(b, _, _)| room < b) {
                    best = Some((room, flavor, i));
                }
            }
        }
        let (_, flavor, i) = best?;
        let fl = &self.flavors[flavor.index()];
        let f = scratch.free[&flavor][i].as_ref()?;
        let cards = fits_on(&fl.pools[fl.nodes[i].pool], f, per_pod, None)?;
        Some(((flavor, i), cards))
    }

    fn scored(
        &self,
        scratch: &Scratch,
        flavors: &[FlavorId],
        per_pod: &[(ResourceId, Amount)],
        scorer: &mut dyn Scorer,
        salt: u64,
    ) -> Scored {
        let mut fitting = Vec::new();
        for &flavor in flavors {
            let fl = &self.flavors[flavor.index()];
            for (i, f) in scratch.free[&flavor].iter().enumerate() {
                let Some(f) = f else { continue };
                let pool = &fl.pools[fl.nodes[i].pool];
                if fits(pool, f, per_pod) {
                    fitting.push((flavor, i, pool, f));
                }
            }
        }
        if fitting.is_empty() {
            return Scored::NoFit;
        }
        let candidates: Vec<Candidate<'_>> = fitting
            .iter()
            .map(|&(flavor, i, pool, f)| Candidate {
                flavor,
                node: i as u32,
                free: &f.free,
                allocatable: &pool.allocatable,
                devices: &pool.devices,
                cards: &f.cards,
            })
            .collect();
        let Some(scores) = scorer.score(per_pod, &candidates) else {
            return Scored::Unanswered;
        };
        if scores.len() != candidates.len() {
            return Scored::Unanswered;
        }
        // The highest score; NaN ranks below every number.
        let key = |s: f64| if s.is_nan() { f64::NEG_INFINITY } else { s };
        let mut best: Option<(f64, u64, usize)> = None;
        for (k, s) in scores.iter().enumerate() {
            let score = key(s.score);
            let (flavor, node, _, _) = fitting[k];
            let tie = tie_hash(salt, (flavor.0 as u64) << 32 | node as u64);
            let better = match best {
                None => true,
                Some((b, t, _)) => score > b || (score == b && tie < t),
            };
            if better {
                best = Some((score, tie, k));
            }
        }
        let (_, _, k) = best.expect("at least one candidate");
        let (flavor, node, pool, f) = fitting[k];
        match fits_on(pool, f, per_pod, scores[k].card) {
            Some(cards) => Scored::Placed((flavor, node), cards),
            None => Scored::NoFit,
        }
    }

    /// `flavors` ranked by the best score `scorer` gives one pod asking
    /// `per_pod` on their nodes now (ties: the fixed node order of `salt`);
    /// flavors with no node the pod fits on, or without pools, follow in
    /// their given order. Unchanged if the scorer does not answer.
    pub fn rank_flavors(
        &self,
        flavors: &[FlavorId],
        per_pod: &[(ResourceId, Amount)],
        scorer: &mut dyn Scorer,
        salt: u64,
    ) -> Vec<FlavorId> {
        let mut scratch = Scratch::default();
        let pooled: Vec<FlavorId> = flavors
            .iter()
            .copied()
            .filter(|&f| self.has_pools(f))
            .collect();
        for &flavor in &pooled {
            scratch.free.entry(flavor).or_insert_with(|| {
                self.flavors[flavor.index()]
                    .nodes
                    .iter()
                    .map(|n| n.ready.then(|| n.free.clone()))
                    .collect()
            });
        }
        let mut fitting = Vec::new();
        for &flavor in &pooled {
            let fl = &self.flavors[flavor.index()];
            for (i, f) in scratch.free[&flavor].iter().enumerate() {
                let Some(f) = f else { continue };
                let pool = &fl.pools[fl.nodes[i].pool];
                if fits(pool, f, per_pod) {
                    fitting.push((flavor, i, pool, f));
                }
            }
        }
        let candidates: Vec<Candidate<'_>> = fitting
            .iter()
            .map(|&(flavor, i, pool, f)| Candidate {
                flavor,
                node: i as u32,
                free: &f.free,
                allocatable: &pool.allocatable,
                devices: &pool.devices,
                cards: &f.cards,
            })
            .collect();
        let scores = match scorer.score(per_pod, &candidates) {
            Some(s) if s.len() == candidates.len() && !candidates.is_empty() => s,
            _ => return flavors.to_vec(),
        };
        // Per flavor: its best (score, tie) — higher score, then lower tie.
        let mut best: BTreeMap<FlavorId, (f64, u64)> = BTreeMap::new();
        for (k, s) in scores.iter().enumerate() {
            let (flavor, node, _, _) = fitting[k];
            let score = if s.score.is_nan() {
                f64::NEG_INFINITY
            } else {
                s.score
            };
            let tie = tie_hash(salt, (flavor.0 as u64) << 32 | node as u64);
            let better = best
                .get(&flavor)
                .is_none_or(|&(b, t)| score > b || (score == b && tie < t));
            if better {
                best.insert(flavor, (score, tie));
            }
        }
        let mut ranked: Vec<FlavorId> = best.keys().copied().collect();
        ranked.sort_by(|a, b| {
            let (sa, ta) = best[a];
            let (sb, tb) = best[b];
            sb.total_cmp(&sa).then(ta.cmp(&tb))
        });
        ranked.extend(flavors.iter().copied().filter(|f| !best.contains_key(f)));
        ranked
    }

    /// Would `placements` fit where they say, on ready nodes with room now
    /// (per card where they hold cards)?
    pub fn has_room(&self, placements: &[Placement]) -> bool {
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
                let asked = per_pod
                    .iter()
                    .find(|(r, _)| *r == resource)
                    .map_or(Amount::ZERO, |(_, a)| *a);
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
    pub fn node_allocatable(&self, flavor: FlavorId, resource: ResourceId) -> Option<Amount> {
        self.flavors[flavor.index()].pools.iter().find_map(|p| {
            p.allocatable
                .iter()
                .find(|(r, _)| *r == resource)
                .map(|(_, a)| *a)
        })
    }
}

impl DeviceSpec {
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

/// The cards one pod takes on a node: (device index, card, amount), or
/// `None` if the node's cards cannot hold it. `prefer` names the card for
/// a request that fits on one card (the scorer's choice); otherwise the
/// fullest card that holds it (ties: the lowest index), and for whole
/// cards the lowest-numbered free ones.
fn cards_for(
    pool: &PoolSpec,
    cards: &[Amount],
    per_pod: &[(ResourceId, Amount)],
    prefer: Option<u16>,
) -> Option<Cards> {
    let mut taken = Vec::new();
    let mut offset = 0;
    for (d, device) in pool.devices.iter().enumerate() {
        let own = &cards[offset..offset + device.cards as usize];
        offset += device.cards as usize;
        let amount = per_pod
            .iter()
            .find(|(r, _)| *r == device.resource)
            .map_or(Amount::ZERO, |(_, a)| *a);
        if amount.milli() <= 0 {
            continue;
        }
        if amount <= device.per_card {
            let preferred = prefer.filter(|&c| own.get(c as usize).is_some_and(|f| *f >= amount));
            let card = match preferred {
                Some(c) => c as usize,
                None => {
                    own.iter()
                        .enumerate()
                        .filter(|(_, f)| **f >= amount)
                        .min_by_key(|&(i, f)| (*f, i))?
                        .0
                }
            };
            taken.push((d, card as u16, amount));
        } else {
            let per_card = device.per_card.milli();
            if per_card <= 0 || amount.milli() % per_card != 0 {
                return None;
            }
            let whole = (amount.milli() / per_card) as usize;
            let free: Vec<usize> = own
                .iter()
                .enumerate()
                .filter(|(_, f)| **f == device.per_card)
                .map(|(i, _)| i)
                .take(whole)
                .collect();
            if free.len() < whole {
                return None;
            }
            taken.extend(free.into_iter().map(|i| (d, i as u16, device.per_card)));
        }
    }
    Some(taken)
}

/// Does a pod fit on the node: every limited resource, then its cards
/// (one card with room for a share, enough fully free cards for whole
/// ones)? As [`fits_on`], without choosing the cards.
fn fits(pool: &PoolSpec, free: &Free, per_pod: &[(ResourceId, Amount)]) -> bool {
    if !per_pod.iter().all(|&(r, a)| free.free[r.index()] >= a) {
        return false;
    }
    let mut offset = 0;
    for device in &pool.devices {
        let own = &free.cards[offset..offset + device.cards as usize];
        offset += device.cards as usize;
        let amount = per_pod
            .iter()
            .find(|(r, _)| *r == device.resource)
            .map_or(Amount::ZERO, |(_, a)| *a);
        if amount.milli() <= 0 {
            continue;
        }
        let fits = if amount <= device.per_card {
            own.iter().any(|f| *f >= amount)
        } else {
            let per_card = device.per_card.milli();
            per_card > 0
                && amount.milli() % per_card == 0
                && own.iter().filter(|f| **f == device.per_card).count() as i64
                    >= amount.milli() / per_card
        };
        if !fits {
            return false;
        }
    }
    true
}

/// Cards a pod takes if it fits on the node at all (every limited resource, then the cards).
fn fits_on(
    pool: &PoolSpec,
    free: &Free,
    per_pod: &[(ResourceId, Amount)],
    prefer: Option<u16>,
) -> Option<Cards> {
    if !per_pod.iter().all(|&(r, a)| free.free[r.index()] >= a) {
        return None;
    }
    if pool.devices.is_empty() {
        return Some(Vec::new());
    }
    cards_for(pool, &free.cards, per_pod, prefer)
}

/// The cards a pod takes on a node: (device index, card, amount).
type Cards = Vec<(usize, u16, Amount)>;

/// Where a pod goes, and the cards it takes there.
type Taken = ((FlavorId, usize), Cards);

enum Scored {
    Placed((FlavorId, usize), Cards),
    NoFit,
    Unanswered,
}

/// SplitMix64 of the pair: a fixed, well-spread order of the nodes per salt.
fn tie_hash(salt: u64, node: u64) -> u64 {
    let mut z = salt
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(node)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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
#[path = "capacity_tests.rs"]
mod tests;
