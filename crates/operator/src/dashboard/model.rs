//! The dashboard's JSON: the API objects it reads ([`DashboardObjects`]) turned into
//! what the page shows. Pure (no I/O), so the operator's admin port and
//! `arbiter dashboard` serve the same thing from the same objects.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbiter_core::model::api::{
    ClusterQueue, Cohort, LocalQueue, PendingWorkloadsStatus, ResourceFlavor, ResourceGroup,
    StopPolicy, Workload, WorkloadStatus,
};
use arbiter_core::model::quantity::Amount;
use arbiter_policy::engine::Decision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::Serialize;

/// The objects the dashboard is computed from, as its watches hold them.
#[derive(Default, Debug, Clone)]
pub struct DashboardObjects {
    pub flavors: Vec<Arc<ResourceFlavor>>,
    pub cohorts: Vec<Arc<Cohort>>,
    pub cluster_queues: Vec<Arc<ClusterQueue>>,
    pub local_queues: Vec<Arc<LocalQueue>>,
    pub workloads: Vec<Arc<Workload>>,
    /// The metadata of the ConfigMaps labelled as policy bundles (their
    /// status is an annotation; their data is never read).
    pub bundles: Vec<ObjectMeta>,
    /// What could not be read (forbidden, not served), one sentence each.
    pub errors: Vec<String>,
}

/// The page's state.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Dashboard {
    /// Cohorts and ClusterQueues as a tree: roots first.
    pub tree: Vec<TreeNode>,
    pub flavors: Vec<FlavorView>,
    pub cluster_queues: Vec<ClusterQueueView>,
    pub local_queues: Vec<LocalQueueView>,
    /// Every workload: pending first in queue order, then admitted, then
    /// the rest (the page is sent a filtered, bounded part: `page`).
    pub workloads: Vec<WorkloadView>,
    pub bundles: Vec<BundleView>,
    /// The policy engine's bundles in force (served by the operator).
    pub engine: Vec<super::engine::EngineBundle>,
    /// The engine's newest decisions, newest first (served by the operator).
    pub decisions: Vec<Decision>,
    pub errors: Vec<String>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TreeNode {
    /// `Cohort` or `ClusterQueue`.
    pub kind: &'static str,
    pub name: String,
    /// A cohort's own quota (from its Cohort object), a queue's quota and usage.
    pub resources: Vec<ResourceRow>,
    pub children: Vec<TreeNode>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FlavorView {
    pub name: String,
    pub node_labels: BTreeMap<String, String>,
}

/// Quota and usage of one flavor and resource.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRow {
    pub flavor: String,
    pub resource: String,
    pub nominal: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<String>,
    pub usage: String,
    pub borrowed: String,
    /// Usage over nominal quota, in percent (absent for a zero quota).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueView {
    pub name: String,
    pub cohort: Option<String>,
    pub pending: i32,
    pub admitted: i32,
    /// The `Active` condition's status and reason (`True`, `False: Stopped`).
    pub active: String,
    pub stop_policy: Option<String>,
    pub resources: Vec<ResourceRow>,
    /// The first waiting workloads, in queue order: `namespace/name`.
    pub head: Vec<String>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueView {
    pub namespace: String,
    pub name: String,
    pub cluster_queue: String,
    pub pending: i32,
    pub admitted: i32,
    pub stop_policy: Option<String>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadView {
    pub namespace: String,
    pub name: String,
    pub queue: String,
    pub cluster_queue: Option<String>,
    pub state: &'static str,
    /// Position in its ClusterQueue while pending: `3`, or `>10` past the
    /// queue status's head.
    pub position: Option<String>,
    /// Why it is where it is: the reason and message of its latest
    /// condition that says (QuotaReserved while pending).
    pub reason: String,
    pub message: String,
    /// The policy that decided, when a condition names one.
    pub policy: Option<String>,
    /// Flavors assigned at admission: `pod set: resource=flavor, …`.
    pub flavors: Vec<String>,
    /// The job it queues, `Kind/name` (its owner).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConditionView {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub time: String,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BundleView {
    pub namespace: String,
    pub name: String,
    /// `loaded`, `rejected`, `ignored`, or `unknown` before the operator wrote a status.
    pub result: String,
    /// The status annotation as written (`loaded NAME@VERSION sha256:… at TIME`).
    pub status: String,
}

/// The condition of `type_`, if the status has one.
pub fn condition<'a>(status: Option<&'a WorkloadStatus>, type_: &str) -> Option<&'a Condition> {
    status?.conditions.iter().find(|c| c.type_ == type_)
}

fn is_true(status: Option<&WorkloadStatus>, type_: &str) -> bool {
    condition(status, type_).is_some_and(|c| c.status == "True")
}

/// Where a workload is, in one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Pending,
    Admitted,
    Finished,
    /// Refused for good by a policy or its queue's bounds.
    Rejected,
    /// Taken out of the queue (`spec.active: false`, too many retries).
    Inactive,
}

impl State {
    pub fn of(workload: &Workload) -> State {
        let status = workload.status.as_ref();
        let reason = condition(status, "QuotaReserved").map(|c| c.reason.as_str());
        if is_true(status, "Finished") {
            State::Finished
        } else if is_true(status, "Admitted") {
            State::Admitted
        } else if matches!(reason, Some("Rejected" | "OutsideQueueBounds")) {
            State::Rejected
        } else if workload.spec.active == Some(false)
            || matches!(reason, Some("Deactivated" | "RequeuingLimitExceeded"))
        {
            State::Inactive
        } else {
            State::Pending
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "Pending",
            State::Admitted => "Admitted",
            State::Finished => "Finished",
            State::Rejected => "Rejected",
            State::Inactive => "Inactive",
        }
    }
}

/// Where a pending workload stands in a queue whose status names its
/// first `head` waiting workloads and counts `pending` in all: `3`, or
/// `>10` past what the status names.
pub fn position(
    head: Option<&PendingWorkloadsStatus>,
    pending: i32,
    namespace: &str,
    name: &str,
) -> Option<String> {
    let head = head.map(|h| h.head.as_slice()).unwrap_or_default();
    match head
        .iter()
        .position(|w| w.namespace == namespace && w.name == name)
    {
        Some(i) => Some((i + 1).to_string()),
        None if pending > head.len() as i32 => Some(format!(">{}", head.len())),
        None => None,
    }
}

/// The policy a condition message names (`… by policy NAME …`).
pub fn deciding_policy(message: &str) -> Option<&str> {
    let rest = &message[message.find("by policy ")? + "by policy ".len()..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == ':' || c == ',' || c == ';')
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

pub(super) fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn stop_policy(policy: Option<&StopPolicy>) -> Option<String> {
    policy
        .filter(|p| **p != StopPolicy::None)
        .map(|p| format!("{p:?}"))
}

/// Quota rows of `groups`, with the usage `status` reports.
fn resource_rows(
    groups: &[ResourceGroup],
    usage: &[arbiter_core::model::api::FlavorUsage],
) -> Vec<ResourceRow> {
    let mut rows = Vec::new();
    for group in groups {
        for flavor in &group.flavors {
            for quota in &flavor.resources {
                let used = usage
                    .iter()
                    .find(|f| f.name == flavor.name)
                    .and_then(|f| f.resources.iter().find(|r| r.name == quota.name));
                let (total, borrowed) = match used {
                    Some(r) => (r.total.0.clone(), r.borrowed.0.clone()),
                    None => ("0".to_string(), "0".to_string()),
                };
                let percent = match (
                    Amount::parse(&total),
                    Amount::from_quantity(&quota.nominal_quota),
                ) {
                    (Ok(u), Ok(n)) if !n.is_zero() => {
                        Some((u.as_f64() / n.as_f64() * 1000.0).round() / 10.0)
                    }
                    _ => None,
                };
                rows.push(ResourceRow {
                    flavor: flavor.name.clone(),
                    resource: quota.name.clone(),
                    nominal: quota.nominal_quota.0.clone(),
                    borrowing_limit: quota.borrowing_limit.as_ref().map(|q| q.0.clone()),
                    lending_limit: quota.lending_limit.as_ref().map(|q| q.0.clone()),
                    usage: total,
                    borrowed,
                    percent,
                });
            }
        }
    }
    rows
}

fn cluster_queue_view(cq: &ClusterQueue) -> ClusterQueueView {
    let status = cq.status.clone().unwrap_or_default();
    let active = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Active")
        .map(|c| {
            if c.status == "True" {
                c.status.clone()
            } else {
                format!("{}: {}", c.status, c.reason)
            }
        })
        .unwrap_or_else(|| "Unknown".into());
    ClusterQueueView {
        name: name_of(&cq.metadata),
        cohort: cq.spec.cohort.clone(),
        pending: status.pending_workloads,
        admitted: status.admitted_workloads,
        active,
        stop_policy: stop_policy(cq.spec.stop_policy.as_ref()),
        resources: resource_rows(&cq.spec.resource_groups, &status.flavors_usage),
        head: status
            .pending_workloads_status
            .map(|p| {
                p.head
                    .into_iter()
                    .map(|w| format!("{}/{}", w.namespace, w.name))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Cohorts (named by a Cohort object or by a ClusterQueue's `cohort`) and
/// ClusterQueues as a forest. A cohort whose parent chain loops is shown
/// as a root once.
fn tree(cohorts: &[Arc<Cohort>], queues: &[ClusterQueueView]) -> Vec<TreeNode> {
    let specs: BTreeMap<String, &Cohort> = cohorts
        .iter()
        .map(|c| (name_of(&c.metadata), c.as_ref()))
        .collect();
    let mut names: BTreeSet<String> = specs.keys().cloned().collect();
    names.extend(queues.iter().filter_map(|q| q.cohort.clone()));
    names.extend(specs.values().filter_map(|c| c.spec.parent.clone()));
    let parent = |name: &str| specs.get(name).and_then(|c| c.spec.parent.clone());
    // A cohort is a root if it has no parent, or its parent chain loops back.
    let is_root = |name: &str| {
        let mut seen = BTreeSet::from([name.to_string()]);
        let mut at = name.to_string();
        while let Some(p) = parent(&at) {
            if !seen.insert(p.clone()) {
                return true;
            }
            at = p;
        }
        at == name
    };
    fn build(
        name: &str,
        specs: &BTreeMap<String, &Cohort>,
        names: &BTreeSet<String>,
        queues: &[ClusterQueueView],
        seen: &mut BTreeSet<String>,
    ) -> TreeNode {
        seen.insert(name.to_string());
        let mut children: Vec<TreeNode> = names
            .iter()
            .filter(|c| {
                !seen.contains(*c)
                    && specs.get(*c).and_then(|s| s.spec.parent.as_deref()) == Some(name)
            })
            .cloned()
            .collect::<Vec<_>>()
            .into_iter()
            .map(|c| build(&c, specs, names, queues, seen))
            .collect();
        children.extend(
            queues
                .iter()
                .filter(|q| q.cohort.as_deref() == Some(name))
                .map(queue_node),
        );
        TreeNode {
            kind: "Cohort",
            name: name.to_string(),
            resources: specs
                .get(name)
                .map(|c| resource_rows(&c.spec.resource_groups, &[]))
                .unwrap_or_default(),
            children,
        }
    }
    fn queue_node(q: &ClusterQueueView) -> TreeNode {
        TreeNode {
            kind: "ClusterQueue",
            name: q.name.clone(),
            resources: q.resources.clone(),
            children: Vec::new(),
        }
    }
    let mut seen = BTreeSet::new();
    let mut roots: Vec<TreeNode> = names
        .iter()
        .filter(|n| is_root(n))
        .cloned()
        .collect::<Vec<_>>()
        .into_iter()
        .filter_map(|n| (!seen.contains(&n)).then(|| build(&n, &specs, &names, queues, &mut seen)))
        .collect();
    roots.extend(queues.iter().filter(|q| q.cohort.is_none()).map(queue_node));
    roots
}

/// The row of `wl`, with what its queues' objects say.
pub(super) fn workload_view(
    wl: &Workload,
    local_queues: &[Arc<LocalQueue>],
    cluster_queues: &[Arc<ClusterQueue>],
) -> WorkloadView {
    let namespace = wl.metadata.namespace.clone().unwrap_or_default();
    let name = name_of(&wl.metadata);
    let queue = wl.spec.queue_name.clone().unwrap_or_default();
    let status = wl.status.as_ref();
    let state = State::of(wl);
    let cluster_queue = status
        .and_then(|s| s.admission.as_ref())
        .map(|a| a.cluster_queue.clone())
        .or_else(|| {
            local_queues
                .iter()
                .find(|lq| {
                    lq.metadata.namespace.as_deref() == Some(namespace.as_str())
                        && lq.metadata.name.as_deref() == Some(queue.as_str())
                })
                .map(|lq| lq.spec.cluster_queue.clone())
        });
    // Waiting out a backoff, it is in no queue yet (so no position).
    let backing_off = condition(status, "QuotaReserved").is_some_and(|c| c.reason == "Backoff");
    let position = (state == State::Pending && !backing_off)
        .then(|| {
            let cq = cluster_queues
                .iter()
                .find(|c| c.metadata.name.as_deref() == cluster_queue.as_deref())?;
            let status = cq.status.as_ref()?;
            position(
                status.pending_workloads_status.as_ref(),
                status.pending_workloads,
                &namespace,
                &name,
            )
        })
        .flatten();
    let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let telling = match state {
        State::Pending | State::Rejected | State::Inactive => {
            condition(status, "QuotaReserved").or_else(|| latest(conditions))
        }
        _ => latest(conditions),
    };
    let (reason, message) = telling
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_default();
    let policy = conditions
        .iter()
        .find_map(|c| deciding_policy(&c.message))
        .map(str::to_string);
    let flavors = status
        .and_then(|s| s.admission.as_ref())
        .map(|a| {
            a.pod_set_assignments
                .iter()
                .map(|p| {
                    let pairs: Vec<String> =
                        p.flavors.iter().map(|(r, f)| format!("{r}={f}")).collect();
                    format!("{}: {}", p.name, pairs.join(", "))
                })
                .collect()
        })
        .unwrap_or_default();
    WorkloadView {
        namespace,
        name,
        queue,
        cluster_queue,
        state: state.as_str(),
        position,
        reason,
        message,
        policy,
        flavors,
        job: owner(wl).map(|o| format!("{}/{}", o.kind, o.name)),
    }
}

/// The job a Workload queues: its controller owner.
pub(super) fn owner(
    wl: &Workload,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    wl.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// A workload's conditions, as the page lists them.
pub(super) fn condition_views(wl: &Workload) -> Vec<ConditionView> {
    let conditions = wl
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    conditions
        .iter()
        .map(|c| ConditionView {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            time: c.last_transition_time.0.to_string(),
        })
        .collect()
}

fn latest(conditions: &[Condition]) -> Option<&Condition> {
    conditions.iter().max_by_key(|c| c.last_transition_time.0)
}

fn bundle_view(metadata: &ObjectMeta) -> BundleView {
    let status = metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::policy_sources::STATUS_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    let result = status
        .split([' ', ':'])
        .next()
        .filter(|w| !w.is_empty())
        .unwrap_or("unknown")
        .to_string();
    BundleView {
        namespace: metadata.namespace.clone().unwrap_or_default(),
        name: name_of(metadata),
        result,
        status,
    }
}

/// Where a workload is listed: pending (in queue order: by position, the
/// unnumbered last), admitted, inactive, rejected, finished; then by
/// namespace and name.
fn order(w: &WorkloadView) -> (u8, u32, String, String) {
    let rank = match w.state {
        "Pending" => 0,
        "Admitted" => 1,
        "Inactive" => 2,
        "Rejected" => 3,
        _ => 4,
    };
    let position = w
        .position
        .as_deref()
        .and_then(|p| p.parse().ok())
        .unwrap_or(u32::MAX);
    (rank, position, w.namespace.clone(), w.name.clone())
}

impl Dashboard {
    /// The page's state from the objects.
    pub fn of(snapshot: &DashboardObjects) -> Dashboard {
        let mut cluster_queues: Vec<ClusterQueueView> = snapshot
            .cluster_queues
            .iter()
            .map(|cq| cluster_queue_view(cq))
            .collect();
        cluster_queues.sort_by(|a, b| a.name.cmp(&b.name));
        let mut workloads: Vec<WorkloadView> = snapshot
            .workloads
            .iter()
            .map(|wl| workload_view(wl, &snapshot.local_queues, &snapshot.cluster_queues))
            .collect();
        workloads.sort_by_cached_key(order);
        let mut local_queues: Vec<LocalQueueView> = snapshot
            .local_queues
            .iter()
            .map(|lq| {
                let status = lq.status.clone().unwrap_or_default();
                LocalQueueView {
                    namespace: lq.metadata.namespace.clone().unwrap_or_default(),
                    name: name_of(&lq.metadata),
                    cluster_queue: lq.spec.cluster_queue.clone(),
                    pending: status.pending_workloads,
                    admitted: status.admitted_workloads,
                    stop_policy: stop_policy(lq.spec.stop_policy.as_ref()),
                }
            })
            .collect();
        local_queues.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let mut flavors: Vec<FlavorView> = snapshot
            .flavors
            .iter()
            .map(|f| FlavorView {
                name: name_of(&f.metadata),
                node_labels: f.spec.node_labels.clone(),
            })
            .collect();
        flavors.sort_by(|a, b| a.name.cmp(&b.name));
        let mut bundles: Vec<BundleView> = snapshot.bundles.iter().map(bundle_view).collect();
        bundles.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Dashboard {
            tree: tree(&snapshot.cohorts, &cluster_queues),
            flavors,
            cluster_queues,
            local_queues,
            workloads,
            bundles,
            engine: Vec::new(),
            decisions: Vec::new(),
            errors: snapshot.errors.clone(),
        }
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
