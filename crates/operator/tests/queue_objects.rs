//! One bad queue object never freezes the others (Kueue's rule: each queue
//! object is in force or not on its own), against a real API server with
//! nothing refusing the objects (no validating webhook): a LocalQueue left
//! behind by its deleted ClusterQueue, a ClusterQueue naming a flavor that
//! does not exist, one with a quota too large to count, and Cohorts whose
//! parents form a cycle. (What one object's schema can say — a negative
//! quota, a quantity that is no quantity, a name that is no name — the API
//! server refuses at once; the first test shows it.) Each is told on the
//! object (an `Active=False` condition with its reason where the kind has
//! a status, a Warning `Inactive` Event), jobs naming a queue left out are
//! told why, and meanwhile a new ClusterQueue and LocalQueue in another
//! namespace admit at once. Fixed, the object is in force again (a Normal
//! `Active` Event) and its jobs are admitted.

mod support;

use arbiter_core::model::api::{ClusterQueue, Cohort, LocalQueue, ResourceFlavor};
use arbiter_operator::admin::{AdminState, OperatorMetrics};
use arbiter_operator::Operator;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::Client;
use support::*;

const OLD: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: old}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: old, namespace: team-a}
spec: {clusterQueue: old}
"#;

/// What a platform engineer or a tenant might leave behind, each broken
/// its own way.
const BROKEN: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: h100s}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: huge}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: "1e30"}]
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: left}
spec: {parent: right}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: right}
spec: {parent: left}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cyclic}
spec:
  cohort: left
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
"#;

const FRESH: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: fresh}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: fresh, namespace: team-b}
spec: {clusterQueue: fresh}
"#;

/// A held Job in `namespace` for LocalQueue `queue`.
fn queued(namespace: &str, queue: &str, name: &str) -> Job {
    let mut job = job(name, 1);
    job.metadata.namespace = Some(namespace.into());
    job.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("arbiter.dev/queue-name".into(), queue.into());
    job
}

fn active(conditions: &[Condition]) -> Option<(String, String, String)> {
    conditions
        .iter()
        .find(|c| c.type_ == "Active")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until `read` gives an `Active` condition of `status` and `reason`;
/// returns its message.
async fn wait_active<F, Fut>(what: &str, status: &str, reason: &str, read: F) -> String
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Vec<Condition>>,
{
    let started = std::time::Instant::now();
    loop {
        let now = active(&read().await);
        if let Some((s, r, message)) = &now {
            if s == status && r == reason {
                return message.clone();
            }
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: awaited Active={status} ({reason}) within {} s; it is {now:?}",
            PATIENCE.as_secs()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Waits until `name` (read through `api`, its conditions by `conditions`)
/// has `Active` of `status` and `reason`; returns the message.
async fn object_active<K>(
    api: &Api<K>,
    what: &str,
    status: &str,
    reason: &str,
    conditions: fn(K) -> Option<Vec<Condition>>,
) -> String
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = what.rsplit(['/', ' ']).next().unwrap_or(what);
    wait_active(what, status, reason, || async {
        api.get(name)
            .await
            .ok()
            .and_then(conditions)
            .unwrap_or_default()
    })
    .await
}

async fn local_queue_active(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &str,
    reason: &str,
) -> String {
    let api: Api<LocalQueue> = Api::namespaced(client.clone(), namespace);
    let what = format!("LocalQueue {namespace}/{name}");
    object_active(&api, &what, status, reason, |o| {
        o.status.map(|s| s.conditions)
    })
    .await
}

async fn cluster_queue_active(client: &Client, name: &str, status: &str, reason: &str) -> String {
    let api: Api<ClusterQueue> = Api::all(client.clone());
    let what = format!("ClusterQueue {name}");
    object_active(&api, &what, status, reason, |o| {
        o.status.map(|s| s.conditions)
    })
    .await
}

async fn cohort_active(client: &Client, name: &str, status: &str, reason: &str) -> String {
    let api: Api<Cohort> = Api::all(client.clone());
    let what = format!("Cohort {name}");
    object_active(&api, &what, status, reason, |o| {
        o.status.map(|s| s.conditions)
    })
    .await
}

async fn flavor_active(client: &Client, name: &str, status: &str, reason: &str) -> String {
    let api: Api<ResourceFlavor> = Api::all(client.clone());
    let what = format!("ResourceFlavor {name}");
    object_active(&api, &what, status, reason, |o| {
        o.status.map(|s| s.conditions)
    })
    .await
}

/// The `Active` column the API server prints for object `name` of
/// `resource` (a path under `/apis/arbiter.dev/v1alpha1/`), as `kubectl
/// get` asks for it: a `meta.k8s.io` Table.
async fn active_column(client: &Client, resource: &str, name: &str) -> Option<String> {
    let request = http::Request::get(format!("/apis/arbiter.dev/v1alpha1/{resource}/{name}"))
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .body(Vec::new())
        .unwrap();
    let table: serde_json::Value = client.request(request).await.unwrap();
    let column = table["columnDefinitions"]
        .as_array()?
        .iter()
        .position(|c| c["name"] == "Active")?;
    table["rows"][0]["cells"][column]
        .as_str()
        .map(str::to_string)
}

/// The CRD schema refuses, without any webhook, what one object can say
/// is wrong: a negative quota (integer or string), a quantity that is no
/// quantity, a reference that is no object name. The API server's message
/// names the field.
#[tokio::test]
async fn the_schema_refuses_what_one_object_can_say_is_wrong() {
    let (_cluster, admin) = cluster_with_setup().await;
    let cqs: Api<ClusterQueue> = Api::all(admin.clone());
    let queue = |name: &str, quota: serde_json::Value, cohort: &str| -> ClusterQueue {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"cohort": cohort, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}]}]}
        }))
        .unwrap()
    };
    for (name, quota, cohort, field) in [
        ("minus-int", serde_json::json!(-8), "ok", "nominalQuota"),
        ("minus-text", serde_json::json!("-8"), "ok", "nominalQuota"),
        (
            "garbage",
            serde_json::json!("garbage"),
            "ok",
            "nominalQuota",
        ),
        (
            "bad-cohort",
            serde_json::json!(8),
            "Not_A_Name",
            "spec.cohort",
        ),
    ] {
        let created = cqs
            .create(&PostParams::default(), &queue(name, quota, cohort))
            .await;
        refused(&format!("ClusterQueue {name}"), created, field);
    }
    // Quantities in every spelling a quota may have still pass.
    for (i, quota) in [
        serde_json::json!(8),
        serde_json::json!("500m"),
        serde_json::json!("64Gi"),
        serde_json::json!("1e3"),
        serde_json::json!("+2"),
    ]
    .into_iter()
    .enumerate()
    {
        cqs.create(
            &PostParams::default(),
            &queue(&format!("ok-{i}"), quota, "ok"),
        )
        .await
        .unwrap_or_else(|e| panic!("quota {i}: {e}"));
    }
    // Rules inside one object (`x-kubernetes-validations`), as Kueue's CRDs have them.
    let group = |resources: serde_json::Value| {
        serde_json::json!([{"coveredResources": ["cpu", "nvidia.com/gpu"],
            "flavors": [{"name": "a100", "resources": resources}]}])
    };
    let raw_cqs: Api<DynamicObject> =
        Api::all_with(admin.clone(), &ApiResource::erase::<ClusterQueue>(&()));
    let both = serde_json::json!([{"name": "cpu", "nominalQuota": 8},
        {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 2}]);
    for (name, spec, says) in [
        (
            "limit-without-cohort",
            serde_json::json!({"resourceGroups": group(both.clone())}),
            "need a cohort",
        ),
        (
            "short-flavor",
            serde_json::json!({"cohort": "ok",
                "resourceGroups": group(serde_json::json!([{"name": "cpu", "nominalQuota": 8}]))}),
            "every covered resource",
        ),
        (
            "preference",
            serde_json::json!({"flavorFungibility": {"whenCanBorrow": "MayStopSearch",
                "preference": "PreemptionOverBorrowing"}}),
            "preference may only be set",
        ),
        (
            "borrow-no-reclaim",
            serde_json::json!({"cohort": "ok",
                "preemption": {"borrowWithinCohort": {"policy": "LowerPriority"}}}),
            "needs reclaimWithinCohort",
        ),
        (
            "strategy",
            serde_json::json!({"queueingStrategy": "Random"}),
            "spec.queueingStrategy",
        ),
        (
            "seventeen-groups",
            serde_json::json!({"cohort": "ok", "resourceGroups": (0..17)
                .map(|i| serde_json::json!({"coveredResources": [format!("r{i}")],
                    "flavors": [{"name": "a100", "resources": [{"name": format!("r{i}"), "nominalQuota": 1}]}]}))
                .collect::<Vec<_>>()}),
            "spec.resourceGroups",
        ),
    ] {
        // Untyped: some of these are not even a ClusterQueue to serde.
        let queue: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue",
            "metadata": {"name": name}, "spec": spec
        }))
        .unwrap();
        let created = raw_cqs.create(&PostParams::default(), &queue).await;
        refused(&format!("ClusterQueue {name}"), created, says);
    }
    let flavors: Api<ResourceFlavor> = Api::all(admin.clone());
    for (name, spec, says) in [
        (
            "bad-effect",
            serde_json::json!({"nodeTaints": [{"key": "gpu", "effect": "Sometimes"}]}),
            "taint's effect",
        ),
        (
            "exists-with-value",
            serde_json::json!({"tolerations": [{"key": "gpu", "operator": "Exists", "value": "x"}]}),
            "operator Exists has no value",
        ),
        (
            "keyless",
            serde_json::json!({"tolerations": [{"operator": "Equal", "value": "x"}]}),
            "without a key",
        ),
    ] {
        let flavor: ResourceFlavor =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec}))
                .unwrap();
        let created = flavors.create(&PostParams::default(), &flavor).await;
        refused(&format!("ResourceFlavor {name}"), created, says);
    }
    // What the rules allow still passes.
    let allowed: ClusterQueue = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "allowed"},
        "spec": {"cohort": "ok", "resourceGroups": group(both),
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
                "preference": "PreemptionOverBorrowing"},
            "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}}}
    }))
    .unwrap();
    cqs.create(&PostParams::default(), &allowed).await.unwrap();
    let tolerant: ResourceFlavor = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "tolerant"},
        "spec": {"nodeTaints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}],
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
                {"operator": "Exists"}]}
    }))
    .unwrap();
    flavors
        .create(&PostParams::default(), &tolerant)
        .await
        .unwrap();

    let lqs: Api<LocalQueue> = Api::namespaced(admin.clone(), "team-a");
    let lq: LocalQueue = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bad", "namespace": "team-a"}, "spec": {"clusterQueue": "No Such Queue"}
    }))
    .unwrap();
    let created = lqs.create(&PostParams::default(), &lq).await;
    refused("LocalQueue bad", created, "spec.clusterQueue");
}

/// Asserts the API server refused creating `what` as invalid (422) with a
/// message that says `says`.
fn refused<T: std::fmt::Debug>(what: &str, created: Result<T, kube::Error>, says: &str) {
    match created {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{what}: {status:?}");
            assert!(status.message.contains(says), "{what}: {}", status.message);
        }
        other => panic!("{what} was not refused: {other:?}"),
    }
}

#[tokio::test]
async fn a_broken_queue_object_is_told_on_itself_and_the_others_go_on() {
    let (_cluster, admin) = cluster_with_setup().await;
    create_namespace(&admin, "team-b").await;
    init_tracing();
    let mut registry = Default::default();
    let metrics = OperatorMetrics::register(&mut registry);
    let state = AdminState::new(registry);
    let _operator = Operator::builder(admin.clone())
        .driver_options(test_driver_options())
        .metrics(state.clone(), metrics)
        .start()
        .await
        .unwrap();
    // The setup's queue is in force, and says so.
    cluster_queue_active(&admin, "research", "True", "Ready").await;
    local_queue_active(&admin, "team-a", "research", "True", "Ready").await;

    // An ordinary clean-up: ClusterQueue `old` deleted, its LocalQueue left.
    apply_yaml(&admin, OLD).await;
    local_queue_active(&admin, "team-a", "old", "True", "Ready").await;
    Api::<ClusterQueue>::all(admin.clone())
        .delete("old", &DeleteParams::default())
        .await
        .unwrap();
    let message =
        local_queue_active(&admin, "team-a", "old", "False", "ClusterQueueDoesNotExist").await;
    assert_eq!(message, "ClusterQueue old does not exist");
    let note = wait_event_in(&admin, "team-a", "old", "Inactive", |_| true).await;
    assert!(
        note.contains("LocalQueue team-a/old is inactive (ClusterQueueDoesNotExist)"),
        "{note}"
    );
    apply_yaml(&admin, BROKEN).await;

    // Meanwhile a new ClusterQueue and LocalQueue in another namespace
    // admit at once.
    apply_yaml(&admin, FRESH).await;
    let team_b: Api<Job> = Api::namespaced(admin.clone(), "team-b");
    team_b
        .create(&PostParams::default(), &queued("team-b", "fresh", "b-1"))
        .await
        .unwrap();
    wait_for(&team_b, "b-1", "admission through a new queue", released).await;

    // Every broken object carries its reason.
    let message = cluster_queue_active(&admin, "h100s", "False", "FlavorNotFound").await;
    assert_eq!(message, "ResourceFlavor h100 does not exist");
    // A quota the schema lets through but nothing can count.
    let message = cluster_queue_active(&admin, "huge", "False", "InvalidSpec").await;
    assert!(message.contains("1e30"), "{message}");
    let message = cluster_queue_active(&admin, "cyclic", "False", "CohortCycle").await;
    assert!(
        message.starts_with("Cohort left is inactive: "),
        "{message}"
    );
    let message = cohort_active(&admin, "left", "False", "CohortCycle").await;
    assert!(message.contains("is a cycle"), "{message}");
    flavor_active(&admin, "a100", "True", "Ready").await;
    // `kubectl get cq,lq,cohorts,rf` shows it: the API server's table has
    // an Active column.
    let printed = [
        ("clusterqueues", "h100s", "False"),
        ("clusterqueues", "research", "True"),
        ("cohorts", "left", "False"),
        ("resourceflavors", "a100", "True"),
        ("namespaces/team-a/localqueues", "old", "False"),
    ];
    for (resource, name, active) in printed {
        assert_eq!(
            active_column(&admin, resource, name).await.as_deref(),
            Some(active),
            "the Active column of {resource} {name}"
        );
    }
    // And `arbiter_queue_objects` counts them.
    for (kind, inactive) in [("ClusterQueue", 3.0), ("Cohort", 2.0)] {
        let series = format!("arbiter_queue_objects{{kind=\"{kind}\",state=\"inactive\"}}");
        let started = std::time::Instant::now();
        while sample(&state.registry.lock().unwrap(), &series) != Some(inactive) {
            assert!(
                started.elapsed() < PATIENCE,
                "{series} is not {inactive}: {:?}",
                sample(&state.registry.lock().unwrap(), &series)
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    for (name, reason) in [("h100s", "FlavorNotFound"), ("left", "CohortCycle")] {
        let note = wait_event_in(&admin, "default", name, "Inactive", |_| true).await;
        assert!(note.contains(&format!("({reason})")), "{note}");
    }

    // A job naming the orphaned LocalQueue is told why it waits.
    let team_a: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    team_a
        .create(&PostParams::default(), &queued("team-a", "old", "a-1"))
        .await
        .unwrap();
    let note = wait_event(&admin, "a-1", "LocalQueueInactive").await;
    assert!(
        note.contains("LocalQueue team-a/old is inactive (ClusterQueueDoesNotExist)"),
        "{note}"
    );
    let (reason, message) = wait_condition(&admin, "job-a-1", "QuotaReserved", "False").await;
    assert_eq!(
        (reason.as_str(), message.as_str()),
        ("LocalQueueInactive", note.as_str())
    );
    stays_held(&team_a, "a-1").await;

    // Fixed: ClusterQueue `old` back, its LocalQueue in force again and
    // the job admitted.
    apply_yaml(&admin, OLD).await;
    local_queue_active(&admin, "team-a", "old", "True", "Ready").await;
    let note = wait_event_in(&admin, "team-a", "old", "Active", |_| true).await;
    assert!(note.contains("in force again"), "{note}");
    wait_for(
        &team_a,
        "a-1",
        "admission once its queue is fixed",
        released,
    )
    .await;
    // Its Workload is the scheduler's now: admitted, the reason gone.
    let (reason, _) = wait_condition(&admin, "job-a-1", "QuotaReserved", "True").await;
    assert_eq!(reason, "QuotaReserved");

    // Each other broken object fixed is in force again: the flavor created,
    // the quota made countable, the cycle broken.
    apply_yaml(&admin, FIXES).await;
    Api::<Cohort>::all(admin.clone())
        .patch(
            "left",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"parent": null}})),
        )
        .await
        .unwrap();
    for name in ["h100s", "huge", "cyclic"] {
        cluster_queue_active(&admin, name, "True", "Ready").await;
    }
    cohort_active(&admin, "left", "True", "Ready").await;
    flavor_active(&admin, "h100", "True", "Ready").await;
    for name in ["h100s", "left"] {
        let note = wait_event_in(&admin, "default", name, "Active", |_| true).await;
        assert!(note.contains("in force again"), "{note}");
    }
}

/// What fixes [`BROKEN`] but the cycle: the flavor `h100s` names and a
/// quota that can be counted.
const FIXES: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: h100}
spec: {}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: huge}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: "8"}]
"#;

fn finalized(meta: &kube::api::ObjectMeta) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == "arbiter.dev/resource-in-use"))
}

/// Waits until `check` holds for what `get` returns (`None`: gone).
async fn wait_object<T, F, Fut>(what: &str, get: F, check: impl Fn(Option<&T>) -> bool) -> Option<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = std::time::Instant::now();
    loop {
        let now = get().await;
        if check(now.as_ref()) {
            return now;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what} did not happen within {} s",
            PATIENCE.as_secs()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Kueue's deletion in use: a ClusterQueue with admitted work and a
/// ResourceFlavor a ClusterQueue names are kept by the finalizer
/// `arbiter.dev/resource-in-use` until they are free; meanwhile the
/// ClusterQueue admits nothing new (`Active=False`, `Terminating`) and its
/// running job runs on. Once the job is gone both go, and the LocalQueue
/// left behind turns inactive.
#[tokio::test]
async fn a_queue_or_flavor_deleted_while_in_use_stays_until_it_is_free() {
    use arbiter_core::model::api::ResourceFlavor;
    let (_cluster, admin) = cluster_with_setup().await;
    let _operator = start_operator(admin.clone());
    let cqs: Api<ClusterQueue> = Api::all(admin.clone());
    let rfs: Api<ResourceFlavor> = Api::all(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    wait_object(
        "the finalizer on ClusterQueue research",
        || async { cqs.get_opt("research").await.ok().flatten() },
        |cq| cq.is_some_and(|cq| finalized(&cq.metadata)),
    )
    .await;
    wait_object(
        "the finalizer on ResourceFlavor a100",
        || async { rfs.get_opt("a100").await.ok().flatten() },
        |rf| rf.is_some_and(|rf| finalized(&rf.metadata)),
    )
    .await;
    jobs.create(&PostParams::default(), &job("running", 4))
        .await
        .unwrap();
    wait_for(&jobs, "running", "admission", released).await;

    // Both deleted while in use: both stay.
    rfs.delete("a100", &DeleteParams::default()).await.unwrap();
    cqs.delete("research", &DeleteParams::default())
        .await
        .unwrap();
    let message = cluster_queue_active(&admin, "research", "False", "Terminating").await;
    assert!(message.contains("arbiter.dev/resource-in-use"), "{message}");
    flavor_active(&admin, "a100", "False", "Terminating").await;
    jobs.create(&PostParams::default(), &job("late", 1))
        .await
        .unwrap();
    stays_held(&jobs, "late").await;
    assert!(released(&jobs.get("running").await.unwrap()));
    let rf = rfs.get("a100").await.unwrap();
    assert!(rf.metadata.deletion_timestamp.is_some() && finalized(&rf.metadata));

    // The job gone, the ClusterQueue is free and goes; then the flavor.
    jobs.delete("running", &DeleteParams::default())
        .await
        .unwrap();
    wait_object(
        "ClusterQueue research gone",
        || async { cqs.get_opt("research").await.ok().flatten() },
        |cq| cq.is_none(),
    )
    .await;
    wait_object(
        "ResourceFlavor a100 gone",
        || async { rfs.get_opt("a100").await.ok().flatten() },
        |rf| rf.is_none(),
    )
    .await;
    local_queue_active(
        &admin,
        "team-a",
        "research",
        "False",
        "ClusterQueueDoesNotExist",
    )
    .await;
}
