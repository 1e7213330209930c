//! Reading and writing job objects: its uid, creation time and template
//! paths (whether it ended is its integration's `ended`), and the one way
//! a job is written — modify-replace
//! with the object's `resourceVersion` (starting from the copy the
//! reflector holds), read fresh and retried on a conflict — so a write
//! lost or repeated changes nothing twice.

use arbiter_core::jobs::{Integration, JobInfo};
use arbiter_core::model::Millis;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use serde_json::Value;

use crate::inject::InjectError;

/// Writes retried on a conflict before giving up until the next tick.
const WRITE_ATTEMPTS: usize = 5;

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

/// What a write ended with.
#[derive(Debug, Default)]
pub struct Wrote {
    /// The object as it now is, when known (a replace's answer, or the
    /// fresh read that needed no change): the next write of the same job
    /// starts from it.
    pub object: Option<DynamicObject>,
    /// The `resourceVersion` the write replaced (`None`: nothing written).
    pub replaced: Option<String>,
}

/// Read-modify-replace of job `name` with its `resourceVersion`, retried on
/// a conflict. The first attempt starts from `known` instead of reading:
/// the reflector's copy (`fresh` false), or the API's answer to the write
/// before (`fresh` true). A conflict, or a reflector's copy that already
/// looks as wanted (it may be stale), reads the object fresh. A job gone (404) is not an error: its withdrawal follows. A
/// change that changes nothing writes nothing.
pub async fn write(
    api: &Api<DynamicObject>,
    name: &str,
    integration: &Integration,
    known: Option<(DynamicObject, bool)>,
    change: impl Fn(&mut Value, &Integration) -> Result<(), InjectError>,
) -> Result<Wrote, String> {
    let mut known = known;
    for _ in 0..WRITE_ATTEMPTS {
        let (current, fresh) = match known.take() {
            Some(start) => start,
            None => match api.get_opt(name).await {
                Ok(Some(o)) => (o, true),
                Ok(None) => return Ok(Wrote::default()),
                Err(e) => return Err(e.to_string()),
            },
        };
        let mut value = serde_json::to_value(&current).map_err(|e| e.to_string())?;
        let before = value.clone();
        change(&mut value, integration).map_err(|e| e.to_string())?;
        if value == before {
            if fresh {
                return Ok(Wrote {
                    object: Some(current),
                    replaced: None,
                });
            }
            continue;
        }
        let mut object: DynamicObject = serde_json::from_value(value).map_err(|e| e.to_string())?;
        // Sent without them, the API server keeps the live object's
        // managed fields (and has less to read).
        object.metadata.managed_fields = None;
        match api.replace(name, &PostParams::default(), &object).await {
            Ok(now) => {
                return Ok(Wrote {
                    object: Some(now),
                    replaced: current.metadata.resource_version,
                })
            }
            Err(kube::Error::Api(status)) if status.is_conflict() => continue,
            Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(Wrote::default()),
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!(
        "the job kept changing under {WRITE_ATTEMPTS} attempts to write it; retried next tick"
    ))
}

/// Clears the integration's `hold.clearStatus` fields that job `name` has
/// set (a held `batch/v1 Job`'s `status.startTime`, so its template may
/// change) through the status subresource, starting from `known` (or a
/// fresh read). Returns the job as it then is, for the next write.
pub async fn clear_status(
    api: &Api<DynamicObject>,
    name: &str,
    integration: &Integration,
    known: Option<(DynamicObject, bool)>,
) -> Result<Option<(DynamicObject, bool)>, String> {
    let pointers = &integration.spec.hold.clear_status;
    if pointers.is_empty() {
        return Ok(known);
    }
    let mut known = known;
    for _ in 0..WRITE_ATTEMPTS {
        let (current, fresh) = match known.take() {
            Some(start) => start,
            None => match api.get_opt(name).await {
                Ok(Some(o)) => (o, true),
                Ok(None) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            },
        };
        let value = serde_json::to_value(&current).map_err(|e| e.to_string())?;
        let ops: Vec<Value> = pointers
            .iter()
            .filter(|p| value.pointer(p).is_some_and(|v| !v.is_null()))
            .map(|p| serde_json::json!({"op": "remove", "path": p}))
            .collect();
        if ops.is_empty() {
            return Ok(Some((current, fresh)));
        }
        let patch: json_patch::Patch =
            serde_json::from_value(Value::Array(ops)).map_err(|e| e.to_string())?;
        match api
            .patch_status(name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(now) => return Ok(Some((now, true))),
            Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(None),
            // The copy was stale (a field gone meanwhile): read it fresh.
            Err(kube::Error::Api(status)) if status.code == 422 || status.is_conflict() => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!(
        "the job's status kept changing under {WRITE_ATTEMPTS} attempts to clear {}; retried next tick",
        pointers.join(", ")
    ))
}

/// Runs failed job `name` (uid `replaces`) again by creating `fresh`
/// (`inject::recreated`) in its place: the failed one deleted first —
/// only while it is that one (a uid precondition), its pods and Workload
/// going with it (background propagation) —, then `fresh` created. Made
/// again after a partial failure, it finishes the work: a job already
/// created anew (it names `replaces`) is taken as done.
pub async fn recreate(
    api: &Api<DynamicObject>,
    name: &str,
    fresh: &Value,
    replaces: &str,
) -> Result<Wrote, String> {
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
        Err(e) => return Err(format!("deleting the failed job to run it again: {e}")),
    }
    let object: DynamicObject = serde_json::from_value(fresh.clone()).map_err(|e| e.to_string())?;
    match api.create(&PostParams::default(), &object).await {
        Ok(created) => Ok(Wrote {
            object: Some(created),
            replaced: None,
        }),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = api.get_opt(name).await.map_err(|e| e.to_string())?;
            let retry_of = existing.as_ref().and_then(|o| {
                o.metadata
                    .annotations
                    .as_ref()?
                    .get(crate::inject::RETRY_OF_ANNOTATION)
                    .cloned()
            });
            if retry_of.as_deref() == Some(replaces) {
                Ok(Wrote {
                    object: existing,
                    replaced: None,
                })
            } else {
                Err(
                    "the failed job is still being deleted; it is created anew once it is gone"
                        .into(),
                )
            }
        }
        Err(e) => Err(format!("creating the job anew to run it again: {e}")),
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
