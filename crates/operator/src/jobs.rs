//! Reading and writing job objects: whether a job ran to its end, its uid
//! and template paths, and the one way a job is written — modify-replace
//! with the object's `resourceVersion` (starting from the copy the
//! reflector holds), read fresh and retried on a conflict — so a write
//! lost or repeated changes nothing twice.

use arbiter_core::jobs::{Integration, JobInfo};
use arbiter_core::model::Millis;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::Value;

use crate::inject::InjectError;

/// Writes retried on a conflict before giving up until the next tick.
const WRITE_ATTEMPTS: usize = 5;

/// Did the job run to an end (a `Complete`, `Succeeded` or `Failed`
/// condition, Tekton's `Succeeded=False`, or a final `status.phase`)?
pub fn job_finished(object: &Value) -> bool {
    let conditions = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let ended = conditions.iter().any(|c| {
        let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
        let status = c.get("status").and_then(Value::as_str).unwrap_or("");
        matches!(
            (kind, status),
            ("Complete" | "Succeeded" | "Failed", "True") | ("Succeeded", "False")
        )
    });
    let phase = object.pointer("/status/phase").and_then(Value::as_str);
    ended || matches!(phase, Some("Succeeded" | "Failed" | "Error"))
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finished_jobs_are_recognised_across_kinds() {
        let cond = |t: &str, s: &str| json!({"status": {"conditions": [{"type": t, "status": s}]}});
        assert!(job_finished(&cond("Complete", "True")));
        assert!(job_finished(&cond("Failed", "True")));
        assert!(job_finished(&cond("Succeeded", "True")));
        assert!(job_finished(&cond("Succeeded", "False")));
        assert!(!job_finished(&cond("Running", "True")));
        assert!(!job_finished(&cond("Complete", "False")));
        assert!(job_finished(&json!({"status": {"phase": "Failed"}})));
        assert!(!job_finished(&json!({"status": {"phase": "Running"}})));
        assert!(!job_finished(&json!({})));
    }

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
