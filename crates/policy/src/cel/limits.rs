//! The input sizes that bound a run: the caps on a workload's collections
//! checked before each evaluation ([`check_input_sizes`]), and the
//! [`ValueBound`]s of the variables the load-time cost estimate works from
//! ([`variable_shape`]: the caps, the sizes assumed for strings, the exact
//! `params`). The limits on the expression itself are [`CelLimits`], shared
//! with the job integrations (`arbiter_core::cel_bounds`). Called by
//! `compiler` and, for the input caps, by the policy layer's `eval`.

pub use arbiter_core::cel_bounds::CelLimits;
use arbiter_core::cel_bounds::ValueBound;

use arbiter_core::model::limits::MAX_CARDS_PER_NODE;

use super::EvalError;
use crate::view::{PlacementInput, Quantities, TypicalPodView, WorkloadView};

/// Most labels, and most annotations, of a workload or tenant the engine
/// hands to a policy.
pub const MAX_LABELS: usize = 64;
/// Most pod sets of a workload (Kueue's own limit is 8).
pub const MAX_POD_SETS: usize = 16;
/// Most resources in one requests map.
pub const MAX_RESOURCES: usize = 32;
/// Most typical pods a placement policy that reads `typical` is given: the
/// most frequent ([`cel_typical`]).
pub const MAX_TYPICAL: usize = 64;
/// Most flavors a workload or ClusterQueue lists, as the estimate assumes.
pub const ASSUMED_FLAVORS: u64 = 64;
/// The longest name, label value and annotation value the estimate
/// assumes (Kubernetes allows 253, 63 and, in all, 256 KiB); longer ones
/// cost more at run time, where the meter counts what is really built.
const ASSUMED_NAME: u64 = 253;
const ASSUMED_LABEL_VALUE: u64 = 63;
const ASSUMED_ANNOTATION_VALUE: u64 = 1024;

/// Refuses a workload whose collections exceed the caps the cost bound of
/// the module doc rests on. The engine calls it once per workload, before
/// evaluating policies on it.
pub fn check_input_sizes(workload: &WorkloadView) -> Result<(), EvalError> {
    let too_many = |what: &str, n: usize, max: usize| {
        Err(EvalError::Runtime(format!(
            "workload {}/{} has {n} {what}; policies see at most {max}",
            workload.namespace, workload.name
        )))
    };
    if workload.labels.len() > MAX_LABELS {
        return too_many("labels", workload.labels.len(), MAX_LABELS);
    }
    if workload.annotations.len() > MAX_LABELS {
        return too_many("annotations", workload.annotations.len(), MAX_LABELS);
    }
    if workload.pod_sets.len() > MAX_POD_SETS {
        return too_many("pod sets", workload.pod_sets.len(), MAX_POD_SETS);
    }
    let resources = workload
        .pod_sets
        .iter()
        .map(|ps| ps.requests.len())
        .chain([workload.requests.len()])
        .max()
        .unwrap_or(0);
    if resources > MAX_RESOURCES {
        return too_many("resources in one requests map", resources, MAX_RESOURCES);
    }
    Ok(())
}

/// The typical pods a CEL expression is given: the [`MAX_TYPICAL`] most
/// frequent (the list comes most frequent first), so that its cost stays
/// within the bound estimated at load; the rarer ones are left out.
pub fn cel_typical(typical: &[TypicalPodView]) -> &[TypicalPodView] {
    &typical[..typical.len().min(MAX_TYPICAL)]
}

/// Refuses a placement request beyond the caps the cost bound rests on:
/// the workload's ([`check_input_sizes`]), at most [`MAX_RESOURCES`]
/// resources in any quantities map and devices per node, at most
/// [`MAX_LABELS`] labels per node, at most
/// `MAX_CARDS_PER_NODE` cards per device and, for an expression that
/// names `typical` (`reads_typical`), the requests of the typical pods it
/// is given ([`cel_typical`]).
pub fn check_placement_sizes(input: &PlacementInput, reads_typical: bool) -> Result<(), EvalError> {
    check_input_sizes(&input.workload)?;
    let too_many = |what: String, n: usize, max: usize| {
        Err(EvalError::Runtime(format!(
            "{what} has {n}; policies see at most {max}"
        )))
    };
    let resources = |what: &str, map: &Quantities| {
        if map.len() > MAX_RESOURCES {
            return too_many(format!("{what} (resources)"), map.len(), MAX_RESOURCES);
        }
        Ok(())
    };
    resources("pod.requests", &input.pod.requests)?;
    for node in &input.nodes {
        resources(&format!("node {}: free", node.name), &node.free)?;
        resources(
            &format!("node {}: allocatable", node.name),
            &node.allocatable,
        )?;
        if node.devices.len() > MAX_RESOURCES {
            return too_many(
                format!("node {}: devices", node.name),
                node.devices.len(),
                MAX_RESOURCES,
            );
        }
        if node.labels.len() > MAX_LABELS {
            return too_many(
                format!("node {}: labels", node.name),
                node.labels.len(),
                MAX_LABELS,
            );
        }
        for device in &node.devices {
            if device.cards.len() > MAX_CARDS_PER_NODE as usize {
                return too_many(
                    format!("node {}: device {} (cards)", node.name, device.resource),
                    device.cards.len(),
                    MAX_CARDS_PER_NODE as usize,
                );
            }
        }
    }
    if reads_typical {
        for t in cel_typical(&input.typical) {
            resources("typical[].requests", &t.requests)?;
        }
    }
    Ok(())
}

/// The shape of variable `name` for the cost estimate; `params` is the
/// policy's config as it is.
pub(super) fn variable_shape(name: &str, params: &serde_json::Value) -> Option<ValueBound> {
    let string = || ValueBound::string(ASSUMED_NAME);
    let scalar = ValueBound::scalar;
    let labels =
        || ValueBound::collection(MAX_LABELS as u64, ValueBound::string(ASSUMED_LABEL_VALUE));
    let annotations = || {
        ValueBound::collection(
            MAX_LABELS as u64,
            ValueBound::string(ASSUMED_ANNOTATION_VALUE),
        )
    };
    let quantities = || ValueBound::collection(MAX_RESOURCES as u64, scalar());
    let fields = |f: Vec<(&str, ValueBound)>| {
        ValueBound::object(f.into_iter().map(|(k, v)| (k.to_string(), v)))
    };
    Some(match name {
        "workload" => fields(vec![
            ("name", string()),
            ("namespace", string()),
            ("kind", string()),
            ("labels", labels()),
            ("annotations", annotations()),
            ("priority", scalar()),
            ("priorityClass", string()),
            ("priorityWeight", scalar()),
            ("queueName", string()),
            ("clusterQueue", string()),
            (
                "podSets",
                ValueBound::collection(
                    MAX_POD_SETS as u64,
                    fields(vec![
                        ("name", string()),
                        ("count", scalar()),
                        ("minCount", scalar()),
                        ("requests", quantities()),
                        (
                            "eligibleFlavors",
                            ValueBound::collection(ASSUMED_FLAVORS, string()),
                        ),
                    ]),
                ),
            ),
            ("requests", quantities()),
            ("gpus", scalar()),
            ("ageSeconds", scalar()),
            ("retries", scalar()),
            ("evictions", scalar()),
            (
                "estimate",
                fields(vec![("runtimeSeconds", scalar()), ("samples", scalar())]),
            ),
            ("flavors", ValueBound::collection(ASSUMED_FLAVORS, string())),
            (
                "eligibleFlavors",
                ValueBound::collection(ASSUMED_FLAVORS, string()),
            ),
        ]),
        "queue" => fields(vec![
            ("name", string()),
            ("namespace", string()),
            ("priority", scalar()),
            ("clusterQueue", string()),
        ]),
        "clusterQueue" => fields(vec![
            ("name", string()),
            ("cohort", string()),
            ("weight", scalar()),
            ("share", scalar()),
            ("decayedUsage", scalar()),
            (
                "nominal",
                ValueBound::collection(ASSUMED_FLAVORS, quantities()),
            ),
            (
                "usage",
                ValueBound::collection(ASSUMED_FLAVORS, quantities()),
            ),
            ("priorityWeight", scalar()),
            ("admitted", scalar()),
            ("pending", scalar()),
            ("flavors", ValueBound::collection(ASSUMED_FLAVORS, string())),
        ]),
        "tenant" => fields(vec![
            ("name", string()),
            ("labels", labels()),
            ("annotations", annotations()),
        ]),
        "cohort" => fields(vec![("name", string()), ("parent", string())]),
        "flavor" => fields(vec![
            ("name", string()),
            ("nodes", scalar()),
            ("minNodes", scalar()),
            ("maxNodes", scalar()),
            ("utilization", scalar()),
            ("pendingNodes", scalar()),
            ("targetUtilization", scalar()),
        ]),
        "node" => fields(vec![
            ("index", scalar()),
            ("name", string()),
            ("labels", labels()),
            ("free", quantities()),
            ("allocatable", quantities()),
            (
                "devices",
                ValueBound::collection(
                    MAX_RESOURCES as u64,
                    fields(vec![
                        ("resource", string()),
                        ("perCard", scalar()),
                        (
                            "cards",
                            ValueBound::collection(u64::from(MAX_CARDS_PER_NODE), scalar()),
                        ),
                    ]),
                ),
            ),
        ]),
        "pod" => fields(vec![("requests", quantities())]),
        "typical" => ValueBound::collection(
            MAX_TYPICAL as u64,
            fields(vec![("requests", quantities()), ("share", scalar())]),
        ),
        "now" => scalar(),
        "params" => ValueBound::of_json(params),
        _ => return None,
    })
}
