//! The operator when the API misbehaves, against a real kube-apiserver:
//! the API server killed and started again under it (every watch and
//! connection broken) — the watches come back and the next job is
//! admitted, nothing admitted twice; and writes refused for a while (a
//! ValidatingAdmissionPolicy denies releasing jobs) — the refusal is told
//! once (a `WriteRefused` Event, a `JobWriteRefused` Workload condition),
//! and the admission is written once the API accepts it, never lost.

mod support;

use std::time::{Duration, Instant};

use arbiter_core::model::api::Workload;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;

fn admission_record(job: &Job) -> Option<String> {
    job.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("arbiter.dev/admission"))
        .cloned()
}

#[tokio::test]
async fn the_operator_survives_an_api_server_restart() {
    let (mut cluster, admin) = full_cluster_with_setup().await;
    let _operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("before", 2))
        .await
        .unwrap();
    let before = wait_for(&jobs, "before", "admitted", released).await;
    let record = admission_record(&before).expect("an admission record");

    // Down for 2 s: every watch and connection of the operator breaks.
    cluster
        .restart_apiserver(Duration::from_secs(2))
        .await
        .unwrap();

    jobs.create(&PostParams::default(), &job("after", 2))
        .await
        .unwrap();
    wait_for(&jobs, "after", "admitted after the restart", released).await;
    // The job admitted before is as it was: not admitted again.
    let before = jobs.get("before").await.unwrap();
    assert!(released(&before));
    assert_eq!(admission_record(&before).as_deref(), Some(record.as_str()));
    // And the loop still frees and reuses quota.
    finish(&jobs, "before").await;
    jobs.create(&PostParams::default(), &job("big", 6))
        .await
        .unwrap();
    wait_for(&jobs, "big", "admitted once `before` finished", released).await;
}

const BLOCK_RELEASES: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: block-releases}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [batch], apiVersions: [v1], operations: [UPDATE], resources: [jobs]}
  validations:
  - expression: "!has(object.spec.suspend) || object.spec.suspend"
    message: "releasing jobs is blocked for this test"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: block-releases}
spec:
  policyName: block-releases
  validationActions: [Deny]
"#;

#[tokio::test]
async fn an_admission_refused_by_the_api_is_written_again_once_accepted() {
    let (_cluster, admin) = cluster_with_setup().await;
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    apply_yaml(&admin, BLOCK_RELEASES).await;
    // The policy is in force once releasing a job is refused.
    let mut probe = job("probe", 1);
    probe.metadata.labels = None;
    jobs.create(&PostParams::default(), &probe).await.unwrap();
    let started = Instant::now();
    loop {
        let release = jobs
            .patch(
                "probe",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"suspend": false}})),
            )
            .await;
        match release {
            Err(kube::Error::Api(status)) if status.message.contains("blocked") => break,
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => {
                jobs.patch(
                    "probe",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"suspend": true}})),
                )
                .await
                .unwrap();
                assert!(started.elapsed() < PATIENCE, "the policy never took effect");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    let _operator = start_operator(admin.clone());
    jobs.create(&PostParams::default(), &job("train", 2))
        .await
        .unwrap();
    // The scheduler admits it (its Workload says so) but the API refuses
    // the release: the job stays held, the operator keeps running.
    wait_condition(&admin, "job-train", "QuotaReserved", "True").await;
    stays_held(&jobs, "train").await;
    // The refusal is told once, on the job and in its Workload.
    let note = wait_event(&admin, "train", "WriteRefused").await;
    assert!(note.contains("releasing jobs is blocked"), "{note}");
    let (reason, message) = wait_condition(&admin, "job-train", "JobWriteRefused", "True").await;
    assert_eq!(reason, "WriteRefused");
    assert!(message.contains("could not admit"), "{message}");
    stays_held(&jobs, "train").await;
    let events: Api<Event> = Api::namespaced(admin.clone(), "team-a");
    let told: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("WriteRefused"))
        .collect();
    assert_eq!(told.len(), 1, "{told:#?}");
    assert!(told[0].series.is_none(), "told again: {told:#?}");

    // The API accepts releases again: the admission is written, once.
    let bindings = kube::discovery::pinned_kind(
        &admin,
        &kube::api::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
        ),
    )
    .await
    .unwrap()
    .0;
    let bindings: Api<DynamicObject> = Api::all_with(admin.clone(), &bindings);
    bindings
        .delete("block-releases", &DeleteParams::default())
        .await
        .unwrap();
    let train = wait_for(&jobs, "train", "released once the API accepts it", released).await;
    let selector = train
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.node_selector.clone())
        .unwrap_or_default();
    assert_eq!(
        selector.get("nvidia.com/gpu.product").map(String::as_str),
        Some("NVIDIA-A100-SXM4-40GB"),
        "{train:?}"
    );
    let tolerations = train
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    assert_eq!(tolerations.len(), 1, "injected once: {tolerations:?}");
    // Its Workload no longer says the write is refused.
    let workloads: Api<Workload> = Api::namespaced(admin.clone(), "team-a");
    let started = Instant::now();
    loop {
        let workload = workloads.get("job-train").await.unwrap();
        let conditions = workload.status.map(|s| s.conditions).unwrap_or_default();
        if !conditions.iter().any(|c| c.type_ == "JobWriteRefused") {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "JobWriteRefused stayed: {conditions:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
