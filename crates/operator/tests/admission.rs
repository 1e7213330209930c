//! The operator against a real kube-apiserver + etcd (`arbiter-testcluster`):
//! queued jobs are held until admitted, admission injects the flavor's node
//! labels and tolerations and releases the job, quota and Node capacity
//! bound what is admitted, a finished or deleted job frees its quota, and a
//! restarted operator reads admissions back instead of admitting twice.
//! The tests where a job runs to its end are on the full cluster (the Job
//! controller makes its pod, kwok runs it, the test only says when it
//! ends); the others need no pod and run on kube-apiserver + etcd alone.

mod support;

use std::time::Duration;

use arbiter_core::model::api::{ClusterQueue, LocalQueue, Workload};
use arbiter_testcluster::{crd_documents, workspace_root};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;
use support::*;

#[tokio::test]
async fn jobs_are_held_until_admitted_and_released_onto_their_flavor() {
    let (_cluster, admin) = full_cluster_with_setup().await;
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

    // The queues' status says so, and `kubectl get` shows it (the API
    // server's Table rendering of the CRD's printer columns).
    let started = std::time::Instant::now();
    loop {
        let cq: ClusterQueue = Api::all(admin.clone()).get("research").await.unwrap();
        let status = cq.status.clone().unwrap_or_default();
        if status.admitted_workloads == 2 && status.pending_workloads == 1 {
            let usage = &status.flavors_usage[0];
            assert_eq!(usage.name, "a100");
            let gpu = usage
                .resources
                .iter()
                .find(|r| r.name == "nvidia.com/gpu")
                .unwrap();
            assert_eq!(gpu.total.0, "8");
            assert_eq!(status.usage_summary.as_deref(), Some("a100 gpu: 8/8"));
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "ClusterQueue status: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let lq: LocalQueue = Api::namespaced(admin.clone(), "team-a")
        .get("research")
        .await
        .unwrap();
    let status = lq.status.unwrap_or_default();
    assert_eq!(
        (status.admitted_workloads, status.pending_workloads),
        (2, 1)
    );
    let rows = get_table(&admin, "/apis/arbiter.dev/v1alpha1/clusterqueues").await;
    assert_eq!(table_cell(&rows, "research", "Admitted"), json!(2));
    assert_eq!(table_cell(&rows, "research", "Pending"), json!(1));
    assert_eq!(
        table_cell(&rows, "research", "Usage"),
        json!("a100 gpu: 8/8")
    );
    let rows = get_table(
        &admin,
        "/apis/arbiter.dev/v1alpha1/namespaces/team-a/workloads",
    )
    .await;
    assert_eq!(table_cell(&rows, "job-first", "Admitted"), json!("True"));
    assert_eq!(
        table_cell(&rows, "job-first", "ClusterQueue"),
        json!("research")
    );
    assert_eq!(table_cell(&rows, "job-third", "Admitted"), json!("False"));

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
    let (_cluster, admin) = full_cluster_with_setup().await;
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
    wait_condition(&admin, "job-two", "Admitted", "True").await;
    operator.abort();
    let _ = operator.await;
    // A Workload the operator never got to write before it stopped (its
    // writes wait off the admission path): written after the restart.
    let workloads: Api<Workload> = Api::namespaced(admin.clone(), "team-a");
    workloads
        .delete("job-two", &DeleteParams::default())
        .await
        .unwrap();

    // While it is down, two more jobs arrive, a second apart (creation
    // times have whole seconds), the later one first by name; the quota is
    // still in use.
    jobs.create(&PostParams::default(), &job("zz-three", 4))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    jobs.create(&PostParams::default(), &job("aa-four", 4))
        .await
        .unwrap();
    let operator = start_operator(admin.clone());
    stays_held(&jobs, "zz-three").await;
    for name in ["one", "two"] {
        let job = jobs.get(name).await.unwrap();
        assert!(released(&job), "{name} was held again after the restart");
    }
    let (reason, _) = wait_condition(&admin, "job-two", "Admitted", "True").await;
    assert_eq!(reason, "Admitted");
    // Room for one: the job created first goes first, as Kueue orders.
    finish(&jobs, "one").await;
    wait_for(&jobs, "zz-three", "admission after one finished", released).await;
    stays_held(&jobs, "aa-four").await;
    operator.abort();
}

#[tokio::test]
async fn kubeflow_jobs_get_each_replica_template_injected() {
    let (cluster, admin) = cluster_with_setup().await;
    let shared = std::env::var_os("ARBITER_SHARED_TESTDATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/data"));
    let crd = shared.join("crds/kubeflow.org_pytorchjobs.yaml");
    if !crd.is_file() {
        eprintln!(
            "note: {} not found; PyTorchJob not tested (set ARBITER_SHARED_TESTDATA)",
            crd.display()
        );
        return;
    }
    // The CRD arrives after the operator started: it finds the kind.
    let operator = start_operator(admin.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster
        .install_crds(&crd_documents(&crd).unwrap())
        .await
        .unwrap();
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
    jobs.create(&PostParams::default(), &job("greedy", 6))
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
    assert!(message.contains("at most 4 GPUs, got 6"), "{message}");
    let note = wait_event(&admin, "greedy", &reason).await;
    assert!(
        note.contains("at-most-four-gpus") && note.contains("got 6"),
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
    // Eviction is two writes (hold, then restore the template: Kubernetes
    // changes a template's scheduling fields only on a suspended job).
    let low = wait_for(
        &jobs,
        "low",
        "being held again with its template restored after preemption",
        |j| {
            suspended(j)
                && !j
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key("arbiter.dev/admission"))
        },
    )
    .await;
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

/// What `kubectl get` shows: the API server's Table for a list path.
async fn get_table(client: &kube::Client, path: &str) -> serde_json::Value {
    let request = http::Request::get(path)
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let text = client.request_text(request).await.unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The cell of column `column` in the row of object `name`.
fn table_cell(table: &serde_json::Value, name: &str, column: &str) -> serde_json::Value {
    let columns = table["columnDefinitions"].as_array().unwrap();
    let index = columns
        .iter()
        .position(|c| c["name"] == column)
        .unwrap_or_else(|| panic!("no column {column}: {columns:?}"));
    let row = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cells"][0] == name)
        .unwrap_or_else(|| panic!("no row {name}: {table}"));
    row["cells"][index].clone()
}

#[tokio::test]
async fn bad_jobs_are_held_and_told_and_the_operator_goes_on() {
    let (_cluster, admin) = cluster_with_setup().await;
    let operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    // A pod set over the cap of pods, created to run at once.
    let mut huge = job("huge", 1);
    huge.spec.as_mut().unwrap().suspend = Some(false);
    huge.spec.as_mut().unwrap().parallelism = Some(200_000);
    huge.spec.as_mut().unwrap().completions = Some(200_000);
    jobs.create(&PostParams::default(), &huge).await.unwrap();
    // A queue that does not exist.
    let mut lost = job("lost", 1);
    lost.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("arbiter.dev/queue-name".into(), "no-such-queue".into());
    jobs.create(&PostParams::default(), &lost).await.unwrap();
    // More GPUs than the queue could ever give.
    jobs.create(&PostParams::default(), &job("too-big", 1000))
        .await
        .unwrap();
    jobs.create(&PostParams::default(), &job("fine", 1))
        .await
        .unwrap();

    wait_for(&jobs, "fine", "admission", released).await;
    let note = wait_event(&admin, "too-big", "NeverFits").await;
    let (reason, message) = wait_condition(&admin, "job-too-big", "QuotaReserved", "False").await;
    assert_eq!(
        (reason.as_str(), message.as_str()),
        ("NeverFits", note.as_str())
    );
    assert!(note.contains("1000"), "{note}");
    wait_for(&jobs, "huge", "being held", suspended).await;
    let note = wait_event(&admin, "huge", "InvalidJob").await;
    assert!(note.contains("200000") && note.contains("100000"), "{note}");
    let note = wait_event(&admin, "lost", "LocalQueueDoesNotExist").await;
    assert!(note.contains("no-such-queue"), "{note}");
    // Its Workload says the same, listed beside the others.
    let (reason, message) = wait_condition(&admin, "job-lost", "QuotaReserved", "False").await;
    assert_eq!(reason, "LocalQueueDoesNotExist");
    assert_eq!(message, note);
    stays_held(&jobs, "lost").await;
    stays_held(&jobs, "huge").await;
    // Deleted, its Workload goes with it (no garbage collector runs here).
    jobs.delete("lost", &DeleteParams::default()).await.unwrap();
    let workloads: Api<Workload> = Api::namespaced(admin.clone(), "team-a");
    let started = std::time::Instant::now();
    while workloads.get_opt("job-lost").await.unwrap().is_some() {
        assert!(
            started.elapsed() < PATIENCE,
            "the Workload of deleted job lost is still there"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    operator.abort();
}
