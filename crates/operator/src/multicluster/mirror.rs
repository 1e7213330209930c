//! A manager's job and its copy on a worker, as MultiKueue's batch/v1 Job
//! adapter makes it: same namespace and name, the manager's labels and
//! annotations plus the origin label and the manager job's uid, the spec
//! as admitted (with the flavor's node labels and tolerations the manager
//! injected) but without `managedBy` (the worker's own Job controller runs
//! it), its `selector` and the template's generated labels (the worker's
//! API server makes its own), and not suspended. Pure: builds and compares
//! objects.

use std::collections::BTreeMap;

use arbiter_core::model::api::{MULTIKUEUE_MANAGED_BY, MULTIKUEUE_ORIGIN_LABEL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

/// On a worker's copy: the uid of the manager's job it copies (Kueue's
/// `kueue.x-k8s.io/multikueue-origin-uid`).
pub const ORIGIN_UID_ANNOTATION: &str = "kueue.x-k8s.io/multikueue-origin-uid";

/// On the manager's job: the worker it runs on (the dispatcher's record,
/// written before the copy is made).
pub const CLUSTER_ANNOTATION: &str = "arbiter.dev/multikueue-cluster";

/// Template labels the API server generates for a Job's selector; the
/// worker's makes its own (Kueue's `cleanLabels`).
const GENERATED_LABELS: [&str; 4] = [
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
];

/// Is `job` one the dispatcher runs elsewhere (`spec.managedBy`), and not
/// being deleted (a deleted job's copies go, whatever its finalizers)?
pub fn is_dispatched(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.managed_by.as_deref()) == Some(MULTIKUEUE_MANAGED_BY)
        && job.metadata.deletion_timestamp.is_none()
}

/// Is it held (`spec.suspend`)?
pub fn is_suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

/// Has it ended (a `Complete` or `Failed` condition that is true)?
pub fn is_finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

/// The worker recorded on the manager's job.
pub fn assigned(job: &Job) -> Option<String> {
    job.annotations().get(CLUSTER_ANNOTATION).cloned()
}

/// Is `copy` (found on a worker by the origin label) a copy of `local`?
pub fn copies(copy: &Job, local: &Job) -> bool {
    copy.annotations().get(ORIGIN_UID_ANNOTATION) == local.metadata.uid.as_ref()
}

/// The copy of `local` to create on a worker, labelled with `origin`.
pub fn copy_of(local: &Job, origin: &str) -> Job {
    let mut labels = local.labels().clone();
    labels.insert(MULTIKUEUE_ORIGIN_LABEL.to_string(), origin.to_string());
    let mut annotations: BTreeMap<String, String> = local.annotations().clone();
    annotations.remove(CLUSTER_ANNOTATION);
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    if let Some(uid) = &local.metadata.uid {
        annotations.insert(ORIGIN_UID_ANNOTATION.to_string(), uid.clone());
    }
    let mut spec = local.spec.clone().unwrap_or_default();
    spec.managed_by = None;
    spec.selector = None;
    spec.manual_selector = None;
    spec.suspend = Some(false);
    if let Some(template_labels) = spec
        .template
        .metadata
        .as_mut()
        .and_then(|m| m.labels.as_mut())
    {
        for label in GENERATED_LABELS {
            template_labels.remove(label);
        }
    }
    Job {
        metadata: ObjectMeta {
            name: local.metadata.name.clone(),
            namespace: local.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The merge patch giving `local` the worker's status of the job, if that
/// differs from its own (MultiKueue copies the whole status of an
/// unsuspended job): every field of the copy's status but `startTime` once
/// `local` has one, `null` for a field only `local` has, and `local`'s
/// resourceVersion as the precondition.
pub fn synced(local: &Job, copy: &Job) -> Option<serde_json::Value> {
    let mut status = copy.status.clone().unwrap_or_default();
    let own = local.status.clone().unwrap_or_default();
    // Kubernetes keeps an unsuspended job's startTime once set: a job moved
    // to another worker keeps the time it first started.
    if own.start_time.is_some() {
        status.start_time = own.start_time.clone();
    }
    if own == status {
        return None;
    }
    let mut fields = match serde_json::to_value(&status) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    };
    if let Ok(serde_json::Value::Object(own)) = serde_json::to_value(&own) {
        for key in own.keys() {
            fields.entry(key.clone()).or_insert(serde_json::Value::Null);
        }
    }
    Some(serde_json::json!({
        "metadata": {"resourceVersion": local.metadata.resource_version},
        "status": fields,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn local() -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "train", "namespace": "team-a", "uid": "u-1",
                         "resourceVersion": "7",
                         "labels": {"kueue.x-k8s.io/queue-name": "research"},
                         "annotations": {"arbiter.dev/multikueue-cluster": "w2", "note": "x"}},
            "spec": {
                "managedBy": "kueue.x-k8s.io/multikueue",
                "suspend": false,
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}},
                "template": {
                    "metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u-1",
                                            "batch.kubernetes.io/job-name": "train",
                                            "app": "train"}},
                    "spec": {"restartPolicy": "Never", "nodeSelector": {"gpu": "a100"},
                             "containers": [{"name": "c", "image": "i"}]}}
            },
            "status": {"active": 1}
        }))
        .unwrap()
    }

    #[test]
    fn the_copy_runs_under_the_workers_job_controller_and_names_its_origin() {
        let local = local();
        assert!(is_dispatched(&local) && !is_suspended(&local) && !is_finished(&local));
        let copy = copy_of(&local, "manager-1");
        let value = serde_json::to_value(&copy).unwrap();
        assert_eq!(value["metadata"]["name"], "train");
        assert_eq!(value["metadata"]["namespace"], "team-a");
        assert_eq!(
            value["metadata"]["labels"][MULTIKUEUE_ORIGIN_LABEL],
            "manager-1"
        );
        assert_eq!(
            value["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
            "research"
        );
        assert_eq!(
            value["metadata"]["annotations"],
            json!({"note": "x", ORIGIN_UID_ANNOTATION: "u-1"})
        );
        assert_eq!(value["metadata"].get("resourceVersion"), None);
        assert_eq!(value["metadata"].get("uid"), None);
        assert_eq!(value["spec"].get("managedBy"), None);
        assert_eq!(value["spec"].get("selector"), None);
        assert_eq!(value["spec"]["suspend"], false);
        assert_eq!(
            value["spec"]["template"]["metadata"]["labels"],
            json!({"app": "train"})
        );
        assert_eq!(
            value["spec"]["template"]["spec"]["nodeSelector"],
            json!({"gpu": "a100"})
        );
        assert_eq!(value.get("status"), None);
        assert!(copies(&copy, &local));
        let mut other = local.clone();
        other.metadata.uid = Some("u-2".into());
        assert!(!copies(&copy, &other));
    }

    #[test]
    fn a_moved_job_keeps_the_time_it_first_started() {
        let mut local = local();
        local.status =
            serde_json::from_value(json!({"active": 1, "startTime": "2026-01-01T00:00:00Z"}))
                .unwrap();
        let mut copy = copy_of(&local, "m");
        copy.status =
            serde_json::from_value(json!({"active": 1, "startTime": "2026-01-01T00:05:00Z"}))
                .unwrap();
        assert_eq!(synced(&local, &copy), None);
        copy.status = serde_json::from_value(
            json!({"active": 1, "ready": 1, "startTime": "2026-01-01T00:05:00Z"}),
        )
        .unwrap();
        let patch = synced(&local, &copy).unwrap();
        assert_eq!(patch["status"]["startTime"], "2026-01-01T00:00:00Z");
        assert_eq!(patch["status"]["ready"], 1);
        local.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(
            !is_dispatched(&local),
            "a job being deleted is not dispatched"
        );
    }

    #[test]
    fn the_workers_status_is_copied_back_only_when_it_differs() {
        let local = local();
        let mut copy = copy_of(&local, "m");
        copy.status = local.status.clone();
        assert_eq!(synced(&local, &copy), None);
        copy.status = serde_json::from_value(json!({
            "succeeded": 1,
            "conditions": [{"type": "Complete", "status": "True"}]
        }))
        .unwrap();
        let patch = synced(&local, &copy).unwrap();
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "7"}, "status": {
                "succeeded": 1,
                "active": null,
                "conditions": [{"type": "Complete", "status": "True"}],
            }})
        );
    }
}
