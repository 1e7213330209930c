//! A manager's job and its copy on a worker, as MultiKueue's job adapters
//! make it: same kind, namespace and name, the manager's labels and
//! annotations plus the origin label and the manager job's uid, the spec
//! as admitted (with the flavor's node labels and tolerations the manager
//! injected) but without `managedBy` (the worker's own job controller runs
//! it), without the fields the worker's API server generates (a batch/v1
//! Job's `selector` and the template's generated labels), and not held.
//! The job kinds are a small table ([`Kinds`]): where each keeps
//! `managedBy`; how it is held and how it ends are its integration's
//! (`arbiter_core::jobs`), not a second copy. Pure: builds and compares
//! objects (as JSON, through `kube`'s `DynamicObject`).

use std::collections::BTreeMap;

use arbiter_core::jobs::{Integration, Integrations};
use arbiter_core::model::api::{MULTIKUEUE_MANAGED_BY, MULTIKUEUE_ORIGIN_LABEL};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::ResourceExt;
use serde_json::Value;

/// On a worker's copy: the uid of the manager's job it copies (Kueue's
/// `kueue.x-k8s.io/multikueue-origin-uid`).
pub const ORIGIN_UID_ANNOTATION: &str = "kueue.x-k8s.io/multikueue-origin-uid";

/// On the manager's job: the worker it runs on (the dispatcher's record,
/// written before the copy is made).
pub const CLUSTER_ANNOTATION: &str = "arbiter.dev/multikueue-cluster";

/// A job kind the dispatcher runs on workers.
pub struct Kind {
    /// Its API resource (group, version, kind, plural).
    pub resource: ApiResource,
    /// Where it keeps `managedBy` (JSON pointer).
    managed_by: &'static str,
    /// Fields the worker's API server or controller fills in, left out of
    /// the copy (JSON pointers; the integration's `generated` too).
    generated: Vec<String>,
    /// The known integrations (shared), its own among them: how it is
    /// held and how it ends.
    integrations: Integrations,
}

/// The job kinds MultiKueue dispatches that Arbiter knows: batch/v1 Job
/// (`spec.managedBy`) and the Kubeflow training-operator's v1 kinds
/// (`spec.runPolicy.managedBy`).
pub struct Kinds(Vec<Kind>);

/// (apiVersion, kind, plural, where `managedBy` is, fields generated beyond the integration's).
const TABLE: &[(&str, &str, &str, &str, &[&str])] = &[
    (
        "batch/v1",
        "Job",
        "jobs",
        "/spec/managedBy",
        &["/spec/selector", "/spec/manualSelector"],
    ),
    (
        "kubeflow.org/v1",
        "PyTorchJob",
        "pytorchjobs",
        "/spec/runPolicy/managedBy",
        &[],
    ),
    (
        "kubeflow.org/v1",
        "TFJob",
        "tfjobs",
        "/spec/runPolicy/managedBy",
        &[],
    ),
    (
        "kubeflow.org/v1",
        "XGBoostJob",
        "xgboostjobs",
        "/spec/runPolicy/managedBy",
        &[],
    ),
    (
        "kubeflow.org/v1",
        "PaddleJob",
        "paddlejobs",
        "/spec/runPolicy/managedBy",
        &[],
    ),
    (
        "kubeflow.org/v1",
        "JAXJob",
        "jaxjobs",
        "/spec/runPolicy/managedBy",
        &[],
    ),
    (
        "kubeflow.org/v1",
        "MPIJob",
        "mpijobs",
        "/spec/runPolicy/managedBy",
        &[],
    ),
];

impl Kinds {
    /// The kinds of the table, each with its built-in integration.
    pub fn builtin() -> Kinds {
        let integrations = Integrations::builtin();
        let mut kinds = Vec::new();
        for (api_version, kind, plural, managed_by, generated) in TABLE {
            // Every row is a built-in integration (a unit test proves it).
            let Some(integration) = integrations.find(api_version, kind) else {
                continue;
            };
            let (group, version) = match api_version.split_once('/') {
                Some((group, version)) => (group, version),
                None => ("", *api_version),
            };
            let gvk = GroupVersionKind::gvk(group, version, kind);
            let mut generated: Vec<String> = generated.iter().map(|p| p.to_string()).collect();
            generated.extend(integration.spec.generated.iter().cloned());
            kinds.push(Kind {
                resource: ApiResource::from_gvk_with_plural(&gvk, plural),
                managed_by,
                generated,
                integrations: integrations.clone(),
            });
        }
        Kinds(kinds)
    }

    /// The kinds, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = &Kind> {
        self.0.iter()
    }
}

impl Kind {
    /// Its `kind`, e.g. `PyTorchJob`.
    pub fn name(&self) -> &str {
        &self.resource.kind
    }

    /// The job's `managedBy`, if it has one.
    pub fn managed_by<'a>(&self, job: &'a DynamicObject) -> Option<&'a str> {
        job.data.pointer(self.managed_by).and_then(Value::as_str)
    }

    /// Where it keeps `managedBy`, as people write it (`spec.managedBy`).
    pub fn managed_by_field(&self) -> String {
        self.managed_by.trim_start_matches('/').replace('/', ".")
    }

    /// Its integration (every row of the table has one).
    fn integration(&self) -> Option<&Integration> {
        self.integrations
            .find(&self.resource.api_version, &self.resource.kind)
    }

    /// Is `job` one the dispatcher runs elsewhere (`managedBy`
    /// MultiKueue), and not being deleted (a deleted job's copies go,
    /// whatever its finalizers)?
    pub fn is_dispatched(&self, job: &DynamicObject) -> bool {
        self.managed_by(job) == Some(MULTIKUEUE_MANAGED_BY)
            && job.metadata.deletion_timestamp.is_none()
    }

    /// Is it held (its integration's hold field)?
    pub fn is_suspended(&self, job: &DynamicObject) -> bool {
        self.integration()
            .is_some_and(|i| i.is_held(&as_value(job)))
    }

    /// Has it ended, as its integration reads it (an expression that fails
    /// on it: not ended)?
    pub fn is_finished(&self, job: &DynamicObject) -> bool {
        self.integration()
            .is_some_and(|i| matches!(i.ended(&as_value(job)), Ok(Some(_))))
    }

    /// The copy of `local` to create on a worker, labelled with `origin`.
    pub fn copy_of(&self, local: &DynamicObject, origin: &str) -> DynamicObject {
        let mut labels = local.labels().clone();
        labels.insert(MULTIKUEUE_ORIGIN_LABEL.to_string(), origin.to_string());
        let mut annotations: BTreeMap<String, String> = local.annotations().clone();
        annotations.remove(CLUSTER_ANNOTATION);
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        if let Some(uid) = &local.metadata.uid {
            annotations.insert(ORIGIN_UID_ANNOTATION.to_string(), uid.clone());
        }
        let mut object = serde_json::json!({
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": ObjectMeta {
                name: local.metadata.name.clone(),
                namespace: local.metadata.namespace.clone(),
                labels: Some(labels),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            "spec": local.data.get("spec").cloned().unwrap_or_else(|| serde_json::json!({})),
        });
        remove(&mut object, self.managed_by);
        for pointer in &self.generated {
            remove(&mut object, pointer);
        }
        // Released: the hold's `released` value (or none), whatever the manager's says.
        if let Some(integration) = self.integration() {
            let _ = integration.set_held(&mut object, true);
            let _ = integration.set_held(&mut object, false);
        }
        serde_json::from_value(object).unwrap_or_else(|_| DynamicObject {
            types: None,
            metadata: ObjectMeta::default(),
            data: Value::Null,
        })
    }
}

/// The whole object as JSON, as the integrations read it.
fn as_value(job: &DynamicObject) -> Value {
    serde_json::to_value(job).unwrap_or(Value::Null)
}

/// Takes the field at `pointer` out of `object`, if it is there.
fn remove(object: &mut Value, pointer: &str) {
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return;
    };
    let key = key.replace("~1", "/").replace("~0", "~");
    if let Some(Value::Object(fields)) = object.pointer_mut(parent) {
        fields.remove(&key);
    }
}

/// The worker recorded on the manager's job.
pub fn assigned(job: &DynamicObject) -> Option<String> {
    job.annotations().get(CLUSTER_ANNOTATION).cloned()
}

/// Is `copy` (found on a worker by the origin label) a copy of `local`?
pub fn copies(copy: &DynamicObject, local: &DynamicObject) -> bool {
    copy.annotations().get(ORIGIN_UID_ANNOTATION) == local.metadata.uid.as_ref()
}

/// The merge patch giving `local` the worker's status of the job, if that
/// differs from its own (MultiKueue copies the whole status of an
/// unsuspended job, for every kind): every field of the copy's status but
/// `startTime` once `local` has one, `null` for a field only `local` has,
/// and `local`'s resourceVersion as the precondition.
pub fn synced(local: &DynamicObject, copy: &DynamicObject) -> Option<Value> {
    let status_of = |job: &DynamicObject| match job.data.get("status") {
        Some(Value::Object(fields)) => fields.clone(),
        _ => serde_json::Map::new(),
    };
    let mut status = status_of(copy);
    let own = status_of(local);
    // Kubernetes keeps an unsuspended job's startTime once set: a job moved
    // to another worker keeps the time it first started.
    if let Some(start) = own.get("startTime").filter(|t| !t.is_null()) {
        status.insert("startTime".to_string(), start.clone());
    }
    if own == status {
        return None;
    }
    let mut fields = status;
    for key in own.keys() {
        fields.entry(key.clone()).or_insert(Value::Null);
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

    fn kind(name: &str) -> Kind {
        let kinds = Kinds::builtin();
        let found = kinds.0.into_iter().find(|k| k.name() == name);
        found.unwrap()
    }

    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    fn local() -> DynamicObject {
        object(json!({
            "apiVersion": "batch/v1", "kind": "Job",
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
    }

    fn pytorch_job() -> DynamicObject {
        let replica = |count: u32| {
            json!({
                "replicas": count, "restartPolicy": "OnFailure",
                "template": {"spec": {"nodeSelector": {"gpu": "a100"},
                    "containers": [{"name": "pytorch", "image": "i",
                                    "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}
            })
        };
        object(json!({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "bert", "namespace": "team-a", "uid": "p-1",
                         "resourceVersion": "9",
                         "labels": {"kueue.x-k8s.io/queue-name": "research"},
                         "annotations": {"arbiter.dev/multikueue-cluster": "w1"}},
            "spec": {
                "runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue", "suspend": false,
                              "cleanPodPolicy": "None"},
                "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)}
            },
            "status": {"conditions": [{"type": "Created", "status": "True", "reason": "PyTorchJobCreated"}]}
        }))
    }

    #[test]
    fn every_row_of_the_table_is_a_known_integration() {
        let names: Vec<String> = Kinds::builtin()
            .iter()
            .map(|k| k.name().to_string())
            .collect();
        assert_eq!(names.len(), TABLE.len(), "{names:?}");
    }

    #[test]
    fn the_copy_runs_under_the_workers_job_controller_and_names_its_origin() {
        let jobs = kind("Job");
        let local = local();
        assert!(
            jobs.is_dispatched(&local) && !jobs.is_suspended(&local) && !jobs.is_finished(&local)
        );
        let copy = jobs.copy_of(&local, "manager-1");
        let value = serde_json::to_value(&copy).unwrap();
        assert_eq!(value["apiVersion"], "batch/v1");
        assert_eq!(value["kind"], "Job");
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
    fn a_pytorchjob_copy_has_no_managed_by_is_released_and_keeps_its_replicas() {
        let pytorch = kind("PyTorchJob");
        let mut local = pytorch_job();
        assert!(pytorch.is_dispatched(&local));
        assert!(!pytorch.is_suspended(&local) && !pytorch.is_finished(&local));
        assert!(
            !kind("Job").is_dispatched(&local),
            "a Job's managedBy is elsewhere"
        );
        local.data["spec"]["runPolicy"]["suspend"] = json!(true);
        assert!(pytorch.is_suspended(&local));
        let copy = pytorch.copy_of(&local, "m");
        let value = serde_json::to_value(&copy).unwrap();
        assert_eq!(value["apiVersion"], "kubeflow.org/v1");
        assert_eq!(value["kind"], "PyTorchJob");
        assert_eq!(
            value["spec"]["runPolicy"],
            json!({"suspend": false, "cleanPodPolicy": "None"})
        );
        assert_eq!(
            value["spec"]["pytorchReplicaSpecs"],
            local.data["spec"]["pytorchReplicaSpecs"]
        );
        assert_eq!(
            value["metadata"]["annotations"],
            json!({ORIGIN_UID_ANNOTATION: "p-1"})
        );
        assert_eq!(value["metadata"]["labels"][MULTIKUEUE_ORIGIN_LABEL], "m");
        assert_eq!(value.get("status"), None);
        assert!(copies(&copy, &local));
        assert!(!pytorch.is_dispatched(&copy));
    }

    #[test]
    fn a_pytorchjobs_status_comes_back_whole_and_it_then_reads_finished() {
        let pytorch = kind("PyTorchJob");
        let local = pytorch_job();
        let mut copy = pytorch.copy_of(&local, "m");
        copy.data["status"] = local.data["status"].clone();
        assert_eq!(synced(&local, &copy), None);
        let status = json!({
            "conditions": [
                {"type": "Created", "status": "True", "reason": "PyTorchJobCreated"},
                {"type": "Running", "status": "False", "reason": "PyTorchJobRunning"},
                {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}],
            "replicaStatuses": {"Master": {"succeeded": 1}, "Worker": {"succeeded": 2}},
            "startTime": "2026-01-01T00:00:00Z",
            "completionTime": "2026-01-01T00:01:00Z"
        });
        copy.data["status"] = status.clone();
        assert!(pytorch.is_finished(&copy));
        let patch = synced(&local, &copy).unwrap();
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "9"}, "status": status})
        );
        let mut after = local.clone();
        after.data["status"] = patch["status"].clone();
        assert!(pytorch.is_finished(&after));
        assert_eq!(synced(&after, &copy), None);
    }

    #[test]
    fn a_moved_job_keeps_the_time_it_first_started() {
        let jobs = kind("Job");
        let mut local = local();
        local.data["status"] = json!({"active": 1, "startTime": "2026-01-01T00:00:00Z"});
        let mut copy = jobs.copy_of(&local, "m");
        copy.data["status"] = json!({"active": 1, "startTime": "2026-01-01T00:05:00Z"});
        assert_eq!(synced(&local, &copy), None);
        copy.data["status"] = json!({"active": 1, "ready": 1, "startTime": "2026-01-01T00:05:00Z"});
        let patch = synced(&local, &copy).unwrap();
        assert_eq!(patch["status"]["startTime"], "2026-01-01T00:00:00Z");
        assert_eq!(patch["status"]["ready"], 1);
        local.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(
            !jobs.is_dispatched(&local),
            "a job being deleted is not dispatched"
        );
    }

    #[test]
    fn the_workers_status_is_copied_back_only_when_it_differs() {
        let jobs = kind("Job");
        let local = local();
        let mut copy = jobs.copy_of(&local, "m");
        copy.data["status"] = local.data["status"].clone();
        assert_eq!(synced(&local, &copy), None);
        copy.data["status"] = json!({
            "succeeded": 1,
            "conditions": [{"type": "Complete", "status": "True"}]
        });
        assert!(jobs.is_finished(&copy));
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
