//! Reading the live cluster for the what-if: get and list only, nothing
//! written, exactly what `deploy/what-if.yaml` grants — the queue
//! configuration (Arbiter's kinds and Kueue's where served, as the
//! operator watches them), Namespaces, Nodes, Workloads, the ConfigMaps
//! labelled `arbiter.dev/policy-bundle`, and the jobs owning the Workloads
//! (their annotations, and the admission record telling when a finished
//! one was admitted). Every refusal names the verb, the resource and the
//! role to bind; a cluster without Arbiter's CRDs, or one that cannot be
//! reached, is told as such. The objects come back as read; making sense
//! of them is `objects`'.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use anyhow::anyhow;
use arbiter_core::model::api;
use arbiter_operator::config::{self, ApiObject};
use arbiter_operator::watch::CONFIG_KINDS;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::discovery::{self, Scope};
use kube::Client;
use serde_json::Value;

/// The ClusterRole granting what the snapshot reads.
pub const ROLE: &str = "arbiter-what-if";

/// Objects read per list request.
const PAGE: u32 = 500;

/// Everything the what-if reads, as read.
pub struct Snapshot {
    /// When the reading began: the replay's time 0.
    pub taken_at: Timestamp,
    pub config: Vec<ApiObject>,
    pub namespaces: Vec<Arc<Namespace>>,
    pub nodes: Vec<Node>,
    pub workloads: Vec<api::Workload>,
    /// The Workloads' owning jobs, by uid.
    pub jobs: BTreeMap<String, Value>,
    /// The ConfigMaps labelled `arbiter.dev/policy-bundle`, every namespace.
    pub bundles: Vec<ConfigMap>,
    /// What could not be read, each naming what and why.
    pub warnings: Vec<String>,
}

/// A request's failure in words a platform engineer can act on: `verb`
/// and `what` say which request (`list nodes`), `server` where it went.
pub fn explain(error: kube::Error, verb: &str, what: &str, server: &str) -> anyhow::Error {
    match error {
        kube::Error::Api(status) if status.code == 403 => anyhow!(
            "forbidden: this user may not {verb} {what} ({}); bind the ClusterRole {ROLE} (deploy/what-if.yaml), which grants get and list on everything the snapshot reads",
            status.message
        ),
        kube::Error::Api(status) if status.code == 401 => anyhow!(
            "the API server at {server} did not accept the credentials ({}); check the kubeconfig's user",
            status.message
        ),
        kube::Error::Api(status) => anyhow!("{verb} {what}: {} ({})", status.message, status.code),
        e @ (kube::Error::HyperError(_)
        | kube::Error::Service(_)
        | kube::Error::HttpError(_)
        | kube::Error::Auth(_)) => anyhow!(
            "cannot reach the API server at {server} ({verb} {what}): {}; check the kubeconfig (--kubeconfig, --context) and that the cluster is up",
            causes(&e)
        ),
        e => anyhow!("{verb} {what}: {e}"),
    }
}

/// An error and its causes, `: `-separated (a connection error's
/// outermost words say little: `client error (Connect)`).
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

/// Every object of `api`, paged.
async fn list_all<K>(api: &Api<K>, params: ListParams) -> Result<Vec<K>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut params = params.limit(PAGE);
    let mut items = Vec::new();
    loop {
        let page = api.list(&params).await?;
        items.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(items),
        }
    }
}

/// `resource.group` (`clusterqueues.arbiter.dev`), as RBAC names it.
fn plural(resource: &ApiResource) -> String {
    match resource.group.as_str() {
        "" => resource.plural.clone(),
        group => format!("{}.{group}", resource.plural),
    }
}

/// The API resource of `gvk` if the server serves it (`Ok(None)` if not).
async fn served(
    client: &Client,
    gvk: &GroupVersionKind,
    server: &str,
) -> anyhow::Result<Option<(ApiResource, Scope)>> {
    match discovery::pinned_kind(client, gvk).await {
        Ok((resource, caps)) => Ok(Some((resource, caps.scope))),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(e) => Err(explain(
            e,
            "discover",
            &format!("{}/{} {}", gvk.group, gvk.version, gvk.kind),
            server,
        )),
    }
}

/// Reads the cluster; `server` is its URL (for messages).
pub async fn read(client: &Client, server: &str) -> anyhow::Result<Snapshot> {
    let taken_at = Timestamp::now();
    let installed = GroupVersionKind::gvk(api::GROUP, "v1alpha1", "ClusterQueue");
    if served(client, &installed, server).await?.is_none() {
        return Err(anyhow!(
            "the server does not know {} ClusterQueue: is Arbiter installed? (its CRDs: kubectl apply --server-side -k deploy/, or arbiter crds | kubectl apply --server-side -f -)",
            api::API_VERSION
        ));
    }
    let mut config = Vec::new();
    for (group, versions, kinds) in CONFIG_KINDS {
        for kind in *kinds {
            for version in *versions {
                let gvk = GroupVersionKind::gvk(group, version, kind);
                let Some((resource, _)) = served(client, &gvk, server).await? else {
                    continue;
                };
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                let objects = list_all(&api, ListParams::default())
                    .await
                    .map_err(|e| explain(e, "list", &plural(&resource), server))?;
                config.extend(objects.into_iter().map(|mut o| {
                    o.types = Some(kube::api::TypeMeta {
                        api_version: resource.api_version.clone(),
                        kind: resource.kind.clone(),
                    });
                    Arc::new(o)
                }));
                break;
            }
        }
    }
    let namespaces = list_all(
        &Api::<Namespace>::all(client.clone()),
        ListParams::default(),
    )
    .await
    .map_err(|e| explain(e, "list", "namespaces", server))?;
    let mut nodes = list_all(&Api::<Node>::all(client.clone()), ListParams::default())
        .await
        .map_err(|e| explain(e, "list", "nodes", server))?;
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let workloads = list_all(
        &Api::<api::Workload>::all(client.clone()),
        ListParams::default(),
    )
    .await
    .map_err(|e| explain(e, "list", "workloads.arbiter.dev", server))?;
    let bundles = list_all(
        &Api::<ConfigMap>::all(client.clone()),
        ListParams::default().labels(arbiter_policy::bundle::CONFIGMAP_LABEL),
    )
    .await
    .map_err(|e| explain(e, "list", "configmaps", server))?;
    let mut warnings = Vec::new();
    let jobs = owners(client, &workloads, server, &mut warnings).await?;
    Ok(Snapshot {
        taken_at,
        config: config::api_objects(config),
        namespaces: namespaces.into_iter().map(Arc::new).collect(),
        nodes,
        workloads,
        jobs,
        bundles,
        warnings,
    })
}

/// The jobs owning the Workloads, by uid: each job kind listed once. A
/// kind that cannot be read (not served, or forbidden) is a warning: its
/// Workloads are replayed from what they say alone.
async fn owners(
    client: &Client,
    workloads: &[api::Workload],
    server: &str,
    warnings: &mut Vec<String>,
) -> anyhow::Result<BTreeMap<String, Value>> {
    let kinds: BTreeSet<(String, String)> = workloads
        .iter()
        .filter_map(|w| controller(w))
        .map(|o| (o.api_version.clone(), o.kind.clone()))
        .collect();
    let mut jobs = BTreeMap::new();
    for (api_version, kind) in kinds {
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        let gvk = GroupVersionKind::gvk(group, version, &kind);
        let Some((resource, _)) = served(client, &gvk, server).await? else {
            warnings.push(format!(
                "the server does not serve {api_version} {kind}, the kind of some Workloads' jobs; those are replayed from their Workloads alone (no runtime annotation, no history)"
            ));
            continue;
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        match list_all(&api, ListParams::default()).await {
            Ok(objects) => {
                for object in objects {
                    let Some(uid) = object.metadata.uid.clone() else {
                        continue;
                    };
                    let mut value = serde_json::to_value(&object).unwrap_or_default();
                    value["apiVersion"] = Value::String(api_version.clone());
                    value["kind"] = Value::String(kind.clone());
                    jobs.insert(uid, value);
                }
            }
            Err(e) => warnings.push(format!(
                "{}; the Workloads of these jobs are replayed from what they say alone (no runtime annotation, no history)",
                explain(e, "list", &plural(&resource), server)
            )),
        }
    }
    Ok(jobs)
}

/// The owner reference of the Workload's job.
pub fn controller(
    workload: &api::Workload,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    workload
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}
