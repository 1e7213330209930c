//! What admission and eviction change in a job object, as pure JSON
//! transforms: admission injects each pod set's flavor node labels (into
//! the template's `nodeSelector`; for a pod set placed by topology, its
//! domain's labels too, `crate::domain`) and tolerations, records the admission in
//! an annotation, and releases the hold; eviction holds the job again and
//! takes out exactly what admission put in, so the template is as the user
//! wrote it. The annotation is also how a restarted operator reads back
//! what is admitted (the core's `restore`), so the object is the record.
//!
//! Nothing here talks to the API; `driver` writes the result with the
//! object's `resourceVersion`, so a write is never applied twice.

use std::collections::BTreeMap;

use arbiter_core::jobs::Integration;
use k8s_openapi::api::core::v1::Toleration;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The annotation holding the admission of a released job.
pub const ADMISSION_ANNOTATION: &str = "arbiter.dev/admission";

/// The scheduling gate on the pods of a pod set placed per card: they wait
/// for the operator to give each its node and cards (`crate::ungate`).
pub const PLACEMENT_GATE: &str = "arbiter.dev/placement";

/// The most (pod set, Node) places an admission record holds (about
/// 150 bytes each, so the record stays well inside the 256 KiB Kubernetes
/// allows a job's annotations); a job placed per card on more Nodes is not
/// gated.
pub const MAX_RECORDED_PLACEMENTS: usize = 1000;

/// On a gated pod set's pods: the uid of the job they belong to.
pub const JOB_UID_LABEL: &str = "arbiter.dev/job-uid";

/// On a gated pod set's pods: the pod set's index in the job.
pub const POD_SET_LABEL: &str = "arbiter.dev/pod-set";

/// One pod set's admission, as the job needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodSetAdmission {
    /// Where the pod template sits in the job (`None`: nothing to inject).
    pub template_path: Option<String>,
    /// The union of the node labels of the pod set's flavors.
    pub node_labels: BTreeMap<String, String>,
    /// The tolerations of the pod set's flavors.
    pub tolerations: Vec<Toleration>,
    /// Placed per card: its pods are gated until each is given its node
    /// and cards.
    pub gated: bool,
}

/// The admission as recorded on the job (`arbiter.dev/admission`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    /// Per pod set (in the integration's order): resource → flavor.
    pub flavors: Vec<BTreeMap<String, String>>,
    /// Pods admitted per pod set.
    pub counts: Vec<u32>,
    /// Milliseconds since the Unix epoch.
    pub admitted_at: i64,
    /// Milliseconds since the Unix epoch.
    pub queue_time: i64,
    /// What was injected, to take out again on eviction.
    #[serde(default)]
    pub injected: Vec<Injected>,
    /// Where the pods of gated pod sets and of pod sets placed by topology
    /// go (the core's placements of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<RecordedPlacement>,
}

/// Pods of one pod set on one Node, and the cards they hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedPlacement {
    pub pod_set: u32,
    pub flavor: String,
    pub node: String,
    pub pods: u32,
    /// Summed over the pods, one entry per card.
    pub cards: Vec<RecordedCard>,
}

/// What placed pods hold of one card.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedCard {
    pub resource: String,
    pub card: u16,
    /// A Kubernetes quantity.
    pub amount: String,
}

/// What admission changed in one pod template.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Injected {
    pub template_path: String,
    /// Each node-selector key written, with the value it had before (`None`: absent).
    pub node_selector: BTreeMap<String, Option<String>>,
    /// How many tolerations were appended at the end of the list.
    pub tolerations: usize,
    /// The placement gate and the pod labels were added.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gated: bool,
}

/// Why a job could not be changed; the object is then left as it was.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum InjectError {
    #[error("{job}: {problem}")]
    Job { job: String, problem: String },
}

fn job_name(object: &Value) -> String {
    let meta = |k: &str| {
        object
            .pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("job");
    format!("{kind} {}/{}", meta("namespace"), meta("name"))
}

/// The object at a dot-separated path, created as empty objects on the way.
fn object_at<'a>(root: &'a mut Value, path: &str) -> Result<&'a mut Map<String, Value>, String> {
    let mut here = root;
    for key in path.split('.') {
        let Value::Object(map) = here else {
            return Err(format!(
                "`{path}`: `{key}` is inside a value that is not an object"
            ));
        };
        here = map
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if here.is_null() {
            *here = Value::Object(Map::new());
        }
    }
    match here {
        Value::Object(map) => Ok(map),
        other => Err(format!("`{path}` is {other}, not an object")),
    }
}

/// What the job needs to know of workload `id`'s admission: per pod set
/// (with its template path from `paths`) the flavors' node labels and
/// tolerations — and for a pod set placed by topology, its domain's
/// labels (`crate::domain`; `hostname` gives a Node's hostname label by
/// its name) — and the record to keep on the job.
pub fn admission_of(
    scheduler: &arbiter_core::scheduler::Scheduler,
    id: arbiter_core::scheduler::WorkloadId,
    paths: &[Option<String>],
    hostname: &dyn Fn(&str) -> String,
) -> Option<(Vec<PodSetAdmission>, Recorded)> {
    let cluster = scheduler.cluster();
    let entry = scheduler.entry(id);
    let admission = entry.admission.as_ref()?;
    let mut pod_sets = Vec::new();
    let mut flavors = Vec::new();
    let mut placements = Vec::new();
    for (index, assigned) in admission.pod_sets.iter().enumerate() {
        // Gated where its pods hold cards and every node they are on has a
        // name (the operator's Nodes always do).
        let mine: Vec<_> = admission
            .placements
            .iter()
            .filter(|p| p.pod_set as usize == index)
            .collect();
        let gated = mine.iter().any(|p| !p.cards.is_empty())
            && mine
                .iter()
                .all(|p| scheduler.node_name(p.flavor, p.node).is_some());
        // Kept to the domain it was placed in; its places recorded, so a
        // restart reads the same domain back.
        let domain = crate::domain::of_pod_set(scheduler, id, index, hostname);
        if gated || domain.is_some() {
            placements.extend(mine.iter().map(|p| {
                RecordedPlacement {
                    pod_set: p.pod_set,
                    flavor: cluster.flavors[p.flavor.index()].name.clone(),
                    node: scheduler
                        .node_name(p.flavor, p.node)
                        .unwrap_or_default()
                        .to_string(),
                    pods: p.pods,
                    cards: p
                        .cards
                        .iter()
                        .map(|u| RecordedCard {
                            resource: cluster.resource_name(u.resource).to_string(),
                            card: u.card,
                            amount: u.amount.to_quantity_string(),
                        })
                        .collect(),
                }
            }));
        }
        let mut node_labels = domain.unwrap_or_default();
        let mut tolerations: Vec<Toleration> = Vec::new();
        let mut names = BTreeMap::new();
        for &(resource, flavor) in &assigned.flavors {
            let flavor = &cluster.flavors[flavor.index()];
            node_labels.extend(flavor.node_labels.clone());
            for t in &flavor.tolerations {
                if !tolerations.contains(t) {
                    tolerations.push(t.clone());
                }
            }
            names.insert(
                cluster.resource_name(resource).to_string(),
                flavor.name.clone(),
            );
        }
        pod_sets.push(PodSetAdmission {
            template_path: paths.get(index).cloned().flatten(),
            node_labels,
            tolerations,
            gated,
        });
        flavors.push(names);
    }
    if placements.len() > MAX_RECORDED_PLACEMENTS {
        // The record would outgrow the job's annotations: its pods go
        // where kube-scheduler puts them, on the flavor's nodes (a pod
        // set placed by topology still inside its domain).
        tracing::warn!(
            workload = %format!("{}/{}", entry.workload.namespace, entry.workload.name),
            nodes = placements.len(),
            "placed per card on more nodes than the admission record holds ({MAX_RECORDED_PLACEMENTS}); its pods are not given cards"
        );
        placements.clear();
        for pod_set in &mut pod_sets {
            pod_set.gated = false;
        }
    }
    let record = Recorded {
        flavors,
        counts: admission.counts.clone(),
        admitted_at: admission.at.0,
        queue_time: entry.queue_time.0,
        injected: Vec::new(),
        placements,
    };
    Some((pod_sets, record))
}

/// Injects, records and releases. `pod_sets` are in the integration's order.
pub fn admit(
    object: &mut Value,
    integration: &Integration,
    pod_sets: &[PodSetAdmission],
    mut record: Recorded,
    sealer: Option<&crate::seal::Sealer>,
) -> Result<(), InjectError> {
    let mut changed = object.clone();
    // An earlier admission whose restore was never written is undone first,
    // so what is injected now is recorded against the user's values.
    restore(&mut changed, integration)?;
    let fail = |problem: String| InjectError::Job {
        job: job_name(object),
        problem,
    };
    record.injected.clear();
    let uid = object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    for (index, pod_set) in pod_sets.iter().enumerate() {
        let Some(path) = &pod_set.template_path else {
            continue;
        };
        if pod_set.gated {
            if uid.is_empty() {
                return Err(fail("it has no uid to label its pods with".into()));
            }
            let labels =
                object_at(&mut changed, &format!("{path}.metadata.labels")).map_err(fail)?;
            labels.insert(JOB_UID_LABEL.into(), Value::String(uid.clone()));
            labels.insert(POD_SET_LABEL.into(), Value::String(index.to_string()));
        }
        let spec = object_at(&mut changed, &format!("{path}.spec")).map_err(fail)?;
        let mut injected = Injected {
            template_path: path.clone(),
            node_selector: BTreeMap::new(),
            tolerations: 0,
            gated: pod_set.gated,
        };
        if pod_set.gated {
            let gates = spec
                .entry("schedulingGates")
                .or_insert_with(|| Value::Array(Vec::new()));
            if gates.is_null() {
                *gates = Value::Array(Vec::new());
            }
            let Value::Array(gates) = gates else {
                return Err(fail(format!("`{path}.spec.schedulingGates` is not a list")));
            };
            if !gates.iter().any(|g| g["name"] == PLACEMENT_GATE) {
                gates.push(serde_json::json!({"name": PLACEMENT_GATE}));
            }
        }
        if !pod_set.node_labels.is_empty() {
            let selector = spec
                .entry("nodeSelector")
                .or_insert_with(|| Value::Object(Map::new()));
            if selector.is_null() {
                *selector = Value::Object(Map::new());
            }
            let Value::Object(selector) = selector else {
                return Err(fail(format!("`{path}.spec.nodeSelector` is not a map")));
            };
            for (key, value) in &pod_set.node_labels {
                let before = selector
                    .insert(key.clone(), Value::String(value.clone()))
                    .and_then(|v| v.as_str().map(str::to_string));
                injected.node_selector.insert(key.clone(), before);
            }
        }
        if !pod_set.tolerations.is_empty() {
            let list = spec
                .entry("tolerations")
                .or_insert_with(|| Value::Array(Vec::new()));
            if list.is_null() {
                *list = Value::Array(Vec::new());
            }
            let Value::Array(list) = list else {
                return Err(fail(format!("`{path}.spec.tolerations` is not a list")));
            };
            for toleration in &pod_set.tolerations {
                list.push(serde_json::to_value(toleration).unwrap_or(Value::Null));
                injected.tolerations += 1;
            }
        }
        record.injected.push(injected);
    }
    let text = serde_json::to_string(&record).map_err(|e| fail(e.to_string()))?;
    let annotations = object_at(&mut changed, "metadata.annotations").map_err(fail)?;
    match sealer {
        Some(sealer) if !uid.is_empty() => annotations.insert(
            crate::seal::SEAL_ANNOTATION.to_string(),
            Value::String(sealer.seal(&uid, &text)),
        ),
        _ => annotations.remove(crate::seal::SEAL_ANNOTATION),
    };
    annotations.insert(ADMISSION_ANNOTATION.to_string(), Value::String(text));
    integration
        .set_held(&mut changed, false)
        .map_err(|e| fail(e.to_string()))?;
    *object = changed;
    Ok(())
}

/// The recorded placements as the core reads them back (`Restored`); a
/// card amount that is not a quantity is left out, so the record no longer
/// holds and the pods are placed again.
pub fn placed_pods(record: &Recorded) -> Vec<arbiter_core::scheduler::PlacedPods> {
    record
        .placements
        .iter()
        .map(|p| arbiter_core::scheduler::PlacedPods {
            pod_set: p.pod_set,
            flavor: p.flavor.clone(),
            node: p.node.clone(),
            pods: p.pods,
            cards: p
                .cards
                .iter()
                .filter_map(|c| {
                    let amount = arbiter_core::model::Amount::parse(&c.amount).ok()?;
                    Some((c.resource.clone(), c.card, amount))
                })
                .collect(),
        })
        .collect()
}

/// The admission recorded on a job, if any (`Err`: the annotation is there
/// but unreadable — someone edited it).
pub fn recorded(object: &Value) -> Option<Result<Recorded, String>> {
    let text = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ADMISSION_ANNOTATION))?
        .as_str()?;
    Some(serde_json::from_str(text).map_err(|e| {
        format!("annotation {ADMISSION_ANNOTATION} is not an admission Arbiter wrote: {e}")
    }))
}

/// Holds the job again (the first of eviction's two writes: Kubernetes
/// lets a pod template's scheduling fields change only while the job is
/// already suspended, so [`restore`] follows as a second write).
pub fn hold(object: &mut Value, integration: &Integration) -> Result<(), InjectError> {
    let mut changed = object.clone();
    integration
        .set_held(&mut changed, true)
        .map_err(|e| InjectError::Job {
            job: job_name(object),
            problem: e.to_string(),
        })?;
    *object = changed;
    Ok(())
}

/// Holds the job and restores its template in one change: [`hold`] then
/// [`restore`] (for objects not yet written, and the tests).
pub fn evict(object: &mut Value, integration: &Integration) -> Result<(), InjectError> {
    let mut changed = object.clone();
    hold(&mut changed, integration)?;
    restore(&mut changed, integration)?;
    *object = changed;
    Ok(())
}

/// Takes out what admission injected (a value the user changed since is
/// left alone) and drops the record; the hold is not touched.
pub fn restore(object: &mut Value, _integration: &Integration) -> Result<(), InjectError> {
    let mut changed = object.clone();
    let fail = |problem: String| InjectError::Job {
        job: job_name(object),
        problem,
    };
    if let Some(Ok(record)) = recorded(object) {
        for injected in &record.injected {
            let spec = object_at(&mut changed, &format!("{}.spec", injected.template_path))
                .map_err(fail)?;
            if let Some(Value::Object(selector)) = spec.get_mut("nodeSelector") {
                for (key, before) in &injected.node_selector {
                    match before {
                        Some(value) => {
                            selector.insert(key.clone(), Value::String(value.clone()));
                        }
                        None => {
                            selector.remove(key);
                        }
                    }
                }
                if selector.is_empty() {
                    spec.remove("nodeSelector");
                }
            }
            if let Some(Value::Array(list)) = spec.get_mut("tolerations") {
                let keep = list.len().saturating_sub(injected.tolerations);
                list.truncate(keep);
                if list.is_empty() {
                    spec.remove("tolerations");
                }
            }
            if injected.gated {
                if let Some(Value::Array(gates)) = spec.get_mut("schedulingGates") {
                    gates.retain(|g| g["name"] != PLACEMENT_GATE);
                    if gates.is_empty() {
                        spec.remove("schedulingGates");
                    }
                }
                let template = object_at(&mut changed, &injected.template_path).map_err(fail)?;
                if let Some(Value::Object(meta)) = template.get_mut("metadata") {
                    if let Some(Value::Object(labels)) = meta.get_mut("labels") {
                        labels.remove(JOB_UID_LABEL);
                        labels.remove(POD_SET_LABEL);
                        if labels.is_empty() {
                            meta.remove("labels");
                        }
                    }
                    if meta.is_empty() {
                        template.remove("metadata");
                    }
                }
            }
        }
    }
    if let Some(Value::Object(meta)) = changed.get_mut("metadata") {
        if let Some(Value::Object(annotations)) = meta.get_mut("annotations") {
            annotations.remove(ADMISSION_ANNOTATION);
            annotations.remove(crate::seal::SEAL_ANNOTATION);
            if annotations.is_empty() {
                meta.remove("annotations");
            }
        }
    }
    *object = changed;
    Ok(())
}

/// Annotation on a job Arbiter created anew to run a failed one again
/// (`retryPolicy`): the uid of the job it replaces.
pub const RETRY_OF_ANNOTATION: &str = "arbiter.dev/retry-of";
/// The uid of the failed job `job` was created anew in place of, if it was.
pub fn retry_of(job: &Value) -> Option<String> {
    job.pointer("/metadata/annotations")?
        .get(RETRY_OF_ANNOTATION)?
        .as_str()
        .map(str::to_string)
}

/// Annotation beside [`RETRY_OF_ANNOTATION`]: the how-manieth run again it is.
pub const RETRIES_ANNOTATION: &str = "arbiter.dev/retries";

/// The metadata a job created anew keeps: what its author wrote.
const KEPT_METADATA: &[&str] = &[
    "name",
    "namespace",
    "labels",
    "annotations",
    "ownerReferences",
];

/// The job to create in place of `failed`, to run it again (a failed job
/// cannot be run again in Kubernetes: its controller is done with it):
/// the same name, labels, annotations, owners and spec, held, with what
/// admission injected taken out and what was filled in at creation (the
/// integration's `generated`) left out; no status. It carries the uid it
/// replaces and `retries`.
pub fn recreated(
    failed: &Value,
    integration: &Integration,
    retries: u32,
) -> Result<Value, InjectError> {
    let mut fresh = failed.clone();
    restore(&mut fresh, integration)?;
    hold(&mut fresh, integration)?;
    let uid = failed
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if let Some(root) = fresh.as_object_mut() {
        root.remove("status");
        if let Some(Value::Object(fields)) = root.get_mut("metadata") {
            fields.retain(|k, _| KEPT_METADATA.contains(&k.as_str()));
            let annotations = fields
                .entry("annotations")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Value::Object(annotations) = annotations {
                annotations.insert(RETRY_OF_ANNOTATION.into(), Value::String(uid));
                annotations.insert(
                    RETRIES_ANNOTATION.into(),
                    Value::String(retries.to_string()),
                );
            }
        }
    }
    for pointer in &integration.spec.generated {
        remove_pruning(&mut fresh, pointer);
    }
    Ok(fresh)
}

/// Removes the value at JSON pointer `pointer`, and each object above it
/// (below the root's own fields) that this leaves empty.
fn remove_pruning(object: &mut Value, pointer: &str) {
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return;
    };
    let key = key.replace("~1", "/").replace("~0", "~");
    let Some(Value::Object(fields)) = object.pointer_mut(parent) else {
        return;
    };
    if fields.remove(&key).is_none() {
        return;
    }
    if fields.is_empty() && parent.matches('/').count() > 1 {
        remove_pruning(object, parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_core::jobs::Integrations;
    use serde_json::json;

    fn job() -> Value {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team-a",
                         "labels": {"arbiter.dev/queue-name": "q"}},
            "spec": {"suspend": true, "template": {"spec": {
                "nodeSelector": {"zone": "a"},
                "tolerations": [{"key": "own", "operator": "Exists"}],
                "containers": [{"name": "main", "image": "x"}]}}}
        })
    }

    fn a100() -> PodSetAdmission {
        PodSetAdmission {
            template_path: Some("spec.template".into()),
            node_labels: [("gpu".to_string(), "a100".to_string())].into(),
            tolerations: vec![Toleration {
                key: Some("nvidia.com/gpu".into()),
                operator: Some("Exists".into()),
                effect: Some("NoSchedule".into()),
                ..Default::default()
            }],
            gated: false,
        }
    }

    fn record() -> Recorded {
        Recorded {
            flavors: vec![[("nvidia.com/gpu".to_string(), "a100".to_string())].into()],
            counts: vec![1],
            admitted_at: 2_000,
            queue_time: 1_000,
            injected: Vec::new(),
            placements: Vec::new(),
        }
    }

    #[test]
    fn admission_injects_records_and_releases_and_eviction_restores_the_template() {
        let integrations = Integrations::builtin();
        let integration = integrations.find("batch/v1", "Job").unwrap();
        let original = job();
        let mut object = original.clone();
        admit(&mut object, integration, &[a100()], record(), None).unwrap();
        assert_eq!(object["spec"]["suspend"], json!(false));
        let spec = &object["spec"]["template"]["spec"];
        assert_eq!(spec["nodeSelector"], json!({"zone": "a", "gpu": "a100"}));
        assert_eq!(spec["tolerations"].as_array().unwrap().len(), 2);
        let back = recorded(&object).unwrap().unwrap();
        assert_eq!(back.counts, vec![1]);
        assert_eq!(back.injected[0].node_selector["gpu"], None);

        evict(&mut object, integration).unwrap();
        assert_eq!(object, original);
    }

    #[test]
    fn a_pod_set_placed_per_card_is_gated_and_labelled_and_eviction_takes_it_all_out() {
        let integrations = Integrations::builtin();
        let integration = integrations.find("batch/v1", "Job").unwrap();
        let mut original = job();
        original["metadata"]["uid"] = json!("0b5c");
        original["spec"]["template"]["spec"]["schedulingGates"] = json!([{"name": "users"}]);
        let mut object = original.clone();
        let gated = PodSetAdmission {
            gated: true,
            ..a100()
        };
        admit(
            &mut object,
            integration,
            std::slice::from_ref(&gated),
            record(),
            None,
        )
        .unwrap();
        let template = &object["spec"]["template"];
        assert_eq!(
            template["metadata"]["labels"],
            json!({JOB_UID_LABEL: "0b5c", POD_SET_LABEL: "0"})
        );
        assert_eq!(
            template["spec"]["schedulingGates"],
            json!([{"name": "users"}, {"name": PLACEMENT_GATE}])
        );
        assert!(recorded(&object).unwrap().unwrap().injected[0].gated);
        evict(&mut object, integration).unwrap();
        assert_eq!(object, original);
        // No uid to label the pods with: refused, the job left alone.
        let mut object = job();
        let err = admit(&mut object, integration, &[gated], record(), None).unwrap_err();
        assert!(err.to_string().contains("no uid"), "{err}");
        assert_eq!(object, job());
    }

    /// A scheduler on `nodes` Nodes of 2 cards of 1000 gpu-milli that
    /// admitted one job of `pods` pods asking `milli` each.
    fn admitted_shared(
        nodes: u32,
        pods: u32,
        milli: i64,
    ) -> (
        arbiter_core::scheduler::Scheduler,
        arbiter_core::scheduler::WorkloadId,
    ) {
        use arbiter_core::jobs::{JobInfo, PodSetInfo};
        use arbiter_core::model::Amount;
        use arbiter_core::scheduler::capacity::{DeviceSpec, PoolSpec};
        use arbiter_core::scheduler::hooks::DefaultHooks;
        use arbiter_core::scheduler::intake::{intake, Intake};
        use arbiter_core::scheduler::{Input, Scheduler};
        let objects = [
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ResourceFlavor",
                   "metadata": {"name": "t4"}, "spec": {"nodeLabels": {"gpu": "t4"}}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
                   "spec": {"resourceGroups": [{"coveredResources": ["example.com/gpu-milli"],
                     "flavors": [{"name": "t4", "resources": [{"name": "example.com/gpu-milli", "nominalQuota": 10000000}]}]}]}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "LocalQueue",
                   "metadata": {"name": "q", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}),
        ]
        .map(crate::config::ApiObject::new);
        let cluster = crate::config::build(&objects, &Default::default(), [])
            .unwrap_or_else(|e| panic!("{e:?}"))
            .cluster;
        let milli_id = cluster.resource_id("example.com/gpu-milli").unwrap();
        let pool = PoolSpec {
            flavor: cluster.flavor_id("t4").unwrap(),
            nodes,
            allocatable: vec![(milli_id, Amount::from_units(2000))],
            min_nodes: nodes,
            max_nodes: nodes,
            devices: vec![
                DeviceSpec::split(milli_id, "gpu-milli", Amount::from_units(2000), 2).unwrap(),
            ],
            names: (0..nodes).map(|n| format!("n-{n:05}")).collect(),
        };
        let info = JobInfo {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            namespace: "team-a".into(),
            name: "train".into(),
            labels: Default::default(),
            annotations: Default::default(),
            queue_name: Some("q".into()),
            priority_class: None,
            pod_sets: vec![PodSetInfo {
                name: "main".into(),
                count: pods,
                min_count: None,
                requests: [(
                    "example.com/gpu-milli".to_string(),
                    Amount::from_units(milli),
                )]
                .into(),
                node_selector: Default::default(),
                required_node_affinity: None,
                tolerations: Vec::new(),
                template_path: Some("spec.template".into()),
                topology: None,
            }],
        };
        let cluster = std::sync::Arc::new(cluster);
        let Intake::Queued(workload) = intake(&cluster, &info, None) else {
            panic!("not queued")
        };
        let mut scheduler = Scheduler::new(cluster, &[pool]);
        let step = scheduler.step(
            arbiter_core::model::Millis(1),
            vec![Input::Submit(workload)],
            &mut DefaultHooks,
        );
        let id = step.submitted[0];
        assert!(scheduler.entry(id).admission.is_some(), "admitted");
        (scheduler, id)
    }

    /// A Topology (block, rack, host) on flavor `t4`; Nodes a, b in rack
    /// b1/r1, c in b1/r2, one 4-GPU pod each; `pods` pods asking `request`
    /// admitted.
    fn admitted_by_topology(
        pods: u32,
        request: arbiter_core::model::api::TopologyRequest,
    ) -> (
        arbiter_core::scheduler::Scheduler,
        arbiter_core::scheduler::WorkloadId,
    ) {
        use arbiter_core::jobs::{JobInfo, PodSetInfo};
        use arbiter_core::model::Amount;
        use arbiter_core::scheduler::hooks::DefaultHooks;
        use arbiter_core::scheduler::intake::{intake, Intake};
        use arbiter_core::scheduler::{Input, Scheduler};
        let objects = [
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "Topology", "metadata": {"name": "dc"},
                   "spec": {"levels": [{"nodeLabel": "block"}, {"nodeLabel": "rack"},
                                       {"nodeLabel": "kubernetes.io/hostname"}]}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ResourceFlavor",
                   "metadata": {"name": "t4"}, "spec": {"nodeLabels": {"gpu": "t4"}, "topologyName": "dc"}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
                   "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                     "flavors": [{"name": "t4", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 64}]}]}]}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "LocalQueue",
                   "metadata": {"name": "q", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}),
        ]
        .map(crate::config::ApiObject::new);
        let cluster =
            crate::config::build(&objects, &Default::default(), ["nvidia.com/gpu".into()])
                .unwrap_or_else(|e| panic!("{e:?}"))
                .cluster;
        let nodes: Vec<k8s_openapi::api::core::v1::Node> = [("a", "r1"), ("b", "r1"), ("c", "r2")]
            .map(|(name, rack)| {
                serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": {"gpu": "t4", "block": "b1", "rack": rack}},
                    "status": {"allocatable": {"nvidia.com/gpu": "4"}}
                }))
                .unwrap()
            })
            .to_vec();
        let built = crate::config::pools(&cluster, &nodes);
        let info = JobInfo {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            namespace: "team-a".into(),
            name: "train".into(),
            labels: Default::default(),
            annotations: Default::default(),
            queue_name: Some("q".into()),
            priority_class: None,
            pod_sets: vec![PodSetInfo {
                name: "main".into(),
                count: pods,
                min_count: None,
                requests: [("nvidia.com/gpu".to_string(), Amount::from_units(4))].into(),
                node_selector: Default::default(),
                required_node_affinity: None,
                tolerations: Vec::new(),
                template_path: Some("spec.template".into()),
                topology: Some(request),
            }],
        };
        let cluster = std::sync::Arc::new(cluster);
        let Intake::Queued(workload) = intake(&cluster, &info, None) else {
            panic!("not queued")
        };
        let mut scheduler = Scheduler::new(cluster, &built.pools);
        scheduler.label_pools(&built.labels);
        let step = scheduler.step(
            arbiter_core::model::Millis(1),
            vec![Input::Submit(workload)],
            &mut DefaultHooks,
        );
        let id = step.submitted[0];
        assert!(scheduler.entry(id).admission.is_some(), "admitted");
        (scheduler, id)
    }

    #[test]
    fn a_pod_set_placed_by_topology_is_kept_to_its_domain_and_its_places_recorded() {
        use arbiter_core::model::api::TopologyRequest;
        let paths = [Some("spec.template".to_string())];
        let hostname = |n: &str| format!("host-{n}");
        let (scheduler, id) = admitted_by_topology(2, TopologyRequest::Required("rack".into()));
        let (pod_sets, record) = admission_of(&scheduler, id, &paths, &hostname).unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            pod_sets[0].node_labels,
            labels(&[("gpu", "t4"), ("block", "b1"), ("rack", "r1")])
        );
        assert!(!pod_sets[0].gated);
        let placed: Vec<_> = record
            .placements
            .iter()
            .map(|p| (p.node.as_str(), p.pods))
            .collect();
        assert_eq!(placed, [("a", 1), ("b", 1)]);
        // Injected into the template and taken out again on eviction.
        let integrations = Integrations::builtin();
        let integration = integrations.find("batch/v1", "Job").unwrap();
        let original = job();
        let mut object = original.clone();
        admit(&mut object, integration, &pod_sets, record, None).unwrap();
        assert_eq!(
            object["spec"]["template"]["spec"]["nodeSelector"],
            json!({"zone": "a", "gpu": "t4", "block": "b1", "rack": "r1"})
        );
        evict(&mut object, integration).unwrap();
        assert_eq!(object, original);

        // One host holds one pod: a preferred host level falls back to the
        // rack, and only the rack is selected.
        let host = TopologyRequest::Preferred("kubernetes.io/hostname".into());
        let (scheduler, id) = admitted_by_topology(2, host.clone());
        let (pod_sets, _) = admission_of(&scheduler, id, &paths, &hostname).unwrap();
        assert_eq!(
            pod_sets[0].node_labels,
            labels(&[("gpu", "t4"), ("block", "b1"), ("rack", "r1")])
        );
        // One pod: its host, by the Node's hostname label.
        let (scheduler, id) = admitted_by_topology(1, host.clone());
        let (pod_sets, _) = admission_of(&scheduler, id, &paths, &hostname).unwrap();
        let host_of = pod_sets[0].node_labels["kubernetes.io/hostname"].clone();
        assert!(
            host_of.starts_with("host-"),
            "{:?}",
            pod_sets[0].node_labels
        );
        // Three pods: no rack holds them; the block does.
        let (scheduler, id) = admitted_by_topology(3, host);
        let (pod_sets, record) = admission_of(&scheduler, id, &paths, &hostname).unwrap();
        assert_eq!(
            pod_sets[0].node_labels,
            labels(&[("gpu", "t4"), ("block", "b1")])
        );
        assert_eq!(record.placements.len(), 3);
    }

    #[test]
    fn a_pod_set_placed_per_card_is_gated_with_its_places_recorded_unless_too_many() {
        // Three pods of two whole cards: one per Node, both its cards.
        let (scheduler, id) = admitted_shared(4, 3, 2000);
        let paths = [Some("spec.template".to_string())];
        let (pod_sets, record) = admission_of(&scheduler, id, &paths, &|n| n.to_string()).unwrap();
        assert!(pod_sets[0].gated);
        assert_eq!(record.placements.len(), 3);
        assert_eq!(record.placements[0].node, "n-00000");
        assert_eq!(record.placements[0].cards.len(), 2);
        let restored = placed_pods(&record);
        assert_eq!(
            restored[0].cards[1].2,
            arbiter_core::model::Amount::from_units(1000)
        );
        // One Node per pod past the cap: not gated, nothing recorded.
        let many = MAX_RECORDED_PLACEMENTS as u32 + 1;
        let (scheduler, id) = admitted_shared(many, many, 2000);
        let (pod_sets, record) = admission_of(&scheduler, id, &paths, &|n| n.to_string()).unwrap();
        assert!(!pod_sets[0].gated);
        assert!(record.placements.is_empty());
    }

    #[test]
    fn a_second_admission_over_an_unrestored_first_records_the_users_values() {
        let integrations = Integrations::builtin();
        let integration = integrations.find("batch/v1", "Job").unwrap();
        let original = job();
        let mut object = original.clone();
        admit(&mut object, integration, &[a100()], record(), None).unwrap();
        hold(&mut object, integration).unwrap();
        // The restore write was lost; the job is admitted again.
        admit(&mut object, integration, &[a100()], record(), None).unwrap();
        let spec = &object["spec"]["template"]["spec"];
        assert_eq!(spec["tolerations"].as_array().unwrap().len(), 2);
        evict(&mut object, integration).unwrap();
        assert_eq!(object, original);
    }

    #[test]
    fn a_label_the_user_already_set_is_put_back_on_eviction() {
        let integrations = Integrations::builtin();
        let integration = integrations.find("batch/v1", "Job").unwrap();
        let mut original = job();
        original["spec"]["template"]["spec"]["nodeSelector"]["gpu"] = json!("any");
        let mut object = original.clone();
        admit(&mut object, integration, &[a100()], record(), None).unwrap();
        assert_eq!(
            object["spec"]["template"]["spec"]["nodeSelector"]["gpu"],
            json!("a100")
        );
        evict(&mut object, integration).unwrap();
        assert_eq!(object, original);
    }

    #[test]
    fn a_template_that_is_not_an_object_is_refused_and_the_job_left_alone() {
        let integrations = Integrations::builtin();
        let integration = integrations.find("batch/v1", "Job").unwrap();
        let mut object = job();
        object["spec"]["template"] = json!("nonsense");
        let before = object.clone();
        let err = admit(&mut object, integration, &[a100()], record(), None).unwrap_err();
        assert!(err.to_string().contains("Job team-a/train"), "{err}");
        assert_eq!(object, before);
    }

    #[test]
    fn an_edited_annotation_reads_as_an_error() {
        let mut object = job();
        object["metadata"]["annotations"] = json!({ADMISSION_ANNOTATION: "{not json"});
        assert!(recorded(&object).unwrap().is_err());
        assert!(recorded(&job()).is_none());
    }
}

#[cfg(test)]
mod recreate_tests {
    use super::*;
    use arbiter_core::jobs::Integrations;
    use serde_json::json;

    #[test]
    fn a_failed_job_is_created_anew_held_as_its_author_wrote_it() {
        let integrations = Integrations::builtin();
        let job_kind = integrations.find("batch/v1", "Job").unwrap();
        let failed = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team-a", "uid": "u-1",
                         "resourceVersion": "42", "creationTimestamp": "2026-12-01T00:00:00Z",
                         "generation": 2, "managedFields": [{"manager": "kubectl"}],
                         "labels": {"arbiter.dev/queue-name": "q"},
                         "annotations": {"note": "mine"}},
            "spec": {"suspend": false, "backoffLimit": 0,
                     "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}},
                     "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u-1",
                                                          "batch.kubernetes.io/job-name": "train",
                                                          "controller-uid": "u-1", "job-name": "train",
                                                          "team": "a"}},
                                  "spec": {"containers": [{"name": "main", "image": "x"}]}}},
            "status": {"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]}
        });
        let fresh = recreated(&failed, job_kind, 1).unwrap();
        assert_eq!(
            fresh,
            json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "train", "namespace": "team-a",
                             "labels": {"arbiter.dev/queue-name": "q"},
                             "annotations": {"note": "mine", "arbiter.dev/retry-of": "u-1", "arbiter.dev/retries": "1"}},
                "spec": {"suspend": true, "backoffLimit": 0,
                         "template": {"metadata": {"labels": {"team": "a"}},
                                      "spec": {"containers": [{"name": "main", "image": "x"}]}}}
            })
        );
        // A selector of the author's own (manualSelector) stays.
        let mut manual = failed.clone();
        manual["spec"]["manualSelector"] = json!(true);
        manual["spec"]["selector"] = json!({"matchLabels": {"team": "a"}});
        let fresh = recreated(&manual, job_kind, 2).unwrap();
        assert_eq!(
            fresh["spec"]["selector"],
            json!({"matchLabels": {"team": "a"}})
        );
    }
}
