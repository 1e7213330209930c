//! The cluster configuration as the API holds it, turned into the core's
//! checked `Cluster` and node pools exactly as the simulator turns files
//! into them: each object goes through `model::load::load_value` (so
//! `kueue.x-k8s.io` v1beta1/v1beta2 objects and the article's `Queue` read
//! as they do from a file) and then `ClusterBuilder`.
//!
//! Physical capacity comes from the Nodes: a Node belongs to every flavor
//! whose `nodeLabels` are all on it; a flavor without node labels has no
//! pools and is limited by quota alone (Kueue's model). Cordoned Nodes
//! count for nothing. Identical Nodes of a flavor form one pool.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arbiter_core::model::cluster::{Cluster, ClusterBuilder, FlavorId, Namespace, ResourceId};
use arbiter_core::model::limits::MAX_NODES_PER_POOL;
use arbiter_core::model::load::{load_value, Manifest, Source};
use arbiter_core::model::Amount;
use arbiter_core::scheduler::capacity::PoolSpec;
use k8s_openapi::api::core::v1::{Namespace as KubeNamespace, Node};
use kube::api::DynamicObject;
use serde_json::Value;

/// A configuration object as read from the API.
#[derive(Clone, Debug)]
pub struct ApiObject {
    /// `Kind namespace/name` or `Kind name`, how messages name it.
    pub name: String,
    pub object: Value,
}

impl ApiObject {
    pub fn new(object: Value) -> ApiObject {
        let get = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
        let kind = get("/kind");
        let name = match get("/metadata/namespace") {
            "" => format!("{kind} {}", get("/metadata/name")),
            ns => format!("{kind} {ns}/{}", get("/metadata/name")),
        };
        ApiObject { name, object }
    }
}

/// The configuration objects of the stores as the reader takes them
/// (without what the server sets: managed fields, resource version,
/// generation, uid, creation time), in a fixed order.
pub fn api_objects(objects: impl IntoIterator<Item = Arc<DynamicObject>>) -> Vec<ApiObject> {
    let mut objects: Vec<ApiObject> = objects
        .into_iter()
        .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
        .map(|mut v| {
            // What Arbiter writes (the status) and the server keeps
            // (versions, times) is no part of the configuration: a status
            // write must not read as a changed configuration.
            if let Value::Object(object) = &mut v {
                object.remove("status");
            }
            if let Some(Value::Object(meta)) = v.get_mut("metadata") {
                for k in [
                    "managedFields",
                    "resourceVersion",
                    "generation",
                    "uid",
                    "creationTimestamp",
                ] {
                    meta.remove(k);
                }
            }
            ApiObject::new(v)
        })
        .collect();
    objects.sort_by(|a, b| a.name.cmp(&b.name));
    objects
}

/// The Namespaces' labels and annotations, by name.
pub fn namespaces(namespaces: &[Arc<KubeNamespace>]) -> BTreeMap<String, Namespace> {
    namespaces
        .iter()
        .map(|ns| {
            (
                ns.metadata.name.clone().unwrap_or_default(),
                Namespace {
                    labels: ns.metadata.labels.clone().unwrap_or_default(),
                    annotations: ns.metadata.annotations.clone().unwrap_or_default(),
                },
            )
        })
        .collect()
}

/// The configuration built, with what was accepted but not used as written.
#[derive(Debug)]
pub struct Built {
    pub cluster: Cluster,
    pub warnings: Vec<String>,
}

/// An error in the configuration: where (the object, and the field when
/// known) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub at: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// Builds the `Cluster` from the configuration objects and namespaces.
/// `resources` are resource names jobs or nodes use, so that a request
/// nothing covers is a pending reason, not an unknown name. Errors name the
/// object and field, as the simulator's do.
pub fn build(
    objects: &[ApiObject],
    namespaces: &BTreeMap<String, Namespace>,
    resources: impl IntoIterator<Item = String>,
) -> Result<Built, Vec<Problem>> {
    let mut builder = ClusterBuilder::new();
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    for item in objects {
        let mut object = item.object.clone();
        if let Some(Value::Object(meta)) = object.get_mut("metadata") {
            meta.remove("managedFields");
        }
        if let Value::Object(map) = &mut object {
            map.remove("status");
        }
        let source = Source {
            file: PathBuf::from(&item.name),
            document: 1,
        };
        let loaded = match load_value(object, source) {
            Ok(loaded) => loaded,
            Err(e) => {
                errors.push(Problem {
                    at: item.name.clone(),
                    message: e.to_string(),
                });
                continue;
            }
        };
        warnings.extend(
            loaded
                .warnings
                .iter()
                .map(|w| w.message.clone())
                .map(|m| format!("{}: {m}", item.name)),
        );
        for document in loaded.documents {
            let source = item.name.clone();
            match document.manifest {
                Manifest::ResourceFlavor(x) => builder.flavor(source, x),
                Manifest::Cohort(x) => builder.cohort(source, x),
                Manifest::ClusterQueue(x) => builder.cluster_queue(source, *x),
                Manifest::LocalQueue(x) => builder.local_queue(source, x),
                Manifest::WorkloadPriorityClass(x) => builder.priority_class(source, x),
                _ => warnings.push(format!("{source}: not a queue configuration kind; ignored")),
            }
        }
    }
    for (name, namespace) in namespaces {
        builder.namespace(format!("Namespace {name}"), name.clone(), namespace.clone());
    }
    for resource in resources {
        builder.resource(&resource);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    builder
        .build()
        .map(|cluster| Built { cluster, warnings })
        .map_err(|e| {
            e.0.into_iter()
                .map(|e| {
                    // The source of an API object is the object itself; said once.
                    let mut at = if e.source.is_empty() || e.source == e.object {
                        e.object
                    } else {
                        format!("{}: {}", e.source, e.object)
                    };
                    if !e.field.is_empty() {
                        at = format!("{at}: {}", e.field);
                    }
                    Problem {
                        at,
                        message: e.message,
                    }
                })
                .collect()
        })
}

/// The resource names Nodes report as allocatable.
pub fn node_resources(nodes: &[Node]) -> impl Iterator<Item = String> + '_ {
    nodes.iter().flat_map(|node| {
        node.status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .into_iter()
            .flat_map(|a| a.keys().cloned())
    })
}

/// Node pools per flavor from the Nodes (see the module docs).
pub fn pools(cluster: &Cluster, nodes: &[Node]) -> Vec<PoolSpec> {
    let mut grouped: BTreeMap<(FlavorId, Vec<(ResourceId, Amount)>), u32> = BTreeMap::new();
    for node in nodes {
        if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
            continue;
        }
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let mut allocatable: Vec<(ResourceId, Amount)> = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|(name, quantity)| {
                let resource = cluster.resource_id(name)?;
                let amount = Amount::from_quantity(quantity).ok()?;
                (!amount.is_negative()).then_some((resource, amount))
            })
            .collect();
        allocatable.sort();
        for flavor in &cluster.flavors {
            let Some(id) = cluster.flavor_id(&flavor.name) else {
                continue;
            };
            if flavor.node_labels.is_empty()
                || !flavor
                    .node_labels
                    .iter()
                    .all(|(k, v)| labels.get(k) == Some(v))
            {
                continue;
            }
            *grouped.entry((id, allocatable.clone())).or_default() += 1;
        }
    }
    let mut pools = Vec::new();
    for ((flavor, allocatable), mut count) in grouped {
        while count > 0 {
            let nodes = count.min(MAX_NODES_PER_POOL);
            count -= nodes;
            pools.push(PoolSpec {
                flavor,
                nodes,
                allocatable: allocatable.clone(),
                min_nodes: nodes,
                max_nodes: nodes,
                devices: Vec::new(),
            });
        }
    }
    pools
}
