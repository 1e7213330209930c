//! Building each hook's input from what its request lets it read ([`HookState`]): the
//! workload views, and only the context views (queue, ClusterQueue, tenant,
//! cohort, quota maps) that some matching policy reads; a tenant's
//! policies get only its own part of a weight batch; a placement request's
//! nodes. Called by `hooks`.
//! It never evaluates a policy and never changes the state it reads.

use std::sync::Arc;

use crate::compiled::Bundle;
use crate::view::{build, *};
use crate::wasm::Hook;
use arbiter_core::model::cluster::ClusterQueueId;
use arbiter_core::model::Millis;
use arbiter_core::scheduler::hooks::{
    AdmissionRequest, AutoscaleRequest, FlavorRequest, PlacementRequest, WeightRequest,
};
use arbiter_core::scheduler::HookState;

/// `build()` when a matching policy reads the view, else its empty default.
fn built_if<T: Default>(read: bool, build: impl FnOnce() -> T) -> T {
    if read {
        build()
    } else {
        T::default()
    }
}

pub(super) fn workload_name(w: &WorkloadView) -> String {
    format!("{}/{}", w.namespace, w.name)
}

/// The admission request's views: the workload, and the context views in `reads`.
pub(super) fn admission_input(request: &AdmissionRequest<'_>, reads: Reads) -> AdmissionInput {
    let state = request.state;
    let entry = request.entry;
    let cluster = state.cluster();
    let cq = entry.workload.cluster_queue;
    let flavors = entry
        .workload
        .pod_sets
        .iter()
        .zip(request.flavors)
        .map(|(ps, f)| {
            (
                ps.name.clone(),
                f.flavors
                    .iter()
                    .map(|&(r, fl)| {
                        (
                            cluster.resource_name(r).to_string(),
                            build::flavor_name(state, fl),
                        )
                    })
                    .collect(),
            )
        })
        .collect();
    let mut workload = build::workload(state, entry, request.now);
    workload.flavors = build::flavor_names(state, request.flavors);
    AdmissionInput {
        workload,
        queue: built_if(reads.queue, || build::queue(state, entry)),
        cluster_queue: built_if(reads.cluster_queue, || {
            build::cluster_queue(state, cq, reads.quotas)
        }),
        tenant: built_if(reads.tenant, || {
            build::tenant(state, &entry.workload.namespace)
        }),
        cohort: built_if(reads.cohort, || build::cohort(state, cq)),
        flavors,
        borrowing: request.borrowing,
        now: build::seconds(request.now),
        params: serde_json::Value::Null,
    }
}

/// The context views the `hook` policies of `bundles` read, together.
pub(super) fn reads<'b>(bundles: impl IntoIterator<Item = &'b Arc<Bundle>>, hook: Hook) -> Reads {
    bundles
        .into_iter()
        .flat_map(|b| b.policies.iter())
        .filter(|p| p.hook == hook)
        .fold(Reads::default(), |reads, p| reads.union(p.reads()))
}

/// The weight batch's views: the workloads, and the context maps in `reads`.
pub(super) fn weight_input(batch: &[WeightRequest<'_>], reads: Reads) -> WeightInput {
    let state = batch[0].state;
    let now = batch[0].now;
    let mut input = WeightInput {
        now: build::seconds(now),
        ..WeightInput::default()
    };
    for r in batch {
        let w = build::workload(state, r.entry, now);
        let wl = &r.entry.workload;
        if reads.queue {
            input
                .queues
                .entry(format!("{}/{}", w.namespace, w.queue_name))
                .or_insert_with(|| build::queue(state, r.entry));
        }
        if reads.cluster_queue && !input.cluster_queues.contains_key(&w.cluster_queue) {
            input.cluster_queues.insert(
                w.cluster_queue.clone(),
                build::cluster_queue(state, wl.cluster_queue, reads.quotas),
            );
        }
        if reads.tenant && !input.tenants.contains_key(&w.namespace) {
            input
                .tenants
                .insert(w.namespace.clone(), build::tenant(state, &w.namespace));
        }
        input.workloads.push(w);
    }
    input
}

/// The part of a weight batch the policies of tenant `namespace` see
/// (docs/design.md §3), and where each of its workloads is in the batch
/// (indices into `input.workloads`): only its own workloads and the queue,
/// namespace and ClusterQueue views those workloads use — never another
/// namespace's workloads, labels, annotations or LocalQueues, nor a
/// ClusterQueue none of its workloads is in. The one place a tenant's
/// weight input is made.
pub(super) fn tenant_weight_input(
    input: &WeightInput,
    namespace: &str,
) -> (WeightInput, Vec<usize>) {
    let own: Vec<usize> = (0..input.workloads.len())
        .filter(|&i| input.workloads[i].namespace == namespace)
        .collect();
    let mut view = WeightInput {
        now: input.now,
        ..WeightInput::default()
    };
    for &i in &own {
        let w = &input.workloads[i];
        let queue = format!("{}/{}", w.namespace, w.queue_name);
        if let Some(q) = input.queues.get(&queue) {
            view.queues.entry(queue).or_insert_with(|| q.clone());
        }
        if let Some(cq) = input.cluster_queues.get(&w.cluster_queue) {
            view.cluster_queues
                .entry(w.cluster_queue.clone())
                .or_insert_with(|| cq.clone());
        }
        if let Some(t) = input.tenants.get(&w.namespace) {
            view.tenants
                .entry(w.namespace.clone())
                .or_insert_with(|| t.clone());
        }
        view.workloads.push(w.clone());
    }
    (view, own)
}

/// The flavor request's views: the workload, the context views in `reads`,
/// and the candidate flavors' names.
pub(super) fn flavor_input(request: &FlavorRequest<'_>, reads: Reads, now: Millis) -> FlavorInput {
    let state = request.state;
    let entry = request.entry;
    FlavorInput {
        workload: build::workload(state, entry, now),
        queue: built_if(reads.queue, || build::queue(state, entry)),
        cluster_queue: built_if(reads.cluster_queue, || {
            build::cluster_queue(state, request.cluster_queue, reads.quotas)
        }),
        tenant: built_if(reads.tenant, || {
            build::tenant(state, &entry.workload.namespace)
        }),
        candidates: request
            .candidates
            .iter()
            .map(|&f| build::flavor_name(state, f))
            .collect(),
        now: build::seconds(now),
        params: serde_json::Value::Null,
    }
}

/// The placement request's views: the workload, its pod and pod set, the
/// flavor, the candidate nodes and the ClusterQueue's typical pods.
pub(super) fn placement_input(request: &PlacementRequest<'_>) -> PlacementInput {
    let state = request.state;
    let entry = request.entry;
    // One flavor when every candidate serves it (the scheduler asks per
    // flavor today); with candidates of several, each node names its own.
    let flavor = match request.candidates.split_first() {
        Some((first, rest)) if rest.iter().all(|c| c.flavor == first.flavor) => {
            build::flavor_name(state, first.flavor)
        }
        _ => String::new(),
    };
    PlacementInput {
        workload: build::workload(state, entry, request.now),
        pod_set: entry
            .workload
            .pod_sets
            .get(request.pod_set)
            .map(|ps| ps.name.clone())
            .unwrap_or_default(),
        pod: build::pod(state, request.per_pod),
        nodes: request
            .candidates
            .iter()
            .map(|c| build::node(state, c))
            .collect(),
        typical: build::typical(state, entry.workload.cluster_queue),
        flavor,
        now: build::seconds(request.now),
        params: serde_json::Value::Null,
    }
}

/// Every ClusterQueue's view, in id order; the quota maps (the costly
/// part) only with `quotas`.
pub(super) fn cluster_queue_views(state: HookState<'_>, quotas: bool) -> Vec<ClusterQueueView> {
    (0..state.cluster().cluster_queues.len())
        .map(|i| build::cluster_queue(state, ClusterQueueId(i as u32), quotas))
        .collect()
}

/// The view of each flavor the autoscale request is about, in its order.
pub(super) fn flavor_views(request: &AutoscaleRequest<'_>) -> Vec<FlavorView> {
    request
        .flavors
        .iter()
        .map(|l| FlavorView {
            name: build::flavor_name(request.state, l.flavor),
            nodes: l.nodes,
            min_nodes: l.min_nodes,
            max_nodes: l.max_nodes,
            utilization: l.utilization,
            pending_nodes: l.pending_nodes,
            target_utilization: l.target_utilization,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::tenant_weight_input;
    use crate::view::tests::full_workload;
    use crate::view::{QueueView, TenantView, WeightInput, WorkloadView};

    fn workload(namespace: &str, queue: &str) -> WorkloadView {
        WorkloadView {
            namespace: namespace.into(),
            queue_name: queue.into(),
            ..full_workload()
        }
    }

    fn queue(namespace: &str, name: &str) -> QueueView {
        QueueView {
            name: name.into(),
            namespace: namespace.into(),
            priority: None,
            cluster_queue: "gpu".into(),
        }
    }

    #[test]
    fn a_tenant_sees_only_its_own_workloads_queues_and_namespace() {
        let input = WeightInput {
            workloads: vec![
                workload("other", "theirs"),
                workload("mine", "q"),
                workload("other", "theirs"),
                workload("mine", "q"),
            ],
            queues: BTreeMap::from([
                ("mine/q".into(), queue("mine", "q")),
                ("other/theirs".into(), queue("other", "theirs")),
            ]),
            tenants: BTreeMap::from([
                ("mine".into(), TenantView::default()),
                ("other".into(), TenantView::default()),
            ]),
            now: 5.0,
            ..WeightInput::default()
        };
        let (view, own) = tenant_weight_input(&input, "mine");
        assert_eq!(own, vec![1, 3]);
        assert_eq!(view.workloads.len(), 2);
        assert!(view.workloads.iter().all(|w| w.namespace == "mine"));
        assert_eq!(view.queues.keys().collect::<Vec<_>>(), ["mine/q"]);
        assert_eq!(view.tenants.keys().collect::<Vec<_>>(), ["mine"]);
        assert_eq!(view.now, 5.0);
        let (view, own) = tenant_weight_input(&input, "nobody");
        assert!(own.is_empty() && view.workloads.is_empty() && view.queues.is_empty());
    }
}
