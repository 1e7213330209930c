//! One workload in detail, fetched when the page selects it: its row,
//! conditions, the latest Events about it and its job (two lists by
//! `involvedObject` kind and name, so the API sends only those), and the policy
//! engine's decisions about it still kept (served by the operator).

use std::sync::Arc;

use arbiter_core::model::api::Workload;
use arbiter_policy::engine::{Decision, RecentDecisions};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use kube::Client;
use serde::Serialize;

use super::model::{
    condition_views, owner, workload_view, ConditionView, DashboardObjects, WorkloadView,
};

/// Most Events shown per workload (the latest).
pub const EVENTS_PER_WORKLOAD: usize = 10;

#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub time: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
}

/// What `/dashboard/api/workload` answers.
#[derive(Serialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadDetail {
    pub workload: WorkloadView,
    pub conditions: Vec<ConditionView>,
    /// The latest Events about the Workload and its job, newest last.
    pub events: Vec<EventView>,
    /// The decisions about it still kept, newest first; absent where no
    /// engine runs (`arbiter dashboard`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decisions: Option<Vec<Decision>>,
    /// What could not be read, one sentence each.
    pub errors: Vec<String>,
}

fn event_time(e: &Event) -> String {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0.to_string()))
        .or_else(|| {
            e.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
        })
        .unwrap_or_default()
}

fn event_view(e: &Event) -> EventView {
    EventView {
        time: event_time(e),
        type_: e.type_.clone().unwrap_or_default(),
        reason: e.reason.clone().unwrap_or_default(),
        message: e.message.clone().unwrap_or_default(),
        count: e.count.unwrap_or(1),
    }
}

/// The latest [`EVENTS_PER_WORKLOAD`] of `events` about `wl` or its job
/// (by namespace, kind and name), oldest first.
pub fn events_about(wl: &Workload, events: &[Event]) -> Vec<EventView> {
    let namespace = wl.metadata.namespace.as_deref().unwrap_or_default();
    let name = wl.metadata.name.as_deref().unwrap_or_default();
    let job = owner(wl);
    let mut about: Vec<&Event> = events
        .iter()
        .filter(|e| {
            let o = &e.involved_object;
            let (kind, object) = (
                o.kind.as_deref().unwrap_or_default(),
                o.name.as_deref().unwrap_or_default(),
            );
            o.namespace.as_deref() == Some(namespace)
                && ((kind == "Workload" && object == name)
                    || job.is_some_and(|j| j.kind == kind && j.name == object))
        })
        .collect();
    about.sort_by_key(|e| event_time(e));
    let excess = about.len().saturating_sub(EVENTS_PER_WORKLOAD);
    about.drain(..excess);
    about.into_iter().map(event_view).collect()
}

/// The Events about the object `kind` `name` in `namespace`, or why not.
async fn events_of(
    client: &Client,
    namespace: &str,
    (kind, name): (&str, &str),
) -> Result<Vec<Event>, String> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind={kind},involvedObject.name={name}"
    ));
    match api.list(&params).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(status)) if status.code == 403 => Err(format!(
            "cannot list Events in {namespace}: forbidden ({}); grant list on events (core) to show them",
            status.message
        )),
        Err(e) => Err(format!("cannot list Events in {namespace}: {e}")),
    }
}

/// The detail of the Workload `namespace/name` among `snapshot`'s, or
/// `None` when there is none such.
pub async fn detail(
    client: &Client,
    snapshot: &DashboardObjects,
    recent: Option<&RecentDecisions>,
    namespace: &str,
    name: &str,
) -> Option<WorkloadDetail> {
    let wl: &Arc<Workload> = snapshot.workloads.iter().find(|w| {
        w.metadata.namespace.as_deref() == Some(namespace)
            && w.metadata.name.as_deref() == Some(name)
    })?;
    let mut objects = vec![("Workload", name)];
    objects.extend(owner(wl).map(|o| (o.kind.as_str(), o.name.as_str())));
    let mut events = Vec::new();
    let mut errors = Vec::new();
    let listed =
        futures::future::join_all(objects.iter().map(|o| events_of(client, namespace, *o))).await;
    for result in listed {
        match result {
            Ok(items) => events.extend(items),
            Err(e) if !errors.contains(&e) => errors.push(e),
            Err(_) => {}
        }
    }
    // The engine names a workload by its job (`namespace/job`).
    let subject = format!(
        "{namespace}/{}",
        owner(wl).map(|o| o.name.as_str()).unwrap_or(name)
    );
    Some(WorkloadDetail {
        workload: workload_view(wl, &snapshot.local_queues, &snapshot.cluster_queues),
        conditions: condition_views(wl),
        events: events_about(wl, &events),
        decisions: recent.map(|r| r.about(&subject)),
        errors,
    })
}
