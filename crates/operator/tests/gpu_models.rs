//! Several GPU models in one cluster that runs pods (issue 34): one
//! ResourceFlavor per model, a ClusterQueue listing both (A100 first), and
//! the shipped `policies/placement-bestfit` in force as a bundle
//! directory. A Job that may run on either model goes to the model
//! placement prefers — the H100 Node, which the Job's pods fill best —
//! not to the first listed, and kube-scheduler binds its pods there. A Job
//! whose node selector names the A100s goes to them whatever placement
//! prefers: placement chooses only among the flavors a job may use.

mod support;

use arbiter_testcluster::{NodeSpec, TestCluster};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::json;
use support::*;

const PRODUCT: &str = "nvidia.com/gpu.product";
const A100: &str = "NVIDIA-A100-SXM4-80GB";
const H100: &str = "NVIDIA-H100-80GB-HBM3";

/// A flavor per model, the A100s listed first, quota enough for both.
const SETUP: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
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
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 16}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: research, namespace: team-a}
spec: {clusterQueue: research}
"#;

/// The full cluster with the setup above, an A100 Node of 64 CPUs and an
/// H100 Node of 16 (8 GPUs each), and the operator with the placement
/// bundle.
async fn two_models() -> (TestCluster, Client) {
    let (cluster, admin) = full_cluster_applying(SETUP).await;
    for (name, cpus, product) in [("a100-node", 64, A100), ("h100-node", 16, H100)] {
        cluster
            .add_node(&NodeSpec::gpu(name, cpus, 8).label(PRODUCT, product))
            .await
            .unwrap();
    }
    let bestfit = arbiter_testcluster::workspace_root().join("policies/placement-bestfit");
    start_operator_with_bundles(admin.clone(), vec![bestfit], None);
    (cluster, admin)
}

/// A held Job of `pods` pods of 4 CPUs and a GPU each, running until
/// deleted; its pods select `product` if given.
fn model_job(name: &str, pods: u32, product: Option<&str>) -> Job {
    let mut pod = json!({
        "restartPolicy": "Never",
        "containers": [{"name": "train", "image": "pytorch",
            "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1"},
                          "limits": {"nvidia.com/gpu": "1"}}}]
    });
    if let Some(product) = product {
        pod["nodeSelector"] = json!({PRODUCT: product});
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "team-a",
                     "labels": {"arbiter.dev/queue-name": "research"}},
        "spec": {"suspend": true, "parallelism": pods, "completions": pods,
                 "backoffLimit": 0, "template": {"spec": pod}}
    }))
    .unwrap()
}

/// The flavor the job's Workload was admitted on, for `nvidia.com/gpu`,
/// once it says (Workloads are written off the decision path).
async fn admitted_flavor(client: &Client, job: &str) -> String {
    let gpu_flavor = |w: &serde_json::Value| {
        w["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"].clone()
    };
    let name = format!("job-{job}");
    let workload = wait_workload_in(
        client,
        "team-a",
        &name,
        "admission with a GPU flavor",
        |w| gpu_flavor(w).is_string(),
    )
    .await;
    gpu_flavor(&workload).as_str().unwrap().to_owned()
}

/// Waits until the job's `count` pods are bound; returns their Nodes.
async fn bound_nodes(
    client: &Client,
    cluster: &TestCluster,
    job: &str,
    count: usize,
) -> Vec<String> {
    let selector = format!("batch.kubernetes.io/job-name={job}");
    let found = wait_pods(client, cluster, &selector, "bound", |pods| {
        pods.len() == count && pods.iter().all(|p| node_of(p).is_some())
    })
    .await;
    found
        .iter()
        .filter_map(|p| node_of(p).map(str::to_string))
        .collect()
}

#[tokio::test]
async fn a_job_that_may_run_on_two_models_goes_where_placement_prefers() {
    let (cluster, client) = two_models().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");

    // Either model will do: best fit prefers the H100 Node (16 CPUs, the
    // two pods' 8 leave the least), though a100 is listed first.
    jobs.create(&PostParams::default(), &model_job("either", 2, None))
        .await
        .unwrap();
    wait_for(&jobs, "either", "released", released).await;
    assert_eq!(admitted_flavor(&client, "either").await, "h100");
    let nodes = bound_nodes(&client, &cluster, "either", 2).await;
    assert_eq!(nodes, ["h100-node", "h100-node"], "bound by kube-scheduler");

    // Pinned to the A100s by its node selector: only a100 may take it.
    jobs.create(&PostParams::default(), &model_job("pinned", 1, Some(A100)))
        .await
        .unwrap();
    wait_for(&jobs, "pinned", "released", released).await;
    assert_eq!(admitted_flavor(&client, "pinned").await, "a100");
    let nodes = bound_nodes(&client, &cluster, "pinned", 1).await;
    assert_eq!(nodes, ["a100-node"]);
}
