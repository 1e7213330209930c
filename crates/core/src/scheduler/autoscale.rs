//! Autoscaling (docs/design.md §2 `autoscaling`, §4 the autoscale hook): per flavor
//! with node pools used by an autoscaling ClusterQueue, what runs and what
//! waits for nodes (not quota), the hook's desired node count within the
//! bounds, and the plan the driver carries out — nodes to provision (their
//! readiness comes back as `Input::NodeReady`) and idle nodes the core has
//! stopped using. Never places a pod.

use crate::model::cluster::{Cluster, ClusterQueueId, FlavorId, ResourceId};
use crate::model::{Amount, Millis};

use super::capacity::PoolSpec;
use super::hooks::{AutoscaleRequest, FlavorLoad, Hooks};
use super::Scheduler;

/// Which way a flavor's node pool should move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleKind {
    /// Provision `nodes` more; each comes back as `Input::NodeReady` when ready.
    Up,
    /// `nodes` idle nodes were taken out of use; the driver may delete them.
    Down,
}

/// One line of the autoscale plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleRequest {
    /// The flavor to scale.
    pub flavor: FlavorId,
    /// Up or down.
    pub kind: ScaleKind,
    /// Nodes to add or remove.
    pub nodes: u32,
}

/// Whether the scheduler plans autoscaling, and per flavor the nodes a
/// scale-up asked for that are not ready yet.
///
/// What it guarantees: a flavor's in-flight count grows only by what a
/// scale-up asks and shrinks by what comes ready or is given up, never
/// below zero; a flavor it does not know (beyond the configuration's) is
/// ignored — answered `false`, never a panic. What it never does: place
/// pods or count ready nodes (that is `Capacity`).
#[derive(Debug)]
pub(super) struct Provisioning {
    /// Does any ClusterQueue with node pools enable autoscaling?
    enabled: bool,
    /// Per flavor: nodes asked for by a scale-up that are not ready yet.
    in_flight: Vec<u32>,
}

impl Provisioning {
    /// Nothing in flight for `cluster`'s flavors; autoscaling planned if a
    /// ClusterQueue enables it and there are node pools.
    pub fn new(cluster: &Cluster, pools: &[PoolSpec]) -> Provisioning {
        Provisioning {
            enabled: cluster
                .cluster_queues
                .iter()
                .any(|cq| cq.autoscaling.is_some())
                && !pools.is_empty(),
            in_flight: vec![0; cluster.flavors.len()],
        }
    }

    /// Whether autoscaling is planned at all.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether `flavor` is one of the configuration's.
    #[inline]
    pub fn knows(&self, flavor: FlavorId) -> bool {
        flavor.index() < self.in_flight.len()
    }

    /// Nodes of `flavor` asked for and not ready yet.
    #[inline]
    pub fn in_flight(&self, flavor: FlavorId) -> u32 {
        self.in_flight[flavor.index()]
    }

    /// A scale-up of `flavor` asked for `nodes` more.
    #[inline]
    pub fn asked(&mut self, flavor: FlavorId, nodes: u32) {
        self.in_flight[flavor.index()] += nodes;
    }

    /// A node of `flavor` came ready: one fewer in flight. Whether the flavor is known.
    #[inline]
    pub fn node_ready(&mut self, flavor: FlavorId) -> bool {
        self.done(flavor, 1)
    }

    /// `nodes` of `flavor` are no longer in flight. Whether the flavor is known.
    pub fn done(&mut self, flavor: FlavorId, nodes: u32) -> bool {
        match self.in_flight.get_mut(flavor.index()) {
            Some(in_flight) => {
                *in_flight = in_flight.saturating_sub(nodes);
                true
            }
            None => false,
        }
    }

    /// Takes over what `old` (under `old_cluster`) had in flight, by flavor
    /// name, into this one's flavors of `cluster`.
    pub fn carry_over(&mut self, cluster: &Cluster, old: &Provisioning, old_cluster: &Cluster) {
        for (i, flavor) in old_cluster.flavors.iter().enumerate() {
            if let Some(new) = cluster.flavor_id(&flavor.name) {
                self.in_flight[new.index()] = old.in_flight[i];
            }
        }
    }
}

impl Scheduler {
    /// Asks the autoscale hook and turns its answer into the plan: scale up by
    /// what is wanted beyond ready and provisioning nodes; scale down only
    /// with nothing provisioning, by removing idle nodes.
    pub(super) fn plan_autoscale(
        &mut self,
        now: Millis,
        hooks: &mut dyn Hooks,
    ) -> Vec<ScaleRequest> {
        if !self.provisioning.enabled() {
            return Vec::new();
        }
        let mut plan = Vec::new();
        for (flavor, ready, desired) in self.desired_nodes(now, hooks) {
            let in_flight = self.provisioning.in_flight(flavor);
            if desired > ready + in_flight {
                let nodes = desired - ready - in_flight;
                self.provisioning.asked(flavor, nodes);
                plan.push(ScaleRequest {
                    flavor,
                    kind: ScaleKind::Up,
                    nodes,
                });
            } else if desired < ready && in_flight == 0 {
                let mut nodes = 0;
                while nodes < ready - desired && self.capacity.remove_idle_node(flavor) {
                    nodes += 1;
                }
                if nodes > 0 {
                    plan.push(ScaleRequest {
                        flavor,
                        kind: ScaleKind::Down,
                        nodes,
                    });
                }
            }
        }
        plan
    }

    /// Asks the autoscale hook for node counts of flavors whose ClusterQueues enable autoscaling.
    /// Returns (flavor, ready nodes, desired nodes).
    fn desired_nodes(&self, now: Millis, hooks: &mut dyn Hooks) -> Vec<(FlavorId, u32, u32)> {
        hooks.begin(now);
        let mut loads = Vec::new();
        for flavor in self.capacity.pooled_flavors() {
            let users: Vec<_> = self
                .cluster
                .cluster_queues
                .iter()
                .zip(&self.flavors_of)
                .filter(|(cq, flavors)| cq.autoscaling.is_some() && flavors.contains(&flavor))
                .map(|(cq, _)| cq)
                .collect();
            if users.is_empty() {
                continue;
            }
            let (pool_min, pool_max) = self.capacity.node_bounds(flavor);
            let min = users
                .iter()
                .filter_map(|cq| cq.autoscaling.and_then(|a| a.min_replicas))
                .max()
                .unwrap_or(pool_min)
                .max(pool_min);
            let max = users
                .iter()
                .filter_map(|cq| cq.autoscaling.and_then(|a| a.max_replicas))
                .min()
                .unwrap_or(pool_max)
                .min(pool_max);
            let target = users
                .iter()
                .filter_map(|cq| cq.autoscaling.map(|a| a.target_utilization))
                .fold(f64::INFINITY, f64::min);
            let nodes = self.capacity.ready_nodes(flavor);
            let mut utilization: f64 = 0.0;
            let mut pending_nodes = 0.0;
            for r in 0..self.cluster.resources.len() {
                let r = ResourceId(r as u16);
                let Some((used, total)) = self.capacity.usage(flavor, r) else {
                    continue;
                };
                if total.is_zero() {
                    continue;
                }
                utilization = utilization.max(used.as_f64() / total.as_f64());
                let per_node = self
                    .capacity
                    .node_allocatable(flavor, r)
                    .unwrap_or(Amount::ZERO);
                if per_node.is_zero() {
                    continue;
                }
                // Only the waiting workloads of queues that list the flavor: O(pending), not O(all).
                let waiting: Amount = (0..self.queues.len())
                    .filter(|&q| self.flavors_of[q].contains(&flavor))
                    .flat_map(|q| self.queues.waiting(ClusterQueueId(q as u32)))
                    .map(|id| &self.workloads[id])
                    // One its own tenant holds back asks for no nodes (as if absent).
                    .filter(|e| e.reason.waits_for_capacity() && !e.held_by_tenant)
                    .flat_map(|e| e.workload.pod_sets.iter().map(move |ps| ps.total(r)))
                    .sum();
                pending_nodes = f64::max(pending_nodes, waiting.as_f64() / per_node.as_f64());
            }
            loads.push(FlavorLoad {
                flavor,
                nodes,
                min_nodes: min,
                max_nodes: max,
                utilization,
                pending_nodes,
                target_utilization: target,
            });
        }
        if loads.is_empty() {
            return Vec::new();
        }
        let desired = hooks.autoscale(&AutoscaleRequest {
            state: self.hook_state(),
            flavors: &loads,
            now,
        });
        loads
            .iter()
            .zip(desired)
            .map(|(l, d)| {
                (
                    l.flavor,
                    l.nodes,
                    d.clamp(l.min_nodes, l.max_nodes.max(l.min_nodes)),
                )
            })
            .collect()
    }

    /// A node of `flavor` became ready (a scale-up done, or a node that appeared).
    pub(super) fn node_ready(&mut self, flavor: FlavorId) -> bool {
        if !self.provisioning.node_ready(flavor) {
            return false;
        }
        let added = self.capacity.add_node(flavor);
        if added {
            self.wake_all();
        }
        added
    }

    /// `nodes` of a scale-up of `flavor` are no longer in flight (their
    /// capacity, if any, comes with the driver's pools).
    pub(super) fn provisioning_done(&mut self, flavor: FlavorId, nodes: u32) {
        if self.provisioning.done(flavor, nodes) {
            self.wake_all();
        }
    }

    /// A node of `flavor` went away: one idle node leaves the capacity (a
    /// node with pods is never taken; their jobs fail through the driver).
    pub(super) fn node_removed(&mut self, flavor: FlavorId) -> bool {
        self.provisioning.knows(flavor) && self.capacity.remove_idle_node(flavor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cluster::tests::build;

    const CLUSTER: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: h100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq}
spec:
  autoscaling: {enabled: true, minReplicas: 1, maxReplicas: 4, targetUtilization: 50}
"#;

    #[test]
    fn in_flight_nodes_never_go_below_zero_and_unknown_flavors_are_ignored() {
        let cluster = build(CLUSTER);
        assert!(!Provisioning::new(&cluster, &[]).enabled());
        let mut p = Provisioning::new(&cluster, &[]);
        let (a100, h100, unknown) = (FlavorId(0), FlavorId(1), FlavorId(7));
        p.asked(a100, 3);
        assert_eq!((p.in_flight(a100), p.in_flight(h100)), (3, 0));
        assert!(p.node_ready(a100));
        assert!(p.done(a100, 5));
        assert_eq!(p.in_flight(a100), 0);
        assert!(p.node_ready(h100));
        assert_eq!(p.in_flight(h100), 0);
        assert!(!p.knows(unknown) && !p.node_ready(unknown) && !p.done(unknown, 1));
        // Carried over by flavor name: h100 is now the first flavor.
        p.asked(h100, 2);
        let swapped = CLUSTER
            .replace("a100", "tmp")
            .replace("h100", "a100")
            .replace("tmp", "h100");
        let reordered = build(&swapped);
        let mut next = Provisioning::new(&reordered, &[]);
        next.carry_over(&reordered, &p, &cluster);
        assert_eq!(
            (next.in_flight(FlavorId(0)), next.in_flight(FlavorId(1))),
            (2, 0)
        );
    }
}
