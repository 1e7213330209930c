//! Turns what a pod-set expression yielded (JSON) — or a `Workload`'s pod
//! sets — into checked [`PodSetInfo`]s: whole-number counts, a real
//! `PodTemplateSpec`, per-pod requests as Kubernetes computes them.
//!
//! Shape errors name the job, the pod set and the field; nothing is guessed
//! or dropped (an unknown key is an error, so a typo in an integration's
//! expression shows at once). Pure; called by `jobs::Integration` and
//! `jobs::job_info_from_workload`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Map, Value};

use super::requests::parse_quantities;
use super::{describe, pod_requests, JobError, PodSetInfo};
use crate::model::api::TopologyRequest;
use crate::model::Amount;

const KEYS: [&str; 6] = [
    "name",
    "count",
    "minCount",
    "template",
    "requests",
    "templatePath",
];

/// The pod sets of `job` from the expression's `output`, each with its
/// template's topology request.
pub(super) fn from_output(
    job: &str,
    integration: &str,
    output: Value,
) -> Result<Vec<PodSetInfo>, JobError> {
    let Value::Array(items) = output else {
        return Err(JobError::Evaluate {
            job: job.to_string(),
            integration: integration.to_string(),
            message: format!(
                "it yielded {}, expected a list of pod sets",
                describe(&output)
            ),
        });
    };
    if items.is_empty() {
        return Err(JobError::NoPodSets {
            job: job.to_string(),
            integration: integration.to_string(),
        });
    }
    let mut seen = BTreeSet::new();
    let mut pod_sets = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let topology = topology(&item);
        let mut pod_set = one(job, index, item)?;
        pod_set.topology = topology;
        if !seen.insert(pod_set.name.clone()) {
            return Err(bad(
                job,
                &pod_set.name,
                "name",
                "is used by two pod sets; pod-set names must be unique within a job".into(),
            ));
        }
        pod_sets.push(pod_set);
    }
    Ok(pod_sets)
}

/// The topology request of a pod set item's template annotations (Kueue's
/// `podset-required-topology` / `podset-preferred-topology`), if any.
fn topology(item: &Value) -> Option<TopologyRequest> {
    let annotations = item.pointer("/template/metadata/annotations")?;
    TopologyRequest::from_annotations(|key| annotations.get(key)?.as_str())
}

fn bad(job: &str, pod_set: &str, field: &str, problem: String) -> JobError {
    JobError::PodSet {
        job: job.to_string(),
        pod_set: pod_set.to_string(),
        field: field.to_string(),
        problem,
    }
}

fn one(job: &str, index: usize, item: Value) -> Result<PodSetInfo, JobError> {
    let unnamed = format!("#{index}");
    let Value::Object(mut fields) = item else {
        return Err(bad(
            job,
            &unnamed,
            "(pod set)",
            format!(
                "is {}, expected a map {{name, count, template}}",
                describe(&item)
            ),
        ));
    };
    let name = match fields.remove("name") {
        Some(Value::String(name)) if !name.is_empty() => name,
        other => {
            let found = other.as_ref().map_or("missing".to_string(), describe);
            return Err(bad(
                job,
                &unnamed,
                "name",
                format!("is {found}, expected a non-empty string"),
            ));
        }
    };
    if let Some(unknown) = fields.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(bad(
            job,
            &name,
            unknown,
            format!("is not a pod-set field (expected {})", KEYS.join(", ")),
        ));
    }
    let count = whole_number(job, &name, "count", fields.get("count"))?.unwrap_or(1);
    let min_count = whole_number(job, &name, "minCount", fields.get("minCount"))?;
    let template_path = match fields.remove("templatePath") {
        None | Some(Value::Null) => None,
        Some(Value::String(path)) if super::hold::HoldPath::parse(&path).is_some() => Some(path),
        Some(other) => {
            return Err(bad(
                job,
                &name,
                "templatePath",
                format!(
                    "is {}, expected a dot-separated field path like `spec.template`",
                    describe(&other)
                ),
            ))
        }
    };
    let template = fields.remove("template").filter(|t| !t.is_null());
    let requests = fields.remove("requests").filter(|r| !r.is_null());
    let mut pod_set = match (template, requests) {
        (Some(_), Some(_)) => {
            return Err(bad(
                job,
                &name,
                "requests",
                "is given together with `template`; give one or the other".into(),
            ))
        }
        (Some(template), None) => from_template(job, &name, template)?,
        (None, Some(requests)) => PodSetInfo {
            requests: shorthand_requests(job, &name, requests)?,
            ..PodSetInfo::named(&name)
        },
        (None, None) => PodSetInfo::named(&name),
    };
    pod_set.count = count;
    pod_set.min_count = min_count;
    pod_set.template_path = template_path;
    check_min_count(job, &pod_set)?;
    Ok(pod_set)
}

pub(super) fn check_min_count(job: &str, pod_set: &PodSetInfo) -> Result<(), JobError> {
    match pod_set.min_count {
        Some(min_count) if min_count > pod_set.count => Err(bad(
            job,
            &pod_set.name,
            "minCount",
            format!(
                "is {min_count}, more than the pod set's count {}; it must be at most the count",
                pod_set.count
            ),
        )),
        _ => Ok(()),
    }
}

fn whole_number(
    job: &str,
    pod_set: &str,
    field: &str,
    value: Option<&Value>,
) -> Result<Option<u32>, JobError> {
    let number = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(number)) => number,
        Some(other) => {
            return Err(bad(
                job,
                pod_set,
                field,
                format!(
                    "is {}, expected a whole number of pods (e.g. 2)",
                    describe(other)
                ),
            ))
        }
    };
    if let Some(count) = number.as_u64() {
        let cap = crate::model::limits::MAX_PODS_PER_POD_SET;
        return match u32::try_from(count) {
            Ok(count) if count <= cap => Ok(Some(count)),
            _ => Err(bad(
                job,
                pod_set,
                field,
                format!("is {count}, more than the {cap} pods a pod set may have"),
            )),
        };
    }
    let problem = if number.as_i64().is_some() {
        format!("is {number}, a negative number of pods; it must be 0 or more")
    } else {
        format!("is {number}, not a whole number of pods")
    };
    Err(bad(job, pod_set, field, problem))
}

/// A template as a `PodSetInfo` without counts.
fn from_template(job: &str, pod_set: &str, template: Value) -> Result<PodSetInfo, JobError> {
    let Value::Object(mut template) = template else {
        return Err(bad(
            job,
            pod_set,
            "template",
            format!("is {}, expected a PodTemplateSpec map", describe(&template)),
        ));
    };
    if let Some(Value::Object(spec)) = template.get_mut("spec") {
        name_containers(spec, "containers");
        name_containers(spec, "initContainers");
        spec.entry("containers")
            .or_insert_with(|| Value::Array(Vec::new()));
    }
    let template: PodTemplateSpec = serde_path_to_error::deserialize(Value::Object(template))
        .map_err(|e| {
            let field = field_at("template", e.path());
            bad(job, pod_set, &field, format!("is invalid: {}", e.inner()))
        })?;
    let spec = template.spec.unwrap_or_default();
    from_pod_spec(job, pod_set, &spec)
}

/// `prefix.path`, or `prefix` when the error is at the root.
fn field_at(prefix: &str, path: &serde_path_to_error::Path) -> String {
    let path = path.to_string();
    if path == "." {
        prefix.to_string()
    } else {
        format!("{prefix}.{path}")
    }
}

/// Integrations may leave a container's `name` out (Argo, Tekton steps);
/// Kubernetes needs one, so it is filled with the container's position.
fn name_containers(spec: &mut Map<String, Value>, list: &str) {
    let Some(Value::Array(containers)) = spec.get_mut(list) else {
        return;
    };
    for (index, container) in containers.iter_mut().enumerate() {
        if let Value::Object(container) = container {
            let unnamed = match container.get("name") {
                None | Some(Value::Null) => true,
                Some(Value::String(name)) => name.is_empty(),
                Some(_) => false,
            };
            if unnamed {
                container.insert("name".into(), Value::String(format!("{list}[{index}]")));
            }
        }
    }
}

pub(super) fn from_pod_spec(
    job: &str,
    pod_set: &str,
    spec: &PodSpec,
) -> Result<PodSetInfo, JobError> {
    let requests = pod_requests(spec).map_err(|cause| in_pod_set(job, pod_set, cause))?;
    let required_node_affinity = spec
        .affinity
        .as_ref()
        .and_then(|affinity| affinity.node_affinity.as_ref())
        .and_then(|node| {
            node.required_during_scheduling_ignored_during_execution
                .clone()
        });
    Ok(PodSetInfo {
        requests,
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        required_node_affinity,
        tolerations: spec.tolerations.clone().unwrap_or_default(),
        ..PodSetInfo::named(pod_set)
    })
}

fn shorthand_requests(
    job: &str,
    pod_set: &str,
    requests: Value,
) -> Result<BTreeMap<String, Amount>, JobError> {
    let quantities: BTreeMap<String, Quantity> = serde_path_to_error::deserialize(requests)
        .map_err(|e| {
            bad(
                job,
                pod_set,
                &field_at("requests", e.path()),
                format!(
                    "is invalid: {}; expected a map of resource to quantity",
                    e.inner()
                ),
            )
        })?;
    quantity_map(job, pod_set, &quantities)
}

/// Per-pod requests given directly (`requests: {cpu: "1"}`), zero entries left out.
pub(super) fn quantity_map(
    job: &str,
    pod_set: &str,
    quantities: &BTreeMap<String, Quantity>,
) -> Result<BTreeMap<String, Amount>, JobError> {
    let mut amounts = parse_quantities(quantities, "requests")
        .map_err(|cause| in_pod_set(job, pod_set, cause))?;
    amounts.retain(|_, amount| !amount.is_zero());
    Ok(amounts)
}

fn in_pod_set(job: &str, pod_set: &str, cause: JobError) -> JobError {
    JobError::InPodSet {
        job: job.to_string(),
        pod_set: pod_set.to_string(),
        cause: Box::new(cause),
    }
}
