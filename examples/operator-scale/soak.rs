//! `operator-scale soak`: the baseline's churn, closed loop, sampled every
//! window (see the example's documentation).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::*;

/// One Job the runner has created and not yet seen Complete.
struct Live {
    generator: usize,
    /// The release in force (a number of the runner's), if released.
    release: Option<u64>,
}

#[derive(Default)]
struct Soak {
    /// Unfinished Jobs per generator.
    outstanding: Vec<AtomicU64>,
    live: Mutex<HashMap<(String, String), Live>>,
    releases: AtomicU64,
    created: AtomicU64,
    completed: AtomicU64,
    deleted: AtomicU64,
    failed_requests: AtomicU64,
    stop: AtomicBool,
}

/// Generator `index` creates a Job every `interval` while it has fewer
/// than `cap` unfinished.
fn generate(
    admin: &Client,
    soak: &Arc<Soak>,
    requests: &Arc<Semaphore>,
    index: usize,
    generator: shape::Generator,
    interval: Duration,
    cap: u64,
) {
    let (admin, soak, requests) = (admin.clone(), soak.clone(), requests.clone());
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sequence = 0u64;
        while !soak.stop.load(Ordering::Relaxed) {
            ticker.tick().await;
            if soak.outstanding[index].load(Ordering::Relaxed) >= cap {
                continue;
            }
            sequence += 1;
            let name = format!("{}-{sequence}", generator.name);
            soak.live.lock().unwrap().insert(
                (generator.namespace.clone(), name.clone()),
                Live {
                    generator: index,
                    release: None,
                },
            );
            soak.outstanding[index].fetch_add(1, Ordering::Relaxed);
            let object = job(
                &generator.namespace,
                &name,
                &generator.name,
                &generator.cpu,
                &generator.priority_class,
            );
            let Ok(permit) = requests.clone().acquire_owned().await else {
                return;
            };
            let (admin, soak) = (admin.clone(), soak.clone());
            tokio::spawn(async move {
                let _permit = permit;
                if create(&admin, &object).await {
                    soak.created.fetch_add(1, Ordering::Relaxed);
                } else {
                    soak.failed_requests.fetch_add(1, Ordering::Relaxed);
                    let k = (
                        object["metadata"]["namespace"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        object["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    );
                    if soak.live.lock().unwrap().remove(&k).is_some() {
                        soak.outstanding[index].fetch_sub(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
}

/// Watches the runner's Jobs: a release is finished `runtime` later
/// unless held again meanwhile; a Complete Job is deleted.
fn watch(admin: &Client, soak: Arc<Soak>, requests: Arc<Semaphore>, runtimes: Vec<Duration>) {
    let client = admin.clone();
    let stream = runner_jobs(admin);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(job) = stream.next().await {
            let k = key(&job);
            if is_complete(&job) {
                let Some(live) = soak.live.lock().unwrap().remove(&k) else {
                    continue;
                };
                soak.outstanding[live.generator].fetch_sub(1, Ordering::Relaxed);
                soak.completed.fetch_add(1, Ordering::Relaxed);
                let (client, soak, requests) = (client.clone(), soak.clone(), requests.clone());
                tokio::spawn(async move {
                    let Ok(_permit) = requests.acquire().await else {
                        return;
                    };
                    let api: Api<Job> = Api::namespaced(client, &k.0);
                    match api.delete(&k.1, &DeleteParams::background()).await {
                        Ok(_) => soak.deleted.fetch_add(1, Ordering::Relaxed),
                        Err(_) => soak.failed_requests.fetch_add(1, Ordering::Relaxed),
                    };
                });
                continue;
            }
            let is_released = released(&job);
            let start = {
                let mut live = soak.live.lock().unwrap();
                let Some(entry) = live.get_mut(&k) else {
                    continue;
                };
                match (is_released, entry.release) {
                    (true, None) => {
                        let release = soak.releases.fetch_add(1, Ordering::Relaxed);
                        entry.release = Some(release);
                        Some((release, runtimes[entry.generator]))
                    }
                    (false, Some(_)) => {
                        entry.release = None;
                        None
                    }
                    _ => None,
                }
            };
            let Some((release, runtime)) = start else {
                continue;
            };
            let (client, soak, requests) = (client.clone(), soak.clone(), requests.clone());
            tokio::spawn(async move {
                tokio::time::sleep(runtime).await;
                let still = soak
                    .live
                    .lock()
                    .unwrap()
                    .get(&k)
                    .is_some_and(|l| l.release == Some(release));
                if !still {
                    return;
                }
                let Ok(_permit) = requests.acquire().await else {
                    return;
                };
                if !complete(&client, &k.0, &k.1).await {
                    soak.failed_requests.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

pub async fn run(args: &Args) -> anyhow::Result<Value> {
    let Mode::Soak {
        admissions,
        backlog,
        speed,
        window,
        max_minutes,
        quota_factor,
    } = args.mode
    else {
        unreachable!("soak::run runs the soak mode")
    };
    if !(backlog > 0.0 && speed > 0.0 && window > 0 && quota_factor > 0) {
        bail!("--backlog, --speed, --window and --quota-factor must be positive");
    }
    let shape = PerfScenario::baseline();
    let mut plan = shape::plan(&shape.to_yaml())?;
    for object in plan
        .config
        .iter_mut()
        .filter(|o| o["kind"] == "ClusterQueue")
    {
        for resource in object
            .pointer_mut("/spec/resourceGroups/0/flavors/0/resources")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for field in ["nominalQuota", "borrowingLimit"] {
                if let Some(n) = resource[field].as_str().and_then(|q| q.parse::<u64>().ok()) {
                    resource[field] = json!((n * quota_factor as u64).to_string());
                }
            }
        }
    }
    let mut config: Vec<Value> = plan
        .namespaces
        .iter()
        .map(|ns| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .collect();
    config.extend(plan.config.iter().cloned());
    let (cluster, admin, kubeconfig) = cluster_with(&config).await?;
    let logs = log_dir(args, &cluster)?;
    let operator = start_operator(args, &kubeconfig, &logs.join("operator.log"))?;
    until(&operator, "leading", Duration::from_secs(120), |s| {
        s.leader == 1.0
    })
    .await?;
    eprintln!(
        "operator leading (pid {}, log {}); soaking until {admissions} admissions",
        operator.pid(),
        logs.join("operator.log").display()
    );

    let soak = Arc::new(Soak {
        outstanding: plan.generators.iter().map(|_| AtomicU64::new(0)).collect(),
        ..Soak::default()
    });
    let requests = Arc::new(Semaphore::new(args.in_flight));
    let runtimes = plan
        .generators
        .iter()
        .map(|g| g.runtime.div_f64(speed))
        .collect();
    watch(&admin, soak.clone(), requests.clone(), runtimes);
    for (index, generator) in plan.generators.iter().enumerate() {
        let cap = ((generator.count as f64 * backlog).round() as u64).max(1);
        let interval = generator
            .interval
            .div_f64(speed)
            .max(Duration::from_millis(1));
        generate(
            &admin,
            &soak,
            &requests,
            index,
            generator.clone(),
            interval,
            cap,
        );
    }

    let started = Instant::now();
    let deadline = max_minutes.map(|m| Duration::from_secs(m * 60));
    let mut windows: Vec<Value> = Vec::new();
    let mut last_scrape = Scrape::read(operator.port).await.unwrap_or_default();
    let mut last_stat = ProcessStat::snapshot(operator.pid());
    let mut last_at = Instant::now();
    let ended_by = loop {
        tokio::time::sleep(Duration::from_secs(window)).await;
        let Some(now) = Scrape::read(operator.port).await else {
            bail!("the operator stopped answering on its admin port; see its log");
        };
        let stat = ProcessStat::snapshot(operator.pid());
        let seconds = last_at.elapsed().as_secs_f64();
        let admitted = now.admitted_total - last_scrape.admitted_total;
        let cpu = stat.cpu("operator") - last_stat.cpu("operator");
        let passes = now.passes - last_scrape.passes;
        let sample = json!({
            "elapsedSeconds": started.elapsed().as_secs_f64(),
            "admissions": now.admitted_total,
            "admissionsPerSecond": admitted / seconds,
            "operatorRssMiB": stat.rss("operator"),
            "operatorCpuPercent": 100.0 * cpu / seconds,
            "operatorCpuMsPerAdmission": if admitted > 0.0 { 1000.0 * cpu / admitted } else { 0.0 },
            "operatorCpuMsPerPass": if passes > 0.0 { 1000.0 * cpu / passes } else { 0.0 },
            "passes": passes_between(&last_scrape, &now),
            "pending": now.pending,
            "admittedActive": now.admitted_active,
            "publishBacklog": now.backlog,
            "kubeApiserverRssMiB": stat.rss("kube-apiserver"),
            "etcdRssMiB": stat.rss("etcd"),
            "runner": {
                "created": soak.created.load(Ordering::Relaxed),
                "completed": soak.completed.load(Ordering::Relaxed),
                "deleted": soak.deleted.load(Ordering::Relaxed),
                "unfinished": soak.live.lock().unwrap().len(),
                "failedRequests": soak.failed_requests.load(Ordering::Relaxed),
            },
        });
        eprintln!(
            "{:>7.0} s  admissions {:>8}  {:>6.1}/s  operator RSS {:>6.1} MiB  CPU {:>5.1} %  {:>6.3} ms/admission  {:>6.3} ms/pass  pass {:>6.2} ms  pending {:>5}  API server {:>6.0} MiB  etcd {:>6.0} MiB",
            started.elapsed().as_secs_f64(),
            now.admitted_total,
            admitted / seconds,
            stat.rss("operator"),
            100.0 * cpu / seconds,
            sample["operatorCpuMsPerAdmission"].as_f64().unwrap_or(0.0),
            sample["operatorCpuMsPerPass"].as_f64().unwrap_or(0.0),
            sample["passes"]["meanMs"].as_f64().unwrap_or(0.0),
            now.pending,
            stat.rss("kube-apiserver"),
            stat.rss("etcd"),
        );
        windows.push(sample);
        (last_scrape, last_stat, last_at) = (now, stat, Instant::now());
        if last_scrape.admitted_total >= admissions as f64 {
            break "admissions";
        }
        if deadline.is_some_and(|d| started.elapsed() >= d) {
            break "max-minutes";
        }
    };
    soak.stop.store(true, Ordering::Relaxed);

    // Early windows (after two of warm-up) against the last three.
    let figure = |w: &Value, name: &str| w[name].as_f64().unwrap_or(0.0);
    let compare = |name: &str| {
        let early: Vec<f64> = windows
            .iter()
            .skip(2)
            .take(3)
            .map(|w| figure(w, name))
            .collect();
        let late: Vec<f64> = windows
            .iter()
            .rev()
            .take(3)
            .map(|w| figure(w, name))
            .collect();
        let (early, late) = (mean(&early), mean(&late));
        json!({"early": early, "late": late,
               "changePercent": if early > 0.0 { 100.0 * (late - early) / early } else { 0.0 }})
    };
    let total_seconds = started.elapsed().as_secs_f64();
    let summary = json!({
        "endedBy": ended_by,
        "seconds": total_seconds,
        "admissions": last_scrape.admitted_total,
        "admissionsPerSecond": last_scrape.admitted_total / total_seconds,
        "operatorPeakMiB": last_stat.hwm("operator"),
        "operatorCpuSeconds": last_stat.cpu("operator"),
        "operatorRssMiB": compare("operatorRssMiB"),
        "operatorCpuMsPerAdmission": compare("operatorCpuMsPerAdmission"),
        "operatorCpuMsPerPass": compare("operatorCpuMsPerPass"),
        "kubeApiserverRssMiB": compare("kubeApiserverRssMiB"),
        "etcdRssMiB": compare("etcdRssMiB"),
    });
    eprintln!("{}", serde_json::to_string_pretty(&summary)?);
    drop(operator);
    drop(cluster);
    Ok(json!({
        "mode": "soak",
        "machine": machine(),
        "admissionsTarget": admissions, "backlog": backlog, "speed": speed,
        "quotaFactor": quota_factor, "windowSeconds": window,
        "summary": summary,
        "windows": windows,
    }))
}
