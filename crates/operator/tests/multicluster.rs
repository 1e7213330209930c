//! Multi-cluster dispatch end to end, MultiKueue's model: a manager (a
//! bare API server: its Jobs are `managedBy` MultiKueue, so nothing runs
//! them there) and two worker clusters that run pods (kube-scheduler,
//! kube-controller-manager, kwok). The manager's operator admits by its
//! quota; an admitted Job runs on the worker the placement policy prefers
//! (worker 2), its status comes back to the manager's Job; when worker 2's
//! API server is killed, its job moves to worker 1 once the lost-worker
//! timeout passes, and when worker 2 returns its stale copy is deleted; a
//! restarted manager finds its copies and makes none twice; a job the
//! manager preempts loses its copy before the preemptor runs. A Kubeflow
//! PyTorchJob (`spec.runPolicy.managedBy`) is dispatched the same way: the
//! worker's training-operator runs its copy to `Succeeded`, which comes
//! back to the manager's PyTorchJob.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use arbiter_core::model::api::MultiKueueCluster;
use arbiter_operator::multicluster::{
    MultiClusterOptions, CLUSTER_ANNOTATION, ORIGIN_UID_ANNOTATION,
};
use arbiter_operator::policy_sources::{BundleOptions, Bundles};
use arbiter_operator::Operator;
use arbiter_testcluster::{crd_documents, workspace_root, TestCluster, RUN_FOR_ANNOTATION};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::ByteString;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::json;
use support::*;

const ORIGIN: &str = "manager-1";

const MULTIKUEUE: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: AdmissionCheck
metadata: {name: multikueue}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: workers}
---
apiVersion: arbiter.dev/v1alpha1
kind: MultiKueueConfig
metadata: {name: workers}
spec:
  clusters: [worker-1, worker-2]
---
apiVersion: arbiter.dev/v1alpha1
kind: MultiKueueCluster
metadata: {name: worker-1}
spec:
  kubeConfig: {location: worker-1-kubeconfig, locationType: Secret}
---
apiVersion: arbiter.dev/v1alpha1
kind: MultiKueueCluster
metadata: {name: worker-2}
spec:
  clusterSource:
    kubeConfig: {location: worker-2-kubeconfig}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  admissionChecks: [multikueue]
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8}
"#;

/// The placement policy: worker 2 first.
const PREFER_WORKER_2: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {name: prefer-worker-2, version: "1"}
spec:
  policies:
  - name: worker-2-first
    hook: placement
    cel:
      expression: "node.name == 'worker-2' ? 10.0 : 1.0"
"#;

/// A worker: a full cluster with team-a's namespace and one 8-GPU A100
/// Node, and the manager's Secret holding its kubeconfig.
async fn worker(manager: &Client, name: &str) -> (TestCluster, Client) {
    let cluster = TestCluster::start_full()
        .await
        .unwrap_or_else(|e| panic!("worker {name} did not start: {e}"));
    let admin = cluster.admin_client().await.unwrap();
    create_namespace(&admin, "team-a").await;
    add_node(&admin, &format!("{name}-gpu"), 8).await;
    let token = cluster.token("admin").unwrap().to_string();
    let kubeconfig = serde_yaml_ng::to_string(&cluster.kubeconfig(&token, None)).unwrap();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-kubeconfig"), "namespace": "arbiter-system"},
    }))
    .unwrap();
    let secret = Secret {
        data: Some(BTreeMap::from([(
            "kubeconfig".to_string(),
            ByteString(kubeconfig.into_bytes()),
        )])),
        ..secret
    };
    Api::<Secret>::namespaced(manager.clone(), "arbiter-system")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    (cluster, admin)
}

/// A held Job of one 1-GPU pod in team-a's queue, managed by MultiKueue,
/// whose pod runs for `run_for`.
fn dispatched_job(name: &str, run_for: &str) -> Job {
    let mut job = job(name, 1);
    let spec = job.spec.as_mut().unwrap();
    spec.managed_by = Some("kueue.x-k8s.io/multikueue".to_string());
    spec.template.metadata = Some(
        serde_json::from_value(json!({"annotations": {RUN_FOR_ANNOTATION: run_for}})).unwrap(),
    );
    job
}

fn operator(manager: Client, policies: &std::path::Path) -> tokio::task::JoinHandle<()> {
    init_tracing();
    let bundles = Bundles::load(
        BundleOptions {
            platform_namespace: PLATFORM_NAMESPACE.to_string(),
            dirs: vec![policies.to_path_buf()],
        },
        None,
    )
    .unwrap();
    run_operator(
        Operator::builder(manager)
            .bundles(bundles)
            .driver_options(test_driver_options())
            .multicluster(MultiClusterOptions {
                origin: ORIGIN.to_string(),
                worker_lost_timeout: Duration::from_secs(3),
                interval: Duration::from_millis(300),
                ..MultiClusterOptions::default()
            }),
    )
}

/// The copies of `name` on a worker.
async fn copies(worker: &Client, name: &str) -> Vec<Job> {
    Api::<Job>::namespaced(worker.clone(), "team-a")
        .list(&ListParams::default().labels(&format!("kueue.x-k8s.io/multikueue-origin={ORIGIN}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|job| job.name_any() == name)
        .collect()
}

/// Waits until `name` has one copy on `on` and none on `off`, returning it.
/// Both workers are listed at each look: never a copy on both.
async fn only_copy(on: &Client, off: &Client, name: &str) -> Job {
    let started = std::time::Instant::now();
    loop {
        let (here, there) = (copies(on, name).await, copies(off, name).await);
        assert!(
            here.is_empty() || there.is_empty(),
            "{name} has copies on both workers at once"
        );
        if let Some(copy) = here.into_iter().next() {
            return copy;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{name} was not copied to its worker within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `check` holds (a bound on a hang, not a measurement).
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = std::time::Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < PATIENCE,
            "{what} did not happen within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The `Active` condition's status of a MultiKueueCluster.
async fn worker_active(manager: &Client, name: &str) -> String {
    let api: Api<MultiKueueCluster> = Api::all(manager.clone());
    let cluster = api.get(name).await.unwrap();
    cluster
        .status
        .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Active"))
        .map(|c| c.status)
        .unwrap_or_default()
}

/// The PyTorchJob API of `client` in team-a.
fn pytorchjobs(client: &Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeflow.org", "v1", "PyTorchJob"),
        "pytorchjobs",
    );
    Api::namespaced_with(client.clone(), "team-a", &resource)
}

/// A held PyTorchJob managed by MultiKueue in team-a's queue: a Master and
/// a Worker of one GPU each, their pods running for a few seconds (with
/// the port the training-operator looks for, as it runs here without its
/// defaulting webhook).
fn dispatched_pytorchjob(name: &str) -> DynamicObject {
    let replica = json!({
        "replicas": 1, "restartPolicy": "Never",
        "template": {
            "metadata": {"annotations": {RUN_FOR_ANNOTATION: "3s"}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "pytorch", "image": "pytorch",
                "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                              "limits": {"nvidia.com/gpu": "1"}}}]}
        }
    });
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "team-a",
                     "labels": {"kueue.x-k8s.io/queue-name": "research"}},
        "spec": {"runPolicy": {"suspend": true, "managedBy": "kueue.x-k8s.io/multikueue"},
                 "pytorchReplicaSpecs": {"Master": replica.clone(), "Worker": replica}}
    }))
    .unwrap()
}

/// The copies of the PyTorchJob `name` on a worker.
async fn pytorch_copies(worker: &Client, name: &str) -> Vec<DynamicObject> {
    pytorchjobs(worker)
        .list(&ListParams::default().labels(&format!("kueue.x-k8s.io/multikueue-origin={ORIGIN}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|job| job.name_any() == name)
        .collect()
}

/// Whether a Kubeflow job has the condition `type_` True.
fn kubeflow_condition(job: &DynamicObject, type_: &str) -> bool {
    job.data["status"]["conditions"]
        .as_array()
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == type_ && c["status"] == "True")
        })
}

fn active(job: &Job) -> i32 {
    job.status.as_ref().and_then(|s| s.active).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_run_on_the_worker_policy_picks_come_back_and_move_when_it_is_lost() {
    let (manager_cluster, manager) = cluster_with_setup().await;
    // The manager serves PyTorchJobs (no training-operator runs there).
    let pytorch_crd = workspace_root().join("tests/data/crds/kubeflow.org_pytorchjobs.yaml");
    manager_cluster
        .install_crds(&crd_documents(&pytorch_crd).unwrap())
        .await
        .unwrap();
    // A manager runs nothing: it has no GPU Node, its quota alone admits.
    Api::<Node>::all(manager.clone())
        .delete("gpu-node-1", &DeleteParams::default())
        .await
        .unwrap();
    apply_yaml(&manager, MULTIKUEUE).await;
    let (_w1_cluster, w1) = worker(&manager, "worker-1").await;
    let (mut w2_cluster, w2) = worker(&manager, "worker-2").await;
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("bundle.yaml"), PREFER_WORKER_2).unwrap();
    let running = operator(manager.clone(), policies.path());
    let jobs: Api<Job> = Api::namespaced(manager.clone(), "team-a");
    let (jobs, w1, w2) = (&jobs, &w1, &w2);

    // A short job: admitted on the manager, run on worker 2 (the policy's
    // choice), its completion copied back, then its copy deleted.
    jobs.create(&PostParams::default(), &dispatched_job("short", "2s"))
        .await
        .unwrap();
    let copy = only_copy(w2, w1, "short").await;
    assert_eq!(copy.spec.as_ref().unwrap().managed_by, None);
    assert_eq!(copy.spec.as_ref().unwrap().suspend, Some(false));
    let short = jobs.get("short").await.unwrap();
    assert_eq!(
        short
            .annotations()
            .get(CLUSTER_ANNOTATION)
            .map(String::as_str),
        Some("worker-2")
    );
    assert!(!suspended(&short), "admitted on the manager");
    assert_eq!(
        wait_event(&manager, "short", "Dispatched").await,
        "running on worker cluster worker-2"
    );
    until(
        "short's completion copied back to the manager",
        || async move { job_complete(&jobs.get("short").await.unwrap()) },
    )
    .await;
    let short = jobs.get("short").await.unwrap();
    assert_eq!(short.status.as_ref().and_then(|s| s.succeeded), Some(1));
    until("short's copy deleted once finished", || async move {
        copies(w2, "short").await.is_empty()
    })
    .await;
    assert!(
        copies(w1, "short").await.is_empty(),
        "short never ran on worker 1"
    );

    // A PyTorchJob is dispatched the same way: its copy on worker 2 has no
    // runPolicy.managedBy and is not suspended; worker 2's training-operator
    // runs it to Succeeded, which comes back; then its copy is deleted.
    let torch = pytorchjobs(&manager);
    torch
        .create(&PostParams::default(), &dispatched_pytorchjob("bert"))
        .await
        .unwrap();
    let torch = &torch;
    until("bert copied to worker 2", || async move {
        pytorch_copies(w2, "bert").await.len() == 1
    })
    .await;
    let copy = pytorch_copies(w2, "bert").await.remove(0);
    assert_eq!(
        copy.data["spec"]["runPolicy"].get("managedBy"),
        None,
        "{copy:?}"
    );
    assert_eq!(copy.data["spec"]["runPolicy"]["suspend"], false);
    assert!(pytorch_copies(w1, "bert").await.is_empty());
    assert_eq!(
        wait_event(&manager, "bert", "Dispatched").await,
        "running on worker cluster worker-2"
    );
    until("bert's success copied back to the manager", || async move {
        kubeflow_condition(&torch.get("bert").await.unwrap(), "Succeeded")
    })
    .await;
    let bert = torch.get("bert").await.unwrap();
    assert_eq!(
        bert.data["status"]["replicaStatuses"]["Master"]["succeeded"], 1,
        "{:?}",
        bert.data["status"]
    );
    assert_eq!(
        bert.data["spec"]["runPolicy"]["managedBy"],
        "kueue.x-k8s.io/multikueue"
    );
    until("bert's copy deleted once finished", || async move {
        pytorch_copies(w2, "bert").await.is_empty()
    })
    .await;
    let (reason, _) = wait_condition(&manager, "pytorchjob-bert", "Finished", "True").await;
    assert_eq!(reason, "Succeeded");

    // A long job runs on worker 2; its pod's activity shows on the manager.
    jobs.create(&PostParams::default(), &dispatched_job("long", "1h"))
        .await
        .unwrap();
    let first = only_copy(w2, w1, "long").await;
    until("long's running pod shown on the manager", || async move {
        active(&jobs.get("long").await.unwrap()) == 1
    })
    .await;

    // Worker 2 is lost: after the timeout the job moves to worker 1.
    w2_cluster.stop_apiserver().unwrap();
    until("long moved to worker 1", || async move {
        let long = jobs.get("long").await.unwrap();
        long.annotations()
            .get(CLUSTER_ANNOTATION)
            .map(String::as_str)
            == Some("worker-1")
            && copies(w1, "long").await.len() == 1
    })
    .await;
    let moved = copies(w1, "long").await.remove(0);
    wait_event_in(&manager, "team-a", "long", "Redispatched", |note| {
        note.contains("moved to worker cluster worker-1: worker cluster worker-2")
    })
    .await;
    until("long running on worker 1", || async move {
        copies(w1, "long")
            .await
            .first()
            .is_some_and(|j| active(j) == 1)
    })
    .await;

    assert_eq!(worker_active(&manager, "worker-2").await, "False");
    assert_eq!(worker_active(&manager, "worker-1").await, "True");

    // Worker 2 returns: its stale copy (the one made first, no other) is
    // deleted; the one on worker 1 stays. Until the dispatcher's first look
    // at the returned worker both are there, as in MultiKueue: a worker cut
    // off keeps running what it has.
    w2_cluster.start_apiserver().await.unwrap();
    let stale = copies(w2, "long").await;
    assert!(
        stale.iter().all(|j| j.metadata.uid == first.metadata.uid),
        "no new copy was made on the returned worker"
    );
    until("the stale copy on worker 2 deleted", || async move {
        copies(w2, "long").await.is_empty()
    })
    .await;
    let manager_ref = &manager;
    until("worker 2 active again", || async move {
        worker_active(manager_ref, "worker-2").await == "True"
    })
    .await;
    let kept = only_copy(w1, w2, "long").await;
    assert_eq!(
        kept.metadata.uid, moved.metadata.uid,
        "the copy on worker 1 is the one made"
    );

    // A restarted manager finds its copy and makes no other.
    running.abort();
    let _ = running.await;
    let running = operator(manager.clone(), policies.path());
    jobs.create(
        &PostParams::default(),
        &dispatched_job("after-restart", "1h"),
    )
    .await
    .unwrap();
    only_copy(w2, w1, "after-restart").await;
    let again = only_copy(w1, w2, "long").await;
    assert_eq!(
        again.metadata.uid, moved.metadata.uid,
        "no second copy after the restart"
    );

    // Deleting the manager's job deletes its copy (a batch/v1 Job is
    // deleted orphaning its dependents by default: it keeps a finalizer
    // until a garbage collector, which this manager does not run, takes it
    // off; being deleted is enough).
    jobs.delete("long", &DeleteParams::default()).await.unwrap();
    until(
        "long's copy deleted with the manager's job",
        || async move { copies(w1, "long").await.is_empty() },
    )
    .await;

    // Preemption on the manager: an urgent job asking the whole quota
    // evicts after-restart, whose copy is deleted before the urgent one
    // runs on worker 2 in its place.
    let mut urgent = dispatched_job("urgent", "1h");
    urgent
        .labels_mut()
        .insert("kueue.x-k8s.io/priority-class".into(), "high".into());
    let container = &mut urgent
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0];
    container.resources = serde_json::from_value(json!({
        "requests": {"cpu": "1", "nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &urgent).await.unwrap();
    until(
        "after-restart held again and its copy gone",
        || async move {
            let job = jobs.get("after-restart").await.unwrap();
            suspended(&job)
                && !job.annotations().contains_key(CLUSTER_ANNOTATION)
                && copies(w2, "after-restart").await.is_empty()
                && copies(w1, "after-restart").await.is_empty()
        },
    )
    .await;
    let copy = only_copy(w2, w1, "urgent").await;
    assert_eq!(
        copy.metadata
            .annotations
            .as_ref()
            .unwrap()
            .get(ORIGIN_UID_ANNOTATION),
        jobs.get("urgent").await.unwrap().metadata.uid.as_ref()
    );
    until("urgent running on worker 2", || async move {
        copies(w2, "urgent")
            .await
            .first()
            .is_some_and(|j| active(j) == 1)
    })
    .await;
    running.abort();
}
