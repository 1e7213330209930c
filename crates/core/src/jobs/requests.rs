//! Per-pod resource requests, computed exactly as Kubernetes computes them.
//!
//! Kubernetes (`resourcehelper.PodRequests`, ≥ 1.29 with sidecars, ≥ 1.32
//! with pod-level resources): per resource, the sum over the regular
//! containers; sidecars (init containers with `restartPolicy: Always`) add to
//! that sum and keep running under every later init container; the pod needs
//! the larger of that sum and the peak of its init phase; pod-level
//! `spec.resources` replaces the container total of a resource it names;
//! `spec.overhead` is added last. A container's `limits` stand in for a
//! missing `requests` entry of the same resource (API defaulting). Resources
//! that total zero are left out. Pure: no I/O, never panics on input; called
//! by the pod-set extraction in `jobs` and by anyone holding a `PodSpec`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::JobError;
use crate::model::Amount;

/// The requests of one pod built from `spec`, per resource name.
pub(crate) fn pod_requests(spec: &PodSpec) -> Result<BTreeMap<String, Amount>, JobError> {
    let mut total = BTreeMap::new();
    for (index, container) in spec.containers.iter().enumerate() {
        let requests = container_requests(container, "container", index)?;
        add_into(&mut total, &requests);
    }

    // Sidecars started so far: they run beside every later init container.
    let mut sidecars = BTreeMap::new();
    let mut init_peak = BTreeMap::new();
    for (index, container) in spec.init_containers.iter().flatten().enumerate() {
        let requests = container_requests(container, "init container", index)?;
        let running = if container.restart_policy.as_deref() == Some("Always") {
            add_into(&mut total, &requests);
            add_into(&mut sidecars, &requests);
            sidecars.clone()
        } else {
            let mut running = requests;
            add_into(&mut running, &sidecars);
            running
        };
        max_into(&mut init_peak, &running);
    }
    max_into(&mut total, &init_peak);

    if let Some(pod_level) = &spec.resources {
        let pod_level = effective_requests(pod_level, "pod-level spec.resources")?;
        total.extend(pod_level);
    }
    if let Some(overhead) = &spec.overhead {
        let overhead = parse_quantities(overhead, "spec.overhead")?;
        add_into(&mut total, &overhead);
    }
    total.retain(|_, amount| !amount.is_zero());
    Ok(total)
}

fn container_requests(
    container: &Container,
    role: &str,
    index: usize,
) -> Result<BTreeMap<String, Amount>, JobError> {
    match &container.resources {
        None => Ok(BTreeMap::new()),
        Some(resources) => {
            let who = if container.name.is_empty() {
                format!("{role} #{index}")
            } else {
                format!("{role} `{}`", container.name)
            };
            effective_requests(resources, &who)
        }
    }
}

/// `requests`, with `limits` standing in for resources it does not name.
fn effective_requests(
    resources: &ResourceRequirements,
    who: &str,
) -> Result<BTreeMap<String, Amount>, JobError> {
    let mut effective = match &resources.limits {
        Some(limits) => parse_quantities(limits, &format!("{who} resources.limits"))?,
        None => BTreeMap::new(),
    };
    if let Some(requests) = &resources.requests {
        effective.extend(parse_quantities(
            requests,
            &format!("{who} resources.requests"),
        )?);
    }
    Ok(effective)
}

/// Parses every quantity of a map, refusing bad and negative ones.
pub(super) fn parse_quantities(
    quantities: &BTreeMap<String, Quantity>,
    location: &str,
) -> Result<BTreeMap<String, Amount>, JobError> {
    quantities
        .iter()
        .map(|(resource, quantity)| {
            let problem = |problem: String| JobError::Quantity {
                location: location.to_string(),
                resource: resource.clone(),
                problem,
            };
            let amount = Amount::from_quantity(quantity).map_err(|e| problem(e.to_string()))?;
            if amount.is_negative() {
                return Err(problem(format!(
                    "`{}` is negative; a request must be zero or more",
                    quantity.0
                )));
            }
            Ok((resource.clone(), amount))
        })
        .collect()
}

/// Adds `more` into `total`, resource by resource.
fn add_into(total: &mut BTreeMap<String, Amount>, more: &BTreeMap<String, Amount>) {
    for (resource, amount) in more {
        let entry = total.entry(resource.clone()).or_insert(Amount::ZERO);
        *entry = entry.saturating_add(*amount);
    }
}

fn max_into(total: &mut BTreeMap<String, Amount>, other: &BTreeMap<String, Amount>) {
    for (resource, amount) in other {
        let entry = total.entry(resource.clone()).or_insert(Amount::ZERO);
        *entry = (*entry).max(*amount);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> PodSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn amounts(pairs: &[(&str, &str)]) -> BTreeMap<String, Amount> {
        pairs
            .iter()
            .map(|(r, q)| (r.to_string(), Amount::parse(q).unwrap()))
            .collect()
    }

    #[test]
    fn regular_containers_add_up() {
        let s = spec(
            r#"
containers:
- name: trainer
  resources: {requests: {cpu: "4", memory: 16Gi, nvidia.com/gpu: 2}}
- name: logger
  resources: {requests: {cpu: 500m, memory: 512Mi}}
- name: no-resources
"#,
        );
        assert_eq!(
            pod_requests(&s).unwrap(),
            amounts(&[
                ("cpu", "4500m"),
                ("memory", "16896Mi"),
                ("nvidia.com/gpu", "2")
            ])
        );
    }

    #[test]
    fn init_containers_take_the_max_per_resource() {
        let s = spec(
            r#"
initContainers:
- name: fetch-dataset
  resources: {requests: {cpu: "8", memory: 1Gi}}
- name: warm-cache
  resources: {requests: {memory: 20Gi}}
containers:
- name: trainer
  resources: {requests: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}}
"#,
        );
        assert_eq!(
            pod_requests(&s).unwrap(),
            amounts(&[("cpu", "8"), ("memory", "20Gi"), ("nvidia.com/gpu", "1")])
        );
    }

    #[test]
    fn overhead_is_added_after_the_max() {
        let s = spec(
            r#"
overhead: {cpu: 250m, memory: 120Mi}
initContainers:
- name: init
  resources: {requests: {cpu: "3"}}
containers:
- name: main
  resources: {requests: {cpu: "1", memory: 1Gi}}
"#,
        );
        assert_eq!(
            pod_requests(&s).unwrap(),
            amounts(&[("cpu", "3250m"), ("memory", "1144Mi")])
        );
    }

    #[test]
    fn limits_stand_in_for_missing_requests_only() {
        let s = spec(
            r#"
containers:
- name: main
  resources:
    requests: {cpu: "1"}
    limits: {cpu: "4", nvidia.com/gpu: "8", memory: 2Gi}
"#,
        );
        assert_eq!(
            pod_requests(&s).unwrap(),
            amounts(&[("cpu", "1"), ("memory", "2Gi"), ("nvidia.com/gpu", "8")])
        );
    }

    #[test]
    fn sidecars_add_to_the_pod_and_to_later_init_containers() {
        // Kubernetes ≥ 1.29: the sidecar (restartPolicy Always) runs beside the
        // main containers (1 + 2 = 3 CPU) and beside the later init container
        // (1 + 5 = 6 CPU); the init container before it runs alone (4 CPU).
        let s = spec(
            r#"
initContainers:
- name: before
  resources: {requests: {cpu: "4"}}
- name: proxy
  restartPolicy: Always
  resources: {requests: {cpu: "1", memory: 1Gi}}
- name: after
  resources: {requests: {cpu: "5"}}
containers:
- name: main
  resources: {requests: {cpu: "2", memory: 1Gi}}
"#,
        );
        assert_eq!(
            pod_requests(&s).unwrap(),
            amounts(&[("cpu", "6"), ("memory", "2Gi")])
        );
    }

    #[test]
    fn pod_level_resources_replace_the_container_total() {
        let s = spec(
            r#"
resources: {requests: {cpu: "10"}, limits: {memory: 64Gi}}
containers:
- name: main
  resources: {requests: {cpu: "2", memory: 1Gi, nvidia.com/gpu: "1"}}
"#,
        );
        assert_eq!(
            pod_requests(&s).unwrap(),
            amounts(&[("cpu", "10"), ("memory", "64Gi"), ("nvidia.com/gpu", "1")])
        );
    }

    #[test]
    fn zero_requests_are_left_out() {
        let s = spec(
            r#"
containers:
- name: main
  resources: {requests: {cpu: "1", nvidia.com/gpu: "0"}}
"#,
        );
        assert_eq!(pod_requests(&s).unwrap(), amounts(&[("cpu", "1")]));
    }

    #[test]
    fn a_bad_quantity_names_the_container_and_the_resource() {
        let s = spec(
            r#"
containers:
- name: ok
- name: trainer
  resources: {requests: {memory: 12x}}
"#,
        );
        let message = pod_requests(&s).unwrap_err().to_string();
        assert!(message.contains("container `trainer`"), "{message}");
        assert!(message.contains("resources.requests `memory`"), "{message}");
        assert!(message.contains("12x"), "{message}");
    }

    #[test]
    fn a_negative_quantity_is_refused() {
        let s = spec(
            r#"
initContainers:
- name: init
  resources: {limits: {cpu: "-1"}}
containers: []
"#,
        );
        let message = pod_requests(&s).unwrap_err().to_string();
        assert!(message.contains("init container `init`"), "{message}");
        assert!(message.contains("negative"), "{message}");
    }
}
