use super::*;
use crate::dashboard::detail;
use crate::dashboard::page::Filter;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use serde_json::json;

fn from<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn queue(name: &str, cohort: Option<&str>, usage: &str) -> ClusterQueue {
    from(json!({
        "apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohort": cohort,
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}
            ]}]
        },
        "status": {
            "pendingWorkloads": 2, "admittedWorkloads": 1,
            "flavorsUsage": [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": usage, "borrowed": "0"}]}],
            "pendingWorkloadsStatus": {"head": [{"namespace": "team-a", "name": "wl-2"}], "lastChangeTime": "2026-01-01T00:00:00Z"},
            "conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
        }
    }))
}

fn cohort(name: &str, parent: Option<&str>) -> Cohort {
    from(json!({
        "apiVersion": "arbiter.dev/v1alpha1", "kind": "Cohort",
        "metadata": {"name": name}, "spec": {"parent": parent}
    }))
}

fn workload(
    name: &str,
    conditions: serde_json::Value,
    admission: Option<serde_json::Value>,
) -> Workload {
    from(json!({
        "apiVersion": "arbiter.dev/v1alpha1", "kind": "Workload",
        "metadata": {"name": name, "namespace": "team-a", "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": format!("job-{name}"), "uid": "u", "controller": true}
        ]},
        "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1}]},
        "status": {"conditions": conditions, "admission": admission}
    }))
}

fn local_queue() -> LocalQueue {
    from(json!({
        "apiVersion": "arbiter.dev/v1alpha1", "kind": "LocalQueue",
        "metadata": {"name": "main", "namespace": "team-a"},
        "spec": {"clusterQueue": "research"},
        "status": {"pendingWorkloads": 1, "admittedWorkloads": 1}
    }))
}

fn snapshot() -> DashboardObjects {
    let pending = workload(
        "wl-2",
        json!([{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                "message": "insufficient quota for nvidia.com/gpu in flavor a100, 8 more needed",
                "lastTransitionTime": "2026-01-01T00:01:00Z"}]),
        None,
    );
    let admitted = workload(
        "wl-1",
        json!([{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
               {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted by policy fair-gpu", "lastTransitionTime": "2026-01-01T00:00:01Z"}]),
        Some(
            json!({"clusterQueue": "research", "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "a100"}}]}),
        ),
    );
    let bundle: ConfigMap = from(json!({
        "metadata": {"name": "platform", "namespace": "arbiter-system",
                     "annotations": {"arbiter.dev/bundle-status": "rejected gpu@2: policy max-gpus: bad CEL; in force: gpu@1 at 2026-01-01T00:00:00Z"}}
    }));
    DashboardObjects {
        cohorts: vec![
            Arc::new(cohort("root", None)),
            Arc::new(cohort("research-org", Some("root"))),
        ],
        cluster_queues: vec![
            Arc::new(queue("research", Some("research-org"), "6")),
            Arc::new(queue("solo", None, "0")),
        ],
        local_queues: vec![Arc::new(local_queue())],
        workloads: vec![Arc::new(pending), Arc::new(admitted)],
        bundles: vec![bundle.metadata],
        ..DashboardObjects::default()
    }
}

/// Events about wl-2 (its Workload), wl-1's Job, and a Job of the same
/// name in another namespace.
fn events() -> Vec<Event> {
    let event: Event = from(json!({
        "metadata": {"name": "wl-2.1", "namespace": "team-a"},
        "involvedObject": {"kind": "Workload", "namespace": "team-a", "name": "wl-2"},
        "reason": "Pending", "message": "waiting for quota", "type": "Normal", "count": 3,
        "lastTimestamp": "2026-01-01T00:02:00Z"
    }));
    let of_job: Event = from(json!({
        "metadata": {"name": "job-wl-1.1", "namespace": "team-a"},
        "involvedObject": {"kind": "Job", "namespace": "team-a", "name": "job-wl-1"},
        "reason": "Admitted", "message": "admitted by ClusterQueue research", "type": "Normal",
        "eventTime": "2026-01-01T00:00:01.000000Z"
    }));
    let elsewhere: Event = from(json!({
        "metadata": {"name": "job-wl-1.2", "namespace": "team-b"},
        "involvedObject": {"kind": "Job", "namespace": "team-b", "name": "job-wl-1"},
        "reason": "Admitted", "message": "another namespace's job", "type": "Normal"
    }));
    vec![event, of_job, elsewhere]
}

#[test]
fn cohorts_nest_by_parent_with_their_queues_under_them() {
    let d = Dashboard::of(&snapshot());
    let names: Vec<(&str, &str)> = d.tree.iter().map(|n| (n.kind, n.name.as_str())).collect();
    assert_eq!(names, [("Cohort", "root"), ("ClusterQueue", "solo")]);
    let org = &d.tree[0].children[0];
    assert_eq!((org.kind, org.name.as_str()), ("Cohort", "research-org"));
    assert_eq!(org.children[0].name, "research");
    assert_eq!(org.children[0].resources[0].usage, "6");
}

#[test]
fn a_cohort_loop_is_shown_once_not_followed_forever() {
    let s = DashboardObjects {
        cohorts: vec![
            Arc::new(cohort("a", Some("b"))),
            Arc::new(cohort("b", Some("a"))),
        ],
        ..DashboardObjects::default()
    };
    let d = Dashboard::of(&s);
    assert_eq!(d.tree.len(), 1, "{:?}", d.tree);
    assert_eq!(d.tree[0].children.len(), 1);
    assert!(d.tree[0].children[0].children.is_empty());
}

#[test]
fn queues_carry_quota_usage_percent_and_their_head() {
    let d = Dashboard::of(&snapshot());
    let research = &d.cluster_queues[0];
    assert_eq!(research.name, "research");
    assert_eq!((research.pending, research.admitted), (2, 1));
    assert_eq!(research.active, "True");
    let row = &research.resources[0];
    assert_eq!(
        (row.flavor.as_str(), row.resource.as_str()),
        ("a100", "nvidia.com/gpu")
    );
    assert_eq!((row.nominal.as_str(), row.usage.as_str()), ("8", "6"));
    assert_eq!(row.percent, Some(75.0));
    assert_eq!(research.head, ["team-a/wl-2"]);
    assert_eq!(d.local_queues[0].cluster_queue, "research");
}

#[test]
fn workloads_say_state_position_reason_and_policy_pending_first() {
    let d = Dashboard::of(&snapshot());
    let pending = &d.workloads[0];
    assert_eq!((pending.name.as_str(), pending.state), ("wl-2", "Pending"));
    assert_eq!(pending.cluster_queue.as_deref(), Some("research"));
    assert_eq!(pending.position.as_deref(), Some("1"));
    assert_eq!(pending.reason, "Pending");
    assert!(
        pending.message.contains("insufficient quota"),
        "{}",
        pending.message
    );
    assert_eq!(pending.job.as_deref(), Some("Job/job-wl-2"));
    let admitted = &d.workloads[1];
    assert_eq!(
        (admitted.name.as_str(), admitted.state),
        ("wl-1", "Admitted")
    );
    assert_eq!(admitted.policy.as_deref(), Some("fair-gpu"));
    assert_eq!(admitted.flavors, ["main: nvidia.com/gpu=a100"]);
    assert_eq!(admitted.position, None);
}

#[test]
fn pending_workloads_come_in_queue_order_the_unnumbered_last() {
    let mut s = snapshot();
    let waiting = |name: &str| {
        Arc::new(workload(
            name,
            json!([{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "",
                    "lastTransitionTime": "2026-01-01T00:01:00Z"}]),
            None,
        ))
    };
    s.workloads = vec![waiting("a-past-head"), waiting("wl-3"), waiting("wl-2")];
    let mut research = (*s.cluster_queues[0]).clone();
    let status = research.status.as_mut().unwrap();
    status.pending_workloads = 3;
    status.pending_workloads_status.as_mut().unwrap().head = vec![
        from(json!({"namespace": "team-a", "name": "wl-3"})),
        from(json!({"namespace": "team-a", "name": "wl-2"})),
    ];
    s.cluster_queues[0] = Arc::new(research);
    let d = Dashboard::of(&s);
    let order: Vec<(&str, Option<&str>)> = d
        .workloads
        .iter()
        .map(|w| (w.name.as_str(), w.position.as_deref()))
        .collect();
    assert_eq!(
        order,
        [
            ("wl-3", Some("1")),
            ("wl-2", Some("2")),
            ("a-past-head", Some(">2"))
        ]
    );
}

#[test]
fn a_page_holds_the_workloads_its_filter_keeps_at_most_its_limit() {
    let d = Dashboard::of(&snapshot());
    let all = d.page(&Filter::default(), false);
    assert_eq!(
        (
            all.workloads.len(),
            all.workloads_matching,
            all.workloads_total
        ),
        (2, 2, 2)
    );
    assert!(all.decisions.is_none(), "no engine, no decisions");
    let admitted = Filter {
        state: Some("admitted".into()),
        ..Filter::default()
    };
    let page = d.page(&admitted, true);
    let names: Vec<&str> = page.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["wl-1"]);
    assert_eq!(page.decisions, Some(&[][..]));
    let elsewhere = Filter {
        namespace: Some("team-b".into()),
        ..Filter::default()
    };
    assert_eq!(d.page(&elsewhere, false).workloads_matching, 0);
    let by_queue = Filter {
        cluster_queue: Some("research".into()),
        limit: Some(1),
        ..Filter::default()
    };
    let page = d.page(&by_queue, false);
    assert_eq!((page.workloads.len(), page.workloads_matching), (1, 2));
    assert_eq!(page.workloads[0].name, "wl-2", "the first in order");
    let empty = Filter {
        namespace: Some(String::new()),
        ..Filter::default()
    };
    assert_eq!(
        d.page(&empty, false).workloads_matching,
        2,
        "empty is no filter"
    );
}

#[test]
fn a_workload_shows_the_events_about_it_and_its_job_only() {
    let s = snapshot();
    let events = events();
    let of_admitted = detail::events_about(&s.workloads[1], &events);
    let told: Vec<&str> = of_admitted.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        told,
        ["admitted by ClusterQueue research"],
        "its job's Events, no other namespace's"
    );
    assert_eq!(of_admitted[0].time, "2026-01-01T00:00:01Z");
    let of_pending = detail::events_about(&s.workloads[0], &events);
    assert_eq!(of_pending.len(), 1);
    assert_eq!(of_pending[0].count, 3);
    assert_eq!(of_pending[0].time, "2026-01-01T00:02:00Z");
}

#[test]
fn only_the_latest_events_of_a_workload_are_kept() {
    let s = snapshot();
    let events: Vec<Event> = (0..detail::EVENTS_PER_WORKLOAD + 5)
        .map(|i| {
            from(json!({
                "metadata": {"name": format!("e{i}"), "namespace": "team-a"},
                "involvedObject": {"kind": "Workload", "namespace": "team-a", "name": "wl-2"},
                "reason": format!("R{i}"), "message": "m",
                "lastTimestamp": format!("2026-01-01T00:{i:02}:00Z")
            }))
        })
        .collect();
    let shown = detail::events_about(&s.workloads[0], &events);
    assert_eq!(shown.len(), detail::EVENTS_PER_WORKLOAD);
    assert_eq!(
        shown.last().unwrap().reason,
        format!("R{}", detail::EVENTS_PER_WORKLOAD + 4)
    );
    assert_eq!(shown[0].reason, "R5");
}

#[test]
fn bundles_say_what_became_of_them() {
    let d = Dashboard::of(&snapshot());
    assert_eq!(d.bundles[0].result, "rejected");
    assert!(d.bundles[0].status.contains("in force: gpu@1"));
    let mut s = snapshot();
    s.bundles[0].annotations = None;
    assert_eq!(Dashboard::of(&s).bundles[0].result, "unknown");
}

#[test]
fn the_state_serialises_in_camel_case() {
    let d = Dashboard::of(&snapshot());
    let text = serde_json::to_value(d.page(&Filter::default(), false)).unwrap();
    assert_eq!(text["clusterQueues"][0]["resources"][0]["percent"], 75.0);
    assert_eq!(text["workloads"][0]["clusterQueue"], "research");
    assert_eq!(text["workloadsTotal"], 2);
    assert!(text.get("decisions").is_none());
    assert_eq!(text["localQueues"][0]["clusterQueue"], "research");
}

#[test]
fn the_deciding_policy_is_read_from_the_sentence_naming_it() {
    assert_eq!(
        deciding_policy("denied by policy gpu-hours (will retry): over budget"),
        Some("gpu-hours")
    );
    assert_eq!(
        deciding_policy("rejected by policy max-gpus: asks 64"),
        Some("max-gpus")
    );
    assert_eq!(
        deciding_policy("insufficient quota for nvidia.com/gpu"),
        None
    );
}
