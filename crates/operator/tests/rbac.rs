//! `deploy/rbac.yaml` is enough and no more: the operator, running under
//! the real token of the ServiceAccount it installs (TokenRequest API),
//! holds, admits and records Workloads and Events as in `admission.rs`,
//! and is refused what it has no business doing — reading Secrets,
//! changing the queue configuration.

mod support;

use arbiter_testcluster::workspace_root;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use support::*;

fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(status)) if status.is_forbidden())
}

#[tokio::test]
async fn the_operator_does_its_job_under_deploys_service_account_and_no_more() {
    let (cluster, admin) = cluster_with_setup().await;
    let rbac = std::fs::read_to_string(workspace_root().join("deploy/rbac.yaml")).unwrap();
    apply_yaml(&admin, &rbac).await;
    let token = cluster
        .service_account_token("arbiter-system", "arbiter")
        .await
        .unwrap();
    let operator_client = cluster.client_with_token(&token).await.unwrap();

    // Its job: hold, admit, Workloads, Events.
    let operator = start_operator(operator_client.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("a", 4))
        .await
        .unwrap();
    jobs.create(&PostParams::default(), &job("b", 8))
        .await
        .unwrap();
    wait_for(&jobs, "a", "admission", released).await;
    wait_condition(&admin, "job-a", "Admitted", "True").await;
    wait_condition(&admin, "job-b", "QuotaReserved", "False").await;
    wait_event(&admin, "a", "Admitted").await;
    stays_held(&jobs, "b").await;
    finish(&jobs, "a").await;
    wait_for(&jobs, "b", "admission after a finished", released).await;
    operator.abort();

    // No more: no Secrets anywhere, no changes to the queue configuration.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "token", "namespace": "team-a"},
        "stringData": {"key": "value"}
    }))
    .unwrap();
    Api::<Secret>::namespaced(admin.clone(), "team-a")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    for ns in ["team-a", "kube-system", "arbiter-system"] {
        let secrets: Api<Secret> = Api::namespaced(operator_client.clone(), ns);
        assert!(
            forbidden(secrets.list(&ListParams::default()).await),
            "{ns}"
        );
    }
    assert!(forbidden(
        Api::<Secret>::namespaced(operator_client.clone(), "team-a")
            .get("token")
            .await
    ));
    let queues: Api<arbiter_core::model::api::ClusterQueue> = Api::all(operator_client.clone());
    let mut queue = queues.get("research").await.unwrap();
    queue.metadata.managed_fields = None;
    assert!(forbidden(
        queues
            .replace("research", &PostParams::default(), &queue)
            .await
    ));
    assert!(forbidden(
        Api::<k8s_openapi::api::core::v1::Namespace>::all(operator_client)
            .delete("team-a", &Default::default())
            .await
    ));
}
