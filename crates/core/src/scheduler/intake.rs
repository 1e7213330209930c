//! From a job to a queued workload (docs/design.md §2): find its LocalQueue and
//! ClusterQueue, resolve its priority (priority-class label → LocalQueue
//! `priority` → namespace annotation `arbiter.dev/priority` → 0), apply the
//! LocalQueue's `resourceQuotas` (default fills an absent request; outside
//! [min, max] is a rejection) and intern resource names. Pure; called by the
//! simulator and the operator for every job they see.

use std::collections::BTreeMap;
use std::fmt;

use crate::jobs::JobInfo;
use crate::model::cluster::Cluster;
use crate::model::Amount;

use super::workload::{PodSetRequest, Workload};

/// Namespace annotation giving a default priority to its workloads.
pub(crate) const NAMESPACE_PRIORITY_ANNOTATION: &str = "arbiter.dev/priority";

/// (name, count, minCount, per-pod requests) while bounds are applied.
type PodSetDraft = (String, u32, Option<u32>, BTreeMap<String, Amount>);

/// What happens to a job.
#[derive(Clone, Debug, PartialEq)]
pub enum Intake {
    /// Ready for the scheduler.
    Queued(Workload),
    /// Refused for good, with the reason.
    Rejected(Rejection),
    /// Cannot be queued as things stand (no such queue or priority class); stays pending.
    Unqueued(Unqueued),
}

/// Why a job is refused for good at intake.
#[derive(Clone, Debug, PartialEq)]
pub enum Rejection {
    /// Its total request of `resource` is outside its LocalQueue's `resourceQuotas` bounds.
    OutOfBounds {
        /// The resource.
        resource: String,
        /// The job's total request of it.
        total: Amount,
        /// The LocalQueue's lower bound, if any.
        min: Option<Amount>,
        /// The LocalQueue's upper bound, if any.
        max: Option<Amount>,
        /// The LocalQueue's namespace.
        namespace: String,
        /// The LocalQueue's name.
        local_queue: String,
    },
}

impl Rejection {
    /// The reason's name, as a Workload condition and an Event say it.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::OutOfBounds { .. } => "OutsideQueueBounds",
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::OutOfBounds {
                resource,
                total,
                min,
                max,
                namespace,
                local_queue,
            } => {
                let range = match (min, max) {
                    (Some(min), Some(max)) => format!("between {min} and {max}"),
                    (Some(min), None) => format!("at least {min}"),
                    (None, Some(max)) => format!("at most {max}"),
                    (None, None) => String::new(),
                };
                write!(
                    f,
                    "requests {total} {resource} in total; LocalQueue {namespace}/{local_queue} allows {range} (spec.resourceQuotas); change the request or use another queue"
                )
            }
        }
    }
}

/// Why a job cannot be queued as things stand.
#[derive(Clone, Debug, PartialEq)]
pub enum Unqueued {
    /// It carries no queue-name label: not Arbiter's.
    NoQueueLabel,
    /// Its queue-name label names no LocalQueue of its namespace.
    NoLocalQueue {
        /// The job's namespace.
        namespace: String,
        /// The LocalQueue named.
        name: String,
    },
    /// Its LocalQueue exists but is left out of the configuration in force
    /// (invalid, or its ClusterQueue is missing or inactive).
    InactiveLocalQueue {
        /// The LocalQueue's namespace.
        namespace: String,
        /// The LocalQueue's name.
        name: String,
        /// Why it is inactive, as a one-word code.
        reason: &'static str,
        /// Why it is inactive, in words.
        message: String,
    },
    /// Its priority-class label names no WorkloadPriorityClass.
    NoPriorityClass {
        /// The WorkloadPriorityClass named.
        name: String,
    },
    /// A pod set requests a resource no ClusterQueue covers.
    Uncovered {
        /// The pod set's name.
        pod_set: String,
        /// The resource's name.
        resource: String,
        /// The ClusterQueue of the job's LocalQueue.
        cluster_queue: String,
    },
}

impl Unqueued {
    /// The reason's name, as a Workload condition and an Event say it.
    pub fn code(&self) -> &'static str {
        match self {
            Unqueued::NoQueueLabel => "NoQueueLabel",
            Unqueued::NoLocalQueue { .. } => "LocalQueueDoesNotExist",
            Unqueued::InactiveLocalQueue { .. } => "LocalQueueInactive",
            Unqueued::NoPriorityClass { .. } => "PriorityClassDoesNotExist",
            Unqueued::Uncovered { .. } => "ResourceNotCovered",
        }
    }
}

impl fmt::Display for Unqueued {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unqueued::NoQueueLabel => f.write_str(
                "no queue label (arbiter.dev/queue-name or kueue.x-k8s.io/queue-name); Arbiter does not manage it",
            ),
            Unqueued::NoLocalQueue { namespace, name } => write!(
                f,
                "LocalQueue {namespace}/{name} does not exist; create it or fix the queue-name label"
            ),
            Unqueued::InactiveLocalQueue {
                namespace,
                name,
                reason,
                message,
            } => write!(
                f,
                "LocalQueue {namespace}/{name} is inactive ({reason}): {message}; fix it or use another queue"
            ),
            Unqueued::NoPriorityClass { name } => write!(
                f,
                "WorkloadPriorityClass {name} does not exist; create it or fix the priority-class label"
            ),
            Unqueued::Uncovered {
                pod_set,
                resource,
                cluster_queue,
            } => write!(
                f,
                "pod set {pod_set} requests {resource}, which no ClusterQueue covers; add it to ClusterQueue {cluster_queue}'s coveredResources"
            ),
        }
    }
}

/// Resolves `job` against `cluster`. `explicit_priority` is a priority the
/// source states directly (a Workload's `spec.priority`, a generator's `priority`).
pub fn intake(cluster: &Cluster, job: &JobInfo, explicit_priority: Option<i32>) -> Intake {
    let Some(queue_name) = job.queue_name.as_deref() else {
        return Intake::Unqueued(Unqueued::NoQueueLabel);
    };
    let Some(lq_id) = cluster.local_queue_id(&job.namespace, queue_name) else {
        let full = format!("{}/{queue_name}", job.namespace);
        if let Some(inactive) = cluster
            .inactive
            .iter()
            .find(|i| i.kind == "LocalQueue" && i.name == full)
        {
            return Intake::Unqueued(Unqueued::InactiveLocalQueue {
                namespace: job.namespace.clone(),
                name: queue_name.to_string(),
                reason: inactive.reason,
                message: inactive.message.clone(),
            });
        }
        return Intake::Unqueued(Unqueued::NoLocalQueue {
            namespace: job.namespace.clone(),
            name: queue_name.to_string(),
        });
    };
    let lq = &cluster.local_queues[lq_id.index()];
    let (priority, priority_weight) = match job.priority_class.as_deref() {
        Some(name) => match cluster.priority_classes.get(name) {
            Some(pc) => (pc.value, pc.weight),
            None => {
                return Intake::Unqueued(Unqueued::NoPriorityClass {
                    name: name.to_string(),
                })
            }
        },
        None => {
            let from_namespace = cluster
                .namespaces
                .get(&job.namespace)
                .and_then(|ns| ns.annotations.get(NAMESPACE_PRIORITY_ANNOTATION))
                .and_then(|v| v.trim().parse::<i32>().ok());
            // The queue's `priorityClass` weight: the LocalQueue's, else the ClusterQueue's.
            (
                explicit_priority
                    .or(lq.priority)
                    .or(from_namespace)
                    .unwrap_or(0),
                lq.priority_weight
                    .unwrap_or(cluster.cluster_queue(lq.cluster_queue).priority_weight),
            )
        }
    };

    // Per pod set: the per-pod requests, with LocalQueue defaults filled in below.
    let mut pod_sets: Vec<PodSetDraft> = job
        .pod_sets
        .iter()
        .map(|ps| (ps.name.clone(), ps.count, ps.min_count, ps.requests.clone()))
        .collect();
    for bound in &lq.resource_bounds {
        let total: Amount = pod_sets
            .iter()
            .map(|(_, count, _, req)| {
                req.get(&bound.resource)
                    .copied()
                    .unwrap_or_default()
                    .saturating_mul(*count as i64)
            })
            .sum();
        let total = if total.is_zero() {
            match (bound.default, pod_sets.first_mut()) {
                (Some(default), Some((_, count, _, req))) => {
                    let pods = (*count).max(1) as i64;
                    let per_pod = Amount::from_milli((default.milli() + pods - 1) / pods);
                    req.insert(bound.resource.clone(), per_pod);
                    per_pod.saturating_mul(pods)
                }
                _ => total,
            }
        } else {
            total
        };
        let below = bound.min.is_some_and(|min| total < min);
        let above = bound.max.is_some_and(|max| total > max);
        if below || above {
            return Intake::Rejected(Rejection::OutOfBounds {
                resource: bound.resource.clone(),
                total,
                min: bound.min,
                max: bound.max,
                namespace: lq.namespace.clone(),
                local_queue: lq.name.clone(),
            });
        }
    }

    let mut requests = Vec::with_capacity(pod_sets.len());
    for (info, (name, count, min_count, req)) in job.pod_sets.iter().zip(pod_sets) {
        let mut per_pod = Vec::with_capacity(req.len());
        for (resource, amount) in req {
            if amount.is_zero() {
                continue;
            }
            let Some(id) = cluster.resource_id(&resource) else {
                return Intake::Unqueued(Unqueued::Uncovered {
                    pod_set: name,
                    resource,
                    cluster_queue: cluster.cluster_queue(lq.cluster_queue).name.clone(),
                });
            };
            per_pod.push((id, amount));
        }
        per_pod.sort();
        requests.push(PodSetRequest {
            name,
            count,
            min_count,
            per_pod,
            node_selector: info.node_selector.clone(),
            required_affinity: info.required_node_affinity.clone(),
            tolerations: info.tolerations.clone(),
            topology: info.topology.clone(),
        });
    }
    Intake::Queued(Workload {
        kind: job.kind.clone(),
        namespace: job.namespace.clone(),
        name: job.name.clone(),
        labels: job.labels.clone(),
        annotations: job.annotations.clone(),
        queue_name: queue_name.to_string(),
        local_queue: lq_id,
        cluster_queue: lq.cluster_queue,
        priority,
        priority_class: job.priority_class.clone(),
        priority_weight,
        pod_sets: requests,
    })
}
