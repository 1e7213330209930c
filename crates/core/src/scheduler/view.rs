//! The two ways out of the scheduler, both read-only: [`HookState`], what
//! a policy hook may read (per-queue aggregates and the configuration,
//! never another workload, never a node), and the drivers' façade, the
//! read methods on [`Scheduler`] below (quota usage, flavors' nodes) by
//! which the simulator and the operator report what the scheduler holds
//! without reaching into its quota tree or capacity.
//!
//! It never changes the scheduler and never exposes a part of it whole:
//! what a hook can see is what `HookState`'s methods return.

use crate::model::cluster::{
    Cluster, ClusterQueueId, CohortId, FlavorId, FlavorResource, LocalQueueId, ResourceId,
};
use crate::model::Amount;

use super::assign;
use super::capacity::{Fragmentation, PoolSpec, TypicalShape};
use super::history::{Estimate, TypicalPod};
use super::workload::PodSetRequest;
use super::Scheduler;

/// What a policy hook may read of the scheduler: the configuration, and
/// per ClusterQueue its quota usage, fair-sharing weight and share, decayed
/// usage, counts and typical pods, and per LocalQueue its runtime estimate.
/// A hook request carries one beside the workload it is about; no other
/// workload, no node and no way to change anything is reachable from it.
#[derive(Clone, Copy)]
pub struct HookState<'a> {
    scheduler: &'a Scheduler,
}

impl Scheduler {
    /// The read-only state a policy hook is given.
    pub fn hook_state(&self) -> HookState<'_> {
        HookState { scheduler: self }
    }
}

impl<'a> HookState<'a> {
    /// The configuration in force.
    pub fn cluster(self) -> &'a Cluster {
        self.scheduler.cluster()
    }
    /// What `cq` uses now of a flavor's resource.
    pub fn usage(self, cq: ClusterQueueId, fr: FlavorResource) -> Amount {
        self.scheduler.usage(cq, fr)
    }
    /// `cq`'s fair-sharing weight now.
    pub fn fair_weight(self, cq: ClusterQueueId) -> f64 {
        self.scheduler.fair_weights()[cq.index()]
    }
    /// `cq`'s dominant resource share now ([`Scheduler::dominant_share`]).
    pub fn dominant_share(self, cq: ClusterQueueId) -> f64 {
        self.scheduler.dominant_share(cq)
    }
    /// `cq`'s decayed GPU usage ([`Scheduler::decayed_usage`]).
    pub fn decayed_usage(self, cq: ClusterQueueId) -> f64 {
        self.scheduler.decayed_usage(cq)
    }
    /// Workloads admitted in `cq` now.
    pub fn admitted_count(self, cq: ClusterQueueId) -> usize {
        self.scheduler.admitted_count(cq)
    }
    /// Workloads waiting in `cq` now.
    pub fn pending_count(self, cq: ClusterQueueId) -> usize {
        self.scheduler.pending_count(cq)
    }
    /// The LocalQueue's runtime estimate ([`Scheduler::estimate`]).
    pub fn estimate(self, lq: LocalQueueId) -> Option<Estimate> {
        self.scheduler.estimate(lq)
    }
    /// The typical pods of `cq` ([`Scheduler::typical_pods`]).
    pub fn typical_pods(self, cq: ClusterQueueId) -> Vec<TypicalPod> {
        self.scheduler.typical_pods(cq)
    }
    /// The flavors `cq` lists, in its order (resource group by resource group).
    pub fn flavors(self, cq: ClusterQueueId) -> &'a [FlavorId] {
        &self.scheduler.flavors_of[cq.index()]
    }
    /// The flavors of `cq`, in its order, that pod set `ps` may use: its
    /// node selector and required node affinity allow their node labels,
    /// and it (or the flavor) tolerates their taints — the flavors flavor
    /// assignment does not exclude for it.
    pub fn eligible_flavors(self, cq: ClusterQueueId, ps: &PodSetRequest) -> Vec<FlavorId> {
        assign::eligible_flavors(self.cluster(), self.flavors(cq), ps)
    }
}

/// The drivers' façade: what the simulator and the operator read of quota
/// and nodes, for reports, statuses, metrics and device assignment.
impl Scheduler {
    /// What `cq` uses now of a flavor's resource.
    pub fn usage(&self, cq: ClusterQueueId, fr: FlavorResource) -> Amount {
        self.quota().usage(cq, fr)
    }
    /// `cq`'s nominal quota of a flavor's resource.
    pub fn nominal(&self, cq: ClusterQueueId, fr: FlavorResource) -> Amount {
        self.quota().nominal(cq, fr)
    }
    /// What `cq` uses above its nominal quota (borrowed from its cohort).
    pub fn borrowed(&self, cq: ClusterQueueId, fr: FlavorResource) -> Amount {
        self.quota().borrowed(cq, fr)
    }
    /// What the cohort's subtree uses of a flavor's resource.
    pub fn cohort_usage(&self, cohort: CohortId, fr: FlavorResource) -> Amount {
        self.quota().cohort_usage(cohort, fr)
    }
    /// Does the flavor have node pools?
    pub fn has_pools(&self, flavor: FlavorId) -> bool {
        self.capacity().has_pools(flavor)
    }
    /// Ready nodes of the flavor.
    pub fn ready_nodes(&self, flavor: FlavorId) -> u32 {
        self.capacity().ready_nodes(flavor)
    }
    /// (used, total) of `resource` over the flavor's ready nodes; `None` if
    /// its nodes do not limit it.
    pub fn node_usage(&self, flavor: FlavorId, resource: ResourceId) -> Option<(Amount, Amount)> {
        self.capacity().usage(flavor, resource)
    }
    /// The pool node `node` of `flavor` belongs to, and whether it is
    /// ready; `None` past the last node.
    pub fn node(&self, flavor: FlavorId, node: u32) -> Option<(&PoolSpec, bool)> {
        self.capacity().node(flavor, node)
    }
    /// The name of node `node` of `flavor`, if the driver named it.
    pub fn node_name(&self, flavor: FlavorId, node: u32) -> Option<&str> {
        self.capacity().node_name(flavor, node)
    }
    /// The topology labels of node `node` of `flavor`: its pool's, as the
    /// driver gave them (`Scheduler::label_pools`); empty if none.
    pub fn node_labels(
        &self,
        flavor: FlavorId,
        node: u32,
    ) -> Option<&std::collections::BTreeMap<String, String>> {
        self.capacity().node_labels(flavor, node)
    }
    /// The resources the flavor's pools hold per card.
    pub fn device_resources(&self, flavor: FlavorId) -> Vec<ResourceId> {
        self.capacity().device_resources(flavor)
    }
    /// The fragmentation of device `resource` over the flavor's ready nodes
    /// for the `typical` pods ([`super::capacity::Capacity::fragmentation`]).
    pub fn fragmentation(
        &self,
        flavor: FlavorId,
        resource: ResourceId,
        typical: &[TypicalShape<'_>],
    ) -> Option<Fragmentation> {
        self.capacity().fragmentation(flavor, resource, typical)
    }
}

#[cfg(test)]
mod tests {
    use crate::model::cluster::FlavorId;
    use crate::model::{Amount, Millis};
    use crate::scheduler::hooks::DefaultHooks;
    use crate::scheduler::tests::{cluster, workload};
    use crate::scheduler::{Input, Scheduler};

    #[test]
    fn the_hook_state_and_the_facade_read_what_the_scheduler_holds() {
        let cluster = cluster(4);
        let mut scheduler = Scheduler::new(cluster.clone(), &[]);
        let train = workload(&cluster, "ns-a", "train", 3, 0);
        scheduler.step(
            Millis::from_secs(1),
            vec![Input::Submit(train)],
            &mut DefaultHooks,
        );
        let cq = cluster.cluster_queue_id("cq-a").expect("cq-a");
        let a100 = cluster.flavor_id("a100").expect("a100");
        let gpu = cluster.resource_id("nvidia.com/gpu").expect("gpu");
        let fr = cluster.flavor_resource(a100, gpu);
        let state = scheduler.hook_state();
        assert_eq!(state.usage(cq, fr), Amount::from_units(3));
        assert_eq!(scheduler.usage(cq, fr), Amount::from_units(3));
        assert_eq!(scheduler.nominal(cq, fr), Amount::from_units(4));
        assert_eq!(scheduler.borrowed(cq, fr), Amount::ZERO);
        assert_eq!(state.admitted_count(cq), 1);
        assert_eq!(state.pending_count(cq), 0);
        assert_eq!(state.fair_weight(cq), scheduler.fair_weights()[cq.index()]);
        assert!(std::ptr::eq(state.cluster(), scheduler.cluster()));
        assert!(!scheduler.has_pools(FlavorId(0)));
    }
}
