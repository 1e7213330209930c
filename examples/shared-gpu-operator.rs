//! Shared GPUs through the operator on a real kube-apiserver: how fast
//! pods placed per card are given their node and cards, and that no card
//! is over-allocated. A benchmark, not a test (issue 14, item 5).
//!
//! `cargo run --release --example shared-gpu-operator -- [--nodes 100] [--jobs 200] [--pods 4] [--milli 250] [--json FILE]`
//!
//! It starts a `TestCluster` (etcd + kube-apiserver,
//! `ARBITER_TEST_CLUSTER_BIN`), installs `deploy/crds.yaml`, applies one
//! flavor `t4` (quota for everything asked), `--nodes` Nodes of 4 cards of
//! 1000 `example.com/gpu-milli` (`arbiter.dev/devices`), and runs the
//! operator's driver in this process with the built-in hooks (best fit).
//! It then creates `--jobs` queued Jobs of `--pods` pods asking `--milli`
//! each, and plays the job controller: once a Job is released it creates
//! its pods from the released template (gated). It ends when every pod is
//! ungated, and reports the time from the first create to the last
//! release and to the last pod placed, the time each pod waited from its
//! create to its place (mean, median, p99), and checks from the pods
//! themselves that no card holds more than 1000 milli and every pod got a
//! Node of the flavor. Measured only, never asserted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use arbiter_operator::Operator;
use arbiter_testcluster::{crd_documents, workspace_root, TestCluster};
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

#[derive(Parser, Debug)]
struct Args {
    /// Nodes of 4 cards each.
    #[arg(long, default_value_t = 100)]
    nodes: u32,
    /// Queued Jobs.
    #[arg(long, default_value_t = 200)]
    jobs: u32,
    /// Pods per Job.
    #[arg(long, default_value_t = 4)]
    pods: u32,
    /// gpu-milli per pod (1000 is one card).
    #[arg(long, default_value_t = 250)]
    milli: u32,
    /// Also write the figures as JSON here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

const NAMESPACE: &str = "team-a";
const CARDS: u32 = 4;

fn setup(args: &Args) -> String {
    let quota = args.jobs as u64 * args.pods as u64 * args.milli as u64;
    format!(
        r#"{{"apiVersion": "arbiter.dev/v1alpha1", "kind": "ResourceFlavor",
  "metadata": {{"name": "t4"}}, "spec": {{"nodeLabels": {{"gpu": "t4"}}}}}}
---
{{"apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {{"name": "shared"}},
  "spec": {{"namespaceSelector": {{}}, "resourceGroups": [{{"coveredResources": ["cpu", "example.com/gpu-milli"],
    "flavors": [{{"name": "t4", "resources": [{{"name": "cpu", "nominalQuota": 100000}},
      {{"name": "example.com/gpu-milli", "nominalQuota": {quota}}}]}}]}}]}}}}
---
{{"apiVersion": "arbiter.dev/v1alpha1", "kind": "LocalQueue",
  "metadata": {{"name": "research", "namespace": "{NAMESPACE}"}}, "spec": {{"clusterQueue": "shared"}}}}
"#
    )
}

async fn apply(client: &Client, value: &Value) -> anyhow::Result<()> {
    let api_version = value["apiVersion"].as_str().unwrap_or_default();
    let kind = value["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await?;
    let name = value["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<kube::api::DynamicObject> = match value["metadata"]["namespace"].as_str() {
        Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        _ => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply("perf").force(),
        &Patch::Apply(value),
    )
    .await
    .with_context(|| format!("applying {kind} {name}"))?;
    Ok(())
}

async fn add_node(client: &Client, name: &str) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name,
        "labels": {"gpu": "t4", "kubernetes.io/hostname": name},
        "annotations": {"arbiter.dev/devices": format!("example.com/gpu-milli={CARDS}")}}}))?;
    nodes.create(&PostParams::default(), &node).await?;
    let resources =
        json!({"cpu": "64", "example.com/gpu-milli": (CARDS * 1000).to_string(), "pods": "110"});
    let status = json!({"status": {"allocatable": resources, "capacity": resources}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

fn job(name: &str, args: &Args) -> anyhow::Result<Job> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NAMESPACE,
                     "labels": {"arbiter.dev/queue-name": "research"}},
        "spec": {"suspend": true, "parallelism": args.pods, "completions": args.pods,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "infer", "image": "server",
                    "resources": {"requests": {"cpu": "1", "example.com/gpu-milli": args.milli.to_string()},
                                  "limits": {"example.com/gpu-milli": args.milli.to_string()}}}]}}}
    }))?)
}

fn released(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(false)
}

fn gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == "arbiter.dev/placement"))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.nodes == 0 || args.jobs == 0 || args.pods == 0 || args.milli == 0 {
        bail!("--nodes, --jobs, --pods and --milli must be at least 1");
    }
    let cluster = TestCluster::start()
        .await
        .map_err(|e| anyhow::anyhow!("the test cluster did not start: {e}"))?;
    let admin = cluster
        .admin_client()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let crds = crd_documents(&workspace_root().join("deploy/crds.yaml"))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    cluster
        .install_crds(&crds)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &namespace)
        .await?;
    for doc in setup(&args).split("---") {
        apply(&admin, &serde_json::from_str(doc)?).await?;
    }
    for i in 0..args.nodes {
        add_node(&admin, &format!("t4-{i:04}")).await?;
    }
    eprintln!(
        "{} nodes × {CARDS} cards; {} jobs × {} pods × {} milli",
        args.nodes, args.jobs, args.pods, args.milli
    );

    let client = admin.clone();
    let operator = tokio::spawn(async move {
        match Operator::builder(client).start().await {
            Ok(operator) => {
                let _ = operator.run_until(std::future::pending()).await;
            }
            Err(e) => eprintln!("the operator did not start: {e}"),
        }
    });

    let jobs: Api<Job> = Api::namespaced(admin.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    let start = Instant::now();
    let total_pods = (args.jobs * args.pods) as usize;
    // When each pod was created (the API's answer) and first seen ungated.
    let created: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let watcher_task = {
        let pods = pods.clone();
        tokio::spawn(async move {
            let mut ungated: BTreeMap<String, Instant> = BTreeMap::new();
            let mut stream = std::pin::pin!(watcher(pods, watcher::Config::default())
                .default_backoff()
                .applied_objects());
            while ungated.len() < total_pods {
                let Some(pod) = stream.next().await else {
                    bail!("the pod watch ended");
                };
                let Ok(pod) = pod else { continue };
                if !gated(&pod) {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    ungated.entry(name).or_insert_with(Instant::now);
                }
            }
            anyhow::Ok(ungated)
        })
    };
    // The job controller: each released Job's pods created once.
    let controller = {
        let (jobs, pods, created) = (jobs.clone(), pods.clone(), created.clone());
        let pods_per_job = args.pods;
        tokio::spawn(async move {
            let mut asked = 0usize;
            let mut last_release = Duration::ZERO;
            let limit = Arc::new(Semaphore::new(16));
            let mut stream = std::pin::pin!(watcher(jobs, watcher::Config::default())
                .default_backoff()
                .applied_objects());
            let mut tasks = Vec::new();
            let mut released_jobs = 0usize;
            let mut seen = std::collections::BTreeSet::new();
            while let Some(job) = stream.next().await {
                let Ok(job) = job else { continue };
                let name = job.metadata.name.clone().unwrap_or_default();
                if !released(&job) || !seen.insert(name.clone()) {
                    continue;
                }
                released_jobs += 1;
                last_release = start.elapsed();
                let template = serde_json::to_value(job.spec.as_ref().map(|s| &s.template))?;
                for i in 0..pods_per_job {
                    let pod_name = format!("{name}-{i}");
                    asked += 1;
                    let mut pod = json!({"metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
                    pod["metadata"]["name"] = json!(pod_name);
                    let pod: Pod = serde_json::from_value(pod)?;
                    let (pods, permit) = (pods.clone(), limit.clone().acquire_owned().await?);
                    let created = created.clone();
                    tasks.push(tokio::spawn(async move {
                        let result = pods.create(&PostParams::default(), &pod).await;
                        let at = Instant::now();
                        drop(permit);
                        let mut created = created.lock().unwrap_or_else(|p| p.into_inner());
                        created.insert(pod_name, at);
                        result.map(|_| ())
                    }));
                }
                if asked == total_pods {
                    break;
                }
            }
            for task in tasks {
                task.await??;
            }
            anyhow::Ok((last_release, released_jobs))
        })
    };
    let limit = Arc::new(Semaphore::new(16));
    for i in 0..args.jobs {
        let (jobs, job, permit) = (
            jobs.clone(),
            job(&format!("job-{i:04}"), &args)?,
            limit.clone().acquire_owned().await?,
        );
        tokio::spawn(async move {
            if let Err(e) = jobs.create(&PostParams::default(), &job).await {
                eprintln!("creating a job: {e}");
            }
            drop(permit);
        });
    }
    let (last_release, released_jobs) = controller.await??;
    let ungated = watcher_task.await??;
    let all_placed = ungated
        .values()
        .max()
        .map_or(Duration::ZERO, |at| at.duration_since(start));
    operator.abort();

    // From the pods themselves: what each card holds.
    let mut per_card: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut unplaced = 0;
    for pod in pods.list(&Default::default()).await?.items {
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let (Some(node), Some(cards)) = (
            annotations.get("arbiter.dev/node"),
            annotations.get("arbiter.dev/gpu-cards"),
        ) else {
            unplaced += 1;
            continue;
        };
        let cards: Vec<&str> = cards.split(',').collect();
        let each = args.milli as i64 / cards.len() as i64;
        for card in cards {
            *per_card
                .entry((node.clone(), card.to_string()))
                .or_default() += each;
        }
    }
    let over = per_card.values().filter(|&&m| m > 1000).count();
    let created = created.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // From the API's answer to the create until the watch showed it
    // ungated (0 when the watch saw it first).
    let mut waits: Vec<f64> = ungated
        .iter()
        .filter_map(|(name, at)| {
            Some(
                at.saturating_duration_since(*created.get(name)?)
                    .as_secs_f64(),
            )
        })
        .collect();
    waits.sort_by(f64::total_cmp);
    let mean = waits.iter().sum::<f64>() / waits.len().max(1) as f64;
    let figures = json!({
        "nodes": args.nodes, "cards": args.nodes * CARDS, "jobs": args.jobs,
        "released": released_jobs, "pods": total_pods, "milliPerPod": args.milli,
        "lastReleaseSeconds": last_release.as_secs_f64(),
        "allPlacedSeconds": all_placed.as_secs_f64(),
        "podsPlacedPerSecond": total_pods as f64 / all_placed.as_secs_f64(),
        "podWaitSeconds": {"mean": mean, "p50": percentile(&waits, 0.5), "p99": percentile(&waits, 0.99), "max": percentile(&waits, 1.0)},
        "cardsUsed": per_card.len(), "cardsOverAllocated": over, "podsWithoutPlace": unplaced,
    });
    println!("{}", serde_json::to_string_pretty(&figures)?);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&figures)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
