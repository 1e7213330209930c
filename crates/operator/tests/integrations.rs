//! A job kind defined by the operator's configuration, not its code: the
//! seed article's `kubeflow.org/v1 PipelineRun`, read from
//! `examples/integrations/article-pipelinerun.yaml` (`arbiter run
//! --integrations`), against a real kube-apiserver. The article's own
//! PipelineRun (its document in `tests/data/article/manifests.yaml`, a copy of the shared test data)
//! is held, queued asking for its `gpu-count` parameter's GPUs, and
//! admitted; a second one asking for more than is left waits until the
//! first succeeds.

mod support;

use arbiter_operator::{integrations, Operator};
use arbiter_testcluster::workspace_root;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{json, Value};
use support::*;

fn article_pipeline_run() -> Option<Value> {
    let shared = std::env::var_os("ARBITER_SHARED_TESTDATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/data"));
    let text = std::fs::read_to_string(shared.join("article/manifests.yaml")).ok()?;
    let found = serde_yaml_ng::Deserializer::from_str(&text)
        .filter_map(|doc| serde::Deserialize::deserialize(doc).ok())
        .find(|v: &Value| v["kind"] == "PipelineRun");
    found
}

fn held(run: &DynamicObject) -> bool {
    run.data["spec"]["suspend"] == json!(true)
}

#[tokio::test]
async fn the_articles_pipeline_run_is_queued_by_a_job_integration_from_configuration() {
    let Some(article) = article_pipeline_run() else {
        eprintln!("note: the article's manifests not found; PipelineRun not tested (set ARBITER_SHARED_TESTDATA)");
        return;
    };
    let (cluster, admin) = cluster_with_setup().await;
    // No upstream CRD exists for the article's kind.
    cluster
        .install_crds(&[open_crd("kubeflow.org", "PipelineRun", "pipelineruns")])
        .await
        .unwrap();
    // The article's queue, in the test's namespace, onto the test's ClusterQueue.
    apply_yaml(
        &admin,
        "apiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: ai-queue, namespace: team-a}\nspec: {clusterQueue: research}\n",
    )
    .await;

    let file = workspace_root().join("examples/integrations/article-pipelinerun.yaml");
    let (kinds, warnings) = integrations::read(&[file]).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let _operator = Operator::builder(admin.clone())
        .integrations(kinds)
        .start()
        .await
        .unwrap();

    let resource =
        ApiResource::from_gvk(&GroupVersionKind::gvk("kubeflow.org", "v1", "PipelineRun"));
    let runs: Api<DynamicObject> = Api::namespaced_with(admin.clone(), "team-a", &resource);
    // The article's object as written (it names no namespace; it goes to team-a).
    let mut first: DynamicObject = serde_json::from_value(article.clone()).unwrap();
    first.metadata.namespace = Some("team-a".into());
    runs.create(&PostParams::default(), &first).await.unwrap();
    let name = first.metadata.name.clone().unwrap();
    let workload = format!("pipelinerun-{name}");
    wait_condition(&admin, &workload, "Admitted", "True").await;
    let admitted = runs.get(&name).await.unwrap();
    assert_eq!(
        admitted.data["spec"]["suspend"],
        json!(false),
        "{admitted:?}"
    );
    assert!(
        admitted
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("arbiter.dev/admission")),
        "{admitted:?}"
    );

    // A second run asking for 8 GPUs: the first holds 2 of the 8.
    let mut second = article;
    second["metadata"]["name"] = json!("big-pipeline");
    second["metadata"]["namespace"] = json!("team-a");
    second["spec"]["runtimeConfig"]["parameters"]["gpu-count"] = json!("8");
    runs.create(
        &PostParams::default(),
        &serde_json::from_value(second).unwrap(),
    )
    .await
    .unwrap();
    let (reason, message) =
        wait_condition(&admin, "pipelinerun-big-pipeline", "QuotaReserved", "False").await;
    assert!(message.contains("nvidia.com/gpu"), "{reason}: {message}");
    assert!(held(&runs.get("big-pipeline").await.unwrap()));

    // The first succeeds (the test plays the pipeline controller): the second goes.
    runs.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{"type": "Succeeded", "status": "True"}]}})),
    )
    .await
    .unwrap();
    wait_condition(&admin, "pipelinerun-big-pipeline", "Admitted", "True").await;
    assert!(!held(&runs.get("big-pipeline").await.unwrap()));
}
