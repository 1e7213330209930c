//! The seed article's manifests (`../shared/testdata/article/manifests.yaml`,
//! or `$ARBITER_SHARED_TESTDATA/article/manifests.yaml`: every YAML example
//! of the article, verbatim, 20 documents) load as written — the whole file
//! and each document on its own — and mean what the article says: the map
//! form of a flavor's `resources` is nominal quota, a ResourceFlavor's
//! `nodeSelector`/`taints` are its node labels and taints, a Queue's
//! `priorityClass.weight` multiplies its workloads' priority as a
//! ClusterQueue's does, `fair-scheduling` is fair sharing,
//! `targetCPUUtilization` the autoscaling target and the `kubeflow.org/v1
//! PipelineRun` a workload asking for its `gpu-count` GPUs. Every article
//! form gets a warning naming what `arbiter convert` writes
//! (`tests/cli_convert.rs` converts each document). The file is read from
//! a byte-for-byte copy in `tests/data/article/`, checked against the shared
//! test data when that is there.

use std::path::{Path, PathBuf};

use arbiter_core::model::api::SchedulingAlgorithm;
use arbiter_core::model::cluster::{Cluster, HistoryWindow, ResourceBounds, RetryPolicy};
use arbiter_core::model::load::{load_str, Manifest, Origin};
use arbiter_core::model::{Amount, Millis};
use arbiter_core::scheduler::hooks::DefaultHooks;
use arbiter_core::scheduler::intake::{intake, Intake};
use arbiter_sim::report::WorkloadState;
use arbiter_sim::scenario::{self, Scenario};

/// The article's file as written: the copy in `tests/data/article/` (the
/// tests never depend on a checkout beside this one); `the_copy_is_the_articles_file`
/// checks it against the shared test data when that is there.
fn article() -> Option<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/article/manifests.yaml");
    Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

#[test]
fn the_copy_is_the_articles_file() {
    let shared = std::env::var_os("ARBITER_SHARED_TESTDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata"));
    let path = shared.join("article/manifests.yaml");
    match std::fs::read_to_string(&path) {
        Ok(text) => assert_eq!(
            Some(text),
            article(),
            "tests/data/article/manifests.yaml differs from {}; copy it again",
            path.display()
        ),
        Err(e) => eprintln!(
            "note: {}: {e}; the copy in tests/data/article/ is not compared with it",
            path.display()
        ),
    }
    // The upstream Kubeflow CRDs the operator's tests install, copied the same way.
    let copies = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/crds");
    if let Ok(entries) = std::fs::read_dir(shared.join("crds")) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let copy = std::fs::read(copies.join(&name)).ok();
            assert_eq!(
                std::fs::read(entry.path()).ok(),
                copy,
                "tests/data/crds/{} differs from {} (or is missing); copy it again",
                name.to_string_lossy(),
                entry.path().display()
            );
        }
    }
}

/// The documents of the file, each exactly as written (without the `---` lines).
fn documents(text: &str) -> Vec<String> {
    let mut documents = vec![String::new()];
    for line in text.lines() {
        if line == "---" {
            documents.push(String::new());
        } else if let Some(last) = documents.last_mut() {
            last.push_str(line);
            last.push('\n');
        }
    }
    documents
}

/// Document `n` (1-based, as the article's README numbers them).
fn doc(docs: &[String], n: usize) -> &str {
    &docs[n - 1]
}

/// A ResourceFlavor the article's ClusterQueues name but never define.
fn flavor(name: &str) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {{name: {name}}}\n"
    )
}

/// The scenario `arbiter simulate` builds from these documents, in one file.
fn scenario(parts: &[&str]) -> Scenario {
    let text = parts.join("---\n");
    let loaded = load_str(&text, Path::new("article.yaml"))
        .unwrap_or_else(|e| panic!("does not load: {e}\n{text}"));
    scenario::build(loaded).unwrap_or_else(|e| panic!("does not build: {e}\n{text}"))
}

fn units(n: i64) -> Amount {
    Amount::from_units(n)
}

fn quantity(text: &str) -> Amount {
    Amount::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

/// The nominal quota of ClusterQueue `cq` for (flavor, resource).
fn nominal(cluster: &Cluster, cq: &str, flavor: &str, resource: &str) -> Option<Amount> {
    let cq = cluster.cluster_queue(cluster.cluster_queue_id(cq)?);
    let fr = cluster.flavor_resource(cluster.flavor_id(flavor)?, cluster.resource_id(resource)?);
    cq.quotas[fr.index()].map(|q| q.nominal)
}

fn local_queue<'c>(
    cluster: &'c Cluster,
    namespace: &str,
    name: &str,
) -> &'c arbiter_core::model::cluster::LocalQueue {
    let id = cluster
        .local_queue_id(namespace, name)
        .unwrap_or_else(|| panic!("no LocalQueue {namespace}/{name}"));
    &cluster.local_queues[id.index()]
}

fn cluster_queue<'c>(
    cluster: &'c Cluster,
    name: &str,
) -> &'c arbiter_core::model::cluster::ClusterQueue {
    let id = cluster
        .cluster_queue_id(name)
        .unwrap_or_else(|| panic!("no ClusterQueue {name}"));
    cluster.cluster_queue(id)
}

/// The article forms each document holds, each as a fragment of the warning
/// that reads it (which names what `arbiter convert` writes).
const ARTICLE_FORMS: &[(usize, &[&str])] = &[
    (
        2,
        &[r#"flavors[0].resources: the article's map (resource: quantity) read as nominal quotas; `arbiter convert` writes Kueue's list, `resources: [{name: nvidia.com/gpu, nominalQuota: "2"}]`"#],
    ),
    (
        5,
        &[
            r#"flavors[0].resources: the article's map (resource: quantity) read as nominal quotas; `arbiter convert` writes Kueue's list, `resources: [{name: nvidia.com/gpu, nominalQuota: "2"}, {name: memory, nominalQuota: "32Gi"}, {name: cpu, nominalQuota: "8"}]`"#,
            r#"flavors[1].resources: the article's map (resource: quantity) read as nominal quotas; `arbiter convert` writes Kueue's list, `resources: [{name: nvidia.com/gpu, nominalQuota: "1"}, {name: memory, nominalQuota: "16Gi"}, {name: cpu, nominalQuota: "4"}]`"#,
        ],
    ),
    (
        6,
        &[
            "spec.nodeSelector (the article's name) read as spec.nodeLabels, the labels of the flavor's nodes, put into an admitted workload's nodeSelector; `arbiter convert` writes `nodeLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB}`",
            r#"spec.taints (the article's name) read as spec.nodeTaints, the taints of the flavor's nodes: a workload must tolerate them to use the flavor (give spec.tolerations to have admitted pods tolerate them); `arbiter convert` writes `nodeTaints: [{effect: NoSchedule, key: nvidia.com/gpu, value: "true"}]`"#,
        ],
    ),
    (
        10,
        &["spec.priorityClass on a queue (the article's; Kueue has none): weight 1.5 multiplies the priority of this queue's workloads that name no WorkloadPriorityClass, as a ClusterQueue's priorityClass does, in the default weighting policy; `arbiter convert` writes it as the arbiter.dev/v1alpha1 LocalQueue's spec.priorityClass"],
    ),
    (
        11,
        &[
            "flavors[0].resources: the article's map",
            "spec.autoscaling.targetCPUUtilization (the article's name) read as spec.autoscaling.targetUtilization, the target share of the flavor's node capacity in use, measured on its dominant resource (the GPUs of a GPU flavor), not on CPU alone; `arbiter convert` writes `targetUtilization: 70`",
        ],
    ),
    (
        13,
        &[
            r#"flavors[0].resources: the article's map (resource: quantity) read as nominal quotas; `arbiter convert` writes Kueue's list, `resources: [{name: nvidia.com/gpu, nominalQuota: "4"}, {name: memory, nominalQuota: "64Gi"}]`"#,
            "flavors[1].resources: the article's map",
        ],
    ),
    (
        17,
        &["spec.scheduling.algorithm: `fair-scheduling` (the article's name) read as `fair-sharing`, weighted dominant-resource-share fair sharing across the cohort as Kueue's; `arbiter convert` writes `algorithm: fair-sharing`"],
    ),
    (
        18,
        &["spec.resourceEstimation.historyWindow: `7d` (days, the article's; Kubernetes durations have no `d`) read as `168h`; `arbiter convert` writes `historyWindow: 168h`"],
    ),
];

#[test]
fn every_document_of_the_article_loads_alone_and_in_the_whole_file() {
    let Some(text) = article() else { return };
    let docs = documents(&text);
    assert_eq!(docs.len(), 20, "the article's file has 20 documents");

    let whole = load_str(&text, Path::new("manifests.yaml"))
        .unwrap_or_else(|e| panic!("the article's file does not load: {e}"));
    assert_eq!(whole.documents.len(), 20);
    let expected_warnings: usize = ARTICLE_FORMS.iter().map(|(_, forms)| forms.len()).sum();
    assert_eq!(
        whole.warnings.len(),
        expected_warnings,
        "a warning per article form and nothing else: {:#?}",
        whole.warnings
    );

    for (i, text) in docs.iter().enumerate() {
        let n = i + 1;
        let loaded = load_str(text, Path::new("manifests.yaml"))
            .unwrap_or_else(|e| panic!("document {n} does not load on its own: {e}\n{text}"));
        assert_eq!(loaded.documents.len(), 1, "document {n}");
        let document = &loaded.documents[0];
        let messages: Vec<&str> = loaded.warnings.iter().map(|w| w.message.as_str()).collect();
        let forms = ARTICLE_FORMS
            .iter()
            .find(|(at, _)| *at == n)
            .map_or(&[][..], |(_, forms)| *forms);
        assert_eq!(
            messages.len(),
            forms.len(),
            "document {n}: one warning per article form, no unknown field: {messages:#?}"
        );
        for (message, form) in messages.iter().zip(forms) {
            assert!(
                message.contains(form),
                "document {n}: warning {message:?} lacks {form:?}"
            );
        }
        // The same object as in the whole file, read the same way.
        assert_eq!(
            format!("{:?}", document.manifest),
            format!("{:?}", whole.documents[i].manifest),
            "document {n}"
        );
        let (kind, origin) = match (n, &document.manifest) {
            (1 | 4 | 8 | 9 | 10 | 14 | 18, Manifest::LocalQueue(_)) => ("Queue", Origin::Article),
            (7 | 12, Manifest::LocalQueue(_)) => ("LocalQueue", Origin::KueueV1beta1),
            (2 | 5 | 11 | 13 | 16 | 17, Manifest::ClusterQueue(_)) => {
                ("ClusterQueue", Origin::KueueV1beta1)
            }
            (6, Manifest::ResourceFlavor(_)) => ("ResourceFlavor", Origin::KueueV1beta1),
            (3 | 15 | 19 | 20, Manifest::Other { kind, .. }) => (kind.as_str(), Origin::Foreign),
            (_, other) => panic!("document {n} read as {other:?}"),
        };
        assert_eq!(document.origin, origin, "document {n} ({kind})");
    }
}

/// Documents 1–3: the Queue, the ClusterQueue with `nvidia.com/gpu: "2"` and
/// the PipelineRun asking for `gpu-count: "2"` — the run is admitted onto
/// a100 with its 2 GPUs, the whole quota.
#[test]
fn the_first_example_queues_the_pipeline_run_for_its_gpu_count() {
    let Some(text) = article() else { return };
    let docs = documents(&text);
    let scenario = scenario(&[&flavor("a100"), doc(&docs, 1), doc(&docs, 2), doc(&docs, 3)]);
    let cluster = &scenario.cluster;
    assert_eq!(
        nominal(cluster, "ai-cluster-queue", "a100", "nvidia.com/gpu"),
        Some(units(2))
    );
    let queue = local_queue(cluster, "default", "ai-queue");
    assert_eq!(
        cluster.cluster_queue(queue.cluster_queue).name,
        "ai-cluster-queue"
    );
    // The PipelineRun, read through the article's JobIntegration, told so.
    assert!(
        scenario.warnings.iter().any(|w| w.contains("(document 4)")
            && w.contains("kubeflow.org/v1 PipelineRun is the article's kind")
            && w.contains("`arbiter convert` writes that JobIntegration")),
        "{:#?}",
        scenario.warnings
    );
    assert_eq!(scenario.jobs.len(), 1);
    let run = &scenario.jobs[0].info;
    assert_eq!(
        (run.kind.as_str(), run.name.as_str()),
        ("PipelineRun", "ai-training-pipeline")
    );
    assert_eq!(run.queue_name.as_deref(), Some("ai-queue"));
    assert_eq!(run.pod_sets.len(), 1);
    assert_eq!(run.pod_sets[0].count, 1);
    assert_eq!(
        run.pod_sets[0].requests.get("nvidia.com/gpu"),
        Some(&units(2))
    );
    let report = arbiter_sim::driver::run(&scenario, &mut DefaultHooks, &mut |_| {});
    let w = &report.workloads[0];
    assert_eq!(w.state, WorkloadState::Admitted, "{w:?}");
    assert_eq!(w.admitted_seconds, Some(0.0));
    assert_eq!(w.flavors["pipeline"]["nvidia.com/gpu"], "a100");
}

/// Document 5 (with its Queue, document 4): two flavors, three resources
/// each, in the order of `coveredResources`.
#[test]
fn the_integration_configs_map_of_quotas_is_nominal_quota() {
    let Some(text) = article() else { return };
    let docs = documents(&text);
    let scenario = scenario(&[
        &flavor("a100"),
        &flavor("v100"),
        doc(&docs, 4),
        doc(&docs, 5),
    ]);
    let cluster = &scenario.cluster;
    for (flavor, gpu, memory, cpu) in [("a100", 2, "32Gi", 8), ("v100", 1, "16Gi", 4)] {
        let quota = |resource| nominal(cluster, "ai-cluster-queue", flavor, resource);
        assert_eq!(quota("nvidia.com/gpu"), Some(units(gpu)), "{flavor}");
        assert_eq!(quota("memory"), Some(quantity(memory)), "{flavor}");
        assert_eq!(quota("cpu"), Some(units(cpu)), "{flavor}");
    }
    let cq = cluster_queue(cluster, "ai-cluster-queue");
    let names = |ids: &[arbiter_core::model::cluster::ResourceId]| -> Vec<String> {
        ids.iter()
            .map(|&r| cluster.resource_name(r).to_string())
            .collect()
    };
    assert_eq!(
        names(&cq.groups[0].resources),
        ["nvidia.com/gpu", "memory", "cpu"]
    );
    assert_eq!(
        local_queue(cluster, "kubeflow", "ai-queue").priority,
        Some(100)
    );
}

/// Document 6: `nodeSelector` and `taints` are the flavor's node labels and taints.
#[test]
fn the_gpu_flavors_node_selector_and_taints_are_its_node_labels_and_taints() {
    let Some(text) = article() else { return };
    let docs = documents(&text);
    let scenario = scenario(&[doc(&docs, 6)]);
    let cluster = &scenario.cluster;
    let flavor = &cluster.flavors[cluster
        .flavor_id("a100-gpu")
        .unwrap_or_else(|| panic!("no flavor a100-gpu"))
        .index()];
    assert_eq!(
        flavor.node_labels.iter().collect::<Vec<_>>(),
        [(
            &"nvidia.com/gpu.product".to_string(),
            &"NVIDIA-A100-SXM4-40GB".to_string()
        )]
    );
    assert_eq!(flavor.node_taints.len(), 1);
    let taint = &flavor.node_taints[0];
    assert_eq!(
        (
            taint.key.as_str(),
            taint.value.as_deref(),
            taint.effect.as_str()
        ),
        ("nvidia.com/gpu", Some("true"), "NoSchedule")
    );
}

/// Documents 7–10, 12, 14 and 18 (each with document 2's ClusterQueue):
/// queue priorities, GPU bounds, the Queue's `priorityClass` weight — which
/// its workloads carry, as they carry a ClusterQueue's —, and the estimation window.
#[test]
fn the_queues_priorities_bounds_weights_and_estimation_mean_what_the_article_says() {
    let Some(text) = article() else { return };
    let docs = documents(&text);
    let with_cq = |n: usize| scenario(&[&flavor("a100"), doc(&docs, 2), doc(&docs, n)]);
    let gpu_bounds = |min, max, default| ResourceBounds {
        resource: "nvidia.com/gpu".into(),
        min: Some(units(min)),
        max: Some(units(max)),
        default: Some(units(default)),
    };

    let s = with_cq(7);
    let queue = local_queue(&s.cluster, "kubeflow", "ai-local-queue");
    assert_eq!(queue.resource_bounds, [gpu_bounds(1, 4, 2)]);
    let s = with_cq(12);
    let queue = local_queue(&s.cluster, "kubeflow", "ai-local-queue");
    assert_eq!(queue.resource_bounds, [gpu_bounds(1, 8, 2)]);

    for (n, namespace, name, priority) in [
        (8, "production", "production-queue", 200),
        (9, "development", "development-queue", 100),
    ] {
        let s = with_cq(n);
        let queue = local_queue(&s.cluster, namespace, name);
        assert_eq!(queue.priority, Some(priority), "document {n}");
        assert_eq!(queue.priority_weight, None, "document {n}");
    }

    let s = with_cq(14);
    let queue = local_queue(&s.cluster, "healthcare", "medical-imaging-queue");
    assert_eq!(queue.priority, Some(180));
    assert_eq!(queue.resource_bounds, [gpu_bounds(1, 4, 2)]);

    let s = with_cq(18);
    let queue = local_queue(&s.cluster, "kubeflow", "ai-queue");
    let estimation = queue
        .estimation
        .unwrap_or_else(|| panic!("resourceEstimation not read"));
    assert_eq!(
        estimation.window,
        HistoryWindow::Duration(Millis::from_secs(7 * 24 * 3600))
    );
    assert_eq!(estimation.confidence, 0.95);

    // Document 10: priority 150, weighted 1.5 — a workload of the queue that
    // names no priority class carries both.
    let s = with_cq(10);
    let queue = local_queue(&s.cluster, "kubeflow", "ai-queue");
    assert_eq!(
        (queue.priority, queue.priority_weight),
        (Some(150), Some(1.5))
    );
    let job = arbiter_core::jobs::JobInfo {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        namespace: "kubeflow".into(),
        name: "train".into(),
        labels: Default::default(),
        annotations: Default::default(),
        queue_name: Some("ai-queue".into()),
        priority_class: None,
        pod_sets: vec![arbiter_core::jobs::PodSetInfo {
            name: "main".into(),
            count: 1,
            min_count: None,
            requests: [("nvidia.com/gpu".to_string(), units(1))].into(),
            node_selector: Default::default(),
            required_node_affinity: None,
            tolerations: Vec::new(),
            template_path: None,
            topology: None,
        }],
    };
    match intake(&s.cluster, &job, None) {
        Intake::Queued(w) => assert_eq!((w.priority, w.priority_weight), (150, 1.5)),
        other => panic!("not queued: {other:?}"),
    }
}

/// Documents 11, 13, 16 and 17: autoscaling with `targetCPUUtilization`,
/// the finance queue's quotas and `priorityClass` weight, retries and
/// reclaim, `fair-scheduling` with adaptive weights.
#[test]
fn the_cluster_queues_policies_mean_what_the_article_says() {
    let Some(text) = article() else { return };
    let docs = documents(&text);

    let s = scenario(&[&flavor("a100"), doc(&docs, 11)]);
    let cq = cluster_queue(&s.cluster, "ai-cluster-queue");
    let autoscaling = cq
        .autoscaling
        .unwrap_or_else(|| panic!("autoscaling not read"));
    assert_eq!(
        (
            autoscaling.min_replicas,
            autoscaling.max_replicas,
            autoscaling.target_utilization
        ),
        (Some(2), Some(10), 70.0)
    );
    assert_eq!(
        nominal(&s.cluster, "ai-cluster-queue", "a100", "nvidia.com/gpu"),
        Some(units(2))
    );

    let s = scenario(&[&flavor("a100-40gb"), &flavor("a100-80gb"), doc(&docs, 13)]);
    for (flavor, gpu, memory) in [("a100-40gb", 4, "64Gi"), ("a100-80gb", 8, "128Gi")] {
        let quota = |resource| nominal(&s.cluster, "finance-cluster-queue", flavor, resource);
        assert_eq!(quota("nvidia.com/gpu"), Some(units(gpu)), "{flavor}");
        assert_eq!(quota("memory"), Some(quantity(memory)), "{flavor}");
    }
    assert_eq!(
        cluster_queue(&s.cluster, "finance-cluster-queue").priority_weight,
        2.0
    );

    let s = scenario(&[doc(&docs, 16)]);
    let cq = cluster_queue(&s.cluster, "ai-cluster-queue");
    assert_eq!(
        cq.retry,
        Some(RetryPolicy {
            max_retries: 3,
            backoff: Millis::from_secs(300)
        })
    );
    assert_eq!(cq.reclaim_timeout, Some(Millis::from_secs(24 * 3600)));

    let s = scenario(&[doc(&docs, 17)]);
    let cq = cluster_queue(&s.cluster, "ai-cluster-queue");
    assert_eq!(cq.algorithm, SchedulingAlgorithm::FairSharing);
    assert_eq!(cq.adaptive_interval, Some(Millis::from_secs(3600)));
}

/// Documents 15, 19 and 20 (ServiceMonitor, Role, RoleBinding) hold nothing
/// to simulate: on its own each is refused with that said, and beside a
/// scenario each is skipped with a warning.
#[test]
fn the_articles_monitoring_and_rbac_objects_hold_nothing_to_simulate() {
    let Some(text) = article() else { return };
    let docs = documents(&text);
    for n in [15, 19, 20] {
        let loaded = load_str(doc(&docs, n), Path::new("manifests.yaml"))
            .unwrap_or_else(|e| panic!("document {n}: {e}"));
        let error = match scenario::build(loaded) {
            Ok(_) => panic!("document {n} alone built a scenario"),
            Err(e) => e,
        };
        assert_eq!(error.errors.len(), 1, "document {n}: {:?}", error.errors);
        assert!(
            error.errors[0].starts_with("manifests.yaml: holds no object Arbiter simulates"),
            "document {n}: {}",
            error.errors[0]
        );
        assert!(
            error
                .warnings
                .iter()
                .any(|w| w.contains("is not a scenario object")),
            "document {n}: {:?}",
            error.warnings
        );
    }
    let s = scenario(&[
        doc(&docs, 6),
        doc(&docs, 15),
        doc(&docs, 19),
        doc(&docs, 20),
    ]);
    for (document, what) in [
        (
            2,
            "monitoring.coreos.com/v1 ServiceMonitor kueue-system/kueue-monitor",
        ),
        (
            3,
            "rbac.authorization.k8s.io/v1 Role kubeflow/queue-manager",
        ),
        (
            4,
            "rbac.authorization.k8s.io/v1 RoleBinding kubeflow/queue-manager-binding",
        ),
    ] {
        let told = format!("article.yaml (document {document}): {what} is not a scenario object");
        assert!(
            s.warnings
                .iter()
                .any(|w| w.starts_with(&told) && w.ends_with("; ignored")),
            "{told:?} not in {:#?}",
            s.warnings
        );
    }
}
