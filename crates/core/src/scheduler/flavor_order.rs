//! Which flavors each pod set of a head tries, in which order
//! (docs/design.md §4): the flavor hook's answer when a flavor policy
//! gives one (ranked by placement with `orderByPlacement`); else, when a
//! placement policy takes the workload, the flavors each pod set may use
//! (node selector, required affinity, tolerations) ranked by where
//! placement would put one of its pods; else the ClusterQueue's listed
//! order, Kueue's. Only the order is decided here: quota, borrowing and
//! `flavorFungibility` are applied over it by `assign` exactly as over the
//! listed order. Asked once per head assignment by `cycle` (not in each
//! round of the preemption oracle, nor for each count partial admission
//! tries); it never changes the scheduler.
//!
//! Each pod set is ranked by its own pod, so a launcher and its workers
//! each go where placement prefers them; a resource group tries the
//! ranked flavors it lists, in the ranked order (each node serves one
//! flavor, so that is the order of the group's flavors by their best
//! node).

use crate::model::cluster::{ClusterQueueId, FlavorId};

use super::assign;
use super::hooks::{FlavorRequest, Hooks};
use super::workload::WorkloadId;
use super::Scheduler;

/// Per pod set (by index), the flavors to try in order; `None`, or a pod
/// set past the end, tries the ClusterQueue's listed order.
pub(crate) type FlavorOrders = Vec<Option<Vec<FlavorId>>>;

impl Scheduler {
    /// The order each pod set of `id` (the head of `cq`) tries flavors in.
    /// Empty (the listed order everywhere) when the queue lists one
    /// flavor, or no flavor policy answers and no placement policy takes
    /// the workload.
    pub(super) fn flavor_orders(
        &self,
        cq: ClusterQueueId,
        id: WorkloadId,
        hooks: &mut dyn Hooks,
    ) -> FlavorOrders {
        let listed = &self.flavors_of[cq.index()];
        if listed.len() <= 1 {
            return FlavorOrders::new();
        }
        let entry = &self.workloads[id];
        let pod_sets = entry.workload.pod_sets.len();
        let answer = hooks.flavor(&FlavorRequest {
            state: self.hook_state(),
            entry,
            cluster_queue: cq,
            candidates: listed,
        });
        match answer {
            Some(order) if order.by_placement => (0..pod_sets)
                .map(|p| {
                    let ranked = self.ranked(id, p, &order.flavors, hooks);
                    Some(ranked.unwrap_or_else(|| order.flavors.clone()))
                })
                .collect(),
            Some(order) => vec![Some(order.flavors); pod_sets],
            None if hooks.places_workload(self.hook_state(), entry) => (0..pod_sets)
                .map(|p| self.ranked(id, p, listed, hooks))
                .collect(),
            None => FlavorOrders::new(),
        }
    }

    /// `flavors` as pod set `pod_set` of `id` tries them when placement
    /// chooses: those it may use ranked by where placement would put one
    /// of its pods, then the others in their order (they are excluded, and
    /// the reason says why). `None` — keep `flavors`' order — when there
    /// is nothing to choose (no pods, fewer than two flavors it may use
    /// have nodes) or placement does not answer.
    fn ranked(
        &self,
        id: WorkloadId,
        pod_set: usize,
        flavors: &[FlavorId],
        hooks: &mut dyn Hooks,
    ) -> Option<Vec<FlavorId>> {
        let ps = &self.workloads[id].workload.pod_sets[pod_set];
        if ps.count == 0 {
            return None;
        }
        let listed = &self.flavors_of[self.workloads[id].workload.cluster_queue.index()];
        let mut eligible = assign::eligible_flavors(&self.cluster, flavors, ps);
        eligible.retain(|f| listed.contains(f));
        let with_nodes = eligible
            .iter()
            .filter(|&&f| self.capacity.has_pools(f))
            .count();
        if with_nodes < 2 {
            return None;
        }
        let mut ranked = self.rank_by_placement(id, pod_set, &eligible, hooks)?;
        ranked.extend(flavors.iter().filter(|f| !eligible.contains(f)));
        Some(ranked)
    }
}

#[cfg(test)]
mod tests {
    //! Placement choosing the flavor with no flavor policy: the flavor of
    //! the node placement prefers, among those the pod set may use, with
    //! Kueue's quota and fungibility rules over that order; the listed
    //! order where no placement policy takes the workload; a flavor
    //! policy's answer first; one ranking per assignment.

    use std::collections::BTreeMap;
    use std::sync::Arc;

    use crate::jobs::{JobInfo, PodSetInfo};
    use crate::model::cluster::tests::build;
    use crate::model::cluster::{Cluster, FlavorId};
    use crate::model::{Amount, Millis};
    use crate::scheduler::capacity::{NodeScore, PoolSpec};
    use crate::scheduler::hooks::{
        DefaultHooks, FlavorOrder, FlavorRequest, Hooks, PlacementRequest,
    };
    use crate::scheduler::intake::{intake, Intake};
    use crate::scheduler::{Entry, HookState, Input, Scheduler, WorkloadId};

    /// `ml` lists t4 then a10 (8 GPUs of t4, A10 of a10) in cohort `all`,
    /// where `lender` lends LENDER a10 GPUs; FUNGIBILITY is `ml`'s
    /// `flavorFungibility`. LocalQueue `q` in `team` and `other`.
    const CLUSTER: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: t4}
spec: {nodeLabels: {gpu: t4}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a10}
spec: {nodeLabels: {gpu: a10}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
spec:
  cohort: all
  flavorFungibility: FUNGIBILITY
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: t4, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}
    - {name: a10, resources: [{name: nvidia.com/gpu, nominalQuota: A10}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: lender}
spec:
  cohort: all
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a10, resources: [{name: nvidia.com/gpu, nominalQuota: LENDER}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: team, name: q}
spec: {clusterQueue: ml}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: other, name: q}
spec: {clusterQueue: ml}
"#;

    const GPU: &str = "nvidia.com/gpu";

    /// Two nodes of 8 GPUs per flavor.
    fn scheduler(fungibility: &str, a10: u32, lender: u32) -> Scheduler {
        let yaml = CLUSTER
            .replace("FUNGIBILITY", fungibility)
            .replace("A10", &a10.to_string())
            .replace("LENDER", &lender.to_string());
        let cluster = Arc::new(build(&yaml));
        let gpu = cluster.resource_id(GPU).expect("GPUs are covered");
        let pools: Vec<PoolSpec> = ["t4", "a10"]
            .iter()
            .map(|name| PoolSpec {
                flavor: cluster.flavor_id(name).expect("flavor"),
                nodes: 2,
                allocatable: vec![(gpu, Amount::from_units(8))],
                min_nodes: 2,
                max_nodes: 2,
                devices: Vec::new(),
                names: Vec::new(),
            })
            .collect();
        Scheduler::new(cluster, &pools)
    }

    /// A pod set of `count` pods of `gpus` GPUs (at least `min_count`),
    /// on nodes labelled `selector` if given.
    fn pods(count: u32, gpus: i64, min_count: Option<u32>, selector: Option<&str>) -> PodSetInfo {
        PodSetInfo {
            name: format!("set-{gpus}"),
            count,
            min_count,
            requests: [(GPU.to_string(), Amount::from_units(gpus))].into(),
            node_selector: selector
                .map(|gpu| BTreeMap::from([("gpu".to_string(), gpu.to_string())]))
                .unwrap_or_default(),
            required_node_affinity: None,
            tolerations: Vec::new(),
            template_path: None,
            topology: None,
        }
    }

    /// Submits a Job of `pod_sets` in namespace `ns` in one step; the
    /// flavor each pod set was admitted on, or `None` if not admitted.
    fn admit(
        s: &mut Scheduler,
        ns: &str,
        pod_sets: Vec<PodSetInfo>,
        hooks: &mut dyn Hooks,
    ) -> Option<Vec<String>> {
        let job = JobInfo {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            namespace: ns.into(),
            name: "train".into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            queue_name: Some("q".into()),
            priority_class: None,
            pod_sets,
        };
        let workload = match intake(s.cluster(), &job, None) {
            Intake::Queued(w) => w,
            other => panic!("not queued: {other:?}"),
        };
        let step = s.step(Millis::from_secs(1), vec![Input::Submit(workload)], hooks);
        let id: WorkloadId = step.submitted[0];
        let admission = s.entry(id).admission.as_ref()?;
        let cluster: &Cluster = s.cluster();
        for p in &admission.placements {
            let ps = &admission.pod_sets[p.pod_set as usize];
            assert!(
                ps.flavors.iter().all(|&(_, f)| f == p.flavor),
                "pods are placed on their flavor's nodes"
            );
        }
        Some(
            admission
                .pod_sets
                .iter()
                .map(|ps| cluster.flavors[ps.flavors[0].1.index()].name.clone())
                .collect(),
        )
    }

    /// A placement policy scoring the nodes of `prefer[pod set]` 1 and
    /// others 0, taking only namespace `only` if given; the flavor hook
    /// answers `order` if given. Counts the rankings (asks over more
    /// than one flavor's nodes).
    struct Prefer {
        prefer: Vec<&'static str>,
        only: Option<&'static str>,
        order: Option<(Vec<&'static str>, bool)>,
        rankings: u32,
    }

    impl Prefer {
        fn new(prefer: &[&'static str]) -> Prefer {
            Prefer {
                prefer: prefer.to_vec(),
                only: None,
                order: None,
                rankings: 0,
            }
        }
    }

    impl Hooks for Prefer {
        fn flavor(&mut self, request: &FlavorRequest<'_>) -> Option<FlavorOrder> {
            let cluster = request.state.cluster();
            self.order
                .as_ref()
                .map(|(names, by_placement)| FlavorOrder {
                    flavors: names.iter().filter_map(|n| cluster.flavor_id(n)).collect(),
                    by_placement: *by_placement,
                })
        }
        fn orders_flavors(&self) -> bool {
            self.order.is_some()
        }
        fn placement(&mut self, request: &PlacementRequest<'_>) -> Option<Vec<NodeScore>> {
            let cluster = request.state.cluster();
            let first = request.candidates.first().map(|c| c.flavor);
            if request.candidates.iter().any(|c| Some(c.flavor) != first) {
                self.rankings += 1;
            }
            let preferred: FlavorId = cluster.flavor_id(self.prefer[request.pod_set])?;
            Some(
                request
                    .candidates
                    .iter()
                    .map(|c| NodeScore {
                        score: if c.flavor == preferred { 1.0 } else { 0.0 },
                        card: None,
                    })
                    .collect(),
            )
        }
        fn places(&self) -> bool {
            true
        }
        fn places_workload(&self, _state: HookState<'_>, entry: &Entry) -> bool {
            self.only.is_none_or(|ns| ns == entry.workload.namespace)
        }
    }

    fn one(flavor: &str) -> Option<Vec<String>> {
        Some(vec![flavor.to_string()])
    }

    #[test]
    fn placement_chooses_among_the_flavors_without_a_flavor_policy() {
        let job = || vec![pods(1, 4, None, None)];
        let mut s = scheduler("{}", 8, 0);
        assert_eq!(admit(&mut s, "team", job(), &mut DefaultHooks), one("t4"));
        let mut s = scheduler("{}", 8, 0);
        let mut hooks = Prefer::new(&["a10"]);
        assert_eq!(admit(&mut s, "team", job(), &mut hooks), one("a10"));
        assert_eq!(hooks.rankings, 1);
        // Only among the flavors a pod set may use: a selector leaves it
        // t4 alone, nothing to rank, and placement is not asked to.
        let job = vec![pods(1, 4, None, Some("t4"))];
        assert_eq!(admit(&mut s, "team", job, &mut hooks), one("t4"));
        assert_eq!(hooks.rankings, 1);
    }

    #[test]
    fn over_placements_order_quota_and_fungibility_decide_as_kueue_does() {
        let job = || vec![pods(1, 4, None, None)];
        // a10 has no quota of its own and nothing to borrow: t4.
        let mut s = scheduler("{}", 0, 0);
        assert_eq!(
            admit(&mut s, "team", job(), &mut Prefer::new(&["a10"])),
            one("t4")
        );
        // a10 fits by borrowing; whenCanBorrow: Borrow stops the search there.
        let mut s = scheduler("{}", 0, 8);
        assert_eq!(
            admit(&mut s, "team", job(), &mut Prefer::new(&["a10"])),
            one("a10")
        );
        assert!(s
            .entry(WorkloadId(0))
            .admission
            .as_ref()
            .is_some_and(|a| a.borrowing));
        // whenCanBorrow: TryNextFlavor goes on to t4, which fits without borrowing.
        let mut s = scheduler("{whenCanBorrow: TryNextFlavor}", 0, 8);
        assert_eq!(
            admit(&mut s, "team", job(), &mut Prefer::new(&["a10"])),
            one("t4")
        );
    }

    #[test]
    fn without_a_placement_policy_for_the_workload_the_listed_order_holds() {
        let mut s = scheduler("{}", 8, 0);
        let mut hooks = Prefer {
            only: Some("other"),
            ..Prefer::new(&["a10"])
        };
        assert_eq!(
            admit(&mut s, "team", vec![pods(1, 4, None, None)], &mut hooks),
            one("t4")
        );
        assert_eq!(hooks.rankings, 0);
        assert_eq!(
            admit(&mut s, "other", vec![pods(1, 4, None, None)], &mut hooks),
            one("a10")
        );
    }

    #[test]
    fn a_flavor_policys_answer_comes_first() {
        let job = || vec![pods(1, 4, None, None)];
        let mut s = scheduler("{}", 8, 0);
        let mut hooks = Prefer {
            order: Some((vec!["t4"], false)),
            ..Prefer::new(&["a10"])
        };
        assert_eq!(admit(&mut s, "team", job(), &mut hooks), one("t4"));
        assert_eq!(hooks.rankings, 0);
        let mut s = scheduler("{}", 8, 0);
        let mut hooks = Prefer {
            order: Some((vec!["t4", "a10"], true)),
            ..Prefer::new(&["a10"])
        };
        assert_eq!(admit(&mut s, "team", job(), &mut hooks), one("a10"));
        // With `orderByPlacement`, each pod set is ranked by its own pods.
        let mut s = scheduler("{}", 8, 0);
        let mut hooks = Prefer {
            order: Some((vec!["t4", "a10"], true)),
            ..Prefer::new(&["a10", "t4"])
        };
        let job = vec![pods(1, 2, None, None), pods(2, 3, None, None)];
        assert_eq!(
            admit(&mut s, "team", job, &mut hooks),
            Some(vec!["a10".to_string(), "t4".to_string()])
        );
    }

    #[test]
    fn each_pod_set_goes_where_placement_prefers_it() {
        let mut s = scheduler("{}", 8, 0);
        let mut hooks = Prefer::new(&["t4", "a10"]);
        let job = vec![pods(1, 2, None, None), pods(2, 3, None, None)];
        assert_eq!(
            admit(&mut s, "team", job, &mut hooks),
            Some(vec!["t4".to_string(), "a10".to_string()])
        );
        assert_eq!(hooks.rankings, 2, "one ranking per pod set");
    }

    #[test]
    fn partial_admission_ranks_once_for_all_the_counts_it_tries() {
        // 3 × 4 GPUs fit no flavor's 8; 2 pods do, on the preferred a10.
        let mut s = scheduler("{}", 8, 0);
        let mut hooks = Prefer::new(&["a10"]);
        let job = vec![pods(3, 4, Some(1), None)];
        assert_eq!(admit(&mut s, "team", job, &mut hooks), one("a10"));
        assert_eq!(
            s.entry(WorkloadId(0))
                .admission
                .as_ref()
                .map(|a| a.counts.clone()),
            Some(vec![2])
        );
        assert_eq!(hooks.rankings, 1);
    }
}
