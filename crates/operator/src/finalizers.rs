//! Deletion in use, Kueue's rule: every `arbiter.dev` ClusterQueue and
//! ResourceFlavor carries the finalizer [`IN_USE_FINALIZER`], so deleting one that is in
//! use only marks it: a ClusterQueue stays (admitting nothing new, its
//! running work accounted as before) until it has no admitted workload, a
//! ResourceFlavor until no ClusterQueue names it; then the finalizer is
//! taken off and the API server deletes it. `due` decides from the stores'
//! objects (pure); `write` carries one change out with a JSON merge patch
//! that names the `resourceVersion` it read (a conflict is left to the
//! next look).

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

/// Arbiter's counterpart of Kueue's `kueue.x-k8s.io/resource-in-use`.
pub const IN_USE_FINALIZER: &str = "arbiter.dev/resource-in-use";

/// One finalizer change: the object, and whether the finalizer is added
/// (or taken off).
#[derive(Clone, Debug)]
pub struct Change {
    pub object: Arc<DynamicObject>,
    pub add: bool,
}

impl Change {
    /// `Kind name`, for logs.
    pub fn name(&self) -> String {
        format!(
            "{} {}",
            kind(&self.object),
            self.object.metadata.name.as_deref().unwrap_or_default()
        )
    }
}

fn kind(object: &DynamicObject) -> &str {
    object.types.as_ref().map_or("", |t| t.kind.as_str())
}

fn ours(object: &DynamicObject) -> bool {
    object
        .types
        .as_ref()
        .is_some_and(|t| t.api_version.starts_with("arbiter.dev/"))
}

fn has_finalizer(object: &DynamicObject) -> bool {
    object
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == IN_USE_FINALIZER))
}

/// The flavors ClusterQueue `object` names in its resource groups.
fn flavors_named(object: &DynamicObject) -> impl Iterator<Item = String> + '_ {
    object.data["spec"]["resourceGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["flavors"].as_array().into_iter().flatten())
        .filter_map(|f| f["name"].as_str().map(str::to_string))
}

/// The finalizer changes due: added to every ClusterQueue and
/// ResourceFlavor not being deleted that lacks it; taken off one being
/// deleted once it is free — a ClusterQueue when `admitted(name)` is 0, a
/// ResourceFlavor when no ClusterQueue names it.
/// Called every tick: a pass over the objects' metadata, the flavors the
/// ClusterQueues name read only while a flavor is being deleted.
pub fn due(objects: &[Arc<DynamicObject>], admitted: impl Fn(&str) -> usize) -> Vec<Change> {
    let mut named: Option<BTreeSet<String>> = None;
    let mut changes = Vec::new();
    for object in objects {
        let kind = kind(object);
        // Arbiter's own objects only: a Kueue object read as configuration
        // is Kueue's to protect (and would be stuck with a finalizer no one
        // takes off once Arbiter is gone).
        if (kind != "ClusterQueue" && kind != "ResourceFlavor") || !ours(object) {
            continue;
        }
        let deleting = object.metadata.deletion_timestamp.is_some();
        let has = has_finalizer(object);
        if !deleting && !has {
            changes.push(Change {
                object: object.clone(),
                add: true,
            });
            continue;
        }
        if !(deleting && has) {
            continue;
        }
        let name = object.metadata.name.as_deref().unwrap_or_default();
        let in_use = if kind == "ClusterQueue" {
            admitted(name) > 0
        } else {
            named
                .get_or_insert_with(|| {
                    objects
                        .iter()
                        .filter(|o| self::kind(o) == "ClusterQueue")
                        .flat_map(|o| flavors_named(o).collect::<Vec<_>>())
                        .collect()
                })
                .contains(name)
        };
        if !in_use {
            changes.push(Change {
                object: object.clone(),
                add: false,
            });
        }
    }
    changes
}

/// Carries `change` out: the object's finalizers with ours added or taken
/// off, as of the version it was read at.
pub async fn write(client: &Client, change: &Change) -> Result<(), kube::Error> {
    let object = &change.object;
    let Some(types) = &object.types else {
        return Ok(());
    };
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", types.api_version.as_str()));
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &types.kind));
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut finalizers: Vec<String> = object
        .metadata
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != IN_USE_FINALIZER)
        .collect();
    if change.add {
        finalizers.push(IN_USE_FINALIZER.to_string());
    }
    let patch: Value = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": object.metadata.resource_version,
    }});
    let name = object.metadata.name.as_deref().unwrap_or_default();
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(
        kind: &str,
        name: &str,
        spec: Value,
        finalizer: bool,
        deleting: bool,
    ) -> Arc<DynamicObject> {
        let mut metadata = json!({"name": name, "resourceVersion": "1"});
        if finalizer {
            metadata["finalizers"] = json!(["other.io/keep", IN_USE_FINALIZER]);
        }
        if deleting {
            metadata["deletionTimestamp"] = json!("2026-12-05T00:00:00Z");
        }
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "arbiter.dev/v1alpha1", "kind": kind,
                "metadata": metadata, "spec": spec,
            }))
            .unwrap(),
        )
    }

    fn queue(name: &str, flavor: &str, finalizer: bool, deleting: bool) -> Arc<DynamicObject> {
        let spec = json!({"resourceGroups": [{"coveredResources": ["gpu"],
            "flavors": [{"name": flavor, "resources": [{"name": "gpu", "nominalQuota": 1}]}]}]});
        object("ClusterQueue", name, spec, finalizer, deleting)
    }

    fn flavor(name: &str, finalizer: bool, deleting: bool) -> Arc<DynamicObject> {
        object("ResourceFlavor", name, json!({}), finalizer, deleting)
    }

    fn changes(objects: &[Arc<DynamicObject>], admitted: &[(&str, usize)]) -> Vec<(String, bool)> {
        due(objects, |n| {
            admitted
                .iter()
                .find(|(q, _)| *q == n)
                .map_or(0, |(_, c)| *c)
        })
        .iter()
        .map(|c| (c.name(), c.add))
        .collect()
    }

    #[test]
    fn every_queue_and_flavor_gets_the_finalizer_once() {
        let objects = [
            queue("a", "f", false, false),
            flavor("f", false, false),
            queue("b", "f", true, false),
        ];
        assert_eq!(
            changes(&objects, &[]),
            [
                ("ClusterQueue a".to_string(), true),
                ("ResourceFlavor f".to_string(), true)
            ]
        );
    }

    #[test]
    fn a_deleted_queue_keeps_it_while_it_has_admitted_workloads() {
        let objects = [queue("a", "f", true, true), flavor("f", true, false)];
        assert!(changes(&objects, &[("a", 2)]).is_empty());
        assert_eq!(
            changes(&objects, &[("a", 0)]),
            [("ClusterQueue a".to_string(), false)]
        );
    }

    #[test]
    fn a_deleted_flavor_keeps_it_while_a_queue_names_it() {
        let objects = [queue("a", "f", true, true), flavor("f", true, true)];
        assert!(changes(&objects, &[("a", 1)]).is_empty());
        let alone = [flavor("f", true, true)];
        assert_eq!(
            changes(&alone, &[]),
            [("ResourceFlavor f".to_string(), false)]
        );
        // Not ours: a deleted object without our finalizer is left alone.
        assert!(changes(&[flavor("g", false, true)], &[]).is_empty());
    }

    #[test]
    fn kueues_objects_are_left_to_kueue() {
        let mut kueue = (*flavor("k", false, false)).clone();
        kueue.types.as_mut().unwrap().api_version = "kueue.x-k8s.io/v1beta2".into();
        assert!(changes(&[Arc::new(kueue)], &[]).is_empty());
    }
}
