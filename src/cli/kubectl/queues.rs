//! `kubectl arbiter stop|resume clusterqueue|localqueue NAME`: sets the
//! queue's `stopPolicy` (Kueue's kueuectl does the same): `HoldAndDrain`
//! (admit nothing new, evict what is admitted), `Hold` with
//! `--keep-already-running`, `None` to resume.

use arbiter_core::model::api::{ClusterQueue, LocalQueue, StopPolicy};
use clap::{Args, ValueEnum};
use kube::api::{Api, Patch, PatchParams};

use super::{not_found, Cluster, Kind};

/// The field manager of the plugin's writes.
const MANAGER: &str = "kubectl-arbiter";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Queue {
    #[value(alias = "cq")]
    Clusterqueue,
    #[value(alias = "lq")]
    Localqueue,
}

#[derive(Args, Debug)]
pub struct StopArgs {
    #[arg(value_enum)]
    pub kind: Queue,
    pub name: String,
    /// Admit nothing new but let admitted workloads run (stopPolicy Hold);
    /// without it they are evicted (HoldAndDrain).
    #[arg(long)]
    pub keep_already_running: bool,
}

#[derive(Args, Debug)]
pub struct ResumeArgs {
    #[arg(value_enum)]
    pub kind: Queue,
    pub name: String,
}

pub async fn stop(cluster: &Cluster, args: &StopArgs) -> anyhow::Result<()> {
    let policy = if args.keep_already_running {
        StopPolicy::Hold
    } else {
        StopPolicy::HoldAndDrain
    };
    set(cluster, args.kind, &args.name, policy).await?;
    let what = match policy {
        StopPolicy::Hold => "admits nothing new; admitted workloads keep running",
        _ => "admits nothing new and evicts what it admitted",
    };
    println!(
        "{} stopped (stopPolicy {policy:?}): it {what}",
        name(cluster, args.kind, &args.name)
    );
    Ok(())
}

pub async fn resume(cluster: &Cluster, args: &ResumeArgs) -> anyhow::Result<()> {
    set(cluster, args.kind, &args.name, StopPolicy::None).await?;
    println!("{} resumed", name(cluster, args.kind, &args.name));
    Ok(())
}

fn name(cluster: &Cluster, kind: Queue, name: &str) -> String {
    match kind {
        Queue::Clusterqueue => format!("clusterqueue.arbiter.dev/{name}"),
        Queue::Localqueue => format!("localqueue.arbiter.dev/{name} in {}", cluster.namespace),
    }
}

async fn set(
    cluster: &Cluster,
    kind: Queue,
    queue: &str,
    policy: StopPolicy,
) -> anyhow::Result<()> {
    let patch = serde_json::json!({"spec": {"stopPolicy": policy}});
    let params = PatchParams {
        field_manager: Some(MANAGER.to_string()),
        ..PatchParams::default()
    };
    let doing = format!("setting the stopPolicy of {}", name(cluster, kind, queue));
    let (result, kind) = match kind {
        Queue::Clusterqueue => {
            let api: Api<ClusterQueue> = Api::all(cluster.client.clone());
            (
                api.patch(queue, &params, &Patch::Merge(&patch))
                    .await
                    .map(drop),
                Kind::ClusterQueue,
            )
        }
        Queue::Localqueue => {
            let api: Api<LocalQueue> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
            (
                api.patch(queue, &params, &Patch::Merge(&patch))
                    .await
                    .map(drop),
                Kind::LocalQueue,
            )
        }
    };
    match result {
        Ok(()) => Ok(()),
        Err(e) if not_found(&e) => Err(anyhow::anyhow!(
            "{doing}: there is no such {}; list them with `kubectl arbiter list {}`",
            match kind {
                Kind::ClusterQueue => "ClusterQueue",
                _ => "LocalQueue",
            },
            kind_plural(kind),
        )),
        Err(e) => Err(cluster.explain(e, &doing, kind)),
    }
}

fn kind_plural(kind: Kind) -> &'static str {
    match kind {
        Kind::ClusterQueue => "clusterqueues",
        _ => "localqueues -n NAMESPACE",
    }
}
