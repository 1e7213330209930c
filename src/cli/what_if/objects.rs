//! The objects read from the cluster (`snapshot`) made into what the
//! simulator replays (`arbiter_sim::live::Live`), as the operator reads
//! them: the configuration and node pools through `operator::config` (the
//! same `Cluster` and pools the operator schedules on, objects it leaves
//! out left out), each job read by the built-in integrations as the
//! operator reads it (its Workload's own words where the job cannot be
//! read), each admitted Workload's admission — flavors and counts from its
//! status, the time from its job's admission record, else its
//! `QuotaReserved` condition — and its queue time (the job's creation, as
//! the operator queues it), the counters and backoff its status carries
//! (`workloads::carried`), and the runtime of each Workload that finished
//! successfully (its `Finished` condition's time less its job's recorded
//! admission). Pure: no I/O, no clock (time 0 is the snapshot's).

use std::collections::BTreeSet;
use std::sync::Arc;

use arbiter_core::jobs::{self, Integrations, JobInfo};
use arbiter_core::model::api;
use arbiter_core::model::Millis;
use arbiter_operator::{config, inject, workloads};
use arbiter_sim::live::{FinishedRun, Live, LiveWorkload};
use arbiter_sim::scenario::{Prior, PriorAdmission};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::Value;

use super::snapshot::{controller, Snapshot};

/// The condition `type_` if its status is `status`.
fn condition<'a>(
    status: &'a api::WorkloadStatus,
    type_: &str,
    value: &str,
) -> Option<&'a Condition> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == value)
}

fn millis(time: &Time) -> i64 {
    time.0.as_millisecond()
}

/// `Workload namespace/name`.
fn named(w: &api::Workload) -> String {
    format!(
        "Workload {}/{}",
        w.metadata.namespace.as_deref().unwrap_or_default(),
        w.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The job as the operator reads it (no explicit priority: intake resolves
/// it), else the Workload's own pod sets, queue and resolved priority
/// under its job's kind and name.
fn job_info(
    workload: &api::Workload,
    job: Option<&Value>,
    integrations: &Integrations,
    warnings: &mut Vec<String>,
) -> Result<(JobInfo, Option<i32>), String> {
    if let Some(job) = job {
        match integrations.extract(job) {
            Ok(Some(info)) => return Ok((info, None)),
            Ok(None) => {}
            Err(e) => warnings.push(format!(
                "{}: its job cannot be read ({e}); replayed from what the Workload says",
                named(workload)
            )),
        }
    }
    let mut info = jobs::job_info_from_workload(workload).map_err(|e| e.to_string())?;
    if let Some(owner) = controller(workload) {
        info.api_version = owner.api_version.clone();
        info.kind = owner.kind.clone();
        info.name = owner.name.clone();
    }
    Ok((info, workload.spec.priority))
}

/// The Workload's admission, per pod set of `info` in its order (a pod
/// set it does not name gets none: the restore then refuses it).
fn admission(info: &JobInfo, admission: &api::Admission, at: Millis) -> PriorAdmission {
    let (flavors, counts) = info
        .pod_sets
        .iter()
        .map(|ps| {
            let assigned = admission
                .pod_set_assignments
                .iter()
                .find(|a| a.name == ps.name);
            (
                assigned.map(|a| a.flavors.clone()).unwrap_or_default(),
                assigned.and_then(|a| a.count).unwrap_or(ps.count),
            )
        })
        .unzip();
    PriorAdmission {
        flavors,
        counts,
        at,
    }
}

/// What the simulator replays from `snapshot`.
pub fn live(snapshot: &Snapshot) -> Live {
    let zero = snapshot.taken_at.as_millisecond();
    let since = |ms: i64| Millis(ms.saturating_sub(zero));
    let integrations = Integrations::builtin();
    let mut warnings = snapshot.warnings.clone();
    let mut replayed = Vec::new();
    let mut finished = Vec::new();
    let (mut unowned, mut untimed) = (0usize, 0usize);
    for w in &snapshot.workloads {
        let status = w.status.clone().unwrap_or_default();
        let Some(owner) = controller(w) else {
            unowned += 1;
            continue;
        };
        let job = snapshot.jobs.get(&owner.uid);
        let record = job.and_then(inject::recorded).and_then(Result::ok);
        if let Some(done) = condition(&status, "Finished", "True") {
            // Only a run to completion says how long the queue's work runs.
            if done.reason != "Succeeded" {
                continue;
            }
            match &record {
                Some(record) => finished.push(FinishedRun {
                    namespace: w.metadata.namespace.clone().unwrap_or_default(),
                    queue_name: w.spec.queue_name.clone().unwrap_or_default(),
                    finished_at: since(millis(&done.last_transition_time)),
                    runtime: Millis(
                        (millis(&done.last_transition_time) - record.admitted_at).max(0),
                    ),
                }),
                None => untimed += 1,
            }
            continue;
        }
        let (info, explicit_priority) = match job_info(w, job, &integrations, &mut warnings) {
            Ok(read) => read,
            Err(e) => {
                warnings.push(format!("{}: {e}; not replayed", named(w)));
                continue;
            }
        };
        let created = job
            .and_then(|j| j.pointer("/metadata/creationTimestamp"))
            .and_then(|t| serde_json::from_value::<Time>(t.clone()).ok())
            .or_else(|| w.metadata.creation_timestamp.clone())
            .map_or(zero, |t| millis(&t));
        let admitted = status.admission.as_ref().map(|a| {
            let at = match (&record, condition(&status, "QuotaReserved", "True")) {
                (Some(record), _) => record.admitted_at,
                (None, Some(reserved)) => millis(&reserved.last_transition_time),
                (None, None) => zero,
            };
            admission(&info, a, since(at))
        });
        let queue_time = match (&admitted, &record) {
            (Some(_), Some(record)) => record.queue_time,
            _ => created,
        };
        let mut carried = workloads::carried(&status);
        if let Some((until, why)) = carried.backoff {
            carried.backoff = Some((since(until.0), why));
        }
        replayed.push(LiveWorkload {
            info,
            explicit_priority,
            prior: Prior {
                queue_time: since(queue_time),
                carried,
                admission: admitted,
            },
            source: named(w),
        });
    }
    if unowned > 0 {
        warnings.push(format!(
            "{unowned} Workload(s) belong to no job (no controller owner reference): the operator schedules jobs, so they are not replayed"
        ));
    }
    if untimed > 0 {
        warnings.push(format!(
            "{untimed} finished Workload(s) whose job is gone or carries no admission record: their runtimes are not in the history"
        ));
    }
    // Every resource a job asks for or a Node has gets an id, as the
    // operator's configuration gives it.
    let mut resources: BTreeSet<String> = config::node_resources(&snapshot.nodes).collect();
    for w in &replayed {
        for ps in &w.info.pod_sets {
            resources.extend(ps.requests.keys().cloned());
        }
    }
    let built = config::build_lenient(
        &snapshot.config,
        &config::namespaces(&snapshot.namespaces),
        resources,
    );
    warnings.extend(built.warnings);
    for inactive in &built.cluster.inactive {
        warnings.push(format!(
            "{} is inactive ({}): {}; the operator leaves it out, and so does the replay",
            inactive.object(),
            inactive.reason,
            inactive.message
        ));
    }
    let cluster = Arc::new(built.cluster);
    let config::NodePools {
        pools,
        labels: pool_labels,
        problems,
    } = config::pools(&cluster, &snapshot.nodes);
    warnings.extend(problems.into_iter().map(|(_, _, problem)| problem));
    let taken_at = k8s_openapi::jiff::Timestamp::from_second(snapshot.taken_at.as_second())
        .unwrap_or(snapshot.taken_at);
    Live {
        cluster,
        pools,
        pool_labels,
        workloads: replayed,
        finished,
        warnings,
        taken_at: taken_at.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_operator::config::ApiObject;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    /// Seconds since the epoch as an RFC 3339 time.
    fn at(seconds: i64) -> String {
        Timestamp::from_second(seconds)
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string()
    }

    fn config() -> Vec<ApiObject> {
        [
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ResourceFlavor",
                   "metadata": {"name": "a100"},
                   "spec": {"nodeLabels": {"gpu": "a100"}}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue",
                   "metadata": {"name": "research"},
                   "spec": {"namespaceSelector": {}, "resourceGroups": [{
                       "coveredResources": ["nvidia.com/gpu"],
                       "flavors": [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "LocalQueue",
                   "metadata": {"name": "research", "namespace": "team-a"},
                   "spec": {"clusterQueue": "research"}}),
            // Names a flavor that does not exist: left out, as the operator does.
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue",
                   "metadata": {"name": "broken"},
                   "spec": {"namespaceSelector": {}, "resourceGroups": [{
                       "coveredResources": ["nvidia.com/gpu"],
                       "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}),
        ]
        .into_iter()
        .map(ApiObject::new)
        .collect()
    }

    fn job(
        name: &str,
        uid: &str,
        created: i64,
        annotations: Value,
        record: Option<Value>,
    ) -> Value {
        let mut annotations = annotations;
        let held = record.is_none();
        if let Some(record) = record {
            annotations[inject::ADMISSION_ANNOTATION] = Value::String(record.to_string());
        }
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "team-a", "uid": uid,
                         "creationTimestamp": at(created), "annotations": annotations,
                         "labels": {"arbiter.dev/queue-name": "research"}},
            "spec": {"suspend": held, "template": {"spec": {"containers": [{"name": "train",
                "resources": {"requests": {"nvidia.com/gpu": "4"}}}]}}}
        })
    }

    fn record(admitted: i64, queued: i64) -> Value {
        json!({"flavors": [{"nvidia.com/gpu": "a100"}], "counts": [1],
               "admittedAt": admitted * 1000, "queueTime": queued * 1000})
    }

    fn workload(name: &str, uid: &str, status: Value) -> api::Workload {
        serde_json::from_value(json!({
            "apiVersion": "arbiter.dev/v1alpha1", "kind": "Workload",
            "metadata": {"name": format!("job-{name}"), "namespace": "team-a",
                         "creationTimestamp": at(1_000),
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                              "uid": uid, "controller": true}]},
            "spec": {"queueName": "research", "priority": 0,
                     "podSets": [{"name": "main", "count": 1, "requests": {"nvidia.com/gpu": "4"}}]},
            "status": status
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn condition(type_: &str, status: &str, reason: &str, time: i64) -> Value {
        json!({"type": type_, "status": status, "reason": reason, "message": "",
               "lastTransitionTime": at(time)})
    }

    fn snapshot() -> Snapshot {
        let admission = json!({"clusterQueue": "research", "podSetAssignments": [
            {"name": "main", "flavors": {"nvidia.com/gpu": "a100"}, "count": 1}]});
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
            "metadata": {"name": "node-1", "labels": {"gpu": "a100"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let jobs = [
            job(
                "running",
                "u1",
                1_100,
                json!({"sim.arbiter.dev/runtime": "1h"}),
                Some(record(1_200, 1_100)),
            ),
            job("waiting", "u2", 1_300, json!({}), None),
            job("done", "u3", 500, json!({}), Some(record(600, 500))),
        ];
        Snapshot {
            taken_at: Timestamp::from_second(2_000).unwrap_or_else(|e| panic!("{e}")),
            config: config(),
            namespaces: vec![Arc::new(
                serde_json::from_value(json!({"metadata": {"name": "team-a"}}))
                    .unwrap_or_else(|e| panic!("{e}")),
            )],
            nodes: vec![node],
            workloads: vec![
                workload(
                    "running",
                    "u1",
                    json!({"admission": admission,
                    "conditions": [condition("QuotaReserved", "True", "QuotaReserved", 1_201)]}),
                ),
                workload(
                    "waiting",
                    "u2",
                    json!({"retries": 2,
                    "retryAt": at(2_030),
                    "conditions": [condition("QuotaReserved", "False", "Pending", 1_300)]}),
                ),
                workload(
                    "done",
                    "u3",
                    json!({
                    "conditions": [condition("Finished", "True", "Succeeded", 900)]}),
                ),
                // Its job is gone: its run cannot be timed.
                workload(
                    "gone",
                    "u4",
                    json!({
                    "conditions": [condition("Finished", "True", "Succeeded", 950)]}),
                ),
                // Failed runs say nothing about how long work runs.
                workload(
                    "failed",
                    "u5",
                    json!({
                    "conditions": [condition("Finished", "True", "Failed", 950)]}),
                ),
            ],
            jobs: jobs
                .into_iter()
                .map(|j| {
                    (
                        j["metadata"]["uid"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        j,
                    )
                })
                .collect(),
            bundles: Vec::new(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn admitted_waiting_and_finished_workloads_become_the_replays_start() {
        let live = live(&snapshot());
        assert_eq!(live.taken_at, "1970-01-01T00:33:20Z");
        // Time 0 is the snapshot (2,000 s).
        let names: Vec<&str> = live
            .workloads
            .iter()
            .map(|w| w.info.name.as_str())
            .collect();
        assert_eq!(names, ["running", "waiting"]);
        let running = &live.workloads[0];
        assert_eq!(running.info.kind, "Job");
        assert_eq!(running.explicit_priority, None);
        assert_eq!(
            running
                .info
                .annotations
                .get("sim.arbiter.dev/runtime")
                .map(String::as_str),
            Some("1h")
        );
        let admitted = running
            .prior
            .admission
            .as_ref()
            .unwrap_or_else(|| panic!("running is admitted"));
        // The record's times (to the millisecond), not the condition's.
        assert_eq!(admitted.at, Millis::from_secs(-800));
        assert_eq!(admitted.counts, [1]);
        assert_eq!(admitted.flavors[0]["nvidia.com/gpu"], "a100");
        assert_eq!(running.prior.queue_time, Millis::from_secs(-900));
        let waiting = &live.workloads[1];
        assert!(waiting.prior.admission.is_none());
        // Queued when its job was created; its retries and backoff carried.
        assert_eq!(waiting.prior.queue_time, Millis::from_secs(-700));
        assert_eq!(waiting.prior.carried.retries, 2);
        assert_eq!(
            waiting.prior.carried.backoff.map(|(until, _)| until),
            Some(Millis::from_secs(30))
        );
        // The one finished run with its admission known: 300 s.
        assert_eq!(
            live.finished,
            [FinishedRun {
                namespace: "team-a".into(),
                queue_name: "research".into(),
                finished_at: Millis::from_secs(-1_100),
                runtime: Millis::from_secs(300),
            }]
        );
        assert!(
            live.warnings
                .iter()
                .any(|w| w.starts_with("1 finished Workload(s)")),
            "{:?}",
            live.warnings
        );
        // The configuration and pools as the operator builds them.
        assert!(live.cluster.cluster_queue_id("research").is_some());
        assert!(live.cluster.cluster_queue_id("broken").is_none());
        assert!(
            live.warnings
                .iter()
                .any(|w| w.contains("ClusterQueue broken is inactive")),
            "{:?}",
            live.warnings
        );
        assert_eq!(live.pools.len(), 1);
        assert_eq!(live.pools[0].names, ["node-1"]);
    }

    #[test]
    fn the_clusters_topology_and_its_nodes_domains_come_into_the_replay() {
        let mut snapshot = snapshot();
        let topology = json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "Topology",
            "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}});
        snapshot.config.push(ApiObject::new(topology));
        for object in &mut snapshot.config {
            if object.object["kind"] == "ResourceFlavor" {
                object.object["spec"]["topologyName"] = json!("dc");
            }
        }
        let mut other = snapshot.nodes[0].clone();
        other.metadata.name = Some("node-2".into());
        for (node, rack) in snapshot
            .nodes
            .iter_mut()
            .chain([&mut other])
            .zip(["r1", "r2"])
        {
            node.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert("rack".into(), rack.into());
        }
        snapshot.nodes.push(other);
        let live = live(&snapshot);
        let a100 = live
            .cluster
            .flavor_id("a100")
            .unwrap_or_else(|| panic!("a100"));
        assert!(live.cluster.flavors[a100.index()].topology.is_some());
        // One pool per rack, each with its rack, as the operator builds them.
        let pools: Vec<_> = live
            .pools
            .iter()
            .zip(&live.pool_labels)
            .map(|(p, l)| (p.names.clone(), l.get("rack").cloned()))
            .collect();
        assert_eq!(
            pools,
            [
                (vec!["node-1".to_string()], Some("r1".to_string())),
                (vec!["node-2".to_string()], Some("r2".to_string()))
            ]
        );
    }

    #[test]
    fn a_workload_whose_job_is_unreadable_is_replayed_from_what_it_says() {
        let mut snapshot = snapshot();
        snapshot.jobs.clear();
        let live = live(&snapshot);
        let running = &live.workloads[0];
        // Named as its job, its pod sets and priority from the Workload.
        assert_eq!(
            (running.info.kind.as_str(), running.info.name.as_str()),
            ("Job", "running")
        );
        assert_eq!(running.info.queue_name.as_deref(), Some("research"));
        assert_eq!(running.explicit_priority, Some(0));
        assert_eq!(
            running.info.pod_sets[0].requests["nvidia.com/gpu"].to_string(),
            "4"
        );
        // Admitted when its QuotaReserved condition says; queued when the Workload was made.
        let admitted = running.prior.admission.as_ref().map(|a| a.at);
        assert_eq!(admitted, Some(Millis::from_secs(-799)));
        assert_eq!(running.prior.queue_time, Millis::from_secs(-1_000));
        assert!(live.finished.is_empty());
        assert!(
            live.warnings
                .iter()
                .any(|w| w.starts_with("2 finished Workload(s)")),
            "{:?}",
            live.warnings
        );
    }
}
