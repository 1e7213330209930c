//! Reading and writing job objects: its uid, creation time and template
//! paths (whether it ended is its integration's `ended`), and the writes
//! of one step of a job's convergence (`driver::converge`): modify-replace
//! from a copy with its `resourceVersion`, a status merge patch carrying
//! it, or delete-with-uid-precondition and create. None reads the job: a
//! conflict means the copy was stale, and the reflector's watch brings the
//! newer one. Failures are typed ([`WriteError`]).

use arbiter_core::jobs::{Integration, JobInfo};
use arbiter_core::model::Millis;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use serde_json::Value;

use crate::inject::InjectError;

/// Does the job name a queue (Arbiter's or Kueue's label)?
pub fn queue_label(object: &Value) -> bool {
    let labels = object.pointer("/metadata/labels");
    arbiter_core::jobs::QUEUE_NAME_LABELS
        .iter()
        .any(|l| labels.and_then(|m| m.get(*l)).is_some())
}

/// The job's `metadata.creationTimestamp`, in milliseconds since the epoch.
pub fn created_at(object: &Value) -> Option<Millis> {
    let text = object.pointer("/metadata/creationTimestamp")?.as_str()?;
    let at: k8s_openapi::jiff::Timestamp = text.parse().ok()?;
    Some(Millis(at.as_millisecond()))
}

pub fn uid(object: &Value) -> String {
    object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

pub fn template_paths(info: &JobInfo) -> Vec<Option<String>> {
    info.pod_sets
        .iter()
        .map(|p| p.template_path.clone())
        .collect()
}

/// Why a job write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The copy written from is not the object's latest version (409): the
    /// reflector's watch brings the newer one, and the write is made from it.
    #[error("the job changed since it was read ({0})")]
    Conflict(String),
    /// Refused for good (400, 403, 422, or a change the object cannot
    /// take): not tried again until the job or the decision changes.
    #[error("{0}")]
    Refused(String),
    /// Worth trying again after a backoff (the API unreachable, overloaded,
    /// timing out).
    #[error("{0}")]
    Transient(String),
}

impl From<kube::Error> for WriteError {
    fn from(error: kube::Error) -> WriteError {
        match error {
            kube::Error::Api(status) if status.is_conflict() => {
                WriteError::Conflict(status.message.clone())
            }
            kube::Error::Api(status) if matches!(status.code, 400 | 403 | 405 | 422) => {
                WriteError::Refused(format!("{} ({})", status.message, status.code))
            }
            other => WriteError::Transient(other.to_string()),
        }
    }
}

fn is_gone(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_not_found())
}

/// Modify-replace of `current` (the reflector's copy, or the API's answer
/// to the write before) with its `resourceVersion`: the write is refused
/// with a conflict if the object changed since. Returns the object as it
/// then is; `None`: the job is gone (its withdrawal follows). A change
/// that changes nothing writes nothing.
pub async fn replace(
    api: &Api<DynamicObject>,
    current: &DynamicObject,
    integration: &Integration,
    change: impl Fn(&mut Value, &Integration) -> Result<(), InjectError>,
) -> Result<Option<DynamicObject>, WriteError> {
    let name = current.metadata.name.as_deref().unwrap_or_default();
    let mut value =
        serde_json::to_value(current).map_err(|e| WriteError::Refused(e.to_string()))?;
    let before = value.clone();
    change(&mut value, integration).map_err(|e| WriteError::Refused(e.to_string()))?;
    if value == before {
        return Ok(Some(current.clone()));
    }
    let mut object: DynamicObject =
        serde_json::from_value(value).map_err(|e| WriteError::Refused(e.to_string()))?;
    // Sent without them, the API server keeps the live object's managed
    // fields (and has less to read).
    object.metadata.managed_fields = None;
    match api.replace(name, &PostParams::default(), &object).await {
        Ok(now) => Ok(Some(now)),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Whether `job` has one of its integration's `hold.clearStatus` fields set.
pub fn status_set(job: &Value, integration: &Integration) -> bool {
    integration
        .spec
        .hold
        .clear_status
        .iter()
        .any(|p| job.pointer(p).is_some_and(|v| !v.is_null()))
}

/// Clears the integration's `hold.clearStatus` fields of `current` (a held
/// `batch/v1 Job`'s `status.startTime`, so its template may change) with a
/// merge patch of its status subresource that carries the object's
/// `resourceVersion` (a conflict if it changed since). Returns the job as
/// it then is; `None`: gone.
pub async fn clear_status(
    api: &Api<DynamicObject>,
    current: &DynamicObject,
    integration: &Integration,
) -> Result<Option<DynamicObject>, WriteError> {
    let name = current.metadata.name.as_deref().unwrap_or_default();
    let mut patch = serde_json::json!({
        "metadata": {"resourceVersion": current.metadata.resource_version},
    });
    for pointer in &integration.spec.hold.clear_status {
        let mut at = &mut patch;
        let segments: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
        for (i, segment) in segments.iter().enumerate() {
            let segment = segment.replace("~1", "/").replace("~0", "~");
            let Value::Object(map) = at else { break };
            if i + 1 == segments.len() {
                map.insert(segment, Value::Null);
                break;
            }
            at = map
                .entry(segment)
                .or_insert_with(|| Value::Object(Default::default()));
        }
    }
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(now) => Ok(Some(now)),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Runs failed job `name` (uid `replaces`) again by creating `fresh`
/// (`inject::recreated`) in its place: the failed one deleted first —
/// only while it is that one (a uid precondition), its pods and Workload
/// going with it (background propagation) —, then `fresh` created. Made
/// again after a partial failure, it finishes the work: a job already
/// created anew (it names `replaces`) is taken as done. Returns the job
/// created, when the API answered with it.
pub async fn recreate(
    api: &Api<DynamicObject>,
    name: &str,
    fresh: &Value,
    replaces: &str,
) -> Result<Option<DynamicObject>, WriteError> {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: Some(replaces.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {}
        // Gone already, or another object under the name (the one created
        // anew, when an earlier attempt got that far).
        Err(kube::Error::Api(status)) if status.is_not_found() || status.is_conflict() => {}
        Err(e) => {
            return Err(match WriteError::from(e) {
                WriteError::Refused(m) => {
                    WriteError::Refused(format!("deleting the failed job to run it again: {m}"))
                }
                other => other,
            })
        }
    }
    let object: DynamicObject =
        serde_json::from_value(fresh.clone()).map_err(|e| WriteError::Refused(e.to_string()))?;
    match api.create(&PostParams::default(), &object).await {
        Ok(created) => Ok(Some(created)),
        // Already exists: the one created anew (the reflector shows it
        // soon), or the failed one still being deleted (its finalizers):
        // made again when the watch shows either.
        Err(kube::Error::Api(status)) if status.code == 409 => Err(WriteError::Conflict(
            "the failed job is still being deleted, or its replacement is not seen yet".into(),
        )),
        Err(e) => Err(match WriteError::from(e) {
            WriteError::Refused(m) => {
                WriteError::Refused(format!("creating the job anew to run it again: {m}"))
            }
            other => other,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn creation_times_read_as_epoch_milliseconds() {
        let job = json!({"metadata": {"creationTimestamp": "2026-12-01T00:00:01Z"}});
        assert_eq!(created_at(&job), Some(Millis(1_796_083_201_000)));
        assert_eq!(
            created_at(&json!({"metadata": {"creationTimestamp": "yesterday"}})),
            None
        );
    }
}
