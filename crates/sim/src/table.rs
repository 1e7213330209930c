//! The simulation report for people: summary, per ClusterQueue, per flavor,
//! and the workloads (all of them for small runs; otherwise those not
//! finished, with their reasons). Pure text rendering.

use std::fmt::Write;

use super::report::{PoliciesReport, Report, SnapshotReport, WorkloadReport, WorkloadState};
use arbiter_core::model::sim_api::RUNTIME_ANNOTATION;
use arbiter_policy::bundle::Hook;
use arbiter_policy::engine::{MAX_DECISIONS_PER_POLICY, MAX_TENANT_DECISIONS_PER_POLICY};

/// Runs with at most this many workloads list every one.
const LIST_ALL_UP_TO: usize = 60;
/// Otherwise at most this many unfinished workloads are listed.
const LIST_UNFINISHED: usize = 25;

/// The whole report as text: its sections in order.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    write_summary(&mut out, report);
    if let Some(p) = &report.policies {
        write_policies(&mut out, p);
    }
    let _ = writeln!(out);
    write_cluster_queues(&mut out, report);
    let _ = writeln!(out);
    write_flavors(&mut out, report);
    let _ = writeln!(out);
    write_workloads(&mut out, &report.workloads);
    out
}

/// The run in two lines (what happened, how long workloads waited), and
/// what a run from a live cluster started from.
fn write_summary(out: &mut String, report: &Report) {
    let s = &report.summary;
    let _ = writeln!(
        out,
        "Simulated {} workloads over {:.0}s (virtual): {} admitted at some point; at the end {} finished, {} running, {} pending{}, {} rejected; {} preemptions; {} cycles",
        s.workloads,
        s.end_seconds,
        s.admitted,
        s.finished,
        s.running_at_end,
        s.pending_at_end,
        if s.inadmissible > 0 {
            format!(" ({} can never be admitted)", s.inadmissible)
        } else {
            String::new()
        },
        s.rejected,
        s.preemptions,
        report.scheduler.cycles
    );
    let _ = writeln!(
        out,
        "Wait (of those that can be admitted): mean {:.1}s, p50 {:.1}s, p95 {:.1}s, max {:.1}s; makespan {:.0}s; Jain fairness {:.3}",
        s.mean_wait_seconds, s.p50_wait_seconds, s.p95_wait_seconds, s.max_wait_seconds, s.makespan_seconds, s.jain_fairness_index
    );
    if let Some(snapshot) = &report.snapshot {
        let _ = writeln!(out, "{}", snapshot_line(snapshot));
    }
}

/// The policy bundles the run used, a table of every policy's
/// evaluations, and the totals (with what the decision log left out).
fn write_policies(out: &mut String, p: &PoliciesReport) {
    let _ = writeln!(out);
    for b in &p.bundles {
        let _ = writeln!(
            out,
            "Policies: bundle {} {} ({}){} from {}",
            b.name,
            b.version,
            b.digest.get(..12).unwrap_or(&b.digest),
            b.tenant
                .as_ref()
                .map(|t| format!(", tenant {t}"))
                .unwrap_or_default(),
            b.source
        );
    }
    let mut rows = vec![vec![
        "POLICY".to_string(),
        "HOOK".into(),
        "LANG".into(),
        "EVALUATIONS".into(),
        "REUSED".into(),
        "ERRORS".into(),
        "MEAN µs".into(),
    ]];
    for s in &p.by_policy {
        let errors: u64 = s.errors.values().sum();
        rows.push(vec![
            format!("{}/{}", s.bundle, s.policy),
            s.hook.clone(),
            s.language.clone(),
            s.evaluations.to_string(),
            s.reused.to_string(),
            errors.to_string(),
            format!("{:.1}", s.total_micros / s.evaluations.max(1) as f64),
        ]);
    }
    let _ = writeln!(out);
    table(out, &rows);
    let denials: u64 = p
        .decisions
        .iter()
        .filter(|d| d.hook == Hook::Admission && d.result == "deny")
        .map(|d| 1 + d.repeats)
        .sum();
    let _ = writeln!(
        out,
        "{} evaluations, {} errors, {} admission denials (every decision: --decisions FILE.jsonl)",
        p.evaluations, p.errors, denials
    );
    if p.decisions_dropped > 0 {
        let _ = writeln!(
            out,
            "{} decisions not kept in the decision log: a policy keeps at most {} entries ({} in a tenant bundle), identical repeats counted",
            p.decisions_dropped, MAX_DECISIONS_PER_POLICY, MAX_TENANT_DECISIONS_PER_POLICY
        );
    }
}

/// One row per ClusterQueue: admissions, what still waits, preemptions,
/// mean wait and usage.
fn write_cluster_queues(out: &mut String, report: &Report) {
    let mut rows = vec![vec![
        "CLUSTERQUEUE".to_string(),
        "ADMITTED".into(),
        "PENDING".into(),
        "PREEMPTED".into(),
        "MEAN WAIT".into(),
        "MEAN USAGE".into(),
    ]];
    for (name, cq) in &report.by_cluster_queue {
        rows.push(vec![
            name.clone(),
            cq.admitted.to_string(),
            match cq.inadmissible {
                0 => cq.pending_at_end.to_string(),
                n => format!("{} ({n} never admissible)", cq.pending_at_end),
            },
            cq.preempted.to_string(),
            format!("{:.1}s", cq.mean_wait_seconds),
            format!("{:.0}%", cq.mean_usage * 100.0),
        ]);
    }
    table(out, &rows);
}

/// One row per flavor: its utilization, of which resource, and its peak
/// node count when it scales.
fn write_flavors(out: &mut String, report: &Report) {
    let mut rows = vec![vec![
        "FLAVOR".to_string(),
        "UTILIZATION".into(),
        "OF".into(),
        "PEAK NODES".into(),
    ]];
    for (name, f) in &report.by_flavor {
        rows.push(vec![
            name.clone(),
            format!("{:.0}%", f.utilization * 100.0),
            f.resource.clone(),
            if f.peak_nodes == 0 {
                "-".into()
            } else {
                f.peak_nodes.to_string()
            },
        ]);
    }
    table(out, &rows);
}

/// The workloads: every one for a small run, otherwise the first
/// unfinished ones and how many more there are.
fn write_workloads(out: &mut String, workloads: &[WorkloadReport]) {
    let all = workloads.len() <= LIST_ALL_UP_TO;
    let mut rows = vec![vec![
        "WORKLOAD".to_string(),
        "CLUSTERQUEUE".into(),
        "PRIO".into(),
        "ARRIVED".into(),
        "ADMITTED".into(),
        "WAIT".into(),
        "FLAVORS".into(),
        "STATE".into(),
        "REASON".into(),
    ]];
    let mut hidden = 0;
    for w in workloads {
        if !all && (w.state == WorkloadState::Finished || rows.len() > LIST_UNFINISHED) {
            hidden += usize::from(w.state != WorkloadState::Finished);
            continue;
        }
        rows.push(workload_row(w));
    }
    if rows.len() > 1 {
        if !all {
            let _ = writeln!(out, "Unfinished workloads:");
        }
        table(out, &rows);
    }
    if hidden > 0 {
        let _ = writeln!(
            out,
            "… and {hidden} more unfinished; see --report for every workload and its history"
        );
    }
}

/// One workload's row of the workloads table.
fn workload_row(w: &WorkloadReport) -> Vec<String> {
    let flavors: Vec<String> = w
        .flavors
        .iter()
        .map(|(ps, res)| {
            let mut fl: Vec<&str> = res.values().map(String::as_str).collect();
            fl.dedup();
            format!("{ps}:{}", fl.join("+"))
        })
        .collect();
    let evictions = if w.evictions > 0 {
        format!(" ({} evictions)", w.evictions)
    } else {
        String::new()
    };
    vec![
        format!("{} {}/{}", w.kind, w.namespace, w.name),
        w.cluster_queue.clone().unwrap_or_else(|| "-".into()),
        w.priority.map_or("-".into(), |p| p.to_string()),
        format!("{:.0}s", w.arrival_seconds),
        w.admitted_seconds
            .map_or("-".into(), |t| format!("{t:.0}s")),
        format!("{:.0}s", w.wait_seconds),
        if flavors.is_empty() {
            "-".into()
        } else {
            flavors.join(" ")
        },
        format!("{}{evictions}", w.state),
        w.reason.clone(),
    ]
}

/// What a run from a live cluster started from, in one line.
pub fn snapshot_line(s: &SnapshotReport) -> String {
    let r = &s.runtimes;
    format!(
        "Replayed from the cluster as read at {} (time 0): {} running, {} pending; runtimes: {} from {RUNTIME_ANNOTATION}, {} estimated from {} finished Workloads, {} assumed {:.0}s (--default-runtime)",
        s.taken_at, s.running, s.pending, r.annotation, r.history, s.finished_runs, r.assumed, r.default_seconds
    )
}

/// Rows as aligned columns, the last one unpadded.
pub(crate) fn table(out: &mut String, rows: &[Vec<String>]) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ", width = widths[c]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}
