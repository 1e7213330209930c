//! The cluster configuration as the API holds it, turned into the core's
//! checked `Cluster` and node pools exactly as the simulator turns files
//! into them: each object goes through `model::load::load_value` (so
//! `kueue.x-k8s.io` v1beta1/v1beta2 objects and the article's `Queue` read
//! as they do from a file) and then `ClusterBuilder`.
//!
//! Physical capacity comes from the Nodes: a Node belongs to every flavor
//! whose `nodeLabels` are all on it; a flavor without node labels has no
//! pools and is limited by quota alone (Kueue's model). Cordoned Nodes
//! count for nothing. Identical Nodes of a flavor form one pool, naming
//! its Nodes. A Node holding a resource on separate cards says so in its
//! `arbiter.dev/devices` annotation ([`DEVICES_ANNOTATION`]).
//!
//! The configuration is topology-aware: Topology objects are read, a
//! flavor's `topologyName` must name one, and the Nodes of a flavor with a
//! Topology are pooled by the values of its level labels too, so every
//! pool lies inside one domain of each level and carries those labels
//! ([`NodePools::labels`], the core's `label_pools`). The
//! `kubernetes.io/hostname` level is left out of the grouping: the core
//! makes each node its own domain of it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use arbiter_core::model::api::HOSTNAME_LABEL;
use arbiter_core::model::cluster::{
    Cluster, ClusterBuilder, FlavorId, Inactive, Namespace, ResourceId,
};
use arbiter_core::model::limits::MAX_NODES_PER_POOL;
use arbiter_core::model::load::{self as model_load, load_value, Source};
use arbiter_core::model::Amount;
use arbiter_core::scheduler::capacity::{DeviceSpec, PoolSpec};
use k8s_openapi::api::core::v1::{Namespace as KubeNamespace, Node};
use kube::api::DynamicObject;
use serde_json::Value;

/// What a configuration is built from, as the watches hold it now: the
/// queue objects, Namespaces, Nodes (by name), the resources Nodes and
/// jobs name, and a fingerprint of everything the build reads — equal
/// fingerprints build equal configurations, so a caller rebuilds only
/// when it changed. The driver and the shadow read it alike.
pub struct ConfigInputs {
    pub objects: Vec<ApiObject>,
    pub namespaces: BTreeMap<String, Namespace>,
    pub nodes: Vec<Node>,
    pub resources: BTreeSet<String>,
    pub fingerprint: String,
}

impl ConfigInputs {
    /// Reads the watches' objects, adding the resources `jobs` ask for.
    pub fn read(
        objects: impl IntoIterator<Item = Arc<DynamicObject>>,
        namespaces: &[Arc<KubeNamespace>],
        nodes: &[Arc<Node>],
        jobs: impl IntoIterator<Item = String>,
    ) -> ConfigInputs {
        let objects = api_objects(objects);
        let namespaces = self::namespaces(namespaces);
        let mut nodes: Vec<Node> = nodes.iter().map(|n| (**n).clone()).collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut resources: BTreeSet<String> = node_resources(&nodes).collect();
        resources.extend(jobs);
        // What of a Node the build reads.
        let node_view: Vec<_> = nodes
            .iter()
            .map(|n| {
                (
                    &n.metadata.name,
                    &n.metadata.labels,
                    n.spec.as_ref().and_then(|s| s.unschedulable),
                    n.status.as_ref().and_then(|s| s.allocatable.as_ref()),
                    n.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(DEVICES_ANNOTATION)),
                )
            })
            .collect();
        let fingerprint = serde_json::json!({
            "objects": objects.iter().map(|o| &o.object).collect::<Vec<_>>(),
            "namespaces": namespaces.iter().map(|(k, v)| (k, (&v.labels, &v.annotations))).collect::<Vec<_>>(),
            "nodes": serde_json::to_value(&node_view).unwrap_or_default(),
            "resources": resources,
        })
        .to_string();
        ConfigInputs {
            objects,
            namespaces,
            nodes,
            resources,
            fingerprint,
        }
    }
}

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
pub struct BuiltCluster {
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

/// The builder fed with the configuration objects and namespaces, the
/// warnings, and the objects that could not be read (name, error).
fn load(
    objects: &[ApiObject],
    namespaces: &BTreeMap<String, Namespace>,
    resources: impl IntoIterator<Item = String>,
) -> (ClusterBuilder, Vec<String>, Vec<(String, Problem)>) {
    let mut builder = ClusterBuilder::new();
    // Topologies are watched: a flavor's topologyName is in force.
    builder.topology_aware(true);
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
        // A ClusterQueue being deleted (kept by its in-use finalizer until
        // its admitted workloads are gone) admits nothing new, as in Kueue.
        if deleting_cluster_queue(&object) {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("stopPolicy".into(), Value::String("Hold".into()));
            }
        }
        let source = Source {
            file: PathBuf::from(&item.name),
            document: 1,
        };
        let loaded = match load_value(object, source) {
            Ok(loaded) => loaded,
            Err(e) => {
                let problem = Problem {
                    at: item.name.clone(),
                    message: e.to_string(),
                };
                errors.push((item.name.clone(), problem));
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
            let mut told = Vec::new();
            match model_load::topology(&document.manifest, &document.source, &mut told) {
                Some(Ok(topology)) => {
                    warnings.extend(told.iter().map(|w| format!("{source}: {}", w.message)));
                    builder.topology(source, topology);
                    continue;
                }
                Some(Err(e)) => {
                    let problem = Problem {
                        at: source.clone(),
                        message: e.to_string(),
                    };
                    errors.push((source, problem));
                    continue;
                }
                None => {}
            }
            if builder.add(source.clone(), document.manifest).is_some() {
                warnings.push(format!("{source}: not a queue configuration kind; ignored"));
            }
        }
    }
    for (name, namespace) in namespaces {
        builder.namespace(format!("Namespace {name}"), name.clone(), namespace.clone());
    }
    for resource in resources {
        builder.resource(&resource);
    }
    (builder, warnings, errors)
}

/// Whether `object` is a ClusterQueue being deleted.
pub fn deleting_cluster_queue(object: &Value) -> bool {
    object["kind"] == "ClusterQueue" && !object["metadata"]["deletionTimestamp"].is_null()
}

/// Builds the `Cluster` from the configuration objects and namespaces,
/// strictly: any problem refuses all (the validating webhook's check).
/// `resources` are resource names jobs or nodes use, so that a request
/// nothing covers is a pending reason, not an unknown name. Errors name the
/// object and field, as the simulator's do.
pub fn build(
    objects: &[ApiObject],
    namespaces: &BTreeMap<String, Namespace>,
    resources: impl IntoIterator<Item = String>,
) -> Result<BuiltCluster, Vec<Problem>> {
    let (builder, warnings, errors) = load(objects, namespaces, resources);
    if !errors.is_empty() {
        return Err(errors.into_iter().map(|(_, p)| p).collect());
    }
    builder
        .build()
        .map(|cluster| BuiltCluster { cluster, warnings })
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

/// Builds what is valid, as Kueue does: an object that cannot be read or
/// has a problem of its own, and every object depending on one, is left
/// out and listed in `cluster.inactive` with a reason; the rest is in
/// force. This is what the operator runs on.
pub fn build_lenient(
    objects: &[ApiObject],
    namespaces: &BTreeMap<String, Namespace>,
    resources: impl IntoIterator<Item = String>,
) -> BuiltCluster {
    let (builder, mut warnings, errors) = load(objects, namespaces, resources);
    let mut unread = Vec::new();
    for (object, problem) in errors {
        let queue_kind = object.split_once(' ').and_then(|(kind, name)| {
            let kind = QUEUE_KINDS.iter().find(|k| **k == kind)?;
            Some((*kind, name.to_string()))
        });
        match queue_kind {
            Some((kind, name)) => unread.push(Inactive {
                kind,
                name,
                reason: "InvalidSpec",
                message: problem.message,
                errors: Vec::new(),
            }),
            // Not a queue object (an article `Queue`, say): told, not kept.
            None => warnings.push(format!("{problem}; ignored")),
        }
    }
    let (cluster, _) = builder.build_lenient_after(unread);
    BuiltCluster { cluster, warnings }
}

/// The queue objects' kinds, as `Inactive` names them.
const QUEUE_KINDS: [&str; 6] = [
    "Topology",
    "ResourceFlavor",
    "WorkloadPriorityClass",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
];

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

/// The Node annotation declaring which resources the node holds on
/// separate cards, and how many: `example.com/gpu-milli=8` (the node's
/// allocatable split evenly over 8 cards), several separated by commas.
pub const DEVICES_ANNOTATION: &str = "arbiter.dev/devices";

/// The devices a Node declares ([`DEVICES_ANNOTATION`]) against its
/// allocatable. Resources nothing asks for are left out (no card of them
/// is ever taken). An annotation that cannot be read is an error naming
/// the Node; the Node then counts as one number per resource, as without it.
fn node_devices(
    cluster: &Cluster,
    node: &str,
    annotation: &str,
    allocatable: &[(ResourceId, Amount)],
) -> Result<Vec<DeviceSpec>, String> {
    let fail = |what: String| {
        format!("Node {node}: annotation {DEVICES_ANNOTATION} \"{annotation}\": {what}; write it as <resource>=<cards>[,<resource>=<cards>] (e.g. example.com/gpu-milli=8)")
    };
    let mut devices: Vec<DeviceSpec> = Vec::new();
    for part in annotation
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let Some((name, cards)) = part.split_once('=') else {
            return Err(fail(format!("`{part}` has no `=`")));
        };
        let (name, cards) = (name.trim(), cards.trim());
        let cards: u64 = cards
            .parse()
            .map_err(|_| fail(format!("`{cards}` is not a number of cards")))?;
        let Some(resource) = cluster.resource_id(name) else {
            continue;
        };
        let Some(&(_, total)) = allocatable.iter().find(|(r, _)| *r == resource) else {
            return Err(fail(format!("the Node's allocatable has no {name}")));
        };
        if devices.iter().any(|d| d.resource == resource) {
            return Err(fail(format!("{name} is given twice")));
        }
        devices.push(DeviceSpec::split(resource, name, total, cards).map_err(fail)?);
    }
    devices.sort_by_key(|d| d.resource);
    Ok(devices)
}

/// A Node whose device annotation cannot be read: the Node (name, uid) and
/// the message, which names it.
pub type NodeProblem = (String, String, String);

/// The node pools the Nodes make (see the module docs).
#[derive(Debug, Default)]
pub struct NodePools {
    /// Per flavor, in the Nodes' order, each pool naming its Nodes.
    pub pools: Vec<PoolSpec>,
    /// Each pool's topology labels (same index as `pools`): the values
    /// its Nodes share of their flavor's Topology levels (the hostname
    /// level aside); empty for a flavor without a Topology.
    pub labels: Vec<BTreeMap<String, String>>,
    /// Nodes whose device annotations cannot be read.
    pub problems: Vec<NodeProblem>,
}

/// The labels of `flavor`'s Topology levels a Node carries (the hostname
/// level aside): what its pool is told by, and gives the core.
fn topology_labels(
    cluster: &Cluster,
    flavor: &arbiter_core::model::cluster::Flavor,
    labels: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let Some(topology) = flavor
        .topology
        .and_then(|t| cluster.topologies.get(t.index()))
    else {
        return BTreeMap::new();
    };
    topology
        .levels
        .iter()
        .filter(|level| level.as_str() != HOSTNAME_LABEL)
        .filter_map(|level| Some((level.clone(), labels.get(level)?.clone())))
        .collect()
}

/// Node pools per flavor from the Nodes (see the module docs), in the
/// Nodes' order, each pool naming its Nodes, with its topology labels;
/// and the problems with Nodes' device annotations.
pub fn pools(cluster: &Cluster, nodes: &[Node]) -> NodePools {
    // What a Node offers: its allocatable resources and its devices; and
    // where it is: its flavor's topology labels. Nodes alike in both
    // share a pool.
    type NodeOffer = (Vec<(ResourceId, Amount)>, Vec<DeviceSpec>);
    type Alike = (NodeOffer, BTreeMap<String, String>);
    let mut grouped: BTreeMap<FlavorId, Vec<(Alike, Vec<String>)>> = BTreeMap::new();
    let mut problems = Vec::new();
    for node in nodes {
        if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
            continue;
        }
        let name = node.metadata.name.clone().unwrap_or_default();
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
        let annotation = node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEVICES_ANNOTATION));
        let devices = match annotation {
            Some(text) => node_devices(cluster, &name, text, &allocatable).unwrap_or_else(|e| {
                problems.push((
                    name.clone(),
                    node.metadata.uid.clone().unwrap_or_default(),
                    e,
                ));
                Vec::new()
            }),
            None => Vec::new(),
        };
        let offer = (allocatable, devices);
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
            // Identical Nodes of a flavor, in the same topology domains,
            // in one pool; a pool's Nodes stay in the Nodes' order.
            let key = (offer.clone(), topology_labels(cluster, flavor, &labels));
            let offers = grouped.entry(id).or_default();
            match offers.iter_mut().find(|(o, _)| *o == key) {
                Some((_, names)) => names.push(name.clone()),
                None => offers.push((key, vec![name.clone()])),
            }
        }
    }
    // A flavor a ClusterQueue autoscales may grow and shrink (within the
    // queue's minReplicas and maxReplicas, which the core applies); the
    // others are as many Nodes as there are.
    let autoscaled: BTreeSet<FlavorId> = cluster
        .cluster_queues
        .iter()
        .filter(|cq| cq.autoscaling.is_some())
        .flat_map(|cq| cq.groups.iter().flat_map(|g| g.flavors.iter().copied()))
        .collect();
    let mut built = NodePools {
        problems,
        ..NodePools::default()
    };
    for (flavor, offers) in grouped {
        for (((allocatable, devices), place), names) in offers {
            for names in names.chunks(MAX_NODES_PER_POOL as usize) {
                let nodes = names.len() as u32;
                let (min_nodes, max_nodes) = if autoscaled.contains(&flavor) {
                    (0, MAX_NODES_PER_POOL)
                } else {
                    (nodes, nodes)
                };
                built.pools.push(PoolSpec {
                    flavor,
                    nodes,
                    allocatable: allocatable.clone(),
                    min_nodes,
                    max_nodes,
                    devices: devices.clone(),
                    names: names.to_vec(),
                });
                built.labels.push(place.clone());
            }
        }
    }
    built
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster() -> Cluster {
        let flavor = ApiObject::new(json!({
            "apiVersion": "arbiter.dev/v1alpha1", "kind": "ResourceFlavor",
            "metadata": {"name": "t4"}, "spec": {"nodeLabels": {"gpu": "t4"}}
        }));
        let resources = ["example.com/gpu-milli".to_string(), "cpu".to_string()];
        build(&[flavor], &BTreeMap::new(), resources)
            .unwrap_or_else(|e| panic!("{e:?}"))
            .cluster
    }

    fn node(name: &str, devices: Option<&str>) -> Node {
        let annotations = devices.map(|d| json!({DEVICES_ANNOTATION: d}));
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"gpu": "t4"}, "annotations": annotations},
            "status": {"allocatable": {"cpu": "32", "example.com/gpu-milli": "4000"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    const BLOCK: &str = "example.com/block";
    const RACK: &str = "example.com/rack";

    /// Topology `dc` (`levels`), flavor `tas` naming it and flavor `plain`
    /// on the same Nodes without one.
    fn racked(levels: &[&str]) -> Vec<ApiObject> {
        let levels: Vec<_> = levels.iter().map(|l| json!({"nodeLabel": l})).collect();
        [
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "Topology",
                   "metadata": {"name": "dc"}, "spec": {"levels": levels}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ResourceFlavor",
                   "metadata": {"name": "tas"},
                   "spec": {"nodeLabels": {"gpu": "t4"}, "topologyName": "dc"}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ResourceFlavor",
                   "metadata": {"name": "plain"}, "spec": {"nodeLabels": {"gpu": "t4"}}}),
        ]
        .map(ApiObject::new)
        .to_vec()
    }

    fn racked_node(name: &str, block: Option<&str>, rack: Option<&str>) -> Node {
        let mut node = node(name, None);
        let labels = node.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(HOSTNAME_LABEL.into(), format!("host-{name}"));
        for (label, value) in [(BLOCK, block), (RACK, rack)] {
            if let Some(value) = value {
                labels.insert(label.into(), value.into());
            }
        }
        node
    }

    #[test]
    fn nodes_of_a_flavor_with_a_topology_are_pooled_by_their_domains() {
        let objects = racked(&[BLOCK, RACK, HOSTNAME_LABEL]);
        let c = build(&objects, &BTreeMap::new(), ["cpu".to_string()])
            .unwrap_or_else(|e| panic!("{e:?}"))
            .cluster;
        let nodes = [
            racked_node("a", Some("b1"), Some("r1")),
            racked_node("b", Some("b2"), Some("r1")),
            racked_node("c", Some("b1"), Some("r1")),
            racked_node("d", Some("b1"), Some("r2")),
            racked_node("e", Some("b1"), None),
        ];
        let built = pools(&c, &nodes);
        let tas = c.flavor_id("tas").unwrap();
        let by_flavor = |flavor| {
            built
                .pools
                .iter()
                .zip(&built.labels)
                .filter(|(p, _)| p.flavor == flavor)
                .map(|(p, l)| (p.names.clone(), l.clone()))
                .collect::<Vec<_>>()
        };
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        // Each pool inside one domain of every level (the same rack name
        // in another block is another rack); the host level is no part of
        // it (the core makes each node its own host domain); a Node
        // without a rack label is in its block, in no rack.
        assert_eq!(
            by_flavor(tas),
            vec![
                (
                    vec!["a".into(), "c".into()],
                    labels(&[(BLOCK, "b1"), (RACK, "r1")])
                ),
                (vec!["b".into()], labels(&[(BLOCK, "b2"), (RACK, "r1")])),
                (vec!["d".into()], labels(&[(BLOCK, "b1"), (RACK, "r2")])),
                (vec!["e".into()], labels(&[(BLOCK, "b1")])),
            ]
        );
        // A flavor without a Topology: identical Nodes in one pool, no labels.
        let plain = c.flavor_id("plain").unwrap();
        assert_eq!(
            by_flavor(plain),
            vec![(
                ["a", "b", "c", "d", "e"].map(String::from).to_vec(),
                BTreeMap::new()
            )]
        );
    }

    #[test]
    fn a_topology_with_errors_is_left_out_with_its_flavor_and_the_rest_stays() {
        // The host level anywhere but last is refused (Kueue's rule).
        let objects = racked(&[HOSTNAME_LABEL, RACK]);
        let built = build_lenient(&objects, &BTreeMap::new(), ["cpu".to_string()]);
        let inactive: Vec<_> = built
            .cluster
            .inactive
            .iter()
            .map(|i| (i.kind, i.name.as_str(), i.message.as_str()))
            .collect();
        assert!(
            matches!(&inactive[..], [("Topology", "dc", topology), ("ResourceFlavor", "tas", flavor)]
                if topology.contains("spec.levels[0].nodeLabel") && topology.contains("only be the last")
                    && flavor.contains("Topology dc is invalid")),
            "{inactive:#?}"
        );
        assert!(built.cluster.flavor_id("plain").is_some());
        // A Topology that cannot be read at all is told the same way.
        let mut objects = racked(&[RACK]);
        objects[0].object["spec"]["levels"] = json!("rack");
        let built = build_lenient(&objects, &BTreeMap::new(), ["cpu".to_string()]);
        let kinds: Vec<_> = built
            .cluster
            .inactive
            .iter()
            .map(|i| (i.kind, i.reason))
            .collect();
        assert_eq!(kinds[0], ("Topology", "InvalidSpec"), "{kinds:?}");
        assert!(built.cluster.flavor_id("tas").is_none());
        assert!(built.cluster.flavor_id("plain").is_some());
    }

    #[test]
    fn nodes_declaring_cards_form_named_pools_with_devices() {
        let c = cluster();
        let nodes = [
            node("a", Some("example.com/gpu-milli=4")),
            node("b", None),
            node("c", Some(" example.com/gpu-milli = 4 ,")),
        ];
        let NodePools {
            pools, problems, ..
        } = pools(&c, &nodes);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(pools.len(), 2);
        assert_eq!(pools[0].names, ["a", "c"]);
        assert_eq!(pools[0].devices.len(), 1);
        assert_eq!(pools[0].devices[0].cards, 4);
        assert_eq!(pools[0].devices[0].per_card, Amount::from_units(1000));
        assert_eq!(pools[1].names, ["b"]);
        assert!(pools[1].devices.is_empty());
    }

    #[test]
    fn an_annotation_that_cannot_be_read_names_the_node_and_counts_it_without_cards() {
        let c = cluster();
        for (annotation, says) in [
            ("example.com/gpu-milli", "has no `=`"),
            ("example.com/gpu-milli=four", "not a number of cards"),
            (
                "example.com/gpu-milli=3",
                "does not split evenly into 3 cards",
            ),
            ("example.com/gpu-milli=0", "give 1 to 256"),
            (
                "example.com/gpu-milli=4,example.com/gpu-milli=4",
                "given twice",
            ),
            ("cpu=7,memory=2", "cpu 32 does not split evenly"),
        ] {
            let NodePools {
                pools, problems, ..
            } = pools(&c, &[node("bad", Some(annotation))]);
            let [(node, _, problem)] = &problems[..] else {
                panic!("{annotation}: {problems:?}")
            };
            assert_eq!(node, "bad");
            assert!(
                problem.starts_with("Node bad: annotation arbiter.dev/devices")
                    && problem.contains(says),
                "{annotation}: {problem}"
            );
            assert!(pools[0].devices.is_empty(), "{annotation}");
        }
        // A resource nothing asks for: no card of it is ever taken.
        let NodePools {
            pools, problems, ..
        } = pools(&c, &[node("n", Some("example.com/other=2"))]);
        assert!(problems.is_empty() && pools[0].devices.is_empty());
    }
}
