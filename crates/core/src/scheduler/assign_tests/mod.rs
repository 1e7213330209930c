//! What flavor assignment promises: flavors tried in listed (or preferred)
//! order, node selectors and taints excluding flavors, quota deciding
//! Fit / Preempt / NoFit, `flavorFungibility` deciding where the search
//! stops, partial counts, quota shared by pod sets, and physical capacity
//! from node pools — each with the exact flavors, usage, borrowing and
//! `not_fit` problems. Workloads come from jobs through `intake`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Toleration,
};

use super::*;
use crate::jobs::{JobInfo, PodSetInfo};
use crate::model::cluster::tests::build;
use crate::scheduler::capacity::PoolSpec;
use crate::scheduler::intake::{intake, Intake};

/// Flavors in this order: cpu-nodes 0, a100 1, h100 2, spot 3, managed 4.
/// `ml` and `lender` share cohort `gpu` (16 a100 GPUs between them); `ml`
/// lists a100, h100, spot for GPUs and cpu-nodes for CPU. `solo` has no
/// cohort. FUNGIBILITY is replaced by each test.
const CLUSTER: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: cpu-nodes}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
spec: {nodeLabels: {gpu: a100, zone: east}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: h100}
spec: {nodeLabels: {gpu: h100, zone: west}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {gpu: spot}
  nodeTaints:
  - {key: preemptible, value: "yes", effect: PreferNoSchedule}
  - {key: spot, value: "true", effect: NoSchedule}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: managed}
spec:
  nodeTaints: [{key: dedicated, value: ml, effect: NoExecute}]
  tolerations: [{key: dedicated, operator: Exists}]
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
spec:
  cohort: gpu
  flavorFungibility: FUNGIBILITY
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}
    - {name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}
    - {name: spot, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}
  - coveredResources: [cpu]
    flavors:
    - {name: cpu-nodes, resources: [{name: cpu, nominalQuota: 64}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: lender}
spec:
  cohort: gpu
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: solo}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: managed, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: team, name: ml}
spec: {clusterQueue: ml}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: team, name: solo}
spec: {clusterQueue: solo}
"#;

const GPU: &str = "nvidia.com/gpu";

fn units(n: i64) -> Amount {
    Amount::from_units(n)
}

/// A cluster with its quota tree and node pools, as `Scheduler::new` makes them.
struct Fixture {
    cluster: Cluster,
    quota: QuotaTree,
    capacity: Capacity,
}

/// A node pool: flavor, ready nodes, per-node allocatable in whole units.
type Pool<'a> = (&'a str, u32, &'a [(&'a str, i64)]);

impl Fixture {
    /// `fungibility`: the ml queue's `flavorFungibility` (`{}` for Kueue's defaults).
    fn new(fungibility: &str, pools: &[Pool<'_>]) -> Fixture {
        let cluster = build(&CLUSTER.replace("FUNGIBILITY", fungibility));
        let pools: Vec<PoolSpec> = pools
            .iter()
            .map(|&(flavor, nodes, allocatable)| PoolSpec {
                flavor: flavor_id(&cluster, flavor),
                nodes,
                allocatable: allocatable
                    .iter()
                    .map(|&(r, n)| (resource_id(&cluster, r), units(n)))
                    .collect(),
                min_nodes: nodes,
                max_nodes: nodes,
                devices: Vec::new(),
                names: Vec::new(),
            })
            .collect();
        let quota = QuotaTree::new(&cluster);
        let capacity = Capacity::new(cluster.flavors.len(), cluster.resources.len(), &pools);
        Fixture {
            cluster,
            quota,
            capacity,
        }
    }

    fn kueue() -> Fixture {
        Fixture::new("{}", &[])
    }

    fn flavor(&self, name: &str) -> FlavorId {
        flavor_id(&self.cluster, name)
    }

    fn fr(&self, flavor: &str, resource: &str) -> FlavorResource {
        self.cluster
            .flavor_resource(self.flavor(flavor), resource_id(&self.cluster, resource))
    }

    /// Charges `n` units of `resource` in `flavor` to ClusterQueue `cq`, as an admitted workload would.
    fn charge(&mut self, cq: &str, flavor: &str, resource: &str, n: i64) {
        let cq = self.cluster.cluster_queue_id(cq).expect("ClusterQueue");
        let fr = self.fr(flavor, resource);
        self.quota.add_usage(cq, fr, units(n));
    }

    /// `queue`'s workload (a Job in namespace `team`) with these pod sets.
    fn workload(&self, queue: &str, pod_sets: Vec<PodSetInfo>) -> Workload {
        let job = JobInfo {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            namespace: "team".into(),
            name: "train".into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            queue_name: Some(queue.into()),
            priority_class: None,
            pod_sets,
        };
        match intake(&self.cluster, &job, None) {
            Intake::Queued(workload) => workload,
            other => panic!("not queued: {other:?}"),
        }
    }

    fn assign(
        &self,
        workload: &Workload,
        preferred: Option<&[&str]>,
        counts: Option<&[u32]>,
    ) -> Assignment {
        // The preferred order for every pod set.
        let preferred: Vec<Option<Vec<FlavorId>>> = preferred
            .map(|names| names.iter().map(|n| self.flavor(n)).collect())
            .map_or_else(Vec::new, |order| vec![Some(order); workload.pod_sets.len()]);
        let ctx = Context {
            cluster: &self.cluster,
            quota: &self.quota,
            capacity: &self.capacity,
            oracle: None,
        };
        assign(&ctx, workload.cluster_queue, workload, &preferred, counts)
    }

    /// Per pod set: (resource, flavor) by name.
    fn chosen<'a>(&'a self, assignment: &Assignment) -> Vec<Vec<(&'a str, &'a str)>> {
        assignment
            .pod_sets
            .iter()
            .map(|ps| {
                ps.flavors
                    .iter()
                    .map(|&(r, f)| {
                        (
                            self.cluster.resource_name(r),
                            self.cluster.flavors[f.index()].name.as_str(),
                        )
                    })
                    .collect()
            })
            .collect()
    }

    /// (flavor, resource, amount) by name, in the assignment's order.
    fn usage<'a>(&'a self, assignment: &Assignment) -> Vec<(&'a str, &'a str, Amount)> {
        assignment
            .usage
            .iter()
            .map(|&(fr, amount)| {
                let (f, r) = self.cluster.split(fr);
                (
                    self.cluster.flavors[f.index()].name.as_str(),
                    self.cluster.resource_name(r),
                    amount,
                )
            })
            .collect()
    }

    /// The quota problem of `flavor` for GPUs, with these numbers.
    #[allow(clippy::too_many_arguments)]
    fn gpu_quota(
        &self,
        flavor: &str,
        need: i64,
        available: i64,
        nominal: i64,
        borrowed: i64,
        cohort_lend: Option<i64>,
        potential: i64,
    ) -> Problem {
        Problem::Quota {
            flavor: self.flavor(flavor),
            resource: resource_id(&self.cluster, GPU),
            need: units(need),
            available: units(available),
            nominal: units(nominal),
            borrowed: units(borrowed),
            cohort_lend: cohort_lend.map(units),
            potential: units(potential),
        }
    }
}

fn flavor_id(cluster: &Cluster, name: &str) -> FlavorId {
    cluster
        .flavor_id(name)
        .unwrap_or_else(|| panic!("no flavor {name}"))
}

fn resource_id(cluster: &Cluster, name: &str) -> ResourceId {
    cluster
        .resource_id(name)
        .unwrap_or_else(|| panic!("no resource {name}"))
}

/// `count` pods, each requesting these whole units.
fn pods(name: &str, count: u32, requests: &[(&str, i64)]) -> PodSetInfo {
    PodSetInfo {
        name: name.into(),
        count,
        min_count: None,
        requests: requests
            .iter()
            .map(|&(r, n)| (r.to_string(), units(n)))
            .collect(),
        node_selector: BTreeMap::new(),
        required_node_affinity: None,
        tolerations: Vec::new(),
        template_path: None,
        topology: None,
    }
}

fn selecting(mut pod_set: PodSetInfo, key: &str, value: &str) -> PodSetInfo {
    pod_set.node_selector.insert(key.into(), value.into());
    pod_set
}

fn tolerating(mut pod_set: PodSetInfo, toleration: Toleration) -> PodSetInfo {
    pod_set.tolerations.push(toleration);
    pod_set
}

fn not_fit(pod_set: usize, problems: Vec<Problem>) -> Option<NotFit> {
    Some(NotFit { pod_set, problems })
}

mod capacity;
mod fungibility;
mod node_constraints;
mod order;
mod pod_sets;
mod quota;
