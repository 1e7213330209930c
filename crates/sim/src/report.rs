//! The simulation report (docs/design.md §6): the JSON contract, plus the series the
//! plots draw. Built by the driver; serialised with sorted maps so the same
//! inputs give byte-identical output. `scheduler.cpuSeconds` is the one
//! measured (machine-dependent) field; `--reproducible` zeroes it.

use std::collections::BTreeMap;

use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub summary: Summary,
    pub by_cluster_queue: BTreeMap<String, ClusterQueueReport>,
    pub by_flavor: BTreeMap<String, FlavorReport>,
    pub workloads: Vec<WorkloadReport>,
    pub scheduler: SchedulerReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policies: Option<PoliciesReport>,
    /// A run from a live cluster: what was read from it (`sim::live`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotReport>,
    pub warnings: Vec<String>,
    /// Time series for plots (not part of the JSON contract; skipped there).
    #[serde(skip)]
    pub series: Series,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub workloads: usize,
    /// Workloads admitted at least once (those finished included).
    pub admitted: usize,
    /// Workloads admitted (running) when the run ends.
    pub running_at_end: usize,
    pub finished: usize,
    /// Workloads pending when the run ends, `inadmissible` ones included.
    pub pending_at_end: usize,
    /// Workloads that can never be admitted as configured (their LocalQueue
    /// or priority class does not exist, a resource their ClusterQueue does
    /// not cover, more than any flavor could ever give); left out of the
    /// wait statistics.
    pub inadmissible: usize,
    pub rejected: usize,
    pub preemptions: usize,
    pub makespan_seconds: f64,
    /// Wait statistics over the workloads that arrived, neither rejected
    /// nor inadmissible.
    pub mean_wait_seconds: f64,
    pub p50_wait_seconds: f64,
    pub p95_wait_seconds: f64,
    pub max_wait_seconds: f64,
    pub jain_fairness_index: f64,
    /// Virtual time the report describes.
    pub end_seconds: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueReport {
    /// Workloads admitted at least once.
    pub admitted: usize,
    /// Of its workloads that were neither rejected nor inadmissible.
    pub mean_wait_seconds: f64,
    /// Time-averaged usage of the dominant resource as a fraction of nominal quota (may exceed 1 when borrowing).
    pub mean_usage: f64,
    pub preempted: usize,
    pub pending_at_end: usize,
    /// Of `pendingAtEnd`, those that can never be admitted.
    pub inadmissible: usize,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorReport {
    /// Time-averaged fraction in use: of node capacity with node pools, else of the flavor's total nominal quota.
    pub utilization: f64,
    /// The resource `utilization` is measured on (`nvidia.com/gpu` when the flavor has it).
    pub resource: String,
    pub peak_nodes: u32,
    /// With pools that hold a resource per card (`devices`): that resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceReport>,
}

/// A device resource of a flavor, time-averaged over the run.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceReport {
    pub resource: String,
    /// Fraction of its capacity (cards × one card, on ready nodes) allocated.
    pub allocation: f64,
    /// Fraction of its capacity free but fragmented, as the FGD paper
    /// measures it: for each typical pod (the shapes of the pods last
    /// submitted, weighted by how common they are), the free cards too small
    /// for it where it fits on the node, all free cards where it does not.
    pub fragmentation: f64,
}

/// A workload's state at the end of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadState {
    #[default]
    Pending,
    /// Admitted and running.
    Admitted,
    Finished,
    /// Terminal: refused by an admission policy as non-retryable, or outside `resourceQuotas` bounds.
    Rejected,
}

/// One transition in a workload's history.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HistoryEvent {
    #[default]
    Admitted,
    Evicted,
    Requeued,
    Finished,
    Rejected,
}

macro_rules! named {
    ($ty:ty { $($variant:ident => $name:literal),* $(,)? }) => {
        impl $ty {
            /// The report's JSON string for it.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $name),* }
            }
        }
        impl PartialEq<&str> for $ty {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
named!(WorkloadState { Pending => "pending", Admitted => "admitted", Finished => "finished", Rejected => "rejected" });
named!(HistoryEvent { Admitted => "admitted", Evicted => "evicted", Requeued => "requeued", Finished => "finished", Rejected => "rejected" });

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    pub at_seconds: f64,
    pub event: HistoryEvent,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flavors: Option<BTreeMap<String, BTreeMap<String, String>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadReport {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub cluster_queue: Option<String>,
    pub priority: Option<i32>,
    pub arrival_seconds: f64,
    pub admitted_seconds: Option<f64>,
    pub finished_seconds: Option<f64>,
    /// Time spent waiting (queued, set aside or backing off) up to its latest admission or the end.
    pub wait_seconds: f64,
    pub flavors: BTreeMap<String, BTreeMap<String, String>>,
    pub evictions: u32,
    pub state: WorkloadState,
    pub reason: String,
    /// Can it never be admitted as configured (its LocalQueue or priority
    /// class does not exist, a resource its ClusterQueue does not cover, more
    /// than any flavor could ever give)? Counted in `summary.inadmissible`,
    /// not in the wait statistics; not in the JSON: `arbiter simulate` warns
    /// about it, and `--strict` fails.
    #[serde(skip)]
    pub never_admissible: bool,
    /// Where its pods were at its latest admission (flavors with node pools).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub placement: Vec<PlacementReport>,
    pub history: Vec<HistoryEntry>,
}

/// Pods of a workload on one node.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementReport {
    /// `<flavor>-<index>`: the node's index among its flavor's nodes.
    pub node: String,
    pub pods: u32,
    /// Per device resource, the cards its pods hold there.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cards: BTreeMap<String, Vec<u16>>,
}

impl PlacementReport {
    /// Placements by name: `<flavor>-<node index>`, pods, and the cards
    /// held per device resource.
    pub fn of(
        cluster: &arbiter_core::model::cluster::Cluster,
        placements: &[arbiter_core::scheduler::workload::Placement],
    ) -> Vec<PlacementReport> {
        placements
            .iter()
            .map(|p| {
                let mut cards: BTreeMap<String, Vec<u16>> = BTreeMap::new();
                for u in &p.cards {
                    cards
                        .entry(
                            cluster
                                .resources
                                .get(u.resource.index())
                                .cloned()
                                .unwrap_or_default(),
                        )
                        .or_default()
                        .push(u.card);
                }
                PlacementReport {
                    node: format!(
                        "{}-{}",
                        cluster
                            .flavors
                            .get(p.flavor.index())
                            .map_or("", |f| &f.name),
                        p.node
                    ),
                    pods: p.pods,
                    cards,
                }
            })
            .collect()
    }
}

/// What a run from a live cluster started from; times in the report are
/// seconds from `takenAt` (before it: negative).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotReport {
    /// When the cluster was read (RFC 3339): the run's time 0.
    pub taken_at: String,
    /// Workloads admitted when it was read: the run starts with them admitted.
    pub running: usize,
    /// Workloads waiting when it was read.
    pub pending: usize,
    /// Finished Workloads whose runtime was read (the history estimates rest on them).
    pub finished_runs: usize,
    /// Where each replayed workload's runtime came from.
    pub runtimes: RuntimeSources,
}

/// How many runtimes came from each source.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeSources {
    /// Its job's `sim.arbiter.dev/runtime` annotation.
    pub annotation: usize,
    /// The estimate from its LocalQueue's finished Workloads.
    pub history: usize,
    /// Neither: `defaultSeconds` assumed.
    pub assumed: usize,
    pub default_seconds: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerReport {
    pub cycles: u64,
    pub cpu_seconds: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoliciesReport {
    pub bundles: Vec<BundleReport>,
    pub evaluations: u64,
    pub errors: u64,
    /// Decisions the decision log did not keep: a policy had its cap of
    /// entries already (per policy: `byPolicy[].decisionsDropped`).
    pub decisions_dropped: u64,
    /// `arbiter.log` lines not kept: a policy had its cap of lines already.
    pub log_lines_dropped: u64,
    /// Per policy: evaluations, errors by kind, latency, what was dropped.
    pub by_policy: Vec<arbiter_policy::engine::PolicyStats>,
    /// Every decision but successful per-workload weight scores (those are
    /// in `--decisions`), identical repeats counted on one entry.
    pub decisions: Vec<arbiter_policy::engine::Decision>,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleReport {
    pub name: String,
    pub version: String,
    pub digest: String,
    /// The namespace of a tenant bundle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub source: String,
}

/// Samples for the plots.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// (seconds, pending workloads)
    pub pending: Vec<(f64, usize)>,
    /// flavor → (seconds, utilisation 0–1)
    pub utilization: BTreeMap<String, Vec<(f64, f64)>>,
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Jain's fairness index of non-negative values: 1 = perfectly even.
pub fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    if values.is_empty() || squares == 0.0 {
        1.0
    } else {
        sum * sum / (values.len() as f64 * squares)
    }
}

/// Rounds to microseconds of precision so float noise never reaches the report.
pub fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(percentile(&v, 50.0), 5.0);
        assert_eq!(percentile(&v, 95.0), 10.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn jain_index_bounds() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), 1.0);
        assert!((jain(&[1.0, 0.0, 0.0]) - 1.0 / 3.0).abs() < 1e-12);
    }
}
