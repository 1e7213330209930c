//! Why a workload is not admitted, as data. The scheduler records a
//! [`Reason`] every time a head does not fit — often thousands of times per
//! run — so it stores numbers, not text, and renders the sentence a person
//! reads (`needs 16 nvidia.com/gpu in a100-80gb; ClusterQueue ml has 8 free
//! (nominal 32, borrowed 0); cohort gpu has 0 to lend`) only when asked.
//! Every cause — pending, eviction, requeue, rejection — is a variant
//! carrying its numbers and names; [`Reason::render`] (with the `Display`
//! of [`Eviction`] and [`Requeue`]) is the one place they become words.

use std::fmt::{self, Write};

use crate::model::api::StopPolicy;
use crate::model::cluster::{Cluster, FlavorId, ResourceId};
use crate::model::{Amount, Millis};

use super::workload::{Admission, Workload};

/// What stopped one flavor from taking one pod set.
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    /// The pod set's nodeSelector / required affinity excludes the flavor.
    Excluded {
        /// The flavor.
        flavor: FlavorId,
    },
    /// The flavor's taint (index into its `node_taints`) is not tolerated.
    Taint {
        /// The flavor.
        flavor: FlavorId,
        /// Index of the taint in the flavor's `node_taints`.
        taint: usize,
    },
    /// Not enough quota.
    Quota {
        /// The flavor.
        flavor: FlavorId,
        /// The resource short of quota.
        resource: ResourceId,
        /// What the pod set needs of it.
        need: Amount,
        /// What the ClusterQueue has free of it.
        available: Amount,
        /// The ClusterQueue's nominal quota of it.
        nominal: Amount,
        /// What the ClusterQueue has borrowed of it.
        borrowed: Amount,
        /// What the cohort can lend beyond the queue's own free quota (`None`: no cohort).
        cohort_lend: Option<Amount>,
        /// The most the queue could ever have.
        potential: Amount,
    },
    /// Quota allows it, but no node has room for every pod.
    Capacity {
        /// The flavor.
        flavor: FlavorId,
        /// Pods of the pod set.
        pods: u32,
        /// Ready nodes of the flavor.
        nodes: u32,
    },
    /// The pod set asks for a topology level (Kueue's
    /// `podset-required-topology`) the flavor cannot give one domain of.
    Topology {
        /// The flavor.
        flavor: FlavorId,
        /// The level asked for (a node label).
        level: String,
        /// Why not.
        miss: TopologyMiss,
    },
}

/// Why a flavor cannot hold a pod set inside one domain of a level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopologyMiss {
    /// The flavor names no Topology (`spec.topologyName`).
    NoTopology,
    /// The flavor's Topology has no such level.
    NoLevel,
    /// No domain of the level has room for every pod now.
    NoDomain {
        /// Pods of the pod set.
        pods: u32,
        /// The most pods one domain of the level could hold now.
        largest: u64,
        /// Domains of the level (ready nodes carrying its labels).
        domains: usize,
    },
}

/// Why one pod set found no flavor.
#[derive(Clone, Debug, PartialEq)]
pub struct NotFit {
    /// Index of the pod set in its workload.
    pub pod_set: usize,
    /// What stopped each flavor tried.
    pub problems: Vec<Problem>,
}

/// Why a pod set can never be admitted as configured (Kueue keeps such a
/// workload pending; it blocks nobody).
#[derive(Clone, Debug, PartialEq)]
pub enum NeverFits {
    /// The pod set requests a resource its ClusterQueue does not cover.
    Uncovered {
        /// Index of the pod set in its workload.
        pod_set: usize,
        /// The resource not covered.
        resource: ResourceId,
    },
    /// No flavor could ever hold the pod set (`pods` of `wants` in all).
    PodSetTooBig {
        /// Index of the pod set in its workload.
        pod_set: usize,
        /// What one pod requests, by resource.
        wants: Vec<(ResourceId, Amount)>,
        /// Pods of the pod set.
        pods: u32,
    },
    /// The pod sets together need more of `resource` than all the group's flavors.
    TotalTooBig {
        /// The resource.
        resource: ResourceId,
        /// What the pod sets need of it together.
        total: Amount,
        /// The most of it the group's flavors could ever hold.
        potential: Amount,
    },
}

/// Why an admitted workload lost its admission.
#[derive(Clone, Debug, PartialEq)]
pub enum Eviction {
    /// The job failed while running; `message` is what the driver saw.
    Failed {
        /// What the driver saw.
        message: String,
    },
    /// Admitted longer than its ClusterQueue's `resourceReclaim.reclaimTimeout`.
    Reclaimed {
        /// The ClusterQueue's name.
        cluster_queue: String,
        /// Its `reclaimTimeout`.
        timeout: Millis,
    },
    /// Preempted by `preemptor` (`namespace/name`); `reclaimed_by` names the
    /// preemptor's ClusterQueue when it is another queue of the cohort.
    Preempted {
        /// The preemptor, as `namespace/name`.
        preemptor: String,
        /// The preemptor's priority.
        priority: i32,
        /// The preemptor's ClusterQueue, when another queue of the cohort.
        reclaimed_by: Option<String>,
    },
    /// Its pods were not all ready within `waitForPodsReady.timeout` of
    /// its admission, or (`recovery`) not all ready again within
    /// `recoveryTimeout` of one failing.
    PodsReadyTimeout {
        /// The timeout that ran out.
        timeout: Millis,
        /// It was `recoveryTimeout` (not `timeout`).
        recovery: bool,
    },
}

impl Eviction {
    /// The cause as a one-word code, as Kubernetes conditions carry it.
    pub fn code(&self) -> &'static str {
        match self {
            Eviction::Failed { .. } => "Failed",
            Eviction::Reclaimed { .. } => "Reclaimed",
            Eviction::Preempted { .. } => "Preempted",
            Eviction::PodsReadyTimeout { .. } => "PodsReadyTimeout",
        }
    }
}

impl fmt::Display for Eviction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Eviction::Failed { message } => write!(f, "failed: {message}"),
            Eviction::Reclaimed {
                cluster_queue,
                timeout,
            } => write!(
                f,
                "reclaimed: admitted longer than ClusterQueue {cluster_queue}'s reclaimTimeout {timeout}"
            ),
            Eviction::Preempted {
                preemptor,
                priority,
                reclaimed_by,
            } => {
                write!(f, "preempted by {preemptor} (priority {priority}) ")?;
                match reclaimed_by {
                    None => write!(f, "within ClusterQueue"),
                    Some(cq) => write!(f, "reclaimed by ClusterQueue {cq}"),
                }
            }
            Eviction::PodsReadyTimeout {
                timeout,
                recovery: false,
            } => write!(
                f,
                "its pods were not all ready within waitForPodsReady.timeout {timeout} of its admission"
            ),
            Eviction::PodsReadyTimeout {
                timeout,
                recovery: true,
            } => write!(
                f,
                "its pods, all ready once, were not all ready again within waitForPodsReady.recoveryTimeout {timeout} (a pod failed or its node went away)"
            ),
        }
    }
}

/// Why a workload went back into its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requeue {
    /// At once after being preempted, with its original queue time.
    Preempted,
    /// Its retry backoff is over.
    BackoffOver,
    /// Evicted in a ClusterQueue without a `retryPolicy`.
    NoRetryPolicy,
}

impl fmt::Display for Requeue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Requeue::Preempted => "requeued after preemption",
            Requeue::BackoffOver => "retry backoff is over",
            Requeue::NoRetryPolicy => "requeued at once (no retryPolicy)",
        })
    }
}

/// Why a workload is where it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Reason {
    /// Nothing to say: admitted, or not yet tried.
    #[default]
    None,
    /// No flavor could take one of its pod sets.
    NoFit(NotFit),
    /// Needs preemption, but the allowed candidates cannot free enough.
    PreemptionFailed {
        /// Why it does not fit without preemption.
        not_fit: NotFit,
        /// The candidates considered.
        candidates: usize,
    },
    /// Preempting would free quota, but the workload still does not fit (nodes).
    PreemptionNotEnough {
        /// Why it does not fit without preemption.
        not_fit: NotFit,
        /// The victims that would be preempted.
        victims: usize,
        /// Why it would still not fit once they were.
        after: Option<NotFit>,
    },
    /// Preempting would repeat a preemption it made since the cluster last
    /// changed: the preemption rules are cycling (the `repeats` module).
    PreemptionCycle {
        /// Why it did not fit, if known.
        not_fit: Option<NotFit>,
        /// The victims it would take again (namespace/name).
        victims: Vec<String>,
    },
    /// It needs preemption but was itself preempted at this instant.
    PreemptedThisInstant {
        /// Why it did not fit, if known.
        not_fit: Option<NotFit>,
    },
    /// Its namespace is not selected by its ClusterQueue's `namespaceSelector`.
    NamespaceNotSelected,
    /// It can never be admitted as configured.
    NeverFits(NeverFits),
    /// Its ClusterQueue has a `stopPolicy`.
    ClusterQueueStopped {
        /// The ClusterQueue's `stopPolicy`.
        policy: StopPolicy,
    },
    /// Its LocalQueue has a `stopPolicy`.
    LocalQueueStopped {
        /// The LocalQueue's `stopPolicy`.
        policy: StopPolicy,
    },
    /// StrictFIFO: the head of its ClusterQueue (`namespace/name`) waits, so it waits.
    BehindStrictHead {
        /// The head, as `namespace/name`.
        head: String,
    },
    /// An admission policy denied it for now.
    Denied {
        /// The policy's name.
        policy: String,
        /// The policy's message.
        message: String,
    },
    /// An admission policy refused it for good.
    Rejected {
        /// The policy's name.
        policy: String,
        /// The policy's message.
        message: String,
    },
    /// It lost its admission.
    Evicted(Eviction),
    /// Waiting out a retry backoff after `after`.
    Backoff {
        /// Why it was evicted.
        after: Box<Reason>,
        /// Its retry number (`retry` of `max_retries`).
        retry: u32,
        /// `retryPolicy.maxRetries`.
        max_retries: u32,
        /// When the backoff ends.
        until: Millis,
    },
    /// Evicted more often than `retryPolicy.maxRetries` allows.
    Deactivated {
        /// Retries it had.
        retries: u32,
        /// `retryPolicy.maxRetries`.
        max_retries: u32,
    },
    /// `waitForPodsReady.blockAdmission`: the pods of `workload`
    /// (`namespace/name`), admitted, are not all ready, and nothing is
    /// admitted until they are.
    WaitingForPodsReady {
        /// The admitted workload, as `namespace/name`.
        workload: String,
    },
    /// Waiting out the backoff of its `requeue`-th requeue after its pods
    /// were not all ready within `timeout` (`limit`: `backoffLimitCount`).
    PodsReadyBackoff {
        /// The timeout that ran out.
        timeout: Millis,
        /// The timeout was `recoveryTimeout` (not `timeout`).
        recovery: bool,
        /// Its requeue number.
        requeue: u32,
        /// `backoffLimitCount`; `None`: no limit.
        limit: Option<u32>,
        /// When the backoff ends.
        until: Millis,
    },
    /// Requeued after its pods' timeout more often than
    /// `waitForPodsReady.requeuingStrategy.backoffLimitCount` allows.
    RequeuingLimitExceeded {
        /// Requeues it had.
        requeues: u32,
        /// `backoffLimitCount`.
        limit: u32,
    },
    /// Its LocalQueue (or the LocalQueue's ClusterQueue) no longer exists; it
    /// waits until a configuration brings one back under the same name.
    QueueRemoved {
        /// The workload's namespace.
        namespace: String,
        /// The LocalQueue's name.
        queue: String,
    },
    /// It requests a resource the configuration no longer knows; it waits
    /// until a configuration covers it again.
    ResourceRemoved {
        /// The pod set's name.
        pod_set: String,
        /// The resource's name.
        resource: String,
    },
    /// Admitted under a ClusterQueue, LocalQueue or flavor that has since been
    /// removed: it keeps running and holding its nodes, charged to no quota.
    Detached {
        /// The ClusterQueue it was admitted under.
        cluster_queue: String,
    },
}

impl Reason {
    /// The reason as a one-word code (`UpperCamelCase`), as Kubernetes
    /// conditions and Events carry it; the sentence is [`Reason::render`].
    pub fn code(&self) -> &'static str {
        match self {
            Reason::None => "None",
            Reason::NoFit(_) => "NoFit",
            Reason::PreemptionFailed { .. } => "PreemptionFailed",
            Reason::PreemptionNotEnough { .. } => "PreemptionNotEnough",
            Reason::PreemptionCycle { .. } => "PreemptionCycle",
            Reason::PreemptedThisInstant { .. } => "PreemptedThisInstant",
            Reason::NamespaceNotSelected => "NamespaceNotSelected",
            Reason::NeverFits(_) => "NeverFits",
            Reason::ClusterQueueStopped { .. } => "ClusterQueueStopped",
            Reason::LocalQueueStopped { .. } => "LocalQueueStopped",
            Reason::BehindStrictHead { .. } => "BehindStrictHead",
            Reason::Denied { .. } => "Denied",
            Reason::Rejected { .. } => "Rejected",
            Reason::Evicted(eviction) => eviction.code(),
            Reason::Backoff { .. } => "Backoff",
            Reason::Deactivated { .. } => "Deactivated",
            Reason::WaitingForPodsReady { .. } => "WaitingForPodsReady",
            Reason::PodsReadyBackoff { .. } => "Backoff",
            Reason::RequeuingLimitExceeded { .. } => "RequeuingLimitExceeded",
            Reason::QueueRemoved { .. } => "QueueRemoved",
            Reason::ResourceRemoved { .. } => "ResourceRemoved",
            Reason::Detached { .. } => "Detached",
        }
    }

    /// Is it [`Reason::None`]?
    pub fn is_none(&self) -> bool {
        matches!(self, Reason::None)
    }

    /// Can the workload never be admitted as configured (the simulator's warning)?
    pub fn never_fits(&self) -> bool {
        matches!(self, Reason::NeverFits(_))
    }

    /// Is the workload waiting for nodes (rather than quota)?
    pub(crate) fn waits_for_capacity(&self) -> bool {
        let capacity = |n: &NotFit| {
            n.problems
                .iter()
                .any(|p| matches!(p, Problem::Capacity { .. }))
        };
        match self {
            Reason::NoFit(n) => capacity(n),
            Reason::PreemptionNotEnough { after: Some(n), .. } => capacity(n),
            _ => false,
        }
    }

    /// The sentence for people: the one rendering of a reason, for the
    /// table, the report, Kubernetes Events and conditions.
    pub fn render(&self, cluster: &Cluster, workload: &Workload) -> String {
        let cq_name = || {
            cluster
                .cluster_queues
                .get(workload.cluster_queue.index())
                .map_or("?", |cq| cq.name.as_str())
        };
        match self {
            Reason::None => String::new(),
            Reason::NoFit(not_fit) => render_not_fit(cluster, workload, not_fit),
            Reason::PreemptionFailed { not_fit, candidates } => format!(
                "{}; preemption cannot free enough ({candidates} candidate(s) allowed by the preemption policy)",
                render_not_fit(cluster, workload, not_fit)
            ),
            Reason::PreemptionNotEnough { not_fit, victims, after } => format!(
                "{}; preempting {victims} workload(s) would free quota but not {}",
                render_not_fit(cluster, workload, not_fit),
                after.as_ref().map_or("enough".to_string(), |a| render_not_fit(cluster, workload, a))
            ),
            Reason::PreemptionCycle { not_fit, victims } => format!(
                "{}{}preempting {} again would repeat a preemption it made since anything last arrived, finished or changed (they were admitted again since): the preemption rules are cycling here, so it waits until the cluster changes",
                not_fit.as_ref().map_or(String::new(), |n| render_not_fit(cluster, workload, n)),
                if not_fit.is_some() { "; " } else { "" },
                name_some(victims)
            ),
            Reason::PreemptedThisInstant { not_fit } => format!(
                "{}; it was itself preempted at this instant and may preempt only once time moves on",
                not_fit.as_ref().map_or(String::new(), |n| render_not_fit(cluster, workload, n))
            ),
            Reason::NamespaceNotSelected => format!(
                "namespace {} is not selected by ClusterQueue {}'s namespaceSelector",
                workload.namespace,
                cq_name()
            ),
            Reason::NeverFits(never) => render_never_fits(cluster, workload, never, cq_name()),
            Reason::ClusterQueueStopped { policy } => {
                format!("ClusterQueue {} is stopped (stopPolicy {policy:?})", cq_name())
            }
            Reason::LocalQueueStopped { policy } => format!(
                "LocalQueue {}/{} is stopped (stopPolicy {policy:?})",
                workload.namespace, workload.queue_name
            ),
            Reason::BehindStrictHead { head } => format!(
                "waiting behind {head}, the head of StrictFIFO ClusterQueue {}",
                cq_name()
            ),
            Reason::Denied { policy, message } => {
                format!("denied by policy {policy} (will retry): {message}")
            }
            Reason::Rejected { policy, message } => {
                format!("rejected by policy {policy}: {message}")
            }
            Reason::Evicted(eviction) => eviction.to_string(),
            Reason::Backoff {
                after,
                retry,
                max_retries,
                until,
            } => {
                let after = after.render(cluster, workload);
                format!(
                    "{after}{}retry {retry} of {max_retries} after backoff until {}s",
                    if after.is_empty() { "" } else { "; " },
                    until.as_secs_f64()
                )
            }
            Reason::Deactivated {
                retries,
                max_retries,
            } => format!(
                "deactivated after {retries} retries (retryPolicy.maxRetries {max_retries})"
            ),
            Reason::WaitingForPodsReady { workload } => format!(
                "waiting for the pods of {workload} to be ready: waitForPodsReady.blockAdmission admits nothing until then"
            ),
            Reason::PodsReadyBackoff {
                timeout,
                recovery,
                requeue,
                limit,
                until,
            } => format!(
                "its pods were not all ready {}within waitForPodsReady.{} {timeout}; requeue {requeue}{} after backoff until {}s",
                if *recovery { "again " } else { "" },
                if *recovery { "recoveryTimeout" } else { "timeout" },
                limit.map(|l| format!(" of {l}")).unwrap_or_default(),
                until.as_secs_f64()
            ),
            Reason::RequeuingLimitExceeded { requeues, limit } => format!(
                "deactivated: its pods were not all ready in time after {requeues} requeues (waitForPodsReady.requeuingStrategy.backoffLimitCount {limit})"
            ),
            Reason::QueueRemoved { namespace, queue } => format!(
                "LocalQueue {namespace}/{queue} (or its ClusterQueue) was removed; it waits until one is configured again"
            ),
            Reason::ResourceRemoved { pod_set, resource } => format!(
                "pod set {pod_set} requests {resource}, which the configuration no longer covers; it waits until a ClusterQueue covers it again"
            ),
            Reason::Detached { cluster_queue } => format!(
                "admitted by ClusterQueue {cluster_queue}, whose configuration was since removed; it keeps running, charged to no quota"
            ),
        }
    }
}

/// The sentence for an admission: where, borrowing, partially.
pub fn render_admission(cluster: &Cluster, workload: &Workload, admission: &Admission) -> String {
    let cq = cluster
        .cluster_queues
        .get(workload.cluster_queue.index())
        .map_or("?", |cq| cq.name.as_str());
    let mut text = format!("ClusterQueue {cq}");
    if admission.borrowing {
        text.push_str(", borrowing from its cohort");
    }
    let partial: Vec<String> = admission
        .counts
        .iter()
        .zip(&workload.pod_sets)
        .filter(|(admitted, ps)| **admitted < ps.count)
        .map(|(admitted, ps)| format!("{} {admitted} of {} pods", ps.name, ps.count))
        .collect();
    if !partial.is_empty() {
        let _ = write!(
            text,
            ", partially admitted (minCount): {}",
            partial.join(", ")
        );
    }
    text
}

fn render_never_fits(
    cluster: &Cluster,
    workload: &Workload,
    never: &NeverFits,
    cq: &str,
) -> String {
    let pod_set = |i: usize| workload.pod_sets.get(i).map_or("?", |p| p.name.as_str());
    match never {
        NeverFits::Uncovered { pod_set: ps, resource } => format!(
            "pod set {} requests {}, which ClusterQueue {cq} does not cover; add it to a resourceGroup's coveredResources",
            pod_set(*ps),
            cluster.resource_name(*resource),
        ),
        NeverFits::PodSetTooBig { pod_set: ps, wants, pods } => {
            let wants: Vec<String> = wants
                .iter()
                .map(|&(r, a)| format!("{a} {}", cluster.resource_name(r)))
                .collect();
            format!(
                "pod set {} needs {} ({pods} pod(s)), more than any flavor of ClusterQueue {cq} could ever give (quota, node size and count, selectors and taints considered)",
                pod_set(*ps),
                wants.join(", "),
            )
        }
        NeverFits::TotalTooBig { resource, total, potential } => format!(
            "its pod sets need {total} {} in total, more than the flavors of ClusterQueue {cq} could ever give together ({potential})",
            cluster.resource_name(*resource),
        ),
    }
}

fn render_not_fit(cluster: &Cluster, workload: &Workload, not_fit: &NotFit) -> String {
    let pod_set = workload.pod_sets.get(not_fit.pod_set);
    let ps_name = pod_set.map_or("?", |p| p.name.as_str());
    let mut text = format!("pod set {ps_name}: ");
    if not_fit.problems.is_empty() {
        text.push_str("no flavor listed for its resources");
    }
    let cq = &cluster.cluster_queue(workload.cluster_queue);
    for (i, problem) in not_fit.problems.iter().enumerate() {
        if i > 0 {
            text.push_str("; ");
        }
        let _ = match problem {
            Problem::Excluded { flavor } => {
                write!(
                    text,
                    "{}: excluded by pod set {ps_name}'s nodeSelector/affinity",
                    flavor_name(cluster, *flavor)
                )
            }
            Problem::Taint { flavor, taint } => {
                let f = &cluster.flavors[flavor.index()];
                match f.node_taints.get(*taint) {
                    Some(t) => write!(
                        text,
                        "{}: taint {}={}:{} not tolerated",
                        f.name,
                        t.key,
                        t.value.as_deref().unwrap_or(""),
                        t.effect
                    ),
                    None => write!(text, "{}: a taint is not tolerated", f.name),
                }
            }
            Problem::Quota {
                flavor,
                resource,
                need,
                available,
                nominal,
                borrowed,
                cohort_lend,
                potential,
            } => {
                let _ = write!(
                    text,
                    "needs {need} {} in {}; ClusterQueue {} has {available} free (nominal {nominal}, borrowed {borrowed})",
                    cluster.resource_name(*resource),
                    flavor_name(cluster, *flavor),
                    cq.name,
                );
                if let (Some(lend), Some(cohort)) = (cohort_lend, cq.cohort) {
                    let _ = write!(
                        text,
                        "; cohort {} has {lend} to lend",
                        cluster.cohorts[cohort.index()].name
                    );
                }
                if need > potential {
                    let _ = write!(text, "; it can never have more than {potential}");
                }
                Ok(())
            }
            Problem::Capacity {
                flavor,
                pods,
                nodes,
            } => {
                let requests = pod_set.map_or(String::new(), |p| describe(cluster, &p.per_pod));
                let name = flavor_name(cluster, *flavor);
                write!(
                    text,
                    "{name}: quota allows it but no {name} node has room for {pods} pod(s) of {requests} ({nodes} nodes ready)"
                )
            }
            Problem::Topology {
                flavor,
                level,
                miss,
            } => render_topology(cluster, &mut text, *flavor, level, miss),
        };
    }
    text
}

/// A [`Problem::Topology`], in Kueue's words where it has them.
fn render_topology(
    cluster: &Cluster,
    text: &mut String,
    flavor: FlavorId,
    level: &str,
    miss: &TopologyMiss,
) -> fmt::Result {
    let f = &cluster.flavors[flavor.index()];
    let topology = f.topology.and_then(|t| cluster.topologies.get(t.index()));
    match (miss, topology) {
        (TopologyMiss::NoTopology, _) | (_, None) => write!(
            text,
            "{}: topology level {level} requested, but the flavor names no Topology (spec.topologyName)",
            f.name
        ),
        (TopologyMiss::NoLevel, Some(t)) => write!(
            text,
            "{}: Topology {} has no level {level} (levels: {})",
            f.name,
            t.name,
            t.levels.join(", ")
        ),
        (
            TopologyMiss::NoDomain {
                pods,
                largest,
                domains,
            },
            Some(t),
        ) => {
            let fit = if *largest == 0 {
                format!("doesn't allow to fit any of {pods} pod(s)")
            } else {
                format!("allows to fit only {largest} out of {pods} pod(s)")
            };
            write!(
                text,
                "{}: topology {} {fit} in one {level} domain ({domains} {level} domain(s) of ready nodes)",
                f.name, t.name
            )
        }
    }
}

fn flavor_name(cluster: &Cluster, flavor: FlavorId) -> &str {
    &cluster.flavors[flavor.index()].name
}

/// `nvidia.com/gpu 8, cpu 32`: per-pod requests for people.
pub fn describe(cluster: &Cluster, per_pod: &[(ResourceId, Amount)]) -> String {
    let parts: Vec<String> = per_pod
        .iter()
        .map(|(r, a)| format!("{} {}", cluster.resource_name(*r), a))
        .collect();
    parts.join(", ")
}

/// `names` for a message: all of them up to three, else the first three
/// and how many more.
fn name_some(names: &[String]) -> String {
    match names.len() {
        0..=3 => names.join(", "),
        n => format!("{} and {} more", names[..3].join(", "), n - 3),
    }
}
