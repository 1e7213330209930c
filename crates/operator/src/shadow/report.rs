//! What the shadow mode tells: the [`Report`] (a summary and one row per
//! workload, JSON) that the admin port serves at `/shadow` and the report
//! file holds, and the [`ShadowMetrics`] families. Built by the shadow loop
//! from its comparisons; knows nothing of Kubernetes.

use std::collections::BTreeMap;
use std::path::Path;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;

use super::compare::{Difference, Outcome, Side};

/// One workload's row.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// `Kind namespace/name` of the job.
    pub job: String,
    /// When the job was created (milliseconds since the epoch).
    pub created_at: Option<i64>,
    /// When it ended under Kueue, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    /// Whether Arbiter saw it arrive (else its times are not compared).
    pub timed: bool,
    /// `agree`, `waiting` or `differs`.
    pub outcome: &'static str,
    /// How Arbiter would decide otherwise.
    pub differences: Vec<Difference>,
    /// What Arbiter decided (in its shadow).
    pub arbiter: Side,
    /// What Kueue decided.
    pub kueue: Side,
}

/// Counts by outcome and by difference.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Workloads per outcome.
    pub outcomes: BTreeMap<&'static str, usize>,
    /// Workloads per difference (one may have several).
    pub differences: BTreeMap<&'static str, usize>,
}

impl Counts {
    /// Counts `outcomes`.
    pub fn of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Counts {
        let mut counts = Counts::default();
        for name in ["agree", "waiting", "differs"] {
            counts.outcomes.insert(name, 0);
        }
        for kind in Difference::ALL {
            counts.differences.insert(kind.name(), 0);
        }
        for outcome in outcomes {
            counts.add(outcome);
        }
        counts
    }

    /// Counts one more workload with `outcome`.
    pub fn add(&mut self, outcome: &Outcome) {
        *self.outcomes.entry(outcome.name()).or_default() += 1;
        for kind in outcome.differences() {
            *self.differences.entry(kind.name()).or_default() += 1;
        }
    }
}

/// The shadow mode's report.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// When it was made (milliseconds since the epoch).
    pub generated_at: i64,
    /// Whether a valid queue configuration (Kueue's objects) is in force.
    pub configured: bool,
    /// Admissions this close count as the same time.
    pub tolerance_seconds: f64,
    /// The workloads of the jobs present, by outcome and difference.
    pub current: Counts,
    /// The workloads of jobs since deleted, by their last outcome.
    pub settled: Counts,
    /// One row per job present, in job order.
    pub workloads: Vec<Row>,
}

impl Report {
    /// The report as JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Writes the report to `path` whole (a file beside it, renamed over it).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        std::fs::write(&temporary, self.to_json())?;
        std::fs::rename(&temporary, path)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DifferenceLabels {
    kind: String,
}

/// The `arbiter_shadow_*` families.
#[derive(Clone)]
pub struct ShadowMetrics {
    workloads: Family<OutcomeLabels, Gauge>,
    differences: Family<DifferenceLabels, Gauge>,
    found: Family<DifferenceLabels, Counter>,
}

impl ShadowMetrics {
    /// Registers the families into `registry`.
    pub fn register(registry: &mut Registry) -> ShadowMetrics {
        let metrics = ShadowMetrics {
            workloads: Family::default(),
            differences: Family::default(),
            found: Family::default(),
        };
        registry.register(
            "arbiter_shadow_workloads",
            "Shadow mode: workloads of the jobs present by outcome of comparing Arbiter's decision with Kueue's: agree, waiting (neither admitted, or one only just), differs",
            metrics.workloads.clone(),
        );
        registry.register(
            "arbiter_shadow_differences",
            "Shadow mode: workloads of the jobs present on which Arbiter would decide otherwise than Kueue, by kind: sooner, later, never, flavor, victims",
            metrics.differences.clone(),
        );
        registry.register(
            "arbiter_shadow_differences_found",
            "Shadow mode: differences found (each kind counted once per workload, when first seen)",
            metrics.found.clone(),
        );
        metrics
    }

    /// Shows `counts`.
    pub fn set(&self, counts: &Counts) {
        for (outcome, n) in &counts.outcomes {
            let labels = OutcomeLabels {
                outcome: outcome.to_string(),
            };
            self.workloads.get_or_create(&labels).set(*n as i64);
        }
        for (kind, n) in &counts.differences {
            let labels = DifferenceLabels {
                kind: kind.to_string(),
            };
            self.differences.get_or_create(&labels).set(*n as i64);
        }
    }

    /// Counts a difference newly found.
    pub fn found(&self, kind: Difference) {
        self.found
            .get_or_create(&DifferenceLabels {
                kind: kind.name().to_string(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn counts_list_every_outcome_and_kind_and_the_report_is_written_whole() {
        let outcomes = [
            Outcome::Agree,
            Outcome::Waiting,
            Outcome::Differs(BTreeSet::from([Difference::Flavor, Difference::Later])),
            Outcome::Differs(BTreeSet::from([Difference::Flavor])),
        ];
        let counts = Counts::of(&outcomes);
        assert_eq!(counts.outcomes["agree"], 1);
        assert_eq!(counts.outcomes["differs"], 2);
        assert_eq!(counts.differences["flavor"], 2);
        assert_eq!(counts.differences["later"], 1);
        assert_eq!(counts.differences["victims"], 0);

        let mut registry = Registry::default();
        let metrics = ShadowMetrics::register(&mut registry);
        metrics.set(&counts);
        metrics.found(Difference::Flavor);
        let text = arbiter_policy::metrics::encode(&registry);
        assert!(
            text.contains("arbiter_shadow_differences{kind=\"flavor\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("arbiter_shadow_workloads{outcome=\"agree\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("arbiter_shadow_differences_found_total{kind=\"flavor\"} 1"),
            "{text}"
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shadow.json");
        let report = Report {
            current: counts,
            ..Report::default()
        };
        report.write(&path).unwrap();
        let read: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(read["current"]["differences"]["flavor"], 2);
        assert!(!dir.path().join("shadow.json.tmp").exists());
    }
}
