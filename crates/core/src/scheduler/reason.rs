//! Why a workload is not admitted, as data. The scheduler records a
//! [`Reason`] every time a head does not fit — often thousands of times per
//! run — so it stores numbers, not text, and renders the sentence a person
//! reads (`needs 16 nvidia.com/gpu in a100-80gb; ClusterQueue ml has 8 free
//! (nominal 32, borrowed 0); cohort gpu has 0 to lend`) only when asked.

use std::fmt::Write;

use crate::model::cluster::{Cluster, FlavorId, ResourceId};
use crate::model::Amount;

use super::workload::Workload;

/// What stopped one flavor from taking one pod set.
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    /// The pod set's nodeSelector / required affinity excludes the flavor.
    Excluded { flavor: FlavorId },
    /// The flavor's taint (index into its `node_taints`) is not tolerated.
    Taint { flavor: FlavorId, taint: usize },
    /// Not enough quota.
    Quota {
        flavor: FlavorId,
        resource: ResourceId,
        need: Amount,
        available: Amount,
        nominal: Amount,
        borrowed: Amount,
        /// What the cohort can lend beyond the queue's own free quota (`None`: no cohort).
        cohort_lend: Option<Amount>,
        /// The most the queue could ever have.
        potential: Amount,
    },
    /// Quota allows it, but no node has room for every pod.
    Capacity {
        flavor: FlavorId,
        pods: u32,
        nodes: u32,
    },
}

/// Why one pod set found no flavor.
#[derive(Clone, Debug, PartialEq)]
pub struct NotFit {
    pub pod_set: usize,
    pub problems: Vec<Problem>,
}

/// Why a workload is where it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Reason {
    #[default]
    None,
    NoFit(NotFit),
    /// Needs preemption, but the allowed candidates cannot free enough.
    PreemptionFailed {
        not_fit: NotFit,
        candidates: usize,
    },
    /// Preempting would free quota, but the workload still does not fit (nodes).
    PreemptionNotEnough {
        not_fit: NotFit,
        victims: usize,
        after: Option<NotFit>,
    },
    /// Anything rarer, already in words.
    Text(String),
}

impl Reason {
    pub fn is_none(&self) -> bool {
        matches!(self, Reason::None)
    }

    /// Is the workload waiting for nodes (rather than quota)?
    pub fn waits_for_capacity(&self) -> bool {
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

    /// The sentence for people.
    pub fn render(&self, cluster: &Cluster, workload: &Workload) -> String {
        match self {
            Reason::None => String::new(),
            Reason::Text(text) => text.clone(),
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
        }
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
        };
    }
    text
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
