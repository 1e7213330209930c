//! `deploy/rbac.yaml` is enough and no more: the operator, running under
//! the real token of the ServiceAccount it installs (TokenRequest API),
//! holds, admits and records Workloads and Events as in `admission.rs`,
//! serves its webhooks (its certificate Secret made in its namespace and
//! watched by name — deleted, it is made again — the CA written into the
//! webhook configurations), holds the leader Lease,
//! loads a platform bundle ConfigMap and writes its status annotation and
//! Events, and is refused what it has no business doing — reading Secrets
//! outside its namespace (or other Secrets in it), changing the queue
//! configuration, creating or deleting ConfigMaps.

mod support;

use std::time::{Duration, Instant};

use arbiter_operator::leader::{Ended, LeaseOptions};
use arbiter_operator::webhook::Rotation;
use arbiter_operator::Operator;
use arbiter_testcluster::workspace_root;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use support::*;

fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(status)) if status.is_forbidden())
}

#[tokio::test]
async fn the_operator_does_its_job_under_deploys_service_account_and_no_more() {
    let (cluster, admin) = full_cluster_with_setup().await;
    let rbac = std::fs::read_to_string(workspace_root().join("deploy/rbac.yaml")).unwrap();
    apply_yaml(&admin, &rbac).await;
    let token = cluster
        .service_account_token("arbiter-system", "arbiter")
        .await
        .unwrap();
    let operator_client = cluster.client_with_token(&token).await.unwrap();

    // A platform bundle denying jobs over 6 GPUs, in the operator's namespace.
    let bundle = r#"apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {name: platform, version: "1"}
spec:
  policies:
  - {name: at-most-6-gpus, hook: admission, cel: {expression: "workload.gpus <= 6"}}
"#;
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "platform", "namespace": PLATFORM_NAMESPACE,
                     "labels": {"arbiter.dev/policy-bundle": "true"}},
        "data": {"bundle.yaml": bundle}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(admin.clone(), PLATFORM_NAMESPACE)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

    // Its job: hold, admit, Workloads, Events, bundles.
    let operator = start_operator_with_bundles(operator_client.clone(), Vec::new(), None);
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("too-big", 7))
        .await
        .unwrap();
    let note = wait_event(&admin, "too-big", "Denied").await;
    assert!(note.contains("at-most-6-gpus"), "{note}");
    wait_event_in(
        &admin,
        PLATFORM_NAMESPACE,
        "platform",
        "BundleLoaded",
        |_| true,
    )
    .await;
    wait_bundle_status(&admin, PLATFORM_NAMESPACE, "platform", |s| {
        s.starts_with("loaded platform@1 ")
    })
    .await;
    jobs.create(&PostParams::default(), &job("a", 4))
        .await
        .unwrap();
    jobs.create(&PostParams::default(), &job("b", 6))
        .await
        .unwrap();
    wait_for(&jobs, "a", "admission", released).await;
    wait_condition(&admin, "job-a", "Admitted", "True").await;
    wait_event(&admin, "a", "Admitted").await;
    wait_condition(&admin, "job-b", "QuotaReserved", "False").await;
    stays_held(&jobs, "b").await;
    finish(&jobs, "a").await;
    wait_for(&jobs, "b", "admission after a finished", released).await;
    stays_held(&jobs, "too-big").await;
    operator.abort();

    // Its webhooks: the certificate made and kept in its namespace's
    // Secret, the CA written into the configurations, jobs held; and its
    // loop, only while it holds the leader Lease.
    let lease = LeaseOptions {
        namespace: "arbiter-system".into(),
        name: "arbiter-leader".into(),
        identity: "rbac-test".into(),
        duration_seconds: 4,
        grace_seconds: 1,
    };
    let operator = Operator::builder(operator_client.clone())
        .webhooks(
            LOOPBACK,
            webhook_options(Rotation::default(), Some("arbiter")),
        )
        .leader_election(lease)
        .start()
        .await
        .unwrap();
    let served = operator
        .webhook()
        .expect("the operator serves its webhooks");
    let (mutating, validating) = webhook_configurations(served.address.port(), None);
    apply_webhooks(&admin, &mutating, &validating).await;
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    let started = Instant::now();
    while configurations
        .get("arbiter")
        .await
        .unwrap()
        .webhooks
        .unwrap()[0]
        .client_config
        .ca_bundle
        .is_none()
    {
        assert!(
            started.elapsed() < PATIENCE,
            "the operator could not write caBundle"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut running = serde_json::to_value(job("c", 1)).unwrap();
    running["spec"]["suspend"] = json!(false);
    let created = jobs
        .create(
            &PostParams::default(),
            &serde_json::from_value(running).unwrap(),
        )
        .await
        .unwrap();
    assert!(suspended(&created), "the webhook held it");
    // Its certificate's Secret watched under that RBAC (list and watch by
    // name): deleted, it is made again, with a new CA, long before the
    // hourly check could have noticed.
    let own: Api<Secret> = Api::namespaced(admin.clone(), "arbiter-system");
    let ca_of = |secret: Option<Secret>| {
        secret
            .and_then(|s| s.data)
            .and_then(|d| d.get("ca.crt").cloned())
    };
    let before = ca_of(own.get_opt("arbiter-webhook-tls").await.unwrap());
    assert!(before.is_some(), "the operator made no certificate Secret");
    own.delete("arbiter-webhook-tls", &Default::default())
        .await
        .unwrap();
    let started = Instant::now();
    loop {
        let now = ca_of(own.get_opt("arbiter-webhook-tls").await.unwrap());
        if now.is_some() && now != before {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the deleted certificate Secret was not made again (can the operator watch it?)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Its Lease: taken, and released when it stops.
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "arbiter-system");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let watcher = tokio::spawn(async move {
        let started = Instant::now();
        loop {
            let holder = leases
                .get_opt("arbiter-leader")
                .await
                .unwrap()
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity);
            if holder.as_deref() == Some("rbac-test") {
                let _ = stop.send(());
                return true;
            }
            if started.elapsed() > PATIENCE {
                let _ = stop.send(());
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let ended = operator
        .run_until(async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    assert_eq!(ended, Ended::Shutdown);
    assert!(watcher.await.unwrap(), "the operator never held the Lease");

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
    // In its own namespace, only its certificate's Secret.
    let other: Secret = serde_json::from_value(json!({
        "metadata": {"name": "other", "namespace": "arbiter-system"},
        "stringData": {"key": "value"}
    }))
    .unwrap();
    Api::<Secret>::namespaced(admin.clone(), "arbiter-system")
        .create(&PostParams::default(), &other)
        .await
        .unwrap();
    assert!(forbidden(
        Api::<Secret>::namespaced(operator_client.clone(), "arbiter-system")
            .get("other")
            .await
    ));
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
    let configmaps: Api<ConfigMap> = Api::namespaced(operator_client.clone(), "team-a");
    let mut other = cm.clone();
    other.metadata.namespace = Some("team-a".into());
    assert!(forbidden(
        configmaps.create(&PostParams::default(), &other).await
    ));
    assert!(forbidden(
        Api::<ConfigMap>::namespaced(operator_client.clone(), PLATFORM_NAMESPACE)
            .delete("platform", &Default::default())
            .await
    ));
    assert!(forbidden(
        Api::<k8s_openapi::api::core::v1::Namespace>::all(operator_client)
            .delete("team-a", &Default::default())
            .await
    ));
}
