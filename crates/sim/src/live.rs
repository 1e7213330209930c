//! A run that starts from a live cluster (`arbiter simulate
//! --from-cluster`): what was read from the cluster — its configuration and
//! node pools as the operator builds them, its workloads with where each
//! stood ([`Prior`]: queued when, running since when on which flavors), the
//! runtimes its finished Workloads took — turned into a [`Scenario`] whose
//! time 0 is the moment it was read. Pure: the reading (a Kubernetes
//! client) is the binary's, so this crate never depends on one.
//!
//! Each workload's runtime (from its admission) comes from, in order: its
//! job's `sim.arbiter.dev/runtime` annotation; the estimate from its
//! LocalQueue's finished Workloads, as the core makes it
//! (`scheduler::history::RuntimeHistory`: the `resourceEstimation` quantile
//! over its window, Kueue's defaults — the last 100, the 0.9 quantile —
//! where the LocalQueue sets none); else the default runtime the caller
//! gives. The report's `snapshot.runtimes` counts each source.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbiter_core::jobs::JobInfo;
use arbiter_core::model::cluster::{Cluster, Estimation, HistoryWindow};
use arbiter_core::model::sim_api::RUNTIME_ANNOTATION;
use arbiter_core::model::Millis;
use arbiter_core::scheduler::capacity::PoolSpec;
use arbiter_core::scheduler::history::RuntimeHistory;

use crate::report::{RuntimeSources, SnapshotReport};
use crate::scenario::{Prior, Scenario, SimJob, SimPool};

/// The estimate where a LocalQueue configures none (Kueue's defaults,
/// the same as an enabled `resourceEstimation` without fields).
const DEFAULT_ESTIMATION: Estimation = Estimation {
    window: HistoryWindow::Count(100),
    confidence: 0.9,
};

/// One workload read from the cluster, waiting or admitted.
#[derive(Clone, Debug)]
pub struct LiveWorkload {
    /// Its job as intake reads it (labels and annotations included).
    pub info: JobInfo,
    /// The priority to use instead of resolving it again (`None`: resolved
    /// by intake, as the operator does).
    pub explicit_priority: Option<i32>,
    /// Where it stood when the cluster was read.
    pub prior: Prior,
    /// How messages name it (`Workload team-a/job-train`).
    pub source: String,
}

/// A Workload that ran to completion: its LocalQueue, when it finished and
/// how long it ran from its admission.
#[derive(Clone, Debug, PartialEq)]
pub struct FinishedRun {
    pub namespace: String,
    pub queue_name: String,
    pub finished_at: Millis,
    pub runtime: Millis,
}

/// What was read from a cluster, times relative to when (time 0).
#[derive(Clone, Debug)]
pub struct Live {
    /// The configuration in force, as the operator builds it.
    pub cluster: Arc<Cluster>,
    /// Node pools from the Nodes, as the operator builds them.
    pub pools: Vec<PoolSpec>,
    /// Each pool's topology labels (same index as `pools`; missing ones
    /// empty), as the operator gives them to the core.
    pub pool_labels: Vec<BTreeMap<String, String>>,
    pub workloads: Vec<LiveWorkload>,
    pub finished: Vec<FinishedRun>,
    /// What could not be read as it is, each naming the object.
    pub warnings: Vec<String>,
    /// When it was read (RFC 3339).
    pub taken_at: String,
}

/// Where a runtime came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeSource {
    Annotation,
    History,
    Assumed,
}

/// The scenario replaying `live` forward from time 0, and what the report
/// says it started from. `default_runtime` is assumed for a workload with
/// neither an annotation nor history.
pub fn scenario(live: Live, default_runtime: Millis) -> (Scenario, SnapshotReport) {
    let estimates = estimates(&live.cluster, &live.finished);
    let mut warnings = live.warnings;
    let mut sources = RuntimeSources {
        default_seconds: default_runtime.as_secs_f64(),
        ..RuntimeSources::default()
    };
    let (mut running, mut pending) = (0, 0);
    let mut jobs = Vec::with_capacity(live.workloads.len());
    // In queue order (the order the operator queued them; the final
    // tie-break of the replay), so the report lists them that way too.
    let mut workloads = live.workloads;
    workloads.sort_by_key(|w| w.prior.queue_time);
    for w in workloads {
        let (runtime, source) = runtime(&w, &estimates, default_runtime, &mut warnings);
        match source {
            RuntimeSource::Annotation => sources.annotation += 1,
            RuntimeSource::History => sources.history += 1,
            RuntimeSource::Assumed => sources.assumed += 1,
        }
        if w.prior.admission.is_some() {
            running += 1;
        } else {
            pending += 1;
        }
        jobs.push(SimJob {
            info: w.info,
            explicit_priority: w.explicit_priority,
            arrival: Millis::ZERO,
            runtime: Some(runtime),
            startup: Some(Millis::ZERO),
            source: w.source,
            prior: Some(w.prior),
        });
    }
    if sources.assumed > 0 {
        warnings.push(format!(
            "{} workload(s) have neither a {RUNTIME_ANNOTATION} annotation nor finished Workloads in their LocalQueue to estimate from; each is assumed to run {}s (--default-runtime)",
            sources.assumed,
            default_runtime.as_secs_f64()
        ));
    }
    let scenario = Scenario {
        cluster: live.cluster,
        pools: {
            let mut labels = live.pool_labels.into_iter();
            live.pools
                .into_iter()
                .map(|spec| SimPool {
                    spec,
                    provisioning_delay: Millis::ZERO,
                    labels: labels.next().unwrap_or_default(),
                })
                .collect()
        },
        until: None,
        jobs,
        warnings,
        policies: Vec::new(),
    };
    let report = SnapshotReport {
        taken_at: live.taken_at,
        running,
        pending,
        finished_runs: live.finished.len(),
        runtimes: sources,
    };
    (scenario, report)
}

/// Per LocalQueue (namespace, name): the runtime estimate its finished
/// runs give, as the core computes it.
fn estimates(cluster: &Cluster, finished: &[FinishedRun]) -> BTreeMap<(String, String), Millis> {
    let mut runs: Vec<&FinishedRun> = finished.iter().collect();
    runs.sort_by_key(|r| r.finished_at);
    let mut histories: BTreeMap<(String, String), RuntimeHistory> = BTreeMap::new();
    for run in runs {
        let key = (run.namespace.clone(), run.queue_name.clone());
        let history = histories.entry(key).or_insert_with(|| {
            let configured = cluster
                .local_queue_id(&run.namespace, &run.queue_name)
                .and_then(|id| cluster.local_queues[id.index()].estimation);
            RuntimeHistory::new(configured.unwrap_or(DEFAULT_ESTIMATION))
        });
        history.record(run.finished_at, run.runtime);
    }
    histories
        .into_iter()
        .filter_map(|(key, h)| Some((key, h.estimate()?.runtime)))
        .collect()
}

fn runtime(
    w: &LiveWorkload,
    estimates: &BTreeMap<(String, String), Millis>,
    default_runtime: Millis,
    warnings: &mut Vec<String>,
) -> (Millis, RuntimeSource) {
    if let Some(text) = w.info.annotations.get(RUNTIME_ANNOTATION) {
        match Millis::parse(text) {
            Ok(runtime) if runtime >= Millis::ZERO => return (runtime, RuntimeSource::Annotation),
            Ok(_) => warnings.push(format!(
                "{}: annotation {RUNTIME_ANNOTATION} {text:?} is negative; estimated instead",
                w.source
            )),
            Err(e) => warnings.push(format!(
                "{}: annotation {RUNTIME_ANNOTATION}: {e}; estimated instead",
                w.source
            )),
        }
    }
    let queue = w.info.queue_name.clone().unwrap_or_default();
    match estimates.get(&(w.info.namespace.clone(), queue)) {
        Some(&estimate) => (estimate, RuntimeSource::History),
        None => (default_runtime, RuntimeSource::Assumed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver;
    use crate::report::{HistoryEvent, WorkloadState};
    use crate::scenario::PriorAdmission;
    use arbiter_core::model::load::load_str;
    use arbiter_core::scheduler::hooks::DefaultHooks;

    /// One flavor `a100` with one 8-GPU node, a ClusterQueue `research`
    /// of 8 GPUs and LocalQueues `team-a/research` (estimating from its
    /// last 3 runs, the median) and `team-b/research` (no estimation set).
    fn setup() -> (Arc<Cluster>, Vec<PoolSpec>) {
        let yaml = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: research, namespace: team-a}
spec:
  clusterQueue: research
  resourceEstimation: {enabled: true, historyWindow: 3, confidenceLevel: 0.5}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: research, namespace: team-b}
spec: {clusterQueue: research}
"#;
        let loaded =
            load_str(yaml, std::path::Path::new("setup.yaml")).unwrap_or_else(|e| panic!("{e}"));
        let scenario = crate::scenario::build(loaded).unwrap_or_else(|e| panic!("{e}"));
        let cluster = scenario.cluster;
        let gpu = cluster
            .resource_id("nvidia.com/gpu")
            .unwrap_or_else(|| panic!("no gpu resource"));
        let pools = vec![PoolSpec {
            flavor: cluster
                .flavor_id("a100")
                .unwrap_or_else(|| panic!("no a100")),
            nodes: 1,
            allocatable: vec![(gpu, arbiter_core::model::Amount::from_units(8))],
            min_nodes: 1,
            max_nodes: 1,
            devices: Vec::new(),
            names: vec!["node-1".into()],
        }];
        (cluster, pools)
    }

    /// A batch Job of one pod asking `gpus` GPUs in `namespace`'s
    /// `research` queue, read as the operator reads it.
    fn workload(
        namespace: &str,
        name: &str,
        gpus: u32,
        runtime: Option<&str>,
        prior: Prior,
    ) -> LiveWorkload {
        let annotations = match runtime {
            Some(r) => serde_json::json!({ RUNTIME_ANNOTATION: r }),
            None => serde_json::json!({}),
        };
        let job = serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations,
                         "labels": {"arbiter.dev/queue-name": "research"}},
            "spec": {"template": {"spec": {"containers": [{"name": "train",
                "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()}}}]}}}
        });
        let info = arbiter_core::jobs::Integrations::builtin()
            .extract(&job)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("a Job is a job"));
        LiveWorkload {
            info,
            explicit_priority: None,
            prior,
            source: format!("Workload {namespace}/job-{name}"),
        }
    }

    fn running(at_secs: i64) -> Prior {
        Prior {
            queue_time: Millis::from_secs(at_secs - 5),
            admission: Some(PriorAdmission {
                flavors: vec![BTreeMap::from([(
                    "nvidia.com/gpu".to_string(),
                    "a100".to_string(),
                )])],
                counts: vec![1],
                at: Millis::from_secs(at_secs),
            }),
            ..Prior::default()
        }
    }

    fn queued(at_secs: i64) -> Prior {
        Prior {
            queue_time: Millis::from_secs(at_secs),
            ..Prior::default()
        }
    }

    fn finished(namespace: &str, at: i64, runtime: i64) -> FinishedRun {
        FinishedRun {
            namespace: namespace.into(),
            queue_name: "research".into(),
            finished_at: Millis::from_secs(at),
            runtime: Millis::from_secs(runtime),
        }
    }

    #[test]
    fn runtimes_come_from_the_annotation_then_the_queues_history_then_the_default() {
        let (cluster, pools) = setup();
        let live = Live {
            cluster,
            pools,
            pool_labels: Vec::new(),
            workloads: vec![
                // Listed out of queue order.
                workload("team-a", "bad", 4, Some("soon"), queued(-10)),
                workload("team-b", "assumed", 4, None, queued(-20)),
                workload("team-a", "annotated", 4, Some("10m"), running(-60)),
                workload("team-a", "estimated", 4, None, running(-30)),
            ],
            // team-a's window holds its last 3 runs (100 s, 300 s, 200 s:
            // the first, 900 s, fell out); the median is 200 s.
            finished: vec![
                finished("team-a", -400, 300),
                finished("team-a", -900, 900),
                finished("team-a", -300, 200),
                finished("team-a", -500, 100),
            ],
            warnings: Vec::new(),
            taken_at: "2026-01-01T00:00:00Z".into(),
        };
        let (scenario, report) = scenario(live, Millis::from_secs(3600));
        // In queue order.
        let names: Vec<&str> = scenario.jobs.iter().map(|j| j.info.name.as_str()).collect();
        assert_eq!(names, ["annotated", "estimated", "assumed", "bad"]);
        let runtimes: Vec<Option<Millis>> = scenario.jobs.iter().map(|j| j.runtime).collect();
        assert_eq!(
            runtimes,
            [600, 200, 3600, 200].map(|s| Some(Millis::from_secs(s)))
        );
        assert_eq!(
            report.runtimes,
            RuntimeSources {
                annotation: 1,
                history: 2,
                assumed: 1,
                default_seconds: 3600.0
            }
        );
        assert_eq!(
            (report.running, report.pending, report.finished_runs),
            (2, 2, 4)
        );
        assert!(
            scenario
                .warnings
                .iter()
                .any(|w| w.contains("Workload team-a/job-bad") && w.contains(RUNTIME_ANNOTATION)),
            "{:?}",
            scenario.warnings
        );
        assert!(
            scenario
                .warnings
                .iter()
                .any(|w| w.contains("1 workload(s)") && w.contains("3600s (--default-runtime)")),
            "{:?}",
            scenario.warnings
        );
    }

    #[test]
    fn running_workloads_start_admitted_and_the_queued_follow_in_queue_order_as_quota_frees() {
        let (cluster, pools) = setup();
        let live = Live {
            cluster,
            pools,
            pool_labels: Vec::new(),
            workloads: vec![
                // Queued later, listed first: the queue time orders them.
                workload("team-b", "late", 4, Some("1h"), queued(-10)),
                workload("team-a", "early", 4, Some("1h"), queued(-20)),
                workload("team-a", "long", 4, Some("10m"), running(-120)),
                // Ran past its runtime: it finishes as the run begins.
                workload("team-b", "overdue", 4, Some("1m"), running(-300)),
            ],
            finished: Vec::new(),
            warnings: Vec::new(),
            taken_at: "2026-01-01T00:00:00Z".into(),
        };
        let (scenario, _) = scenario(live, Millis::from_secs(3600));
        let report = driver::run(&scenario, &mut DefaultHooks, &mut |_| {});
        let get = |name: &str| {
            report
                .workloads
                .iter()
                .find(|w| w.name == name)
                .unwrap_or_else(|| panic!("no {name} in {:?}", report.workloads))
        };
        let first_admitted = |name: &str| {
            get(name)
                .history
                .iter()
                .find(|h| h.event == HistoryEvent::Admitted)
                .map(|h| h.at_seconds)
        };
        // The running ones are admitted from before the run, on a100.
        assert_eq!(first_admitted("long"), Some(-120.0));
        assert_eq!(first_admitted("overdue"), Some(-300.0));
        assert_eq!(get("long").flavors["main"]["nvidia.com/gpu"], "a100");
        assert_eq!(get("overdue").finished_seconds, Some(0.0));
        assert_eq!(get("long").finished_seconds, Some(480.0));
        // "early" takes the GPUs the overdue one frees at once, "late"
        // those the long one frees at 480 s.
        assert_eq!(first_admitted("early"), Some(0.0));
        assert_eq!(first_admitted("late"), Some(480.0));
        assert_eq!(get("late").wait_seconds, 480.0);
        assert!(report
            .workloads
            .iter()
            .all(|w| w.state == WorkloadState::Finished));
        // Only the waits of the run count: the running ones' are none of it.
        assert_eq!(report.by_cluster_queue["research"].mean_wait_seconds, 240.0);
        assert_eq!(report.by_cluster_queue["research"].admitted, 4);
    }

    #[test]
    fn an_admission_that_no_longer_fits_is_queued_as_pending_and_told() {
        let (cluster, pools) = setup();
        let mut gone = running(-60);
        if let Some(a) = gone.admission.as_mut() {
            a.flavors[0].insert("nvidia.com/gpu".into(), "h100".into());
        }
        let live = Live {
            cluster,
            pools,
            pool_labels: Vec::new(),
            workloads: vec![workload("team-a", "moved", 4, Some("1m"), gone)],
            finished: Vec::new(),
            warnings: Vec::new(),
            taken_at: "2026-01-01T00:00:00Z".into(),
        };
        let (scenario, _) = scenario(live, Millis::from_secs(3600));
        let report = driver::run(&scenario, &mut DefaultHooks, &mut |_| {});
        let w = &report.workloads[0];
        assert_eq!(w.admitted_seconds, Some(0.0));
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.contains("Job team-a/moved")
                    && w.contains("h100")
                    && w.contains("queued as pending")),
            "{:?}",
            report.warnings
        );
    }
}
