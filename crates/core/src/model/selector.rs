//! Label matching: Kubernetes `LabelSelector` (namespaceSelector), and a
//! pod set's nodeSelector / required node affinity against a flavor's
//! `nodeLabels` (Kueue's rule: only keys the flavor defines can be judged).
//! Pure functions; called by the cluster model and the scheduler core.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Does `selector` select an object with `labels`? An empty selector selects all.
pub(crate) fn label_selector_matches(
    selector: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let expressions_ok = selector.match_expressions.iter().flatten().all(|req| {
        let values = req.values.as_deref().unwrap_or(&[]);
        let current = labels.get(&req.key);
        match req.operator.as_str() {
            "In" => current.is_some_and(|v| values.contains(v)),
            "NotIn" => current.is_none_or(|v| !values.contains(v)),
            "Exists" => current.is_some(),
            "DoesNotExist" => current.is_none(),
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

/// Checks a selector's operators once, at the input boundary.
pub(crate) fn check_label_selector(selector: &LabelSelector) -> Result<(), String> {
    for (i, req) in selector.match_expressions.iter().flatten().enumerate() {
        let has_values = req.values.as_ref().is_some_and(|v| !v.is_empty());
        match req.operator.as_str() {
            "In" | "NotIn" if !has_values => {
                return Err(format!("matchExpressions[{i}]: operator {} needs values", req.operator))
            }
            "Exists" | "DoesNotExist" if has_values => {
                return Err(format!("matchExpressions[{i}]: operator {} takes no values", req.operator))
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                return Err(format!(
                    "matchExpressions[{i}]: unknown operator `{other}` (use In, NotIn, Exists or DoesNotExist)"
                ))
            }
        }
    }
    Ok(())
}

/// Could a pod with this nodeSelector and required affinity land on a node
/// carrying `node_labels`? Keys the flavor does not define are not judged.
pub(crate) fn node_constraints_allow(
    node_selector: &BTreeMap<String, String>,
    affinity: Option<&NodeSelector>,
    node_labels: &BTreeMap<String, String>,
) -> bool {
    let selector_ok = node_selector
        .iter()
        .all(|(key, value)| node_labels.get(key).is_none_or(|v| v == value));
    let affinity_ok = match affinity {
        None => true,
        Some(selector) if selector.node_selector_terms.is_empty() => true,
        Some(selector) => selector.node_selector_terms.iter().any(|term| {
            term.match_expressions
                .iter()
                .flatten()
                .all(|req| requirement_allows(req, node_labels))
        }),
    };
    selector_ok && affinity_ok
}

fn requirement_allows(
    req: &NodeSelectorRequirement,
    node_labels: &BTreeMap<String, String>,
) -> bool {
    let Some(current) = node_labels.get(&req.key) else {
        return true;
    };
    let values = req.values.as_deref().unwrap_or(&[]);
    let as_int = |s: &str| s.parse::<i64>().ok();
    match req.operator.as_str() {
        "In" => values.contains(current),
        "NotIn" => !values.contains(current),
        "Exists" => true,
        "DoesNotExist" => false,
        "Gt" => {
            matches!((as_int(current), values.first().and_then(|v| as_int(v))), (Some(c), Some(v)) if c > v)
        }
        "Lt" => {
            matches!((as_int(current), values.first().and_then(|v| as_int(v))), (Some(c), Some(v)) if c < v)
        }
        _ => false,
    }
}

/// Does `toleration` tolerate `taint` (Kubernetes' rules)?
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref().filter(|e| !e.is_empty()) {
        if effect != taint.effect {
            return false;
        }
    }
    match toleration.key.as_deref().filter(|k| !k.is_empty()) {
        None => toleration.operator.as_deref() == Some("Exists"),
        Some(key) if key != taint.key => false,
        Some(_) => match toleration.operator.as_deref().unwrap_or("Equal") {
            "Exists" => true,
            _ => toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        },
    }
}

/// The first taint (NoSchedule/NoExecute) that none of the tolerations tolerate.
pub(crate) fn untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[&[Toleration]],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|taint| {
            !tolerations
                .iter()
                .flat_map(|set| set.iter())
                .any(|tol| tolerates(tol, taint))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn empty_selector_selects_everything() {
        assert!(label_selector_matches(
            &LabelSelector::default(),
            &labels(&[])
        ));
    }

    #[test]
    fn match_labels_and_expressions() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("team", "ml")])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: Some(vec!["dev".into()]),
            }]),
        };
        assert!(label_selector_matches(
            &selector,
            &labels(&[("team", "ml")])
        ));
        assert!(!label_selector_matches(
            &selector,
            &labels(&[("team", "ml"), ("tier", "dev")])
        ));
        assert!(!label_selector_matches(
            &selector,
            &labels(&[("team", "finance")])
        ));
    }

    #[test]
    fn node_selector_only_judges_flavor_keys() {
        let flavor = labels(&[("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB")]);
        assert!(node_constraints_allow(
            &labels(&[("zone", "a")]),
            None,
            &flavor
        ));
        assert!(!node_constraints_allow(
            &labels(&[("nvidia.com/gpu.product", "Tesla-V100")]),
            None,
            &flavor
        ));
    }

    #[test]
    fn taints_need_a_toleration() {
        let taint = Taint {
            key: "nvidia.com/gpu".into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let tol = Toleration {
            key: Some("nvidia.com/gpu".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        };
        assert!(tolerates(&tol, &taint));
        assert!(untolerated_taint(std::slice::from_ref(&taint), &[&[]]).is_some());
        assert!(
            untolerated_taint(std::slice::from_ref(&taint), &[std::slice::from_ref(&tol)])
                .is_none()
        );
    }
}
