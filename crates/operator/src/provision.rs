//! Autoscaling in a cluster: the core's scale plan (`Step::scale`) as
//! cluster-autoscaler's `autoscaling.x-k8s.io/v1` ProvisioningRequests, the
//! shape Kueue's ProvisioningRequest admission check uses.
//!
//! A scale-up of `n` nodes of a flavor becomes one ProvisioningRequest in
//! the operator's namespace (`generateName: arbiter-FLAVOR-`, label
//! `arbiter.dev/flavor`) for `n` pods of the PodTemplate `arbiter-FLAVOR`:
//! one pod the size of one of the flavor's Nodes, with its node labels as
//! the node selector and its tolerations, so that each pod is a whole new
//! Node. Once the request says `Provisioned=True` (or `Failed=True`) its
//! nodes are no longer in flight (`Input::ProvisioningDone`); the Nodes
//! themselves reach the core as the Node watch sees them. A scale-down
//! withdraws the newest requests of the flavor covering that many nodes, so
//! cluster-autoscaler may take the idle Nodes away. Without the CRD (no
//! cluster-autoscaler with ProvisioningRequests) nothing is written and
//! the plan is logged once.
//!
//! It decides nothing: what to ask for is the core's (the autoscale hook,
//! bounded by `minReplicas`/`maxReplicas`).

use std::collections::BTreeSet;
use std::sync::Arc;

use arbiter_core::model::cluster::{Cluster, FlavorId};
use arbiter_core::scheduler::capacity::PoolSpec;
use arbiter_core::scheduler::{ScaleKind, ScaleRequest};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::reflector::Store;
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::watch::{self, Watched};

/// The label naming the flavor a ProvisioningRequest asks Nodes for.
pub const FLAVOR_LABEL: &str = "arbiter.dev/flavor";

/// cluster-autoscaler's class for "all of these pods, or nothing".
pub const PROVISIONING_CLASS: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";

/// The field manager of the PodTemplates.
const MANAGER: &str = "arbiter";

/// The ProvisioningRequests of the operator's namespace and what is to be
/// done with them.
pub struct Provisioner {
    client: Client,
    namespace: String,
    /// `None`: the API serves no ProvisioningRequest.
    watched: Option<(ApiResource, Watched<DynamicObject>)>,
    /// Requests whose end (Provisioned or Failed) was told to the core.
    told: BTreeSet<String>,
    /// A plan without the CRD was logged.
    warned: bool,
}

/// One request as the watch holds it.
struct Request {
    name: String,
    uid: String,
    flavor: String,
    nodes: u32,
    created: String,
    ended: bool,
}

fn read(object: &DynamicObject) -> Option<Request> {
    let flavor = object.metadata.labels.as_ref()?.get(FLAVOR_LABEL)?.clone();
    let value = serde_json::to_value(object).ok()?;
    let nodes = value
        .pointer("/spec/podSets")
        .and_then(Value::as_array)
        .map(|sets| sets.iter().filter_map(|s| s["count"].as_u64()).sum::<u64>() as u32)
        .unwrap_or(0);
    let ended = value
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                matches!(c["type"].as_str(), Some("Provisioned" | "Failed"))
                    && c["status"] == "True"
            })
        });
    Some(Request {
        name: object.metadata.name.clone()?,
        uid: object.metadata.uid.clone().unwrap_or_default(),
        flavor,
        nodes,
        created: value
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        ended,
    })
}

impl Provisioner {
    /// Watches the ProvisioningRequests of `namespace` labelled with a
    /// flavor, if the API serves them.
    pub async fn start(client: Client, namespace: &str, wake: Arc<Notify>) -> Provisioner {
        let gvk = GroupVersionKind::gvk("autoscaling.x-k8s.io", "v1", "ProvisioningRequest");
        let watched = watch::dynamic_in(&client, &gvk, namespace, FLAVOR_LABEL, wake).await;
        if watched.is_none() {
            tracing::info!("the API serves no autoscaling.x-k8s.io/v1 ProvisioningRequest; autoscaling plans are only logged");
        }
        Provisioner {
            client,
            namespace: namespace.to_string(),
            watched,
            told: BTreeSet::new(),
            warned: false,
        }
    }

    fn store(&self) -> Option<&Store<DynamicObject>> {
        self.watched.as_ref().map(|(_, w)| &w.store)
    }

    /// Requests that ended (Provisioned or Failed) since last asked, as
    /// (flavor name, nodes): no longer in flight.
    pub fn ended(&mut self) -> Vec<(String, u32)> {
        let Some(store) = self.store() else {
            return Vec::new();
        };
        let requests: Vec<Request> = store.state().iter().filter_map(|o| read(o)).collect();
        let out = requests
            .iter()
            .filter(|r| r.ended && !self.told.contains(&r.uid))
            .map(|r| (r.flavor.clone(), r.nodes))
            .collect();
        // The ended requests still there are remembered; a withdrawn one is
        // forgotten, so this never grows past the requests that exist.
        self.told = requests
            .into_iter()
            .filter(|r| r.ended)
            .map(|r| r.uid)
            .collect();
        out
    }

    /// Carries out a step's scale plan (on tasks of their own; a failure is
    /// logged, and the core asks again while the nodes are still wanted).
    pub fn apply(&mut self, plan: &[ScaleRequest], cluster: &Cluster, pools: &[PoolSpec]) {
        if plan.is_empty() {
            return;
        }
        let Some((resource, _)) = &self.watched else {
            if !self.warned {
                self.warned = true;
                tracing::warn!(?plan, "autoscaling asks for nodes, but the API serves no ProvisioningRequest (install cluster-autoscaler with ProvisioningRequests enabled); the plan is not carried out");
            }
            return;
        };
        let requests: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.namespace, resource);
        for request in plan {
            let flavor = &cluster.flavors[request.flavor.index()];
            match request.kind {
                ScaleKind::Up => {
                    let Some(template) = pod_template(cluster, pools, request.flavor) else {
                        tracing::warn!(flavor = %flavor.name, "no Node of the flavor to take a node's size from; a scale-up needs one");
                        continue;
                    };
                    let templates: Api<k8s_openapi::api::core::v1::PodTemplate> =
                        Api::namespaced(self.client.clone(), &self.namespace);
                    let template_name = format!("arbiter-{}", flavor.name);
                    let object =
                        provisioning_request(resource, &flavor.name, &template_name, request.nodes);
                    let requests = requests.clone();
                    let flavor_name = flavor.name.clone();
                    let nodes = request.nodes;
                    tokio::spawn(async move {
                        let applied = templates
                            .patch(
                                &template_name,
                                &PatchParams::apply(MANAGER).force(),
                                &Patch::Apply(&template),
                            )
                            .await;
                        if let Err(e) = applied {
                            tracing::warn!(flavor = %flavor_name, error = %e, "could not write the PodTemplate of a ProvisioningRequest");
                            return;
                        }
                        match requests.create(&PostParams::default(), &object).await {
                            Ok(created) => {
                                tracing::info!(flavor = %flavor_name, nodes, request = ?created.metadata.name, "asked cluster-autoscaler for nodes")
                            }
                            Err(e) => {
                                tracing::warn!(flavor = %flavor_name, error = %e, "could not create a ProvisioningRequest")
                            }
                        }
                    });
                }
                ScaleKind::Down => {
                    // The newest requests of the flavor, until they cover
                    // the Nodes no longer wanted (a request is all or
                    // nothing, so this may give back more: cluster-autoscaler
                    // takes only idle Nodes away, and what is still wanted
                    // is asked for again).
                    let mut mine: Vec<Request> = self
                        .store()
                        .map(|s| s.state().iter().filter_map(|o| read(o)).collect())
                        .unwrap_or_default();
                    mine.retain(|r| r.flavor == flavor.name);
                    mine.sort_by(|a, b| b.created.cmp(&a.created).then(b.name.cmp(&a.name)));
                    let mut covered = 0;
                    for r in mine {
                        if covered >= request.nodes {
                            break;
                        }
                        covered += r.nodes;
                        let requests = requests.clone();
                        tokio::spawn(async move {
                            match requests.delete(&r.name, &DeleteParams::default()).await {
                                Ok(_) => {
                                    tracing::info!(request = %r.name, nodes = r.nodes, "withdrew a ProvisioningRequest no longer needed")
                                }
                                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                                Err(e) => {
                                    tracing::warn!(request = %r.name, error = %e, "could not withdraw a ProvisioningRequest")
                                }
                            }
                        });
                    }
                }
            }
        }
    }
}

/// The PodTemplate of one Node of `flavor`: a pod asking what one of the
/// flavor's Nodes has (`pods` aside), with the flavor's node labels and
/// tolerations. `None` without a pool of the flavor to take the size from.
fn pod_template(cluster: &Cluster, pools: &[PoolSpec], flavor: FlavorId) -> Option<Value> {
    let pool = pools.iter().find(|p| p.flavor == flavor)?;
    let definition = &cluster.flavors[flavor.index()];
    let requests: serde_json::Map<String, Value> = pool
        .allocatable
        .iter()
        .map(|&(r, amount)| (cluster.resource_name(r).to_string(), amount))
        .filter(|(name, _)| name != "pods")
        .map(|(name, amount)| (name, Value::String(amount.to_quantity_string())))
        .collect();
    Some(json!({
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": format!("arbiter-{}", definition.name), "labels": {FLAVOR_LABEL: definition.name}},
        "template": {
            "metadata": {"labels": {FLAVOR_LABEL: definition.name}},
            "spec": {
                "nodeSelector": definition.node_labels,
                "tolerations": definition.tolerations,
                "containers": [{"name": "node", "image": "registry.k8s.io/pause",
                                "resources": {"requests": requests.clone(), "limits": requests}}]
            }
        }
    }))
}

/// A ProvisioningRequest for `nodes` pods of PodTemplate `template`.
fn provisioning_request(
    resource: &ApiResource,
    flavor: &str,
    template: &str,
    nodes: u32,
) -> DynamicObject {
    let mut object = DynamicObject::new("", resource).data(json!({
        "spec": {
            "provisioningClassName": PROVISIONING_CLASS,
            "podSets": [{"podTemplateRef": {"name": template}, "count": nodes}]
        }
    }));
    object.metadata.name = None;
    object.metadata.generate_name = Some(format!("arbiter-{flavor}-"));
    object.metadata.labels = Some([(FLAVOR_LABEL.to_string(), flavor.to_string())].into());
    object
}
