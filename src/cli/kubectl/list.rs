//! `kubectl arbiter list workloads|localqueues|clusterqueues`.

use std::collections::BTreeMap;

use arbiter_core::model::api::{ClusterQueue, LocalQueue, PendingWorkloadsStatus, Workload};
use clap::{Args, ValueEnum};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

use super::{age, forbidden, job_of, print_list, table, Cluster, Kind, Output, State};

#[derive(Args, Debug)]
pub struct ListArgs {
    /// What to list.
    #[arg(value_enum)]
    pub what: What,
    /// In every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Output format: wide (more columns), yaml or json (the objects).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
    /// Only workloads of this ClusterQueue (or LocalQueues pointing at it).
    #[arg(long = "clusterqueue", short = 'c', value_name = "NAME")]
    pub cluster_queue: Option<String>,
    /// Only workloads of this LocalQueue.
    #[arg(long = "localqueue", short = 'q', value_name = "NAME")]
    pub local_queue: Option<String>,
    /// Only workloads in this state.
    #[arg(long, value_enum)]
    pub status: Option<StatusFilter>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum What {
    #[value(alias = "workload", alias = "wl")]
    Workloads,
    #[value(alias = "localqueue", alias = "lq")]
    Localqueues,
    #[value(alias = "clusterqueue", alias = "cq")]
    Clusterqueues,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StatusFilter {
    Pending,
    Admitted,
    Finished,
    Rejected,
    Inactive,
}

impl StatusFilter {
    fn admits(self, state: State) -> bool {
        matches!(
            (self, state),
            (StatusFilter::Pending, State::Pending)
                | (StatusFilter::Admitted, State::Admitted)
                | (StatusFilter::Finished, State::Finished)
                | (StatusFilter::Rejected, State::Rejected)
                | (StatusFilter::Inactive, State::Inactive)
        )
    }
}

pub async fn run(cluster: &Cluster, args: &ListArgs) -> anyhow::Result<()> {
    match args.what {
        What::Workloads => workloads(cluster, args).await,
        What::Localqueues => local_queues(cluster, args).await,
        What::Clusterqueues => cluster_queues(cluster, args).await,
    }
}

fn scope(cluster: &Cluster, all: bool) -> String {
    if all {
        "in all namespaces".to_string()
    } else {
        format!("in namespace {}", cluster.namespace)
    }
}

/// Objects of a namespaced kind in the plugin's namespace (or all), by
/// namespace and name.
async fn list_namespaced<K>(
    cluster: &Cluster,
    all: bool,
    kind: Kind,
    what: &str,
) -> anyhow::Result<Vec<K>>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = if all {
        Api::all(cluster.client.clone())
    } else {
        Api::namespaced(cluster.client.clone(), &cluster.namespace)
    };
    let mut items = api
        .list(&ListParams::default())
        .await
        .map_err(|e| cluster.explain(e, &format!("listing {what} {}", scope(cluster, all)), kind))?
        .items;
    items.sort_by(|a, b| {
        let key = |o: &K| (o.meta().namespace.clone(), o.meta().name.clone());
        key(a).cmp(&key(b))
    });
    Ok(items)
}

pub async fn list_workloads(cluster: &Cluster, all: bool) -> anyhow::Result<Vec<Workload>> {
    list_namespaced(cluster, all, Kind::Workload, "Workloads").await
}

pub async fn list_local_queues(cluster: &Cluster, all: bool) -> anyhow::Result<Vec<LocalQueue>> {
    list_namespaced(cluster, all, Kind::LocalQueue, "LocalQueues").await
}

/// The ClusterQueues, or `None` when the caller may not read them (a
/// tenant without `arbiter-queue-viewer`).
pub async fn try_cluster_queues(cluster: &Cluster) -> anyhow::Result<Option<Vec<ClusterQueue>>> {
    let api: Api<ClusterQueue> = Api::all(cluster.client.clone());
    match api.list(&ListParams::default()).await {
        Ok(list) => {
            let mut items = list.items;
            items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            Ok(Some(items))
        }
        Err(e) if forbidden(&e) => Ok(None),
        Err(e) => Err(cluster.explain(e, "listing ClusterQueues", Kind::ClusterQueue)),
    }
}

pub use arbiter_operator::dashboard::model::position;

/// Positions of a workload: in its LocalQueue and in its ClusterQueue.
pub struct Positions {
    local: BTreeMap<(String, String), (Option<PendingWorkloadsStatus>, i32, String)>,
    cluster: Option<BTreeMap<String, (Option<PendingWorkloadsStatus>, i32)>>,
}

impl Positions {
    pub fn new(local_queues: &[LocalQueue], cluster_queues: Option<&[ClusterQueue]>) -> Positions {
        let local = local_queues
            .iter()
            .map(|lq| {
                let status = lq.status.clone().unwrap_or_default();
                (
                    (
                        lq.metadata.namespace.clone().unwrap_or_default(),
                        lq.metadata.name.clone().unwrap_or_default(),
                    ),
                    (
                        status.pending_workloads_status,
                        status.pending_workloads,
                        lq.spec.cluster_queue.clone(),
                    ),
                )
            })
            .collect();
        let cluster = cluster_queues.map(|cqs| {
            cqs.iter()
                .map(|cq| {
                    let status = cq.status.clone().unwrap_or_default();
                    (
                        cq.metadata.name.clone().unwrap_or_default(),
                        (status.pending_workloads_status, status.pending_workloads),
                    )
                })
                .collect()
        });
        Positions { local, cluster }
    }

    /// The ClusterQueue a LocalQueue points at, if the LocalQueue was read.
    pub fn cluster_queue_of(&self, namespace: &str, local_queue: &str) -> Option<&str> {
        self.local
            .get(&(namespace.to_string(), local_queue.to_string()))
            .map(|(_, _, cq)| cq.as_str())
    }

    /// (in the LocalQueue, in the ClusterQueue), `None` where unknown or
    /// not in a queue (admitted, or waiting out a backoff).
    pub fn of(&self, workload: &Workload) -> (Option<String>, Option<String>) {
        let backing_off = super::condition(workload.status.as_ref(), "QuotaReserved")
            .is_some_and(|c| c.reason == "Backoff");
        if State::of(workload) != State::Pending || backing_off {
            return (None, None);
        }
        let namespace = workload.metadata.namespace.clone().unwrap_or_default();
        let name = workload.metadata.name.clone().unwrap_or_default();
        let queue = workload.spec.queue_name.clone().unwrap_or_default();
        let local = self.local.get(&(namespace.clone(), queue));
        let in_local = local
            .and_then(|(head, pending, _)| position(head.as_ref(), *pending, &namespace, &name));
        let in_cluster = local.and_then(|(_, _, cq)| {
            let (head, pending) = self.cluster.as_ref()?.get(cq)?;
            position(head.as_ref(), *pending, &namespace, &name)
        });
        (in_local, in_cluster)
    }
}

/// The ClusterQueue a workload is admitted to, else the one its LocalQueue points at.
pub fn cluster_queue_of(workload: &Workload, positions: &Positions) -> Option<String> {
    if let Some(admission) = workload.status.as_ref().and_then(|s| s.admission.as_ref()) {
        return Some(admission.cluster_queue.clone());
    }
    let namespace = workload.metadata.namespace.as_deref().unwrap_or_default();
    let queue = workload.spec.queue_name.as_deref()?;
    positions
        .cluster_queue_of(namespace, queue)
        .map(str::to_string)
}

/// Flavors of an admitted workload: `a100` (or `main:a100,worker:h100`).
pub fn flavors(workload: &Workload) -> String {
    let Some(admission) = workload.status.as_ref().and_then(|s| s.admission.as_ref()) else {
        return String::new();
    };
    let mut per_pod_set = Vec::new();
    for assignment in &admission.pod_set_assignments {
        let mut flavors: Vec<&str> = assignment.flavors.values().map(String::as_str).collect();
        flavors.sort_unstable();
        flavors.dedup();
        per_pod_set.push((assignment.name.as_str(), flavors.join("+")));
    }
    let all_same = per_pod_set.windows(2).all(|w| w[0].1 == w[1].1);
    if all_same {
        per_pod_set
            .first()
            .map(|(_, f)| f.clone())
            .unwrap_or_default()
    } else {
        per_pod_set
            .iter()
            .map(|(p, f)| format!("{p}:{f}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

async fn workloads(cluster: &Cluster, args: &ListArgs) -> anyhow::Result<()> {
    let all = args.all_namespaces;
    let mut items = list_workloads(cluster, all).await?;
    let local_queues = list_local_queues(cluster, all).await?;
    let cluster_queues = if args.output == Some(Output::Wide) || args.cluster_queue.is_some() {
        try_cluster_queues(cluster).await?
    } else {
        None
    };
    let positions = Positions::new(&local_queues, cluster_queues.as_deref());
    items.retain(|w| {
        args.status.is_none_or(|s| s.admits(State::of(w)))
            && args
                .local_queue
                .as_ref()
                .is_none_or(|q| w.spec.queue_name.as_ref() == Some(q))
            && args
                .cluster_queue
                .as_ref()
                .is_none_or(|cq| cluster_queue_of(w, &positions).as_ref() == Some(cq))
    });
    if let Some(output @ (Output::Yaml | Output::Json)) = args.output {
        return print_list(&items, output == Output::Json);
    }
    if items.is_empty() {
        eprintln!("No workloads found {}.", scope(cluster, all));
        return Ok(());
    }
    let wide = args.output == Some(Output::Wide);
    let now = Timestamp::now();
    let mut header = vec![
        "NAME",
        "JOB",
        "LOCALQUEUE",
        "CLUSTERQUEUE",
        "STATUS",
        "POSITION",
        "REASON",
    ];
    if wide {
        header.extend(["CQ POSITION", "PRIORITY", "FLAVORS"]);
    }
    header.push("AGE");
    if all {
        header.insert(0, "NAMESPACE");
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|w| {
            let state = State::of(w);
            let (in_local, in_cluster) = positions.of(w);
            let reason = match state {
                State::Admitted => String::new(),
                _ => {
                    let type_ = if state == State::Finished {
                        "Finished"
                    } else {
                        "QuotaReserved"
                    };
                    super::condition(w.status.as_ref(), type_)
                        .map(|c| c.reason.clone())
                        .unwrap_or_default()
                }
            };
            let mut row = vec![
                w.metadata.name.clone().unwrap_or_default(),
                job_of(w)
                    .map(|(kind, name)| format!("{kind}/{name}"))
                    .unwrap_or_default(),
                w.spec.queue_name.clone().unwrap_or_default(),
                cluster_queue_of(w, &positions).unwrap_or_default(),
                state.as_str().to_string(),
                in_local.unwrap_or_else(|| "-".into()),
                reason,
            ];
            if wide {
                row.push(in_cluster.unwrap_or_else(|| "-".into()));
                row.push(w.spec.priority.map(|p| p.to_string()).unwrap_or_default());
                row.push(flavors(w));
            }
            row.push(age(w.metadata.creation_timestamp.as_ref(), now));
            if all {
                row.insert(0, w.metadata.namespace.clone().unwrap_or_default());
            }
            row
        })
        .collect();
    super::super::print_stdout(&table(&header, &rows))
}

/// The `Active` condition's status (`True`/`False`) of a queue.
fn active(conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]) -> String {
    conditions
        .iter()
        .find(|c| c.type_ == "Active")
        .map(|c| c.status.clone())
        .unwrap_or_else(|| "Unknown".into())
}

async fn local_queues(cluster: &Cluster, args: &ListArgs) -> anyhow::Result<()> {
    let all = args.all_namespaces;
    let mut items = list_local_queues(cluster, all).await?;
    items.retain(|lq| {
        args.cluster_queue
            .as_ref()
            .is_none_or(|cq| &lq.spec.cluster_queue == cq)
    });
    if let Some(output @ (Output::Yaml | Output::Json)) = args.output {
        return print_list(&items, output == Output::Json);
    }
    if items.is_empty() {
        eprintln!("No LocalQueues found {}.", scope(cluster, all));
        return Ok(());
    }
    let now = Timestamp::now();
    let wide = args.output == Some(Output::Wide);
    let mut header = vec![
        "NAME",
        "CLUSTERQUEUE",
        "PENDING",
        "ADMITTED",
        "ACTIVE",
        "STOP POLICY",
    ];
    if wide {
        header.push("HEAD");
    }
    header.push("AGE");
    if all {
        header.insert(0, "NAMESPACE");
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|lq| {
            let status = lq.status.clone().unwrap_or_default();
            let mut row = vec![
                lq.metadata.name.clone().unwrap_or_default(),
                lq.spec.cluster_queue.clone(),
                status.pending_workloads.to_string(),
                status.admitted_workloads.to_string(),
                active(&status.conditions),
                lq.spec
                    .stop_policy
                    .map(|p| format!("{p:?}"))
                    .unwrap_or_else(|| "None".into()),
            ];
            if wide {
                row.push(head_of(status.pending_workloads_status.as_ref(), false));
            }
            row.push(age(lq.metadata.creation_timestamp.as_ref(), now));
            if all {
                row.insert(0, lq.metadata.namespace.clone().unwrap_or_default());
            }
            row
        })
        .collect();
    super::super::print_stdout(&table(&header, &rows))
}

/// The first waiting workload of a queue, `-` if none.
fn head_of(head: Option<&PendingWorkloadsStatus>, with_namespace: bool) -> String {
    head.and_then(|h| h.head.first())
        .map(|w| {
            if with_namespace {
                format!("{}/{}", w.namespace, w.name)
            } else {
                w.name.clone()
            }
        })
        .unwrap_or_else(|| "-".into())
}

async fn cluster_queues(cluster: &Cluster, args: &ListArgs) -> anyhow::Result<()> {
    let api: Api<ClusterQueue> = Api::all(cluster.client.clone());
    let mut items = api
        .list(&ListParams::default())
        .await
        .map_err(|e| cluster.explain(e, "listing ClusterQueues", Kind::ClusterQueue))?
        .items;
    items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    if let Some(output @ (Output::Yaml | Output::Json)) = args.output {
        return print_list(&items, output == Output::Json);
    }
    if items.is_empty() {
        eprintln!("No ClusterQueues found.");
        return Ok(());
    }
    let now = Timestamp::now();
    let wide = args.output == Some(Output::Wide);
    let mut header = vec![
        "NAME",
        "COHORT",
        "PENDING",
        "ADMITTED",
        "ACTIVE",
        "STOP POLICY",
        "USAGE",
    ];
    if wide {
        header.extend(["WEIGHTED SHARE", "HEAD"]);
    }
    header.push("AGE");
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|cq| {
            let status = cq.status.clone().unwrap_or_default();
            let mut row = vec![
                cq.metadata.name.clone().unwrap_or_default(),
                cq.spec.cohort.clone().unwrap_or_else(|| "-".into()),
                status.pending_workloads.to_string(),
                status.admitted_workloads.to_string(),
                active(&status.conditions),
                cq.spec
                    .stop_policy
                    .map(|p| format!("{p:?}"))
                    .unwrap_or_else(|| "None".into()),
                status.usage_summary.clone().unwrap_or_else(|| "-".into()),
            ];
            if wide {
                row.push(
                    status
                        .fair_sharing
                        .as_ref()
                        .map(|f| format!("{:.0}", f.weighted_share))
                        .unwrap_or_else(|| "-".into()),
                );
                row.push(head_of(status.pending_workloads_status.as_ref(), true));
            }
            row.push(age(cq.metadata.creation_timestamp.as_ref(), now));
            row
        })
        .collect();
    super::super::print_stdout(&table(&header, &rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_core::model::api::PendingWorkload;

    fn head(names: &[&str]) -> PendingWorkloadsStatus {
        PendingWorkloadsStatus {
            head: names
                .iter()
                .map(|n| PendingWorkload {
                    namespace: "team-a".into(),
                    name: n.to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_position_is_counted_from_one_and_past_the_named_head_is_a_bound() {
        let h = head(&["job-a", "job-b"]);
        assert_eq!(
            position(Some(&h), 2, "team-a", "job-b"),
            Some("2".to_string())
        );
        assert_eq!(
            position(Some(&h), 5, "team-a", "job-z"),
            Some(">2".to_string())
        );
        // Named nowhere and nothing more waits: not waiting in this queue.
        assert_eq!(position(Some(&h), 2, "team-a", "job-z"), None);
        assert_eq!(position(Some(&h), 2, "team-b", "job-a"), None);
        assert_eq!(position(None, 0, "team-a", "job-a"), None);
    }
}
