//! Placing pods: which nodes (and cards) a pod fits on, and which of them
//! it goes to — the built-in best fit, or a [`Scorer`]'s scores (the
//! placement hook) with ties broken by a fixed node order — over one
//! flavor's nodes or several flavors' together; and ranking flavors by
//! where a scorer would put a pod.

use std::collections::BTreeMap;

use crate::model::cluster::{FlavorId, ResourceId};
use crate::model::Amount;

use super::{card_slot, Capacity, DeviceSpec, Free, PoolSpec, Scratch};
use crate::scheduler::workload::{amount_of, CardUse, Placement};

/// A node a pod fits on, as a [`Scorer`] sees it.
pub struct Candidate<'a> {
    /// The node's flavor.
    pub flavor: FlavorId,
    /// The node's index in its flavor.
    pub node: u32,
    /// Free per resource, indexed by `ResourceId`; `Amount::MAX` where the node sets no limit.
    pub free: &'a [Amount],
    /// The node's allocatable, per resource.
    pub allocatable: &'a [(ResourceId, Amount)],
    /// The node's device resources.
    pub devices: &'a [DeviceSpec],
    /// Free per card: the devices in order, each device's cards in order.
    pub cards: &'a [Amount],
    /// The node's labels as its pool was given them
    /// ([`Capacity::label_pools`]): where it sits in its flavor's Topology.
    pub labels: &'a BTreeMap<String, String>,
}

/// A scorer's answer for one candidate node: higher is better. `card`
/// picks the card (index among the device's cards) for a request that fits
/// on one card; without it, or if the card cannot hold the pod, the
/// fullest card that can is taken.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeScore {
    /// The node's score.
    pub score: f64,
    /// The card to take, if the request fits on one.
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
    /// The built-in best fit.
    BestFit,
    /// The scorer's scores.
    Score {
        /// The scorer.
        scorer: &'s mut dyn Scorer,
        /// Breaks ties between equal scores.
        salt: u64,
    },
}

impl Capacity {
    /// Places `pods` pods on the nodes of `flavors` in `scratch`, one at a
    /// time, each on the node `by` ranks first among those it fits on
    /// (with several flavors, their nodes compete: placement decides the
    /// flavor); `None` if they don't all fit. Flavors without node pools
    /// are unlimited: if none of `flavors` has pools, nothing is placed.
    /// The placements are pod set `pod_set`'s.
    pub fn place(
        &self,
        scratch: &mut Scratch,
        pod_set: u32,
        flavors: &[FlavorId],
        pods: u32,
        per_pod: &[(ResourceId, Amount)],
        by: &mut By<'_>,
    ) -> Option<Vec<Placement>> {
        let pooled = self.pooled_in(scratch, flavors);
        if pooled.is_empty() {
            return Some(Vec::new());
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
                        pod_set,
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

    /// The flavors of `flavors` with node pools, each with its nodes' free
    /// space copied into `scratch` (unless already there).
    pub(super) fn pooled_in(&self, scratch: &mut Scratch, flavors: &[FlavorId]) -> Vec<FlavorId> {
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
        pooled
    }

    /// The ready nodes of `flavors` (in `scratch`) a pod fits on.
    fn fitting<'a>(
        &'a self,
        scratch: &'a Scratch,
        flavors: &[FlavorId],
        per_pod: &[(ResourceId, Amount)],
    ) -> Vec<Fitting<'a>> {
        let mut fitting = Vec::new();
        for &flavor in flavors {
            let fl = &self.flavors[flavor.index()];
            for (i, f) in scratch.free[&flavor].iter().enumerate() {
                let Some(f) = f else { continue };
                let pool = &fl.pools[fl.nodes[i].pool];
                if fits(pool, f, per_pod) {
                    fitting.push(Fitting {
                        flavor,
                        node: i,
                        pool,
                        free: f,
                        labels: &fl.labels[fl.nodes[i].pool],
                    });
                }
            }
        }
        fitting
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

    /// Where `scorer` puts one pod of `per_pod` among the nodes of
    /// `flavors` in `scratch` it fits on (ties: the fixed node order of `salt`).
    pub(super) fn scored(
        &self,
        scratch: &Scratch,
        flavors: &[FlavorId],
        per_pod: &[(ResourceId, Amount)],
        scorer: &mut dyn Scorer,
        salt: u64,
    ) -> Scored {
        let fitting = self.fitting(scratch, flavors, per_pod);
        if fitting.is_empty() {
            return Scored::NoFit;
        }
        let Some(scores) = ask(scorer, per_pod, &fitting) else {
            return Scored::Unanswered;
        };
        let Some(k) = (0..fitting.len()).max_by(|&a, &b| {
            rank(&scores[a], &fitting[a], salt).cmp_to(&rank(&scores[b], &fitting[b], salt))
        }) else {
            return Scored::NoFit;
        };
        let Fitting {
            flavor,
            node,
            pool,
            free: f,
            ..
        } = fitting[k];
        match fits_on(pool, f, per_pod, scores[k].card) {
            Some(cards) => Scored::Placed((flavor, node), cards),
            None => Scored::NoFit,
        }
    }

    /// `flavors` ranked by the best score `scorer` gives one pod asking
    /// `per_pod` on their nodes now (ties: the fixed node order of `salt`);
    /// flavors with no node the pod fits on, or without pools, follow in
    /// their given order. `None` if the pod fits no node of theirs (the
    /// scorer is not asked) or the scorer does not answer.
    pub(crate) fn rank_flavors(
        &self,
        flavors: &[FlavorId],
        per_pod: &[(ResourceId, Amount)],
        scorer: &mut dyn Scorer,
        salt: u64,
    ) -> Option<Vec<FlavorId>> {
        let mut scratch = Scratch::default();
        let pooled = self.pooled_in(&mut scratch, flavors);
        let fitting = self.fitting(&scratch, &pooled, per_pod);
        if fitting.is_empty() {
            return None;
        }
        let scores = ask(scorer, per_pod, &fitting)?;
        // Per flavor: the rank of its best node.
        let mut best: BTreeMap<FlavorId, Rank> = BTreeMap::new();
        for (s, at) in scores.iter().zip(&fitting) {
            let r = rank(s, at, salt);
            if best.get(&at.flavor).is_none_or(|b| r.cmp_to(b).is_gt()) {
                best.insert(at.flavor, r);
            }
        }
        let mut ranked: Vec<FlavorId> = best.keys().copied().collect();
        ranked.sort_by(|a, b| best[b].cmp_to(&best[a]));
        ranked.extend(flavors.iter().copied().filter(|f| !best.contains_key(f)));
        Some(ranked)
    }
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
        let amount = amount_of(per_pod, device.resource);
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
pub(super) fn fits(pool: &PoolSpec, free: &Free, per_pod: &[(ResourceId, Amount)]) -> bool {
    if !per_pod.iter().all(|&(r, a)| free.free[r.index()] >= a) {
        return false;
    }
    let mut offset = 0;
    for device in &pool.devices {
        let own = &free.cards[offset..offset + device.cards as usize];
        offset += device.cards as usize;
        let amount = amount_of(per_pod, device.resource);
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

/// A scorer's choice for one pod.
pub(super) enum Scored {
    /// The node ranked first, and the cards the pod takes there.
    Placed((FlavorId, usize), Cards),
    /// No node holds the pod.
    NoFit,
    /// The scorer did not give one score per node.
    Unanswered,
}

/// A node a pod fits on, with its pool and free space (in a scratch).
#[derive(Clone, Copy)]
struct Fitting<'a> {
    flavor: FlavorId,
    node: usize,
    pool: &'a PoolSpec,
    free: &'a Free,
    labels: &'a BTreeMap<String, String>,
}

/// The scorer's scores for the `fitting` nodes, if it answers one per node.
fn ask(
    scorer: &mut dyn Scorer,
    per_pod: &[(ResourceId, Amount)],
    fitting: &[Fitting<'_>],
) -> Option<Vec<NodeScore>> {
    let candidates: Vec<Candidate<'_>> = fitting
        .iter()
        .map(|at| Candidate {
            flavor: at.flavor,
            node: at.node as u32,
            free: &at.free.free,
            allocatable: &at.pool.allocatable,
            devices: &at.pool.devices,
            cards: &at.free.cards,
            labels: at.labels,
        })
        .collect();
    scorer
        .score(per_pod, &candidates)
        .filter(|scores| scores.len() == candidates.len())
}

/// Where a scored node ranks: higher score first (NaN below every number),
/// then the fixed node order of the salt.
struct Rank {
    score: f64,
    tie: u64,
}

impl Rank {
    /// `Greater` when `self` ranks before `other`.
    fn cmp_to(&self, other: &Rank) -> std::cmp::Ordering {
        // Scores are never NaN here (`rank` maps NaN to −∞).
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(other.tie.cmp(&self.tie))
    }
}

fn rank(score: &NodeScore, at: &Fitting<'_>, salt: u64) -> Rank {
    Rank {
        score: if score.score.is_nan() {
            f64::NEG_INFINITY
        } else {
            score.score
        },
        tie: tie_hash(salt, (at.flavor.0 as u64) << 32 | at.node as u64),
    }
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
            let need = amount_of(per_pod, r);
            (free[r.index()] - need).as_f64() / cap.as_f64()
        })
        .sum()
}
