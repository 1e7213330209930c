//! `operator-scale pending`: fill, idle, churn at size, restart (see the
//! example's documentation).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use kube::api::{DynamicObject, GroupVersionKind, ListParams};

use super::*;

/// What the runner's Job watch keeps.
#[derive(Default)]
struct Watched {
    /// Released and not seen Complete.
    released: Mutex<HashSet<(String, String)>>,
    /// Finish released Jobs as soon as they are seen.
    churning: AtomicBool,
    finished: AtomicU64,
    /// Finish requests sent and not answered.
    finishing: AtomicU64,
}

/// The queue configuration: Namespaces, flavor, ClusterQueues (ten to a
/// Cohort), a LocalQueue per Namespace, three priority classes.
fn configuration(namespaces: usize, cluster_queues: usize, quota: u32) -> Vec<Value> {
    let mut config = vec![json!({
        "apiVersion": "arbiter.dev/v1alpha1", "kind": "ResourceFlavor",
        "metadata": {"name": "default"}, "spec": {}})];
    for priority in [50, 100, 200] {
        config.push(json!({
            "apiVersion": "arbiter.dev/v1alpha1", "kind": "WorkloadPriorityClass",
            "metadata": {"name": format!("p{priority}")}, "value": priority}));
    }
    for q in 0..cluster_queues {
        config.push(json!({
            "apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue",
            "metadata": {"name": format!("cq-{q:03}")},
            "spec": {"cohort": format!("cohort-{:02}", q / 10), "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [
                    {"name": "cpu", "nominalQuota": quota.to_string()}]}]}]}}));
    }
    for n in 0..namespaces {
        let namespace = format!("ns-{n:04}");
        config.push(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        );
        config.push(json!({
            "apiVersion": "arbiter.dev/v1alpha1", "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": namespace},
            "spec": {"clusterQueue": format!("cq-{:03}", n * cluster_queues / namespaces)}}));
    }
    config
}

/// Watches the runner's Jobs: keeps the released ones, finishes them
/// while churning, counts the finished.
fn watch(admin: &Client, watched: Arc<Watched>, requests: Arc<Semaphore>) {
    let client = admin.clone();
    let stream = runner_jobs(admin);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(job) = stream.next().await {
            let k = key(&job);
            if is_complete(&job) {
                if watched.released.lock().unwrap().remove(&k) {
                    watched.finished.fetch_add(1, Ordering::Relaxed);
                }
                continue;
            }
            let newly = released(&job) && watched.released.lock().unwrap().insert(k.clone());
            if !released(&job) {
                watched.released.lock().unwrap().remove(&k);
            }
            if newly && watched.churning.load(Ordering::Relaxed) {
                finish(&client, &watched, &requests, k);
            }
        }
    });
}

/// Marks one released Job Complete, in the background.
fn finish(client: &Client, watched: &Arc<Watched>, requests: &Arc<Semaphore>, k: (String, String)) {
    let (client, watched, requests) = (client.clone(), watched.clone(), requests.clone());
    watched.finishing.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        if let Ok(_permit) = requests.acquire().await {
            complete(&client, &k.0, &k.1).await;
        }
        watched.finishing.fetch_sub(1, Ordering::Relaxed);
    });
}

/// Starts finishing every released Job, those already released too.
fn churn_on(client: &Client, watched: &Arc<Watched>, requests: &Arc<Semaphore>) {
    watched.churning.store(true, Ordering::Relaxed);
    let now: Vec<_> = watched.released.lock().unwrap().iter().cloned().collect();
    for k in now {
        finish(client, watched, requests, k);
    }
}

/// Stops finishing Jobs and waits until the operator has caught up: no
/// finish request in flight, nothing owed to the API, and the same counts
/// two seconds apart.
async fn churn_off(operator: &Operator, watched: &Watched) -> anyhow::Result<Scrape> {
    watched.churning.store(false, Ordering::Relaxed);
    let mut last: Option<Scrape> = None;
    let since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = Scrape::read(operator.port).await.unwrap_or_default();
        let steady = last
            .as_ref()
            .is_some_and(|l| l.known() == now.known() && l.admitted_total == now.admitted_total);
        if steady && now.backlog == 0.0 && watched.finishing.load(Ordering::Relaxed) == 0 {
            return Ok(now);
        }
        if since.elapsed() > Duration::from_secs(600) {
            bail!("the operator did not settle within 10 minutes of the churn stopping");
        }
        last = Some(now);
    }
}

/// Workloads in the API (a paged LIST).
async fn workloads_in_api(admin: &Client) -> anyhow::Result<usize> {
    let gvk = GroupVersionKind::gvk("arbiter.dev", "v1alpha1", "Workload");
    let (resource, _) = kube::discovery::pinned_kind(admin, &gvk).await?;
    let api: Api<DynamicObject> = Api::all_with(admin.clone(), &resource);
    let mut count = 0;
    let mut params = ListParams::default().limit(1000);
    loop {
        let page = api.list_metadata(&params).await?;
        count += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => return Ok(count),
        }
    }
}

pub async fn run(args: &Args) -> anyhow::Result<Value> {
    let Mode::Pending {
        jobs,
        namespaces,
        cluster_queues,
        quota,
        idle,
        churn,
    } = args.mode
    else {
        unreachable!("pending::run runs the pending mode")
    };
    if jobs == 0 || cluster_queues == 0 || namespaces < cluster_queues {
        bail!("--jobs and --cluster-queues must be at least 1, and --namespaces at least --cluster-queues");
    }
    let (cluster, admin, kubeconfig) =
        cluster_with(&configuration(namespaces, cluster_queues, quota)).await?;
    let logs = log_dir(args, &cluster)?;
    let operator = start_operator(args, &kubeconfig, &logs.join("operator.log"))?;
    until(&operator, "leading", Duration::from_secs(120), |s| {
        s.leader == 1.0
    })
    .await?;
    eprintln!(
        "operator leading (pid {}, log {}); creating {jobs} Jobs in {namespaces} Namespaces, {cluster_queues} ClusterQueues",
        operator.pid(),
        logs.join("operator.log").display()
    );

    let watched = Arc::new(Watched::default());
    let requests = Arc::new(Semaphore::new(args.in_flight));
    watch(&admin, watched.clone(), requests.clone());

    // 1. Fill.
    let stat_start = ProcessStat::snapshot(operator.pid());
    let api_start = ApiCounts::read(&admin).await?;
    let started = Instant::now();
    let created = Arc::new(AtomicU64::new(0));
    let mut creating = Vec::with_capacity(jobs);
    for k in 0..jobs {
        let namespace = format!("ns-{:04}", k % namespaces);
        let name = format!("job-{}", k / namespaces);
        let priority = ["p50", "p100", "p200"][k % 3];
        let object = job(&namespace, &name, "pending", "1", priority);
        let permit = requests.clone().acquire_owned().await?;
        let (client, count) = (admin.clone(), created.clone());
        creating.push(tokio::spawn(async move {
            let _permit = permit;
            if create(&client, &object).await {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
        if k % 10_000 == 9_999 {
            eprintln!(
                "{:>6.1} s  created {:>6} / {jobs}",
                started.elapsed().as_secs_f64(),
                created.load(Ordering::Relaxed)
            );
        }
    }
    for task in creating {
        task.await?;
    }
    let created = created.load(Ordering::Relaxed) as f64;
    let created_in = started.elapsed();
    eprintln!(
        "created {created} Jobs in {:.1} s",
        created_in.as_secs_f64()
    );
    until(
        &operator,
        "every Job known",
        Duration::from_secs(3600),
        |s| s.known() >= created,
    )
    .await?;
    let known_in = started.elapsed();
    until(
        &operator,
        "every Workload written",
        Duration::from_secs(3600),
        |s| s.backlog == 0.0,
    )
    .await?;
    let written_in = started.elapsed();
    let workloads = workloads_in_api(&admin).await?;
    let stat_filled = ProcessStat::snapshot(operator.pid());
    let api_filled = ApiCounts::read(&admin).await?;
    let filled = Scrape::read(operator.port).await.unwrap_or_default();
    eprintln!(
        "known in {:.1} s, Workloads written in {:.1} s ({workloads} in the API); operator RSS {:.0} MiB",
        known_in.as_secs_f64(),
        written_in.as_secs_f64(),
        stat_filled.rss("operator")
    );
    let fill = json!({
        "jobsCreated": created,
        "createdSeconds": created_in.as_secs_f64(),
        "createsPerSecond": created / created_in.as_secs_f64(),
        "allKnownSeconds": known_in.as_secs_f64(),
        "allWorkloadsWrittenSeconds": written_in.as_secs_f64(),
        "workloadsInApi": workloads,
        "pending": filled.pending,
        "admittedActive": filled.admitted_active,
        "operatorCpuSeconds": stat_filled.cpu("operator") - stat_start.cpu("operator"),
        "operator": mib(&stat_filled, "operator"),
        "kubeApiserver": mib(&stat_filled, "kube-apiserver"),
        "etcd": mib(&stat_filled, "etcd"),
        "passes": passes_between(&Scrape::default(), &filled),
        "apiRequests": requests_between(&api_start, &api_filled),
    });

    // 2. Idle at size.
    eprintln!("idle for {idle} s");
    let (stat_before, before) = (stat_filled, filled);
    tokio::time::sleep(Duration::from_secs(idle)).await;
    let stat_idle = ProcessStat::snapshot(operator.pid());
    let after_idle = Scrape::read(operator.port).await.unwrap_or_default();
    let idle_cpu = stat_idle.cpu("operator") - stat_before.cpu("operator");
    let idle_figures = json!({
        "seconds": idle,
        "operatorCpuSeconds": idle_cpu,
        "operatorCpuPercent": 100.0 * idle_cpu / idle as f64,
        "passes": passes_between(&before, &after_idle),
        "operator": mib(&stat_idle, "operator"),
    });

    // 3. Churn at size.
    eprintln!("churning for {churn} s");
    let api_churn = ApiCounts::read(&admin).await?;
    churn_on(&admin, &watched, &requests);
    let finished_before = watched.finished.load(Ordering::Relaxed);
    let churn_started = Instant::now();
    // Until `churn` seconds passed, or half the Jobs are left waiting (so
    // the restart still has a full queue to read back).
    while churn_started.elapsed() < Duration::from_secs(churn) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = Scrape::read(operator.port).await.unwrap_or_default();
        if now.pending <= created / 2.0 {
            break;
        }
    }
    let churned = churn_started.elapsed().as_secs_f64();
    let stat_churn = ProcessStat::snapshot(operator.pid());
    let after_churn = Scrape::read(operator.port).await.unwrap_or_default();
    let api_churned = ApiCounts::read(&admin).await?;
    let admissions = after_churn.admitted_total - after_idle.admitted_total;
    let churn_cpu = stat_churn.cpu("operator") - stat_idle.cpu("operator");
    let passes = after_churn.passes - after_idle.passes;
    let churn_figures = json!({
        "seconds": churned,
        "admissions": admissions,
        "admissionsPerSecond": admissions / churned,
        "finishedByRunner": watched.finished.load(Ordering::Relaxed) - finished_before,
        "operatorCpuSeconds": churn_cpu,
        "operatorCpuMsPerPass": if passes > 0.0 { 1000.0 * churn_cpu / passes } else { 0.0 },
        "operatorCpuMsPerAdmission": if admissions > 0.0 { 1000.0 * churn_cpu / admissions } else { 0.0 },
        "passes": passes_between(&after_idle, &after_churn),
        "pendingAtEnd": after_churn.pending,
        "operator": mib(&stat_churn, "operator"),
        "apiRequests": requests_between(&api_churn, &api_churned),
    });
    eprintln!("{admissions} admissions in {churned:.1} s; settling");
    let settled = churn_off(&operator, &watched).await?;

    // 4. Restart.
    eprintln!(
        "restarting the operator (known {}, admitted {})",
        settled.known(),
        settled.admitted_active
    );
    let stat_old = ProcessStat::snapshot(operator.pid());
    let stopped_in = operator.stop().await?;
    let api_restart = ApiCounts::read(&admin).await?;
    let operator = start_operator(args, &kubeconfig, &logs.join("operator-restarted.log"))?;
    let stat_new_start = ProcessStat::snapshot(operator.pid());
    let ready_in = {
        let since = Instant::now();
        while probe::http_get(operator.port, "/readyz").await.is_empty() {
            if since.elapsed() > Duration::from_secs(1800) {
                bail!("the restarted operator was not ready within 30 minutes");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        operator.started.elapsed()
    };
    until(&operator, "leading again", Duration::from_secs(600), |s| {
        s.leader == 1.0
    })
    .await?;
    let leading_in = operator.started.elapsed();
    until(
        &operator,
        "every Job known again",
        Duration::from_secs(1800),
        |s| s.known() == settled.known() && s.admitted_active == settled.admitted_active,
    )
    .await?;
    let restored_in = operator.started.elapsed();
    let stat_restored = ProcessStat::snapshot(operator.pid());
    let api_restored = ApiCounts::read(&admin).await?;
    let restored = Scrape::read(operator.port).await.unwrap_or_default();
    churn_on(&admin, &watched, &requests);
    let first_admission_in = if restored.pending > 0.0 {
        until(
            &operator,
            "a first admission after the restart",
            Duration::from_secs(600),
            |s| s.admitted_total > restored.admitted_total,
        )
        .await?;
        Some(operator.started.elapsed().as_secs_f64())
    } else {
        None
    };
    watched.churning.store(false, Ordering::Relaxed);
    eprintln!(
        "restarted: ready {:.1} s, leading {:.1} s, every Job known {:.1} s, first admission {first_admission_in:?} s",
        ready_in.as_secs_f64(),
        leading_in.as_secs_f64(),
        restored_in.as_secs_f64(),
    );
    let restart = json!({
        "stoppedSeconds": stopped_in.as_secs_f64(),
        "oldOperator": mib(&stat_old, "operator"),
        "readySeconds": ready_in.as_secs_f64(),
        "leadingSeconds": leading_in.as_secs_f64(),
        "allKnownSeconds": restored_in.as_secs_f64(),
        "firstAdmissionSeconds": first_admission_in,
        "known": restored.known(),
        "admittedActive": restored.admitted_active,
        "operatorCpuSecondsToRestore": stat_restored.cpu("operator") - stat_new_start.cpu("operator"),
        "operator": mib(&stat_restored, "operator"),
        "apiRequests": requests_between(&api_restart, &api_restored),
    });
    drop(operator);
    drop(cluster);
    Ok(json!({
        "mode": "pending",
        "machine": machine(),
        "jobs": jobs, "namespaces": namespaces, "clusterQueues": cluster_queues, "quotaCores": quota,
        "fill": fill,
        "idle": idle_figures,
        "churn": churn_figures,
        "restart": restart,
    }))
}
