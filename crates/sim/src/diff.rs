//! What a candidate changes: two reports of the same scenario — replayed
//! under the bundles in force and under a candidate bundle (`arbiter
//! simulate --from-cluster --policies NEW`) — compared per workload
//! (admitted sooner or later and by how much, on another flavor,
//! preempted in one run and not the other, admitted in only one) and per
//! ClusterQueue (admitted, mean wait, preempted, pending at the end), and
//! rendered for people. Pure: it reads reports, never runs anything.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::report::{HistoryEvent, Report, SnapshotReport, WorkloadReport, WorkloadState};
use crate::table::{snapshot_line, table};

/// A value in each run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Both<T> {
    pub in_force: T,
    pub candidate: T,
}

impl<T: PartialEq> Both<T> {
    fn differs(&self) -> bool {
        self.in_force != self.candidate
    }
}

/// Everything the candidate changes.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    pub summary: DifferenceSummary,
    pub by_cluster_queue: BTreeMap<String, QueueDifference>,
    /// The workloads whose outcome differs, in the scenario's order.
    pub workloads: Vec<WorkloadDifference>,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DifferenceSummary {
    pub workloads: usize,
    /// Workloads whose outcome differs in any way.
    pub moved: usize,
    pub sooner: usize,
    pub later: usize,
    /// Admitted under the bundles in force, never under the candidate.
    pub no_longer_admitted: usize,
    /// Admitted under the candidate only.
    pub newly_admitted: usize,
    pub other_flavor: usize,
    /// Preempted in one run and not the other, or a different number of times.
    pub preemption_changed: usize,
    pub mean_wait_seconds: Both<f64>,
    pub preemptions: Both<usize>,
}

/// One ClusterQueue in both runs.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueDifference {
    pub admitted: Both<usize>,
    pub mean_wait_seconds: Both<f64>,
    pub preempted: Both<usize>,
    pub pending_at_end: Both<usize>,
}

/// How a workload fared in one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadOutcome {
    /// Its first admission (seconds from the run's start; before it:
    /// negative), if any.
    pub admitted_seconds: Option<f64>,
    /// Per pod set, resource → flavor, at that admission.
    pub flavors: BTreeMap<String, BTreeMap<String, String>>,
    /// Times it was preempted.
    pub preempted: usize,
    pub state: WorkloadState,
    pub reason: String,
}

/// What moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    Sooner,
    Later,
    NoLongerAdmitted,
    NewlyAdmitted,
    OtherFlavor,
    Preemption,
    /// Its state at the end differs (finished in one, rejected in the other, …).
    State,
}

/// One workload whose outcome differs.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadDifference {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub cluster_queue: Option<String>,
    pub changes: Vec<Change>,
    /// The candidate's first admission less the one in force (negative:
    /// sooner), when both admit it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admitted_delta_seconds: Option<f64>,
    pub in_force: WorkloadOutcome,
    pub candidate: WorkloadOutcome,
}

/// The whole what-if: what it started from, the difference, and both
/// runs' reports.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WhatIf {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotReport>,
    pub difference: Difference,
    pub in_force: Report,
    pub candidate: Report,
}

/// How a workload fared in a report.
fn outcome(w: &WorkloadReport) -> WorkloadOutcome {
    let first = w.history.iter().find(|h| h.event == HistoryEvent::Admitted);
    WorkloadOutcome {
        admitted_seconds: first.map(|h| h.at_seconds),
        flavors: first.and_then(|h| h.flavors.clone()).unwrap_or_default(),
        preempted: w
            .history
            .iter()
            .filter(|h| h.event == HistoryEvent::Evicted && h.by.is_some())
            .count(),
        state: w.state,
        reason: w.reason.clone(),
    }
}

/// Differences under a millisecond are none (the reports' own precision).
const SAME_TIME: f64 = 0.0005;

/// Compares two runs of the same scenario: `in_force` and `candidate`.
pub fn compare(in_force: &Report, candidate: &Report) -> Difference {
    let key = |w: &WorkloadReport| (w.kind.clone(), w.namespace.clone(), w.name.clone());
    let by_key: BTreeMap<_, &WorkloadReport> =
        candidate.workloads.iter().map(|w| (key(w), w)).collect();
    let mut difference = Difference::default();
    let summary = &mut difference.summary;
    summary.workloads = in_force.workloads.len();
    summary.mean_wait_seconds = Both {
        in_force: in_force.summary.mean_wait_seconds,
        candidate: candidate.summary.mean_wait_seconds,
    };
    summary.preemptions = Both {
        in_force: in_force.summary.preemptions,
        candidate: candidate.summary.preemptions,
    };
    for a in &in_force.workloads {
        let Some(b) = by_key.get(&key(a)) else {
            continue;
        };
        let (was, now) = (outcome(a), outcome(b));
        let mut changes = Vec::new();
        let delta = match (was.admitted_seconds, now.admitted_seconds) {
            (Some(x), Some(y)) => {
                let delta = y - x;
                if delta < -SAME_TIME {
                    changes.push(Change::Sooner);
                    summary.sooner += 1;
                } else if delta > SAME_TIME {
                    changes.push(Change::Later);
                    summary.later += 1;
                }
                if was.flavors != now.flavors {
                    changes.push(Change::OtherFlavor);
                    summary.other_flavor += 1;
                }
                Some(crate::report::round6(delta))
            }
            (Some(_), None) => {
                changes.push(Change::NoLongerAdmitted);
                summary.no_longer_admitted += 1;
                None
            }
            (None, Some(_)) => {
                changes.push(Change::NewlyAdmitted);
                summary.newly_admitted += 1;
                None
            }
            (None, None) => None,
        };
        if was.preempted != now.preempted {
            changes.push(Change::Preemption);
            summary.preemption_changed += 1;
        }
        if was.state != now.state {
            changes.push(Change::State);
        }
        if changes.is_empty() {
            continue;
        }
        summary.moved += 1;
        difference.workloads.push(WorkloadDifference {
            kind: a.kind.clone(),
            namespace: a.namespace.clone(),
            name: a.name.clone(),
            cluster_queue: a.cluster_queue.clone().or_else(|| b.cluster_queue.clone()),
            changes,
            admitted_delta_seconds: delta,
            in_force: was,
            candidate: now,
        });
    }
    for (name, a) in &in_force.by_cluster_queue {
        let b = candidate
            .by_cluster_queue
            .get(name)
            .cloned()
            .unwrap_or_default();
        difference.by_cluster_queue.insert(
            name.clone(),
            QueueDifference {
                admitted: Both {
                    in_force: a.admitted,
                    candidate: b.admitted,
                },
                mean_wait_seconds: Both {
                    in_force: a.mean_wait_seconds,
                    candidate: b.mean_wait_seconds,
                },
                preempted: Both {
                    in_force: a.preempted,
                    candidate: b.preempted,
                },
                pending_at_end: Both {
                    in_force: a.pending_at_end,
                    candidate: b.pending_at_end,
                },
            },
        );
    }
    difference
}

/// `3`, or `3 → 5` when the runs differ.
fn both<T: PartialEq>(values: &Both<T>, show: impl Fn(&T) -> String) -> String {
    if values.differs() {
        format!("{} → {}", show(&values.in_force), show(&values.candidate))
    } else {
        show(&values.in_force)
    }
}

fn seconds(s: &f64) -> String {
    format!("{s:.1}s")
}

/// `admitted at 120s on a100`, `finished`, `rejected: …`.
fn describe(o: &WorkloadOutcome) -> String {
    let mut text = match o.admitted_seconds {
        Some(at) => {
            let mut flavors: Vec<&str> = o
                .flavors
                .values()
                .flat_map(|r| r.values().map(String::as_str))
                .collect();
            flavors.sort_unstable();
            flavors.dedup();
            format!("admitted at {at:.0}s on {}", flavors.join("+"))
        }
        None if o.reason.is_empty() => format!("not admitted ({})", o.state),
        None => format!("not admitted ({}: {})", o.state, o.reason),
    };
    if o.preempted > 0 {
        let _ = write!(text, ", preempted {}×", o.preempted);
    }
    text
}

fn change(d: &WorkloadDifference) -> String {
    d.changes
        .iter()
        .map(|c| match (c, d.admitted_delta_seconds) {
            (Change::Sooner, Some(by)) => format!("sooner by {:.0}s", -by),
            (Change::Later, Some(by)) => format!("later by {by:.0}s"),
            (Change::Sooner, None) => "sooner".into(),
            (Change::Later, None) => "later".into(),
            (Change::NoLongerAdmitted, _) => "no longer admitted".into(),
            (Change::NewlyAdmitted, _) => "newly admitted".into(),
            (Change::OtherFlavor, _) => "other flavor".into(),
            (Change::Preemption, _) => "preempted differently".into(),
            (Change::State, _) => format!("{} → {}", d.in_force.state, d.candidate.state),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The difference for people: what it started from, the queues, then each
/// workload that moves.
pub fn render(d: &Difference, snapshot: Option<&SnapshotReport>) -> String {
    let mut out = String::new();
    if let Some(s) = snapshot {
        let _ = writeln!(out, "{}", snapshot_line(s));
    }
    let s = &d.summary;
    let _ = writeln!(
        out,
        "Under the candidate ({} workloads): mean wait {}; preemptions {}",
        s.workloads,
        both(&s.mean_wait_seconds, seconds),
        both(&s.preemptions, usize::to_string),
    );
    if s.moved == 0 {
        let _ = writeln!(
            out,
            "No workload moves: the candidate admits the same workloads at the same times on the same flavors."
        );
    } else {
        let _ = writeln!(
            out,
            "{} workload(s) move: {} sooner, {} later, {} no longer admitted, {} newly admitted, {} on another flavor, {} preempted differently",
            s.moved, s.sooner, s.later, s.no_longer_admitted, s.newly_admitted, s.other_flavor, s.preemption_changed
        );
    }
    let _ = writeln!(out);
    let mut rows = vec![vec![
        "CLUSTERQUEUE".to_string(),
        "ADMITTED".into(),
        "MEAN WAIT".into(),
        "PREEMPTED".into(),
        "PENDING AT END".into(),
    ]];
    for (name, q) in &d.by_cluster_queue {
        rows.push(vec![
            name.clone(),
            both(&q.admitted, usize::to_string),
            both(&q.mean_wait_seconds, seconds),
            both(&q.preempted, usize::to_string),
            both(&q.pending_at_end, usize::to_string),
        ]);
    }
    table(&mut out, &rows);
    if d.workloads.is_empty() {
        return out;
    }
    let _ = writeln!(out);
    let mut rows = vec![vec![
        "WORKLOAD".to_string(),
        "CLUSTERQUEUE".into(),
        "IN FORCE".into(),
        "CANDIDATE".into(),
        "CHANGE".into(),
    ]];
    for w in &d.workloads {
        rows.push(vec![
            format!("{} {}/{}", w.kind, w.namespace, w.name),
            w.cluster_queue.clone().unwrap_or_else(|| "-".into()),
            describe(&w.in_force),
            describe(&w.candidate),
            change(w),
        ]);
    }
    table(&mut out, &rows);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{ClusterQueueReport, HistoryEntry};

    fn admitted(at: f64, flavor: &str) -> HistoryEntry {
        HistoryEntry {
            at_seconds: at,
            event: HistoryEvent::Admitted,
            flavors: Some(BTreeMap::from([(
                "main".to_string(),
                BTreeMap::from([("nvidia.com/gpu".to_string(), flavor.to_string())]),
            )])),
            ..HistoryEntry::default()
        }
    }

    fn evicted_by(at: f64, by: &str) -> HistoryEntry {
        HistoryEntry {
            at_seconds: at,
            event: HistoryEvent::Evicted,
            by: Some(by.into()),
            ..HistoryEntry::default()
        }
    }

    fn workload(name: &str, state: WorkloadState, history: Vec<HistoryEntry>) -> WorkloadReport {
        WorkloadReport {
            kind: "Job".into(),
            namespace: "team-a".into(),
            name: name.into(),
            cluster_queue: Some("research".into()),
            state,
            history,
            ..WorkloadReport::default()
        }
    }

    fn report(workloads: Vec<WorkloadReport>, admitted: usize, wait: f64) -> Report {
        let mut report = Report {
            workloads,
            ..Report::default()
        };
        report.summary.mean_wait_seconds = wait;
        report.by_cluster_queue.insert(
            "research".into(),
            ClusterQueueReport {
                admitted,
                mean_wait_seconds: wait,
                ..ClusterQueueReport::default()
            },
        );
        report
    }

    #[test]
    fn only_the_workloads_that_move_are_named_with_what_moved() {
        use WorkloadState::*;
        let in_force = report(
            vec![
                workload("running", Finished, vec![admitted(-60.0, "a100")]),
                workload("sooner", Finished, vec![admitted(600.0, "a100")]),
                workload("later", Finished, vec![admitted(0.0, "a100")]),
                workload("denied", Finished, vec![admitted(300.0, "a100")]),
                workload("moved", Finished, vec![admitted(10.0, "a100")]),
                workload(
                    "victim",
                    Finished,
                    vec![
                        admitted(0.0, "a100"),
                        evicted_by(5.0, "x"),
                        admitted(9.0, "a100"),
                    ],
                ),
            ],
            6,
            200.0,
        );
        let mut denied = workload("denied", Rejected, vec![]);
        denied.reason = "denied by platform/no-team-b".into();
        let candidate = report(
            vec![
                workload("running", Finished, vec![admitted(-60.0, "a100")]),
                workload("sooner", Finished, vec![admitted(0.0, "a100")]),
                workload("later", Finished, vec![admitted(30.25, "a100")]),
                denied,
                workload("moved", Finished, vec![admitted(10.0, "v100")]),
                workload("victim", Finished, vec![admitted(0.0, "a100")]),
            ],
            5,
            100.0,
        );
        let d = compare(&in_force, &candidate);
        let moved: Vec<(&str, &[Change], Option<f64>)> = d
            .workloads
            .iter()
            .map(|w| (w.name.as_str(), &w.changes[..], w.admitted_delta_seconds))
            .collect();
        assert_eq!(
            moved,
            [
                ("sooner", &[Change::Sooner][..], Some(-600.0)),
                ("later", &[Change::Later][..], Some(30.25)),
                (
                    "denied",
                    &[Change::NoLongerAdmitted, Change::State][..],
                    None
                ),
                ("moved", &[Change::OtherFlavor][..], Some(0.0)),
                ("victim", &[Change::Preemption][..], Some(0.0)),
            ]
        );
        let s = &d.summary;
        assert_eq!(
            (
                s.workloads,
                s.moved,
                s.sooner,
                s.later,
                s.no_longer_admitted,
                s.other_flavor,
                s.preemption_changed
            ),
            (6, 5, 1, 1, 1, 1, 1)
        );
        let q = &d.by_cluster_queue["research"];
        assert_eq!((q.admitted.in_force, q.admitted.candidate), (6, 5));
        let text = render(&d, None);
        for line in [
            "mean wait 200.0s → 100.0s",
            "5 workload(s) move: 1 sooner, 1 later, 1 no longer admitted",
            "sooner by 600s",
            "later by 30s",
            "not admitted (rejected: denied by platform/no-team-b)",
            "admitted at 10s on v100",
            "admitted at 0s on a100, preempted 1×",
        ] {
            assert!(text.contains(line), "{line:?} not in:\n{text}");
        }
        assert!(!text.contains("Job team-a/running"), "{text}");
    }

    #[test]
    fn the_same_runs_differ_in_nothing() {
        let r = report(
            vec![workload(
                "a",
                WorkloadState::Finished,
                vec![admitted(1.0, "a100")],
            )],
            1,
            1.0,
        );
        let d = compare(&r, &r);
        assert!(d.workloads.is_empty());
        assert!(render(&d, None).contains("No workload moves"));
    }
}
