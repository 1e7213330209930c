//! Shadow mode end to end: Kueue v0.17's manager (built from the Go module
//! proxy by `scripts/kueue.sh`) really admits suspended Jobs on a test API
//! server while Arbiter runs beside it with `shadow`, as a user that may
//! only read. Kueue's queue objects are the configuration; a bundle makes
//! Arbiter decide otherwise for two jobs (one refused, one put on another
//! flavor). The comparison must say so per job — in the `/shadow` summary,
//! the `arbiter_shadow_*` metrics and the report file — agree on the job
//! both treat alike, see a job that ended under Kueue end in its shadow,
//! and write nothing: no arbiter.dev Workload, no change of Arbiter's on
//! any Job.

mod support;

use std::time::Duration;

use arbiter_operator::admin::{AdminState, OperatorMetrics};
use arbiter_operator::policy_sources::{BundleOptions, Bundles};
use arbiter_operator::shadow::ShadowOptions;
use arbiter_operator::Operator;
use arbiter_testcluster::kueue::{self, Manager};
use arbiter_testcluster::TestCluster;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use support::{apply_yaml, create_namespace, init_tracing, PATIENCE};

/// Kueue's queue objects: two flavors without node labels (quota alone,
/// Kueue's model), one ClusterQueue offering both, in this order, and one
/// of two cores that preempts lower priorities within itself.
const KUEUE_SETUP: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: on-demand}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 4}]
    - name: spot
      resources: [{name: cpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-preempt}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq-preempt, namespace: team-a}
spec: {clusterQueue: cq-preempt}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: lowest}
value: 1
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
"#;

/// Arbiter's bundle: jobs labelled `shadow.test/deny` are refused for good,
/// jobs labelled `shadow.test/spot` are offered spot first.
const BUNDLE: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {name: shadow-test, version: "1"}
spec:
  policies:
  - name: deny-labelled
    hook: admission
    cel:
      expression: "!('shadow.test/deny' in workload.labels)"
      messageExpression: "'this team does not run here under Arbiter'"
      retryable: false
  - name: spot-first
    hook: flavor
    match: {clusterQueues: [cq]}
    cel:
      expression: "'shadow.test/spot' in workload.labels ? ['spot', 'on-demand'] : ['on-demand', 'spot']"
"#;

/// A suspended Job queued in Kueue's LocalQueue `queue` with `labels`
/// besides, one pod of one core.
fn job(name: &str, queue: &str, extra: &[(&str, &str)]) -> Job {
    let mut labels = json!({"kueue.x-k8s.io/queue-name": queue});
    for (key, value) in extra {
        labels[*key] = json!(value);
    }
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "labels": labels},
        "spec": {"suspend": true, "parallelism": 1, "completions": 1,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "1"}}}]}}}
    }))
    .unwrap()
}

/// The body of `GET path` on the loopback `port`.
async fn http_get(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    body.to_string()
}

/// The row of the job `name` in a report.
fn row<'a>(report: &'a Value, name: &str) -> Option<&'a Value> {
    report["workloads"]
        .as_array()?
        .iter()
        .find(|r| r["job"] == format!("Job team-a/{name}"))
}

/// Waits until the `/shadow` report satisfies `check`; returns it.
async fn wait_report(port: u16, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let started = std::time::Instant::now();
    loop {
        let report: Value = serde_json::from_str(&http_get(port, "/shadow").await).unwrap();
        if check(&report) {
            return report;
        }
        assert!(
            started.elapsed() < PATIENCE * 2,
            "{what} was not reported within {} s; the report: {}",
            (PATIENCE * 2).as_secs(),
            serde_json::to_string_pretty(&report).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A user of its own (`alice`) that may do anything, so that whatever the
/// shadow would write would be written, and the test would see it.
async fn operator_client(cluster: &TestCluster, admin: &Client) -> Client {
    apply_yaml(
        admin,
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
"#,
    )
    .await;
    cluster.client_for("alice").await.unwrap()
}

/// A user (`bob`) bound only to the ClusterRole of docs/shadow-rbac.yaml.
async fn shadow_role_client(cluster: &TestCluster, admin: &Client) -> Client {
    let role = std::fs::read_to_string(
        arbiter_testcluster::workspace_root().join("docs/shadow-rbac.yaml"),
    )
    .unwrap();
    apply_yaml(admin, &role).await;
    apply_yaml(
        admin,
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: bob-shadow}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: arbiter-shadow}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
"#,
    )
    .await;
    cluster.client_for("bob").await.unwrap()
}

/// The shadow mode in-process as `arbiter run --shadow` starts it: the
/// bundle directory `bundles`, the admin port on a free loopback port, the
/// report written to `report` (every 200 ms while it changes).
async fn start_shadow(
    client: Client,
    bundles: &std::path::Path,
    report: Option<std::path::PathBuf>,
) -> Operator {
    let bundles = Bundles::load(
        BundleOptions {
            platform_namespace: "arbiter-system".into(),
            dirs: vec![bundles.to_path_buf()],
        },
        None,
    )
    .unwrap();
    let mut registry = Registry::default();
    let operator_metrics = OperatorMetrics::register(&mut registry);
    let state = AdminState::new(registry);
    Operator::builder(client)
        .bundles(bundles)
        .metrics(state, operator_metrics)
        .admin_address("127.0.0.1:0".parse().unwrap())
        .shadow(ShadowOptions {
            report,
            report_every: Duration::from_millis(200),
            ..ShadowOptions::default()
        })
        .start()
        .await
        .unwrap()
}

/// Kueue's manager, started as the cluster's admin and ready.
async fn start_kueue(cluster: &TestCluster) -> Manager {
    let dir = kueue::build().unwrap_or_else(|e| panic!("{e}"));
    kueue::install_crds(cluster, &dir).await.unwrap();
    let token = cluster.token("admin").unwrap().to_string();
    let kubeconfig = cluster.write_kubeconfig("kueue", &token).unwrap();
    let log = cluster.dir().join("kueue.log");
    let mut manager = Manager::start(cluster, &dir, &kubeconfig, false, &log).unwrap();
    manager
        .wait_ready()
        .await
        .unwrap_or_else(|e| panic!("Kueue did not start: {e}"));
    manager
}

/// Waits until Kueue has admitted (unsuspended) the Job `name`.
async fn kueue_admits(jobs: &Api<Job>, name: &str) {
    support::wait_for(jobs, name, "Kueue's admission", |job| {
        job.spec.as_ref().and_then(|s| s.suspend) == Some(false)
    })
    .await;
}

#[tokio::test]
async fn shadow_mode_reports_where_arbiter_would_decide_otherwise_than_kueue() {
    init_tracing();
    let cluster = TestCluster::start()
        .await
        .unwrap_or_else(|e| panic!("the test cluster did not start: {e}"));
    let admin = cluster.admin_client().await.unwrap();
    // Arbiter's CRDs too: the shadow must write no arbiter.dev Workload
    // even where it could.
    let crds = arbiter_testcluster::crd_documents(
        &arbiter_testcluster::workspace_root().join("deploy/crds.yaml"),
    )
    .unwrap();
    cluster.install_crds(&crds).await.unwrap();
    for namespace in ["team-a", "arbiter-system"] {
        create_namespace(&admin, namespace).await;
    }
    let _kueue = start_kueue(&cluster).await;
    apply_yaml(&admin, KUEUE_SETUP).await;

    // Arbiter in shadow mode, as a user that may write anything.
    let client = operator_client(&cluster, &admin).await;
    let bundle_dir = tempfile::tempdir().unwrap();
    std::fs::write(bundle_dir.path().join("bundle.yaml"), BUNDLE).unwrap();
    let report_path = cluster.dir().join("shadow-report.json");
    let operator = start_shadow(client, bundle_dir.path(), Some(report_path.clone())).await;
    let port = operator.admin_address().unwrap().port();
    // And a second one bound only to the role docs/shadow-rbac.yaml
    // documents: it must see all it needs to reach the same conclusions.
    let reader = shadow_role_client(&cluster, &admin).await;
    let bound = start_shadow(reader, bundle_dir.path(), None).await;
    let bound_port = bound.admin_address().unwrap().port();

    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    let post = PostParams::default();
    for (name, label) in [
        ("plain", None),
        ("denied", Some("shadow.test/deny")),
        ("on-spot", Some("shadow.test/spot")),
    ] {
        let labels: Vec<(&str, &str)> = label.into_iter().map(|l| (l, "true")).collect();
        jobs.create(&post, &job(name, "lq", &labels)).await.unwrap();
    }
    for name in ["plain", "denied", "on-spot"] {
        kueue_admits(&jobs, name).await;
    }

    let report = wait_report(port, "agree / never / flavor", |r| {
        row(r, "plain").is_some_and(|w| w["outcome"] == "agree")
            && row(r, "denied").is_some_and(|w| w["differences"] == json!(["never"]))
            && row(r, "on-spot").is_some_and(|w| w["differences"] == json!(["flavor"]))
    })
    .await;
    wait_report(
        bound_port,
        "agree / never / flavor with the documented role",
        |r| {
            row(r, "plain").is_some_and(|w| w["outcome"] == "agree")
                && row(r, "denied").is_some_and(|w| w["differences"] == json!(["never"]))
                && row(r, "on-spot").is_some_and(|w| w["differences"] == json!(["flavor"]))
        },
    )
    .await;
    bound.stop().await.unwrap();
    let plain = row(&report, "plain").unwrap();
    assert_eq!(plain["kueue"]["flavors"], json!([{"cpu": "on-demand"}]));
    assert_eq!(plain["arbiter"]["flavors"], json!([{"cpu": "on-demand"}]));
    let denied = row(&report, "denied").unwrap();
    let refused = denied["arbiter"]["refused"].as_str().unwrap();
    assert!(refused.contains("deny-labelled"), "{refused}");
    assert!(denied["kueue"]["admittedAt"].is_i64(), "{denied}");
    let spot = row(&report, "on-spot").unwrap();
    assert_eq!(spot["arbiter"]["flavors"], json!([{"cpu": "spot"}]));
    assert_eq!(spot["kueue"]["flavors"], json!([{"cpu": "on-demand"}]));
    assert_eq!(report["current"]["outcomes"]["agree"], 1);
    assert_eq!(report["current"]["outcomes"]["differs"], 2);

    // The metrics say the same.
    let metrics = http_get(port, "/metrics").await;
    for series in [
        "arbiter_shadow_workloads{outcome=\"agree\"} 1",
        "arbiter_shadow_workloads{outcome=\"differs\"} 2",
        "arbiter_shadow_differences{kind=\"never\"} 1",
        "arbiter_shadow_differences{kind=\"flavor\"} 1",
        "arbiter_shadow_differences{kind=\"later\"} 0",
        "arbiter_shadow_differences_found_total{kind=\"flavor\"} 1",
    ] {
        assert!(metrics.contains(series), "no {series} in:\n{metrics}");
    }

    // A job that ran to its end under Kueue ends in the shadow too.
    let completed = completed_status();
    Api::<Job>::namespaced(admin.clone(), "team-a")
        .patch_status("plain", &PatchParams::default(), &Patch::Merge(&completed))
        .await
        .unwrap();
    wait_report(port, "plain's end", |r| {
        row(r, "plain").is_some_and(|w| w["endedAt"].is_i64() && w["outcome"] == "agree")
    })
    .await;

    preemption_is_compared(&jobs, port).await;

    // The report file says it too (rewritten while the report changes).
    let started = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(&report_path).unwrap_or_default();
        let file: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if row(&file, "on-spot").is_some_and(|w| w["differences"] == json!(["flavor"]))
            && row(&file, "denied").is_some_and(|w| w["differences"] == json!(["never"]))
            && row(&file, "plain").is_some_and(|w| w["endedAt"].is_i64())
        {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the report file {} does not say it: {text}",
            report_path.display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A job deleted leaves the list; its last outcome is settled.
    jobs.delete("denied", &Default::default()).await.unwrap();
    wait_report(port, "denied's deletion settled", |r| {
        row(r, "denied").is_none()
            && r["settled"]["differences"]["never"] == 1
            && r["settled"]["outcomes"]["differs"] == 1
            && r["current"]["differences"]["never"] == 0
    })
    .await;

    operator.stop().await.unwrap();
    wrote_nothing(&admin, &jobs).await;
}

/// Kueue and Arbiter both preempt the lowest-priority job of a full
/// ClusterQueue for a high-priority one: the preemptor's victims, read on
/// Kueue's side from the victim's `Preempted` condition, are the same.
async fn preemption_is_compared(jobs: &Api<Job>, port: u16) {
    let post = PostParams::default();
    let class = |class: &'static str| [("kueue.x-k8s.io/priority-class", class)];
    jobs.create(&post, &job("victim", "lq-preempt", &class("lowest")))
        .await
        .unwrap();
    jobs.create(&post, &job("keeper", "lq-preempt", &class("low")))
        .await
        .unwrap();
    for name in ["victim", "keeper"] {
        kueue_admits(jobs, name).await;
    }
    jobs.create(&post, &job("urgent", "lq-preempt", &class("high")))
        .await
        .unwrap();
    kueue_admits(jobs, "urgent").await;
    let report = wait_report(port, "the preemption on both sides", |r| {
        row(r, "urgent").is_some_and(|w| {
            w["kueue"]["victims"] == json!(["team-a/victim"])
                && w["arbiter"]["victims"] == json!(["team-a/victim"])
                && w["outcome"] == "agree"
        })
    })
    .await;
    for name in ["victim", "keeper"] {
        let row = row(&report, name).unwrap();
        assert_eq!(row["outcome"], "agree", "{row}");
    }
}

/// Nothing of Arbiter's is in the cluster: no arbiter.dev Workload, no
/// Event it recorded, no annotation or finalizer of its on a Job or on
/// Kueue's queue objects (the operator proper would have written all of
/// them for these jobs).
async fn wrote_nothing(admin: &Client, jobs: &Api<Job>) {
    let gvk = |group: &str, version: &str, kind: &str| {
        kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(group, version, kind))
    };
    let all = ListParams::default();
    let workloads =
        Api::<DynamicObject>::all_with(admin.clone(), &gvk("arbiter.dev", "v1alpha1", "Workload"));
    let written = workloads.list(&all).await.unwrap();
    assert!(written.items.is_empty(), "{:?}", written.items);
    let events = Api::<k8s_openapi::api::events::v1::Event>::all(admin.clone());
    for event in events.list(&all).await.unwrap() {
        assert_ne!(
            event.reporting_controller.as_deref(),
            Some("arbiter"),
            "{event:?}"
        );
    }
    let mut objects: Vec<DynamicObject> = Vec::new();
    for kind in ["ClusterQueue", "ResourceFlavor", "LocalQueue"] {
        let api =
            Api::<DynamicObject>::all_with(admin.clone(), &gvk("kueue.x-k8s.io", "v1beta2", kind));
        objects.extend(api.list(&all).await.unwrap().items);
    }
    for job in jobs.list(&all).await.unwrap() {
        objects.push(serde_json::from_value(serde_json::to_value(job).unwrap()).unwrap());
    }
    for object in objects {
        let meta = &object.metadata;
        let arbiters = meta
            .annotations
            .iter()
            .flatten()
            .map(|(k, _)| k)
            .chain(meta.labels.iter().flatten().map(|(k, _)| k))
            .chain(meta.finalizers.iter().flatten())
            .filter(|k| k.starts_with("arbiter.dev/"))
            .count();
        assert_eq!(
            arbiters, 0,
            "{:?} carries Arbiter's marks: {meta:?}",
            meta.name
        );
        let conditions = object
            .data
            .pointer("/status/conditions")
            .cloned()
            .unwrap_or_default();
        assert!(
            !conditions.to_string().contains("arbiter"),
            "{:?}: {conditions}",
            meta.name
        );
    }
}

/// A Job status saying it ran and completed (nothing runs pods on the bare
/// API server: the test ends the job itself, as Kueue would see it end).
fn completed_status() -> Value {
    let stamp = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    json!({"status": {
        "startTime": stamp, "completionTime": stamp, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": stamp, "lastProbeTime": stamp},
            {"type": "Complete", "status": "True", "lastTransitionTime": stamp, "lastProbeTime": stamp}]}})
}
