//! The operator at size and over time, on a real kube-apiserver: a
//! benchmark, not a test (issue 28, item 2). Measured only, never asserted.
//!
//! `cargo build --release --bin arbiter --example operator-scale`, then
//!
//! `operator-scale pending [--jobs 100000] [--namespaces 1000] [--cluster-queues 200] [--json FILE]`
//!
//! puts `--jobs` suspended batch/v1 Jobs of one core each, round robin
//! over `--namespaces` Namespaces (a LocalQueue `lq` each), five
//! Namespaces to a ClusterQueue of `--quota` cores (ten ClusterQueues to a
//! Cohort, borrowing allowed; three priority classes), through `arbiter
//! run --no-webhooks` (a child process, as in `operator-perf`). Nearly all
//! of them wait. It reports, in phases:
//! 1. *fill*: the creation rate, when the operator knew every Job (its
//!    `arbiter_pending_workloads` + `arbiter_admitted_active_workloads`)
//!    and when every Workload was written (`arbiter_publish_backlog` 0);
//! 2. *idle*: `--idle` seconds with nothing changing: the operator's CPU,
//!    passes (`arbiter_tick_duration_seconds`) and memory;
//! 3. *churn*: `--churn` seconds in which the runner marks every released
//!    Job Complete as soon as it sees it, so the operator admits the next:
//!    admissions per second, CPU per pass, pass duration (mean, and the
//!    99th percentile from the histogram's buckets);
//! 4. *restart*: the runner stops finishing Jobs, the operator is stopped
//!    (SIGTERM) and started again: time to `/readyz`, to leading, to
//!    knowing every Job again (the same counts as before the stop), its
//!    CPU and memory for it and its requests to the API server; then the
//!    runner finishes Jobs again and the time to the first admission of
//!    the new process is reported.
//!
//! `operator-scale soak [--admissions 1000000] [--backlog 0.1] [--speed 1] [--quota-factor 1] [--window 60] [--max-minutes M]`
//!
//! runs the baseline shape's churn (`PerfScenario::baseline()`: 30 ClusterQueues
//! in 5 Cohorts, the small/medium/large classes with their sizes, runtimes
//! and priorities) without end, closed loop: each WorkloadGenerator
//! creates a Job every `interval / speed` while fewer than `backlog` × its
//! baseline count of its Jobs are unfinished; a released Job is marked
//! Complete `runtime / speed` after the runner saw it released (not if it
//! was held again meanwhile), and a Complete one is deleted, so the API
//! holds a bounded number of Jobs and Workloads. The rate is bounded by
//! the quota (about 160 Jobs of the mix run at once in the baseline's
//! 600 cores) and by how long a release takes to come back finished;
//! `--quota-factor` multiplies every ClusterQueue's quota and borrowing
//! limit to run more at once. Every `--window` seconds
//! it samples the operator (admissions, resident memory, CPU per admission
//! and per pass, pass duration) and the API server and etcd, until the
//! operator has counted `--admissions` admissions or `--max-minutes`
//! passed; it prints each window and compares the last windows with the
//! first ones after warm-up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use arbiter_sim::generate::PerfScenario;
use arbiter_testcluster::{crd_documents, workspace_root, TestCluster};
use clap::{Parser, Subcommand};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

#[path = "operator-perf/probe.rs"]
mod probe;
#[path = "operator-perf/shape.rs"]
mod shape;
use probe::{
    apply, arbiter_binary, free_port, metric_sum, operator_identity, samples, ApiCounts, Process,
    ProcessStat, OPERATOR_USER,
};

/// The label every runner Job carries.
const RUNNER_LABEL: &str = "scale.arbiter.dev/generator";

#[derive(Parser, Debug)]
#[command(
    about = "The operator at size (100,000 Jobs) and over time (a soak), on a real API server"
)]
struct Args {
    #[command(subcommand)]
    mode: Mode,
    /// The `arbiter` binary (default: $CARGO_TARGET_DIR or target/, release).
    #[arg(long, global = true, value_name = "PATH")]
    arbiter: Option<PathBuf>,
    /// Most runner requests (creates, finishes, deletes) in flight at once.
    #[arg(long, global = true, default_value_t = 64)]
    in_flight: usize,
    /// Write the figures as JSON to this file.
    #[arg(long, global = true, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Keep the operator's logs in this directory (default: the test
    /// cluster's, removed at the end).
    #[arg(long, global = true, value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// Extra arguments for `arbiter run` (repeatable).
    #[arg(
        long = "operator-arg",
        global = true,
        value_name = "ARG",
        allow_hyphen_values = true
    )]
    operator_args: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Many pending Jobs: fill, idle, churn at size, restart.
    Pending {
        #[arg(long, default_value_t = 100_000)]
        jobs: usize,
        #[arg(long, default_value_t = 1_000)]
        namespaces: usize,
        #[arg(long, default_value_t = 200)]
        cluster_queues: usize,
        /// Nominal cores of each ClusterQueue.
        #[arg(long, default_value_t = 8)]
        quota: u32,
        /// Seconds of the idle phase.
        #[arg(long, default_value_t = 60)]
        idle: u64,
        /// Seconds of the churn phase.
        #[arg(long, default_value_t = 120)]
        churn: u64,
    },
    /// The baseline's churn until `--admissions`.
    Soak {
        #[arg(long, default_value_t = 1_000_000)]
        admissions: u64,
        /// Unfinished Jobs a generator may have, as a fraction of its
        /// baseline count.
        #[arg(long, default_value_t = 0.1)]
        backlog: f64,
        /// Divides every interval and runtime.
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// Seconds between samples.
        #[arg(long, default_value_t = 60)]
        window: u64,
        /// Stop after this many minutes even if short of `--admissions`.
        #[arg(long)]
        max_minutes: Option<u64>,
        /// Multiplies every ClusterQueue's nominal quota and borrowing
        /// limit: more Jobs run at once, so more are admitted per second.
        #[arg(long, default_value_t = 1)]
        quota_factor: u32,
    },
}

/// The operator's own figures at one moment (its admin port's `/metrics`).
#[derive(Clone, Debug, Default)]
struct Scrape {
    pending: f64,
    admitted_active: f64,
    admitted_total: f64,
    backlog: f64,
    leader: f64,
    passes: f64,
    pass_seconds: f64,
    /// `arbiter_tick_duration_seconds_bucket`: (upper bound, cumulative count).
    buckets: Vec<(f64, f64)>,
}

impl Scrape {
    async fn read(port: u16) -> Option<Scrape> {
        let text = probe::http_get(port, "/metrics").await;
        if text.is_empty() {
            return None;
        }
        let mut buckets: Vec<(f64, f64)> = samples(&text, "arbiter_tick_duration_seconds_bucket")
            .into_iter()
            .filter_map(|(labels, v)| {
                let le = labels.get("le")?;
                let le = if *le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((le, v))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(Scrape {
            pending: metric_sum(&text, "arbiter_pending_workloads"),
            admitted_active: metric_sum(&text, "arbiter_admitted_active_workloads"),
            admitted_total: metric_sum(&text, "arbiter_admitted_workloads_total"),
            backlog: metric_sum(&text, "arbiter_publish_backlog"),
            leader: metric_sum(&text, "arbiter_leader"),
            passes: metric_sum(&text, "arbiter_tick_duration_seconds_count"),
            pass_seconds: metric_sum(&text, "arbiter_tick_duration_seconds_sum"),
            buckets,
        })
    }

    /// Jobs the operator has queued or admitted.
    fn known(&self) -> f64 {
        self.pending + self.admitted_active
    }
}

/// Passes between two scrapes: count, mean and 99th-percentile bound (ms).
fn passes_between(before: &Scrape, after: &Scrape) -> Value {
    let count = after.passes - before.passes;
    let mean_ms = if count > 0.0 {
        1000.0 * (after.pass_seconds - before.pass_seconds) / count
    } else {
        0.0
    };
    let target = 0.99 * count;
    let p99 = after
        .buckets
        .iter()
        .map(|&(le, n)| {
            let earlier = before
                .buckets
                .iter()
                .find(|b| b.0 == le)
                .map_or(0.0, |b| b.1);
            (le, n - earlier)
        })
        .find(|&(_, n)| count > 0.0 && n >= target)
        .map(|(le, _)| le * 1000.0);
    json!({"count": count, "meanMs": mean_ms, "p99AtMostMs": p99.filter(|v| v.is_finite())})
}

/// The operator under test: a child process and its admin port.
struct Operator {
    process: Process,
    port: u16,
    started: Instant,
}

impl Operator {
    fn pid(&self) -> u32 {
        self.process.0.id()
    }

    /// Asks it to stop (SIGTERM) and waits up to a minute for it to go.
    async fn stop(mut self) -> anyhow::Result<Duration> {
        let asked = Instant::now();
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .context("running kill")?;
        if !status.success() {
            bail!("kill -TERM {} failed", self.pid());
        }
        while self.process.0.try_wait()?.is_none() {
            if asked.elapsed() > Duration::from_secs(60) {
                eprintln!("the operator did not stop within 60 s of SIGTERM; killing it");
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(asked.elapsed())
    }
}

/// Starts `arbiter run --no-webhooks`, its log in `log`.
fn start_operator(args: &Args, kubeconfig: &Path, log: &Path) -> anyhow::Result<Operator> {
    let arbiter = arbiter_binary(args.arbiter.as_ref());
    if !arbiter.is_file() {
        bail!(
            "{} not found; run `cargo build --release --bin arbiter` or pass --arbiter",
            arbiter.display()
        );
    }
    let port = free_port()?;
    let child = Command::new(&arbiter)
        .args(["run", "--no-webhooks", "--kubeconfig"])
        .arg(kubeconfig)
        .arg(format!("--admin-address=127.0.0.1:{port}"))
        .args(&args.operator_args)
        .env(
            "ARBITER_LOG",
            std::env::var("ARBITER_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?)
        .spawn()
        .with_context(|| format!("starting {}", arbiter.display()))?;
    Ok(Operator {
        process: Process(child),
        port,
        started: Instant::now(),
    })
}

/// Polls the operator every 100 ms until `done` holds of its figures, or
/// `patience` passes (then an error naming `what`); returns when it held.
async fn until(
    operator: &Operator,
    what: &str,
    patience: Duration,
    mut done: impl FnMut(&Scrape) -> bool,
) -> anyhow::Result<Duration> {
    let since = Instant::now();
    let mut last = Instant::now();
    loop {
        if let Some(s) = Scrape::read(operator.port).await {
            if done(&s) {
                return Ok(since.elapsed());
            }
            if last.elapsed() >= Duration::from_secs(10) {
                eprintln!(
                    "  … waiting for {what}: known {}, admitted {}, backlog {}",
                    s.known(),
                    s.admitted_active,
                    s.backlog
                );
                last = Instant::now();
            }
        }
        if since.elapsed() > patience {
            bail!("{what} did not happen within {} s", patience.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A suspended batch/v1 Job queued in `lq`.
fn job(namespace: &str, name: &str, generator: &str, cpu: &str, priority_class: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {
            "arbiter.dev/queue-name": "lq",
            "arbiter.dev/priority-class": priority_class,
            RUNNER_LABEL: generator}},
        "spec": {"suspend": true, "backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": {"cpu": cpu}}}]}}}
    })
}

/// Creates `object`, retrying a failed create a few times (a 409 means an
/// earlier attempt made it). Returns whether it exists.
async fn create(client: &Client, object: &Value) -> bool {
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let api: Api<Job> = Api::namespaced(client.clone(), namespace);
    let Ok(job) = serde_json::from_value::<Job>(object.clone()) else {
        return false;
    };
    for attempt in 0..5 {
        match api.create(&PostParams::default(), &job).await {
            Ok(_) => return true,
            Err(kube::Error::Api(s)) if s.code == 409 => return true,
            Err(e) if attempt == 4 => {
                eprintln!("creating {namespace}/{:?}: {e}", job.metadata.name);
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    false
}

/// Marks a Job Complete through its status (what the Job controller
/// would write when its pod succeeds).
async fn complete(client: &Client, namespace: &str, name: &str) -> bool {
    let api: Api<Job> = Api::namespaced(client.clone(), namespace);
    let status = probe::completed_status();
    for _ in 0..5 {
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
        {
            Ok(_) => return true,
            Err(kube::Error::Api(s)) if s.code == 404 => return false,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    false
}

/// The runner's Jobs as the API changes them (deletions and watch errors
/// left out; the watch lists again on its own).
fn runner_jobs(admin: &Client) -> impl futures::Stream<Item = Job> + Send + 'static {
    let jobs: Api<Job> = Api::all(admin.clone());
    watcher(jobs, watcher::Config::default().labels(RUNNER_LABEL))
        .default_backoff()
        .applied_objects()
        .filter_map(|item| futures::future::ready(item.ok()))
}

fn released(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(false)
}

fn is_complete(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

fn key(job: &Job) -> (String, String) {
    (
        job.metadata.namespace.clone().unwrap_or_default(),
        job.metadata.name.clone().unwrap_or_default(),
    )
}

/// A test cluster with the CRDs, the operator's identity and `config`
/// applied, and the kubeconfig the operator runs with.
async fn cluster_with(config: &[Value]) -> anyhow::Result<(TestCluster, Client, PathBuf)> {
    eprintln!("starting the test cluster");
    let cluster = TestCluster::start().await?;
    let admin = cluster.admin_client().await?;
    let crds = crd_documents(&workspace_root().join("deploy/crds.yaml"))?;
    cluster.install_crds(&crds).await?;
    let objects = operator_identity();
    let applying = Arc::new(Semaphore::new(32));
    let mut tasks = Vec::new();
    for object in objects.iter() {
        apply(&admin, object).await?;
    }
    // Namespaces first (the namespaced objects need them), then the rest.
    let (namespaces, rest): (Vec<&Value>, Vec<&Value>) =
        config.iter().partition(|o| o["kind"] == "Namespace");
    for batch in [namespaces, rest] {
        for object in batch {
            let (admin, object, applying) = (admin.clone(), object.clone(), applying.clone());
            tasks.push(tokio::spawn(async move {
                let _permit = applying.acquire().await;
                apply(&admin, &object).await
            }));
        }
        for task in tasks.drain(..) {
            task.await??;
        }
    }
    let token = cluster.token(OPERATOR_USER)?.to_string();
    let kubeconfig = cluster.write_kubeconfig("operator", &token)?;
    Ok((cluster, admin, kubeconfig))
}

fn log_dir(args: &Args, cluster: &TestCluster) -> anyhow::Result<PathBuf> {
    let dir = args
        .log_dir
        .clone()
        .unwrap_or_else(|| cluster.dir().to_path_buf());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn mib(stat: &ProcessStat, name: &str) -> Value {
    json!({"rssMiB": stat.rss(name), "peakMiB": stat.hwm(name)})
}

#[path = "operator-scale/pending.rs"]
mod pending;
#[path = "operator-scale/soak.rs"]
mod soak;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let figures = match &args.mode {
        Mode::Pending { .. } => pending::run(&args).await?,
        Mode::Soak { .. } => soak::run(&args).await?,
    };
    println!("{}", serde_json::to_string_pretty(&figures)?);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&figures)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The machine-wide figures every report carries.
fn machine() -> Value {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_default();
    json!({"cpus": cpus, "model": model})
}

/// API requests between two reads, by "VERB resource" (the largest first).
fn requests_between(before: &ApiCounts, after: &ApiCounts) -> Value {
    let mut by: Vec<(String, f64)> = after
        .by_request
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v - before.by_request.get(k).copied().unwrap_or(0.0),
            )
        })
        .filter(|(_, v)| *v > 0.0)
        .collect();
    by.sort_by(|a, b| b.1.total_cmp(&a.1));
    json!({
        "total": after.total() - before.total(),
        "operator": after.operator - before.operator,
        "byRequest": by.into_iter().take(12).collect::<BTreeMap<_, _>>(),
    })
}
