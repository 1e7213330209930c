//! What the builder promises: a good configuration becomes the expected
//! ids, quotas and cohort tree; every class of bad input becomes a
//! [`ConfigError`] naming the source, the object and the field. Input goes
//! through `model::load` and into the builder as the simulator feeds it;
//! other modules' tests build their clusters with [`build`].

use std::path::Path;

use super::*;
use crate::model::api::{QueueingStrategy, ReclaimWithinCohort, StopPolicy, WithinClusterQueue};
use crate::model::load::{load_str, Manifest};
use crate::model::{Amount, Millis};

/// The builder fed with every document of `yaml` (file `t.yaml`), as
/// `sim::scenario` feeds it.
pub(crate) fn builder(yaml: &str) -> ClusterBuilder {
    let loaded = load_str(yaml, Path::new("t.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let mut builder = ClusterBuilder::new();
    for doc in loaded.documents {
        let source = doc.source.to_string();
        let mut warnings = Vec::new();
        if let Some(topology) =
            crate::model::load::topology(&doc.manifest, &doc.source, &mut warnings)
        {
            builder.topology(source, topology.unwrap_or_else(|e| panic!("{e}")));
            continue;
        }
        match builder.add(source.clone(), doc.manifest) {
            None => {}
            Some(Manifest::Namespace(ns)) => builder.namespace(
                source,
                ns.metadata.name.clone().unwrap_or_default(),
                Namespace {
                    labels: ns.metadata.labels.clone().unwrap_or_default(),
                    annotations: ns.metadata.annotations.clone().unwrap_or_default(),
                },
            ),
            Some(other) => panic!("not a cluster object: {other:?}"),
        }
    }
    builder
}

/// The cluster `yaml` describes; panics with the errors if it is not valid.
pub(crate) fn build(yaml: &str) -> Cluster {
    builder(yaml).build().unwrap_or_else(|e| panic!("{e}"))
}

fn errors(yaml: &str) -> Vec<ConfigError> {
    match builder(yaml).build() {
        Ok(cluster) => panic!("expected errors, got {cluster:?}"),
        Err(errors) => errors.0,
    }
}

/// (source, object, field) of each error, to compare in one assertion.
fn located(errors: &[ConfigError]) -> Vec<(&str, &str, &str)> {
    errors
        .iter()
        .map(|e| (e.source.as_str(), e.object.as_str(), e.field.as_str()))
        .collect()
}

fn units(n: i64) -> Amount {
    Amount::from_units(n)
}

const GOOD: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {gpu: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: h100}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: research}
spec:
  parent: org
  fairSharing: {weight: "2"}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
spec:
  cohort: research
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: a100
      resources: [{name: cpu, nominalQuota: 64}, {name: memory, nominalQuota: 256Gi}]
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 4, lendingLimit: 2}]
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 0}]
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: finance}
spec:
  cohort: research
  queueingStrategy: StrictFIFO
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: MayStopSearch}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  fairSharing: {weight: 500m}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: "2"}]
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: solo}
spec:
  namespaceSelector: {matchLabels: {team: solo}}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: team-a, name: main}
spec:
  clusterQueue: ml
  priority: 5
  resourceQuotas: [{name: nvidia.com/gpu, min: 1, max: 8, default: 2}]
  resourceEstimation: {enabled: true, historyWindow: 168h, confidenceLevel: 0.5}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: main}
spec: {clusterQueue: solo, resourceEstimation: {enabled: true}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: solo}, annotations: {arbiter.dev/priority: "3"}}
---
apiVersion: arbiter.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
weight: 2.5
"#;

#[test]
fn good_cluster_gets_dense_ids_in_input_order_and_sorted_resources() {
    let cluster = build(GOOD);
    assert_eq!(cluster.resources, ["cpu", "memory", "nvidia.com/gpu"]);
    assert_eq!(cluster.resource_id("cpu"), Some(ResourceId(0)));
    assert_eq!(cluster.resource_id("nvidia.com/gpu"), Some(ResourceId(2)));
    assert_eq!(cluster.resource_id("example.com/fpga"), None);
    assert_eq!(cluster.resource_name(ResourceId(1)), "memory");
    assert_eq!(cluster.flavor_id("a100"), Some(FlavorId(0)));
    assert_eq!(cluster.flavor_id("h100"), Some(FlavorId(1)));
    assert_eq!(cluster.flavor_id("h200"), None);
    assert_eq!(
        cluster.flavors[0]
            .node_labels
            .get("gpu")
            .map(String::as_str),
        Some("a100")
    );
    assert_eq!(cluster.cluster_queue_id("ml"), Some(ClusterQueueId(0)));
    assert_eq!(cluster.cluster_queue_id("finance"), Some(ClusterQueueId(1)));
    assert_eq!(cluster.cluster_queue_id("solo"), Some(ClusterQueueId(2)));
    assert_eq!(cluster.cluster_queue_id("nope"), None);
    assert_eq!(cluster.cluster_queue(ClusterQueueId(1)).name, "finance");
    assert_eq!(
        cluster.local_queue_id("team-a", "main"),
        Some(LocalQueueId(0))
    );
    assert_eq!(
        cluster.local_queue_id("default", "main"),
        Some(LocalQueueId(1))
    );
    assert_eq!(cluster.local_queue_id("team-b", "main"), None);
    assert_eq!(
        cluster.priority_classes.get("high"),
        Some(&PriorityClass {
            value: 1000,
            weight: 2.5
        })
    );
    assert_eq!(
        cluster.namespaces["team-a"]
            .annotations
            .get("arbiter.dev/priority")
            .map(String::as_str),
        Some("3")
    );
    assert!(!cluster.fair_sharing_everywhere);
}

#[test]
fn flavor_resource_is_dense_and_split_inverts_it() {
    let cluster = build(GOOD);
    assert_eq!(cluster.flavor_resource_count(), 6);
    assert_eq!(
        cluster.flavor_resource(FlavorId(1), ResourceId(2)),
        FlavorResource(5)
    );
    for fr in 0..6 {
        let (f, r) = cluster.split(FlavorResource(fr));
        assert_eq!(cluster.flavor_resource(f, r), FlavorResource(fr));
    }
    assert_eq!(
        cluster.split(FlavorResource(4)),
        (FlavorId(1), ResourceId(1))
    );
}

#[test]
fn cluster_queue_groups_and_quotas_are_laid_out_by_flavor_resource() {
    let cluster = build(GOOD);
    let (cpu, memory, gpu) = (ResourceId(0), ResourceId(1), ResourceId(2));
    let (a100, h100) = (FlavorId(0), FlavorId(1));
    let ml = cluster.cluster_queue(ClusterQueueId(0));
    assert_eq!(ml.groups.len(), 2);
    assert_eq!(ml.groups[0].resources, [cpu, memory]);
    assert_eq!(ml.groups[0].flavors, [a100]);
    assert_eq!(ml.groups[1].resources, [gpu]);
    assert_eq!(ml.groups[1].flavors, [a100, h100]);
    let quota = |fr: FlavorResource| ml.quotas[fr.index()];
    assert_eq!(
        quota(cluster.flavor_resource(a100, gpu)),
        Some(Quota {
            nominal: units(8),
            borrowing_limit: Some(units(4)),
            lending_limit: Some(units(2)),
        })
    );
    assert_eq!(
        quota(cluster.flavor_resource(a100, memory)),
        Some(Quota {
            nominal: units(256 << 30),
            borrowing_limit: None,
            lending_limit: None,
        })
    );
    assert_eq!(
        quota(cluster.flavor_resource(h100, gpu)).map(|q| q.nominal),
        Some(Amount::ZERO)
    );
    assert_eq!(quota(cluster.flavor_resource(h100, cpu)), None);
    // A queue with no resourceGroups has no quota anywhere.
    let solo = cluster.cluster_queue(ClusterQueueId(2));
    assert!(solo.groups.is_empty());
    assert_eq!(solo.quotas, vec![None; 6]);
}

#[test]
fn cohorts_form_a_tree_with_implied_cohorts_after_explicit_ones() {
    let cluster = build(GOOD);
    let names: Vec<&str> = cluster.cohorts.iter().map(|c| c.name.as_str()).collect();
    // `research` is an object; `org` is implied by research's parent.
    assert_eq!(names, ["research", "org"]);
    let (research, org) = (CohortId(0), CohortId(1));
    assert_eq!(cluster.cohorts[0].parent, Some(org));
    assert_eq!(cluster.cohorts[1].parent, None);
    assert_eq!(cluster.root_cohort(research), org);
    assert_eq!(cluster.root_cohort(org), org);
    assert_eq!(cluster.cluster_queues[0].cohort, Some(research));
    assert_eq!(cluster.cluster_queues[1].cohort, Some(research));
    assert_eq!(cluster.cluster_queues[2].cohort, None);
    let gpu_h100 = cluster.flavor_resource(FlavorId(1), ResourceId(2));
    assert_eq!(
        cluster.cohorts[0].quotas[gpu_h100.index()].map(|q| q.nominal),
        Some(units(4))
    );
    assert_eq!(cluster.cohorts[0].fair_weight, 2.0);
    // An implied cohort has no quota of its own and weight 1.
    assert_eq!(cluster.cohorts[1].quotas, vec![None; 6]);
    assert_eq!(cluster.cohorts[1].fair_weight, 1.0);
}

#[test]
fn cluster_queue_policies_take_kueue_defaults_unless_set() {
    let cluster = build(GOOD);
    let ml = cluster.cluster_queue(ClusterQueueId(0));
    assert_eq!(ml.strategy, QueueingStrategy::BestEffortFIFO);
    assert_eq!(ml.when_can_borrow, Fungibility::MayStopSearch);
    assert_eq!(ml.when_can_preempt, Fungibility::TryNextFlavor);
    assert_eq!(ml.within_cluster_queue, WithinClusterQueue::Never);
    assert_eq!(ml.reclaim_within_cohort, ReclaimWithinCohort::Never);
    assert_eq!(ml.fair_weight, 1.0);
    assert_eq!(ml.priority_weight, 1.0);
    assert_eq!(ml.stop_policy, StopPolicy::None);
    assert_eq!(ml.usage_half_life, Millis::from_secs(3600));
    assert_eq!(
        (ml.adaptive_interval, ml.retry, ml.reclaim_timeout),
        (None, None, None)
    );
    assert_eq!(ml.autoscaling, None);
    let finance = cluster.cluster_queue(ClusterQueueId(1));
    assert_eq!(finance.strategy, QueueingStrategy::StrictFIFO);
    assert_eq!(finance.when_can_borrow, Fungibility::TryNextFlavor);
    assert_eq!(finance.when_can_preempt, Fungibility::MayStopSearch);
    assert_eq!(
        finance.within_cluster_queue,
        WithinClusterQueue::LowerPriority
    );
    assert_eq!(finance.reclaim_within_cohort, ReclaimWithinCohort::Any);
    assert_eq!(finance.fair_weight, 0.5);
}

#[test]
fn durations_retry_reclaim_and_autoscaling_are_parsed() {
    let cluster = build(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: defaults}
spec:
  retryPolicy: {}
  autoscaling: {enabled: true}
  scheduling: {adaptiveWeights: {enabled: true}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: set}
spec:
  flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: Preempt}
  retryPolicy: {maxRetries: 5, backoffDuration: 30s}
  resourceReclaim: {enabled: true, reclaimTimeout: 2h}
  autoscaling: {enabled: true, minReplicas: 1, maxReplicas: 4, targetUtilization: 50}
  priorityClass: {name: high, weight: 3}
  scheduling:
    algorithm: fair-sharing
    adaptiveWeights: {enabled: true, adjustmentInterval: 1m, usageHalfLife: 10m}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: disabled}
spec:
  resourceReclaim: {enabled: false}
  autoscaling: {enabled: false, targetUtilization: 500}
  scheduling: {adaptiveWeights: {enabled: false, adjustmentInterval: 1m}}
"#,
    );
    let defaults = &cluster.cluster_queues[0];
    assert_eq!(defaults.retry, Some(RetryPolicy::DEFAULT));
    assert_eq!(
        defaults.autoscaling,
        Some(AutoscalingPolicy {
            min_replicas: None,
            max_replicas: None,
            target_utilization: 80.0,
        })
    );
    assert_eq!(defaults.adaptive_interval, Some(Millis::from_secs(300)));
    let set = &cluster.cluster_queues[1];
    // v1beta1's Borrow/Preempt both mean MayStopSearch.
    assert_eq!(set.when_can_borrow, Fungibility::MayStopSearch);
    assert_eq!(set.when_can_preempt, Fungibility::MayStopSearch);
    assert_eq!(
        set.retry,
        Some(RetryPolicy {
            max_retries: 5,
            backoff: Millis::from_secs(30),
        })
    );
    assert_eq!(set.reclaim_timeout, Some(Millis::from_secs(7200)));
    assert_eq!(
        set.autoscaling,
        Some(AutoscalingPolicy {
            min_replicas: Some(1),
            max_replicas: Some(4),
            target_utilization: 50.0,
        })
    );
    assert_eq!(set.priority_weight, 3.0);
    assert_eq!(set.adaptive_interval, Some(Millis::from_secs(60)));
    assert_eq!(set.usage_half_life, Millis::from_secs(600));
    let disabled = &cluster.cluster_queues[2];
    assert_eq!(
        (
            disabled.reclaim_timeout,
            disabled.autoscaling,
            disabled.adaptive_interval
        ),
        (None, None, None)
    );
}

#[test]
fn local_queue_bounds_and_estimation_are_checked_types() {
    let cluster = build(GOOD);
    let main = &cluster.local_queues[0];
    assert_eq!(
        (main.namespace.as_str(), main.name.as_str()),
        ("team-a", "main")
    );
    assert_eq!(main.cluster_queue, ClusterQueueId(0));
    assert_eq!(main.priority, Some(5));
    assert_eq!(
        main.resource_bounds,
        [ResourceBounds {
            resource: "nvidia.com/gpu".into(),
            min: Some(units(1)),
            max: Some(units(8)),
            default: Some(units(2)),
        }]
    );
    assert_eq!(
        main.estimation,
        Some(Estimation {
            window: HistoryWindow::Duration(Millis::from_secs(7 * 24 * 3600)),
            confidence: 0.5,
        })
    );
    // No namespace: `default`; estimation defaults to the last 100 at 0.9.
    let other = &cluster.local_queues[1];
    assert_eq!(other.namespace, "default");
    assert_eq!(other.cluster_queue, ClusterQueueId(2));
    assert_eq!(
        other.estimation,
        Some(Estimation {
            window: HistoryWindow::Count(100),
            confidence: 0.9,
        })
    );
}

#[test]
fn namespace_selector_sees_labels_and_the_metadata_name() {
    let cluster = build(GOOD);
    let (ml, solo) = (ClusterQueueId(0), ClusterQueueId(2));
    assert!(
        cluster.namespace_allowed(ml, "anything"),
        "no selector: all"
    );
    assert!(cluster.namespace_allowed(solo, "team-a"));
    assert!(
        !cluster.namespace_allowed(solo, "team-b"),
        "unknown namespace"
    );
    let cluster = build(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: named}
spec:
  namespaceSelector:
    matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [ops]}]
"#,
    );
    assert!(cluster.namespace_allowed(ClusterQueueId(0), "ops"));
    assert!(!cluster.namespace_allowed(ClusterQueueId(0), "dev"));
}

#[test]
fn fair_sharing_is_on_for_a_whole_tree_when_one_member_asks() {
    let yaml = r#"
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: child}
spec: {parent: root}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: fair}
spec: {cohort: child, scheduling: {algorithm: fair-sharing}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: sibling}
spec: {cohort: root}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: elsewhere}
spec: {cohort: other}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: alone-policy}
spec: {scheduling: {algorithm: policy}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: alone-fifo}
"#;
    let cluster = build(yaml);
    let on: Vec<bool> = (0..5)
        .map(|i| cluster.fair_sharing_for(ClusterQueueId(i)))
        .collect();
    assert_eq!(on, [true, true, false, true, false]);
    let mut everywhere = builder(yaml);
    everywhere.fair_sharing_everywhere(true);
    let cluster = everywhere.build().unwrap_or_else(|e| panic!("{e}"));
    assert!((0..5).all(|i| cluster.fair_sharing_for(ClusterQueueId(i))));
}

#[test]
fn resources_named_only_by_workloads_get_ids_too() {
    let mut builder = builder(GOOD);
    builder.resource("example.com/fpga");
    builder.resource("cpu");
    let cluster = builder.build().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        cluster.resources,
        ["cpu", "example.com/fpga", "memory", "nvidia.com/gpu"]
    );
    // Ids moved, and quota tables with them.
    let ml = cluster.cluster_queue(ClusterQueueId(0));
    let gpu = cluster
        .resource_id("nvidia.com/gpu")
        .unwrap_or(ResourceId(99));
    assert_eq!(gpu, ResourceId(3));
    assert_eq!(ml.groups[1].resources, [gpu]);
    assert_eq!(
        ml.quotas[cluster.flavor_resource(FlavorId(0), gpu).index()].map(|q| q.nominal),
        Some(units(8))
    );
}

// ---------------------------------------------------------------- errors

#[test]
fn unknown_flavor_names_the_flavor_field_and_the_defined_ones() {
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
    - name: h200
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
"#,
    );
    assert_eq!(
        errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["t.yaml (document 2): ClusterQueue ml: spec.resourceGroups[0].flavors[1].name: ResourceFlavor `h200` is not defined (defined: a100); define it or fix the name"]
    );
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: pool}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: cpus, resources: [{name: cpu, nominalQuota: 8}]}]
"#,
    );
    assert_eq!(
        located(&errs),
        [(
            "t.yaml (document 1)",
            "Cohort pool",
            "spec.resourceGroups[0].flavors[0].name"
        )]
    );
    assert!(
        errs[0].message.contains("(defined: none)"),
        "{}",
        errs[0].message
    );
}

#[test]
fn borrowing_or_lending_limit_needs_a_cohort() {
    let queue = |cohort: &str, limit: &str| {
        format!(
            r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {{name: a100}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: ml}}
spec:
  {cohort}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {{name: cpu, nominalQuota: 8, {limit}}}
      - {{name: nvidia.com/gpu, nominalQuota: 8, {limit}}}
"#
        )
    };
    for limit in ["borrowingLimit: 2", "lendingLimit: 2"] {
        let errs = errors(&queue("", limit));
        // One error per queue, at the first (flavor, resource) with a limit.
        assert_eq!(
            located(&errs),
            [(
                "t.yaml (document 2)",
                "ClusterQueue ml",
                "spec.resourceGroups (flavor a100, resource cpu)"
            )],
            "{limit}"
        );
        assert_eq!(
            errs[0].message,
            "borrowingLimit/lendingLimit need a cohort to borrow from or lend to; set spec.cohort or remove the limit"
        );
        let cluster = build(&queue("cohort: gpu", limit));
        assert_eq!(cluster.cohorts[0].name, "gpu");
    }
}

#[test]
fn borrowing_within_cohort_needs_reclaiming_as_kueue_requires() {
    let queue = |preemption: &str| {
        format!(
            r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {{name: a100}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: ml}}
spec:
  cohort: gpu
  preemption: {preemption}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {{name: a100, resources: [{{name: cpu, nominalQuota: 8}}]}}
"#
        )
    };
    for refused in [
        "{borrowWithinCohort: {policy: LowerPriority}}",
        "{reclaimWithinCohort: Never, borrowWithinCohort: {policy: LowerPriority}}",
    ] {
        let errs = errors(&queue(refused));
        assert_eq!(
            located(&errs),
            [(
                "t.yaml (document 2)",
                "ClusterQueue ml",
                "spec.preemption.borrowWithinCohort.policy"
            )],
            "{refused}"
        );
        assert!(
            errs[0].message.contains("reclaimWithinCohort"),
            "{}",
            errs[0].message
        );
    }
    for allowed in [
        "{reclaimWithinCohort: Any, borrowWithinCohort: {policy: LowerPriority}}",
        "{borrowWithinCohort: {policy: Never}}",
        "{}",
    ] {
        build(&queue(allowed));
    }
}

#[test]
fn duplicate_names_are_reported_per_kind_with_the_second_source() {
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: gpu}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: gpu}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: team-a, name: main}
spec: {clusterQueue: ml}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: team-b, name: main}
spec: {clusterQueue: ml}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: team-a, name: main}
spec: {clusterQueue: ml}
---
apiVersion: arbiter.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 10
---
apiVersion: arbiter.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 20
"#,
    );
    assert_eq!(
        located(&errs),
        [
            (
                "t.yaml (document 2)",
                "ResourceFlavor a100",
                "metadata.name"
            ),
            ("t.yaml (document 4)", "Cohort gpu", "metadata.name"),
            ("t.yaml (document 6)", "ClusterQueue ml", "metadata.name"),
            (
                "t.yaml (document 11)",
                "WorkloadPriorityClass high",
                "metadata.name"
            ),
            (
                "t.yaml (document 9)",
                "LocalQueue team-a/main",
                "metadata.name"
            ),
        ]
    );
    assert_eq!(errs[0].message, "defined twice; rename one");
    assert_eq!(
        errs[4].message,
        "defined twice in this namespace; rename one"
    );
}

#[test]
fn cohort_cycles_are_reported_on_each_member_and_stop_the_build() {
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: a}
spec: {parent: b}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: b}
spec: {parent: a}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: self}
spec: {parent: self}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: leaf}
spec: {parent: a}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: missing, resources: [{name: cpu, nominalQuota: 1}]}]
"#,
    );
    // `leaf` only hangs below the cycle; the ClusterQueue is not checked.
    assert_eq!(
        errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "t.yaml (document 1): Cohort a: spec.parent: parent chain a → b → a is a cycle; a cohort tree must have a root",
            "t.yaml (document 2): Cohort b: spec.parent: parent chain b → a → b is a cycle; a cohort tree must have a root",
            "t.yaml (document 3): Cohort self: spec.parent: parent chain self → self is a cycle; a cohort tree must have a root",
        ]
    );
}

#[test]
fn bad_and_negative_quantities_name_the_quota_field() {
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
spec:
  cohort: gpu
  fairSharing: {weight: "-1"}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: lots}
      - {name: memory, nominalQuota: 8Gi, borrowingLimit: "-1Gi"}
      - {name: nvidia.com/gpu, nominalQuota: 4, lendingLimit: 6}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: gpu}
spec:
  fairSharing: {weight: heavy}
"#,
    );
    let (doc, ml) = ("t.yaml (document 2)", "ClusterQueue ml");
    let at = "spec.resourceGroups[0].flavors[0].resources";
    let nominal = format!("{at}[0].nominalQuota");
    let borrowing = format!("{at}[1].borrowingLimit");
    let lending = format!("{at}[2].lendingLimit");
    assert_eq!(
        located(&errs),
        [
            (
                "t.yaml (document 3)",
                "Cohort gpu",
                "spec.fairSharing.weight"
            ),
            (doc, ml, nominal.as_str()),
            (doc, ml, borrowing.as_str()),
            (doc, ml, lending.as_str()),
            (doc, ml, "spec.fairSharing.weight"),
        ]
    );
    let messages: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "`heavy` is not a Kubernetes quantity (expected e.g. `500m`, `2`, `1.5`, `32Gi`, `2e3`)",
            "`lots` is not a Kubernetes quantity (expected e.g. `500m`, `2`, `1.5`, `32Gi`, `2e3`)",
            "-1Gi is negative; quotas must be ≥ 0",
            "6 exceeds nominalQuota 4; a queue can lend at most what it has",
            "-1 is negative; weights must be ≥ 0",
        ]
    );
}

#[test]
fn resource_group_shape_errors_name_the_group_flavor_and_resource() {
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
spec:
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: a100
      resources: [{name: cpu, nominalQuota: 8}, {name: nvidia.com/gpu, nominalQuota: 8}]
    - name: a100
      resources: [{name: cpu, nominalQuota: 8}, {name: memory, nominalQuota: 8}]
  - coveredResources: [cpu]
    flavors:
    - name: a100
      resources: [{name: cpu, nominalQuota: 8}]
"#,
    );
    assert_eq!(
        located(&errs),
        [
            (
                "t.yaml (document 2)",
                "ClusterQueue ml",
                "spec.resourceGroups[0].flavors[0].resources[1].name"
            ),
            (
                "t.yaml (document 2)",
                "ClusterQueue ml",
                "spec.resourceGroups[0].flavors[0].resources"
            ),
            (
                "t.yaml (document 2)",
                "ClusterQueue ml",
                "spec.resourceGroups[0].flavors[1].name"
            ),
            (
                "t.yaml (document 2)",
                "ClusterQueue ml",
                "spec.resourceGroups[1].coveredResources[0]"
            ),
        ]
    );
    let messages: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "resource `nvidia.com/gpu` is not in this group's coveredResources [cpu, memory]; add it there or remove this quota",
            "flavor `a100` gives no quota for covered resource `memory`; every flavor lists every covered resource (use nominalQuota: 0)",
            "flavor `a100` is listed twice in this group",
            "resource `cpu` is already covered by resourceGroups[0]; a resource belongs to one group",
        ]
    );
}

#[test]
fn cluster_queue_policy_errors_name_their_field() {
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
spec:
  namespaceSelector:
    matchExpressions: [{key: team, operator: In}]
  retryPolicy: {backoffDuration: soon}
  resourceReclaim: {enabled: true}
  autoscaling: {enabled: true, minReplicas: 5, maxReplicas: 2, targetUtilization: 150}
  priorityClass: {name: high, weight: -1}
  scheduling:
    adaptiveWeights: {enabled: true, adjustmentInterval: 5 minutes, usageHalfLife: 1 hour}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: reclaim}
spec:
  namespaceSelector:
    matchExpressions: [{key: team, operator: Matches, values: [a]}]
  resourceReclaim: {enabled: true, reclaimTimeout: forever}
"#,
    );
    let ml = "ClusterQueue ml";
    let doc = "t.yaml (document 1)";
    assert_eq!(
        located(&errs),
        [
            (doc, ml, "spec.namespaceSelector"),
            (
                doc,
                ml,
                "spec.scheduling.adaptiveWeights.adjustmentInterval"
            ),
            (doc, ml, "spec.scheduling.adaptiveWeights.usageHalfLife"),
            (doc, ml, "spec.retryPolicy.backoffDuration"),
            (doc, ml, "spec.resourceReclaim.reclaimTimeout"),
            (doc, ml, "spec.autoscaling"),
            (doc, ml, "spec.autoscaling.targetUtilization"),
            (doc, ml, "spec.priorityClass.weight"),
            (
                "t.yaml (document 2)",
                "ClusterQueue reclaim",
                "spec.namespaceSelector"
            ),
            (
                "t.yaml (document 2)",
                "ClusterQueue reclaim",
                "spec.resourceReclaim.reclaimTimeout"
            ),
        ]
    );
    let messages: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "matchExpressions[0]: operator In needs values",
            "`5 minutes` is not a duration (expected Go syntax such as `100ms`, `30s`, `10m`, `1h30m`)",
            "`1 hour` is not a duration (expected Go syntax such as `100ms`, `30s`, `10m`, `1h30m`)",
            "`soon` is not a duration (expected Go syntax such as `100ms`, `30s`, `10m`, `1h30m`)",
            "required when resourceReclaim is enabled (e.g. `2h`)",
            "minReplicas 5 is above maxReplicas 2",
            "150 is not a percentage in (0, 100]",
            "-1 must be a finite number ≥ 0",
            "matchExpressions[0]: unknown operator `Matches` (use In, NotIn, Exists or DoesNotExist)",
            "`forever` is not a duration (expected Go syntax such as `100ms`, `30s`, `10m`, `1h30m`)",
        ]
    );
}

#[test]
fn priority_class_weight_must_be_finite_and_not_negative() {
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {name: low}
value: -5
weight: -0.5
"#,
    );
    assert_eq!(
        errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["t.yaml (document 1): WorkloadPriorityClass low: weight: -0.5 must be a finite number ≥ 0"]
    );
}

#[test]
fn local_queue_naming_a_missing_cluster_queue_is_an_error() {
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: team-a, name: main}
spec: {clusterQueue: ml-typo}
---
apiVersion: arbiter.dev/v1alpha1
kind: Queue
metadata: {name: article}
spec: {clusterQueue: gone}
"#,
    );
    assert_eq!(
        errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "t.yaml (document 2): LocalQueue team-a/main: spec.clusterQueue: ClusterQueue `ml-typo` is not defined; define it or fix the name",
            "t.yaml (document 3): LocalQueue default/article: spec.clusterQueue: ClusterQueue `gone` is not defined; define it or fix the name",
        ]
    );
}

#[test]
fn local_queue_bounds_and_estimation_errors_name_their_field() {
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: team-a, name: main}
spec:
  clusterQueue: ml
  resourceQuotas:
  - {name: nvidia.com/gpu, min: 8, max: 2}
  - {name: cpu, min: 1, max: 4, default: 6}
  - {name: memory, min: "-1", max: many}
  resourceEstimation: {enabled: true, historyWindow: last week, confidenceLevel: 1.5}
"#,
    );
    let lq = "LocalQueue team-a/main";
    let doc = "t.yaml (document 2)";
    assert_eq!(
        located(&errs),
        [
            (doc, lq, "spec.resourceQuotas[0]"),
            (doc, lq, "spec.resourceQuotas[1].default"),
            (doc, lq, "spec.resourceQuotas[2].min"),
            (doc, lq, "spec.resourceQuotas[2].max"),
            (doc, lq, "spec.resourceEstimation.historyWindow"),
            (doc, lq, "spec.resourceEstimation.confidenceLevel"),
        ]
    );
    let messages: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "min 8 is above max 2",
            "6 lies outside [min, max]",
            "-1 is negative; bounds must be ≥ 0",
            "`many` is not a Kubernetes quantity (expected e.g. `500m`, `2`, `1.5`, `32Gi`, `2e3`)",
            "`last week` is not a duration (expected Go syntax such as `100ms`, `30s`, `10m`, `1h30m`); or give a count of finished workloads",
            "1.5 is not in (0, 1]",
        ]
    );
}

#[test]
fn error_display_omits_an_empty_source_or_field() {
    let error = ConfigError {
        source: String::new(),
        object: "Cohort gpu".into(),
        field: String::new(),
        message: "broken".into(),
    };
    assert_eq!(error.to_string(), "Cohort gpu: broken");
    let errors = ConfigErrors(vec![
        error.clone(),
        ConfigError {
            source: "t.yaml (document 1)".into(),
            field: "spec.parent".into(),
            ..error
        },
    ]);
    assert_eq!(
        errors.to_string(),
        "Cohort gpu: broken\nt.yaml (document 1): Cohort gpu: spec.parent: broken"
    );
}

#[test]
fn an_adjustment_interval_under_the_minimum_is_refused() {
    // `0s` ran 36 million fair-share adjustments in ten simulated hours.
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: busy}
spec:
  scheduling: {adaptiveWeights: {enabled: true, adjustmentInterval: 0s}}
"#,
    );
    assert_eq!(
        located(&errs),
        [(
            "t.yaml (document 1)",
            "ClusterQueue busy",
            "spec.scheduling.adaptiveWeights.adjustmentInterval"
        )]
    );
    assert!(
        errs[0]
            .message
            .contains("is 0s, shorter than the minimum 1s"),
        "{}",
        errs[0].message
    );
}

/// The article's `priorityClass` on a (Local)Queue: read as its weight,
/// checked as a ClusterQueue's is.
#[test]
fn a_local_queues_priority_class_weight_is_read_and_checked() {
    let good = build(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: kubeflow, name: ai-queue}
spec: {clusterQueue: ml, priorityClass: {name: high-priority, weight: 1.5}}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: kubeflow, name: plain}
spec: {clusterQueue: ml, priorityClass: {name: no-weight}}
"#,
    );
    assert_eq!(good.local_queues[0].priority_weight, Some(1.5));
    assert_eq!(good.local_queues[1].priority_weight, None);
    let errs = errors(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: kubeflow, name: ai-queue}
spec: {clusterQueue: ml, priorityClass: {name: high-priority, weight: -1.5}}
"#,
    );
    assert_eq!(
        errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["t.yaml (document 2): LocalQueue kubeflow/ai-queue: spec.priorityClass.weight: -1.5 must be a finite number ≥ 0"]
    );
}

/// The builder of `yaml`, topology-aware (as the simulator builds it).
fn aware(yaml: &str) -> ClusterBuilder {
    let mut builder = builder(yaml);
    builder.topology_aware(true);
    builder
}

fn aware_errors(yaml: &str) -> Vec<ConfigError> {
    match aware(yaml).build() {
        Ok(cluster) => panic!("expected errors, got {cluster:?}"),
        Err(errors) => errors.0,
    }
}

#[test]
fn without_topology_awareness_topology_name_is_ignored() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: tas}\nspec: {topologyName: nowhere}\n";
    let cluster = build(yaml);
    assert!(!cluster.topology_aware);
    assert_eq!(cluster.flavors[0].topology, None);
}

const TOPOLOGY: &str = "
apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: dc}
spec:
  levels:
  - nodeLabel: example.com/block
  - nodeLabel: example.com/rack
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: tas}
spec: {topologyName: dc}
";

#[test]
fn a_flavor_names_its_topology() {
    let cluster = aware(TOPOLOGY).build().unwrap_or_else(|e| panic!("{e}"));
    let flavor = &cluster.flavors[cluster.flavor_id("tas").unwrap().index()];
    let topology = &cluster.topologies[flavor.topology.unwrap().index()];
    assert_eq!(topology.name, "dc");
    assert_eq!(topology.level("example.com/rack"), Some(1));
    assert_eq!(topology.levels.len(), 3);
}

#[test]
fn a_flavor_naming_a_missing_topology_is_an_error() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: tas}\nspec: {topologyName: nowhere}\n";
    let errors = aware_errors(yaml);
    assert_eq!(
        located(&errors),
        vec![(
            "t.yaml (document 1)",
            "ResourceFlavor tas",
            "spec.topologyName"
        )]
    );
    assert!(
        errors[0]
            .message
            .contains("Topology nowhere does not exist"),
        "{}",
        errors[0].message
    );
}

#[test]
fn a_topology_without_levels_or_with_a_label_twice_is_an_error() {
    let yaml = "
apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: empty}
spec: {levels: []}
---
apiVersion: arbiter.dev/v1alpha1
kind: Topology
metadata: {name: twice}
spec:
  levels:
  - nodeLabel: example.com/rack
  - nodeLabel: example.com/rack
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: tas}
spec: {topologyName: twice}
";
    let errors = aware_errors(yaml);
    assert_eq!(
        located(&errors),
        vec![
            ("t.yaml (document 1)", "Topology empty", "spec.levels"),
            (
                "t.yaml (document 2)",
                "Topology twice",
                "spec.levels[1].nodeLabel"
            ),
            (
                "t.yaml (document 3)",
                "ResourceFlavor tas",
                "spec.topologyName"
            ),
        ]
    );
    assert!(
        errors[1]
            .message
            .contains("example.com/rack is also level 0"),
        "{}",
        errors[1].message
    );
    assert!(
        errors[2].message.contains("Topology twice is invalid"),
        "{}",
        errors[2].message
    );
}

#[test]
fn an_invalid_topology_leaves_out_its_flavor_only() {
    let yaml = "
apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: empty}
spec: {levels: []}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: tas}
spec: {topologyName: empty}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: plain}
";
    let (cluster, inactive) = aware(yaml).build_lenient();
    let left_out: Vec<String> = inactive.iter().map(|i| i.object()).collect();
    assert_eq!(left_out, vec!["Topology empty", "ResourceFlavor tas"]);
    assert!(cluster.flavor_id("plain").is_some());
}

#[test]
fn hostname_is_only_ever_the_last_topology_level() {
    let yaml = "
apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: upside-down}
spec:
  levels:
  - nodeLabel: kubernetes.io/hostname
  - nodeLabel: example.com/rack
";
    let errors = aware_errors(yaml);
    assert_eq!(
        located(&errors),
        vec![(
            "t.yaml (document 1)",
            "Topology upside-down",
            "spec.levels[0].nodeLabel"
        )]
    );
    assert!(
        errors[0].message.contains("can only be the last"),
        "{}",
        errors[0].message
    );
}
