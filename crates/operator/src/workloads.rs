//! The `Workload` object of each queued job, as Kueue keeps one: created
//! (server-side apply, one field manager) when the job is queued, owned by
//! the job, its status carrying Kueue's conditions (`QuotaReserved`,
//! `Admitted`, `Evicted`, `Finished`) with the core's typed reason as the
//! condition's `reason` and its rendering — the deciding policy's name and
//! message included — as the `message`; deleted when the job goes. A job
//! that names a queue but cannot be queued (its LocalQueue missing or
//! inactive, a resource no ClusterQueue covers, outside its queue's
//! bounds) has one too, its conditions saying why with the reason of the
//! job's Event. Events on the job tell the same story to `kubectl describe`.
//!
//! What the status says is computed from the scheduler's entry
//! ([`desired`]); `publish` writes it, only when it changed, and a
//! condition's `lastTransitionTime` moves only when its status flips
//! ([`conditions`]). The operator's one Event recorder ([`recorder`],
//! [`record_event`]) is here too; the bundle watcher records its Events on
//! ConfigMaps through it.

use std::collections::BTreeMap;

use arbiter_core::jobs::{Ended, JobInfo};
use arbiter_core::model::api::{self, Admission, PodSet, PodSetAssignment, WorkloadSpec};
use arbiter_core::model::Millis;
use arbiter_core::scheduler::reason::render_admission;
use arbiter_core::scheduler::{Backoff, Carried, Entry, Reason, Scheduler, Status, WorkloadId};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::Client;
use sha2::{Digest, Sha256};

/// The field manager of every write the operator makes.
pub const MANAGER: &str = "arbiter";

/// Kubernetes' limit on object names.
const MAX_NAME: usize = 253;

/// The Workload's name for a job: `<kind>-<name>` in lower case, shortened
/// with a hash of the whole when too long.
pub fn workload_name(kind: &str, job: &str) -> String {
    let name = format!("{}-{job}", kind.to_ascii_lowercase());
    if name.len() <= MAX_NAME {
        return name;
    }
    let digest = Sha256::digest(name.as_bytes());
    let hash: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
    let mut cut = MAX_NAME - hash.len() - 1;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{hash}", name[..cut].trim_end_matches(['-', '.']))
}

/// The job a Workload belongs to.
#[derive(Clone, Debug)]
pub struct Owner {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// The Workload object (spec) for a queued job.
pub fn object(owner: &Owner, entry: &Entry, scheduler: &Scheduler) -> api::Workload {
    let cluster = scheduler.cluster();
    let workload = &entry.workload;
    let pod_sets = workload
        .pod_sets
        .iter()
        .map(|p| PodSet {
            name: p.name.clone(),
            count: p.count,
            min_count: p.min_count,
            template: None,
            requests: Some(
                p.per_pod
                    .iter()
                    .map(|&(r, a)| (cluster.resource_name(r).to_string(), a.to_quantity()))
                    .collect(),
            ),
        })
        .collect();
    owned(
        owner,
        WorkloadSpec {
            queue_name: Some(workload.queue_name.clone()),
            pod_sets,
            priority_class_name: workload.priority_class.clone(),
            priority: Some(workload.priority),
            active: None,
        },
    )
}

/// The Workload object (spec) for a job that names a queue but cannot be
/// queued: its pod sets as the job asks for them, so `kubectl get
/// workloads` lists it with the reason ([`not_queued`]) beside the others.
pub fn of_unqueued(owner: &Owner, job: &JobInfo) -> api::Workload {
    let pod_sets = job
        .pod_sets
        .iter()
        .map(|p| PodSet {
            name: p.name.clone(),
            count: p.count,
            min_count: p.min_count,
            template: None,
            requests: Some(
                p.requests
                    .iter()
                    .filter(|(_, a)| !a.is_zero())
                    .map(|(r, a)| (r.clone(), a.to_quantity()))
                    .collect(),
            ),
        })
        .collect();
    owned(
        owner,
        WorkloadSpec {
            queue_name: job.queue_name.clone(),
            pod_sets,
            priority_class_name: job.priority_class.clone(),
            priority: None,
            active: None,
        },
    )
}

/// What the Workload of a job that cannot be queued says: neither quota
/// reserved nor admitted, for reason `code` (the same as the job's Event).
pub fn not_queued(code: &str, message: &str) -> Desired {
    let wanted = ["QuotaReserved", "Admitted"]
        .into_iter()
        .map(|type_| Wanted {
            type_,
            status: false,
            reason: code.to_string(),
            message: message.to_string(),
        })
        .collect();
    Desired {
        wanted,
        ..Desired::default()
    }
}

/// The Workload `spec` of the job `owner`, which owns it.
fn owned(owner: &Owner, spec: WorkloadSpec) -> api::Workload {
    api::Workload {
        metadata: ObjectMeta {
            name: Some(workload_name(&owner.kind, &owner.name)),
            namespace: Some(owner.namespace.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: owner.api_version.clone(),
                kind: owner.kind.clone(),
                name: owner.name.clone(),
                uid: owner.uid.clone(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

/// One condition as the status should say it (no time yet).
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// What a Workload's status should say, times aside (conditions' times
/// are kept by [`conditions`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Desired {
    pub wanted: Vec<Wanted>,
    pub admission: Option<Admission>,
    pub evictions: u32,
    /// Requeues after its pods' timeout, and the end of the backoff after one.
    pub requeues: u32,
    pub requeue_at: Option<Millis>,
    /// Runs again after a failed run, and the end of the backoff before one.
    pub retries: u32,
    pub retry_at: Option<Millis>,
    /// The seal of `admission` for the owning job (`seal::Sealer::seal_admission`).
    pub admission_seal: Option<String>,
}

impl Desired {
    /// The status to write, with the conditions `conditions` made.
    pub fn status(&self, conditions: Vec<Condition>) -> api::WorkloadStatus {
        let time =
            |at: Millis| Time(Timestamp::from_millisecond(at.0).unwrap_or(Timestamp::UNIX_EPOCH));
        api::WorkloadStatus {
            admission: self.admission.clone(),
            conditions,
            evictions: (self.evictions > 0).then_some(self.evictions),
            requeue_state: (self.requeues > 0 || self.requeue_at.is_some()).then(|| {
                api::RequeueState {
                    count: (self.requeues > 0).then_some(self.requeues),
                    requeue_at: self.requeue_at.map(time),
                }
            }),
            retries: (self.retries > 0).then_some(self.retries),
            retry_at: self.retry_at.map(time),
            admission_seal: self.admission_seal.clone(),
        }
    }
}

/// What a Workload's status says a job carried from before a restart:
/// its counters, and a backoff if one was under way.
pub fn carried(status: &api::WorkloadStatus) -> Carried {
    let millis = |t: &Time| Millis(t.0.as_millisecond());
    let requeue = status.requeue_state.as_ref();
    let backoff = match (
        requeue.and_then(|r| r.requeue_at.as_ref()),
        status.retry_at.as_ref(),
    ) {
        (Some(at), _) => Some((millis(at), Backoff::PodsReady)),
        (None, Some(at)) => Some((millis(at), Backoff::Retry)),
        (None, None) => None,
    };
    Carried {
        retries: status.retries.unwrap_or(0),
        pods_ready_requeues: requeue.and_then(|r| r.count).unwrap_or(0),
        evictions: status.evictions.unwrap_or(0),
        backoff,
    }
}

/// What the Workload's status should say now, from the scheduler's entry:
/// the conditions, the admission, the eviction count.
/// `eviction` is the (code, sentence) of the last eviction the driver saw;
/// `refused`, what the API said to the last write of the job it refused
/// (a `JobWriteRefused` condition until the job's writes go through).
pub fn desired(
    scheduler: &Scheduler,
    id: WorkloadId,
    finished: Option<&Ended>,
    eviction: Option<&(String, String)>,
    refused: Option<&str>,
) -> Desired {
    let cluster = scheduler.cluster();
    let entry = scheduler.entry(id);
    let reason = scheduler.reason(id);
    let admitted =
        matches!(entry.status, Status::Admitted | Status::Detached) && entry.admission.is_some();
    let finished_now = entry.status == Status::Finished || finished.is_some();
    let mut wanted = Vec::from(quota_conditions(
        scheduler,
        id,
        &reason,
        admitted,
        finished_now,
    ));
    if let Some((code, sentence)) = eviction {
        wanted.push(evicted_condition(
            code,
            sentence,
            !admitted && !finished_now,
        ));
    }
    // `waitForPodsReady`: whether the admitted workload's pods are all ready.
    if cluster.pods_ready.is_some() && admitted {
        wanted.push(pods_ready_condition(scheduler, id));
    }
    if let Some(message) = refused {
        wanted.push(Wanted {
            type_: "JobWriteRefused",
            status: true,
            reason: "WriteRefused".to_string(),
            message: message.to_string(),
        });
    }
    wanted.extend(finished_condition(scheduler, id, &reason, finished));
    let (requeue_at, retry_at) = match reason {
        Reason::PodsReadyBackoff { until, .. } if entry.status == Status::Backoff => {
            (Some(until), None)
        }
        Reason::Backoff { until, .. } if entry.status == Status::Backoff => (None, Some(until)),
        _ => (None, None),
    };
    Desired {
        wanted,
        admission: admitted.then(|| admission_of(scheduler, id)).flatten(),
        evictions: entry.evictions,
        requeues: entry.pods_ready_requeues,
        requeue_at,
        retries: entry.retries,
        retry_at,
        admission_seal: None,
    }
}

/// The `QuotaReserved` and `Admitted` conditions: where quota is reserved
/// when `admitted`, else that it finished, else why it waits (`reason`).
fn quota_conditions(
    scheduler: &Scheduler,
    id: WorkloadId,
    reason: &Reason,
    admitted: bool,
    finished_now: bool,
) -> [Wanted; 2] {
    let entry = scheduler.entry(id);
    let admission = entry.admission.as_ref().filter(|_| admitted);
    let (status_reason, message) = match (admission, finished_now) {
        (Some(a), _) => (
            "QuotaReserved".to_string(),
            format!(
                "Quota reserved in {}",
                render_admission(scheduler.cluster(), &entry.workload, a)
            ),
        ),
        (None, true) => ("Finished".to_string(), "The workload finished".to_string()),
        (None, false) => {
            let code = if reason.is_none() {
                "Pending"
            } else {
                reason.code()
            };
            let pending_message = scheduler.reason_text(id);
            let message = if pending_message.is_empty() {
                "Waiting to be scheduled".to_string()
            } else {
                pending_message
            };
            (code.to_string(), message)
        }
    };
    [
        Wanted {
            type_: "QuotaReserved",
            status: admitted,
            reason: status_reason.clone(),
            message: message.clone(),
        },
        Wanted {
            type_: "Admitted",
            status: admitted,
            reason: if admitted {
                "Admitted".into()
            } else {
                status_reason
            },
            message: if admitted {
                "The workload is admitted".into()
            } else {
                message
            },
        },
    ]
}

/// The `Evicted` condition of a workload evicted once (`code`,
/// `sentence`): true while it is still `evicted`, else that it was
/// admitted again.
fn evicted_condition(code: &str, sentence: &str, evicted: bool) -> Wanted {
    Wanted {
        type_: "Evicted",
        status: evicted,
        reason: if evicted {
            code.to_string()
        } else {
            "QuotaReserved".to_string()
        },
        message: if evicted {
            sentence.to_string()
        } else {
            "Admitted again after its eviction".to_string()
        },
    }
}

/// The `PodsReady` condition of an admitted workload under
/// `waitForPodsReady`: its pods all ready, waiting to start, or waiting
/// to recover.
fn pods_ready_condition(scheduler: &Scheduler, id: WorkloadId) -> Wanted {
    let waiting = scheduler.awaiting_pods(id);
    let recovering = scheduler.recovering_pods(id);
    Wanted {
        type_: "PodsReady",
        status: !waiting,
        reason: match (waiting, recovering) {
            (true, true) => "WaitForRecovery",
            (true, false) => "WaitForStart",
            (false, _) => "PodsReady",
        }
        .to_string(),
        message: if waiting {
            "Not all pods are ready or succeeded".to_string()
        } else {
            "All pods are ready or succeeded".to_string()
        },
    }
}

/// The `Finished` condition, if the workload is done: rejected or
/// deactivated by the scheduler (`reason`), or its job ended (`finished`).
fn finished_condition(
    scheduler: &Scheduler,
    id: WorkloadId,
    reason: &Reason,
    finished: Option<&Ended>,
) -> Option<Wanted> {
    let entry = scheduler.entry(id);
    if entry.status == Status::Rejected || entry.status == Status::Deactivated {
        return Some(Wanted {
            type_: "Finished",
            status: true,
            reason: reason.code().to_string(),
            message: scheduler.reason_text(id),
        });
    }
    let (reason, message) = match finished? {
        Ended::Succeeded => ("Succeeded", "The job succeeded".to_string()),
        Ended::Failed { message } => ("Failed", format!("The job failed: {message}")),
    };
    Some(Wanted {
        type_: "Finished",
        status: true,
        reason: reason.to_string(),
        message,
    })
}

/// The admitted workload's admission as the Workload's status says it:
/// its ClusterQueue, and per pod set the flavor of each resource and the
/// count.
fn admission_of(scheduler: &Scheduler, id: WorkloadId) -> Option<Admission> {
    let cluster = scheduler.cluster();
    let entry = scheduler.entry(id);
    let admission = entry.admission.as_ref()?;
    Some(Admission {
        cluster_queue: cluster.cluster_queues[entry.workload.cluster_queue.index()]
            .name
            .clone(),
        pod_set_assignments: entry
            .workload
            .pod_sets
            .iter()
            .zip(&admission.pod_sets)
            .zip(&admission.counts)
            .map(|((pod_set, assigned), count)| PodSetAssignment {
                name: pod_set.name.clone(),
                flavors: assigned
                    .flavors
                    .iter()
                    .map(|&(r, f)| {
                        (
                            cluster.resource_name(r).to_string(),
                            cluster.flavors[f.index()].name.clone(),
                        )
                    })
                    .collect(),
                count: Some(*count),
            })
            .collect(),
    })
}

/// The conditions with their transition times: a condition whose status is
/// unchanged keeps its time.
pub fn conditions(
    wanted: &[Wanted],
    before: &BTreeMap<String, Condition>,
    now: Timestamp,
) -> Vec<Condition> {
    wanted
        .iter()
        .map(|w| {
            let status = if w.status { "True" } else { "False" };
            let time = before
                .get(w.type_)
                .filter(|c| c.status == status)
                .map(|c| c.last_transition_time.clone())
                .unwrap_or(Time(now));
            Condition {
                type_: w.type_.to_string(),
                status: status.to_string(),
                reason: w.reason.clone(),
                message: truncate(&w.message, 32 * 1024),
                last_transition_time: time,
                observed_generation: None,
            }
        })
        .collect()
}

/// Kubernetes caps a condition message at 32 KiB.
fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max - 3;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...", &text[..cut])
}

/// Creates the Workload, or updates its spec when it exists already (after
/// a restart): a plain create first — the API server's cheapest write, and
/// almost always the case — then server-side apply. Returns the object as
/// the API then holds it.
pub async fn apply(
    client: &Client,
    workload: &api::Workload,
) -> Result<api::Workload, kube::Error> {
    let namespace = workload.metadata.namespace.clone().unwrap_or_default();
    let name = workload.metadata.name.clone().unwrap_or_default();
    let api: Api<api::Workload> = Api::namespaced(client.clone(), &namespace);
    let create = PostParams {
        field_manager: Some(MANAGER.to_string()),
        ..PostParams::default()
    };
    match api.create(&create, workload).await {
        Ok(created) => return Ok(created),
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e),
    }
    let mut body = serde_json::to_value(workload).map_err(kube::Error::SerdeError)?;
    body["apiVersion"] = "arbiter.dev/v1alpha1".into();
    body["kind"] = "Workload".into();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
}

/// Writes an `arbiter.dev` object's status (server-side apply on the
/// status subresource, field manager [`MANAGER`]); returns the object as
/// the API then holds it.
pub async fn apply_status<K>(
    api: &Api<K>,
    name: &str,
    status: &impl serde::Serialize,
) -> Result<K, kube::Error>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
}

/// What of the Workload `observed` differs from what Arbiter last wrote —
/// `spec` (the object applied: its spec and owner reference) and `status`,
/// each only if given —, by field (`spec.podSets`, `status.admission`,
/// `metadata.ownerReferences`). Conditions are compared by type, status,
/// reason and message (their times are the API's to round); labels and
/// annotations are not Arbiter's.
pub fn edited(
    observed: &api::Workload,
    spec: Option<&api::Workload>,
    status: Option<&api::WorkloadStatus>,
) -> Vec<String> {
    let mut fields = Vec::new();
    if let Some(spec) = spec {
        let owners = observed.metadata.owner_references.iter().flatten();
        let ours = spec.metadata.owner_references.iter().flatten();
        if ours.into_iter().any(|o| !owners.clone().any(|t| t == o)) {
            fields.push("metadata.ownerReferences".to_string());
        }
        differing(
            "spec",
            &json(&observed.spec),
            &json(&spec.spec),
            &mut fields,
        );
    }
    if let Some(status) = status {
        let none = api::WorkloadStatus::default();
        let theirs = comparable(observed.status.as_ref().unwrap_or(&none));
        differing("status", &theirs, &comparable(status), &mut fields);
    }
    fields
}

fn json(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// A status as [`edited`] compares it: conditions keyed by type, without times.
fn comparable(status: &api::WorkloadStatus) -> serde_json::Value {
    let mut value = json(status);
    let conditions: serde_json::Map<String, serde_json::Value> = status
        .conditions
        .iter()
        .map(|c| {
            let said = serde_json::json!([c.status, c.reason, c.message]);
            (c.type_.clone(), said)
        })
        .collect();
    if let Some(object) = value.as_object_mut() {
        object.insert("conditions".into(), conditions.into());
    }
    value
}

/// Names `prefix.KEY` for every top-level key on which `theirs` and `ours` differ.
fn differing(
    prefix: &str,
    theirs: &serde_json::Value,
    ours: &serde_json::Value,
    fields: &mut Vec<String>,
) {
    let empty = serde_json::Map::new();
    let theirs = theirs.as_object().unwrap_or(&empty);
    let ours = ours.as_object().unwrap_or(&empty);
    let keys: std::collections::BTreeSet<&String> = theirs.keys().chain(ours.keys()).collect();
    for key in keys {
        let null = serde_json::Value::Null;
        let (a, b) = (
            theirs.get(key).unwrap_or(&null),
            ours.get(key).unwrap_or(&null),
        );
        if a != b {
            fields.push(format!("{prefix}.{key}"));
        }
    }
}

/// The JSON merge patch that takes out of `theirs` every field `ours` has
/// not, down through objects (lists are atomic: an apply replaces them
/// whole); `None` when there is none.
fn removals(ours: &serde_json::Value, theirs: &serde_json::Value) -> Option<serde_json::Value> {
    let (serde_json::Value::Object(ours), serde_json::Value::Object(theirs)) = (ours, theirs)
    else {
        return None;
    };
    let patch: serde_json::Map<String, serde_json::Value> = theirs
        .iter()
        .filter_map(|(key, their)| match ours.get(key) {
            None => Some((key.clone(), serde_json::Value::Null)),
            Some(our) => removals(our, their).map(|inner| (key.clone(), inner)),
        })
        .collect();
    (!patch.is_empty()).then_some(serde_json::Value::Object(patch))
}

/// Writes the Workload `observed` back to what Arbiter decided — the
/// object `spec` and, if given, `status` — exactly: what someone else
/// added is taken out (a JSON merge patch of nulls), the rest applied
/// again with force (server-side apply takes over what they changed, so
/// Arbiter's later applies keep owning every field they write). Returns
/// the object as the API then holds it.
pub async fn write_back(
    client: &Client,
    observed: &api::Workload,
    spec: &api::Workload,
    status: Option<&api::WorkloadStatus>,
) -> Result<api::Workload, kube::Error> {
    let namespace = spec.metadata.namespace.clone().unwrap_or_default();
    let name = spec.metadata.name.clone().unwrap_or_default();
    let api: Api<api::Workload> = Api::namespaced(client.clone(), &namespace);
    let theirs = json(observed);
    let params = PatchParams {
        field_manager: Some(MANAGER.to_string()),
        ..PatchParams::default()
    };
    if let Some(patch) = removals(&json(&spec.spec), &theirs["spec"]) {
        let patch = serde_json::json!({"spec": patch});
        api.patch(&name, &params, &Patch::Merge(&patch)).await?;
    }
    let status_removals = status.and_then(|s| removals(&json(s), &theirs["status"]));
    if let Some(patch) = status_removals {
        let patch = serde_json::json!({"status": patch});
        api.patch_status(&name, &params, &Patch::Merge(&patch))
            .await?;
    }
    let mut body = json(spec);
    body["apiVersion"] = "arbiter.dev/v1alpha1".into();
    body["kind"] = "Workload".into();
    let force = PatchParams::apply(MANAGER).force();
    let mut now = api.patch(&name, &force, &Patch::Apply(&body)).await?;
    if let Some(status) = status {
        now = apply_status(&api, &name, status).await?;
    }
    Ok(now)
}

/// Deletes the Workload of a job that is gone (absent already is fine).
pub async fn delete(client: &Client, namespace: &str, name: &str) -> Result<(), kube::Error> {
    let api: Api<api::Workload> = Api::namespaced(client.clone(), namespace);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

/// The recorder of every Event the operator writes: reporting controller
/// `arbiter`, instance `$POD_NAME`.
pub fn recorder(client: Client) -> Recorder {
    let reporter = Reporter {
        controller: "arbiter".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    Recorder::new(client, reporter)
}

/// Kubernetes' cap on an Event's note.
pub const MAX_NOTE: usize = 1024;

/// Records an Event about `regarding` (the note cut to [`MAX_NOTE`]). A
/// failure is logged, never returned: an Event is never worth stopping for.
pub async fn record_event(
    recorder: &Recorder,
    regarding: &ObjectReference,
    warning: bool,
    reason: &str,
    action: &str,
    note: &str,
) {
    let event = KubeEvent {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_string(),
        note: Some(truncate(note, MAX_NOTE)),
        action: action.into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, regarding).await {
        tracing::warn!(
            object = %format!("{} {}/{}", regarding.kind.as_deref().unwrap_or_default(), regarding.namespace.as_deref().unwrap_or_default(), regarding.name.as_deref().unwrap_or_default()),
            %reason,
            error = %e,
            "could not record an Event"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn names_are_kind_and_job_and_long_ones_are_hashed_to_fit() {
        assert_eq!(workload_name("PyTorchJob", "ddp"), "pytorchjob-ddp");
        let long = "x".repeat(300);
        let name = workload_name("Job", &long);
        assert_eq!(name.len(), MAX_NAME);
        assert_ne!(name, workload_name("Job", &format!("{long}y")));
    }

    #[test]
    fn a_job_that_cannot_be_queued_has_a_workload_saying_why() {
        use arbiter_core::jobs::PodSetInfo;
        use arbiter_core::model::Amount;
        let owner = Owner {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            namespace: "team-a".into(),
            name: "lost".into(),
            uid: "u-1".into(),
        };
        let job = JobInfo {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            namespace: "team-a".into(),
            name: "lost".into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            queue_name: Some("nowhere".into()),
            priority_class: None,
            pod_sets: vec![PodSetInfo {
                name: "main".into(),
                count: 2,
                min_count: None,
                requests: BTreeMap::from([
                    ("cpu".to_string(), Amount::from_milli(1500)),
                    ("memory".to_string(), Amount::from_units(0)),
                ]),
                node_selector: BTreeMap::new(),
                required_node_affinity: None,
                tolerations: Vec::new(),
                template_path: None,
                topology: None,
            }],
        };
        let workload = of_unqueued(&owner, &job);
        assert_eq!(workload.metadata.name.as_deref(), Some("job-lost"));
        assert_eq!(workload.metadata.owner_references.unwrap()[0].uid, "u-1");
        assert_eq!(workload.spec.queue_name.as_deref(), Some("nowhere"));
        let pod_set = &workload.spec.pod_sets[0];
        assert_eq!((pod_set.name.as_str(), pod_set.count), ("main", 2));
        // A zero request says nothing.
        assert_eq!(
            pod_set.requests,
            Some(BTreeMap::from([(
                "cpu".to_string(),
                Quantity("1500m".into())
            )]))
        );
        let Desired {
            wanted,
            admission,
            evictions,
            ..
        } = not_queued("LocalQueueDoesNotExist", "no queue");
        assert_eq!((admission, evictions), (None, 0));
        let said: Vec<_> = wanted
            .iter()
            .map(|w| (w.type_, w.status, w.reason.as_str(), w.message.as_str()))
            .collect();
        assert_eq!(
            said,
            [
                ("QuotaReserved", false, "LocalQueueDoesNotExist", "no queue"),
                ("Admitted", false, "LocalQueueDoesNotExist", "no queue"),
            ]
        );
    }

    #[test]
    fn a_condition_keeps_its_time_until_its_status_flips() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let t1 = Timestamp::from_second(2_000).unwrap();
        let pending = Wanted {
            type_: "QuotaReserved",
            status: false,
            reason: "NoFit".into(),
            message: "waiting".into(),
        };
        let first = conditions(std::slice::from_ref(&pending), &BTreeMap::new(), t0);
        let before: BTreeMap<_, _> = first.iter().map(|c| (c.type_.clone(), c.clone())).collect();
        let mut still = pending.clone();
        still.message = "still waiting".into();
        assert_eq!(
            conditions(&[still], &before, t1)[0].last_transition_time,
            Time(t0)
        );
        let admitted = Wanted {
            status: true,
            ..pending
        };
        assert_eq!(
            conditions(&[admitted], &before, t1)[0].last_transition_time,
            Time(t1)
        );
    }

    #[test]
    fn an_edit_is_named_by_field_and_taken_out_exactly() {
        use arbiter_core::model::api::PodSetAssignment;
        let owner = Owner {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            namespace: "team-a".into(),
            name: "train".into(),
            uid: "u-1".into(),
        };
        let spec = owned(
            &owner,
            WorkloadSpec {
                queue_name: Some("research".into()),
                pod_sets: vec![PodSet {
                    name: "main".into(),
                    count: 1,
                    ..PodSet::default()
                }],
                priority: Some(0),
                ..WorkloadSpec::default()
            },
        );
        let condition = |status: &str, message: &str, at: i64| Condition {
            type_: "Admitted".into(),
            status: status.into(),
            reason: "Admitted".into(),
            message: message.into(),
            last_transition_time: Time(Timestamp::from_second(at).unwrap()),
            observed_generation: None,
        };
        let status = api::WorkloadStatus {
            conditions: vec![condition("False", "waiting", 1)],
            ..api::WorkloadStatus::default()
        };
        let mut observed = spec.clone();
        observed.metadata.resource_version = Some("7".into());
        // Only a condition's time differs (the API rounds it): no edit.
        observed.status = Some(api::WorkloadStatus {
            conditions: vec![condition("False", "waiting", 2)],
            ..api::WorkloadStatus::default()
        });
        assert!(edited(&observed, Some(&spec), Some(&status)).is_empty());
        // A count, an admission claimed, an owner taken away, a condition flipped.
        observed.spec.pod_sets[0].count = 100;
        observed.spec.active = Some(false);
        observed.metadata.owner_references = None;
        let claimed = Admission {
            cluster_queue: "research".into(),
            pod_set_assignments: vec![PodSetAssignment {
                name: "main".into(),
                flavors: BTreeMap::new(),
                count: Some(1),
            }],
        };
        observed.status = Some(api::WorkloadStatus {
            admission: Some(claimed),
            conditions: vec![condition("True", "claimed", 2)],
            requeue_state: Some(api::RequeueState {
                count: Some(3),
                requeue_at: None,
            }),
            ..api::WorkloadStatus::default()
        });
        assert_eq!(
            edited(&observed, Some(&spec), Some(&status)),
            [
                "metadata.ownerReferences",
                "spec.active",
                "spec.podSets",
                "status.admission",
                "status.conditions",
                "status.requeueState",
            ]
        );
        // Nothing of the status is compared before it was written.
        assert_eq!(edited(&observed, Some(&spec), None).len(), 3);
        // What is there and not Arbiter's is taken out; lists are applied whole.
        assert_eq!(
            removals(&json(&spec.spec), &json(&observed.spec)),
            Some(serde_json::json!({"active": null}))
        );
        assert_eq!(
            removals(&json(&status), &json(&observed.status)),
            Some(serde_json::json!({"admission": null, "requeueState": null}))
        );
        let ours = serde_json::json!({"requeueState": {"requeueAt": "x"}});
        let theirs = serde_json::json!({"requeueState": {"count": 3, "requeueAt": "y"}});
        assert_eq!(
            removals(&ours, &theirs),
            Some(serde_json::json!({"requeueState": {"count": null}}))
        );
        assert_eq!(removals(&ours, &ours), None);
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let text = "é".repeat(20_000);
        let cut = truncate(&text, 32 * 1024);
        assert!(cut.len() <= 32 * 1024 && cut.ends_with("..."));
    }
}
