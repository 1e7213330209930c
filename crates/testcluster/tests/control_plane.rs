//! The harness itself, against the real binaries: the API server comes up
//! with RBAC and token authentication in force, ServiceAccount tokens are
//! real, `batch/v1 Job.spec.suspend` survives (it is pruned by servers
//! before v1.21), and CRDs with validation rules install — the things the
//! operator's end-to-end tests rely on.

use std::path::PathBuf;

use arbiter_testcluster::{crd_documents, workspace_root, TestCluster};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ListParams, PostParams};

fn namespace(name: &str) -> Namespace {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap()
}

fn forbidden(result: Result<impl std::fmt::Debug, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(status)) if status.is_forbidden())
}

#[tokio::test]
async fn api_server_enforces_rbac_and_serves_current_apis() {
    let cluster = TestCluster::start()
        .await
        .unwrap_or_else(|e| panic!("the test cluster did not start: {e}"));
    let admin = cluster.admin_client().await.unwrap();

    // The server is a current one (kube 5 supports v1.33 and later).
    let version = admin.apiserver_version().await.unwrap();
    let minor: u32 = version.minor.trim_end_matches('+').parse().unwrap();
    assert!(version.major == "1" && minor >= 33, "{version:?}");

    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces
        .create(&PostParams::default(), &namespace("team-a"))
        .await
        .unwrap();

    // RBAC is real: a user with no bindings can read nothing.
    let alice = cluster.client_for("alice").await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(alice.clone(), "kube-system");
    assert!(forbidden(secrets.list(&ListParams::default()).await));
    let jobs: Api<Job> = Api::namespaced(alice, "team-a");
    assert!(forbidden(jobs.list(&ListParams::default()).await));

    // ServiceAccount tokens come from the TokenRequest API and authenticate
    // as the account.
    let token = cluster
        .service_account_token("team-a", "robot")
        .await
        .unwrap();
    let robot = cluster.client_with_token(&token).await.unwrap();
    let review: Api<SelfSubjectReview> = Api::all(robot.clone());
    let me = review
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = me.status.and_then(|s| s.user_info).and_then(|u| u.username);
    assert_eq!(user.as_deref(), Some("system:serviceaccount:team-a:robot"));
    let robot_jobs: Api<Job> = Api::namespaced(robot, "team-a");
    assert!(forbidden(robot_jobs.list(&ListParams::default()).await));

    // A suspended Job stays suspended as written.
    let job: Job = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "held", "namespace": "team-a"},
        "spec": {
            "suspend": true,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}]
            }}
        }
    }))
    .unwrap();
    let admin_jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    let created = admin_jobs
        .create(&PostParams::default(), &job)
        .await
        .unwrap();
    assert_eq!(created.spec.and_then(|s| s.suspend), Some(true));

    // Arbiter's CRDs (deploy/crds.yaml) install and are established.
    // The six of docs/design.md §2, Topology, and MultiKueue's three.
    let crds = crd_documents(&workspace_root().join("deploy/crds.yaml")).unwrap();
    assert_eq!(crds.len(), 10);
    cluster.install_crds(&crds).await.unwrap();

    // So do the upstream Kubeflow CRDs, which carry validation rules, when
    // the shared test data is beside the repository.
    let shared = std::env::var_os("ARBITER_SHARED_TESTDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/data"));
    let dir = shared.join("crds");
    if dir.is_dir() {
        let mut kubeflow = Vec::new();
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for file in files {
            kubeflow.extend(crd_documents(&file).unwrap());
        }
        assert!(
            kubeflow.len() >= 7,
            "{} CRDs in {}",
            kubeflow.len(),
            dir.display()
        );
        cluster.install_crds(&kubeflow).await.unwrap();
    } else {
        eprintln!(
            "note: {} not found; the Kubeflow CRDs were not installed (set ARBITER_SHARED_TESTDATA)",
            dir.display()
        );
    }
}
