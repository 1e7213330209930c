//! The operator against a real kube-apiserver + etcd (`arbiter-testcluster`):
//! queued jobs are held until admitted, admission injects the flavor's node
//! labels and tolerations and releases the job, quota and Node capacity
//! bound what is admitted, a finished or deleted job frees its quota, and a
//! restarted operator reads admissions back instead of admitting twice.
//! The test plays the job controller (it marks jobs finished); nothing
//! runs pods.

use std::time::Duration;

use arbiter_core::jobs::Integrations;
use arbiter_core::model::api::Workload;
use arbiter_core::scheduler::hooks::{DefaultHooks, Hooks};
use arbiter_operator::{Driver, DriverOptions};
use arbiter_testcluster::{crd_documents, workspace_root, TestCluster};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
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
  preemption: {withinClusterQueue: LowerPriority}
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
    start_operator_with(client, Box::new(DefaultHooks))
}

fn start_operator_with(client: Client, hooks: Box<dyn Hooks + Send>) -> JoinHandle<()> {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .try_init();
    tokio::spawn(async move {
        let driver = Driver::start(
            client,
            Integrations::builtin(),
            hooks,
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

/// Waits until the job's Workload has condition `type_` with `status`, and
/// returns that condition's (reason, message).
async fn wait_condition(
    client: &Client,
    workload: &str,
    type_: &str,
    status: &str,
) -> (String, String) {
    let api: Api<Workload> = Api::namespaced(client.clone(), "team-a");
    let started = std::time::Instant::now();
    loop {
        let current = api.get_opt(workload).await.unwrap();
        if let Some(found) = current
            .as_ref()
            .and_then(|w| w.status.as_ref())
            .and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == type_ && c.status == status)
                    .map(|c| (c.reason.clone(), c.message.clone()))
            })
        {
            return found;
        }
        if started.elapsed() > PATIENCE {
            panic!(
                "Workload {workload}: condition {type_}={status} did not appear within {} s; it is now {}",
                PATIENCE.as_secs(),
                serde_json::to_string_pretty(&current).unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits for an Event about job `name` with `reason`; returns its note.
async fn wait_event(client: &Client, name: &str, reason: &str) -> String {
    let api: Api<Event> = Api::namespaced(client.clone(), "team-a");
    let started = std::time::Instant::now();
    loop {
        let events = api.list(&ListParams::default()).await.unwrap();
        if let Some(event) = events.items.iter().find(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
        }) {
            return event.note.clone().unwrap_or_default();
        }
        if started.elapsed() > PATIENCE {
            let seen: Vec<_> = events
                .items
                .iter()
                .map(|e| {
                    (
                        e.regarding.as_ref().and_then(|r| r.name.clone()),
                        e.reason.clone(),
                        e.note.clone(),
                    )
                })
                .collect();
            panic!(
                "no {reason} Event about {name} within {} s; events: {seen:#?}",
                PATIENCE.as_secs()
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

    // Each has a Workload owned by its job, with Kueue's conditions; the
    // admitted ones an Event saying where.
    let workloads: Api<Workload> = Api::namespaced(admin.clone(), "team-a");
    let first = workloads.get("job-first").await.unwrap();
    let owner = &first.metadata.owner_references.clone().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Job", "first"));
    assert_eq!(first.spec.queue_name.as_deref(), Some("research"));
    let (reason, message) = wait_condition(&admin, "job-first", "Admitted", "True").await;
    assert_eq!(reason, "Admitted");
    assert!(!message.is_empty());
    let (_, message) = wait_condition(&admin, "job-first", "QuotaReserved", "True").await;
    assert!(message.contains("ClusterQueue research"), "{message}");
    let admission = workloads
        .get("job-first")
        .await
        .unwrap()
        .status
        .unwrap()
        .admission
        .unwrap();
    assert_eq!(admission.cluster_queue, "research");
    assert_eq!(
        admission.pod_set_assignments[0].flavors["nvidia.com/gpu"],
        "a100"
    );
    let note = wait_event(&admin, "first", "Admitted").await;
    assert!(note.contains("ClusterQueue research"), "{note}");
    let (reason, message) = wait_condition(&admin, "job-third", "QuotaReserved", "False").await;
    assert_ne!(reason, "QuotaReserved");
    assert!(message.contains("nvidia.com/gpu"), "{reason}: {message}");

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

#[tokio::test]
async fn a_policy_denial_shows_in_the_workload_and_as_an_event() {
    let (_cluster, admin) = cluster_with_setup().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bundle.yaml"),
        r#"apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {name: platform, version: "1"}
spec:
  policies:
  - name: at-most-four-gpus
    hook: admission
    cel:
      expression: "workload.gpus <= 4"
      messageExpression: "'team-a jobs may ask for at most 4 GPUs, got ' + string(workload.gpus)"
"#,
    )
    .unwrap();
    let engine = arbiter_policy::sources::engine(
        &[],
        &arbiter_policy::sources::PolicyChoice {
            platform: Some(vec![dir.path().to_path_buf()]),
            ..Default::default()
        },
    )
    .unwrap()
    .unwrap();
    let operator = start_operator_with(admin.clone(), Box::new(engine));
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("greedy", 8))
        .await
        .unwrap();
    jobs.create(&PostParams::default(), &job("modest", 2))
        .await
        .unwrap();
    wait_for(&jobs, "modest", "admission", released).await;
    let (reason, message) = wait_condition(&admin, "job-greedy", "QuotaReserved", "False").await;
    assert!(
        reason == "Denied" || reason == "Rejected",
        "{reason}: {message}"
    );
    assert!(message.contains("at-most-four-gpus"), "{message}");
    assert!(message.contains("at most 4 GPUs, got 8"), "{message}");
    let note = wait_event(&admin, "greedy", &reason).await;
    assert!(
        note.contains("at-most-four-gpus") && note.contains("got 8"),
        "{note}"
    );
    stays_held(&jobs, "greedy").await;
    operator.abort();
}

#[tokio::test]
async fn a_preempted_job_is_held_again_with_its_template_restored() {
    let (_cluster, admin) = cluster_with_setup().await;
    let operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    let original = job("low", 8);
    jobs.create(&PostParams::default(), &original)
        .await
        .unwrap();
    wait_for(&jobs, "low", "admission", released).await;

    let mut urgent = job("urgent", 8);
    urgent
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("arbiter.dev/priority-class".into(), "high".into());
    jobs.create(&PostParams::default(), &urgent).await.unwrap();
    let low = wait_for(&jobs, "low", "being held again after preemption", suspended).await;
    // The template is as the user wrote it: nothing injected is left.
    let spec = low.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(spec.node_selector, None);
    assert_eq!(spec.tolerations, None);
    assert!(!low
        .metadata
        .annotations
        .unwrap_or_default()
        .contains_key("arbiter.dev/admission"));
    wait_for(&jobs, "urgent", "admission after preempting", released).await;
    let (reason, message) = wait_condition(&admin, "job-low", "Evicted", "True").await;
    assert_eq!(reason, "Preempted", "{message}");
    assert!(message.contains("urgent"), "{message}");
    let note = wait_event(&admin, "low", "Preempted").await;
    assert!(note.contains("urgent"), "{note}");
    stays_held(&jobs, "low").await;
    operator.abort();
}
