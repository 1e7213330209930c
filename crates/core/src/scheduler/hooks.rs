//! The six policy hooks the core consults (docs/design.md §4): `admission`,
//! `weight`, `fairShare`, `autoscale`, `flavor`, `placement`. The core calls them with
//! typed, read-only views and never knows how they are implemented; the
//! built-in [`DefaultHooks`] give Kueue's behaviour, and the CEL/WASM
//! policy engine implements the same trait. Hooks must be deterministic.
//! Every request carries a [`HookState`] (`state`): what a hook may read
//! of the scheduler — quota usage, shares, decayed usage, counts and
//! estimates per queue — and nothing else.

use crate::model::cluster::{ClusterQueueId, FlavorId, ResourceId};
use crate::model::{Amount, Millis};

use super::capacity::{Candidate, NodeScore};
use super::entry::Entry;
use super::workload::PodSetFlavors;
use super::HookState;

/// What the admission hook sees: the workload, where it would go, and when.
pub struct AdmissionRequest<'a> {
    /// What the hook may read of the scheduler.
    pub state: HookState<'a>,
    /// The workload.
    pub entry: &'a Entry,
    /// The flavors it would get, per pod set.
    pub flavors: &'a [PodSetFlavors],
    /// Would it borrow quota from its cohort?
    pub borrowing: bool,
    /// The current time.
    pub now: Millis,
}

/// The admission hook's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum AdmissionVerdict {
    /// Admit it.
    Allow,
    /// Do not admit it now (or, unless `retryable`, ever).
    Deny {
        /// The deciding policy.
        policy: String,
        /// The policy's message.
        reason: String,
        /// `false`: the workload is rejected for good.
        retryable: bool,
        /// The tenant (namespace) whose own bundle denied it, if a tenant's.
        /// A tenant's denial never blocks a queue: the workload is set
        /// aside whatever the queueing strategy (docs/design.md §3).
        tenant: Option<String>,
    },
}

/// One workload to score; higher scores go first among equal priorities.
pub struct WeightRequest<'a> {
    /// What the hook may read of the scheduler.
    pub state: HookState<'a>,
    /// The workload.
    pub entry: &'a Entry,
    /// The current time.
    pub now: Millis,
}

/// A workload's place in its queue: the platform's score orders all
/// workloads; a tenant's score (from the tenant's own policies) only
/// permutes that tenant's workloads among the positions they hold, each
/// only with those asking the same (`queues` says what that guarantees).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Weight {
    /// The platform's score.
    pub score: f64,
    /// The tenant's score, if a tenant bundle scored it.
    pub tenant: Option<f64>,
}

/// Current shares, for the fair-share hook to turn into weights.
pub struct FairShareRequest<'a> {
    /// What the hook may read of the scheduler.
    pub state: HookState<'a>,
    /// Per ClusterQueue: dominant resource share now (0–1000 per mille of the tree's capacity).
    pub shares: &'a [f64],
    /// The current time.
    pub now: Millis,
}

/// Per flavor with node pools: nodes now, nodes wanted by pending work.
pub struct AutoscaleRequest<'a> {
    /// What the hook may read of the scheduler.
    pub state: HookState<'a>,
    /// Each flavor with node pools and its load.
    pub flavors: &'a [FlavorLoad],
    /// The current time.
    pub now: Millis,
}

/// One flavor with node pools: its nodes and how busy they are.
#[derive(Clone, Debug, PartialEq)]
pub struct FlavorLoad {
    /// The flavor.
    pub flavor: FlavorId,
    /// Its nodes now.
    pub nodes: u32,
    /// Fewest nodes its pools may have.
    pub min_nodes: u32,
    /// Most nodes its pools may have.
    pub max_nodes: u32,
    /// Fraction (0–1) of the flavor's node capacity in use, dominant resource.
    pub utilization: f64,
    /// Nodes' worth of requests waiting because capacity (not quota) is short.
    pub pending_nodes: f64,
    /// Target utilisation in percent from the ClusterQueues using the flavor.
    pub target_utilization: f64,
}

impl FlavorLoad {
    /// Nodes needed to run what runs and waits at the target utilisation, within bounds.
    pub(crate) fn to_target(&self) -> u32 {
        let target = (self.target_utilization / 100.0).clamp(0.01, 1.0);
        let busy_nodes = self.utilization * self.nodes as f64 + self.pending_nodes;
        let wanted = (busy_nodes / target).ceil() as u32;
        wanted.clamp(self.min_nodes, self.max_nodes.max(self.min_nodes))
    }
}

/// The flavor hook's answer: the flavors to try, in order — or, with
/// `by_placement`, the flavors a workload may use, each pod set trying
/// those it may use in the order of where the placement hook would put one
/// of its pods: the flavor of the node it scores highest first, so
/// placement, not the listed order, chooses among them (flavors it fits no
/// node of keep their order, last). Without an answer, the same ranking
/// over the ClusterQueue's flavors applies when [`Hooks::places_workload`]
/// says a placement policy takes the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct FlavorOrder {
    /// The flavors, in order.
    pub flavors: Vec<FlavorId>,
    /// Order them by where the placement hook would put the first pod.
    pub by_placement: bool,
}

impl From<Vec<FlavorId>> for FlavorOrder {
    fn from(flavors: Vec<FlavorId>) -> FlavorOrder {
        FlavorOrder {
            flavors,
            by_placement: false,
        }
    }
}

/// What the flavor hook sees: the workload and the flavors its ClusterQueue lists.
pub struct FlavorRequest<'a> {
    /// What the hook may read of the scheduler.
    pub state: HookState<'a>,
    /// The workload.
    pub entry: &'a Entry,
    /// Its ClusterQueue.
    pub cluster_queue: ClusterQueueId,
    /// Flavors the ClusterQueue lists, in order.
    pub candidates: &'a [FlavorId],
}

/// One pod of an admitted workload to place, and the nodes of its flavor
/// it fits on (every limited resource, and per card where the node holds
/// devices). Asked pod by pod, each seeing the pods placed before it.
pub struct PlacementRequest<'a> {
    /// What the hook may read of the scheduler.
    pub state: HookState<'a>,
    /// The workload.
    pub entry: &'a Entry,
    /// Index into the workload's pod sets.
    pub pod_set: usize,
    /// What the pod requests.
    pub per_pod: &'a [(ResourceId, Amount)],
    /// The nodes it fits on.
    pub candidates: &'a [Candidate<'a>],
    /// The current time.
    pub now: Millis,
}

/// The decision points of the scheduler. Every method's default is Kueue's
/// behaviour, so an implementation states only what it decides otherwise.
pub trait Hooks {
    /// A scheduler call (cycle, timers, autoscale) at `now` starts: the
    /// hooks of one call must see one consistent set of policies.
    fn begin(&mut self, _now: Millis) {}
    /// Did the policies in force change since the last time the scheduler
    /// asked (a bundle reloaded, added or removed)? A scheduling cycle asks
    /// right after its [`Hooks::begin`] and, if so, tries every set-aside
    /// workload again: a denial by the policies before may not hold. By
    /// default they never change.
    fn policies_changed(&mut self) -> bool {
        false
    }
    /// Admit all.
    fn admission(&mut self, _request: &AdmissionRequest<'_>) -> AdmissionVerdict {
        AdmissionVerdict::Allow
    }
    /// One weight per request, same order; by default no score.
    fn weight(&mut self, batch: &[WeightRequest<'_>]) -> Vec<Weight> {
        vec![Weight::default(); batch.len()]
    }
    /// Weight per ClusterQueue (index = ClusterQueueId); by default the configured ones.
    fn fair_share(&mut self, request: &FairShareRequest<'_>) -> Vec<f64> {
        request
            .state
            .cluster()
            .cluster_queues
            .iter()
            .map(|cq| cq.fair_weight)
            .collect()
    }
    /// Desired node count per flavor of `request.flavors`, same order; by
    /// default what reaches the target utilisation within bounds.
    fn autoscale(&mut self, request: &AutoscaleRequest<'_>) -> Vec<u32> {
        request.flavors.iter().map(FlavorLoad::to_target).collect()
    }
    /// Preferred flavor order, or `None` for the default: placement's
    /// order where a placement policy takes the workload
    /// ([`Hooks::places_workload`]), else the listed order.
    fn flavor(&mut self, _request: &FlavorRequest<'_>) -> Option<FlavorOrder> {
        None
    }
    /// May [`Hooks::flavor`] answer anything but `None` in this call? While
    /// it may not, the scheduler reuses a ClusterQueue's last flavor
    /// assignment for a head that asks the same as the last one, against
    /// an unchanged cohort tree, instead of assigning again. An
    /// implementation that overrides `flavor` says when it would answer;
    /// the default is that it may.
    fn orders_flavors(&self) -> bool {
        true
    }
    /// A score per candidate node (same order; higher is better), or
    /// `None` for the built-in best fit (the default). Asked only when
    /// [`Hooks::places`] says so: before flavor assignment, once per pod
    /// set over the nodes of every flavor it may use, to rank those
    /// flavors (`flavor_order`; when [`Hooks::places_workload`] says so and
    /// two or more of them have nodes); at admission, per pod, to choose
    /// the nodes and cards — whether the pods fit at all is decided
    /// before, best-fit. If the pods do not all fit the way the scores
    /// place them, the best-fit placement stands.
    fn placement(&mut self, _request: &PlacementRequest<'_>) -> Option<Vec<NodeScore>> {
        None
    }
    /// May [`Hooks::placement`] answer anything but `None` in this call?
    /// By default it never does, and pods are placed best-fit.
    fn places(&self) -> bool {
        false
    }
    /// May [`Hooks::placement`] answer for this workload (a placement
    /// policy in force takes it)? Then, unless [`Hooks::flavor`] gives an
    /// order, the flavors it may use are tried in the order of where
    /// placement would put it. By default: [`Hooks::places`].
    fn places_workload(&self, _state: HookState<'_>, _entry: &Entry) -> bool {
        self.places()
    }
}

/// Kueue's behaviour: admit all, no score, configured weights, listed
/// flavor order; autoscaling to target utilisation within bounds.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultHooks;

impl Hooks for DefaultHooks {
    fn orders_flavors(&self) -> bool {
        false
    }
}
