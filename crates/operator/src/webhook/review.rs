//! What the webhooks decide, without the server around it: the mutating
//! webhook's hold (a patch that suspends a new job naming a queue, the
//! very transform the driver uses) and the validating webhook's check of
//! a queue configuration object (the simulator's own checks, over what
//! the API holds with the object changed as asked).

use std::collections::{BTreeMap, BTreeSet};

use arbiter_core::jobs::Integrations;
use arbiter_core::model::cluster::Namespace;
use serde_json::Value;

use crate::config::{self, ApiObject};
use crate::inject;
use crate::jobs::queue_label;

/// The mutating webhook's answer for a job being created: `Ok(None)` to let
/// it through unchanged (not a kind of the integrations, names no queue,
/// held already), `Ok(Some(patch))` to hold it, `Err` to refuse it (it
/// names a queue but cannot be held, so it would start unadmitted).
pub fn hold_patch(
    integrations: &Integrations,
    object: &Value,
) -> Result<Option<json_patch::Patch>, String> {
    let get = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
    let Some(integration) = integrations.find(get("/apiVersion"), get("/kind")) else {
        return Ok(None);
    };
    if !queue_label(object) {
        return Ok(None);
    }
    let mut held = object.clone();
    inject::hold(&mut held, integration).map_err(|e| {
        format!("{e}; Arbiter cannot hold this job until it is admitted, so it is refused (fix the field, or remove the queue-name label to run it outside Arbiter)")
    })?;
    let patch = json_patch::diff(object, &held);
    Ok((!patch.0.is_empty()).then_some(patch))
}

/// The identity of a configuration object: API group, kind, namespace, name.
fn identity(object: &Value) -> (String, String, String, String) {
    let get = |p: &str| {
        object
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let group = get("/apiVersion")
        .split_once('/')
        .map(|(g, _)| g.to_string())
        .unwrap_or_default();
    (
        group,
        get("/kind"),
        get("/metadata/namespace"),
        get("/metadata/name"),
    )
}

/// What the validating webhook found in a configuration object.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Accepted, with the warnings about this object (shown by kubectl).
    Allowed(Vec<String>),
    /// Refused: the errors the change brings, as the simulator words them.
    Denied(Vec<String>),
}

/// Checks `candidate` (an object being created or updated) against the
/// configuration the API holds: the whole configuration is built with the
/// object as it would be, exactly as the driver and the simulator build it.
/// It is refused when that build has an error naming the object, or an
/// error the configuration without the change does not have (a cohort
/// cycle it closes, a flavor it names that does not exist); errors the
/// configuration had before, about other objects, do not block it.
pub fn check_config(
    current: &[ApiObject],
    namespaces: &BTreeMap<String, Namespace>,
    resources: &[String],
    candidate: &Value,
) -> Verdict {
    let wanted = identity(candidate);
    let mut changed: Vec<ApiObject> = current
        .iter()
        .filter(|o| identity(&o.object) != wanted)
        .cloned()
        .collect();
    let candidate = config::api_objects(std::iter::once(std::sync::Arc::new(
        match serde_json::from_value(candidate.clone()) {
            Ok(object) => object,
            Err(e) => return Verdict::Denied(vec![format!("not a Kubernetes object: {e}")]),
        },
    )))
    .remove(0);
    let name = candidate.name.clone();
    changed.push(candidate);
    // Errors are compared by where they are: a message may list what is
    // defined, which the change itself alters.
    let before: BTreeSet<String> = match config::build(current, namespaces, resources.to_vec()) {
        Ok(_) => BTreeSet::new(),
        Err(errors) => errors.into_iter().map(|e| e.at).collect(),
    };
    match config::build(&changed, namespaces, resources.to_vec()) {
        Ok(built) => Verdict::Allowed(
            built
                .warnings
                .into_iter()
                .filter(|w| w.starts_with(&name))
                .collect(),
        ),
        Err(errors) => {
            let brought: Vec<String> = errors
                .into_iter()
                .filter(|e| e.at.starts_with(&name) || !before.contains(&e.at))
                .map(|e| e.to_string())
                .collect();
            if brought.is_empty() {
                Verdict::Allowed(Vec::new())
            } else {
                Verdict::Denied(brought)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn flavor(name: &str) -> Value {
        json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ResourceFlavor",
               "metadata": {"name": name}, "spec": {"nodeLabels": {"gpu": name}}})
    }

    fn queue(name: &str, flavor: &str, gpus: i64, cohort: Option<&str>) -> Value {
        let mut spec = json!({"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]});
        if let Some(c) = cohort {
            spec["cohort"] = json!(c);
        }
        json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue",
               "metadata": {"name": name}, "spec": spec})
    }

    fn cohort(name: &str, parent: &str) -> Value {
        json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "Cohort",
               "metadata": {"name": name}, "spec": {"parent": parent}})
    }

    fn check(current: &[Value], candidate: Value) -> Verdict {
        let current: Vec<ApiObject> = current.iter().cloned().map(ApiObject::new).collect();
        check_config(
            &current,
            &BTreeMap::new(),
            &["nvidia.com/gpu".to_string()],
            &candidate,
        )
    }

    fn denied(verdict: Verdict) -> String {
        match verdict {
            Verdict::Denied(errors) => errors.join("\n"),
            other => panic!("expected a denial, got {other:?}"),
        }
    }

    #[test]
    fn a_valid_queue_is_allowed() {
        let verdict = check(&[flavor("a100")], queue("research", "a100", 8, None));
        assert_eq!(verdict, Verdict::Allowed(vec![]));
    }

    #[test]
    fn an_unknown_flavor_is_refused_with_the_simulators_message() {
        let text = denied(check(&[flavor("a100")], queue("research", "h100", 8, None)));
        assert!(text.contains("ClusterQueue research"), "{text}");
        assert!(text.contains("h100"), "{text}");
    }

    #[test]
    fn a_negative_quota_is_refused() {
        let text = denied(check(
            &[flavor("a100")],
            queue("research", "a100", -1, None),
        ));
        assert!(text.contains("research"), "{text}");
    }

    fn topology(name: &str, levels: &[&str]) -> Value {
        let levels: Vec<_> = levels.iter().map(|l| json!({"nodeLabel": l})).collect();
        json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "Topology",
               "metadata": {"name": name}, "spec": {"levels": levels}})
    }

    #[test]
    fn a_topology_with_errors_and_a_flavor_naming_a_missing_one_are_refused() {
        let text = denied(check(
            &[],
            topology("dc", &["kubernetes.io/hostname", "example.com/rack"]),
        ));
        assert!(
            text.contains("Topology dc: spec.levels[0].nodeLabel"),
            "{text}"
        );
        let mut tas = flavor("tas");
        tas["spec"]["topologyName"] = json!("dc");
        let text = denied(check(&[], tas.clone()));
        assert!(text.contains("Topology dc does not exist"), "{text}");
        let fine = topology("dc", &["example.com/rack", "kubernetes.io/hostname"]);
        assert_eq!(check(&[fine], tas), Verdict::Allowed(vec![]));
    }

    #[test]
    fn a_cohort_cycle_is_refused_on_the_object_that_closes_it() {
        let text = denied(check(&[cohort("a", "b")], cohort("b", "a")));
        assert!(text.to_lowercase().contains("cycle"), "{text}");
    }

    #[test]
    fn an_update_replaces_the_object_it_changes() {
        // research already exists with 8 GPUs; changing it to 16 is fine.
        let verdict = check(
            &[flavor("a100"), queue("research", "a100", 8, None)],
            queue("research", "a100", 16, None),
        );
        assert_eq!(verdict, Verdict::Allowed(vec![]));
    }

    #[test]
    fn errors_elsewhere_do_not_block_an_unrelated_object() {
        // `broken` names a flavor that does not exist; a new flavor is still accepted.
        let verdict = check(
            &[flavor("a100"), queue("broken", "v100", 8, None)],
            flavor("h100"),
        );
        assert_eq!(verdict, Verdict::Allowed(vec![]));
    }

    #[test]
    fn unknown_fields_are_refused_with_the_field_named() {
        let mut q = queue("research", "a100", 8, None);
        q["spec"]["colour"] = json!("blue");
        let verdict = check(&[flavor("a100")], q);
        // An unknown field is a warning or an error as the simulator has it; either way it is named.
        let text = match verdict {
            Verdict::Allowed(w) => w.join("\n"),
            Verdict::Denied(e) => e.join("\n"),
        };
        assert!(text.contains("colour"), "{text}");
    }

    fn job(labels: Value) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "train", "namespace": "team-a", "labels": labels},
               "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"}}}})
    }

    #[test]
    fn a_new_job_naming_a_queue_is_held() {
        let integrations = Integrations::builtin();
        let object = job(json!({"kueue.x-k8s.io/queue-name": "research"}));
        let patch = hold_patch(&integrations, &object)
            .unwrap()
            .expect("a patch");
        let mut patched = object.clone();
        json_patch::patch(&mut patched, &patch).unwrap();
        assert_eq!(patched["spec"]["suspend"], json!(true));
    }

    #[test]
    fn a_job_without_a_queue_or_already_held_is_left_alone() {
        let integrations = Integrations::builtin();
        assert_eq!(hold_patch(&integrations, &job(json!({}))).unwrap(), None);
        let mut held = job(json!({"arbiter.dev/queue-name": "research"}));
        held["spec"]["suspend"] = json!(true);
        assert_eq!(hold_patch(&integrations, &held).unwrap(), None);
        let other = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"arbiter.dev/queue-name": "q"}}});
        assert_eq!(hold_patch(&integrations, &other).unwrap(), None);
    }

    #[test]
    fn a_job_that_cannot_be_held_is_refused() {
        let integrations = Integrations::builtin();
        let mut object = job(json!({"arbiter.dev/queue-name": "research"}));
        object["spec"] = json!("not an object");
        let error = hold_patch(&integrations, &object).unwrap_err();
        assert!(error.contains("cannot hold"), "{error}");
    }
}
