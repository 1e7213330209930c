//! `kubectl arbiter describe workload NAME` and `kubectl arbiter why NAME`:
//! one workload, found by its Workload's name, its job's name, or
//! `kind/name` of its job. `describe` shows everything the API holds about
//! it; `why` says what keeps it waiting — its typed reason, the workloads
//! in front of it, its ClusterQueue's quota by flavor against what it asks,
//! the admitted workloads its ClusterQueue's preemption policy could evict,
//! the policy that decided — and what to do.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use arbiter_core::model::api::{
    ClusterQueue, Preemption, WithinClusterQueue, Workload, WorkloadStatus,
};
use arbiter_core::model::Amount;
use arbiter_operator::dashboard::model::deciding_policy;
use arbiter_operator::workloads::workload_name;
use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

use super::list::{cluster_queue_of, flavors, list_local_queues, try_cluster_queues, Positions};
use super::{age, condition, forbidden, job_of, not_found, table, usage, Cluster, Kind, State};

#[derive(Args, Debug)]
pub struct DescribeArgs {
    #[arg(value_enum)]
    pub kind: Describable,
    /// The Workload's name, its job's name, or KIND/NAME of its job (job/train-1).
    pub name: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Describable {
    #[value(alias = "workloads", alias = "wl")]
    Workload,
}

#[derive(Args, Debug)]
pub struct WhyArgs {
    /// The Workload's name, its job's name, or KIND/NAME of its job (job/train-1).
    pub name: String,
}

/// The Workload NAME names, in the plugin's namespace.
async fn find(cluster: &Cluster, name: &str) -> anyhow::Result<Workload> {
    let api: Api<Workload> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let doing = format!("reading Workload {}/{name}", cluster.namespace);
    if let Some((kind, job)) = name.split_once('/') {
        if kind.is_empty() || job.is_empty() {
            return Err(usage(format!(
                "`{name}`: give a Workload's name, a job's name or KIND/NAME of a job"
            )));
        }
        // kubectl's `pytorchjob.kubeflow.org/NAME` names the kind too.
        let kind = kind.split('.').next().unwrap_or(kind);
        let workload = workload_name(kind, job);
        return match api.get(&workload).await {
            Ok(w) => Ok(w),
            Err(e) if not_found(&e) => Err(anyhow::anyhow!(
                "{kind} {job} has no Workload ({workload}) in namespace {}: it names no queue, or Arbiter has not seen it yet; `kubectl arbiter list workloads` lists them",
                cluster.namespace
            )),
            Err(e) => Err(cluster.explain(e, &doing, Kind::Workload)),
        };
    }
    match api.get(name).await {
        Ok(w) => return Ok(w),
        Err(e) if not_found(&e) => {}
        Err(e) => return Err(cluster.explain(e, &doing, Kind::Workload)),
    }
    // Not a Workload's name: a job's?
    let all = api
        .list(&ListParams::default())
        .await
        .map_err(|e| cluster.explain(e, &doing, Kind::Workload))?
        .items;
    let mut of_job: Vec<Workload> = all
        .into_iter()
        .filter(|w| job_of(w).is_some_and(|(_, job)| job == name))
        .collect();
    match of_job.len() {
        0 => Err(anyhow::anyhow!(
            "no Workload {name} in namespace {}, nor one of a job named {name}; `kubectl arbiter list workloads` lists them (-n NAMESPACE for another namespace)",
            cluster.namespace
        )),
        1 => Ok(of_job.remove(0)),
        _ => Err(usage(format!(
            "jobs of several kinds are named {name} in namespace {}: name one as KIND/NAME ({})",
            cluster.namespace,
            of_job
                .iter()
                .filter_map(job_of)
                .map(|(k, n)| format!("{}/{n}", k.to_ascii_lowercase()))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// What a workload asks in all: per resource, pods × per-pod request.
fn asks(workload: &Workload) -> BTreeMap<String, Amount> {
    let mut total: BTreeMap<String, Amount> = BTreeMap::new();
    for pod_set in &workload.spec.pod_sets {
        for (resource, quantity) in pod_set.requests.iter().flatten() {
            let per_pod = Amount::from_quantity(quantity).unwrap_or(Amount::ZERO);
            let slot = total.entry(resource.clone()).or_insert(Amount::ZERO);
            *slot = slot.saturating_add(per_pod.saturating_mul(i64::from(pod_set.count)));
        }
    }
    total
}

fn pod_sets(workload: &Workload) -> String {
    workload
        .spec
        .pod_sets
        .iter()
        .map(|p| {
            let requests: Vec<String> = p
                .requests
                .iter()
                .flatten()
                .map(|(r, q)| format!("{r} {}", q.0))
                .collect();
            format!(
                "{}: {} pod(s) × {}",
                p.name,
                p.count,
                if requests.is_empty() {
                    "nothing".to_string()
                } else {
                    requests.join(", ")
                }
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn reason_and_message(status: Option<&WorkloadStatus>, state: State) -> (String, String) {
    let type_ = match state {
        State::Finished => "Finished",
        State::Admitted => "Admitted",
        _ => "QuotaReserved",
    };
    condition(status, type_)
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_else(|| {
            (
                "Unknown".into(),
                "Arbiter has not written its status yet".into(),
            )
        })
}

fn full_name(workload: &Workload) -> String {
    format!(
        "{}/{}",
        workload.metadata.namespace.as_deref().unwrap_or_default(),
        workload.metadata.name.as_deref().unwrap_or_default()
    )
}

/// A workload and what `describe` and `why` read beside it.
struct WorkloadReading {
    workload: Workload,
    /// `None` when the caller may not read ClusterQueues.
    cluster_queues: Option<Vec<ClusterQueue>>,
    positions: Positions,
    state: State,
    reason: String,
    message: String,
}

impl WorkloadReading {
    async fn read(cluster: &Cluster, name: &str) -> anyhow::Result<WorkloadReading> {
        let workload = find(cluster, name).await?;
        let local_queues = list_local_queues(cluster, false).await?;
        let cluster_queues = try_cluster_queues(cluster).await?;
        let positions = Positions::new(&local_queues, cluster_queues.as_deref());
        let state = State::of(&workload);
        let (reason, message) = reason_and_message(workload.status.as_ref(), state);
        Ok(WorkloadReading {
            workload,
            cluster_queues,
            positions,
            state,
            reason,
            message,
        })
    }
}

pub async fn describe(cluster: &Cluster, args: &DescribeArgs) -> anyhow::Result<()> {
    let Describable::Workload = args.kind;
    let WorkloadReading {
        workload,
        cluster_queues: _,
        positions,
        state,
        reason,
        message,
    } = WorkloadReading::read(cluster, &args.name).await?;
    let status = workload.status.as_ref();
    let now = Timestamp::now();
    let mut out = String::new();
    let field = |out: &mut String, name: &str, value: &str| {
        let _ = writeln!(out, "{:<15} {value}", format!("{name}:"));
    };
    field(
        &mut out,
        "Name",
        workload.metadata.name.as_deref().unwrap_or(""),
    );
    field(
        &mut out,
        "Namespace",
        workload.metadata.namespace.as_deref().unwrap_or(""),
    );
    let job = job_of(&workload);
    field(
        &mut out,
        "Job",
        &job.as_ref()
            .map(|(k, n)| format!("{k}/{n}"))
            .unwrap_or_else(|| "-".into()),
    );
    field(
        &mut out,
        "LocalQueue",
        workload.spec.queue_name.as_deref().unwrap_or("-"),
    );
    field(
        &mut out,
        "ClusterQueue",
        &cluster_queue_of(&workload, &positions).unwrap_or_else(|| "-".into()),
    );
    let priority = match (&workload.spec.priority, &workload.spec.priority_class_name) {
        (Some(p), Some(class)) => format!("{p} (WorkloadPriorityClass {class})"),
        (Some(p), None) => p.to_string(),
        (None, Some(class)) => format!("WorkloadPriorityClass {class}"),
        (None, None) => "-".into(),
    };
    field(&mut out, "Priority", &priority);
    field(&mut out, "Pod sets", &pod_sets(&workload));
    field(&mut out, "State", &state_line(&workload, state, &positions));
    field(&mut out, "Reason", &reason);
    field(&mut out, "Message", &message);
    let policy = status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .find_map(|c| deciding_policy(&c.message));
    field(
        &mut out,
        "Decided by",
        &match policy {
            Some(p) => format!("policy {p}"),
            None => "the queues' rules (no policy denied or rejected it)".into(),
        },
    );
    if let Some(admission) = status.and_then(|s| s.admission.as_ref()) {
        field(
            &mut out,
            "Admission",
            &format!(
                "ClusterQueue {}, flavors {}",
                admission.cluster_queue,
                flavors(&workload)
            ),
        );
    }
    field(
        &mut out,
        "Evictions",
        &format!(
            "{} (retries {})",
            status.and_then(|s| s.evictions).unwrap_or(0),
            status.and_then(|s| s.retries).unwrap_or(0)
        ),
    );
    out.push_str("Conditions:\n");
    let rows: Vec<Vec<String>> = status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .map(|c| {
            vec![
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                age(Some(&c.last_transition_time), now),
                c.message.clone(),
            ]
        })
        .collect();
    indent(
        &mut out,
        &table(&["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], &rows),
    );
    out.push_str("Events:\n");
    let mut names = vec![workload.metadata.name.clone().unwrap_or_default()];
    names.extend(job.map(|(_, n)| n));
    match events(cluster, &names).await {
        Ok(events) if events.is_empty() => out.push_str("  <none>\n"),
        Ok(events) => {
            let rows: Vec<Vec<String>> = events
                .iter()
                .map(|e| {
                    let at = e
                        .last_timestamp
                        .as_ref()
                        .or(e.first_timestamp.as_ref())
                        .or(e.metadata.creation_timestamp.as_ref());
                    vec![
                        age(at, now),
                        e.type_.clone().unwrap_or_default(),
                        e.reason.clone().unwrap_or_default(),
                        format!(
                            "{}/{}",
                            e.involved_object.kind.as_deref().unwrap_or_default(),
                            e.involved_object.name.as_deref().unwrap_or_default()
                        ),
                        e.message.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            indent(
                &mut out,
                &table(&["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"], &rows),
            );
        }
        Err(e) => {
            let _ = writeln!(out, "  {e:#}");
        }
    }
    super::super::print_stdout(&out)
}

fn indent(out: &mut String, text: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "  {line}");
    }
}

fn state_line(workload: &Workload, state: State, positions: &Positions) -> String {
    let (in_local, in_cluster) = positions.of(workload);
    let mut line = state.as_str().to_string();
    if let Some(p) = in_local {
        let _ = write!(line, ", position {p} in its LocalQueue");
    }
    if let Some(p) = in_cluster {
        let _ = write!(line, ", {p} in its ClusterQueue");
    }
    line
}

/// The Events about the objects named, oldest first.
async fn events(cluster: &Cluster, names: &[String]) -> anyhow::Result<Vec<Event>> {
    let api: Api<Event> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mut all = Vec::new();
    for name in names {
        let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
        match api.list(&params).await {
            Ok(list) => all.extend(list.items),
            Err(e) => {
                return Err(cluster.explain(
                    e,
                    &format!("reading the Events of {name}"),
                    Kind::Event,
                ))
            }
        }
    }
    all.sort_by_key(|e| {
        e.last_timestamp
            .as_ref()
            .or(e.first_timestamp.as_ref())
            .map(|t| t.0)
    });
    Ok(all)
}

pub async fn why(cluster: &Cluster, args: &WhyArgs) -> anyhow::Result<()> {
    let WorkloadReading {
        workload,
        cluster_queues,
        positions,
        state,
        reason,
        message,
    } = WorkloadReading::read(cluster, &args.name).await?;
    let mut out = String::new();
    let job = job_of(&workload)
        .map(|(k, n)| format!(" ({k}/{n})"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{}{job} is {}: {reason}\n  {message}",
        full_name(&workload),
        state.as_str()
    );
    if state != State::Pending {
        let _ = writeln!(
            out,
            "{}",
            match state {
                State::Admitted => "Nothing blocks it: it is admitted.",
                State::Finished => "It has finished.",
                State::Rejected =>
                    "It will not be admitted as it is: change what the message names and submit it again.",
                _ => "It is out of its queue: set spec.active (or resubmit the job) once the cause is fixed.",
            }
        );
        return super::super::print_stdout(&out);
    }
    let (in_local, in_cluster) = positions.of(&workload);
    let cq_name = cluster_queue_of(&workload, &positions);
    let queue = workload.spec.queue_name.as_deref().unwrap_or("-");
    let _ = writeln!(
        out,
        "Position: {} in LocalQueue {}/{queue}; {}",
        in_local.as_deref().unwrap_or("unknown"),
        workload.metadata.namespace.as_deref().unwrap_or_default(),
        match (&in_cluster, &cq_name) {
            (Some(p), Some(cq)) => format!("{p} in ClusterQueue {cq}"),
            (None, Some(cq)) if cluster_queues.is_some() => {
                format!("not among the first waiting in ClusterQueue {cq}")
            }
            _ => "its ClusterQueue is not readable (bind arbiter-queue-viewer)".into(),
        }
    );
    let cq = cq_name
        .as_ref()
        .and_then(|name| {
            cluster_queues
                .as_deref()?
                .iter()
                .find(|c| c.metadata.name.as_ref() == Some(name))
        })
        .cloned();
    if let Some(cq) = &cq {
        ahead(&mut out, &workload, cq);
        quota(&mut out, &workload, cq);
        preemption(cluster, &mut out, &workload, cq).await?;
    } else if cluster_queues.is_none() {
        out.push_str(
            "Quota and preemption: not shown, the ClusterQueue is not readable with your credentials (bind the ClusterRole arbiter-queue-viewer).\n",
        );
    }
    if let Some(policy) = deciding_policy(&message) {
        let _ = writeln!(out, "Policy: {policy} decided (see the message above).");
    }
    let _ = writeln!(
        out,
        "Next: {}",
        next_step(&reason, &workload, cq_name.as_deref())
    );
    super::super::print_stdout(&out)
}

/// The workloads in front of it in its ClusterQueue, as its status names them.
fn ahead(out: &mut String, workload: &Workload, cq: &ClusterQueue) {
    let Some(head) = cq
        .status
        .as_ref()
        .and_then(|s| s.pending_workloads_status.as_ref())
    else {
        return;
    };
    let me = (
        workload.metadata.namespace.as_deref().unwrap_or_default(),
        workload.metadata.name.as_deref().unwrap_or_default(),
    );
    let before: Vec<String> = head
        .head
        .iter()
        .take_while(|w| (w.namespace.as_str(), w.name.as_str()) != me)
        .map(|w| format!("{}/{}", w.namespace, w.name))
        .collect();
    if before.is_empty() {
        let _ = writeln!(
            out,
            "In front of it: nothing; it is the head of ClusterQueue {}.",
            cq.metadata.name.as_deref().unwrap_or_default()
        );
    } else {
        let _ = writeln!(
            out,
            "In front of it: {} (the head: {})",
            before.join(", "),
            before[0]
        );
    }
}

/// Its ClusterQueue's quota per flavor for what it asks.
fn quota(out: &mut String, workload: &Workload, cq: &ClusterQueue) {
    let asks = asks(workload);
    let status = cq.status.clone().unwrap_or_default();
    let used = |flavor: &str, resource: &str| {
        status
            .flavors_usage
            .iter()
            .find(|f| f.name == flavor)
            .and_then(|f| f.resources.iter().find(|r| r.name == resource))
            .and_then(|r| Amount::from_quantity(&r.total).ok())
            .unwrap_or(Amount::ZERO)
    };
    let mut rows = Vec::new();
    for group in &cq.spec.resource_groups {
        for flavor in &group.flavors {
            for resource in &flavor.resources {
                let Some(&needs) = asks.get(&resource.name) else {
                    continue;
                };
                let nominal =
                    Amount::from_quantity(&resource.nominal_quota).unwrap_or(Amount::ZERO);
                let in_use = used(&flavor.name, &resource.name);
                let free = nominal.positive_sub(in_use);
                let verdict = if free.milli() >= needs.milli() {
                    "fits".to_string()
                } else {
                    format!("short by {}", needs.positive_sub(free).to_quantity_string())
                };
                rows.push(vec![
                    flavor.name.clone(),
                    resource.name.clone(),
                    resource.nominal_quota.0.clone(),
                    in_use.to_quantity_string(),
                    free.to_quantity_string(),
                    needs.to_quantity_string(),
                    verdict,
                ]);
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "Quota of ClusterQueue {}{} against what it asks:",
        cq.metadata.name.as_deref().unwrap_or_default(),
        cq.spec
            .cohort
            .as_ref()
            .map(|c| format!(" (cohort {c}: it may also borrow what the cohort does not use)"))
            .unwrap_or_default()
    );
    indent(
        out,
        &table(
            &[
                "FLAVOR", "RESOURCE", "NOMINAL", "IN USE", "FREE", "ASKS", "",
            ],
            &rows,
        ),
    );
}

/// The admitted workloads its ClusterQueue's `withinClusterQueue` policy
/// could preempt for it (among those the caller can read).
async fn preemption(
    cluster: &Cluster,
    out: &mut String,
    workload: &Workload,
    cq: &ClusterQueue,
) -> anyhow::Result<()> {
    let policy = cq
        .spec
        .preemption
        .as_ref()
        .and_then(|p: &Preemption| p.within_cluster_queue)
        .unwrap_or_default();
    let cq_name = cq.metadata.name.clone().unwrap_or_default();
    if policy == WithinClusterQueue::Never {
        let _ = writeln!(
            out,
            "Preemption: ClusterQueue {cq_name} preempts nothing within itself (withinClusterQueue: Never)."
        );
        return Ok(());
    }
    let api: Api<Workload> = Api::all(cluster.client.clone());
    let (admitted, scope) = match api.list(&ListParams::default()).await {
        Ok(list) => (list.items, String::new()),
        Err(e) if forbidden(&e) => (
            super::list::list_workloads(cluster, false).await?,
            format!(" (only namespace {} is readable to you)", cluster.namespace),
        ),
        Err(e) => {
            return Err(cluster.explain(e, "listing Workloads in all namespaces", Kind::Workload))
        }
    };
    let mine = workload.spec.priority.unwrap_or(0);
    let created = workload.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let candidates: Vec<String> = admitted
        .iter()
        .filter(|w| State::of(w) == State::Admitted)
        .filter(|w| {
            w.status
                .as_ref()
                .and_then(|s| s.admission.as_ref())
                .is_some_and(|a| a.cluster_queue == cq_name)
        })
        .filter(|w| {
            let theirs = w.spec.priority.unwrap_or(0);
            match policy {
                WithinClusterQueue::LowerPriority => theirs < mine,
                WithinClusterQueue::LowerOrNewerEqualPriority => {
                    theirs < mine
                        || (theirs == mine
                            && w.metadata.creation_timestamp.as_ref().map(|t| t.0) > created)
                }
                WithinClusterQueue::Never => false,
            }
        })
        .map(|w| {
            format!(
                "{} (priority {}, {})",
                full_name(w),
                w.spec.priority.unwrap_or(0),
                flavors(w)
            )
        })
        .collect();
    if candidates.is_empty() {
        let _ = writeln!(
            out,
            "Preemption ({policy:?} within ClusterQueue {cq_name}): no admitted workload it may preempt{scope}."
        );
    } else {
        let _ = writeln!(
            out,
            "Preemption ({policy:?} within ClusterQueue {cq_name}): it may preempt{scope}:"
        );
        for c in candidates {
            let _ = writeln!(out, "  {c}");
        }
    }
    Ok(())
}

fn next_step(reason: &str, workload: &Workload, cq: Option<&str>) -> String {
    let queue = workload.spec.queue_name.as_deref().unwrap_or("-");
    let cq = cq.unwrap_or("its ClusterQueue");
    match reason {
        "ClusterQueueStopped" => {
            format!("ClusterQueue {cq} is stopped: `kubectl arbiter resume clusterqueue {cq}` (a platform engineer)")
        }
        "LocalQueueStopped" => format!(
            "LocalQueue {queue} is stopped: `kubectl arbiter resume localqueue {queue} -n {}`",
            workload.metadata.namespace.as_deref().unwrap_or_default()
        ),
        "Denied" => "a policy denied it for now; it is asked again at the next try".into(),
        "NamespaceNotSelected" => {
            format!("ClusterQueue {cq}'s namespaceSelector does not select this namespace: use another LocalQueue or ask for the selector to change")
        }
        "LocalQueueDoesNotExist" | "LocalQueueInactive" | "QueueRemoved" => format!(
            "its LocalQueue {queue} is missing or inactive: `kubectl arbiter list localqueues`"
        ),
        "Backoff" => "it waits out a backoff before its next try (see the message)".into(),
        _ => "it is admitted when quota frees (workloads in front finish or are preempted) or the quota grows".into(),
    }
}
