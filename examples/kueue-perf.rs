//! Kueue's scheduler-performance shapes, as scenarios and as a measurement.
//!
//! `cargo run --release --example kueue-perf -- yaml baseline > baseline.yaml`
//! writes the scenario (also `large-scale`) for `arbiter simulate`;
//! `cargo run --release --example kueue-perf -- run baseline` simulates it and
//! prints the figures BENCHMARKS.md reports: scheduler CPU seconds, peak RSS,
//! cycles, minimum ClusterQueue usage and mean time to admission per class.
//! `run baseline --policies policies/` runs it with a policy bundle in force
//! (loaded as `arbiter simulate --policies` loads it); each policy applies to
//! the shape's workloads by its `match`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use arbiter_policy::sources::{self, PolicyChoice};
use arbiter_sim::generate::PerfScenario;
use arbiter_sim::policies;
use arbiter_sim::scenario;

/// The same allocator as the `arbiter` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn usage() -> ExitCode {
    eprintln!("usage: kueue-perf yaml|run baseline|large-scale [--policies DIR]");
    ExitCode::from(2)
}

/// Peak resident set size of this process (Linux `VmHWM`), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let shape = match args.get(1).map(String::as_str) {
        Some("baseline") => PerfScenario::baseline(),
        Some("large-scale") => PerfScenario::large_scale(),
        _ => return usage(),
    };
    match args.first().map(String::as_str) {
        Some("yaml") => {
            print!("{}", shape.to_yaml());
            ExitCode::SUCCESS
        }
        Some("run") => match args.get(2..).unwrap_or_default() {
            [] => run(&shape, None),
            [flag, dir] if flag == "--policies" => run(&shape, Some(PathBuf::from(dir))),
            _ => usage(),
        },
        _ => usage(),
    }
}

fn run(shape: &PerfScenario, bundle: Option<PathBuf>) -> ExitCode {
    let yaml = shape.to_yaml();
    let built = arbiter_core::model::load::load_str(&yaml, Path::new("kueue-perf.yaml"))
        .map_err(|e| e.to_string())
        .and_then(|loaded| scenario::build(loaded).map_err(|e| e.to_string()));
    let scenario = match built {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let choice = PolicyChoice {
        platform: bundle.map(|dir| vec![dir]),
        tenants: Vec::new(),
        none: false,
    };
    let mut engine = match sources::engine(&scenario.policies, &choice) {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let (report, _) = policies::run(&scenario, engine.as_mut(), false, &mut |_| {});
    let mut waits: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for w in &report.workloads {
        let class = w.name.split('-').next().unwrap_or("");
        if let Some(first) = w.history.iter().find(|h| h.event == "admitted") {
            let entry = waits.entry(class).or_default();
            entry.0 += first.at_seconds - w.arrival_seconds;
            entry.1 += 1;
        }
    }
    let min_usage = report
        .by_cluster_queue
        .values()
        .map(|cq| cq.mean_usage)
        .fold(f64::INFINITY, f64::min);
    println!("workloads              {}", report.summary.workloads);
    println!("finished               {}", report.summary.finished);
    println!("preemptions            {}", report.summary.preemptions);
    println!("cycles                 {}", report.scheduler.cycles);
    println!("scheduler CPU seconds  {:.3}", report.scheduler.cpu_seconds);
    if let Some(p) = &report.policies {
        println!(
            "policy evaluations     {} ({} errors)",
            p.evaluations, p.errors
        );
    }
    match peak_rss_mib() {
        Some(mib) => println!("peak RSS (process)     {mib:.0} MiB"),
        None => println!("peak RSS (process)     unknown (no /proc/self/status)"),
    }
    println!(
        "min ClusterQueue usage {:.1}% of nominal (time-averaged)",
        min_usage * 100.0
    );
    println!(
        "makespan               {:.1} s (virtual)",
        report.summary.makespan_seconds
    );
    for (class, (sum, n)) in &waits {
        println!(
            "mean time to admission {class:<7} {:.2} s (virtual, {n} workloads)",
            sum / *n as f64
        );
    }
    ExitCode::SUCCESS
}
