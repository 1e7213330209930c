//! The operator on a cluster that runs pods (`TestCluster::start_full`:
//! kube-controller-manager, kube-scheduler, kwok Nodes and the Kubeflow
//! training-operator), with the article's flavors: A100 Nodes labelled and
//! tainted, a V100 Node beside them untainted. Nothing here plays a
//! controller: the Job controller and the training-operator make the pods,
//! kube-scheduler binds them (the injected node selector and toleration
//! doing the work: without them a pod would land on the V100 Node), kwok
//! runs them for the time each pod's `arbiter.test/run-for` says, and the
//! jobs finish as their controllers decide.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use arbiter_core::model::api::Workload;
use arbiter_testcluster::{
    NodeSpec, TestCluster, FAIL_LABEL, NEVER_READY_LABEL, RUN_FOR_ANNOTATION,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use support::*;

const A100: &str = "NVIDIA-A100-SXM4-40GB";
const V100: &str = "Tesla-V100-SXM2-16GB";

/// The article's flavors: A100 Nodes carry a taint that only admitted
/// work tolerates; V100 Nodes none.
const FULL_SETUP: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB}
  nodeTaints:
  - {key: nvidia.com/gpu, value: "true", effect: NoSchedule}
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
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
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 16}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: retrying}
spec:
  namespaceSelector: {}
  retryPolicy: {maxRetries: 1, backoffDuration: 4s}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: research, namespace: team-a}
spec: {clusterQueue: research}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: retrying, namespace: team-a}
spec: {clusterQueue: retrying}
"#;

/// A full cluster with Arbiter's CRDs, `team-a`, the setup above, two
/// 8-GPU A100 Nodes (tainted; as much as ClusterQueue `research`'s
/// quota) and one 8-GPU V100 Node, and the operator running in-process.
async fn full_cluster() -> (TestCluster, Client) {
    full_cluster_with(test_driver_options()).await
}

/// [`full_cluster`] with the operator started with `options`.
async fn full_cluster_with(options: arbiter_operator::DriverOptions) -> (TestCluster, Client) {
    full_cluster_setup(options, "").await
}

/// [`full_cluster_with`], `extra` (YAML) applied before the operator starts.
async fn full_cluster_setup(
    options: arbiter_operator::DriverOptions,
    extra: &str,
) -> (TestCluster, Client) {
    let (cluster, admin, _operator) = full_cluster_and_operator(options, extra).await;
    (cluster, admin)
}

/// [`full_cluster_setup`], with the operator's task (to stop it).
async fn full_cluster_and_operator(
    options: arbiter_operator::DriverOptions,
    extra: &str,
) -> (TestCluster, Client, tokio::task::JoinHandle<()>) {
    let (cluster, admin) = full_cluster_applying(FULL_SETUP).await;
    if !extra.is_empty() {
        apply_yaml(&admin, extra).await;
    }
    for name in ["a100-node-1", "a100-node-2"] {
        cluster
            .add_node(
                &NodeSpec::gpu(name, 64, 8)
                    .label("nvidia.com/gpu.product", A100)
                    .taint("nvidia.com/gpu", "true", "NoSchedule"),
            )
            .await
            .unwrap();
    }
    cluster
        .add_node(&NodeSpec::gpu("v100-node-1", 64, 8).label("nvidia.com/gpu.product", V100))
        .await
        .unwrap();
    let operator = start_operator_configured(
        admin.clone(),
        Box::new(arbiter_core::scheduler::hooks::DefaultHooks),
        options,
    );
    (cluster, admin, operator)
}

/// The driver options `arbiter run --config` makes of Kueue's
/// `Configuration` text `configuration`.
fn configured(configuration: &str) -> arbiter_operator::DriverOptions {
    let source = arbiter_core::model::load::Source {
        file: "kueue-config.yaml".into(),
        document: 1,
    };
    let read = arbiter_core::model::configuration::read(configuration, &source).unwrap();
    arbiter_operator::DriverOptions {
        pods_ready: read.pods_ready,
        preemption_strategies: read.preemption_strategies,
        ..test_driver_options()
    }
}

/// A pod template running `run_for` (a Go duration; `None`: until deleted)
/// asking `gpus`, failing at the end when `fail`.
fn template(gpus: u32, run_for: Option<&str>, fail: bool) -> Value {
    container_template("train", None, gpus, run_for, fail)
}

/// [`batch_job`] whose pods are bound but never start.
fn stuck_job(name: &str, pods: u32, gpus: u32) -> Job {
    let mut job = serde_json::to_value(batch_job(name, pods, gpus, None, false)).unwrap();
    job["spec"]["template"]["metadata"]["labels"] = json!({NEVER_READY_LABEL: "true"});
    serde_json::from_value(job).unwrap()
}

/// [`template`] with its container named `container` and, for the
/// training-operator (which runs here without its defaulting webhook),
/// the port it looks for.
fn container_template(
    container: &str,
    port: Option<&str>,
    gpus: u32,
    run_for: Option<&str>,
    fail: bool,
) -> Value {
    let mut metadata = json!({});
    if let Some(d) = run_for {
        metadata["annotations"] = json!({RUN_FOR_ANNOTATION: d});
    }
    if fail {
        metadata["labels"] = json!({FAIL_LABEL: "true"});
    }
    json!({
        "metadata": metadata,
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": container, "image": "pytorch",
                "ports": port.map(|p| vec![json!({"name": p, "containerPort": 23456})]).unwrap_or_default(),
                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()},
                              "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
        }
    })
}

/// A batch Job of `pods` pods (run in parallel) in LocalQueue `research`,
/// created held as the mutating webhook would leave it.
fn batch_job(name: &str, pods: u32, gpus: u32, run_for: Option<&str>, fail: bool) -> Job {
    queued_job("research", name, pods, gpus, run_for, fail)
}

fn queued_job(
    queue: &str,
    name: &str,
    pods: u32,
    gpus: u32,
    run_for: Option<&str>,
    fail: bool,
) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "team-a",
                     "labels": {"arbiter.dev/queue-name": queue}},
        "spec": {
            "suspend": true,
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": template(gpus, run_for, fail)
        }
    }))
    .unwrap()
}

/// Bound to one of the A100 Nodes (the setup's, or one the test's
/// autoscaler made for a ProvisioningRequest `arbiter-a100-…`).
fn on_a100(pod: &Pod) -> bool {
    node_of(pod).is_some_and(|n| n.starts_with("a100-node-") || n.starts_with("arbiter-a100-"))
}

fn phase_of(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

/// Waits until ClusterQueue `research`'s status shows `admitted` workloads using `gpus`.
async fn wait_usage(client: &Client, admitted: i64, gpus: &str) {
    wait_queue_usage(client, "research", admitted, gpus).await
}

/// Waits until the Kubeflow job `name` says `Succeeded=True`.
async fn wait_succeeded(api: &Api<DynamicObject>, name: &str, cluster: &TestCluster) {
    let started = std::time::Instant::now();
    loop {
        let now = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
        if condition_status(&now, "Succeeded").as_deref() == Some("True") {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{name} did not succeed: {now:#}\n{}",
            cluster.logs_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_batch_job_runs_on_its_flavor_and_frees_its_quota_when_it_completes() {
    let (cluster, client) = full_cluster().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    // Two jobs of 12 GPUs: the second waits for the first's quota; a pod
    // of 10 GPUs fits the quota (16) but no Node (8 each), and is told so.
    jobs.create(
        &PostParams::default(),
        &batch_job("first", 2, 6, Some("3s"), false),
    )
    .await
    .unwrap();
    jobs.create(
        &PostParams::default(),
        &batch_job("second", 2, 6, Some("1s"), false),
    )
    .await
    .unwrap();
    jobs.create(
        &PostParams::default(),
        &batch_job("huge", 1, 10, None, false),
    )
    .await
    .unwrap();

    // The Job controller makes the first job's pods once it is released;
    // kube-scheduler binds them onto the A100 Nodes (the V100 Node is
    // untainted and has room: only the injected selector keeps them off
    // it); kwok runs them.
    let running = wait_pods(
        &client,
        &cluster,
        "job-name=first",
        "2 running on A100 Nodes",
        |p| {
            p.len() == 2
                && p.iter()
                    .all(|p| on_a100(p) && phase_of(p) == Some("Running"))
        },
    )
    .await;
    assert_eq!(running.len(), 2);
    let second = jobs.get("second").await.unwrap();
    assert!(suspended(&second), "the second job must wait for quota");
    let (_, why) = wait_condition(&client, "job-huge", "QuotaReserved", "False").await;
    assert!(why.contains("could ever give"), "{why}");
    assert!(pods(&client, "job-name=second").await.is_empty());
    wait_usage(&client, 1, "12").await;

    // The pods succeed, the Job controller completes the job, the
    // operator frees its quota, and the second job runs.
    wait_for(&jobs, "first", "completion", |j| {
        j.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Complete" && c.status == "True")
            })
    })
    .await;
    let (reason, _) = wait_condition(&client, "job-first", "Finished", "True").await;
    assert_eq!(reason, "Succeeded");
    wait_pods(
        &client,
        &cluster,
        "job-name=second",
        "2 pods on A100 Nodes",
        |p| p.len() == 2 && p.iter().all(on_a100),
    )
    .await;
    wait_for(&jobs, "second", "completion", |j| {
        j.status
            .as_ref()
            .and_then(|s| s.succeeded)
            .is_some_and(|n| n == 2)
    })
    .await;
    wait_condition(&client, "job-second", "Finished", "True").await;
    wait_usage(&client, 0, "0").await;
    assert!(suspended(&jobs.get("huge").await.unwrap()));
}

#[tokio::test]
async fn a_pytorchjob_is_run_by_the_training_operator_on_its_flavor() {
    let (cluster, client) = full_cluster().await;
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("kubeflow.org", "v1", "PyTorchJob"),
        "pytorchjobs",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "team-a", &resource);
    let replica = |n: u32| {
        let template = container_template("pytorch", Some("pytorchjob-port"), 2, Some("3s"), false);
        json!({"replicas": n, "restartPolicy": "Never", "template": template})
    };
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "team-a",
                     "labels": {"arbiter.dev/queue-name": "research"}},
        "spec": {"runPolicy": {"suspend": true},
                 "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &job).await.unwrap();

    let running = wait_pods(
        &client,
        &cluster,
        "training.kubeflow.org/job-name=bert",
        "3 pods running on A100 Nodes",
        |p| {
            p.len() == 3
                && p.iter()
                    .all(|p| on_a100(p) && phase_of(p) == Some("Running"))
        },
    )
    .await;
    assert_eq!(running.len(), 3);
    wait_usage(&client, 1, "6").await;

    wait_succeeded(&api, "bert", &cluster).await;
    let (reason, _) = wait_condition(&client, "pytorchjob-bert", "Finished", "True").await;
    assert_eq!(reason, "Succeeded");
    wait_usage(&client, 0, "0").await;
}

#[tokio::test]
async fn a_failed_job_finishes_its_workload_as_failed_and_frees_its_quota() {
    let (cluster, client) = full_cluster().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    jobs.create(
        &PostParams::default(),
        &batch_job("broken", 1, 4, Some("1s"), true),
    )
    .await
    .unwrap();
    wait_pods(&client, &cluster, "job-name=broken", "a failed pod", |p| {
        p.iter().any(|p| phase_of(p) == Some("Failed"))
    })
    .await;
    wait_for(&jobs, "broken", "failure", |j| {
        j.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Failed" && c.status == "True"))
    })
    .await;
    let (reason, message) = wait_condition(&client, "job-broken", "Finished", "True").await;
    assert_eq!(reason, "Failed", "{message}");
    assert!(
        message.contains("BackoffLimitExceeded") || message.contains("backoff limit"),
        "{message}"
    );
    wait_usage(&client, 0, "0").await;
    let workload: Workload = Api::namespaced(client.clone(), "team-a")
        .get("job-broken")
        .await
        .unwrap();
    assert!(workload.status.is_some());
}

#[tokio::test]
async fn a_preempted_jobs_pods_go_and_come_back_when_it_is_admitted_again() {
    let (cluster, client) = full_cluster().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    jobs.create(&PostParams::default(), &batch_job("low", 2, 8, None, false))
        .await
        .unwrap();
    let first = wait_pods(&client, &cluster, "job-name=low", "2 running", |p| {
        p.len() == 2 && p.iter().all(|p| phase_of(p) == Some("Running"))
    })
    .await;
    let mut high = batch_job("high", 2, 8, Some("3s"), false);
    high.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("arbiter.dev/priority-class".into(), "high".into());
    jobs.create(&PostParams::default(), &high).await.unwrap();

    // The low job is held again: its pods go, the high one's run in their place.
    let (reason, _) = wait_condition(&client, "job-low", "Evicted", "True").await;
    assert_eq!(reason, "Preempted");
    wait_pods(
        &client,
        &cluster,
        "job-name=low",
        "the victim's pods gone",
        |p| p.is_empty(),
    )
    .await;
    wait_pods(
        &client,
        &cluster,
        "job-name=high",
        "2 running on A100 Nodes",
        |p| {
            p.len() == 2
                && p.iter()
                    .all(|p| on_a100(p) && phase_of(p) == Some("Running"))
        },
    )
    .await;
    let low = jobs.get("low").await.unwrap();
    assert!(suspended(&low));
    let template = serde_json::to_value(&low.spec.as_ref().unwrap().template).unwrap();
    assert!(
        template["spec"].get("nodeSelector").is_none()
            && template["spec"].get("tolerations").is_none(),
        "the victim's template must be restored: {template:#}"
    );

    // Once the high job completes, the low one is admitted again and its
    // pods come back (new pods, on the A100 Nodes).
    wait_condition(&client, "job-high", "Finished", "True").await;
    let before: Vec<_> = first.iter().map(|p| p.metadata.uid.clone()).collect();
    wait_pods(
        &client,
        &cluster,
        "job-name=low",
        "2 new pods running",
        |p| {
            p.len() == 2
                && p.iter().all(|p| {
                    phase_of(p) == Some("Running")
                        && on_a100(p)
                        && !before.contains(&p.metadata.uid)
                })
        },
    )
    .await;
    wait_usage(&client, 1, "16").await;
}

/// A ClusterQueue taking its GPUs back from any job admitted 4 s ago, and
/// allowing one retry 4 s after.
const RECLAIMING: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: reclaiming}
spec:
  namespaceSelector: {}
  resourceReclaim: {enabled: true, reclaimTimeout: 4s}
  retryPolicy: {maxRetries: 1, backoffDuration: 4s}
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
metadata: {name: reclaiming, namespace: team-a}
spec: {clusterQueue: reclaiming}
"#;

#[tokio::test]
async fn a_job_running_past_its_reclaim_timeout_is_evicted_run_again_and_deactivated() {
    let (cluster, client) = full_cluster_setup(test_driver_options(), RECLAIMING).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    // It would run until deleted.
    jobs.create(
        &PostParams::default(),
        &queued_job("reclaiming", "long", 2, 2, None, false),
    )
    .await
    .unwrap();
    let running = |p: &[Pod]| {
        p.len() == 2
            && p.iter()
                .all(|p| on_a100(p) && phase_of(p) == Some("Running"))
    };
    let first = wait_pods(&client, &cluster, "job-name=long", "2 running", running).await;

    // Reclaimed after 4 s: held again, its pods gone, its template restored.
    let (reason, message) = wait_condition(&client, "job-long", "Evicted", "True").await;
    assert_eq!(reason, "Reclaimed", "{message}");
    wait_pods(
        &client,
        &cluster,
        "job-name=long",
        "the reclaimed job's pods gone",
        |p| p.is_empty(),
    )
    .await;
    // Its template is restored once Kubernetes lets it change (its pods gone).
    let held = wait_for(&jobs, "long", "held with its template restored", |j| {
        let template = serde_json::to_value(&j.spec.as_ref().unwrap().template).unwrap();
        suspended(j) && template["spec"].get("nodeSelector").is_none()
    })
    .await;
    assert!(suspended(&held), "{:?}", held.spec);

    // After its 4 s backoff it runs again (new pods) ...
    let before: Vec<_> = first.iter().map(|p| p.metadata.uid.clone()).collect();
    wait_pods(
        &client,
        &cluster,
        "job-name=long",
        "2 new pods running",
        |p| running(p) && p.iter().all(|p| !before.contains(&p.metadata.uid)),
    )
    .await;
    // ... and reclaimed once more is past maxRetries 1: deactivated, held,
    // its pods gone and its quota free.
    let note = wait_event(&client, "long", "Deactivated").await;
    assert!(note.contains("maxRetries 1"), "{note}");
    let (reason, _) = wait_condition(&client, "job-long", "Finished", "True").await;
    assert_eq!(reason, "Deactivated");
    wait_pods(
        &client,
        &cluster,
        "job-name=long",
        "the deactivated job's pods gone",
        |p| p.is_empty(),
    )
    .await;
    assert!(suspended(&jobs.get("long").await.unwrap()));
    wait_queue_usage(&client, "reclaiming", 0, "0").await;
}

#[tokio::test]
async fn a_failed_job_is_run_again_after_its_backoff_and_deactivated_past_max_retries() {
    let (cluster, client) = full_cluster().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    // `flaky` fails once: the test takes the failing label off the job
    // created anew while it waits out its backoff. `doomed` always fails.
    jobs.create(
        &PostParams::default(),
        &queued_job("retrying", "flaky", 1, 2, Some("1s"), true),
    )
    .await
    .unwrap();
    jobs.create(
        &PostParams::default(),
        &queued_job("retrying", "doomed", 1, 2, Some("1s"), true),
    )
    .await
    .unwrap();
    let flaky_uid = jobs.get("flaky").await.unwrap().metadata.uid.unwrap();
    let doomed_uid = jobs.get("doomed").await.unwrap().metadata.uid.unwrap();

    // Failed: evicted for it, and created anew, held, naming the job it replaces.
    let again = wait_for(&jobs, "flaky", "being created anew", |j| {
        j.metadata.uid.as_ref() != Some(&flaky_uid)
    })
    .await;
    let annotations = again.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get("arbiter.dev/retry-of"), Some(&flaky_uid));
    assert_eq!(
        annotations.get("arbiter.dev/retries").map(String::as_str),
        Some("1")
    );
    assert!(
        suspended(&again) && again.status.as_ref().and_then(|s| s.failed).is_none(),
        "created anew: held, no failure of its own: {:?}",
        again.status
    );
    let patch = json!({"spec": {"template": {"metadata": {"labels": {FAIL_LABEL: null}}}}});
    jobs.patch(
        "flaky",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
    let note = wait_event(&client, "flaky", "Failed").await;
    assert!(note.contains("BackoffLimitExceeded"), "{note}");

    // Run again after the backoff; this time it succeeds.
    wait_pods(
        &client,
        &cluster,
        "job-name=flaky",
        "a pod that succeeded",
        |p| p.iter().any(|p| phase_of(p) == Some("Succeeded")),
    )
    .await;
    let (reason, _) = wait_condition(&client, "job-flaky", "Finished", "True").await;
    assert_eq!(reason, "Succeeded");

    // `doomed` fails twice: more than maxRetries 1 allows. It is
    // deactivated and its second failed job left as it is.
    let note = wait_event(&client, "doomed", "Deactivated").await;
    assert!(note.contains("maxRetries 1"), "{note}");
    let (reason, _) = wait_condition(&client, "job-doomed", "Finished", "True").await;
    assert_eq!(reason, "Deactivated");
    let last = jobs.get("doomed").await.unwrap();
    assert_ne!(last.metadata.uid.as_ref(), Some(&doomed_uid));
    assert!(last
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Failed" && c.status == "True")));
    // Nothing of either is left admitted (the queue's status follows
    // within a second or two).
    wait_queue_usage(&client, "retrying", 0, "0").await;
}

#[tokio::test]
async fn a_gang_whose_pods_do_not_all_start_is_evicted_and_blocks_admission_meanwhile() {
    // Kueue's waitForPodsReady: 10 s to get every pod ready (long enough
    // to see, through the Workloads' status written 2 s late), nothing else
    // admitted meanwhile, requeued after 2 s, deactivated on its second
    // timeout.
    let configuration = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n\
        waitForPodsReady:\n  timeout: 10s\n  blockAdmission: true\n  \
        requeuingStrategy: {backoffLimitCount: 1, backoffBaseSeconds: 2}\n";
    let options = configured(configuration);
    let (cluster, client) = full_cluster_with(options).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    jobs.create(&PostParams::default(), &stuck_job("stuck", 2, 4))
        .await
        .unwrap();
    wait_pods(
        &client,
        &cluster,
        "job-name=stuck",
        "2 pods bound, not started",
        |p| {
            p.len() == 2
                && p.iter()
                    .all(|p| on_a100(p) && phase_of(p) == Some("Pending"))
        },
    )
    .await;
    let (reason, _) = wait_condition(&client, "job-stuck", "PodsReady", "False").await;
    assert_eq!(reason, "WaitForStart");

    // The quota has room for `next`, but nothing is admitted while the
    // admitted gang's pods are not all ready.
    jobs.create(
        &PostParams::default(),
        &batch_job("next", 1, 2, Some("3s"), false),
    )
    .await
    .unwrap();
    let (reason, message) = wait_condition(&client, "job-next", "QuotaReserved", "False").await;
    assert_eq!(reason, "WaitingForPodsReady", "{message}");
    assert!(message.contains("team-a/stuck"), "{message}");

    // On the timeout the gang is evicted (its pods go), and `next` runs.
    let (reason, message) = wait_condition(&client, "job-stuck", "Evicted", "True").await;
    assert_eq!(reason, "PodsReadyTimeout", "{message}");
    wait_pods(&client, &cluster, "job-name=next", "a pod running", |p| {
        p.len() == 1 && phase_of(&p[0]) == Some("Running")
    })
    .await;
    let (reason, _) = wait_condition(&client, "job-next", "PodsReady", "True").await;
    assert_eq!(reason, "PodsReady");
    wait_condition(&client, "job-next", "Finished", "True").await;

    // Requeued after its backoff, it times out again: past
    // backoffLimitCount 1, deactivated, held, and its quota free.
    let note = wait_event(&client, "stuck", "Deactivated").await;
    assert!(note.contains("backoffLimitCount 1"), "{note}");
    let (reason, _) = wait_condition(&client, "job-stuck", "Finished", "True").await;
    assert_eq!(reason, "RequeuingLimitExceeded");
    assert!(suspended(&jobs.get("stuck").await.unwrap()));
    wait_usage(&client, 0, "0").await;
}

/// A ClusterQueue that autoscales the A100 flavor between 2 and 4 Nodes.
const ELASTIC: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: elastic}
spec:
  namespaceSelector: {}
  autoscaling: {enabled: true, minReplicas: 2, maxReplicas: 4}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 32}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: elastic, namespace: team-a}
spec: {clusterQueue: elastic}
"#;

/// Plays cluster-autoscaler for the operator's ProvisioningRequests: a new
/// request gets as many tainted A100 Nodes as it asks pods (named after
/// it), then `Provisioned=True`; the Nodes of a request deleted go once
/// they run no pod (cluster-autoscaler takes only idle Nodes away).
fn fake_autoscaler(client: Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let resource = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("autoscaling.x-k8s.io", "v1", "ProvisioningRequest"),
            "provisioningrequests",
        );
        let requests: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), "arbiter-system", &resource);
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        let mut made: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        loop {
            let Ok(list) = requests.list(&ListParams::default()).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let mut present = std::collections::BTreeSet::new();
            for request in list.items {
                let name = request.metadata.name.clone().unwrap_or_default();
                present.insert(name.clone());
                if made.contains_key(&name) {
                    continue;
                }
                let value = serde_json::to_value(&request).unwrap();
                let count = value["spec"]["podSets"][0]["count"].as_u64().unwrap_or(0);
                let mut names = Vec::new();
                for i in 0..count {
                    let node = format!("{name}-{i}");
                    arbiter_testcluster::add_node(
                        &client,
                        &NodeSpec::gpu(&node, 64, 8)
                            .label("nvidia.com/gpu.product", A100)
                            .taint("nvidia.com/gpu", "true", "NoSchedule"),
                    )
                    .await
                    .unwrap();
                    names.push(node);
                }
                let status = json!({"status": {"conditions": [{
                    "type": "Provisioned", "status": "True", "reason": "Provisioned",
                    "message": "the test's autoscaler made the Nodes",
                    "lastTransitionTime": "2026-12-04T00:00:00Z"}]}});
                requests
                    .patch_status(
                        &name,
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(&status),
                    )
                    .await
                    .unwrap();
                made.insert(name, names);
            }
            let gone: Vec<String> = made
                .keys()
                .filter(|k| !present.contains(*k))
                .cloned()
                .collect();
            let pods: Api<Pod> = Api::all(client.clone());
            for name in gone {
                let mut busy = Vec::new();
                for node in made.remove(&name).unwrap_or_default() {
                    let on_it = pods
                        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
                        .await
                        .map(|l| {
                            l.items
                                .iter()
                                .any(|p| !matches!(phase_of(p), Some("Succeeded" | "Failed")))
                        })
                        .unwrap_or(true);
                    if on_it {
                        busy.push(node);
                    } else {
                        let _ = nodes.delete(&node, &Default::default()).await;
                    }
                }
                if !busy.is_empty() {
                    // Looked at again next round.
                    made.insert(name, busy);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// Waits until there are `count` A100 Nodes.
async fn wait_a100_nodes(client: &Client, cluster: &TestCluster, count: usize) {
    let started = std::time::Instant::now();
    loop {
        let names = a100_nodes(client).await;
        if names.len() == count {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the pool did not come to {count} A100 Nodes: {names:?}\n{}",
            cluster.logs_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn a100_nodes(client: &Client) -> Vec<String> {
    Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .list(&ListParams::default().labels(&format!("nvidia.com/gpu.product={A100}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect()
}

#[tokio::test]
async fn a_backlog_grows_the_pool_through_provisioning_requests_and_it_shrinks_after() {
    let (cluster, client) = full_cluster_setup(test_driver_options(), ELASTIC).await;
    let _autoscaler = fake_autoscaler(client.clone());
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    // Four 8-GPU jobs on two 8-GPU Nodes: two wait for Nodes.
    for i in 0..4 {
        jobs.create(
            &PostParams::default(),
            &queued_job("elastic", &format!("big-{i}"), 1, 8, Some("4s"), false),
        )
        .await
        .unwrap();
    }
    // The operator asks for two more Nodes; the waiting work is admitted
    // onto them and runs there.
    wait_a100_nodes(&client, &cluster, 4).await;
    let running = wait_pods(&client, &cluster, "job-name", "4 pods on 4 Nodes", |p| {
        let on: std::collections::BTreeSet<_> = p.iter().filter_map(node_of).collect();
        p.len() == 4 && on.len() == 4 && p.iter().all(on_a100)
    })
    .await;
    assert!(running
        .iter()
        .filter_map(node_of)
        .any(|n| n.starts_with("arbiter-a100-")));
    // All done: the requests are withdrawn and the pool is back to two.
    for i in 0..4 {
        wait_condition(&client, &format!("job-big-{i}"), "Finished", "True").await;
    }
    wait_a100_nodes(&client, &cluster, 2).await;
}

#[tokio::test]
async fn an_mpijob_is_run_by_the_training_operator_until_its_launcher_succeeds() {
    let (cluster, client) = full_cluster().await;
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("kubeflow.org", "v1", "MPIJob"),
        "mpijobs",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "team-a", &resource);
    // The launcher runs 3 s and succeeds; the workers run until the
    // training-operator cleans them up.
    let launcher = container_template("mpi", None, 0, Some("3s"), false);
    let worker = container_template("mpi", None, 4, None, false);
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "MPIJob",
        "metadata": {"name": "allreduce", "namespace": "team-a",
                     "labels": {"arbiter.dev/queue-name": "research"}},
        "spec": {"runPolicy": {"suspend": true}, "slotsPerWorker": 1,
                 "mpiReplicaSpecs": {
                     "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": launcher},
                     "Worker": {"replicas": 2, "restartPolicy": "Never", "template": worker}}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &job).await.unwrap();
    wait_pods(
        &client,
        &cluster,
        "training.kubeflow.org/job-name=allreduce",
        "launcher and 2 workers on A100 Nodes",
        |p| p.len() == 3 && p.iter().all(on_a100),
    )
    .await;
    wait_usage(&client, 1, "8").await;
    wait_succeeded(&api, "allreduce", &cluster).await;
    let (reason, _) = wait_condition(&client, "mpijob-allreduce", "Finished", "True").await;
    assert_eq!(reason, "Succeeded");
    wait_usage(&client, 0, "0").await;
}

#[tokio::test]
async fn pods_placed_per_card_are_ungated_and_bound_by_kube_scheduler() {
    // Nodes with 4 shared cards (`example.com/gpu-milli`, 1000 a card).
    let (cluster, client) =
        full_cluster_setup(test_driver_options(), &shared_gpu_setup("shared")).await;
    let mut t4 = NodeSpec::gpu("t4-node-1", 32, 0)
        .label("gpu", "t4")
        .annotation("arbiter.dev/devices", "example.com/gpu-milli=4");
    t4.allocatable
        .insert("example.com/gpu-milli".into(), "4000".into());
    cluster.add_node(&t4).await.unwrap();
    // Three pods of half a card each: gated at admission, each given its
    // node and card by the operator, then bound by kube-scheduler.
    let mut job =
        serde_json::to_value(queued_job("shared", "halves", 3, 0, Some("3s"), false)).unwrap();
    let container = &mut job["spec"]["template"]["spec"]["containers"][0];
    container["resources"] = json!({"requests": {"cpu": "1", "example.com/gpu-milli": "500"},
                                    "limits": {"example.com/gpu-milli": "500"}});
    let job: Job = serde_json::from_value(job).unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let placed = wait_pods(
        &client,
        &cluster,
        "job-name=halves",
        "3 pods ungated and running on t4-node-1",
        |p| {
            p.len() == 3
                && p.iter().all(|p| {
                    node_of(p) == Some("t4-node-1")
                        && phase_of(p) == Some("Running")
                        && p.spec.as_ref().is_some_and(|s| {
                            s.scheduling_gates.as_ref().is_none_or(|g| g.is_empty())
                        })
                })
        },
    )
    .await;
    let mut cards: Vec<String> = placed
        .iter()
        .filter_map(|p| {
            p.metadata
                .annotations
                .as_ref()?
                .get("arbiter.dev/gpu-cards")
                .cloned()
        })
        .collect();
    cards.sort();
    // Best fit: two halves share card 0, the third takes card 1.
    assert_eq!(cards, ["0", "0", "1"]);
    wait_for(&jobs, "halves", "completion", |j| {
        j.status.as_ref().and_then(|s| s.succeeded) == Some(3)
    })
    .await;
    let (reason, _) = wait_condition(&client, "job-halves", "Finished", "True").await;
    assert_eq!(reason, "Succeeded");
}

/// A ClusterQueue over both flavors: A100 first (as much quota as its two
/// Nodes hold), then V100.
const SPILL: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: spill}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 16}
    - name: v100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: spill, namespace: team-a}
spec: {clusterQueue: spill}
"#;

#[tokio::test]
async fn a_node_deleted_under_a_running_job_sends_it_to_what_remains() {
    // Kueue's waitForPodsReady with recoveryTimeout: pods ready once must
    // be ready again within 5 s of one going, or the job is evicted and
    // queued again after 1 s.
    let configuration = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n\
        waitForPodsReady:\n  timeout: 30s\n  recoveryTimeout: 5s\n  \
        requeuingStrategy: {backoffBaseSeconds: 1}\n";
    let options = configured(configuration);
    let (cluster, client) = full_cluster_setup(options, SPILL).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    // A job that may run again after a pod fails, as most do.
    let mut moved = serde_json::to_value(queued_job("spill", "moved", 1, 8, None, false)).unwrap();
    moved["spec"]["backoffLimit"] = json!(6);
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(moved).unwrap(),
    )
    .await
    .unwrap();
    let running = wait_pods(
        &client,
        &cluster,
        "job-name=moved",
        "running on A100",
        |p| p.len() == 1 && on_a100(&p[0]) && phase_of(&p[0]) == Some("Running"),
    )
    .await;
    let (reason, _) = wait_condition(&client, "job-moved", "PodsReady", "True").await;
    assert_eq!(reason, "PodsReady");
    let record = jobs
        .get("moved")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default()
        .get("arbiter.dev/admission")
        .cloned();

    // Its Node goes, as when a cloud deletes an instance. Pod garbage
    // collection deletes the pod left on no Node (after its 40 s
    // quarantine); the Job controller makes another, which no Node can
    // hold. The job's pods are not all ready again within 5 s: evicted.
    let gone = node_of(&running[0]).unwrap().to_string();
    Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .delete(&gone, &Default::default())
        .await
        .unwrap();
    let (reason, _) = wait_condition_within(
        &client,
        "job-moved",
        "PodsReady",
        "False",
        Duration::from_secs(180),
    )
    .await;
    assert_eq!(reason, "WaitForRecovery");
    // Told on the job (the Workload's Evicted condition may go by unseen:
    // it is admitted again a second later).
    let note = wait_event(&client, "moved", "PodsReadyTimeout").await;
    assert!(note.contains("recoveryTimeout"), "{note}");
    // Queued again, it runs on the A100 Node that remains.
    wait_pods(
        &client,
        &cluster,
        "job-name=moved",
        "running on the other A100 Node",
        |p| {
            p.iter().any(|p| {
                on_a100(p) && node_of(p) != Some(gone.as_str()) && phase_of(p) == Some("Running")
            })
        },
    )
    .await;
    let again = jobs.get("moved").await.unwrap();
    assert!(released(&again));
    assert_ne!(
        again
            .metadata
            .annotations
            .unwrap_or_default()
            .get("arbiter.dev/admission"),
        record.as_ref(),
        "not admitted anew"
    );
    // The A100 pool is one Node now: the next 8-GPU job goes to V100,
    // though A100 quota is left.
    jobs.create(
        &PostParams::default(),
        &queued_job("spill", "next", 1, 8, None, false),
    )
    .await
    .unwrap();
    wait_pods(&client, &cluster, "job-name=next", "running on V100", |p| {
        p.len() == 1 && node_of(&p[0]) == Some("v100-node-1") && phase_of(&p[0]) == Some("Running")
    })
    .await;
    wait_queue_usage(&client, "spill", 2, "8").await;
}

/// A ClusterQueue that runs a failed job again after 20 s.
const PATIENT: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: patient}
spec:
  namespaceSelector: {}
  retryPolicy: {maxRetries: 3, backoffDuration: 20s}
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
metadata: {name: patient, namespace: team-a}
spec: {clusterQueue: patient}
"#;

/// The `lastTransitionTime` of each condition of `object`'s status.
fn condition_times(object: &Value) -> BTreeMap<String, String> {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let time = c["lastTransitionTime"].as_str().unwrap_or_default();
            (
                c["type"].as_str().unwrap_or_default().to_string(),
                time.to_string(),
            )
        })
        .collect()
}

async fn workload_status(client: &Client, name: &str) -> Value {
    let workload = Api::<Workload>::namespaced(client.clone(), "team-a")
        .get(name)
        .await
        .unwrap();
    serde_json::to_value(workload).unwrap()["status"].clone()
}

#[tokio::test]
async fn a_restart_keeps_condition_times_retry_counts_and_backoffs() {
    let (cluster, client, operator) =
        full_cluster_and_operator(test_driver_options(), PATIENT).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    jobs.create(
        &PostParams::default(),
        &queued_job("research", "steady", 1, 2, None, false),
    )
    .await
    .unwrap();
    jobs.create(
        &PostParams::default(),
        &queued_job("patient", "flaky", 1, 2, Some("1s"), true),
    )
    .await
    .unwrap();
    let flaky_uid = jobs.get("flaky").await.unwrap().metadata.uid.unwrap();
    wait_condition(&client, "job-steady", "Admitted", "True").await;
    let steady = json!({"status": workload_status(&client, "job-steady").await});
    let steady_times = condition_times(&steady);
    let queues: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "arbiter.dev",
            "v1alpha1",
            "ClusterQueue",
        )),
    );
    let queue_times =
        condition_times(&serde_json::to_value(queues.get("research").await.unwrap()).unwrap());
    assert!(queue_times.contains_key("Active"), "{queue_times:?}");

    // `flaky` fails: created anew, held, backing off 20 s; its Workload
    // says so. It will succeed when run again.
    let again = wait_for(&jobs, "flaky", "created anew", |j| {
        j.metadata.uid.as_ref() != Some(&flaky_uid)
    })
    .await;
    assert!(suspended(&again));
    let patch = json!({"spec": {"template": {"metadata": {"labels": {FAIL_LABEL: null}}}}});
    jobs.patch(
        "flaky",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let retry_at = loop {
        let status = workload_status(&client, "job-flaky").await;
        if let (Some(at), Some(1)) = (status["retryAt"].as_str(), status["retries"].as_u64()) {
            break at.parse::<k8s_openapi::jiff::Timestamp>().unwrap();
        }
        assert!(
            started.elapsed() < PATIENCE,
            "no retry recorded: {status:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    // The operator stops (as a crash would) and starts again.
    operator.abort();
    let _ = operator.await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _operator = start_operator_configured(
        client.clone(),
        Box::new(arbiter_core::scheduler::hooks::DefaultHooks),
        test_driver_options(),
    );
    jobs.create(
        &PostParams::default(),
        &queued_job("research", "after", 1, 2, None, false),
    )
    .await
    .unwrap();
    wait_for(&jobs, "after", "admitted after the restart", released).await;

    // `flaky` waits out the rest of its backoff (the recorded time has
    // seconds), then runs; its Workload still counts the retry.
    let started = std::time::Instant::now();
    loop {
        if released(&jobs.get("flaky").await.unwrap()) {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "flaky never ran again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        k8s_openapi::jiff::Timestamp::now() >= retry_at,
        "released before its backoff ended at {retry_at}"
    );
    wait_pods(
        &client,
        &cluster,
        "job-name=flaky",
        "a pod that succeeded",
        |p| p.iter().any(|p| phase_of(p) == Some("Succeeded")),
    )
    .await;
    let (reason, _) = wait_condition(&client, "job-flaky", "Finished", "True").await;
    assert_eq!(reason, "Succeeded");
    assert_eq!(workload_status(&client, "job-flaky").await["retries"], 1);

    // What did not change kept its time: the running job's conditions and
    // the ClusterQueue's `Active`.
    let steady = json!({"status": workload_status(&client, "job-steady").await});
    assert_eq!(condition_times(&steady), steady_times);
    let now =
        condition_times(&serde_json::to_value(queues.get("research").await.unwrap()).unwrap());
    assert_eq!(now["Active"], queue_times["Active"]);
}

/// Kueue's "workload of size 5 preempts using LessThanInitialShare" on
/// GPUs (`tests/scenarios/fair-strategies-second-pass` in the simulator):
/// two fair-sharing ClusterQueues borrowing everything from `cohort-a`'s
/// 9 A100 GPUs.
const FAIR_STRATEGIES: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: cohort-a}
spec:
  fairSharing: {weight: 1}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 9}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq-p1}
spec:
  namespaceSelector: {}
  cohort: cohort-a
  fairSharing: {weight: 1}
  scheduling: {algorithm: fair-sharing}
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 0}
      - {name: nvidia.com/gpu, nominalQuota: 0}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq-p2}
spec:
  namespaceSelector: {}
  cohort: cohort-a
  fairSharing: {weight: 1}
  scheduling: {algorithm: fair-sharing}
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 0}
      - {name: nvidia.com/gpu, nominalQuota: 0}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: cq-p1, namespace: team-a}
spec: {clusterQueue: cq-p1}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: cq-p2, namespace: team-a}
spec: {clusterQueue: cq-p2}
"#;

/// The Workloads of jobs `p1-1` … `p1-4` that are evicted now.
async fn evicted_p1(client: &Client) -> Vec<String> {
    let mut evicted = Vec::new();
    for i in 1..=4 {
        let name = format!("job-p1-{i}");
        let status = workload_status(client, &name).await;
        let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c["type"] == "Evicted" && c["status"] == "True")
        {
            evicted.push(name);
        }
    }
    evicted
}

#[tokio::test]
async fn fair_sharing_preemption_strategies_from_kueues_configuration_decide_in_the_cluster() {
    // First `--config` with LessThanOrEqualToFinalShare alone: taking one
    // p1 job is not enough for p2-big and a second would leave cq-p1 below
    // cq-p2, so nobody is preempted and p2-big waits.
    let final_share_only = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n\
         fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare]\n";
    let (cluster, client, operator) =
        full_cluster_and_operator(configured(final_share_only), FAIR_STRATEGIES).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    for i in 1..=4 {
        let job = queued_job("cq-p1", &format!("p1-{i}"), 1, 2, None, false);
        jobs.create(&PostParams::default(), &job).await.unwrap();
    }
    wait_pods(
        &client,
        &cluster,
        "job-name in (p1-1,p1-2,p1-3,p1-4)",
        "4 running",
        |p| {
            p.len() == 4
                && p.iter()
                    .all(|p| on_a100(p) && phase_of(p) == Some("Running"))
        },
    )
    .await;
    jobs.create(
        &PostParams::default(),
        &queued_job("cq-p2", "p2-big", 1, 5, None, false),
    )
    .await
    .unwrap();
    let (reason, message) = wait_condition(&client, "job-p2-big", "QuotaReserved", "False").await;
    assert_eq!(
        evicted_p1(&client).await,
        Vec::<String>::new(),
        "nobody may be preempted under LessThanOrEqualToFinalShare alone; p2-big waits ({reason}: {message})"
    );
    assert!(suspended(&jobs.get("p2-big").await.unwrap()));

    // The operator restarts with Kueue's default pair: the second pass
    // (LessThanInitialShare) takes a second p1 job, and p2-big runs.
    operator.abort();
    let _ = operator.await;
    let _operator = start_operator_configured(
        client.clone(),
        Box::new(arbiter_core::scheduler::hooks::DefaultHooks),
        test_driver_options(),
    );
    wait_condition(&client, "job-p2-big", "Admitted", "True").await;
    // The victims' Workloads are written off the decision path: wait for
    // them to say so, then check no third one goes.
    let started = std::time::Instant::now();
    while evicted_p1(&client).await.len() < 2 {
        assert!(
            started.elapsed() < PATIENCE,
            "two p1 jobs must be preempted: {:?}",
            evicted_p1(&client).await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_pods(
        &client,
        &cluster,
        "job-name=p2-big",
        "p2-big running",
        |p| p.len() == 1 && on_a100(&p[0]) && phase_of(&p[0]) == Some("Running"),
    )
    .await;
    wait_pods(
        &client,
        &cluster,
        "job-name in (p1-1,p1-2,p1-3,p1-4)",
        "2 p1 pods left running",
        |p| p.len() == 2 && p.iter().all(|p| phase_of(p) == Some("Running")),
    )
    .await;
    let evicted = evicted_p1(&client).await;
    assert_eq!(
        evicted.len(),
        2,
        "exactly two p1 jobs are preempted: {evicted:?}"
    );
}
