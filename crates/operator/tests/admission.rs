//! The operator against a real kube-apiserver + etcd (`arbiter-testcluster`):
//! queued jobs are held until admitted, admission injects the flavor's node
//! labels and tolerations and releases the job, quota and Node capacity
//! bound what is admitted, a finished or deleted job frees its quota, and a
//! restarted operator reads admissions back instead of admitting twice.
//! The test plays the job controller (it marks jobs finished); nothing
//! runs pods.

use std::time::Duration;

use arbiter_core::jobs::Integrations;
use arbiter_core::scheduler::hooks::DefaultHooks;
use arbiter_operator::{Driver, DriverOptions};
use arbiter_testcluster::{crd_documents, workspace_root, TestCluster};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::Client;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

/// How long a test waits for the operator to act before failing. Bounds a
/// hang; the tests measure nothing.
const PATIENCE: Duration = Duration::from_secs(60);

const SETUP: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB}
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
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
kind: LocalQueue
metadata: {name: research, namespace: team-a}
spec: {clusterQueue: research}
"#;

async fn apply_yaml(client: &Client, yaml: &str) {
    for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
        let value: Value = serde::Deserialize::deserialize(doc).unwrap();
        let api_version = value["apiVersion"].as_str().unwrap();
        let kind = value["kind"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
        let name = value["metadata"]["name"].as_str().unwrap().to_string();
        let api: Api<DynamicObject> = match value["metadata"]["namespace"].as_str() {
            Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            &name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&value),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
    }
}

async fn cluster_with_setup() -> (TestCluster, Client) {
    let cluster = TestCluster::start()
        .await
        .unwrap_or_else(|e| panic!("the test cluster did not start: {e}"));
    let admin = cluster.admin_client().await.unwrap();
    let crds = crd_documents(&workspace_root().join("deploy/crds.yaml")).unwrap();
    cluster.install_crds(&crds).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    apply_yaml(&admin, SETUP).await;
    add_node(&admin, "gpu-node-1", 8).await;
    (cluster, admin)
}

async fn add_node(client: &Client, name: &str, gpus: u32) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = json!({"status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": gpus.to_string(), "pods": "110"},
                                   "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": gpus.to_string(), "pods": "110"}}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

fn job(name: &str, gpus: u32) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "team-a",
                     "labels": {"arbiter.dev/queue-name": "research"}},
        "spec": {
            "suspend": true,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "train", "image": "pytorch",
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()},
                                  "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
            }}
        }
    }))
    .unwrap()
}

fn start_operator(client: Client) -> JoinHandle<()> {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .try_init();
    tokio::spawn(async move {
        let driver = Driver::start(
            client,
            Integrations::builtin(),
            Box::new(DefaultHooks),
            DriverOptions::default(),
        )
        .await;
        driver.run(std::future::pending()).await;
    })
}

/// Waits until `check` holds for the Job, failing with its last state.
async fn wait_for(jobs: &Api<Job>, name: &str, what: &str, check: impl Fn(&Job) -> bool) -> Job {
    let started = std::time::Instant::now();
    loop {
        let job = jobs.get(name).await.unwrap();
        if check(&job) {
            return job;
        }
        if started.elapsed() > PATIENCE {
            panic!(
                "job {name}: {what} did not happen within {} s; it is now {}",
                PATIENCE.as_secs(),
                serde_json::to_string_pretty(&job).unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

fn released(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(false)
}

/// Marks a Job finished as the job controller would.
async fn finish(jobs: &Api<Job>, name: &str) {
    let now = "2026-12-01T00:00:00Z";
    let status = json!({"status": {
        "startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now, "lastProbeTime": now},
            {"type": "Complete", "status": "True", "lastTransitionTime": now, "lastProbeTime": now}]}});
    jobs.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("marking {name} finished: {e}"));
}

/// Waits a while and checks `name` is still held: the operator had every
/// chance to act (several of its ticks) and did not.
async fn stays_held(jobs: &Api<Job>, name: &str) {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let job = jobs.get(name).await.unwrap();
    assert!(suspended(&job), "{name} was released: {:?}", job.spec);
}

#[tokio::test]
async fn jobs_are_held_until_admitted_and_released_onto_their_flavor() {
    let (_cluster, admin) = cluster_with_setup().await;
    let operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    for (name, gpus) in [("first", 4), ("second", 4), ("third", 4)] {
        jobs.create(&PostParams::default(), &job(name, gpus))
            .await
            .unwrap();
    }

    for name in ["first", "second"] {
        let job = wait_for(&jobs, name, "admission", released).await;
        let spec = job.spec.unwrap().template.spec.unwrap();
        assert_eq!(
            spec.node_selector
                .unwrap()
                .get("nvidia.com/gpu.product")
                .map(String::as_str),
            Some("NVIDIA-A100-SXM4-40GB")
        );
        let tolerations = spec.tolerations.unwrap();
        assert!(tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some("nvidia.com/gpu")));
        let annotations = job.metadata.annotations.unwrap_or_default();
        assert!(
            annotations.contains_key("arbiter.dev/admission"),
            "{annotations:?}"
        );
    }
    // 8 GPUs of quota and of Node capacity: the third waits.
    stays_held(&jobs, "third").await;

    // The first finishes: its GPUs go to the third.
    finish(&jobs, "first").await;
    wait_for(
        &jobs,
        "third",
        "admission after the first finished",
        released,
    )
    .await;

    // A job asking more than the Node holds is never released, quota or not.
    jobs.create(&PostParams::default(), &job("too-big", 16))
        .await
        .unwrap();
    stays_held(&jobs, "too-big").await;

    // Deleting a running job frees its quota for the next.
    jobs.create(&PostParams::default(), &job("fourth", 4))
        .await
        .unwrap();
    stays_held(&jobs, "fourth").await;
    jobs.delete("second", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &jobs,
        "fourth",
        "admission after the second was deleted",
        released,
    )
    .await;
    operator.abort();
}

#[tokio::test]
async fn a_job_created_unsuspended_is_held_first() {
    let (_cluster, admin) = cluster_with_setup().await;
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    // Fill the quota before the operator starts, then add a job that is not suspended.
    let mut running = job("eager", 8);
    running.spec.as_mut().unwrap().suspend = Some(false);
    let mut held = job("blocker", 8);
    held.spec.as_mut().unwrap().suspend = Some(true);
    jobs.create(&PostParams::default(), &held).await.unwrap();
    let operator = start_operator(admin.clone());
    wait_for(&jobs, "blocker", "admission", released).await;
    jobs.create(&PostParams::default(), &running).await.unwrap();
    wait_for(&jobs, "eager", "being held", suspended).await;
    stays_held(&jobs, "eager").await;
    operator.abort();
}

#[tokio::test]
async fn a_restarted_operator_reads_admissions_back_and_admits_nothing_twice() {
    let (_cluster, admin) = cluster_with_setup().await;
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    let operator = start_operator(admin.clone());
    for (name, gpus) in [("one", 4), ("two", 4)] {
        jobs.create(&PostParams::default(), &job(name, gpus))
            .await
            .unwrap();
    }
    for name in ["one", "two"] {
        wait_for(&jobs, name, "admission", released).await;
    }
    operator.abort();
    let _ = operator.await;

    // While it is down, another job arrives; the quota is still in use.
    jobs.create(&PostParams::default(), &job("three", 4))
        .await
        .unwrap();
    let operator = start_operator(admin.clone());
    stays_held(&jobs, "three").await;
    for name in ["one", "two"] {
        let job = jobs.get(name).await.unwrap();
        assert!(released(&job), "{name} was held again after the restart");
    }
    finish(&jobs, "one").await;
    wait_for(&jobs, "three", "admission after one finished", released).await;
    operator.abort();
}

#[tokio::test]
async fn kubeflow_jobs_get_each_replica_template_injected() {
    let (cluster, admin) = cluster_with_setup().await;
    let shared = std::env::var_os("ARBITER_SHARED_TESTDATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/testdata"));
    let crd = shared.join("crds/kubeflow.org_pytorchjobs.yaml");
    if !crd.is_file() {
        eprintln!(
            "note: {} not found; PyTorchJob not tested (set ARBITER_SHARED_TESTDATA)",
            crd.display()
        );
        return;
    }
    cluster
        .install_crds(&crd_documents(&crd).unwrap())
        .await
        .unwrap();
    let operator = start_operator(admin.clone());
    let resource = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("kubeflow.org", "v1", "PyTorchJob"),
        "pytorchjobs",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), "team-a", &resource);
    let replica = |n: u32| {
        json!({"replicas": n, "template": {"spec": {"containers": [{"name": "pytorch", "image": "pytorch",
        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}}]}}})
    };
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "ddp", "namespace": "team-a", "labels": {"arbiter.dev/queue-name": "research"}},
        "spec": {"runPolicy": {"suspend": true},
                 "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(3)}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
    let started = std::time::Instant::now();
    let admitted = loop {
        let current = serde_json::to_value(api.get("ddp").await.unwrap()).unwrap();
        if current["spec"]["runPolicy"]["suspend"] == json!(false) {
            break current;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the PyTorchJob was not admitted: {current:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for replica in ["Master", "Worker"] {
        let spec = &admitted["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"];
        assert_eq!(
            spec["nodeSelector"]["nvidia.com/gpu.product"],
            json!("NVIDIA-A100-SXM4-40GB"),
            "{replica}: {spec:#}"
        );
    }
    operator.abort();
}
