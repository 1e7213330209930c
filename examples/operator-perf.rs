//! Kueue's scheduler-performance shapes through the operator, on a real
//! kube-apiserver: a benchmark, not a test (issue 11, item 9).
//!
//! `cargo build --release --bin arbiter && cargo run --release --example operator-perf -- baseline [--scale 0.1] [--pods] [--against kueue|kueue-tuned] [--json FILE]`
//!
//! It starts a `TestCluster` (etcd + kube-apiserver, `ARBITER_TEST_CLUSTER_BIN`),
//! installs `deploy/crds.yaml`, and applies the queue configuration of
//! `PerfScenario::to_yaml()` (ResourceFlavor, ClusterQueues, LocalQueues; their
//! Namespaces; one WorkloadPriorityClass per priority the generators name).
//! The flavor has no `nodeLabels`, so quota alone bounds it, as in Kueue's
//! runner, which has no Nodes either. It then starts `arbiter run
//! --no-webhooks` as a child process, as token user `alice` (bound to
//! `cluster-admin`, its requests classified by a FlowSchema of their own so
//! the API server counts them apart), and plays Kueue's runner
//! (`test/performance/scheduler/runner`): each WorkloadGenerator becomes
//! `count` suspended batch/v1 Jobs created one every `interval` (the i-th at
//! (i+1) × interval, all generators at once, a bounded number of requests in
//! flight), and each Job the operator releases is marked Complete through its
//! status subresource `runtime` after the runner saw it released. A Job
//! held again (preempted) before that is not finished; its next release
//! starts its runtime over. It ends when every Job is finished.
//!
//! The figures are those of `examples/kueue-perf.rs`, from the real run:
//! time to admission is when the runner's watch first saw the Job released
//! minus when the runner sent the create (the same for every system; for
//! Arbiter, its admission record's `admittedAt` also gives the lag from
//! decision to release seen); ClusterQueue usage is the CPU of its Jobs
//! from the release seen until the runner saw them finished or held again,
//! integrated over the run and divided by run time and nominal quota; the
//! minimum over ClusterQueues is reported. CPU seconds and peak RSS come
//! from /proc of each process just before the system under test is
//! stopped. Measured only, never asserted. Linux only (it reads /proc).
//!
//! `--against kueue` runs the same shape three times, each on a fresh test
//! cluster: through Arbiter, through Kueue v0.17.0 at its shipped client
//! limits, and through Kueue tuned (see `operator-perf/kueue.rs`), then
//! prints the three side by side with each Kueue figure divided by
//! Arbiter's; `--against kueue-tuned` runs Arbiter and tuned Kueue only.
//! `--system kueue` (or `kueue-tuned`) runs one of them alone.
//!
//! With `--pods` the same runs on the full test cluster
//! (`TestCluster::start_full`: kube-controller-manager, kube-scheduler and
//! kwok beside the API server) with real pods: kwok Nodes of 64 cores hold
//! every ClusterQueue's nominal quota at once (plus one spare Node), each
//! released Job's pod is made by the Job controller, bound by
//! kube-scheduler and run by kwok for the Job's runtime (its
//! `arbiter.test/run-for`), and the Job controller marks the Job Complete:
//! the runner writes nothing but the creates. It also reports the time from
//! the operator's admission (`admittedAt`) to the runner's pod watch seeing
//! the Job's pod Running.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _};
use arbiter_sim::generate::PerfScenario;
use arbiter_testcluster::{
    add_node, crd_documents, workspace_root, NodeSpec, TestCluster, RUN_FOR_ANNOTATION,
};
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

/// The label every runner Job carries: its class.
const CLASS_LABEL: &str = "perf.arbiter.dev/class";
/// The admission record the operator writes on a released Job.
const ADMISSION_ANNOTATION: &str = "arbiter.dev/admission";

#[derive(Parser, Debug)]
#[command(about = "Kueue's performance shapes through `arbiter run` on a real API server")]
struct Args {
    /// The shape: baseline or large-scale.
    shape: String,
    /// Fraction of each generator's workloads to create (pacing unchanged).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// The `arbiter` binary (default: $CARGO_TARGET_DIR or target/, release).
    #[arg(long, value_name = "PATH")]
    arbiter: Option<PathBuf>,
    /// Most create and finish requests in flight at once.
    #[arg(long, default_value_t = 64)]
    in_flight: usize,
    /// Give up (and report what finished) after this many seconds.
    #[arg(long, default_value_t = 1500)]
    timeout: u64,
    /// Write the figures as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Keep the operator's log here (default: the test cluster's directory, removed at the end).
    #[arg(long, value_name = "FILE")]
    operator_log: Option<PathBuf>,
    /// Run real pods on the full test cluster (see above) instead of
    /// marking Jobs Complete through their status.
    #[arg(long)]
    pods: bool,
    /// Extra arguments for `arbiter run` (repeatable).
    #[arg(long = "operator-arg", value_name = "ARG", allow_hyphen_values = true)]
    operator_args: Vec<String>,
    /// Measure Arbiter beside this peer, each on a fresh test cluster, one
    /// after the other, and print them side by side with the ratios
    /// (`kueue`: Kueue v0.17 at its shipped defaults and tuned;
    /// `kueue-tuned`: tuned only, the peer the comparison must hold against).
    #[arg(long, value_name = "PEER", value_parser = ["kueue", "kueue-tuned"])]
    against: Option<String>,
    /// The one system to measure when there is no `--against`.
    #[arg(long, value_enum, default_value_t = System::Arbiter)]
    system: System,
}

/// A system the runner measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum System {
    /// `arbiter run`.
    Arbiter,
    /// Kueue's manager at its shipped client limits (QPS 50, burst 100).
    Kueue,
    /// Kueue's manager with client QPS 5,000 and burst 10,000.
    KueueTuned,
}

impl System {
    fn title(self) -> &'static str {
        match self {
            System::Arbiter => "Arbiter",
            System::Kueue => "Kueue v0.17.0 (shipped defaults)",
            System::KueueTuned => "Kueue v0.17.0 (tuned: QPS 5000, burst 10000)",
        }
    }

    fn key(self) -> &'static str {
        match self {
            System::Arbiter => "arbiter",
            System::Kueue => "kueue",
            System::KueueTuned => "kueueTuned",
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// CRDs, Namespaces, the operator's identity (cluster-admin, its own
/// FlowSchema) and the shape's queue configuration, for `system` (Kueue's
/// CRDs from `kueue_dir`).
async fn set_up(
    cluster: &TestCluster,
    admin: &Client,
    plan: &Plan,
    system: System,
    kueue_dir: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let config = match (system, kueue_dir) {
        (System::Arbiter, _) => {
            let crds = crd_documents(&workspace_root().join("deploy/crds.yaml"))?;
            cluster.install_crds(&crds).await?;
            plan.config.clone()
        }
        (_, Some(dir)) => {
            kueue::install_crds(cluster, dir).await?;
            plan.config
                .iter()
                .map(kueue::object)
                .collect::<anyhow::Result<_>>()?
        }
        (_, None) => bail!("Kueue is not built"),
    };
    let mut objects = operator_identity();
    for ns in &plan.namespaces {
        objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    }
    for object in objects.iter().chain(&config) {
        apply(admin, object).await?;
    }
    Ok(())
}

/// The Job the runner creates for `planned`, queued in `system`; with
/// `pods`, its pod is labelled with its class and runs for its runtime
/// under kwok.
fn job_object(planned: &Planned, pods: bool, system: System) -> anyhow::Result<Job> {
    let pod_metadata = if pods {
        json!({"labels": {CLASS_LABEL: planned.class},
               "annotations": {RUN_FOR_ANNOTATION: format!("{}ms", planned.runtime.as_millis())}})
    } else {
        json!({})
    };
    let mut labels = match system {
        System::Arbiter => json!({"arbiter.dev/queue-name": "lq",
                                  "arbiter.dev/priority-class": planned.priority_class}),
        System::Kueue | System::KueueTuned => kueue::job_labels(&planned.priority_class),
    };
    labels[CLASS_LABEL] = json!(planned.class);
    Ok(serde_json::from_value(json!({
        "metadata": {"name": planned.name, "namespace": planned.namespace, "labels": labels},
        "spec": {"suspend": true, "backoffLimit": 0, "template": {"metadata": pod_metadata, "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": {"cpu": planned.cpu}}}]}}}
    }))?)
}

/// kwok Nodes of 64 cores (and room for 1,000 pods each) that hold every
/// ClusterQueue's nominal CPU at once — the most a cohort can admit — plus
/// one spare for packing.
async fn add_nodes(admin: &Client, plan: &Plan) -> anyhow::Result<usize> {
    let total: f64 = plan.nominal.values().sum();
    let count = (total / 64.0).ceil() as usize + 1;
    for i in 0..count {
        let mut spec = NodeSpec::gpu(&format!("perf-node-{i}"), 64, 0);
        spec.allocatable.insert("pods".into(), "1000".into());
        add_node(admin, &spec).await?;
    }
    Ok(count)
}

/// One pod watch event (`--pods`): when each of a Job's pods is first seen
/// running (matched to the admission it ran under at the end).
fn observe_pod(run: &Shared, pod: Pod) {
    let running = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Running" || p == "Succeeded");
    let job = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("batch.kubernetes.io/job-name"))
        .cloned();
    let (Some(job), Some(uid), true) = (job, pod.metadata.uid.clone(), running) else {
        return;
    };
    let key = (pod.metadata.namespace.clone().unwrap_or_default(), job);
    let now = now_ms();
    let mut guard = lock(run);
    let run_ref = &mut *guard;
    if let Some(&i) = run_ref.index.get(&key) {
        run_ref.seen[i].running_ms.entry(uid).or_insert(now);
    }
}

/// What the runner knows of one Job.
#[derive(Debug, Default)]
struct JobTimeline {
    sent_ms: Option<i64>,
    /// When the runner's watch first saw it released (the admission as
    /// every system is measured).
    first_admitted_ms: Option<i64>,
    /// When the runner saw the release in force.
    current: Option<i64>,
    /// Arbiter's `admittedAt` of the release in force (none from Kueue).
    record: Option<i64>,
    /// Releases seen (first and after preemptions).
    admissions: u32,
    evictions: u32,
    /// CPU-milliseconds held (closed intervals).
    held_cpu_ms: f64,
    finished_ms: Option<i64>,
    /// When the runner saw the release in force.
    released_seen_ms: Option<i64>,
    /// When each release was decided: Arbiter's `admittedAt`, else when
    /// the runner saw it.
    admitted_ats: Vec<i64>,
    /// When the runner's pod watch first saw each of the Job's pods
    /// running (`--pods`), by pod uid.
    running_ms: BTreeMap<String, i64>,
}

#[derive(Default)]
struct Counters {
    created: usize,
    create_failed: usize,
    admitted: usize,
    finished: usize,
    finish_requests: usize,
    create_requests: usize,
    finish_errors: usize,
    /// Most the creation ran behind the shape's pace (ms).
    max_lag_ms: i64,
    /// From the operator's decision (`admittedAt`) to the runner seeing
    /// the release: total ms and count.
    release_lag: (i64, u64),
    /// From the end of a Job's runtime (the runner about to mark it
    /// Complete) to the runner's watch showing it Complete.
    finish_lag: (i64, u64),
}

struct Run {
    system: System,
    plan: Plan,
    /// Jobs run as real pods (`--pods`): the Job controller finishes them.
    pods: bool,
    seen: Vec<JobTimeline>,
    index: HashMap<(String, String), usize>,
    counters: Counters,
}

type Shared = Arc<Mutex<Run>>;

fn lock(run: &Shared) -> std::sync::MutexGuard<'_, Run> {
    run.lock().unwrap_or_else(|p| p.into_inner())
}

fn admitted_at(job: &Job) -> Option<i64> {
    let text = job
        .metadata
        .annotations
        .as_ref()?
        .get(ADMISSION_ANNOTATION)?;
    let record: Value = serde_json::from_str(text).ok()?;
    record["admittedAt"].as_i64()
}

fn complete(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

/// One watch event: releases start runtimes, holds and finishes close
/// the time a Job held quota.
fn observe(run: &Shared, jobs: &Api<Job>, finishing: &Arc<Semaphore>, job: Job) {
    let key = (
        job.metadata.namespace.clone().unwrap_or_default(),
        job.metadata.name.clone().unwrap_or_default(),
    );
    let now = now_ms();
    let mut guard = lock(run);
    let run_ref = &mut *guard;
    let Some(&i) = run_ref.index.get(&key) else {
        return;
    };
    let cpu = run_ref.plan.jobs[i].cpu_cores;
    let runtime = run_ref.plan.jobs[i].runtime;
    let seen = &mut run_ref.seen[i];
    if seen.finished_ms.is_some() {
        return;
    }
    if complete(&job) {
        if let Some(at) = seen.current.take() {
            seen.held_cpu_ms += cpu * (now - at).max(0) as f64;
        }
        seen.finished_ms = Some(now);
        if let Some(released) = seen.released_seen_ms {
            let lag = &mut run_ref.counters.finish_lag;
            lag.0 += (now - released - runtime.as_millis() as i64).max(0);
            lag.1 += 1;
        }
        run_ref.counters.finished += 1;
        return;
    }
    let released = job.spec.as_ref().and_then(|s| s.suspend) == Some(false);
    let record = admitted_at(&job);
    // A new release: released after being held, or (Arbiter) released
    // under another admission record than the one in force.
    let new_release = released
        && match record {
            Some(at) => seen.record != Some(at),
            None => seen.current.is_none(),
        };
    if new_release {
        if let Some(old) = seen.current.replace(now) {
            seen.held_cpu_ms += cpu * (now - old).max(0) as f64;
        }
        seen.record = record;
        seen.admissions += 1;
        seen.admitted_ats.push(record.unwrap_or(now));
        seen.released_seen_ms = Some(now);
        if let Some(at) = record {
            let lag = &mut run_ref.counters.release_lag;
            lag.0 += (now - at).max(0);
            lag.1 += 1;
        }
        if seen.first_admitted_ms.is_none() {
            seen.first_admitted_ms = Some(now);
            run_ref.counters.admitted += 1;
        }
        let pods = run_ref.pods;
        drop(guard);
        if pods {
            return;
        }
        tokio::spawn(finish_after(
            run.clone(),
            jobs.clone(),
            finishing.clone(),
            i,
            now,
            runtime,
        ));
    } else if !released {
        if let Some(at) = seen.current.take() {
            seen.held_cpu_ms += cpu * (now - at).max(0) as f64;
            seen.evictions += 1;
        }
        seen.record = None;
    }
}

/// Marks Job `i` Complete `runtime` after its release was seen (`at`),
/// unless it was held again meanwhile.
async fn finish_after(
    run: Shared,
    jobs: Api<Job>,
    finishing: Arc<Semaphore>,
    i: usize,
    at: i64,
    runtime: Duration,
) {
    tokio::time::sleep(runtime).await;
    let (namespace, name) = {
        let r = lock(&run);
        (
            r.plan.jobs[i].namespace.clone(),
            r.plan.jobs[i].name.clone(),
        )
    };
    let api: Api<Job> = Api::namespaced(jobs.into_client(), &namespace);
    for _ in 0..10 {
        if lock(&run).seen[i].current != Some(at) {
            return;
        }
        let Ok(_permit) = finishing.acquire().await else {
            return;
        };
        let status = probe::completed_status();
        let result = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await;
        {
            let mut r = lock(&run);
            r.counters.finish_requests += 1;
            if result.is_ok() {
                return;
            }
            r.counters.finish_errors += 1;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Creates every planned Job at its time, at most `in_flight` at once.
async fn create_all(run: Shared, admin: Client, in_flight: usize, start: Instant) {
    let (pods, system) = {
        let r = lock(&run);
        (r.pods, r.system)
    };
    let creating = Arc::new(Semaphore::new(in_flight));
    let planned: Vec<Planned> = lock(&run).plan.jobs.clone();
    for (i, job) in planned.into_iter().enumerate() {
        tokio::time::sleep_until((start + job.due).into()).await;
        let Ok(permit) = creating.clone().acquire_owned().await else {
            return;
        };
        let lag = start.elapsed().as_millis() as i64 - job.due.as_millis() as i64;
        let run = run.clone();
        let api: Api<Job> = Api::namespaced(admin.clone(), &job.namespace);
        tokio::spawn(async move {
            let _permit = permit;
            let object = match job_object(&job, pods, system) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("{}: {e}", job.name);
                    lock(&run).counters.create_failed += 1;
                    return;
                }
            };
            {
                let mut r = lock(&run);
                r.seen[i].sent_ms = Some(now_ms());
                r.counters.max_lag_ms = r.counters.max_lag_ms.max(lag);
            }
            for attempt in 0..5 {
                let result = api.create(&PostParams::default(), &object).await;
                {
                    let mut r = lock(&run);
                    r.counters.create_requests += 1;
                    match result {
                        // 409: an earlier attempt did create it.
                        Ok(_) => {
                            r.counters.created += 1;
                            return;
                        }
                        Err(kube::Error::Api(s)) if s.code == 409 => {
                            r.counters.created += 1;
                            return;
                        }
                        Err(e) if attempt == 4 => {
                            eprintln!("creating {}: {e}", job.name);
                            r.counters.create_failed += 1;
                        }
                        Err(_) => {}
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
    }
}

#[path = "operator-perf/kueue.rs"]
mod kueue;
#[path = "operator-perf/measure.rs"]
mod measure;
#[path = "operator-perf/probe.rs"]
mod probe;
#[path = "operator-perf/shape.rs"]
mod shape;
use measure::Figures;
use probe::{
    apply, arbiter_binary, free_port, operator_identity, ApiCounts, Process, ProcessStat,
    OPERATOR_USER,
};
use shape::{plan, Plan, Planned};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut shape = match args.shape.as_str() {
        "baseline" => PerfScenario::baseline(),
        "large-scale" => PerfScenario::large_scale(),
        other => bail!("unknown shape {other:?}; use baseline or large-scale"),
    };
    if !(args.scale > 0.0 && args.scale <= 1.0) {
        bail!("--scale must be in (0, 1]");
    }
    for class in &mut shape.classes {
        class.count = ((class.count as f64 * args.scale).round() as u32).max(1);
    }
    let yaml = shape.to_yaml();
    let systems = match args.against.as_deref() {
        Some("kueue-tuned") => vec![System::Arbiter, System::KueueTuned],
        Some(_) => vec![System::Arbiter, System::Kueue, System::KueueTuned],
        None => vec![args.system],
    };
    let arbiter = arbiter_binary(args.arbiter.as_ref());
    if systems.contains(&System::Arbiter) && !arbiter.is_file() {
        bail!(
            "{} not found; run `cargo build --release --bin arbiter` or pass --arbiter",
            arbiter.display()
        );
    }
    let kueue_dir = if systems.iter().any(|s| *s != System::Arbiter) {
        Some(kueue::build()?)
    } else {
        None
    };
    let mut results = Vec::new();
    for system in systems {
        eprintln!("== {}", system.title());
        let figures = run_system(&args, &yaml, system, &arbiter, kueue_dir.as_deref()).await?;
        println!("== {}", system.title());
        figures.print(&args.shape, args.scale);
        results.push((system, figures));
    }
    if results.len() > 1 {
        measure::print_side_by_side(
            &results
                .iter()
                .map(|(s, f)| (s.title(), f))
                .collect::<Vec<_>>(),
        );
    }
    if let Some(path) = &args.json {
        let json = match results.as_slice() {
            [(_, figures)] => figures.json().clone(),
            all => json!({
                "shape": args.shape, "scale": args.scale,
                "systems": all.iter().map(|(s, f)| (s.key().to_string(), f.json().clone()))
                    .collect::<serde_json::Map<_, _>>(),
            }),
        };
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// One run of the shape through `system` on a fresh test cluster.
async fn run_system(
    args: &Args,
    yaml: &str,
    system: System,
    arbiter: &std::path::Path,
    kueue_dir: Option<&std::path::Path>,
) -> anyhow::Result<Figures> {
    let plan = plan(yaml)?;
    let total = plan.jobs.len();
    let cluster = if args.pods {
        eprintln!("starting the full test cluster");
        TestCluster::start_full().await?
    } else {
        eprintln!("starting the test cluster");
        TestCluster::start().await?
    };
    let admin = cluster.admin_client().await?;
    set_up(&cluster, &admin, &plan, system, kueue_dir).await?;
    if args.pods {
        let nodes = add_nodes(&admin, &plan).await?;
        eprintln!("{nodes} kwok Nodes of 64 cores");
    }
    let token = cluster.token(OPERATOR_USER)?.to_string();
    let kubeconfig = cluster.write_kubeconfig("operator", &token)?;
    let log_path = args
        .operator_log
        .clone()
        .map(|p| match system {
            System::Arbiter => p,
            other => p.with_extension(format!("{}.log", other.key())),
        })
        .unwrap_or_else(|| cluster.dir().join(format!("{}.log", system.key())));
    let (operator, ready_port, admin_port) = match (system, kueue_dir) {
        (System::Arbiter, _) => {
            let admin_port = free_port()?;
            let child = Command::new(arbiter)
                .args(["run", "--no-webhooks", "--kubeconfig"])
                .arg(&kubeconfig)
                .arg(format!("--admin-address=127.0.0.1:{admin_port}"))
                .args(&args.operator_args)
                .env(
                    "ARBITER_LOG",
                    std::env::var("ARBITER_LOG").unwrap_or_else(|_| "info".into()),
                )
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log_path)?)
                .spawn()
                .with_context(|| format!("starting {}", arbiter.display()))?;
            (
                Running::Arbiter(Process(child)),
                admin_port,
                Some(admin_port),
            )
        }
        (_, Some(dir)) => {
            let tuned = system == System::KueueTuned;
            let (manager, health) = kueue::start(&cluster, dir, &kubeconfig, tuned, &log_path)?;
            (Running::Kueue(manager), health, None)
        }
        (_, None) => bail!("Kueue is not built"),
    };
    let operator_pid = operator.pid();
    probe::wait_ready(ready_port).await?;
    eprintln!(
        "{} ready (pid {operator_pid}, log {}); {total} jobs to run",
        system.title(),
        log_path.display()
    );

    let index = plan
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| ((j.namespace.clone(), j.name.clone()), i))
        .collect();
    let seen = (0..total).map(|_| JobTimeline::default()).collect();
    let run: Shared = Arc::new(Mutex::new(Run {
        system,
        plan,
        pods: args.pods,
        seen,
        index,
        counters: Counters::default(),
    }));
    let jobs: Api<Job> = Api::all(admin.clone());
    let finishing = Arc::new(Semaphore::new(args.in_flight));
    let watching = {
        let (run, jobs, finishing) = (run.clone(), jobs.clone(), finishing.clone());
        let stream = watcher(jobs.clone(), watcher::Config::default().labels(CLASS_LABEL))
            .default_backoff()
            .applied_objects();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(job) => observe(&run, &jobs, &finishing, job),
                    Err(e) => eprintln!("watch: {e}"),
                }
            }
        })
    };
    let watching_pods = args.pods.then(|| {
        let run = run.clone();
        let pods: Api<Pod> = Api::all(admin.clone());
        let stream = watcher(pods, watcher::Config::default().labels(CLASS_LABEL))
            .default_backoff()
            .applied_objects();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(pod) => observe_pod(&run, pod),
                    Err(e) => eprintln!("pod watch: {e}"),
                }
            }
        })
    });
    let before = ProcessStat::snapshot(operator_pid);
    let api_before = ApiCounts::read(&admin).await?;
    let start = Instant::now();
    let start_ms = now_ms();
    let creating = tokio::spawn(create_all(
        run.clone(),
        admin.clone(),
        args.in_flight,
        start,
    ));

    let mut max_load = 0.0f64;
    let mut last_report = Instant::now();
    let timed_out = loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (created, admitted, finished, failed) = {
            let r = lock(&run);
            let c = &r.counters;
            (c.created, c.admitted, c.finished, c.create_failed)
        };
        let load = probe::load_average();
        max_load = max_load.max(load);
        if last_report.elapsed() >= Duration::from_secs(5) {
            eprintln!(
                "{:>6.1} s  created {created:>6}  admitted {admitted:>6}  finished {finished:>6} / {total}  load {load:.2}",
                start.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        if finished + failed >= total {
            break false;
        }
        if start.elapsed() > Duration::from_secs(args.timeout) {
            break true;
        }
    };
    // The run ends when the last Job was seen finished.
    let end_ms = lock(&run)
        .seen
        .iter()
        .filter_map(|s| s.finished_ms)
        .max()
        .filter(|_| !timed_out)
        .unwrap_or_else(now_ms);
    let wall = Duration::from_millis((end_ms - start_ms).max(0) as u64);
    let after = ProcessStat::snapshot(operator_pid);
    let api_after = ApiCounts::read(&admin).await?;
    let operator_metrics = match admin_port {
        Some(port) => probe::http_get(port, "/metrics").await,
        None => String::new(),
    };
    creating.abort();
    watching.abort();
    if let Some(w) = watching_pods {
        w.abort();
    }
    drop(operator);

    let figures = Figures::compute(
        &lock(&run),
        measure::Window {
            start_ms,
            end_ms,
            wall,
            timed_out,
            max_load,
        },
        &before,
        &after,
        &api_before,
        &api_after,
        &operator_metrics,
    );
    drop(cluster);
    Ok(figures)
}

/// The system under test, running; dropping it stops it.
enum Running {
    Arbiter(Process),
    Kueue(arbiter_testcluster::kueue::Manager),
}

impl Running {
    fn pid(&self) -> u32 {
        match self {
            Running::Arbiter(process) => process.0.id(),
            Running::Kueue(manager) => manager.pid(),
        }
    }
}
