//! What `operator-perf` measures besides the Jobs: CPU and peak memory of
//! each process from /proc, the machine's CPU and load, the API server's
//! request counters, and the figures computed from all of it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use super::probe::{metric_sum, ApiCounts, ProcessStat};
use super::Run;

/// The run's time frame and the machine's state during it.
pub struct Window {
    pub start_ms: i64,
    pub end_ms: i64,
    pub wall: Duration,
    pub timed_out: bool,
    pub max_load: f64,
}

/// Everything the run reports.
pub struct Figures {
    out: Value,
}

/// Mean, median, 99th percentile and maximum of `values` (sorted here).
fn spread(values: &mut [f64]) -> Value {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = ((values.len() as f64 - 1.0) * q).round() as usize;
        values.get(i).copied().unwrap_or(0.0)
    };
    json!({
        "count": values.len(),
        "mean": values.iter().sum::<f64>() / values.len().max(1) as f64,
        "p50": at(0.5),
        "p99": at(0.99),
        "max": at(1.0),
    })
}

impl Figures {
    #[allow(clippy::too_many_arguments)]
    pub fn compute(
        run: &Run,
        window: Window,
        before: &ProcessStat,
        after: &ProcessStat,
        api_before: &ApiCounts,
        api_after: &ApiCounts,
        operator_metrics: &str,
    ) -> Figures {
        let c = &run.counters;
        let span_ms = (window.end_ms - window.start_ms).max(1) as f64;
        let mut held: BTreeMap<&str, f64> = BTreeMap::new();
        let mut waits: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
        let mut to_running: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let (mut admissions, mut evictions) = (0u64, 0u64);
        for (planned, seen) in run.plan.jobs.iter().zip(&run.seen) {
            let cq = run
                .plan
                .cluster_queue_of
                .get(&planned.namespace)
                .map_or("", String::as_str);
            *held.entry(cq).or_default() += seen.held_cpu_ms;
            admissions += seen.admissions as u64;
            evictions += seen.evictions as u64;
            if let (Some(sent), Some(admitted)) = (seen.sent_ms, seen.first_admitted_ms) {
                let w = waits.entry(planned.class.as_str()).or_default();
                w.0 += (admitted - sent).max(0) as f64 / 1000.0;
                w.1 += 1;
            }
            // Each pod against the admission it ran under: the last one
            // decided before it was seen running.
            for &running in seen.running_ms.values() {
                let under = seen.admitted_ats.iter().filter(|&&at| at <= running).max();
                if let Some(&admitted) = under {
                    to_running
                        .entry(planned.class.as_str())
                        .or_default()
                        .push((running - admitted) as f64 / 1000.0);
                }
            }
        }
        let usage: BTreeMap<&str, f64> = run
            .plan
            .nominal
            .iter()
            .map(|(cq, nominal)| {
                let cpu_ms = held.get(cq.as_str()).copied().unwrap_or(0.0);
                (cq.as_str(), cpu_ms / (span_ms * nominal))
            })
            .collect();
        let min_usage = usage.values().copied().fold(f64::INFINITY, f64::min);
        let cpu = |name: &str| after.cpu(name) - before.cpu(name);
        let ours: f64 = [
            "operator",
            "kube-apiserver",
            "etcd",
            "runner",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
        ]
        .iter()
        .map(|n| cpu(n))
        .sum();
        let machine = after.machine_busy - before.machine_busy;
        let total_requests = api_after.total() - api_before.total();
        let operator_requests = api_after.operator - api_before.operator;
        let runner_requests = (c.create_requests + c.finish_requests) as f64;
        let operator_admissions = metric_sum(operator_metrics, "arbiter_admitted_workloads_total");
        let mut by_request: Vec<(String, f64)> = api_after
            .by_request
            .iter()
            .map(|(k, v)| (k.clone(), v - api_before.by_request.get(k).unwrap_or(&0.0)))
            .filter(|(_, d)| *d > 0.0)
            .collect();
        by_request.sort_by(|a, b| b.1.total_cmp(&a.1));
        let wall = window.wall.as_secs_f64();
        let out = json!({
            "jobs": run.plan.jobs.len(),
            "created": c.created,
            "createFailed": c.create_failed,
            "admitted": c.admitted,
            "finished": c.finished,
            "timedOut": window.timed_out,
            "wallSeconds": wall,
            "admissions": admissions,
            "operatorAdmissions": operator_admissions,
            "evictions": evictions,
            "operatorEvictions": metric_sum(operator_metrics, "arbiter_evicted_workloads_total"),
            "admissionsPerSecond": admissions as f64 / wall,
            "maxCreationLagMs": c.max_lag_ms,
            // Only Arbiter records when it decided.
            "meanReleaseLagMs": (c.release_lag.1 > 0).then(|| c.release_lag.0 as f64 / c.release_lag.1 as f64),
            "meanFinishLagMs": c.finish_lag.0 as f64 / c.finish_lag.1.max(1) as f64,
            "minClusterQueueUsage": min_usage,
            "meanClusterQueueUsage": usage.values().sum::<f64>() / usage.len().max(1) as f64,
            "meanTimeToAdmissionSeconds": waits.iter().map(|(k, (s, n))| (k.to_string(), json!(s / *n as f64))).collect::<serde_json::Map<_, _>>(),
            "admissionToPodRunningSeconds": to_running.iter_mut().map(|(k, v)| (k.to_string(), spread(v))).collect::<serde_json::Map<_, _>>(),
            "cpuSeconds": {
                "operator": cpu("operator"), "kubeApiserver": cpu("kube-apiserver"),
                "etcd": cpu("etcd"), "runner": cpu("runner"),
                "kubeControllerManager": cpu("kube-controller-manager"),
                "kubeScheduler": cpu("kube-scheduler"), "kwok": cpu("kwok"),
                "machine": machine, "others": (machine - ours).max(0.0),
            },
            "peakRssMiB": {
                "operator": after.hwm("operator"), "kubeApiserver": after.hwm("kube-apiserver"),
                "etcd": after.hwm("etcd"), "runner": after.hwm("runner"),
                "kubeControllerManager": after.hwm("kube-controller-manager"),
                "kubeScheduler": after.hwm("kube-scheduler"), "kwok": after.hwm("kwok"),
            },
            "maxLoadAverage": window.max_load,
            "kubeApiserverCpuMsPerAdmission": cpu("kube-apiserver") * 1000.0 / (admissions as f64).max(1.0),
            "apiRequests": {
                "total": total_requests,
                "operator": operator_requests,
                "runner": runner_requests,
                "rest": total_requests - operator_requests - runner_requests,
                "operatorPerAdmission": operator_requests / (admissions as f64).max(1.0),
                "finishErrors": c.finish_errors,
                "byRequest": by_request.iter().take(16).map(|(k, v)| json!({"request": k, "count": v})).collect::<Vec<_>>(),
            },
        });
        Figures { out }
    }

    pub fn json(&self) -> &Value {
        &self.out
    }

    pub fn print(&self, shape: &str, scale: f64) {
        let o = &self.out;
        let f = |p: &str| o.pointer(p).and_then(Value::as_f64).unwrap_or(f64::NAN);
        println!("shape                        {shape} (scale {scale})");
        println!(
            "jobs                         {} created, {} admitted, {} finished{}",
            o["created"],
            o["admitted"],
            o["finished"],
            if o["timedOut"] == true {
                " (TIMED OUT)"
            } else {
                ""
            }
        );
        println!("wall time                    {:.1} s", f("/wallSeconds"));
        // Arbiter's own counts beside the runner's (Kueue's metrics need
        // an authenticated scrape, so none for it).
        let own = |key: &str| match o[key].as_f64() {
            Some(n) if n > 0.0 => format!(" ({n} by the operator's metrics)"),
            _ => String::new(),
        };
        println!(
            "admissions                   {}{}, {:.1} /s",
            o["admissions"],
            own("operatorAdmissions"),
            f("/admissionsPerSecond")
        );
        println!(
            "evictions                    {}{}",
            o["evictions"],
            own("operatorEvictions")
        );
        println!(
            "creation lag behind pace     {} ms at most",
            o["maxCreationLagMs"]
        );
        if !f("/meanReleaseLagMs").is_nan() {
            println!(
                "decision to release seen     {:.0} ms (mean)",
                f("/meanReleaseLagMs")
            );
        }
        println!(
            "runtime's end to Complete    {:.0} ms (mean, as the runner's watch saw it)",
            f("/meanFinishLagMs")
        );
        println!(
            "min ClusterQueue usage       {:.1}% of nominal (mean {:.1}%)",
            f("/minClusterQueueUsage") * 100.0,
            f("/meanClusterQueueUsage") * 100.0
        );
        for class in ["large", "medium", "small"] {
            let wait = f(&format!("/meanTimeToAdmissionSeconds/{class}"));
            println!("mean time to admission       {class:<7} {wait:.2} s");
        }
        for class in ["large", "medium", "small"] {
            let at = |q: &str| f(&format!("/admissionToPodRunningSeconds/{class}/{q}"));
            if at("mean").is_nan() {
                continue;
            }
            println!(
                "admission to pod running     {class:<7} {:.2} s mean, p50 {:.2} s, p99 {:.2} s, max {:.2} s",
                at("mean"),
                at("p50"),
                at("p99"),
                at("max")
            );
        }
        for (label, key) in [
            ("operator", "operator"),
            ("kube-apiserver", "kubeApiserver"),
            ("etcd", "etcd"),
            ("runner", "runner"),
            ("controller-mgr", "kubeControllerManager"),
            ("kube-scheduler", "kubeScheduler"),
            ("kwok", "kwok"),
        ] {
            if label != "operator" && f(&format!("/peakRssMiB/{key}")) == 0.0 {
                continue;
            }
            println!(
                "CPU s / peak RSS             {label:<15} {:>7.1} s  {:>6.0} MiB",
                f(&format!("/cpuSeconds/{key}")),
                f(&format!("/peakRssMiB/{key}"))
            );
        }
        println!(
            "machine CPU s                {:.1} (others: {:.1}); max load average {:.2}",
            f("/cpuSeconds/machine"),
            f("/cpuSeconds/others"),
            f("/maxLoadAverage")
        );
        println!(
            "API requests                 {:.0} in all: operator {:.0} ({:.2} per admission), runner {:.0}, rest {:.0}",
            f("/apiRequests/total"),
            f("/apiRequests/operator"),
            f("/apiRequests/operatorPerAdmission"),
            f("/apiRequests/runner"),
            f("/apiRequests/rest")
        );
        if let Some(rows) = o
            .pointer("/apiRequests/byRequest")
            .and_then(Value::as_array)
        {
            for row in rows {
                println!(
                    "  {:<40} {}",
                    row["request"].as_str().unwrap_or(""),
                    row["count"]
                );
            }
        }
    }
}

/// The systems' figures side by side, each peer's divided by the first's
/// (Arbiter's): above 1 means the peer took more (time, CPU, requests) or,
/// for rates and usage, did more.
pub fn print_side_by_side(systems: &[(&str, &Figures)]) {
    let Some((_, first)) = systems.first() else {
        return;
    };
    let rows: &[(&str, &str)] = &[
        ("wall time (s)", "/wallSeconds"),
        ("admissions / s", "/admissionsPerSecond"),
        (
            "mean time to admission, large (s)",
            "/meanTimeToAdmissionSeconds/large",
        ),
        (
            "mean time to admission, medium (s)",
            "/meanTimeToAdmissionSeconds/medium",
        ),
        (
            "mean time to admission, small (s)",
            "/meanTimeToAdmissionSeconds/small",
        ),
        ("min ClusterQueue usage", "/minClusterQueueUsage"),
        ("evictions", "/evictions"),
        ("system CPU (s)", "/cpuSeconds/operator"),
        ("system peak RSS (MiB)", "/peakRssMiB/operator"),
        (
            "system API requests / admission",
            "/apiRequests/operatorPerAdmission",
        ),
        ("kube-apiserver CPU (s)", "/cpuSeconds/kubeApiserver"),
        (
            "kube-apiserver CPU ms / admission",
            "/kubeApiserverCpuMsPerAdmission",
        ),
        ("etcd CPU (s)", "/cpuSeconds/etcd"),
        ("machine CPU (s)", "/cpuSeconds/machine"),
    ];
    let at = |f: &Figures, p: &str| f.out.pointer(p).and_then(Value::as_f64).unwrap_or(f64::NAN);
    println!();
    println!(
        "== side by side (ratio: the peer's figure divided by {}'s)",
        systems[0].0
    );
    for (i, (name, _)) in systems.iter().enumerate() {
        println!("  [{i}] {name}");
    }
    print!("{:<36}", "");
    for i in 0..systems.len() {
        print!("{:>12}", format!("[{i}]"));
    }
    for i in 1..systems.len() {
        print!("{:>12}", format!("[{i}]/[0]"));
    }
    println!();
    for (label, pointer) in rows {
        print!("{label:<36}");
        for (_, f) in systems {
            print!("{:>12.2}", at(f, pointer));
        }
        let base = at(first, pointer);
        for (_, f) in &systems[1..] {
            print!("{:>11.2}x", at(f, pointer) / base);
        }
        println!();
    }
}
