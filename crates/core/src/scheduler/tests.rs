//! The driver API as a driver sees it: one step admits what fits and says
//! when to wake; withdraw releases and frees the slot; restore rebuilds
//! admissions without asking a hook; reconfigure keeps ids and admissions,
//! re-evaluates pending work and parks what lost its queue with a reason;
//! one admission question per preemption attempt; the autoscale plan.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::hooks::{
    AdmissionRequest, AdmissionVerdict, AutoscaleRequest, DefaultHooks, FairShareRequest,
    FlavorOrder, FlavorRequest, Hooks, Weight, WeightRequest,
};
use super::intake::{intake, Intake};
use super::*;
use crate::jobs::{JobInfo, PodSetInfo};
use crate::model::cluster::tests::build;

/// Two ClusterQueues in cohort `c` (4 GPUs each on flavor `a100`); `solo`
/// (2 GPUs on `v100`) with `reclaimTimeout: 60s`. LocalQueue `q` in
/// namespaces `ns-a`, `ns-b`, `ns-solo`. QUOTA_A is cq-a's nominal quota.
const CLUSTER: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: v100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq-a}
spec:
  cohort: c
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: QUOTA_A}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq-b}
spec:
  cohort: c
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 4, lendingLimit: 0}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: solo}
spec:
  resourceReclaim: {enabled: true, reclaimTimeout: 60s}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: v100, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: ns-a, name: q}
spec: {clusterQueue: cq-a}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: ns-b, name: q}
spec: {clusterQueue: cq-b}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: ns-solo, name: q}
spec: {clusterQueue: solo}
"#;

pub(super) fn cluster(quota_a: u32) -> Arc<Cluster> {
    Arc::new(build(&CLUSTER.replace("QUOTA_A", &quota_a.to_string())))
}

/// The cluster without cq-b (and its LocalQueue).
fn cluster_without_b() -> Arc<Cluster> {
    let yaml = CLUSTER.replace("QUOTA_A", "4");
    let docs: Vec<&str> = yaml
        .split("---\n")
        .filter(|d| !d.contains("name: cq-b") && !d.contains("clusterQueue: cq-b"))
        .collect();
    Arc::new(build(&docs.join("---\n")))
}

/// A workload of `gpus` GPUs in one pod, from namespace `ns` (LocalQueue `q`).
pub(super) fn workload(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    gpus: i64,
    priority: i32,
) -> Workload {
    let job = JobInfo {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        namespace: ns.into(),
        name: name.into(),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        queue_name: Some("q".into()),
        priority_class: None,
        pod_sets: vec![PodSetInfo {
            name: "main".into(),
            count: 1,
            min_count: None,
            requests: [("nvidia.com/gpu".to_string(), Amount::from_units(gpus))].into(),
            node_selector: BTreeMap::new(),
            required_node_affinity: None,
            tolerations: Vec::new(),
            template_path: None,
            topology: None,
        }],
    };
    match intake(cluster, &job, Some(priority)) {
        Intake::Queued(w) => w,
        other => panic!("{name} not queued: {other:?}"),
    }
}

fn submit(s: &mut Scheduler, now: i64, ws: Vec<Workload>) -> (Vec<WorkloadId>, Step) {
    let inputs = ws.into_iter().map(Input::Submit).collect();
    let step = s.step(Millis::from_secs(now), inputs, &mut DefaultHooks);
    (step.submitted.clone(), step)
}

/// A scheduler on `cluster(4)` that took `jobs` (namespace, name, GPUs;
/// priority 0) in one step at 0s, and their ids.
fn started(jobs: &[(&str, &str, i64)]) -> (Arc<Cluster>, Scheduler, Vec<WorkloadId>) {
    let c = cluster(4);
    let mut s = Scheduler::new(c.clone(), &[]);
    let workloads = jobs
        .iter()
        .map(|&(ns, name, gpus)| workload(&c, ns, name, gpus, 0))
        .collect();
    let (ids, _) = submit(&mut s, 0, workloads);
    (c, s, ids)
}

fn gpus_used(s: &Scheduler, cq: &str, flavor: &str) -> Amount {
    let c = s.cluster();
    let cq = c.cluster_queue_id(cq).unwrap_or_else(|| panic!("{cq}"));
    let f = c.flavor_id(flavor).unwrap_or_else(|| panic!("{flavor}"));
    let r = c
        .resource_id("nvidia.com/gpu")
        .unwrap_or_else(|| panic!("gpu"));
    s.quota().usage(cq, c.flavor_resource(f, r))
}

fn admitted(step: &Step) -> Vec<WorkloadId> {
    step.events
        .iter()
        .filter_map(|e| match e {
            Event::Admitted { workload } => Some(*workload),
            _ => None,
        })
        .collect()
}

#[test]
fn one_step_admits_what_fits_and_names_its_next_wake() {
    let c = cluster(4);
    let mut s = Scheduler::new(c.clone(), &[]);
    let (ids, step) = submit(
        &mut s,
        0,
        vec![
            workload(&c, "ns-solo", "first", 2, 0),
            workload(&c, "ns-solo", "second", 1, 0),
        ],
    );
    assert_eq!(admitted(&step), vec![ids[0]]);
    assert_eq!(s.entry(ids[1]).status, Status::Inadmissible);
    // The reclaim timer of the admitted one: 60 s after its admission.
    assert_eq!(step.next_wake, Some(Millis::from_secs(60)));
    assert!(
        step.cycles >= 2,
        "a cycle that admits is followed by one that sees nothing change"
    );
    let text = s.reason_text(ids[1]);
    assert!(text.contains("needs 1 nvidia.com/gpu in v100"), "{text}");

    let step = s.step(
        Millis::from_secs(10),
        vec![Input::Finish(ids[0])],
        &mut DefaultHooks,
    );
    assert!(matches!(step.events[0], Event::Finished { workload, .. } if workload == ids[0]));
    assert_eq!(admitted(&step), vec![ids[1]]);
}

#[test]
fn a_job_that_ends_while_its_workload_waits_finishes_it_and_it_is_never_admitted() {
    // A job that finished (or failed) as it was evicted: its end is seen
    // after the eviction, while its workload waits in the queue.
    let (_c, mut s, ids) = started(&[
        ("ns-a", "running", 4),
        ("ns-a", "ended", 4),
        ("ns-a", "failed", 4),
    ]);
    assert_eq!(s.entry(ids[1]).status, Status::Inadmissible);
    let step = s.step(
        Millis::from_secs(5),
        vec![
            Input::Finish(ids[1]),
            Input::Fail {
                workload: ids[2],
                message: "BackoffLimitExceeded".into(),
            },
        ],
        &mut DefaultHooks,
    );
    assert!(step.events.iter().any(|e| matches!(e,
        Event::Finished { workload, released, failure: None } if *workload == ids[1] && released.is_empty())));
    assert!(step.events.iter().any(|e| matches!(e,
        Event::Finished { workload, failure: Some(_), .. } if *workload == ids[2])));
    assert_eq!(s.entry(ids[1]).status, Status::Finished);
    assert_eq!(s.entry(ids[2]).status, Status::Finished);
    // The quota freed next goes to no one: both are out of the queue.
    let step = s.step(
        Millis::from_secs(10),
        vec![Input::Finish(ids[0])],
        &mut DefaultHooks,
    );
    assert!(admitted(&step).is_empty(), "{:?}", step.events);
    assert_eq!(gpus_used(&s, "cq-a", "a100"), Amount::ZERO);
}

#[test]
fn withdraw_releases_quota_frees_the_slot_and_ignores_stale_inputs() {
    let (c, mut s, ids) = started(&[("ns-a", "running", 4), ("ns-a", "waiting", 4)]);
    assert_eq!(s.entry(ids[0]).status, Status::Admitted);
    assert_eq!(gpus_used(&s, "cq-a", "a100"), Amount::from_units(4));

    let step = s.step(
        Millis::from_secs(5),
        vec![Input::Withdraw(ids[0])],
        &mut DefaultHooks,
    );
    let Event::Withdrawn {
        workload: withdrawn,
        released,
    } = &step.events[0]
    else {
        panic!("{:?}", step.events)
    };
    assert_eq!(*withdrawn, ids[0]);
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].1, Amount::from_units(4));
    // The freed quota goes to the next in line in the same step.
    assert_eq!(admitted(&step), vec![ids[1]]);
    assert!(s.get(ids[0]).is_none());

    // A finish or a second withdraw for the freed slot changes nothing.
    let step = s.step(
        Millis::from_secs(6),
        vec![Input::Finish(ids[0]), Input::Withdraw(ids[0])],
        &mut DefaultHooks,
    );
    assert!(step.events.is_empty(), "{:?}", step.events);
    assert_eq!(gpus_used(&s, "cq-a", "a100"), Amount::from_units(4));

    // The slot is reused, with a later place in input order and a new epoch.
    let old_epoch = s.entry(ids[0]).epoch;
    let (reused, _) = submit(&mut s, 7, vec![workload(&c, "ns-a", "new", 1, 0)]);
    assert_eq!(reused[0], ids[0]);
    assert!(s.entry(reused[0]).seq > s.entry(ids[1]).seq);
    assert_ne!(s.entry(reused[0]).epoch, old_epoch);
    assert_eq!(s.entries().len(), 2);
}

#[test]
fn withdrawing_a_pending_workload_takes_it_out_of_its_queue() {
    let (c, mut s, ids) = started(&[("ns-a", "running", 4), ("ns-a", "waiting", 2)]);
    let cq = c.cluster_queue_id("cq-a").unwrap_or_else(|| panic!("cq-a"));
    assert_eq!(s.pending_count(cq), 1);
    s.step(
        Millis::from_secs(1),
        vec![Input::Withdraw(ids[1])],
        &mut DefaultHooks,
    );
    assert_eq!(s.pending_count(cq), 0);
    assert_eq!(s.entry(ids[1]).status, Status::Withdrawn);
    assert_eq!(s.live().count(), 1);
}

/// Hooks that fail the test if asked anything: restore must not ask.
struct NoHooks;
impl Hooks for NoHooks {
    fn admission(&mut self, _: &AdmissionRequest<'_>) -> AdmissionVerdict {
        panic!("admission asked")
    }
    fn weight(&mut self, _: &[WeightRequest<'_>]) -> Vec<Weight> {
        panic!("weight asked")
    }
    fn fair_share(&mut self, _: &FairShareRequest<'_>) -> Vec<f64> {
        panic!("fairShare asked")
    }
    fn autoscale(&mut self, _: &AutoscaleRequest<'_>) -> Vec<u32> {
        panic!("autoscale asked")
    }
    fn flavor(&mut self, _: &FlavorRequest<'_>) -> Option<FlavorOrder> {
        panic!("flavor asked")
    }
}

fn restored(c: &Cluster, ns: &str, name: &str, gpus: i64, flavor: &str, at: i64) -> Restored {
    Restored {
        workload: workload(c, ns, name, gpus, 0),
        flavors: vec![[("nvidia.com/gpu".to_string(), flavor.to_string())].into()],
        counts: vec![1],
        admitted_at: Millis::from_secs(at),
        queue_time: Millis::from_secs(at),
        placements: Vec::new(),
        carried: Default::default(),
    }
}

#[test]
fn a_restored_admission_keeps_the_counters_it_carried() {
    let c = cluster(4);
    let mut s = Scheduler::new(c.clone(), &[]);
    let mut one = restored(&c, "ns-a", "a", 4, "a100", 100);
    one.carried = Carried {
        retries: 2,
        pods_ready_requeues: 1,
        evictions: 3,
        // A backoff means nothing to what runs.
        backoff: Some((Millis::from_secs(500), Backoff::Retry)),
    };
    let id = s.restore(vec![one]).remove(0).unwrap();
    let entry = s.entry(id);
    assert_eq!(entry.status, Status::Admitted);
    assert_eq!(
        (entry.retries, entry.pods_ready_requeues, entry.evictions),
        (2, 1, 3)
    );
}

#[test]
fn restore_rebuilds_admissions_without_asking_a_policy() {
    let c = cluster(4);
    let mut s = Scheduler::new(c.clone(), &[]);
    let results = s.restore(vec![
        restored(&c, "ns-a", "a", 4, "a100", 100),
        // Past the quota (the configuration shrank while Arbiter was down): kept.
        restored(&c, "ns-solo", "s1", 2, "v100", 100),
        restored(&c, "ns-solo", "s2", 1, "v100", 130),
        restored(&c, "ns-b", "wrong-flavor", 1, "v100", 100),
    ]);
    let ids: Vec<WorkloadId> = results[..3]
        .iter()
        .map(|r| r.clone().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let err = results[3]
        .clone()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("ns-b/wrong-flavor") && err.contains("flavor v100") && err.contains("cq-b"),
        "{err}"
    );
    assert_eq!(gpus_used(&s, "cq-a", "a100"), Amount::from_units(4));
    assert_eq!(gpus_used(&s, "solo", "v100"), Amount::from_units(3));
    for &id in &ids {
        assert_eq!(s.entry(id).status, Status::Admitted);
    }
    assert_eq!(
        s.entry(ids[2]).admission.as_ref().map(|a| a.at),
        Some(Millis::from_secs(130))
    );
    // The reclaim timers run from the admission times read back.
    assert_eq!(s.next_timer(), Some(Millis::from_secs(160)));
    // Nothing is pending, so a step asks no hook at all (NoHooks would panic).
    let step = s.step(Millis::from_secs(150), Vec::new(), &mut NoHooks);
    assert!(step.events.is_empty());
}

#[test]
fn reconfigure_keeps_ids_and_admissions_and_re_evaluates_pending_work() {
    let (_, mut s, ids) = started(&[("ns-a", "big", 4), ("ns-a", "next", 2)]);
    assert_eq!(s.entry(ids[1]).status, Status::Inadmissible);

    // A lower quota evicts nothing: "big" stays admitted, over it.
    let report = s.reconfigure(cluster(2), &[]);
    assert_eq!(report, Reconfigured::default());
    assert_eq!(s.entry(ids[0]).status, Status::Admitted);
    assert_eq!(gpus_used(&s, "cq-a", "a100"), Amount::from_units(4));
    let step = s.step(Millis::from_secs(1), Vec::new(), &mut DefaultHooks);
    assert!(admitted(&step).is_empty());
    assert_eq!(s.entry(ids[1]).queue_time, Millis::ZERO);

    // A higher quota: the pending one is admitted at the next step, same id.
    s.reconfigure(cluster(8), &[]);
    let step = s.step(Millis::from_secs(2), Vec::new(), &mut DefaultHooks);
    assert_eq!(admitted(&step), vec![ids[1]]);
    assert_eq!(gpus_used(&s, "cq-a", "a100"), Amount::from_units(6));
}

#[test]
fn a_removed_queue_orphans_its_pending_work_and_detaches_its_admitted_work() {
    let (_, mut s, ids) = started(&[
        ("ns-b", "running", 4),
        ("ns-b", "waiting", 4),
        ("ns-a", "other", 1),
    ]);
    assert_eq!(s.entry(ids[0]).status, Status::Admitted);

    let report = s.reconfigure(cluster_without_b(), &[]);
    assert_eq!(report.detached, vec![ids[0]]);
    assert_eq!(report.orphaned, vec![ids[1]]);
    assert_eq!(s.entry(ids[0]).status, Status::Detached);
    assert_eq!(s.entry(ids[1]).status, Status::Orphaned);
    assert_eq!(s.entry(ids[2]).status, Status::Admitted);
    let why = s.reason_text(ids[1]);
    assert!(
        why.contains("LocalQueue ns-b/q") && why.contains("removed"),
        "{why}"
    );
    let why = s.reason_text(ids[0]);
    assert!(
        why.contains("ClusterQueue cq-b") && why.contains("keeps running"),
        "{why}"
    );
    let step = s.step(Millis::from_secs(1), Vec::new(), &mut DefaultHooks);
    assert!(admitted(&step).is_empty());

    // The queue comes back: the detached one is admitted again (charged),
    // the orphan waits in its queue with its original queue time.
    let report = s.reconfigure(cluster(4), &[]);
    assert_eq!(report.adopted, vec![ids[0], ids[1]]);
    assert_eq!(s.entry(ids[0]).status, Status::Admitted);
    assert_eq!(gpus_used(&s, "cq-b", "a100"), Amount::from_units(4));
    assert_eq!(s.entry(ids[1]).queue_time, Millis::ZERO);
    let step = s.step(
        Millis::from_secs(2),
        vec![Input::Finish(ids[0])],
        &mut DefaultHooks,
    );
    assert_eq!(admitted(&step), vec![ids[1]]);
}

#[test]
fn a_detached_workload_finishes_and_frees_nothing_it_was_not_charged() {
    let (_, mut s, ids) = started(&[("ns-b", "running", 4)]);
    s.reconfigure(cluster_without_b(), &[]);
    let step = s.step(
        Millis::from_secs(3),
        vec![Input::Finish(ids[0])],
        &mut DefaultHooks,
    );
    assert!(matches!(&step.events[0], Event::Finished { released, .. } if released.is_empty()));
    assert_eq!(s.entry(ids[0]).status, Status::Finished);
    // Nothing is kept for it any more: a months-long run does not accumulate.
    assert_eq!(s.leftovers.counts(), (0, 0));
}

#[test]
fn withdrawing_detached_and_orphaned_workloads_forgets_them_entirely() {
    // cq-b may borrow cq-a's 4 GPUs, so 5 more wait.
    let (_, mut s, ids) = started(&[("ns-b", "running", 4), ("ns-b", "waiting", 5)]);
    assert_eq!(s.entry(ids[1]).status, Status::Inadmissible);
    s.reconfigure(cluster_without_b(), &[]);
    assert_eq!(s.leftovers.counts(), (1, 2));
    let inputs = vec![Input::Withdraw(ids[0]), Input::Withdraw(ids[1])];
    let step = s.step(Millis::from_secs(3), inputs, &mut DefaultHooks);
    assert_eq!(step.events.len(), 2);
    assert_eq!(s.leftovers.counts(), (0, 0));
    assert_eq!(s.workloads.free_slots(), 2);
    assert_eq!(s.live().count(), 0);
}

#[test]
fn a_detached_workload_that_fails_waits_for_its_queue_to_return() {
    let (_, mut s, ids) = started(&[("ns-b", "running", 4)]);
    s.reconfigure(cluster_without_b(), &[]);
    let fail = Input::Fail {
        workload: ids[0],
        message: "node lost".into(),
    };
    let step = s.step(Millis::from_secs(3), vec![fail], &mut DefaultHooks);
    assert!(matches!(
        &step.events[0],
        Event::Evicted {
            cause: Eviction::Failed { .. },
            ..
        }
    ));
    assert_eq!(s.entry(ids[0]).status, Status::Orphaned);
    // Back with its queue: pending, then admitted, not restored as running.
    let report = s.reconfigure(cluster(4), &[]);
    assert_eq!(report.adopted, vec![ids[0]]);
    assert_eq!(s.entry(ids[0]).status, Status::Queued);
    let step = s.step(Millis::from_secs(4), Vec::new(), &mut DefaultHooks);
    assert_eq!(admitted(&step), vec![ids[0]]);
}

/// Kueue's hooks, except that admission is denied to `denied` and counted.
struct CountingDenial {
    denied: &'static str,
    asked: usize,
}
impl Hooks for CountingDenial {
    fn admission(&mut self, r: &AdmissionRequest<'_>) -> AdmissionVerdict {
        if r.entry.workload.name != self.denied {
            return AdmissionVerdict::Allow;
        }
        self.asked += 1;
        AdmissionVerdict::Deny {
            policy: "no-preemptors".into(),
            reason: "not today".into(),
            retryable: true,
            tenant: None,
        }
    }
}

#[test]
fn a_preemption_attempt_asks_the_admission_hook_once() {
    let c = cluster(4);
    let mut s = Scheduler::new(c.clone(), &[]);
    let (low, _) = submit(&mut s, 0, vec![workload(&c, "ns-a", "low", 4, 0)]);
    let mut hooks = CountingDenial {
        denied: "high",
        asked: 0,
    };
    let step = s.step(
        Millis::from_secs(1),
        vec![Input::Submit(workload(&c, "ns-a", "high", 4, 10))],
        &mut hooks,
    );
    // It could preempt "low", the policy said no once, and nothing moved.
    assert_eq!(hooks.asked, 1);
    assert!(step.events.is_empty(), "{:?}", step.events);
    assert_eq!(s.entry(low[0]).status, Status::Admitted);
    let why = s.reason_text(step.submitted[0]);
    assert_eq!(
        why,
        "denied by policy no-preemptors (will retry): not today"
    );
}

#[test]
fn events_and_reasons_render_the_sentences_people_read() {
    let c = cluster(4);
    let w = workload(&c, "ns-a", "w", 1, 0);
    let evicted = Eviction::Preempted {
        preemptor: "ns-a/high".into(),
        priority: 10,
        reclaimed_by: Some("cq-a".into()),
    };
    assert_eq!(
        evicted.to_string(),
        "preempted by ns-a/high (priority 10) reclaimed by ClusterQueue cq-a"
    );
    let backoff = Reason::Backoff {
        after: Box::new(Reason::Evicted(Eviction::Failed {
            message: "OOMKilled".into(),
        })),
        retry: 1,
        max_retries: 3,
        until: Millis::from_secs(90),
    };
    assert_eq!(
        backoff.render(&c, &w),
        "failed: OOMKilled; retry 1 of 3 after backoff until 90s"
    );
    let gpu = c
        .resource_id("nvidia.com/gpu")
        .unwrap_or_else(|| panic!("gpu"));
    let never = Reason::NeverFits(NeverFits::TotalTooBig {
        resource: gpu,
        total: Amount::from_units(9),
        potential: Amount::from_units(8),
    });
    assert!(never.never_fits());
    assert_eq!(
        never.render(&c, &w),
        "its pod sets need 9 nvidia.com/gpu in total, more than the flavors of ClusterQueue cq-a could ever give together (8)"
    );
    assert_eq!(Requeue::BackoffOver.to_string(), "retry backoff is over");
}

#[test]
fn the_scale_plan_asks_for_nodes_once_and_counts_them_when_ready() {
    let yaml = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq}
spec:
  autoscaling: {enabled: true, minReplicas: 1, maxReplicas: 4, targetUtilization: 100}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 32}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: ns-a, name: q}
spec: {clusterQueue: cq}
"#;
    let c = Arc::new(build(yaml));
    let a100 = c.flavor_id("a100").unwrap_or_else(|| panic!("a100"));
    let gpu = c
        .resource_id("nvidia.com/gpu")
        .unwrap_or_else(|| panic!("gpu"));
    let pools = [capacity::PoolSpec {
        flavor: a100,
        nodes: 1,
        allocatable: vec![(gpu, Amount::from_units(8))],
        min_nodes: 1,
        max_nodes: 4,
        devices: Vec::new(),
        names: Vec::new(),
    }];
    let mut s = Scheduler::new(c.clone(), &pools);
    let (_, step) = submit(
        &mut s,
        0,
        vec![
            workload(&c, "ns-a", "fits", 8, 0),
            workload(&c, "ns-a", "waits", 8, 0),
        ],
    );
    assert_eq!(
        step.scale,
        vec![ScaleRequest {
            flavor: a100,
            kind: ScaleKind::Up,
            nodes: 1
        }]
    );
    // Still provisioning: not asked again.
    let step = s.step(Millis::from_secs(1), Vec::new(), &mut DefaultHooks);
    assert!(step.scale.is_empty(), "{:?}", step.scale);
    let step = s.step(
        Millis::from_secs(60),
        vec![Input::NodeReady(a100)],
        &mut DefaultHooks,
    );
    assert_eq!(admitted(&step).len(), 1);
    assert_eq!(s.capacity().ready_nodes(a100), 2);
}

/// Denies every workload of namespace `tenant`, as that tenant's own bundle would.
struct TenantDenies {
    tenant: &'static str,
    platform: bool,
}
impl Hooks for TenantDenies {
    fn admission(&mut self, r: &AdmissionRequest<'_>) -> AdmissionVerdict {
        if r.entry.workload.namespace != self.tenant {
            return AdmissionVerdict::Allow;
        }
        AdmissionVerdict::Deny {
            policy: "own-rule".into(),
            reason: "not now".into(),
            retryable: true,
            tenant: (!self.platform).then(|| self.tenant.to_string()),
        }
    }
}

/// One StrictFIFO ClusterQueue `shared` of 8 GPUs; LocalQueue `q` in ns-a and ns-b.
const STRICT_SHARED: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: shared}
spec:
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: ns-a, name: q}
spec: {clusterQueue: shared}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: ns-b, name: q}
spec: {clusterQueue: shared}
"#;

#[test]
fn a_tenants_denial_of_a_strict_fifo_head_blocks_nobody_a_platform_one_does() {
    let c = Arc::new(build(STRICT_SHARED));
    for platform in [false, true] {
        let mut s = Scheduler::new(c.clone(), &[]);
        let inputs = vec![
            Input::Submit(workload(&c, "ns-a", "a-0", 1, 0)),
            Input::Submit(workload(&c, "ns-b", "b", 1, 0)),
        ];
        let mut hooks = TenantDenies {
            tenant: "ns-a",
            platform,
        };
        let step = s.step(Millis::ZERO, inputs, &mut hooks);
        let (a, b) = (step.submitted[0], step.submitted[1]);
        if platform {
            // Kueue's StrictFIFO: a head the platform holds back holds the queue.
            assert_eq!(s.entry(a).status, Status::Queued);
            assert_eq!(
                s.reason_text(b),
                "waiting behind ns-a/a-0, the head of StrictFIFO ClusterQueue shared"
            );
        } else {
            assert_eq!(s.entry(a).status, Status::Inadmissible);
            assert_eq!(
                admitted(&step),
                vec![b],
                "ns-b waits behind ns-a's own denial"
            );
        }
    }
}

#[test]
fn a_tenant_denied_workload_that_no_longer_fits_still_blocks_nobody() {
    let c = Arc::new(build(STRICT_SHARED));
    let mut s = Scheduler::new(c.clone(), &[]);
    let mut hooks = TenantDenies {
        tenant: "ns-a",
        platform: false,
    };
    let inputs = vec![
        Input::Submit(workload(&c, "ns-a", "a", 6, 0)),
        Input::Submit(workload(&c, "ns-b", "b1", 4, 0)),
        Input::Submit(workload(&c, "ns-b", "b2", 3, 0)),
    ];
    let step = s.step(Millis::ZERO, inputs, &mut hooks);
    let (a, b1, b2) = (step.submitted[0], step.submitted[1], step.submitted[2]);
    assert_eq!(admitted(&step), vec![b1, b2]);
    // b2 finishes: a is up for another try, but 6 GPUs are not free; b3 (2) fits.
    let step = s.step(
        Millis::from_secs(20),
        vec![
            Input::Finish(b2),
            Input::Submit(workload(&c, "ns-b", "b3", 2, 0)),
        ],
        &mut hooks,
    );
    let b3 = step.submitted[0];
    assert_eq!(
        admitted(&step),
        vec![b3],
        "ns-b waits behind a workload its tenant denied: {}",
        s.reason_text(b3)
    );
    assert_eq!(s.entry(a).status, Status::Inadmissible);
}

/// Tenant scores for namespace `tenant`'s workloads, by name.
struct TenantScores(&'static str, &'static [(&'static str, f64)]);
impl Hooks for TenantScores {
    fn weight(&mut self, batch: &[WeightRequest<'_>]) -> Vec<Weight> {
        batch
            .iter()
            .map(|r| Weight {
                score: 0.0,
                tenant: (r.entry.workload.namespace == self.0).then(|| {
                    self.1
                        .iter()
                        .find(|(name, _)| *name == r.entry.workload.name)
                        .map_or(0.0, |(_, score)| *score)
                }),
            })
            .collect()
    }
}

#[test]
fn a_tenants_scores_exchange_only_workloads_that_ask_the_same() {
    // cq-a has 4 GPUs. In queue order: a-1 (1 GPU), a-big (4), a-2 (1).
    let c = cluster(4);
    let mut s = Scheduler::new(c.clone(), &[]);
    let inputs = ["a-1", "a-big", "a-2"]
        .iter()
        .zip([1, 4, 1])
        .map(|(&name, gpus)| Input::Submit(workload(&c, "ns-a", name, gpus, 0)))
        .collect();
    let mut hooks = TenantScores("ns-a", &[("a-1", 0.0), ("a-big", 9.0), ("a-2", 5.0)]);
    let step = s.step(Millis::ZERO, inputs, &mut hooks);
    let (a1, big, a2) = (step.submitted[0], step.submitted[1], step.submitted[2]);
    // a-big may not take a-1's earlier position (it asks for more); a-2 may.
    assert_eq!(s.entry(big).slot.seq, s.entry(big).seq);
    assert_eq!(s.entry(a2).slot.seq, s.entry(a1).seq);
    assert_eq!(s.entry(a1).slot.seq, s.entry(a2).seq);
    assert_eq!(admitted(&step), vec![a2, a1]);
    assert_eq!(s.entry(big).status, Status::Inadmissible);
}

#[test]
fn a_workload_submitted_late_keeps_its_place_by_queue_time() {
    let c = Arc::new(build(STRICT_SHARED));
    let mut s = Scheduler::new(c.clone(), &[]);
    // Fill the queue, then submit two at once: `later` first in input
    // order but queued after `earlier`, which was queued before the step.
    let step = s.step(
        Millis(1_000),
        vec![Input::Submit(workload(&c, "ns-a", "full", 8, 0))],
        &mut DefaultHooks,
    );
    let full = step.submitted[0];
    let step = s.step(
        Millis(5_000),
        vec![
            Input::Submit(workload(&c, "ns-a", "later", 8, 0)),
            Input::SubmitQueued {
                workload: workload(&c, "ns-b", "earlier", 8, 0),
                queue_time: Millis(2_000),
                carried: Default::default(),
            },
        ],
        &mut DefaultHooks,
    );
    let (later, earlier) = (step.submitted[0], step.submitted[1]);
    assert_eq!(s.entry(earlier).queue_time, Millis(2_000));
    assert_eq!(s.entry(later).queue_time, Millis(5_000));
    let step = s.step(Millis(6_000), vec![Input::Finish(full)], &mut DefaultHooks);
    assert_eq!(admitted(&step), vec![earlier]);
    // A queue time in the future is the step's time.
    let step = s.step(
        Millis(7_000),
        vec![Input::SubmitQueued {
            workload: workload(&c, "ns-a", "future", 1, 0),
            queue_time: Millis(99_000),
            carried: Default::default(),
        }],
        &mut DefaultHooks,
    );
    assert_eq!(s.entry(step.submitted[0]).queue_time, Millis(7_000));
}

/// Denies every workload while `deny` holds, and says when that changed.
struct Switchable {
    deny: bool,
    changed: bool,
}
impl Hooks for Switchable {
    fn admission(&mut self, _: &AdmissionRequest<'_>) -> AdmissionVerdict {
        if !self.deny {
            return AdmissionVerdict::Allow;
        }
        AdmissionVerdict::Deny {
            policy: "closed".into(),
            reason: "closed today".into(),
            retryable: true,
            tenant: None,
        }
    }
    fn policies_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }
}

#[test]
fn a_denied_workload_is_tried_again_as_soon_as_the_policies_change() {
    let c = cluster(4);
    let mut s = Scheduler::new(c.clone(), &[]);
    let mut hooks = Switchable {
        deny: true,
        changed: false,
    };
    let step = s.step(
        Millis::ZERO,
        vec![Input::Submit(workload(&c, "ns-a", "a", 1, 0))],
        &mut hooks,
    );
    let a = step.submitted[0];
    assert_eq!(s.entry(a).status, Status::Inadmissible);
    // The policy now allows it, but nothing freed up and nobody said so:
    // the workload stays set aside (BestEffortFIFO).
    hooks.deny = false;
    let step = s.step(Millis::from_secs(1), Vec::new(), &mut hooks);
    assert!(admitted(&step).is_empty());
    assert_eq!(s.entry(a).status, Status::Inadmissible);
    // The hooks say the policies changed: the next step tries it again.
    hooks.changed = true;
    let step = s.step(Millis::from_secs(2), Vec::new(), &mut hooks);
    assert_eq!(admitted(&step), vec![a]);
}

/// The weight multiplying a workload's priority: its priority class's,
/// else its LocalQueue's `priorityClass.weight` (the article's), else its
/// ClusterQueue's, else 1.
#[test]
fn a_workload_carries_its_class_weight_else_its_local_queues_else_its_cluster_queues() {
    let cluster = build(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: weighted}
spec: {priorityClass: {name: cq, weight: 2}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: plain}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: own, name: q}
spec: {clusterQueue: weighted, priority: 150, priorityClass: {name: high-priority, weight: 1.5}}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: inherits, name: q}
spec: {clusterQueue: weighted}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: none, name: q}
spec: {clusterQueue: plain}
---
apiVersion: arbiter.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 1000
weight: 3
"#,
    );
    let weighed = |ns: &str, class: Option<&str>| {
        let mut job = JobInfo {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            namespace: ns.into(),
            name: "j".into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            queue_name: Some("q".into()),
            priority_class: None,
            pod_sets: Vec::new(),
        };
        job.priority_class = class.map(str::to_string);
        match intake(&cluster, &job, None) {
            Intake::Queued(w) => (w.priority, w.priority_weight),
            other => panic!("{ns}: not queued: {other:?}"),
        }
    };
    assert_eq!(weighed("own", None), (150, 1.5));
    assert_eq!(weighed("inherits", None), (0, 2.0));
    assert_eq!(weighed("none", None), (0, 1.0));
    assert_eq!(weighed("own", Some("urgent")), (1000, 3.0));
}

#[test]
fn a_failed_workload_without_a_retry_policy_is_finished_as_failed() {
    let (_, mut s, ids) = started(&[("ns-a", "broken", 4), ("ns-a", "next", 4)]);
    assert_eq!(s.entry(ids[0]).status, Status::Admitted);
    let fail = Input::Fail {
        workload: ids[0],
        message: "BackoffLimitExceeded".into(),
    };
    let step = s.step(Millis::from_secs(5), vec![fail], &mut DefaultHooks);
    assert!(matches!(
        &step.events[0],
        Event::Finished { workload, failure: Some(m), released } if *workload == ids[0] && m == "BackoffLimitExceeded" && !released.is_empty()
    ));
    assert_eq!(s.entry(ids[0]).status, Status::Finished);
    // Its quota went to the next one, and it is not run again.
    assert_eq!(admitted(&step), vec![ids[1]]);
    let step = s.step(Millis::from_secs(600), Vec::new(), &mut DefaultHooks);
    assert!(step.events.is_empty());
}

#[test]
fn a_failed_workload_is_retried_with_backoff_then_deactivated() {
    let yaml = CLUSTER.replace("QUOTA_A", "4").replace(
        "resourceReclaim: {enabled: true, reclaimTimeout: 60s}",
        "retryPolicy: {maxRetries: 1, backoffDuration: 10s}",
    );
    let c = Arc::new(build(&yaml));
    let mut s = Scheduler::new(c.clone(), &[]);
    let (ids, _) = submit(&mut s, 0, vec![workload(&c, "ns-solo", "flaky", 2, 0)]);
    let fail = |id| Input::Fail {
        workload: id,
        message: "exit code 1".into(),
    };
    let step = s.step(Millis::from_secs(5), vec![fail(ids[0])], &mut DefaultHooks);
    assert!(matches!(
        &step.events[0],
        Event::Evicted {
            cause: Eviction::Failed { .. },
            ..
        }
    ));
    assert_eq!(s.entry(ids[0]).status, Status::Backoff);
    assert_eq!(step.next_wake, Some(Millis::from_secs(15)));
    // Back after the backoff, and admitted again.
    let step = s.step(Millis::from_secs(15), Vec::new(), &mut DefaultHooks);
    assert_eq!(admitted(&step), vec![ids[0]]);
    // A second failure is one more than maxRetries 1 allows.
    let step = s.step(Millis::from_secs(20), vec![fail(ids[0])], &mut DefaultHooks);
    assert!(step.events.iter().any(|e| matches!(
        e,
        Event::Deactivated {
            retries: 1,
            max_retries: 1,
            ..
        }
    )));
    assert_eq!(s.entry(ids[0]).status, Status::Deactivated);
}

/// `cluster(8)` with `waitForPodsReady`: timeout 60s, backoff 10s doubling
/// to 30s, at most `limit` requeues, `block` admission.
fn waiting_cluster(block: bool, limit: Option<u32>) -> Arc<Cluster> {
    let mut c = build(&CLUSTER.replace("QUOTA_A", "8"));
    c.pods_ready = Some(crate::model::cluster::PodsReadyPolicy {
        timeout: Millis::from_secs(60),
        recovery_timeout: Some(Millis::from_secs(20)),
        block_admission: block,
        requeue_at_creation: false,
        backoff_limit: limit,
        backoff_base: Millis::from_secs(10),
        backoff_max: Millis::from_secs(30),
    });
    Arc::new(c)
}

#[test]
fn pods_not_ready_in_time_are_evicted_requeued_with_backoff_and_deactivated_past_the_limit() {
    let c = waiting_cluster(false, Some(1));
    let mut s = Scheduler::new(c.clone(), &[]);
    let (ids, step) = submit(&mut s, 0, vec![workload(&c, "ns-a", "gang", 4, 0)]);
    assert_eq!(admitted(&step), ids);
    assert!(s.awaiting_pods(ids[0]));
    assert_eq!(step.next_wake, Some(Millis::from_secs(60)));
    // 60 s later its pods are still not ready: evicted, backing off 10 s.
    let step = s.step(Millis::from_secs(60), Vec::new(), &mut DefaultHooks);
    assert!(matches!(
        &step.events[0],
        Event::Evicted {
            cause: Eviction::PodsReadyTimeout { .. },
            ..
        }
    ));
    assert_eq!(s.entry(ids[0]).status, Status::Backoff);
    assert!(!s.awaiting_pods(ids[0]));
    assert_eq!(gpus_used(&s, "cq-a", "a100"), Amount::ZERO);
    assert!(
        s.reason_text(ids[0]).contains("requeue 1 of 1"),
        "{}",
        s.reason_text(ids[0])
    );
    let step = s.step(Millis::from_secs(70), Vec::new(), &mut DefaultHooks);
    assert_eq!(admitted(&step), ids);
    // Again not ready: past backoffLimitCount 1, deactivated.
    let step = s.step(Millis::from_secs(130), Vec::new(), &mut DefaultHooks);
    assert!(step
        .events
        .iter()
        .any(|e| matches!(e, Event::Deactivated { .. })));
    assert_eq!(s.entry(ids[0]).status, Status::Deactivated);
    assert_eq!(s.reason(ids[0]).code(), "RequeuingLimitExceeded");
}

#[test]
fn pods_ready_in_time_keep_their_admission() {
    let c = waiting_cluster(false, None);
    let mut s = Scheduler::new(c.clone(), &[]);
    let (ids, _) = submit(&mut s, 0, vec![workload(&c, "ns-a", "gang", 4, 0)]);
    s.step(
        Millis::from_secs(30),
        vec![Input::PodsReady(ids[0])],
        &mut DefaultHooks,
    );
    assert!(!s.awaiting_pods(ids[0]));
    let step = s.step(Millis::from_secs(61), Vec::new(), &mut DefaultHooks);
    assert!(step.events.is_empty(), "{:?}", step.events);
    assert_eq!(s.entry(ids[0]).status, Status::Admitted);
}

#[test]
fn pods_ready_once_must_be_ready_again_within_the_recovery_timeout() {
    // waiting_cluster: timeout 60 s, recoveryTimeout 20 s, backoff 10 s.
    let c = waiting_cluster(false, None);
    let mut s = Scheduler::new(c.clone(), &[]);
    let (ids, _) = submit(&mut s, 0, vec![workload(&c, "ns-a", "gang", 4, 0)]);
    let at = |secs| Millis::from_secs(secs);
    s.step(at(5), vec![Input::PodsReady(ids[0])], &mut DefaultHooks);
    // A pod fails at 10 s and its replacement is ready at 25 s: kept.
    let step = s.step(at(10), vec![Input::PodsNotReady(ids[0])], &mut DefaultHooks);
    assert!(s.awaiting_pods(ids[0]));
    assert_eq!(step.next_wake, Some(at(30)));
    s.step(at(25), vec![Input::PodsReady(ids[0])], &mut DefaultHooks);
    assert!(!s.awaiting_pods(ids[0]));
    // Again at 40 s; the first episode's deadline (30 s) and the admission
    // timeout (60 s) pass by; 20 s after the second, it is evicted.
    s.step(at(40), vec![Input::PodsNotReady(ids[0])], &mut DefaultHooks);
    let step = s.step(at(59), Vec::new(), &mut DefaultHooks);
    assert!(step.events.is_empty(), "{:?}", step.events);
    assert_eq!(s.entry(ids[0]).status, Status::Admitted);
    let step = s.step(at(60), Vec::new(), &mut DefaultHooks);
    assert!(
        matches!(
            &step.events[0],
            Event::Evicted {
                cause: Eviction::PodsReadyTimeout { recovery: true, .. },
                ..
            }
        ),
        "{:?}",
        step.events
    );
    assert_eq!(s.entry(ids[0]).status, Status::Backoff);
    assert!(
        s.reason_text(ids[0]).contains("recoveryTimeout 20s"),
        "{}",
        s.reason_text(ids[0])
    );
    // Queued again after the backoff, it waits for its start as at first.
    let step = s.step(at(70), Vec::new(), &mut DefaultHooks);
    assert_eq!(admitted(&step), ids);
    assert!(s.awaiting_pods(ids[0]));
    // Not ready before it was ever ready: that is the start's timeout, not
    // a recovery.
    s.step(at(75), vec![Input::PodsNotReady(ids[0])], &mut DefaultHooks);
    let step = s.step(at(96), Vec::new(), &mut DefaultHooks);
    assert!(step.events.is_empty(), "{:?}", step.events);
}

#[test]
fn without_a_recovery_timeout_pods_not_ready_again_keep_their_admission() {
    let mut c = (*waiting_cluster(false, None)).clone();
    if let Some(policy) = c.pods_ready.as_mut() {
        policy.recovery_timeout = None;
    }
    let c = Arc::new(c);
    let mut s = Scheduler::new(c.clone(), &[]);
    let (ids, _) = submit(&mut s, 0, vec![workload(&c, "ns-a", "gang", 4, 0)]);
    s.step(
        Millis::from_secs(5),
        vec![Input::PodsReady(ids[0])],
        &mut DefaultHooks,
    );
    s.step(
        Millis::from_secs(10),
        vec![Input::PodsNotReady(ids[0])],
        &mut DefaultHooks,
    );
    assert!(!s.awaiting_pods(ids[0]));
    let step = s.step(Millis::from_secs(1000), Vec::new(), &mut DefaultHooks);
    assert!(step.events.is_empty(), "{:?}", step.events);
    assert_eq!(s.entry(ids[0]).status, Status::Admitted);
}

#[test]
fn a_workload_carried_over_a_restart_keeps_its_counters_and_backoff() {
    // waiting_cluster: backoff 10 s doubling to 30 s, at most 1 requeue.
    let c = waiting_cluster(false, Some(1));
    let mut s = Scheduler::new(c.clone(), &[]);
    let at = |secs| Millis::from_secs(secs);
    let carried = Carried {
        retries: 0,
        pods_ready_requeues: 1,
        evictions: 1,
        backoff: Some((at(130), Backoff::PodsReady)),
    };
    let step = s.step(
        at(100),
        vec![Input::SubmitQueued {
            workload: workload(&c, "ns-a", "gang", 4, 0),
            queue_time: at(50),
            carried,
        }],
        &mut DefaultHooks,
    );
    let id = step.submitted[0];
    // Backing off until 130 s, as before the restart, with quota free.
    assert!(admitted(&step).is_empty());
    assert_eq!(s.entry(id).status, Status::Backoff);
    assert!(
        s.reason_text(id).contains("requeue 1 of 1"),
        "{}",
        s.reason_text(id)
    );
    assert_eq!(step.next_wake, Some(at(130)));
    let step = s.step(at(130), Vec::new(), &mut DefaultHooks);
    assert_eq!(admitted(&step), vec![id]);
    assert_eq!(s.entry(id).evictions, 1);
    // Its pods' timeout again: past the limit counted from before the
    // restart, deactivated.
    s.step(at(190), Vec::new(), &mut DefaultHooks);
    assert_eq!(s.entry(id).status, Status::Deactivated);

    // A backoff that ended while the operator was down: queued at once.
    let carried = Carried {
        retries: 2,
        backoff: Some((at(150), Backoff::Retry)),
        ..Carried::default()
    };
    let step = s.step(
        at(200),
        vec![Input::SubmitQueued {
            workload: workload(&c, "ns-a", "retried", 4, 0),
            queue_time: at(60),
            carried,
        }],
        &mut DefaultHooks,
    );
    assert_eq!(admitted(&step), step.submitted);
    assert_eq!(s.entry(step.submitted[0]).retries, 2);
}

#[test]
fn block_admission_admits_nothing_until_the_admitted_pods_are_ready() {
    let c = waiting_cluster(true, None);
    let mut s = Scheduler::new(c.clone(), &[]);
    let (ids, step) = submit(
        &mut s,
        0,
        vec![
            workload(&c, "ns-a", "first", 4, 0),
            workload(&c, "ns-a", "second", 4, 0),
        ],
    );
    // Quota for both, but only the first is admitted until its pods are ready.
    assert_eq!(admitted(&step), vec![ids[0]]);
    assert_eq!(s.reason(ids[1]).code(), "WaitingForPodsReady");
    assert!(
        s.reason_text(ids[1]).contains("ns-a/first"),
        "{}",
        s.reason_text(ids[1])
    );
    let step = s.step(
        Millis::from_secs(5),
        vec![Input::PodsReady(ids[0])],
        &mut DefaultHooks,
    );
    assert_eq!(admitted(&step), vec![ids[1]]);
}

#[test]
fn quota_reserved_for_a_cycle_gives_its_tree_back_its_usage_version_unless_more_changed() {
    // cq-a (4 GPUs, preempts only lower priorities, reclaims never) runs
    // 2; `big` asks 4 of the same priority: no victims, so it holds the 2
    // free GPUs for the rest of its cycle (Kueue's reservation for
    // unreclaimable preemption), released when the cycle ends.
    let (c, mut s, _) = started(&[("ns-a", "running", 2)]);
    let cq_a = c.cluster_queue_id("cq-a").unwrap();
    let version = s.quota().version(cq_a);
    let (ids, step) = submit(&mut s, 1, vec![workload(&c, "ns-a", "big", 4, 0)]);
    assert!(admitted(&step).is_empty());
    assert_eq!(s.entry(ids[0]).status, Status::Inadmissible);
    assert_eq!(gpus_used(&s, "cq-a", "a100"), Amount::from_units(2));
    // Nothing but the reservation changed cq-a's tree: the usage is what
    // `version` stood for, so what was computed from it still holds.
    assert_eq!(s.quota().version(cq_a), version);

    // In the same cycle cq-b (same cohort) admits after the reservation:
    // the tree's usage changed, and so does its version.
    let (c, mut s, _) = started(&[("ns-a", "running", 2)]);
    let version = s.quota().version(cq_a);
    let (ids, step) = submit(
        &mut s,
        1,
        vec![
            workload(&c, "ns-a", "big", 4, 0),
            workload(&c, "ns-b", "small", 1, 0),
        ],
    );
    assert_eq!(admitted(&step), vec![ids[1]]);
    assert_eq!(gpus_used(&s, "cq-a", "a100"), Amount::from_units(2));
    assert_ne!(s.quota().version(cq_a), version);
}

#[test]
fn waiting_workloads_are_listed_in_queue_order_whether_queued_or_set_aside() {
    let c = cluster(4);
    let mut s = Scheduler::new(c.clone(), &[]);
    let (first, _) = submit(&mut s, 0, vec![workload(&c, "ns-solo", "running", 2, 0)]);
    let (early, _) = submit(
        &mut s,
        1,
        vec![
            workload(&c, "ns-solo", "low", 1, 0),
            workload(&c, "ns-solo", "high", 1, 5),
        ],
    );
    let (late, _) = submit(&mut s, 2, vec![workload(&c, "ns-solo", "high-later", 1, 5)]);
    let cq = c.cluster_queue_id("solo").unwrap_or_else(|| panic!("solo"));
    let order: Vec<WorkloadId> = s.waiting_in_order(cq).collect();
    // Priority first, then queue time; the admitted one is not waiting.
    assert_eq!(order, vec![early[1], late[0], early[0]]);
    assert_eq!(order.len(), s.pending_count(cq));
    assert!(!order.contains(&first[0]));
    let other = c.cluster_queue_id("cq-a").unwrap_or_else(|| panic!("cq-a"));
    assert_eq!(s.waiting_in_order(other).count(), 0);
}
