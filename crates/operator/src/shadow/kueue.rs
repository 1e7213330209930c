//! Kueue's side of the comparison: what one of its `Workload` objects
//! (`kueue.x-k8s.io` v1beta2 or v1beta1, read as JSON) says about the job
//! that owns it — when its quota was reserved and on which flavors, which
//! job's workload preempted it, whether it was deactivated — and
//! [`KueueHistory`], which keeps what the watched versions said over
//! time (a Workload's status shows only its latest admission). Reads;
//! never writes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::compare::Side;

/// What one version of a Kueue Workload says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KueueWorkload {
    /// The uid of the job owning it (its controller owner reference, else
    /// its `kueue.x-k8s.io/job-uid` label).
    pub job_uid: Option<String>,
    /// When its quota was reserved (the `QuotaReserved` condition, true).
    pub reserved_at: Option<i64>,
    /// The flavors of that admission, per pod set: resource → flavor.
    pub flavors: Vec<BTreeMap<String, String>>,
    /// The job uid of the workload it was (last) preempted for, from the
    /// `Preempted` condition's message (Kueue writes "Preempted to
    /// accommodate a workload (UID: …, JobUID: …) due to …", and keeps it,
    /// prefixed "Previously: ", once it is admitted again).
    pub preempted_for: Option<String>,
    /// Deactivated (`spec.active: false`), with the `Evicted` condition's message.
    pub deactivated: Option<String>,
}

/// The condition of `type_`, if the Workload has one.
fn condition<'a>(workload: &'a Value, type_: &str) -> Option<&'a Value> {
    workload
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// An RFC 3339 time in milliseconds since the epoch.
fn millis(text: Option<&str>) -> Option<i64> {
    let at: k8s_openapi::jiff::Timestamp = text?.parse().ok()?;
    Some(at.as_millisecond())
}

/// The job uid in a `Preempted` condition's message.
fn preemptor_job_uid(message: &str) -> Option<String> {
    let rest = message.split_once("JobUID: ")?.1;
    let uid: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    (!uid.is_empty() && uid != "UNKNOWN").then_some(uid)
}

/// Reads one Kueue Workload.
pub fn read(workload: &Value) -> KueueWorkload {
    let owner = workload
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| refs.iter().find(|r| r["controller"] == true))
        .and_then(|r| r["uid"].as_str());
    let label = workload
        .pointer("/metadata/labels/kueue.x-k8s.io~1job-uid")
        .and_then(Value::as_str);
    let reserved = condition(workload, "QuotaReserved").filter(|c| c["status"] == "True");
    let reserved_at = reserved.and_then(|c| millis(c["lastTransitionTime"].as_str()));
    let flavors = match reserved {
        Some(_) => workload
            .pointer("/status/admission/podSetAssignments")
            .and_then(Value::as_array)
            .map(|sets| {
                sets.iter()
                    .map(|set| {
                        set["flavors"]
                            .as_object()
                            .map(|f| {
                                f.iter()
                                    .filter_map(|(r, f)| Some((r.clone(), f.as_str()?.to_string())))
                                    .collect()
                            })
                            .unwrap_or_default()
                    })
                    .collect()
            })
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let preempted_for = condition(workload, "Preempted")
        .and_then(|c| c["message"].as_str())
        .and_then(preemptor_job_uid);
    let deactivated = (workload.pointer("/spec/active") == Some(&Value::Bool(false))).then(|| {
        condition(workload, "Evicted")
            .and_then(|c| c["message"].as_str())
            .unwrap_or("deactivated")
            .to_string()
    });
    KueueWorkload {
        job_uid: owner.or(label).map(str::to_string),
        reserved_at,
        flavors,
        preempted_for,
        deactivated,
    }
}

/// What Kueue's Workloads said over time, by the uid of the job owning each.
#[derive(Debug, Default)]
pub struct KueueHistory {
    /// Per job: its first admission (time and flavors) and whether deactivated.
    sides: HashMap<String, Side>,
    /// Per preemptor job uid, the uids of the jobs preempted for it.
    victims: HashMap<String, BTreeSet<String>>,
}

impl KueueHistory {
    /// Takes in one version of a Workload.
    pub fn observe(&mut self, workload: &KueueWorkload) {
        let Some(job) = &workload.job_uid else {
            return;
        };
        let side = self.sides.entry(job.clone()).or_default();
        if side.admitted_at.is_none() && workload.reserved_at.is_some() {
            side.admitted_at = workload.reserved_at;
            side.flavors = workload.flavors.clone();
        }
        side.refused = workload.deactivated.clone();
        if let Some(preemptor) = &workload.preempted_for {
            self.victims
                .entry(preemptor.clone())
                .or_default()
                .insert(job.clone());
        }
    }

    /// Kueue's side of the job `uid`, its victims named by `name` (a job
    /// not known by uid keeps its uid).
    pub fn side(&self, uid: &str, name: impl Fn(&str) -> Option<String>) -> Side {
        let mut side = self.sides.get(uid).cloned().unwrap_or_default();
        side.victims = self
            .victims
            .get(uid)
            .into_iter()
            .flatten()
            .map(|v| name(v).unwrap_or_else(|| v.clone()))
            .collect();
        side
    }

    /// Forgets the job `uid` (deleted): its story and the preemptions it made.
    pub fn forget(&mut self, uid: &str) {
        self.sides.remove(uid);
        self.victims.remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(conditions: Value, admission: Value) -> Value {
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-a-1234", "namespace": "team-a",
                "labels": {"kueue.x-k8s.io/job-uid": "label-uid"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "a",
                    "uid": "job-a", "controller": true}]},
            "spec": {"queueName": "lq", "podSets": []},
            "status": {"conditions": conditions, "admission": admission},
        })
    }

    #[test]
    fn an_admitted_workload_reads_its_reservation_time_and_flavors() {
        let read = read(&workload(
            json!([{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                    "lastTransitionTime": "2026-12-06T14:00:05Z", "message": "Quota reserved in ClusterQueue cq"},
                   {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-12-06T14:00:05Z"}]),
            json!({"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "on-demand", "memory": "on-demand"}, "count": 1}]}),
        ));
        assert_eq!(read.job_uid.as_deref(), Some("job-a"));
        assert_eq!(read.reserved_at, Some(1_796_565_605_000));
        assert_eq!(
            read.flavors,
            [BTreeMap::from([
                ("cpu".to_string(), "on-demand".to_string()),
                ("memory".to_string(), "on-demand".to_string())
            ])]
        );
        assert_eq!(read.preempted_for, None);
    }

    #[test]
    fn a_pending_workload_has_no_admission_and_a_preempted_one_names_its_preemptor() {
        let pending = read(&workload(
            json!([{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                    "lastTransitionTime": "2026-12-06T14:00:05Z"}]),
            Value::Null,
        ));
        assert_eq!(pending.reserved_at, None);
        assert!(pending.flavors.is_empty());
        let preempted = read(&workload(
            json!([{"type": "Preempted", "status": "True", "reason": "InClusterQueue",
                    "lastTransitionTime": "2026-12-06T14:01:00Z",
                    "message": "Preempted to accommodate a workload (UID: wl-b, JobUID: job-b) due to prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq"}]),
            Value::Null,
        ));
        assert_eq!(preempted.preempted_for.as_deref(), Some("job-b"));
        let again = read(&workload(
            json!([{"type": "Preempted", "status": "False", "reason": "QuotaReserved",
                    "message": "Previously: Preempted to accommodate a workload (UID: wl-b, JobUID: UNKNOWN) due to x"}]),
            Value::Null,
        ));
        assert_eq!(again.preempted_for, None, "an unknown preemptor is no one");
    }

    #[test]
    fn the_history_keeps_the_first_admission_and_every_preemption() {
        let mut history = KueueHistory::default();
        let first = KueueWorkload {
            job_uid: Some("job-a".into()),
            reserved_at: Some(1_000),
            flavors: vec![BTreeMap::from([("cpu".into(), "spot".into())])],
            ..KueueWorkload::default()
        };
        history.observe(&first);
        history.observe(&KueueWorkload {
            preempted_for: Some("job-b".into()),
            reserved_at: None,
            flavors: Vec::new(),
            ..first.clone()
        });
        history.observe(&KueueWorkload {
            reserved_at: Some(9_000),
            flavors: vec![BTreeMap::from([("cpu".into(), "on-demand".into())])],
            ..first.clone()
        });
        let a = history.side("job-a", |_| None);
        assert_eq!(a.admitted_at, Some(1_000));
        assert_eq!(a.flavors[0]["cpu"], "spot");
        let b = history.side("job-b", |uid| (uid == "job-a").then(|| "team-a/a".into()));
        assert_eq!(b.victims, BTreeSet::from(["team-a/a".to_string()]));
        assert_eq!(b.admitted_at, None);
        history.forget("job-b");
        assert!(history.side("job-b", |_| None).victims.is_empty());
    }
}
