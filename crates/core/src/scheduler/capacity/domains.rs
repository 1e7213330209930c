//! Topology domains (Kueue's topology-aware scheduling): the nodes of a
//! flavor grouped by the values of their topology labels, and placing a
//! pod set's pods all inside one domain of a requested level.
//!
//! A node's domain at level `k` of a Topology is the tuple of its label
//! values for levels `0..=k` (so two racks with the same name in two
//! blocks are two domains, as in Kueue). A node lacking one of those
//! labels is in no domain of that level; the level
//! `kubernetes.io/hostname`, when the pool does not set it, is the node
//! itself. Among the domains that hold every pod, the one with the least
//! room is taken (Kueue's BestFit: fewest pods it could hold, then the
//! smallest label values); inside it the pods go best fit as anywhere
//! else. Pure: reads and writes only the caller's [`Scratch`]. Called by
//! flavor assignment (`scheduler::assign`).

use std::collections::BTreeMap;

use crate::model::api::HOSTNAME_LABEL;
use crate::model::cluster::{FlavorId, ResourceId};
use crate::model::Amount;

use super::place::Scored;
use super::{By, Capacity, Free, PoolSpec, Scratch};
use crate::scheduler::workload::{amount_of, Placement};

/// A pod set's topology request against one flavor's Topology: its
/// levels' node labels (widest first) and the index of the level whose
/// one domain must hold all the pods.
#[derive(Clone, Copy, Debug)]
pub struct LevelRequest<'a> {
    /// The Topology's levels, widest first.
    pub levels: &'a [String],
    /// The level asked for (an index into `levels`).
    pub level: usize,
}

/// Why no domain of the level holds the pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DomainMiss {
    /// The most pods one domain of the level could hold now.
    pub largest: u64,
    /// The domains of the level (ready nodes carrying its labels).
    pub domains: usize,
}

impl Capacity {
    /// Gives the nodes of each pool their labels: `labels[i]` are the
    /// labels of every node of the `i`-th pool given to [`Capacity::new`]
    /// (nodes autoscaling adds to the pool too). Pools past `labels` keep
    /// none.
    pub fn label_pools(&mut self, labels: &[BTreeMap<String, String>]) {
        for (&(flavor, pool), labels) in self.pool_order.iter().zip(labels) {
            self.flavors[flavor.index()].labels[pool] = labels.clone();
        }
        self.changed();
    }

    /// The labels node `node` of `flavor` was given (its pool's,
    /// [`Capacity::label_pools`]); `None` past the flavor's nodes.
    pub fn node_labels(&self, flavor: FlavorId, node: u32) -> Option<&BTreeMap<String, String>> {
        let fl = &self.flavors[flavor.index()];
        fl.labels.get(fl.nodes.get(node as usize)?.pool)
    }

    /// Places `pods` pods of `per_pod` on the nodes of `flavor` in
    /// `scratch` for a topology request at `request.level`: inside one
    /// domain of that level; when `required` is false and none holds them,
    /// inside one domain of the next wider level, and so on. `Err` (the
    /// miss at the requested level) when no domain of any level tried
    /// holds them — a preferred request then places anywhere, which is the
    /// caller's to do. `scratch` changes only on success.
    #[allow(clippy::too_many_arguments)]
    pub fn place_in_topology(
        &self,
        scratch: &mut Scratch,
        pod_set: u32,
        flavor: FlavorId,
        request: LevelRequest<'_>,
        required: bool,
        pods: u32,
        per_pod: &[(ResourceId, Amount)],
        by: &mut By<'_>,
    ) -> Result<Vec<Placement>, DomainMiss> {
        let widest = if required { request.level } else { 0 };
        let mut first_miss = None;
        for level in (widest..=request.level).rev() {
            let mut trial = scratch.clone();
            let at = LevelRequest { level, ..request };
            match self.place_in_domain(&mut trial, pod_set, flavor, at, pods, per_pod, by) {
                Ok(placed) => {
                    *scratch = trial;
                    return Ok(placed);
                }
                Err(miss) => {
                    first_miss.get_or_insert(miss);
                }
            }
        }
        Err(first_miss.unwrap_or(DomainMiss {
            largest: 0,
            domains: 0,
        }))
    }

    /// Places `pods` pods of `per_pod` on the nodes of `flavor` in
    /// `scratch`, all inside one domain of `request`'s level, and inside it
    /// as `by` places. The domain: with [`By::BestFit`], the fitting
    /// domain with the least room (Kueue's BestFit); with a scorer, the
    /// fitting domain holding the node it ranks first for one pod (so a
    /// placement policy ranks domains through its node scores and the
    /// nodes' `labels`), best fit's if it does not answer.
    /// The placements are pod set `pod_set`'s.
    #[allow(clippy::too_many_arguments)]
    pub fn place_in_domain(
        &self,
        scratch: &mut Scratch,
        pod_set: u32,
        flavor: FlavorId,
        request: LevelRequest<'_>,
        pods: u32,
        per_pod: &[(ResourceId, Amount)],
        by: &mut By<'_>,
    ) -> Result<Vec<Placement>, DomainMiss> {
        let miss = DomainMiss {
            largest: 0,
            domains: 0,
        };
        if self.pooled_in(scratch, &[flavor]).is_empty() {
            return Err(miss);
        }
        let domains = self.domains(scratch, flavor, request, per_pod);
        let fitting: Vec<&(u64, Vec<usize>)> = domains
            .values()
            .filter(|(room, _)| *room >= u64::from(pods))
            .collect();
        if fitting.is_empty() {
            return Err(DomainMiss {
                largest: domains.values().map(|(room, _)| *room).max().unwrap_or(0),
                domains: domains.len(),
            });
        }
        let nodes = self
            .ranked_domain(scratch, flavor, &fitting, per_pod, by)
            .unwrap_or_else(|| least_room(&fitting));
        // Only the domain's nodes are offered to the placement.
        let all = &scratch.free[&flavor];
        let mut only: Vec<Option<Free>> = vec![None; all.len()];
        for &node in nodes {
            only[node] = all[node].clone();
        }
        let mut inside = Scratch::default();
        inside.free.insert(flavor, only);
        let placed = self
            .place(&mut inside, pod_set, &[flavor], pods, per_pod, by)
            .ok_or(miss)?;
        let after = &inside.free[&flavor];
        let free = scratch.free.get_mut(&flavor).ok_or(miss)?;
        for &node in nodes {
            free[node] = after[node].clone();
        }
        Ok(placed)
    }

    /// The nodes of the fitting domain holding the node `by`'s scorer
    /// ranks first for one pod; `None` with best fit, or when the scorer
    /// does not answer.
    fn ranked_domain<'d>(
        &self,
        scratch: &Scratch,
        flavor: FlavorId,
        fitting: &[&'d (u64, Vec<usize>)],
        per_pod: &[(ResourceId, Amount)],
        by: &mut By<'_>,
    ) -> Option<&'d Vec<usize>> {
        let By::Score { scorer, salt } = by else {
            return None;
        };
        let all = &scratch.free[&flavor];
        let mut only: Vec<Option<Free>> = vec![None; all.len()];
        for (_, nodes) in fitting {
            for &node in nodes {
                only[node] = all[node].clone();
            }
        }
        let mut offered = Scratch::default();
        offered.free.insert(flavor, only);
        let Scored::Placed((_, node), _) =
            self.scored(&offered, &[flavor], per_pod, &mut **scorer, *salt)
        else {
            return None;
        };
        fitting
            .iter()
            .find(|(_, nodes)| nodes.contains(&node))
            .map(|(_, nodes)| nodes)
    }

    /// The domains of `request`'s level among the ready nodes of `flavor`
    /// in `scratch`, by their label values (widest level first): how many
    /// pods of `per_pod` each could hold now, and its nodes.
    fn domains(
        &self,
        scratch: &Scratch,
        flavor: FlavorId,
        request: LevelRequest<'_>,
        per_pod: &[(ResourceId, Amount)],
    ) -> BTreeMap<Vec<String>, (u64, Vec<usize>)> {
        let fl = &self.flavors[flavor.index()];
        let mut domains: BTreeMap<Vec<String>, (u64, Vec<usize>)> = BTreeMap::new();
        for (i, free) in scratch.free[&flavor].iter().enumerate() {
            let Some(free) = free else { continue };
            let node = &fl.nodes[i];
            let labels = &fl.labels[node.pool];
            let key: Option<Vec<String>> = request.levels[..=request.level]
                .iter()
                .map(|label| match labels.get(label) {
                    Some(value) => Some(value.clone()),
                    None if label == HOSTNAME_LABEL => Some(match &node.name {
                        Some(name) => name.to_string(),
                        None => format!("{i:06}"),
                    }),
                    None => None,
                })
                .collect();
            let Some(key) = key else { continue };
            let entry = domains.entry(key).or_default();
            entry.0 = entry
                .0
                .saturating_add(pods_fitting(&fl.pools[node.pool], free, per_pod));
            entry.1.push(i);
        }
        domains
    }
}

/// The fitting domain with the least room (Kueue's BestFit); the first
/// (smallest label values) among equals.
fn least_room<'d>(fitting: &[&'d (u64, Vec<usize>)]) -> &'d Vec<usize> {
    let mut best = fitting[0];
    for &domain in &fitting[1..] {
        if domain.0 < best.0 {
            best = domain;
        }
    }
    &best.1
}

/// How many pods of `per_pod` fit on a node with `free` now: every
/// limited resource, and the cards of each device (pods on one card's
/// share, or on whole free cards). `u64::MAX` when nothing limits them.
fn pods_fitting(pool: &PoolSpec, free: &Free, per_pod: &[(ResourceId, Amount)]) -> u64 {
    let mut fit = u64::MAX;
    for &(r, a) in per_pod {
        let f = free.free[r.index()];
        if a.milli() > 0 && f != Amount::MAX {
            fit = fit.min((f.milli().max(0) / a.milli()) as u64);
        }
    }
    let mut offset = 0;
    for device in &pool.devices {
        let cards = &free.cards[offset..offset + device.cards as usize];
        offset += device.cards as usize;
        let amount = amount_of(per_pod, device.resource).milli();
        if amount <= 0 {
            continue;
        }
        let per_card = device.per_card.milli();
        let on_cards = if amount <= per_card {
            cards
                .iter()
                .map(|c| (c.milli().max(0) / amount) as u64)
                .sum()
        } else if per_card > 0 && amount % per_card == 0 {
            let whole = cards.iter().filter(|c| **c == device.per_card).count() as u64;
            whole / (amount / per_card) as u64
        } else {
            0
        };
        fit = fit.min(on_cards);
    }
    fit
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: ResourceId = ResourceId(0);

    /// Two blocks; block b1 has racks r1 (2 nodes) and r2 (1 node), block
    /// b2 has rack r1 (1 node); 8 GPUs a node.
    fn capacity() -> Capacity {
        let pool = |nodes| PoolSpec {
            flavor: FlavorId(0),
            nodes,
            allocatable: vec![(GPU, Amount::from_units(8))],
            min_nodes: nodes,
            max_nodes: nodes,
            devices: Vec::new(),
            names: Vec::new(),
        };
        let mut capacity = Capacity::new(1, 1, &[pool(2), pool(1), pool(1)]);
        let labels = |block: &str, rack: &str| {
            BTreeMap::from([
                ("block".to_string(), block.to_string()),
                ("rack".to_string(), rack.to_string()),
            ])
        };
        capacity.label_pools(&[labels("b1", "r1"), labels("b1", "r2"), labels("b2", "r1")]);
        capacity
    }

    fn levels() -> Vec<String> {
        ["block", "rack", HOSTNAME_LABEL]
            .iter()
            .map(|l| l.to_string())
            .collect()
    }

    fn place(capacity: &Capacity, level: usize, pods: u32) -> Result<Vec<u32>, DomainMiss> {
        let levels = levels();
        let request = LevelRequest {
            levels: &levels,
            level,
        };
        let per_pod = [(GPU, Amount::from_units(4))];
        let placed = capacity.place_in_domain(
            &mut Scratch::default(),
            0,
            FlavorId(0),
            request,
            pods,
            &per_pod,
            &mut By::BestFit,
        )?;
        let mut nodes: Vec<u32> = placed
            .iter()
            .flat_map(|p| std::iter::repeat_n(p.node, p.pods as usize))
            .collect();
        nodes.sort();
        Ok(nodes)
    }

    #[test]
    fn the_fitting_rack_with_least_room_is_taken() {
        // 2 pods fit in rack b1/r2 (1 node) and b2/r1: b1/r2 sorts first.
        assert_eq!(place(&capacity(), 1, 2), Ok(vec![2, 2]));
        // 3 pods fit only in rack b1/r1 (2 nodes).
        assert_eq!(place(&capacity(), 1, 3), Ok(vec![0, 0, 1]));
    }

    #[test]
    fn a_pod_set_no_rack_holds_waits_but_fits_a_block() {
        assert_eq!(
            place(&capacity(), 1, 5),
            Err(DomainMiss {
                largest: 4,
                domains: 3
            })
        );
        assert_eq!(place(&capacity(), 0, 5), Ok(vec![0, 0, 1, 1, 2]));
    }

    #[test]
    fn each_node_is_a_hostname_domain() {
        assert_eq!(place(&capacity(), 2, 2), Ok(vec![0, 0]));
        assert_eq!(
            place(&capacity(), 2, 3),
            Err(DomainMiss {
                largest: 2,
                domains: 4
            })
        );
    }

    /// Scores a node 1 when its rack label is `rack`, else 0.
    struct PreferRack(&'static str);

    impl super::super::Scorer for PreferRack {
        fn score(
            &mut self,
            _per_pod: &[(ResourceId, Amount)],
            candidates: &[super::super::Candidate<'_>],
        ) -> Option<Vec<super::super::NodeScore>> {
            Some(
                candidates
                    .iter()
                    .map(|c| super::super::NodeScore {
                        score: f64::from(u8::from(
                            c.labels.get("rack").map(String::as_str) == Some(self.0),
                        )),
                        card: None,
                    })
                    .collect(),
            )
        }
    }

    #[test]
    fn a_scorer_picks_the_domain_of_the_node_it_ranks_first() {
        let levels = levels();
        let per_pod = [(GPU, Amount::from_units(4))];
        let place = |scorer: &mut PreferRack, level, pods| {
            let mut by = By::Score { scorer, salt: 7 };
            let request = LevelRequest {
                levels: &levels,
                level,
            };
            capacity()
                .place_in_topology(
                    &mut Scratch::default(),
                    0,
                    FlavorId(0),
                    request,
                    level == 1,
                    pods,
                    &per_pod,
                    &mut by,
                )
                .map(|p| p.iter().map(|p| p.node).collect::<Vec<_>>())
        };
        // Best fit takes b1/r2 for 2 pods; a scorer preferring rack r1
        // takes an r1 rack (b1/r1: nodes 0-1, or b2/r1: node 3).
        let nodes = place(&mut PreferRack("r1"), 1, 2).unwrap();
        assert!(
            nodes.iter().all(|&n| n == 3) || nodes.iter().all(|&n| n <= 1),
            "{nodes:?}"
        );
        // 3 pods fit only in b1/r1, whatever the scorer prefers.
        let nodes = place(&mut PreferRack("r2"), 1, 3).unwrap();
        assert!(nodes.iter().all(|&n| n <= 1), "{nodes:?}");
        // 5 pods fit in no rack: a required rack request is refused.
        assert!(place(&mut PreferRack("r2"), 1, 5).is_err());
    }

    #[test]
    fn a_preferred_level_no_domain_holds_widens_to_the_next_level() {
        let levels = levels();
        let request = LevelRequest {
            levels: &levels,
            level: 1,
        };
        let per_pod = [(GPU, Amount::from_units(4))];
        let mut scratch = Scratch::default();
        let placed = capacity()
            .place_in_topology(
                &mut scratch,
                0,
                FlavorId(0),
                request,
                false,
                5,
                &per_pod,
                &mut By::BestFit,
            )
            .unwrap();
        // No rack holds 5 pods; block b1 (nodes 0-2) does.
        assert!(placed.iter().all(|p| p.node <= 2), "{placed:?}");
        let required = capacity().place_in_topology(
            &mut Scratch::default(),
            0,
            FlavorId(0),
            request,
            true,
            5,
            &per_pod,
            &mut By::BestFit,
        );
        assert_eq!(
            required.map(|_| ()),
            Err(DomainMiss {
                largest: 4,
                domains: 3
            })
        );
    }

    #[test]
    fn nodes_without_the_labels_are_in_no_domain() {
        let mut capacity = capacity();
        capacity.label_pools(&[BTreeMap::new()]);
        // Rack b1/r1 lost its labels: 3 pods fit in no rack now.
        assert_eq!(place(&capacity, 1, 3).map_err(|m| m.domains), Err(2));
    }

    #[test]
    fn pods_fitting_counts_card_shares_and_whole_cards() {
        let milli = ResourceId(0);
        let pool = PoolSpec {
            flavor: FlavorId(0),
            nodes: 1,
            allocatable: vec![(milli, Amount::from_units(4000))],
            min_nodes: 1,
            max_nodes: 1,
            devices: vec![super::super::DeviceSpec {
                resource: milli,
                cards: 4,
                per_card: Amount::from_units(1000),
            }],
            names: Vec::new(),
        };
        let capacity = Capacity::new(1, 1, std::slice::from_ref(&pool));
        let free = capacity.flavors[0].nodes[0].free.clone();
        let ask = |units| [(milli, Amount::from_units(units))];
        assert_eq!(pods_fitting(&pool, &free, &ask(300)), 12);
        assert_eq!(pods_fitting(&pool, &free, &ask(2000)), 2);
        assert_eq!(pods_fitting(&pool, &free, &ask(1500)), 0);
    }
}
