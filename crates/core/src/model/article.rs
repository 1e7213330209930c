//! The seed article's dialect (docs/design.md §2): the forms its examples write
//! that are neither Kueue's nor Arbiter's, rewritten — in the JSON of one
//! object, before it is decoded — into the form Arbiter reads and
//! `arbiter convert` writes, each with a warning that names that form.
//!
//! | article form | read as |
//! |---|---|
//! | a flavor's `resources` as a map (`nvidia.com/gpu: "2"`) | `resources: [{name, nominalQuota}]` (Kueue's list), in `coveredResources` order |
//! | `ResourceFlavor.spec.nodeSelector`, `spec.taints` | `spec.nodeLabels`, `spec.nodeTaints` (Kueue's names) |
//! | `scheduling.algorithm: fair-scheduling` | `fair-sharing` |
//! | `autoscaling.targetCPUUtilization` | `targetUtilization` |
//! | a duration in days (`historyWindow: "7d"`) | hours (`168h`) |
//! | `priorityClass {name, weight}` on a (Local)Queue | kept: Arbiter's LocalQueue field, the same as a ClusterQueue's; only told |
//!
//! `model::load` calls [`rewrite`] for objects under Kueue's apiVersions and
//! for the article's `kind: Queue`; never for `arbiter.dev` objects, whose
//! schema is Arbiter's alone. It reads no file and never drops a value: a
//! rewrite that would lose one (both `nodeSelector` and `nodeLabels`
//! given) is a [`Conflict`]. The article's `kubeflow.org/v1 PipelineRun`
//! is a job kind, not a field: `jobs::article` has it.

use serde_json::{Map, Value};

/// The queueing kinds whose article forms are rewritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArticleKind {
    ResourceFlavor,
    Cohort,
    ClusterQueue,
    LocalQueue,
}

/// An article form that cannot be rewritten without losing a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// Field path in YAML terms (`spec.nodeSelector`).
    pub path: String,
    pub message: String,
}

/// Rewrites the article's forms in `object` (a whole manifest) and returns
/// one warning per form rewritten, each starting with its field path.
pub fn rewrite(kind: ArticleKind, object: &mut Value) -> Result<Vec<String>, Conflict> {
    let mut told = Vec::new();
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(told);
    };
    match kind {
        ArticleKind::ResourceFlavor => {
            for (article, kueue, meaning) in [
                ("nodeSelector", "nodeLabels", "the labels of the flavor's nodes, put into an admitted workload's nodeSelector"),
                ("taints", "nodeTaints", "the taints of the flavor's nodes: a workload must tolerate them to use the flavor (give spec.tolerations to have admitted pods tolerate them)"),
            ] {
                rename(spec, article, kueue, meaning, &mut told)?;
            }
        }
        ArticleKind::Cohort => map_resources(spec, &mut told),
        ArticleKind::ClusterQueue => {
            map_resources(spec, &mut told);
            if let Some(scheduling) = child(spec, "scheduling") {
                if scheduling.get("algorithm").and_then(Value::as_str) == Some("fair-scheduling") {
                    scheduling.insert("algorithm".into(), "fair-sharing".into());
                    told.push("spec.scheduling.algorithm: `fair-scheduling` (the article's name) read as `fair-sharing`, weighted dominant-resource-share fair sharing across the cohort as Kueue's; `arbiter convert` writes `algorithm: fair-sharing`".into());
                }
                if let Some(adaptive) = child(scheduling, "adaptiveWeights") {
                    days(adaptive, "spec.scheduling.adaptiveWeights", "adjustmentInterval", &mut told);
                }
            }
            if let Some(autoscaling) = child(spec, "autoscaling") {
                let prefix = "spec.autoscaling";
                rename_at(autoscaling, prefix, "targetCPUUtilization", "targetUtilization", "the target share of the flavor's node capacity in use, measured on its dominant resource (the GPUs of a GPU flavor), not on CPU alone", &mut told)?;
            }
            if let Some(retry) = child(spec, "retryPolicy") {
                days(retry, "spec.retryPolicy", "backoffDuration", &mut told);
            }
            if let Some(reclaim) = child(spec, "resourceReclaim") {
                days(reclaim, "spec.resourceReclaim", "reclaimTimeout", &mut told);
            }
        }
        ArticleKind::LocalQueue => {
            if let Some(class) = spec.get("priorityClass").and_then(Value::as_object) {
                let weight = match class.get("weight") {
                    Some(w) => format!("weight {w}"),
                    None => "its weight (default 1)".to_string(),
                };
                told.push(format!("spec.priorityClass on a queue (the article's; Kueue has none): {weight} multiplies the priority of this queue's workloads that name no WorkloadPriorityClass, as a ClusterQueue's priorityClass does, in the default weighting policy; `arbiter convert` writes it as the arbiter.dev/v1alpha1 LocalQueue's spec.priorityClass"));
            }
            if let Some(estimation) = child(spec, "resourceEstimation") {
                days(estimation, "spec.resourceEstimation", "historyWindow", &mut told);
            }
        }
    }
    Ok(told)
}

fn child<'a>(parent: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    parent.get_mut(key).and_then(Value::as_object_mut)
}

/// `spec.<article>` → `spec.<kueue>`.
fn rename(
    spec: &mut Map<String, Value>,
    article: &str,
    kueue: &str,
    meaning: &str,
    told: &mut Vec<String>,
) -> Result<(), Conflict> {
    rename_at(spec, "spec", article, kueue, meaning, told)
}

fn rename_at(
    fields: &mut Map<String, Value>,
    prefix: &str,
    article: &str,
    kueue: &str,
    meaning: &str,
    told: &mut Vec<String>,
) -> Result<(), Conflict> {
    let Some(value) = fields.remove(article) else {
        return Ok(());
    };
    if fields.contains_key(kueue) {
        return Err(Conflict {
            path: format!("{prefix}.{article}"),
            message: format!(
                "the article's name for {prefix}.{kueue}, which is also given; keep one of the two"
            ),
        });
    }
    let shown = flow(&value);
    fields.insert(kueue.to_string(), value);
    told.push(format!(
        "{prefix}.{article} (the article's name) read as {prefix}.{kueue}, {meaning}; `arbiter convert` writes `{kueue}: {shown}`"
    ));
    Ok(())
}

/// Each flavor's `resources` given as a map (`{nvidia.com/gpu: "2"}`) becomes
/// Kueue's list of `{name, nominalQuota}` in the order of the group's
/// `coveredResources` (Kueue requires that order), the rest after it. A
/// value that is itself a mapping (`{nominalQuota: 8, borrowingLimit: 2}`)
/// keeps its fields.
fn map_resources(spec: &mut Map<String, Value>, told: &mut Vec<String>) {
    let Some(groups) = spec.get_mut("resourceGroups").and_then(Value::as_array_mut) else {
        return;
    };
    for (gi, group) in groups.iter_mut().enumerate() {
        let Some(group) = group.as_object_mut() else {
            continue;
        };
        let covered: Vec<String> = group
            .get("coveredResources")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let Some(flavors) = group.get_mut("flavors").and_then(Value::as_array_mut) else {
            continue;
        };
        for (fi, flavor) in flavors.iter_mut().enumerate() {
            let Some(resources) = flavor.get_mut("resources") else {
                continue;
            };
            let Value::Object(map) = resources else {
                continue;
            };
            let mut names: Vec<&String> = map.keys().collect();
            names.sort_by_key(|name| {
                covered
                    .iter()
                    .position(|c| c == *name)
                    .unwrap_or(usize::MAX)
            });
            let list: Vec<Value> = names
                .into_iter()
                .map(|name| {
                    let mut quota = Map::new();
                    quota.insert("name".into(), Value::String(name.clone()));
                    match &map[name] {
                        Value::Object(fields) => {
                            for (k, v) in fields {
                                quota.entry(k.clone()).or_insert_with(|| v.clone());
                            }
                        }
                        amount => {
                            quota.insert("nominalQuota".into(), amount.clone());
                        }
                    }
                    Value::Object(quota)
                })
                .collect();
            *resources = Value::Array(list);
            told.push(format!(
                "spec.resourceGroups[{gi}].flavors[{fi}].resources: the article's map (resource: quantity) read as nominal quotas; `arbiter convert` writes Kueue's list, `resources: {}`",
                flow(resources)
            ));
        }
    }
}

/// `value` in YAML flow style, as a user would write it in a manifest:
/// `{name: nvidia.com/gpu, nominalQuota: "2"}`.
fn flow(value: &Value) -> String {
    match value {
        Value::Object(fields) => {
            let inner: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}: {}", scalar(k), flow(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(flow).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::String(text) => scalar(text),
        other => other.to_string(),
    }
}

/// A string plain where YAML would read it back as the same string, else quoted.
fn scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '-' | '_'))
        && text.starts_with(|c: char| c.is_ascii_alphabetic())
        && !matches!(
            text.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null"
        );
    if plain {
        text.to_string()
    } else {
        serde_json::to_string(text).unwrap_or_default()
    }
}

/// A duration in whole days (`7d`, the article's; Kubernetes durations have
/// no `d`) becomes hours.
fn days(fields: &mut Map<String, Value>, prefix: &str, key: &str, told: &mut Vec<String>) {
    let Some(text) = fields.get(key).and_then(Value::as_str) else {
        return;
    };
    let Some(count) = text
        .trim()
        .strip_suffix('d')
        .and_then(|n| n.parse::<u32>().ok())
    else {
        return;
    };
    let hours = format!("{}h", u64::from(count) * 24);
    told.push(format!(
        "{prefix}.{key}: `{text}` (days, the article's; Kubernetes durations have no `d`) read as `{hours}`; `arbiter convert` writes `{key}: {hours}`"
    ));
    fields.insert(key.to_string(), Value::String(hours));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn map_resources_become_kueue_lists_in_covered_order() {
        let mut cq = json!({"spec": {"resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu", "memory", "cpu"],
        "flavors": [
            {"name": "a100", "resources": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}},
            {"name": "v100", "resources": {"nvidia.com/gpu": {"nominalQuota": 1, "borrowingLimit": 1}}},
            {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}
        ]}]}});
        let told = rewrite(ArticleKind::ClusterQueue, &mut cq).unwrap_or_else(|c| panic!("{c:?}"));
        assert_eq!(told.len(), 2, "{told:?}");
        assert!(
            told[0].starts_with("spec.resourceGroups[0].flavors[0].resources: the article's map"),
            "{}",
            told[0]
        );
        assert!(
            told[0].ends_with(r#"`resources: [{name: nvidia.com/gpu, nominalQuota: "2"}, {name: memory, nominalQuota: "32Gi"}, {name: cpu, nominalQuota: "8"}]`"#),
            "{}",
            told[0]
        );
        let flavors = &cq["spec"]["resourceGroups"][0]["flavors"];
        assert_eq!(
            flavors[0]["resources"],
            json!([
                {"name": "nvidia.com/gpu", "nominalQuota": "2"},
                {"name": "memory", "nominalQuota": "32Gi"},
                {"name": "cpu", "nominalQuota": "8"}
            ])
        );
        assert_eq!(
            flavors[1]["resources"],
            json!([{"name": "nvidia.com/gpu", "nominalQuota": 1, "borrowingLimit": 1}])
        );
        assert_eq!(flavors[2]["resources"][0]["nominalQuota"], 4);
    }

    #[test]
    fn flavor_names_are_kueues_and_both_forms_conflict() {
        let mut flavor = json!({"spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]}});
        let told =
            rewrite(ArticleKind::ResourceFlavor, &mut flavor).unwrap_or_else(|c| panic!("{c:?}"));
        assert_eq!(
            flavor["spec"]["nodeLabels"]["nvidia.com/gpu.product"],
            "NVIDIA-A100-SXM4-40GB"
        );
        assert_eq!(flavor["spec"]["nodeTaints"][0]["effect"], "NoSchedule");
        assert!(flavor["spec"].get("nodeSelector").is_none());
        assert!(
            told[0].starts_with("spec.nodeSelector (the article's name) read as spec.nodeLabels"),
            "{}",
            told[0]
        );
        assert!(
            told[0].ends_with("`arbiter convert` writes `nodeLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB}`"),
            "{}",
            told[0]
        );
        assert!(
            told[1].ends_with(r#"`arbiter convert` writes `nodeTaints: [{effect: NoSchedule, key: nvidia.com/gpu, value: "true"}]`"#),
            "{}",
            told[1]
        );

        let mut both = json!({"spec": {"nodeSelector": {"a": "b"}, "nodeLabels": {"a": "c"}}});
        let conflict = rewrite(ArticleKind::ResourceFlavor, &mut both).err();
        assert_eq!(
            conflict.map(|c| c.path).as_deref(),
            Some("spec.nodeSelector")
        );
    }

    #[test]
    fn scheduling_autoscaling_and_days_are_rewritten() {
        let mut cq = json!({"spec": {
            "scheduling": {"algorithm": "fair-scheduling", "adaptiveWeights": {"enabled": true, "adjustmentInterval": "1h"}},
            "autoscaling": {"enabled": true, "targetCPUUtilization": 70},
            "resourceReclaim": {"enabled": true, "reclaimTimeout": "2d"}}});
        let told = rewrite(ArticleKind::ClusterQueue, &mut cq).unwrap_or_else(|c| panic!("{c:?}"));
        assert_eq!(cq["spec"]["scheduling"]["algorithm"], "fair-sharing");
        assert_eq!(
            cq["spec"]["scheduling"]["adaptiveWeights"]["adjustmentInterval"],
            "1h"
        );
        assert_eq!(cq["spec"]["autoscaling"]["targetUtilization"], 70);
        assert_eq!(cq["spec"]["resourceReclaim"]["reclaimTimeout"], "48h");
        assert_eq!(told.len(), 3, "{told:?}");

        let mut queue = json!({"spec": {"clusterQueue": "cq",
            "priorityClass": {"name": "high-priority", "weight": 1.5},
            "resourceEstimation": {"historyWindow": "7d"}}});
        let told = rewrite(ArticleKind::LocalQueue, &mut queue).unwrap_or_else(|c| panic!("{c:?}"));
        assert_eq!(queue["spec"]["resourceEstimation"]["historyWindow"], "168h");
        assert_eq!(queue["spec"]["priorityClass"]["weight"], 1.5);
        assert!(
            told[0].starts_with("spec.priorityClass on a queue"),
            "{}",
            told[0]
        );
        assert!(told[0].contains("weight 1.5 multiplies"), "{}", told[0]);
    }
}
