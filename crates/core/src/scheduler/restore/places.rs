//! Where a restored or reconfigured workload's pods are: placements by
//! names ([`NamedPlacement`]: named nodes found by name, anonymous ones by
//! index), kept where they still hold and placed again best-fit otherwise.

use crate::model::cluster::Cluster;
use crate::model::Amount;
use crate::scheduler::capacity::{By, Capacity, Scratch};
use crate::scheduler::workload::{CardUse, Placement, PodSetFlavors, Workload};
use crate::scheduler::Scheduler;

use super::{per_pod_ids, resource_name};

/// A [`Placement`] by names, so it can be found again in another
/// configuration: flavor, node (by name where the driver named its nodes,
/// else by index), per-pod requests, pods, and what they hold per card
/// (resource name, card, amount).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct NamedPlacement {
    pub(super) pod_set: u32,
    pub(super) flavor: String,
    pub(super) node: NodeKey,
    pub(super) per_pod: Vec<(String, Amount)>,
    pub(super) pods: u32,
    pub(super) cards: Vec<(String, u16, Amount)>,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum NodeKey {
    Name(String),
    Index(u32),
}

pub(super) fn named_placements(
    cluster: &Cluster,
    capacity: &Capacity,
    placements: &[Placement],
) -> Vec<NamedPlacement> {
    placements
        .iter()
        .map(|p| NamedPlacement {
            pod_set: p.pod_set,
            flavor: cluster
                .flavors
                .get(p.flavor.index())
                .map(|f| f.name.clone())
                .unwrap_or_default(),
            node: match capacity.node_name(p.flavor, p.node) {
                Some(name) => NodeKey::Name(name.to_string()),
                None => NodeKey::Index(p.node),
            },
            per_pod: p
                .per_pod
                .iter()
                .map(|&(r, a)| (resource_name(cluster, r), a))
                .collect(),
            pods: p.pods,
            cards: p
                .cards
                .iter()
                .map(|u| (resource_name(cluster, u.resource), u.card, u.amount))
                .collect(),
        })
        .collect()
}

impl Scheduler {
    /// Best-fit node placements for those pod sets on the capacity as it is
    /// now. Pods no node has room for any more are left unplaced (the
    /// cluster already runs them; the core only stops counting their room).
    pub(super) fn place_all(
        &self,
        workload: &Workload,
        flavors: &[PodSetFlavors],
        counts: &[u32],
    ) -> Vec<Placement> {
        // Fresh per workload: every earlier one is committed to the capacity already.
        let scratch = &mut Scratch::default();
        let mut placements = Vec::new();
        for (i, ((ps, chosen), &count)) in workload
            .pod_sets
            .iter()
            .zip(flavors)
            .zip(counts)
            .enumerate()
        {
            if let Some(&(_, f)) = chosen.flavors.first() {
                if let Some(placed) = self.capacity.place(
                    scratch,
                    i as u32,
                    &[f],
                    count,
                    &ps.per_pod,
                    &mut By::BestFit,
                ) {
                    placements.extend(placed);
                }
            }
        }
        placements
    }

    /// `named` in this configuration's ids, if every node is still there,
    /// ready, with room for its pods.
    pub(super) fn kept_placements(&self, named: &[NamedPlacement]) -> Option<Vec<Placement>> {
        let placements = named
            .iter()
            .map(|p| {
                let per_pod = per_pod_ids(&self.cluster, &p.per_pod).ok()?;
                let cards = p
                    .cards
                    .iter()
                    .map(|(name, card, amount)| {
                        Some(CardUse {
                            resource: self.cluster.resource_id(name)?,
                            card: *card,
                            amount: *amount,
                        })
                    })
                    .collect::<Option<Vec<_>>>()?;
                let flavor = self.cluster.flavor_id(&p.flavor)?;
                let node = match &p.node {
                    NodeKey::Name(name) => self.capacity.node_named(flavor, name)?,
                    NodeKey::Index(node) => *node,
                };
                Some(Placement {
                    pod_set: p.pod_set,
                    flavor,
                    node,
                    per_pod,
                    pods: p.pods,
                    cards,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        self.capacity.has_room(&placements).then_some(placements)
    }

    /// Placements for a workload read back: each pod set's recorded ones
    /// where they still hold (its nodes there by name with room, every
    /// admitted pod placed on its flavor, cards holding exactly what the
    /// pods ask: a record edited by hand cannot make capacity appear), the
    /// other pod sets placed best-fit.
    pub(super) fn restored_placements(
        &mut self,
        workload: &Workload,
        flavors: &[PodSetFlavors],
        counts: &[u32],
        named: &[NamedPlacement],
    ) -> Vec<Placement> {
        let mut kept = Vec::new();
        let mut rest = counts.to_vec();
        for (i, chosen) in flavors.iter().enumerate() {
            let mine: Vec<NamedPlacement> = named
                .iter()
                .filter(|p| p.pod_set as usize == i)
                .cloned()
                .collect();
            let Some(flavor) = chosen.flavors.first().map(|&(_, f)| f) else {
                continue;
            };
            if mine.is_empty() || !self.capacity.has_pools(flavor) {
                continue;
            }
            let Some(placements) = self.kept_placements(&mine) else {
                continue;
            };
            let devices = self.capacity.device_resources(flavor);
            let whole = placements.iter().all(|p| {
                p.flavor == flavor
                    && p.per_pod.iter().all(|&(r, a)| {
                        !devices.contains(&r)
                            || p.cards
                                .iter()
                                .filter(|u| u.resource == r)
                                .map(|u| u.amount)
                                .sum::<Amount>()
                                == a.saturating_mul(p.pods as i64)
                    })
            }) && placements.iter().map(|p| p.pods).sum::<u32>() == counts[i];
            if whole {
                self.capacity.commit(&placements);
                kept.extend(placements);
                rest[i] = 0;
            }
        }
        let placed = self.place_all(workload, flavors, &rest);
        self.capacity.release(&kept);
        kept.extend(placed);
        kept
    }
}
