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
        let preferred: Option<Vec<FlavorId>> =
            preferred.map(|names| names.iter().map(|n| self.flavor(n)).collect());
        let ctx = Context {
            cluster: &self.cluster,
            quota: &self.quota,
            capacity: &self.capacity,
            oracle: None,
        };
        assign(
            &ctx,
            workload.cluster_queue,
            workload,
            preferred.as_deref(),
            counts,
        )
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

// ---------------------------------------------------------------- order

#[test]
fn first_listed_flavor_with_room_is_chosen() {
    let f = Fixture::kueue();
    let w = f.workload("ml", vec![pods("main", 2, &[(GPU, 2)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    assert_eq!(f.usage(&a), [("a100", GPU, units(4))]);
    assert!(!a.borrowing);
    assert_eq!(a.not_fit, None);
    assert_eq!(a.counts, [2]);
    assert!(a.placements.is_empty(), "no node pools: no placement");
}

#[test]
fn each_resource_group_gets_its_own_flavor() {
    let f = Fixture::kueue();
    let w = f.workload("ml", vec![pods("main", 3, &[("cpu", 2), (GPU, 1)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    // Groups in the ClusterQueue's order: GPUs first, then CPU.
    assert_eq!(f.chosen(&a), [[(GPU, "a100"), ("cpu", "cpu-nodes")]]);
    // Usage sorted by (flavor, resource): cpu-nodes is flavor 0.
    assert_eq!(
        f.usage(&a),
        [("cpu-nodes", "cpu", units(6)), ("a100", GPU, units(3))]
    );
}

#[test]
fn a_flavor_short_of_quota_gives_way_to_the_next_listed_one() {
    let mut f = Fixture::kueue();
    f.charge("lender", "a100", GPU, 8);
    f.charge("ml", "a100", GPU, 8);
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 4)])]);
    let a = f.assign(&w, None, None);
    // a100 would need preemption; whenCanPreempt defaults to TryNextFlavor.
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
    assert_eq!(f.usage(&a), [("h100", GPU, units(4))]);
    assert_eq!(a.not_fit, None);
}

#[test]
fn preferred_order_replaces_the_listed_order_and_drops_unlisted_flavors() {
    let f = Fixture::kueue();
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 2)])]);
    let a = f.assign(&w, Some(&["h100", "a100"]), None);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
    // Flavors of other groups (or none of the queue's) in the list are ignored.
    let a = f.assign(&w, Some(&["managed", "spot", "a100"]), None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    // A flavor left out of the preferred order is not tried at all.
    let a = f.assign(&w, Some(&["cpu-nodes"]), None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(f.chosen(&a), [Vec::<(&str, &str)>::new()]);
    assert!(a.usage.is_empty());
    assert_eq!(a.not_fit, not_fit(0, Vec::new()));
}

// ---------------------------------------------------------------- node constraints

#[test]
fn node_selector_excludes_flavors_whose_labels_disagree() {
    let f = Fixture::kueue();
    let w = f.workload(
        "ml",
        vec![selecting(pods("main", 1, &[(GPU, 2)]), "gpu", "h100")],
    );
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
    // A key no flavor defines cannot be judged: it excludes nothing.
    let w = f.workload(
        "ml",
        vec![selecting(pods("main", 1, &[(GPU, 2)]), "rack", "r1")],
    );
    assert_eq!(f.chosen(&f.assign(&w, None, None)), [[(GPU, "a100")]]);
    // When nothing fits, each excluded flavor says so, in the order tried.
    let w = f.workload(
        "ml",
        vec![selecting(pods("main", 1, &[(GPU, 10)]), "gpu", "h100")],
    );
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(
        a.not_fit,
        not_fit(
            0,
            vec![
                Problem::Excluded {
                    flavor: f.flavor("a100")
                },
                f.gpu_quota("h100", 10, 8, 8, 0, Some(0), 8),
                Problem::Excluded {
                    flavor: f.flavor("spot")
                },
            ]
        )
    );
}

#[test]
fn required_node_affinity_excludes_flavors() {
    let f = Fixture::kueue();
    let mut pod_set = pods("main", 1, &[(GPU, 2)]);
    pod_set.required_node_affinity = Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: "zone".into(),
                operator: "NotIn".into(),
                values: Some(vec!["east".into()]),
            }]),
            match_fields: None,
        }],
    });
    let w = f.workload("ml", vec![pod_set]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
}

#[test]
fn a_taint_needs_a_toleration_from_the_pod_set_or_the_flavor() {
    let f = Fixture::kueue();
    let on_spot = || selecting(pods("main", 1, &[(GPU, 1)]), "gpu", "spot");
    let a = f.assign(&f.workload("ml", vec![on_spot()]), None, None);
    assert_eq!(a.mode, Mode::NoFit);
    // The index is into the flavor's nodeTaints: the PreferNoSchedule one is not judged.
    assert_eq!(
        a.not_fit,
        not_fit(
            0,
            vec![
                Problem::Excluded {
                    flavor: f.flavor("a100")
                },
                Problem::Excluded {
                    flavor: f.flavor("h100")
                },
                Problem::Taint {
                    flavor: f.flavor("spot"),
                    taint: 1
                },
            ]
        )
    );
    let wrong_value = Toleration {
        key: Some("spot".into()),
        operator: Some("Equal".into()),
        value: Some("false".into()),
        ..Toleration::default()
    };
    let a = f.assign(
        &f.workload("ml", vec![tolerating(on_spot(), wrong_value)]),
        None,
        None,
    );
    assert_eq!(a.mode, Mode::NoFit);
    let exists = Toleration {
        key: Some("spot".into()),
        operator: Some("Exists".into()),
        ..Toleration::default()
    };
    let a = f.assign(
        &f.workload("ml", vec![tolerating(on_spot(), exists)]),
        None,
        None,
    );
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "spot")]]);
    // `managed` tolerates its own NoExecute taint (tolerations it injects).
    let a = f.assign(
        &f.workload("solo", vec![pods("main", 1, &[(GPU, 1)])]),
        None,
        None,
    );
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "managed")]]);
}

// ---------------------------------------------------------------- quota

#[test]
fn more_than_any_flavor_could_ever_give_is_nofit_with_every_reason() {
    let f = Fixture::kueue();
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 20)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert!(a.usage.is_empty());
    assert!(!a.borrowing);
    // a100: 8 own + 8 the lender lends; h100: 8 own, nothing to borrow.
    assert_eq!(
        a.not_fit,
        not_fit(
            0,
            vec![
                f.gpu_quota("a100", 20, 16, 8, 0, Some(8), 16),
                f.gpu_quota("h100", 20, 8, 8, 0, Some(0), 8),
                Problem::Taint {
                    flavor: f.flavor("spot"),
                    taint: 1
                },
            ]
        )
    );
}

#[test]
fn quota_problem_counts_what_is_borrowed_and_what_the_cohort_can_lend() {
    let mut f = Fixture::new("{whenCanPreempt: MayStopSearch}", &[]);
    f.charge("ml", "a100", GPU, 12);
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 6)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Preempt);
    assert_eq!(
        a.not_fit,
        not_fit(0, vec![f.gpu_quota("a100", 6, 4, 8, 4, Some(4), 16)])
    );
    // Without a cohort there is nothing to lend.
    let w = f.workload("solo", vec![pods("main", 1, &[(GPU, 6)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(
        a.not_fit,
        not_fit(0, vec![f.gpu_quota("managed", 6, 4, 4, 0, None, 4)])
    );
}

// ---------------------------------------------------------------- fungibility

#[test]
fn borrowing_stops_the_search_by_default() {
    let f = Fixture::kueue();
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 12)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    assert_eq!(f.usage(&a), [("a100", GPU, units(12))]);
    assert!(a.borrowing, "12 is above a100's nominal 8");
    // Exactly the nominal quota is not borrowing.
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 8)])]);
    assert!(!f.assign(&w, None, None).borrowing);
}

#[test]
fn when_can_borrow_try_next_flavor_prefers_a_flavor_without_borrowing() {
    let mut f = Fixture::new("{whenCanBorrow: TryNextFlavor}", &[]);
    f.charge("ml", "a100", GPU, 4);
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 6)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
    assert!(!a.borrowing);
    // The same workload under Kueue's default stays on a100, borrowing.
    let mut kueue = Fixture::kueue();
    kueue.charge("ml", "a100", GPU, 4);
    let a = kueue.assign(&w, None, None);
    assert_eq!(kueue.chosen(&a), [[(GPU, "a100")]]);
    assert!(a.borrowing);
    // With no flavor that fits without borrowing, the first that borrows is kept.
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 10)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    assert!(a.borrowing);
    assert_eq!(a.not_fit, None);
}

#[test]
fn preemption_keeps_searching_for_a_fit_by_default() {
    let mut f = Fixture::kueue();
    f.charge("lender", "a100", GPU, 8);
    f.charge("ml", "a100", GPU, 4);
    // a100 has 4 left: 6 needs preemption, h100 fits.
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 6)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
    assert_eq!(a.not_fit, None);
    // With h100 half used too, 8 fits nowhere now; both could hold it after
    // preemption (it is within their nominal 8): the first is kept.
    f.charge("ml", "h100", GPU, 4);
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 8)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Preempt);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    assert_eq!(f.usage(&a), [("a100", GPU, units(8))]);
    assert!(
        !a.borrowing,
        "borrowing is only judged where the flavor fits"
    );
    assert_eq!(
        a.not_fit,
        not_fit(
            0,
            vec![
                f.gpu_quota("a100", 8, 4, 8, 0, Some(0), 16),
                f.gpu_quota("h100", 8, 4, 8, 0, Some(0), 8),
                Problem::Taint {
                    flavor: f.flavor("spot"),
                    taint: 1
                },
            ]
        )
    );
}

#[test]
fn preemption_is_tried_only_for_a_request_within_nominal_quota() {
    // Kueue: flavorassigner.go fitsResourceQuota — preemption is simulated
    // only when `nominal >= request`, a subtree smaller than the whole
    // cohort tree holds the request, or the queue may preempt while
    // borrowing; flavorassigner_test "when borrowing while preemption is
    // needed for flavor one, fair sharing enabled, reclaimWithinCohort=Never".
    let mut f = Fixture::kueue();
    f.charge("lender", "a100", GPU, 8);
    f.charge("ml", "a100", GPU, 4);
    // 12 is beyond a100's nominal 8 (a100 could hold it after preemption in
    // the cohort, 16) and beyond all h100 ever has: no flavor.
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 12)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(f.chosen(&a), [Vec::<(&str, &str)>::new()]);
    assert!(a.usage.is_empty());
}

#[test]
fn when_can_preempt_may_stop_search_stops_at_the_first_preemptible_flavor() {
    let mut f = Fixture::new("{whenCanPreempt: MayStopSearch}", &[]);
    f.charge("lender", "a100", GPU, 8);
    f.charge("ml", "a100", GPU, 4);
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 6)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Preempt);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    assert_eq!(
        a.not_fit,
        not_fit(0, vec![f.gpu_quota("a100", 6, 4, 8, 0, Some(0), 16)])
    );
}

// ---------------------------------------------------------------- pod sets and counts

#[test]
fn counts_replace_the_pod_sets_counts() {
    let f = Fixture::kueue();
    let w = f.workload(
        "ml",
        vec![
            pods("workers", 4, &[(GPU, 4)]),
            pods("driver", 1, &[(GPU, 1)]),
        ],
    );
    let whole = f.assign(&w, None, None);
    assert_eq!(whole.counts, [4, 1]);
    // The workers take all 16 a100 GPUs the cohort has; the driver moves on.
    assert_eq!(f.chosen(&whole), [[(GPU, "a100")], [(GPU, "h100")]]);
    assert_eq!(
        f.usage(&whole),
        [("a100", GPU, units(16)), ("h100", GPU, units(1))]
    );
    // Two workers: 8 + 1. A pod set past the end of `counts` keeps its own count.
    let partial = f.assign(&w, None, Some(&[2]));
    assert_eq!(partial.counts, [2, 1]);
    assert_eq!(partial.mode, Mode::Fit);
    assert_eq!(f.usage(&partial), [("a100", GPU, units(9))]);
    assert!(partial.borrowing);
    let partial = f.assign(&w, None, Some(&[1, 0]));
    assert_eq!(partial.counts, [1, 0]);
    assert_eq!(f.usage(&partial), [("a100", GPU, units(4))]);
    assert!(!partial.borrowing);
}

#[test]
fn pod_sets_share_the_quota_they_are_charged() {
    let two = |f: &Fixture| {
        f.workload(
            "ml",
            vec![pods("a", 1, &[(GPU, 6)]), pods("b", 1, &[(GPU, 6)])],
        )
    };
    let f = Fixture::kueue();
    let a = f.assign(&two(&f), None, None);
    // The second pod set needs 6 on top of the first's 6: 12 > 8 borrows.
    assert_eq!(f.chosen(&a), [[(GPU, "a100")], [(GPU, "a100")]]);
    assert_eq!(f.usage(&a), [("a100", GPU, units(12))]);
    assert!(a.borrowing);
    let f = Fixture::new("{whenCanBorrow: TryNextFlavor}", &[]);
    let a = f.assign(&two(&f), None, None);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")], [(GPU, "h100")]]);
    assert_eq!(
        f.usage(&a),
        [("a100", GPU, units(6)), ("h100", GPU, units(6))]
    );
    assert!(!a.borrowing);
}

#[test]
fn a_pod_set_with_no_flavor_explains_more_than_one_needing_preemption() {
    let mut f = Fixture::kueue();
    f.charge("lender", "a100", GPU, 8);
    f.charge("ml", "a100", GPU, 4);
    f.charge("ml", "h100", GPU, 4);
    let big = || pods("big", 1, &[(GPU, 8)]);
    let pinned = || selecting(pods("pinned", 1, &[(GPU, 1)]), "gpu", "b200");
    let excluded_everywhere = vec![
        Problem::Excluded {
            flavor: f.flavor("a100"),
        },
        Problem::Excluded {
            flavor: f.flavor("h100"),
        },
        Problem::Excluded {
            flavor: f.flavor("spot"),
        },
    ];
    let a = f.assign(&f.workload("ml", vec![big(), pinned()]), None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(f.chosen(&a), [vec![(GPU, "a100")], vec![]]);
    assert_eq!(f.usage(&a), [("a100", GPU, units(8))]);
    assert_eq!(a.not_fit, not_fit(1, excluded_everywhere.clone()));
    // The first pod set with no flavor keeps the explanation.
    let a = f.assign(&f.workload("ml", vec![pinned(), big()]), None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(a.not_fit, not_fit(0, excluded_everywhere));
}

// ---------------------------------------------------------------- physical capacity

#[test]
fn pods_are_placed_best_fit_on_the_flavors_nodes() {
    let f = Fixture::new("{}", &[("a100", 2, &[(GPU, 8)])]);
    let w = f.workload("ml", vec![pods("main", 2, &[(GPU, 4)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    // Both on node 0: the second pod goes to the fuller node.
    assert_eq!(
        a.placements,
        [Placement {
            pod_set: 0,
            flavor: f.flavor("a100"),
            node: 0,
            per_pod: vec![(resource_id(&f.cluster, GPU), units(4))],
            pods: 2,
            cards: Vec::new(),
        }]
    );
}

#[test]
fn quota_without_room_on_nodes_moves_on_or_reports_capacity() {
    let f = Fixture::new("{}", &[("a100", 1, &[(GPU, 6)])]);
    // Quota allows 2 × 4 on a100, but its one node holds one such pod.
    let w = f.workload("ml", vec![pods("main", 2, &[(GPU, 4)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(
        f.chosen(&a),
        [[(GPU, "h100")]],
        "h100 has no pools: unlimited"
    );
    assert!(a.placements.is_empty());
    let a = f.assign(&w, Some(&["a100"]), None);
    assert_eq!(a.mode, Mode::NoFit);
    assert!(a.usage.is_empty());
    assert_eq!(
        a.not_fit,
        not_fit(
            0,
            vec![Problem::Capacity {
                flavor: f.flavor("a100"),
                pods: 2,
                nodes: 1,
            }]
        )
    );
}

#[test]
fn later_pod_sets_see_the_nodes_earlier_ones_took() {
    let f = Fixture::new("{}", &[("a100", 1, &[(GPU, 8)])]);
    let w = f.workload(
        "ml",
        vec![pods("a", 1, &[(GPU, 6)]), pods("b", 1, &[(GPU, 6)])],
    );
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    // Quota would let b borrow on a100, but a left 2 GPUs on its only node.
    assert_eq!(f.chosen(&a), [[(GPU, "a100")], [(GPU, "h100")]]);
    assert_eq!(a.placements.len(), 1);
    assert_eq!((a.placements[0].node, a.placements[0].pods), (0, 1));
    assert!(!a.borrowing);
}

/// Kueue's `TestIsPreferred` (pkg/scheduler/flavorassigner/flavorassigner_test.go),
/// case by case.
#[test]
fn flavor_preference_ranks_modes_and_borrowing_levels_as_kueue() {
    use FlavorPreference::{BorrowingOverPreemption as BoP, PreemptionOverBorrowing as PoB};
    let r = |kind, level| Rank { kind, level };
    let cases = [
        // "feature gate disabled prioritises preemption"
        (r(Kind::Fit, 0), r(Kind::Preempt, 0), BoP, true),
        // "explicit BorrowingOverPreemption prioritises borrowing distance"
        (r(Kind::Preempt, 1), r(Kind::Fit, 2), BoP, false),
        // "explicit PreemptionOverBorrowing prioritises lower preemption"
        (r(Kind::Preempt, 1), r(Kind::Fit, 2), PoB, true),
        // "explicit PreemptionOverBorrowing breaks borrowing ties with preemption"
        (r(Kind::Preempt, 1), r(Kind::Fit, 1), PoB, false),
        // "… rejects no-candidate flavor before borrowing comparison"
        (r(Kind::NoCandidates, 1), r(Kind::Fit, 2), PoB, false),
        // "… prefers fit over shallower-borrowing no-candidate flavor"
        (r(Kind::Fit, 2), r(Kind::NoCandidates, 1), PoB, true),
        // "no-candidate flavor remains preferable to no-fit flavor"
        (r(Kind::NoCandidates, 1), r(Kind::NoFit, 0), BoP, true),
        // "no-fit flavor remains worse than no-candidate flavor"
        (r(Kind::NoFit, 0), r(Kind::NoCandidates, 1), BoP, false),
        // "no-candidate flavors retain borrowing preference" (and in reverse)
        (
            r(Kind::NoCandidates, 1),
            r(Kind::NoCandidates, 2),
            PoB,
            true,
        ),
        (
            r(Kind::NoCandidates, 2),
            r(Kind::NoCandidates, 1),
            PoB,
            false,
        ),
        // Reclaim ranks above preemption within the queue.
        (r(Kind::Reclaim, 0), r(Kind::Preempt, 0), BoP, true),
    ];
    for (a, b, preference, want) in cases {
        assert_eq!(
            is_preferred(a, b, preference),
            want,
            "{a:?} vs {b:?} under {preference:?}"
        );
    }
}
