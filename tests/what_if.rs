//! `arbiter simulate --from-cluster`, the what-if on the live cluster,
//! against a real one. On the full cluster (pods run by kwok) with the
//! operator running: a finished job gives its LocalQueue a runtime
//! history, three jobs run and four wait; the snapshot — the CLI binary
//! with a kubeconfig — replays it forward: the running ones stay admitted
//! from before time 0 on their flavors, the waiting ones are admitted in
//! queue order exactly when the runtimes (annotation, history, default)
//! free their quota, under the bundles in force (a platform ConfigMap and
//! a tenant's); and a candidate bundle denying one tenant moves exactly
//! the workloads it should, and no other. Under RBAC: the snapshot runs
//! with a token bound only to `deploy/what-if.yaml`'s ClusterRole, and a
//! role without Nodes fails naming the resource and the role to bind; a
//! cluster without Arbiter's CRDs, a cluster that cannot be reached and a
//! candidate bundle that does not load are each told as such.

#[path = "../crates/operator/tests/support/mod.rs"]
mod support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use arbiter_core::model::api::Workload;
use arbiter_testcluster::{crd_documents, workspace_root, NodeSpec, TestCluster};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::{json, Value};
use support::*;

const A100: &str = "NVIDIA-A100-SXM4-40GB";
const V100: &str = "Tesla-V100-SXM2-16GB";

/// Two ClusterQueues on two flavors, not in a cohort: `research` (8 A100
/// GPUs) fed by team-a's and team-b's LocalQueues, `batch` (8 V100 GPUs)
/// by team-a's.
const QUEUES: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: v100}
spec:
  nodeLabels: {nvidia.com/gpu.product: Tesla-V100-SXM2-16GB}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: research}
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
kind: ClusterQueue
metadata: {name: batch}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: v100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: research, namespace: team-a}
spec: {clusterQueue: research}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: research, namespace: team-b}
spec: {clusterQueue: research}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: batch, namespace: team-a}
spec: {clusterQueue: batch}
"#;

/// The candidate: team-b's jobs are no longer admitted.
const DENY_TEAM_B: &str = r#"apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {name: candidate, version: "2"}
spec:
  policies:
  - name: no-team-b
    hook: admission
    cel:
      expression: "workload.namespace != 'team-b'"
      messageExpression: "'team-b is paused'"
"#;

/// A held Job of one pod asking `gpus` GPUs in `namespace`'s LocalQueue
/// `queue`, running (on the full cluster) until told to end, with a
/// `sim.arbiter.dev/runtime` annotation if `runtime`.
fn job(namespace: &str, name: &str, queue: &str, gpus: u32, runtime: Option<&str>) -> Job {
    let mut job = job_in(namespace, queue, name, gpus);
    if let Some(r) = runtime {
        job.metadata.annotations =
            Some([("sim.arbiter.dev/runtime".to_string(), r.to_string())].into());
    }
    job
}

/// Waits until the Workload of job `name` in `namespace` has condition
/// `type_` = `status`; returns the Workload.
async fn wait_workload(
    client: &Client,
    namespace: &str,
    name: &str,
    type_: &str,
    status: &str,
) -> Workload {
    let api: Api<Workload> = Api::namespaced(client.clone(), namespace);
    let started = Instant::now();
    loop {
        let current = api.get_opt(&format!("job-{name}")).await.unwrap();
        if let Some(w) = current.as_ref().filter(|w| {
            w.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == type_ && c.status == status)
            })
        }) {
            return w.clone();
        }
        assert!(
            started.elapsed() < PATIENCE,
            "Workload {namespace}/job-{name}: {type_}={status} did not come; it is {current:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates the job and waits until the operator has admitted it, or
/// (`admitted` false) has seen it and left it waiting.
async fn submit(client: &Client, job: Job, admitted: bool) {
    let namespace = job.metadata.namespace.clone().unwrap();
    let name = job.metadata.name.clone().unwrap();
    Api::<Job>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &job)
        .await
        .unwrap();
    let status = if admitted { "True" } else { "False" };
    wait_workload(client, &namespace, &name, "QuotaReserved", status).await;
}

/// `arbiter simulate --from-cluster ARGS…`.
fn what_if(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(["simulate", "--from-cluster"])
        .args(args)
        .output()
        .expect("arbiter runs")
}

/// The JSON it printed, failing with what it said if it did not succeed.
fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "arbiter failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The report's workload named `name`.
fn workload<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no workload {name} in {report:#}"))
}

/// When the report's workload `name` was first admitted (seconds from the snapshot).
fn admitted_at(report: &Value, name: &str) -> f64 {
    workload(report, name)["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["event"] == "admitted")
        .and_then(|h| h["atSeconds"].as_f64())
        .unwrap_or_else(|| panic!("{name} was never admitted: {:#}", workload(report, name)))
}

fn flavor_of(report: &Value, name: &str) -> String {
    workload(report, name)["flavors"]["main"]["nvidia.com/gpu"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} has no GPU flavor: {:#}", workload(report, name)))
        .to_string()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.002
}

/// Milliseconds since the epoch of an RFC 3339 time.
fn epoch_millis(text: &str) -> i64 {
    text.parse::<k8s_openapi::jiff::Timestamp>()
        .unwrap()
        .as_millisecond()
}

#[tokio::test]
async fn the_live_cluster_replays_forward_and_a_candidate_moves_exactly_the_workloads_it_should() {
    let cluster = TestCluster::start_full()
        .await
        .unwrap_or_else(|e| panic!("the full test cluster did not start: {e}"));
    let admin = cluster.admin_client().await.unwrap();
    let crds = crd_documents(&workspace_root().join("deploy/crds.yaml")).unwrap();
    cluster.install_crds(&crds).await.unwrap();
    for ns in ["team-a", "team-b", PLATFORM_NAMESPACE] {
        create_namespace(&admin, ns).await;
    }
    apply_yaml(&admin, QUEUES).await;
    for (name, product) in [("a100-node", A100), ("v100-node", V100)] {
        cluster
            .add_node(&NodeSpec::gpu(name, 64, 8).label("nvidia.com/gpu.product", product))
            .await
            .unwrap();
    }
    // In force: a platform bundle (admits every job here) and team-a's own.
    put_bundle(
        &admin,
        PLATFORM_NAMESPACE,
        "platform",
        &[("bundle.yaml", &gpu_cap("platform", 1, 8))],
        &[],
    )
    .await;
    let tenant = tenant_bundle(
        "team-a-rules",
        "  - {name: any, hook: admission, cel: {expression: 'workload.gpus >= 0'}}\n",
    );
    put_bundle(&admin, "team-a", "rules", &[("bundle.yaml", &tenant)], &[]).await;
    let _operator = start_operator_with_bundles(admin.clone(), Vec::new(), None);

    // team-a's research queue learns how long its work runs: one job runs
    // a few seconds and succeeds.
    submit(&admin, job("team-a", "warm", "research", 8, None), true).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    finish(&Api::namespaced(admin.clone(), "team-a"), "warm").await;
    let warm = wait_workload(&admin, "team-a", "warm", "Finished", "True").await;

    // Running: 4 + 4 A100 GPUs (research is full) and 8 V100 GPUs.
    submit(
        &admin,
        job("team-a", "r1", "research", 4, Some("10m")),
        true,
    )
    .await;
    submit(
        &admin,
        job("team-b", "r2", "research", 4, Some("30m")),
        true,
    )
    .await;
    submit(&admin, job("team-a", "q1", "batch", 8, Some("15m")), true).await;
    // Waiting, in this order (a second apart: creation times are to the second).
    for (namespace, name, queue, gpus, runtime) in [
        ("team-b", "p1", "research", 4, None),
        ("team-a", "p2", "research", 4, None),
        ("team-a", "p3", "research", 4, Some("20m")),
        ("team-a", "q2", "batch", 8, Some("5m")),
    ] {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        submit(&admin, job(namespace, name, queue, gpus, runtime), false).await;
    }

    // The estimate team-a's history gives (one run): from the admission
    // its job records to its Workload's Finished time.
    let warm_job: Job = Api::namespaced(admin.clone(), "team-a")
        .get("warm")
        .await
        .unwrap();
    let record: Value = serde_json::from_str(
        &warm_job.metadata.annotations.as_ref().unwrap()["arbiter.dev/admission"],
    )
    .unwrap();
    let finished = warm
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Finished")
        .unwrap();
    let estimate = (finished.last_transition_time.0.as_millisecond()
        - record["admittedAt"].as_i64().unwrap())
    .max(0) as f64
        / 1000.0;

    let token = cluster.token("admin").unwrap().to_string();
    let kubeconfig = cluster.write_kubeconfig("what-if", &token).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();

    // The bundles in force alone: the schedule from now on.
    let report = json_of(&what_if(&[
        "--kubeconfig",
        kubeconfig,
        "--format",
        "json",
        "--reproducible",
    ]));
    let snapshot = &report["snapshot"];
    assert_eq!(
        (
            &snapshot["running"],
            &snapshot["pending"],
            &snapshot["finishedRuns"]
        ),
        (&json!(3), &json!(4), &json!(1)),
        "{snapshot:#}"
    );
    assert_eq!(
        snapshot["runtimes"],
        json!({"annotation": 5, "history": 1, "assumed": 1, "defaultSeconds": 3600.0})
    );
    assert!(epoch_millis(snapshot["takenAt"].as_str().unwrap()) > 0);
    let bundles: Vec<(String, Value)> = report["policies"]["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["name"].as_str().unwrap().to_string(), b["tenant"].clone()))
        .collect();
    assert_eq!(
        bundles,
        [
            ("platform".to_string(), Value::Null),
            ("team-a-rules".to_string(), json!("team-a"))
        ]
    );
    // The running ones were admitted before time 0, on their flavors, and
    // finish at their admission plus their annotated runtime.
    for (name, flavor, runtime) in [
        ("r1", "a100", 600.0),
        ("r2", "a100", 1800.0),
        ("q1", "v100", 900.0),
    ] {
        // Admitted seconds before the snapshot (four waiting jobs were
        // created 1.1 s apart after them): restored, not queued again.
        let at = admitted_at(&report, name);
        assert!(at < -1.0, "{name} admitted at {at}");
        let first = &workload(&report, name)["history"][0];
        assert!(
            first["reason"]
                .as_str()
                .unwrap()
                .ends_with("(admitted before the run began)"),
            "{first:#}"
        );
        assert_eq!(flavor_of(&report, name), flavor);
        let w = workload(&report, name);
        assert!(
            close(w["finishedSeconds"].as_f64().unwrap(), at + runtime),
            "{w:#}"
        );
    }
    // The waiting ones, in queue order as quota frees: p1 when r1 ends
    // (it then runs the default hour), p2 when r2 ends (its LocalQueue's
    // estimate), p3 when p2 ends; q2 when q1 ends.
    let r1_end = admitted_at(&report, "r1") + 600.0;
    let r2_end = admitted_at(&report, "r2") + 1800.0;
    let expected = [
        ("p1", r1_end, "a100", 3600.0),
        ("p2", r2_end, "a100", estimate),
        ("p3", r2_end + estimate, "a100", 1200.0),
        ("q2", admitted_at(&report, "q1") + 900.0, "v100", 300.0),
    ];
    for (name, at, flavor, runtime) in expected {
        let w = workload(&report, name);
        assert!(
            close(admitted_at(&report, name), at),
            "{name}: expected at {at}: {w:#}"
        );
        assert_eq!(flavor_of(&report, name), flavor);
        assert!(
            close(w["finishedSeconds"].as_f64().unwrap(), at + runtime),
            "{w:#}"
        );
        assert_eq!(w["state"], "finished");
    }
    assert_eq!(report["byClusterQueue"]["research"]["admitted"], 5);

    // The candidate: team-b paused. p1 is no longer admitted, p2 and p3
    // move up by the time between r1's and r2's ends; nothing else moves.
    let candidate = tempfile::tempdir().unwrap();
    std::fs::write(candidate.path().join("bundle.yaml"), DENY_TEAM_B).unwrap();
    let candidate_dir = candidate.path().to_str().unwrap();
    let what = json_of(&what_if(&[
        "--kubeconfig",
        kubeconfig,
        "--policies",
        candidate_dir,
        "--format",
        "json",
        "--reproducible",
    ]));
    let difference = &what["difference"];
    let moved: Vec<&str> = difference["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(moved, ["p1", "p2", "p3"], "{difference:#}");
    let change = |name: &str| {
        difference["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == name)
            .unwrap()
            .clone()
    };
    let p1 = change("p1");
    assert!(
        p1["changes"]
            .as_array()
            .unwrap()
            .contains(&json!("noLongerAdmitted")),
        "{p1:#}"
    );
    assert!(p1["candidate"]["admittedSeconds"].is_null(), "{p1:#}");
    assert!(
        p1["candidate"]["reason"]
            .as_str()
            .unwrap()
            .contains("team-b is paused"),
        "{p1:#}"
    );
    for name in ["p2", "p3"] {
        let w = change(name);
        assert_eq!(w["changes"], json!(["sooner"]), "{w:#}");
        assert!(
            close(w["admittedDeltaSeconds"].as_f64().unwrap(), r1_end - r2_end),
            "{w:#}"
        );
    }
    let research = &difference["byClusterQueue"]["research"];
    assert_eq!(research["admitted"], json!({"inForce": 5, "candidate": 4}));
    let batch = &difference["byClusterQueue"]["batch"];
    assert_eq!(batch["admitted"], json!({"inForce": 2, "candidate": 2}));
    assert_eq!(
        batch["meanWaitSeconds"]["inForce"],
        batch["meanWaitSeconds"]["candidate"]
    );
    let names = |report: &Value| -> Vec<String> {
        report["policies"]["bundles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&what["inForce"]), ["platform", "team-a-rules"]);
    assert_eq!(names(&what["candidate"]), ["candidate", "team-a-rules"]);

    // The same for people.
    let table = what_if(&["--kubeconfig", kubeconfig, "--policies", candidate_dir]);
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    let text = String::from_utf8(table.stdout).unwrap();
    for line in [
        "3 running, 4 pending; runtimes: 5 from sim.arbiter.dev/runtime, 1 estimated from 1 finished Workloads, 1 assumed 3600s",
        "3 workload(s) move: 2 sooner, 0 later, 1 no longer admitted",
        "Job team-b/p1",
        "Job team-a/p2",
        "sooner by",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    assert!(!text.contains("Job team-a/q2"), "{text}");
    println!("{text}");
}

/// A kubeconfig for a ServiceAccount bound (ClusterRoleBinding) to the
/// ClusterRole `role` only.
async fn bound_kubeconfig(
    cluster: &TestCluster,
    admin: &Client,
    account: &str,
    role: &str,
) -> String {
    let token = cluster
        .service_account_token(PLATFORM_NAMESPACE, account)
        .await
        .unwrap();
    apply_yaml(
        admin,
        &format!(
            r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {account}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}
subjects:
- {{kind: ServiceAccount, name: {account}, namespace: {PLATFORM_NAMESPACE}}}
"#
        ),
    )
    .await;
    // RBAC reads bindings from informer caches: wait until this one is seen.
    let review: SubjectAccessReview = serde_json::from_value(json!({"spec": {
        "user": format!("system:serviceaccount:{PLATFORM_NAMESPACE}:{account}"),
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "resourceAttributes": {"verb": "list", "group": "arbiter.dev", "resource": "workloads"}
    }}))
    .unwrap();
    let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
    let started = Instant::now();
    while !reviews
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .is_some_and(|s| s.allowed)
    {
        assert!(
            started.elapsed() < PATIENCE,
            "the binding of {role} to {account} never took effect"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let path = cluster.write_kubeconfig(account, &token).unwrap();
    path.to_str().unwrap().to_string()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn the_snapshot_runs_under_the_what_if_role_alone_and_says_what_is_missing_otherwise() {
    let cluster = TestCluster::start().await.unwrap();
    let admin = cluster.admin_client().await.unwrap();
    let token = cluster.token("admin").unwrap().to_string();
    let as_admin = cluster.write_kubeconfig("admin", &token).unwrap();

    // Before Arbiter is installed.
    let output = what_if(&["--kubeconfig", as_admin.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "the server does not know arbiter.dev/v1alpha1 ClusterQueue: is Arbiter installed?"
        ),
        "{}",
        stderr(&output)
    );

    let crds = crd_documents(&workspace_root().join("deploy/crds.yaml")).unwrap();
    cluster.install_crds(&crds).await.unwrap();
    for ns in ["team-a", PLATFORM_NAMESPACE] {
        create_namespace(&admin, ns).await;
    }
    apply_yaml(&admin, SETUP).await;
    add_node(&admin, "gpu-node-1", 8).await;
    // A waiting job and its Workload, as the operator makes them.
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    let created = jobs
        .create(
            &PostParams::default(),
            &job("team-a", "waiting", "research", 2, Some("1h")),
        )
        .await
        .unwrap();
    let object: Workload = serde_json::from_value(json!({
        "apiVersion": "arbiter.dev/v1alpha1", "kind": "Workload",
        "metadata": {"name": "job-waiting", "namespace": "team-a",
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "waiting",
                                          "uid": created.metadata.uid.clone().unwrap(), "controller": true}]},
        "spec": {"queueName": "research", "podSets": [{"name": "main", "count": 1,
                 "requests": {"cpu": "1", "nvidia.com/gpu": "2"}}]}
    }))
    .unwrap();
    Api::<Workload>::namespaced(admin.clone(), "team-a")
        .create(&PostParams::default(), &object)
        .await
        .unwrap();

    // deploy/what-if.yaml's role, alone: the snapshot reads all it needs.
    let role = std::fs::read_to_string(workspace_root().join("deploy/what-if.yaml")).unwrap();
    apply_yaml(&admin, &role).await;
    let reader = bound_kubeconfig(&cluster, &admin, "what-if", "arbiter-what-if").await;
    let output = what_if(&["--kubeconfig", &reader, "--format", "json"]);
    let report = json_of(&output);
    assert!(
        !stderr(&output).contains("forbidden"),
        "{}",
        stderr(&output)
    );
    let waiting = workload(&report, "waiting");
    assert_eq!(waiting["kind"], "Job");
    assert_eq!(admitted_at(&report, "waiting"), 0.0);
    assert_eq!(report["snapshot"]["runtimes"]["annotation"], 1);

    // The same role without Nodes: told which request and what to bind.
    let mut without: Value = serde_yaml_ng::from_str(&role).unwrap();
    without["metadata"]["name"] = json!("what-if-without-nodes");
    for rule in without["rules"].as_array_mut().unwrap() {
        if let Some(resources) = rule["resources"].as_array_mut() {
            resources.retain(|r| r != "nodes");
        }
    }
    apply_yaml(&admin, &serde_yaml_ng::to_string(&without).unwrap()).await;
    let partial = bound_kubeconfig(&cluster, &admin, "no-nodes", "what-if-without-nodes").await;
    let output = what_if(&["--kubeconfig", &partial]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(
        said.contains("forbidden: this user may not list nodes")
            && said.contains("bind the ClusterRole arbiter-what-if (deploy/what-if.yaml)"),
        "{said}"
    );
}

#[test]
fn an_unreachable_cluster_and_a_candidate_that_does_not_load_are_told_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Nothing listens there once the listener is dropped.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();
    let output = what_if(&["--kubeconfig", kubeconfig]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!(
            "cannot reach the API server at https://127.0.0.1:{port}/"
        )),
        "{}",
        stderr(&output)
    );

    // A broken candidate is told first, naming its file, before the cluster is tried.
    let bundle = dir.path().join("candidate");
    std::fs::create_dir(&bundle).unwrap();
    std::fs::write(bundle.join("bundle.yaml"), "apiVersion: [").unwrap();
    let output = what_if(&[
        "--kubeconfig",
        kubeconfig,
        "--policies",
        bundle.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(
        said.contains(&format!("loading the policy bundle {}", bundle.display()))
            && said.contains("bundle.yaml")
            && !said.contains("cannot reach"),
        "{said}"
    );

    // Usage: a second run has no one plot; --kubeconfig needs --from-cluster.
    let output = what_if(&[
        "--kubeconfig",
        kubeconfig,
        "--no-policies",
        "--plot",
        "x.svg",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("--plot describes one run"),
        "{}",
        stderr(&output)
    );
    let output = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(["simulate", "--kubeconfig", kubeconfig, "examples/seed"])
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output)
            .contains("--kubeconfig reads the live cluster: give it with --from-cluster"),
        "{}",
        stderr(&output)
    );
}
