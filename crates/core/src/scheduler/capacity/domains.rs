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
    /// `scratch`, all inside one domain of `request`'s level: the fitting
    /// domain with the least room (Kueue's BestFit), best fit inside it.
    /// The placements are pod set `pod_set`'s.
    pub fn place_in_domain(
        &self,
        scratch: &mut Scratch,
        pod_set: u32,
        flavor: FlavorId,
        request: LevelRequest<'_>,
        pods: u32,
        per_pod: &[(ResourceId, Amount)],
    ) -> Result<Vec<Placement>, DomainMiss> {
        let miss = DomainMiss {
            largest: 0,
            domains: 0,
        };
        if self.pooled_in(scratch, &[flavor]).is_empty() {
            return Err(miss);
        }
        let domains = self.domains(scratch, flavor, request, per_pod);
        let mut best: Option<(u64, &Vec<usize>)> = None;
        for (room, nodes) in domains.values() {
            if *room >= u64::from(pods) && best.is_none_or(|(b, _)| *room < b) {
                best = Some((*room, nodes));
            }
        }
        let Some((_, nodes)) = best else {
            return Err(DomainMiss {
                largest: domains.values().map(|(room, _)| *room).max().unwrap_or(0),
                domains: domains.len(),
            });
        };
        // Only the domain's nodes are offered to the best fit.
        let all = &scratch.free[&flavor];
        let mut only: Vec<Option<Free>> = vec![None; all.len()];
        for &node in nodes {
            only[node] = all[node].clone();
        }
        let mut inside = Scratch::default();
        inside.free.insert(flavor, only);
        let placed = self
            .place(
                &mut inside,
                pod_set,
                &[flavor],
                pods,
                per_pod,
                &mut By::BestFit,
            )
            .ok_or(miss)?;
        let after = &inside.free[&flavor];
        let free = scratch.free.get_mut(&flavor).ok_or(miss)?;
        for &node in nodes {
            free[node] = after[node].clone();
        }
        Ok(placed)
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
