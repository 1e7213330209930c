//! ClusterQueue and LocalQueue status as `kubectl get cq,lq` shows it:
//! pending and admitted workloads, quota in use per flavor and resource
//! (and the part borrowed), a one-line usage summary, the weighted fair
//! share, and the `Active` condition (`activity`; Cohorts and
//! ResourceFlavors carry it too, alone); a queue left
//! out of the configuration gets its condition (and nothing counted).
//! Computed from the scheduler after each step and written by `publish`
//! with server-side apply on the status subresource, only when it changed.

use std::collections::BTreeMap;

use arbiter_core::model::api::{
    ActiveStatus, ClusterQueueStatus, FairSharingStatus, FlavorUsage, LocalQueueStatus,
    PendingWorkload, PendingWorkloadsStatus, ResourceUsage,
};
use arbiter_core::model::cluster::{ClusterQueueId, FlavorResource};
use arbiter_core::model::Amount;
use arbiter_core::scheduler::{Scheduler, Status, WorkloadId};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::activity::Activity;
use crate::publish::Publisher;
use crate::workloads::workload_name;

/// How many waiting workloads a queue's `pendingWorkloadsStatus` names
/// (Kueue's default `maxCount`).
pub const VISIBLE_HEAD: usize = 10;

/// The Workload object of a waiting workload.
fn pending_workload(scheduler: &Scheduler, id: WorkloadId) -> PendingWorkload {
    let workload = &scheduler.entry(id).workload;
    PendingWorkload {
        namespace: workload.namespace.clone(),
        name: workload_name(&workload.kind, &workload.name),
    }
}

fn head(list: Vec<PendingWorkload>) -> Option<PendingWorkloadsStatus> {
    (!list.is_empty()).then_some(PendingWorkloadsStatus { head: list })
}

/// Every ClusterQueue's status, by name: those in force, then those left out.
pub fn cluster_queues(
    scheduler: &Scheduler,
    activity: &mut Activity,
) -> BTreeMap<String, ClusterQueueStatus> {
    let cluster = scheduler.cluster();
    let mut out = BTreeMap::new();
    for (index, cq) in cluster.cluster_queues.iter().enumerate() {
        let id = ClusterQueueId(index as u32);
        let mut flavors: Vec<FlavorUsage> = Vec::new();
        let mut summary = Vec::new();
        for group in &cq.groups {
            for &flavor in &group.flavors {
                let name = cluster.flavors[flavor.index()].name.clone();
                let mut resources = Vec::new();
                for &resource in &group.resources {
                    let fr = cluster.flavor_resource(flavor, resource);
                    let used = scheduler.usage(id, fr);
                    let nominal = scheduler.nominal(id, fr);
                    resources.push(ResourceUsage {
                        name: cluster.resource_name(resource).to_string(),
                        total: used.to_quantity(),
                        borrowed: scheduler.borrowed(id, fr).to_quantity(),
                    });
                    if resource_shown(cluster.resource_name(resource)) {
                        summary.push(format!(
                            "{name} {}: {}/{}",
                            short(cluster.resource_name(resource)),
                            used.to_quantity_string(),
                            nominal.to_quantity_string()
                        ));
                    }
                }
                flavors.push(FlavorUsage { name, resources });
            }
        }
        let share = scheduler.dominant_share(id);
        out.insert(
            cq.name.clone(),
            ClusterQueueStatus {
                pending_workloads: count(scheduler.pending_count(id)),
                admitted_workloads: count(scheduler.admitted_count(id)),
                flavors_usage: flavors,
                usage_summary: (!summary.is_empty()).then(|| summary.join(", ")),
                fair_sharing: cluster.fair_sharing_for(id).then_some(FairSharingStatus {
                    weighted_share: if share.is_finite() { share } else { f64::MAX },
                }),
                pending_workloads_status: head(
                    scheduler
                        .waiting_in_order(id)
                        .take(VISIBLE_HEAD)
                        .map(|w| pending_workload(scheduler, w))
                        .collect(),
                ),
                conditions: vec![activity.condition("ClusterQueue", &cq.name)],
            },
        );
    }
    let left_out: Vec<String> = activity
        .inactive_of("ClusterQueue")
        .map(|(name, _, _)| name.to_string())
        .collect();
    for name in left_out {
        let conditions = vec![activity.condition("ClusterQueue", &name)];
        out.insert(
            name,
            ClusterQueueStatus {
                conditions,
                ..ClusterQueueStatus::default()
            },
        );
    }
    out
}

/// GPUs are what a GPU cluster's operators look at; other resources are in
/// `flavorsUsage`.
fn resource_shown(name: &str) -> bool {
    name.ends_with("/gpu") || name.contains("gpu")
}

fn short(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Every LocalQueue's status, by (namespace, name): those in force, then
/// those left out.
pub fn local_queues(
    scheduler: &Scheduler,
    activity: &mut Activity,
) -> BTreeMap<(String, String), LocalQueueStatus> {
    let cluster = scheduler.cluster();
    let mut pending = vec![0usize; cluster.local_queues.len()];
    let mut admitted = vec![0usize; cluster.local_queues.len()];
    let mut usage: Vec<BTreeMap<FlavorResource, Amount>> =
        vec![BTreeMap::new(); cluster.local_queues.len()];
    for (_, entry) in scheduler.live() {
        let lq = entry.workload.local_queue.index();
        if lq >= pending.len() {
            continue;
        }
        match entry.status {
            Status::Admitted => {
                admitted[lq] += 1;
                if let Some(admission) = &entry.admission {
                    for &(fr, amount) in &admission.usage {
                        let slot = usage[lq].entry(fr).or_insert(Amount::ZERO);
                        *slot = slot.saturating_add(amount);
                    }
                }
            }
            Status::Scoring | Status::Queued | Status::Inadmissible | Status::Backoff => {
                pending[lq] += 1
            }
            _ => {}
        }
    }
    // Each LocalQueue's first waiting workloads, in its ClusterQueue's order.
    let mut heads: Vec<Vec<PendingWorkload>> = vec![Vec::new(); cluster.local_queues.len()];
    for index in 0..cluster.cluster_queues.len() {
        for id in scheduler.waiting_in_order(ClusterQueueId(index as u32)) {
            let lq = scheduler.entry(id).workload.local_queue.index();
            if heads.get(lq).is_some_and(|h| h.len() < VISIBLE_HEAD) {
                heads[lq].push(pending_workload(scheduler, id));
            }
        }
    }
    let mut out: BTreeMap<(String, String), LocalQueueStatus> = cluster
        .local_queues
        .iter()
        .enumerate()
        .map(|(i, lq)| {
            let mut flavors: BTreeMap<String, Vec<ResourceUsage>> = BTreeMap::new();
            for (&fr, &amount) in &usage[i] {
                let (flavor, resource) = cluster.split(fr);
                flavors
                    .entry(cluster.flavors[flavor.index()].name.clone())
                    .or_default()
                    .push(ResourceUsage {
                        name: cluster.resource_name(resource).to_string(),
                        total: amount.to_quantity(),
                        borrowed: Quantity("0".into()),
                    });
            }
            (
                (lq.namespace.clone(), lq.name.clone()),
                LocalQueueStatus {
                    pending_workloads: count(pending[i]),
                    admitted_workloads: count(admitted[i]),
                    flavors_usage: flavors
                        .into_iter()
                        .map(|(name, resources)| FlavorUsage { name, resources })
                        .collect(),
                    pending_workloads_status: head(std::mem::take(&mut heads[i])),
                    conditions: vec![
                        activity.condition("LocalQueue", &format!("{}/{}", lq.namespace, lq.name))
                    ],
                },
            )
        })
        .collect();
    let left_out: Vec<String> = activity
        .inactive_of("LocalQueue")
        .map(|(name, _, _)| name.to_string())
        .collect();
    for full in left_out {
        let Some((namespace, name)) = full.split_once('/') else {
            continue;
        };
        let conditions = vec![activity.condition("LocalQueue", &full)];
        out.insert(
            (namespace.to_string(), name.to_string()),
            LocalQueueStatus {
                conditions,
                ..LocalQueueStatus::default()
            },
        );
    }
    out
}

/// Hands the queue statuses that changed since the last step to the
/// publisher (which writes them off the driver's task).
#[derive(Default)]
pub struct QueueStatusWriter {
    cluster_queues: BTreeMap<String, ClusterQueueStatus>,
    local_queues: BTreeMap<(String, String), LocalQueueStatus>,
    /// Cohorts' and ResourceFlavors' (kind, name).
    others: BTreeMap<(&'static str, String), ActiveStatus>,
}

impl QueueStatusWriter {
    pub fn write(&mut self, publisher: &Publisher, scheduler: &Scheduler, activity: &mut Activity) {
        for (name, status) in cluster_queues(scheduler, activity) {
            if self.cluster_queues.get(&name) != Some(&status) {
                publisher.cluster_queue(&name, status.clone());
                self.cluster_queues.insert(name, status);
            }
        }
        for (key, status) in local_queues(scheduler, activity) {
            if self.local_queues.get(&key) != Some(&status) {
                publisher.local_queue(&key.0, &key.1, status.clone());
                self.local_queues.insert(key, status);
            }
        }
        for kind in ["Cohort", "ResourceFlavor"] {
            for name in activity.objects_of(kind) {
                let status = ActiveStatus {
                    conditions: vec![activity.condition(kind, &name)],
                };
                let key = (kind, name);
                if self.others.get(&key) != Some(&status) {
                    publisher.active(kind, &key.1, status.clone());
                    self.others.insert(key, status);
                }
            }
        }
    }
}
