//! The full test cluster itself (`TestCluster::start_full`): kube-scheduler
//! binds pods to kwok's Nodes, a taint keeps pods that do not tolerate it
//! off, kwok runs them for the time their annotation says and fails or
//! holds them back on demand, the Job controller of
//! kube-controller-manager runs a Job to completion, and deleted pods go
//! away — the behaviour the operator's end-to-end tests rely on.

use std::time::{Duration, Instant};

use arbiter_testcluster::{
    NodeSpec, TestCluster, FAIL_LABEL, NEVER_READY_LABEL, READY_AFTER_ANNOTATION,
    RUN_FOR_ANNOTATION,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

/// Bounds a hang; measures nothing.
const PATIENCE: Duration = Duration::from_secs(60);

async fn wait<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what} did not happen within {} s",
            PATIENCE.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn pod(name: &str, annotations: serde_json::Value, labels: serde_json::Value, gpus: u32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "demo", "annotations": annotations, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                              "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn pods_are_scheduled_run_and_finish_as_their_annotations_say() {
    let started = Instant::now();
    let cluster = TestCluster::start_full()
        .await
        .unwrap_or_else(|e| panic!("the full test cluster did not start: {e}"));
    eprintln!(
        "full cluster ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let admin = cluster.admin_client().await.unwrap();
    cluster
        .add_node(&NodeSpec::gpu("gpu-1", 16, 4).label("pool", "gpu").taint(
            "nvidia.com/gpu",
            "true",
            "NoSchedule",
        ))
        .await
        .unwrap();
    cluster
        .add_node(&NodeSpec::gpu("cpu-1", 16, 0))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(admin.clone());
    wait("both Nodes Ready", async || {
        let mut ready = 0;
        for name in ["gpu-1", "cpu-1"] {
            let node = nodes.get(name).await.ok()?;
            let conditions = node.status?.conditions?;
            if conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
            {
                ready += 1;
            }
        }
        (ready == 2).then_some(())
    })
    .await;
    // Ready, the GPU Node still declares what it was created with (kwok's
    // first status keeps the allocatable it read).
    let gpu = nodes.get("gpu-1").await.unwrap();
    let allocatable = gpu.status.unwrap().allocatable.unwrap_or_default();
    assert_eq!(
        allocatable.get("nvidia.com/gpu").map(|q| q.0.as_str()),
        Some("4"),
        "{allocatable:?}"
    );
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "demo"}})).unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "demo");
    let phase = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let pod = pods.get(name).await.ok()?;
            Some((
                pod.spec.as_ref()?.node_name.clone().unwrap_or_default(),
                pod.status.as_ref()?.phase.clone().unwrap_or_default(),
            ))
        }
    };

    // Runs for a second on the GPU Node (the only one with GPUs), then succeeds.
    pods.create(
        &PostParams::default(),
        &pod("ok", json!({RUN_FOR_ANNOTATION: "1s"}), json!({}), 2),
    )
    .await
    .unwrap();
    // Fails after a second.
    pods.create(
        &PostParams::default(),
        &pod(
            "bad",
            json!({RUN_FOR_ANNOTATION: "1s"}),
            json!({FAIL_LABEL: "true"}),
            1,
        ),
    )
    .await
    .unwrap();
    // Bound but never started.
    pods.create(
        &PostParams::default(),
        &pod("stuck", json!({}), json!({NEVER_READY_LABEL: "true"}), 1),
    )
    .await
    .unwrap();
    // Starts after a delay, then runs until deleted.
    pods.create(
        &PostParams::default(),
        &pod("slow", json!({READY_AFTER_ANNOTATION: "2s"}), json!({}), 0),
    )
    .await
    .unwrap();
    // Asks more GPUs than any Node has: kube-scheduler leaves it pending.
    pods.create(
        &PostParams::default(),
        &pod("huge", json!({}), json!({}), 8),
    )
    .await
    .unwrap();

    let (node, _) = wait("ok succeeded", async || {
        phase("ok").await.filter(|(_, p)| p == "Succeeded")
    })
    .await;
    assert_eq!(node, "gpu-1");
    wait("bad failed", async || {
        phase("bad").await.filter(|(_, p)| p == "Failed")
    })
    .await;
    wait("slow running", async || {
        phase("slow").await.filter(|(_, p)| p == "Running")
    })
    .await;
    let (node, stuck) = phase("stuck").await.unwrap();
    assert_eq!((node.as_str(), stuck.as_str()), ("gpu-1", "Pending"));
    let (node, huge) = phase("huge").await.unwrap();
    assert_eq!((node.as_str(), huge.as_str()), ("", "Pending"));

    // A deleted pod goes away (no kubelet: kwok deletes it).
    pods.delete("slow", &DeleteParams::default()).await.unwrap();
    wait("slow gone", async || {
        pods.get_opt("slow")
            .await
            .ok()
            .and_then(|p| p.is_none().then_some(()))
    })
    .await;

    // The Job controller runs a Job: its pod made, run, the Job Complete.
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "demo");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "once", "namespace": "demo"},
        "spec": {"template": {
            "metadata": {"annotations": {RUN_FOR_ANNOTATION: "1s"}},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox"}]}}}
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    wait("the Job complete", async || {
        let job = jobs.get("once").await.ok()?;
        job.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True")
            .then_some(())
    })
    .await;
}
