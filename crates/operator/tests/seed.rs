//! The seed article's setup in a real API server: `examples/seed/cluster.yaml`
//! applied verbatim (three GPU flavors, two ClusterQueues in a cohort, five
//! tenant namespaces with their LocalQueues), Nodes for each flavor (with
//! its labels and taints), and the first jobs of `examples/seed/jobs.yaml`
//! — a PyTorchJob (production), a Job (development), a TFJob (ai-research)
//! and an MPIJob (medical-imaging) — created as written. Each is admitted,
//! and every pod template of each carries the node selector and the
//! tolerations of the flavor its admission record names.

mod support;

use std::time::{Duration, Instant};

use arbiter_core::jobs::Integrations;
use arbiter_testcluster::{crd_documents, workspace_root, TestCluster};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{json, Value};
use support::*;

/// kubeflow.org/v2beta1 MPIJob (mpi-operator's; only the training
/// operator's v1 CRD is in the shared test data): any fields kept.
const MPIJOB_V2_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: mpijobs.kubeflow.org}
spec:
  group: kubeflow.org
  names: {kind: MPIJob, plural: mpijobs, singular: mpijob, listKind: MPIJobList}
  scope: Namespaced
  versions:
  - name: v2beta1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// Flavor → (node label value, tainted) as examples/seed/cluster.yaml has them.
const FLAVORS: &[(&str, &str, bool)] = &[
    ("a100", "NVIDIA-A100-SXM4-40GB", true),
    ("a100-80gb", "NVIDIA-A100-SXM4-80GB", true),
    ("v100", "Tesla-V100-SXM2-16GB", false),
];

fn documents(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(doc).unwrap();
        if !value.is_null() {
            out.push(value);
        }
    }
    out
}

async fn add_flavor_nodes(client: &kube::Client) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    for (flavor, product, tainted) in FLAVORS {
        for i in 0..4 {
            let name = format!("{flavor}-{i}");
            let mut node = json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product}}});
            if *tainted {
                node["spec"] = json!({"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]});
            }
            nodes
                .create(&Default::default(), &serde_json::from_value(node).unwrap())
                .await
                .unwrap();
            let capacity =
                json!({"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"});
            nodes
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(
                        json!({"status": {"allocatable": capacity, "capacity": capacity}}),
                    ),
                )
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn the_seed_articles_setup_admits_its_jobs_onto_their_flavors() {
    let shared = std::env::var_os("ARBITER_SHARED_TESTDATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/data"));
    if !shared.join("crds").is_dir() {
        eprintln!(
            "note: {} not found; the seed e2e test is skipped (set ARBITER_SHARED_TESTDATA)",
            shared.display()
        );
        return;
    }
    let cluster = TestCluster::start().await.unwrap();
    let admin = cluster.admin_client().await.unwrap();
    let mut crds = crd_documents(&workspace_root().join("deploy/crds.yaml")).unwrap();
    for kind in ["pytorchjobs", "tfjobs"] {
        crds.extend(crd_documents(&shared.join(format!("crds/kubeflow.org_{kind}.yaml"))).unwrap());
    }
    crds.push(serde_yaml_ng::from_str(MPIJOB_V2_CRD).unwrap());
    cluster.install_crds(&crds).await.unwrap();
    // The article's setup, as written.
    let setup =
        std::fs::read_to_string(workspace_root().join("examples/seed/cluster.yaml")).unwrap();
    apply_yaml(&admin, &setup).await;
    add_flavor_nodes(&admin).await;
    let _operator = start_operator(admin.clone());

    let jobs: Vec<Value> = documents(&workspace_root().join("examples/seed/jobs.yaml"))
        .into_iter()
        .take(4)
        .collect();
    let kinds: Vec<&str> = jobs.iter().map(|j| j["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["PyTorchJob", "Job", "TFJob", "MPIJob"]);
    let mut apis = Vec::new();
    for job in &jobs {
        let api_version = job["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap();
        let gvk = GroupVersionKind::gvk(group, version, job["kind"].as_str().unwrap());
        let (resource, _) = kube::discovery::pinned_kind(&admin, &gvk).await.unwrap();
        let namespace = job["metadata"]["namespace"].as_str().unwrap();
        let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), namespace, &resource);
        api.create(
            &Default::default(),
            &serde_json::from_value(job.clone()).unwrap(),
        )
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", job["metadata"]["name"]));
        apis.push(api);
    }

    let integrations = Integrations::builtin();
    for (job, api) in jobs.iter().zip(&apis) {
        let name = job["metadata"]["name"].as_str().unwrap();
        let integration = integrations
            .find(
                job["apiVersion"].as_str().unwrap(),
                job["kind"].as_str().unwrap(),
            )
            .unwrap();
        let started = Instant::now();
        let object = loop {
            let object = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
            if !integration.is_held(&object) {
                break object;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{name} never admitted: {object:#}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let record: Value = serde_json::from_str(
            object["metadata"]["annotations"]["arbiter.dev/admission"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        let info = integration.extract(&object).unwrap();
        for (i, pod_set) in info.pod_sets.iter().enumerate() {
            let flavors = &record["flavors"][i];
            let flavor = flavors
                .get("nvidia.com/gpu")
                .or_else(|| flavors.get("cpu"))
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{name}: no flavor recorded for pod set {i}: {record}"));
            let (_, product, tainted) = FLAVORS.iter().find(|f| f.0 == flavor).unwrap();
            let path = pod_set.template_path.as_deref().unwrap();
            let pointer = format!("/{}/spec", path.replace('.', "/"));
            let spec = object
                .pointer(&pointer)
                .unwrap_or_else(|| panic!("{name}: no {path}"));
            assert_eq!(
                spec["nodeSelector"]["nvidia.com/gpu.product"],
                json!(product),
                "{name} pod set {}: {spec:#}",
                pod_set.name
            );
            let tolerated = spec["tolerations"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["key"] == "nvidia.com/gpu"));
            assert_eq!(
                tolerated, *tainted,
                "{name} pod set {}: {spec:#}",
                pod_set.name
            );
        }
    }
}
