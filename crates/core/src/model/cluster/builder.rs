//! [`ClusterBuilder`]: collects the wire objects (ResourceFlavors, Cohorts,
//! ClusterQueues, LocalQueues, WorkloadPriorityClasses, Namespaces), each
//! with where it came from, and checks them into a [`Cluster`] in one
//! pass: names interned to dense ids, cohorts implied by ClusterQueues
//! created, the cohort tree checked for cycles, durations and policies
//! parsed. Every problem becomes a [`ConfigError`] naming the source, the
//! object, the field and the fix; it reports all it finds, except that a
//! cohort cycle stops it before the ClusterQueues. It must never do I/O or
//! panic on input. Called by the simulator's scenario loading.

use std::collections::BTreeMap;

use crate::model::api::{self, FungibilityPolicy, ResourceGroup};
use crate::model::{selector, Amount, Millis};

use super::checked::{
    AutoscalingPolicy, Cluster, ClusterQueue, ClusterQueueId, Cohort, CohortId, Estimation, Flavor,
    FlavorId, FlavorResource, Fungibility, HistoryWindow, LocalQueue, LocalQueueId, Namespace,
    PodsReadyPolicy, PriorityClass, ResourceBounds, ResourceId, RetryPolicy,
};
use super::error::{ConfigError, ConfigErrors};
use super::resource_groups::quota_table;

#[derive(Clone)]
pub(super) struct Sourced<T> {
    pub(super) source: String,
    pub(super) item: T,
}

/// Collects wire objects (with where they came from) and checks them.
#[derive(Clone, Default)]
pub struct ClusterBuilder {
    pub(super) flavors: Vec<Sourced<api::ResourceFlavor>>,
    pub(super) cohorts: Vec<Sourced<api::Cohort>>,
    pub(super) cluster_queues: Vec<Sourced<api::ClusterQueue>>,
    pub(super) local_queues: Vec<Sourced<api::LocalQueue>>,
    pub(super) priority_classes: Vec<Sourced<api::WorkloadPriorityClass>>,
    namespaces: Vec<Sourced<(String, Namespace)>>,
    fair_sharing_everywhere: bool,
    pods_ready: Option<PodsReadyPolicy>,
    /// Resources named by workloads, so they get ids even if no queue covers them.
    extra_resources: Vec<String>,
}

fn object_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

impl ClusterBuilder {
    pub fn new() -> ClusterBuilder {
        ClusterBuilder::default()
    }
    pub fn flavor(&mut self, source: impl Into<String>, item: api::ResourceFlavor) {
        self.flavors.push(Sourced {
            source: source.into(),
            item,
        });
    }
    pub fn cohort(&mut self, source: impl Into<String>, item: api::Cohort) {
        self.cohorts.push(Sourced {
            source: source.into(),
            item,
        });
    }
    pub fn cluster_queue(&mut self, source: impl Into<String>, item: api::ClusterQueue) {
        self.cluster_queues.push(Sourced {
            source: source.into(),
            item,
        });
    }
    pub fn local_queue(&mut self, source: impl Into<String>, item: api::LocalQueue) {
        self.local_queues.push(Sourced {
            source: source.into(),
            item,
        });
    }
    pub fn priority_class(&mut self, source: impl Into<String>, item: api::WorkloadPriorityClass) {
        self.priority_classes.push(Sourced {
            source: source.into(),
            item,
        });
    }
    /// Takes `manifest` if it is a queue object (ResourceFlavor, Cohort,
    /// ClusterQueue, LocalQueue, WorkloadPriorityClass); gives any other
    /// kind back for the caller to place.
    pub fn add(
        &mut self,
        source: impl Into<String>,
        manifest: crate::model::load::Manifest,
    ) -> Option<crate::model::load::Manifest> {
        use crate::model::load::Manifest;
        match manifest {
            Manifest::ResourceFlavor(x) => self.flavor(source, x),
            Manifest::Cohort(x) => self.cohort(source, x),
            Manifest::ClusterQueue(x) => self.cluster_queue(source, *x),
            Manifest::LocalQueue(x) => self.local_queue(source, x),
            Manifest::WorkloadPriorityClass(x) => self.priority_class(source, x),
            other => return Some(other),
        }
        None
    }
    pub fn namespace(&mut self, source: impl Into<String>, name: String, namespace: Namespace) {
        self.namespaces.push(Sourced {
            source: source.into(),
            item: (name, namespace),
        });
    }
    pub fn fair_sharing_everywhere(&mut self, enabled: bool) {
        self.fair_sharing_everywhere = enabled;
    }
    pub fn pods_ready(&mut self, policy: Option<PodsReadyPolicy>) {
        self.pods_ready = policy;
    }
    pub fn resource(&mut self, name: &str) {
        self.extra_resources.push(name.to_string());
    }

    pub fn build(self) -> Result<Cluster, ConfigErrors> {
        let mut errors = Vec::new();
        let mut cluster = Cluster {
            fair_sharing_everywhere: self.fair_sharing_everywhere,
            pods_ready: self.pods_ready,
            ..Cluster::default()
        };
        let mut err = |source: &str, object: String, field: String, message: String| {
            errors.push(ConfigError {
                source: source.to_string(),
                object,
                field,
                message,
            })
        };

        // Resource names: every covered resource, then extras, sorted for stable ids.
        let groups_of = |groups: &[ResourceGroup]| -> Vec<String> {
            groups
                .iter()
                .flat_map(|g| g.covered_resources.iter().cloned())
                .collect()
        };
        let mut names: Vec<String> = self
            .cluster_queues
            .iter()
            .flat_map(|s| groups_of(&s.item.spec.resource_groups))
            .chain(
                self.cohorts
                    .iter()
                    .flat_map(|s| groups_of(&s.item.spec.resource_groups)),
            )
            .chain(self.extra_resources.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        for name in names {
            let id = ResourceId(cluster.resources.len() as u16);
            cluster.resource_ids.insert(name.clone(), id);
            cluster.resources.push(name);
        }

        for s in &self.flavors {
            let name = object_name(&s.item.metadata);
            if cluster.flavor_ids.contains_key(&name) {
                err(
                    &s.source,
                    format!("ResourceFlavor {name}"),
                    "metadata.name".into(),
                    "defined twice; rename one".into(),
                );
                continue;
            }
            cluster
                .flavor_ids
                .insert(name.clone(), FlavorId(cluster.flavors.len() as u16));
            cluster.flavors.push(Flavor {
                name,
                node_labels: s.item.spec.node_labels.clone(),
                node_taints: s.item.spec.node_taints.clone(),
                tolerations: s.item.spec.tolerations.clone(),
            });
        }

        // Cohorts: explicit objects first, then those implied by ClusterQueues.
        let mut cohort_ids: BTreeMap<String, CohortId> = BTreeMap::new();
        let mut cohort_parents: Vec<Option<String>> = Vec::new();
        let frs = cluster.flavor_resource_count();
        let mut cohort_sources: Vec<String> = Vec::new();
        for s in &self.cohorts {
            let name = object_name(&s.item.metadata);
            if cohort_ids.contains_key(&name) {
                err(
                    &s.source,
                    format!("Cohort {name}"),
                    "metadata.name".into(),
                    "defined twice; rename one".into(),
                );
                continue;
            }
            cohort_ids.insert(name.clone(), CohortId(cluster.cohorts.len() as u32));
            cohort_parents.push(s.item.spec.parent.clone());
            cohort_sources.push(s.source.clone());
            let object = format!("Cohort {name}");
            let quotas = quota_table(
                &cluster,
                &s.item.spec.resource_groups,
                &s.source,
                &object,
                frs,
                &mut err,
            )
            .1;
            cluster.cohorts.push(Cohort {
                name,
                parent: None,
                quotas,
                fair_weight: weight_of(
                    s.item.spec.fair_sharing.as_ref(),
                    &s.source,
                    &object,
                    &mut err,
                ),
            });
        }
        let implied: Vec<String> = self
            .cluster_queues
            .iter()
            .filter_map(|s| s.item.spec.cohort.clone())
            .chain(cohort_parents.iter().flatten().cloned())
            .collect();
        for name in implied {
            if !cohort_ids.contains_key(&name) {
                cohort_ids.insert(name.clone(), CohortId(cluster.cohorts.len() as u32));
                cohort_parents.push(None);
                cohort_sources.push(String::new());
                cluster.cohorts.push(Cohort {
                    name,
                    parent: None,
                    quotas: vec![None; frs],
                    fair_weight: 1.0,
                });
            }
        }
        for (i, parent) in cohort_parents.iter().enumerate() {
            cluster.cohorts[i].parent = parent.as_ref().and_then(|p| cohort_ids.get(p).copied());
        }
        let mut has_cycle = false;
        #[allow(clippy::needless_range_loop)]
        for start in 0..cluster.cohorts.len() {
            let mut chain = vec![start];
            let mut current = cluster.cohorts[start].parent;
            while let Some(next) = current {
                if next.index() == start {
                    let path: Vec<&str> = chain
                        .iter()
                        .chain(std::iter::once(&start))
                        .map(|&i| cluster.cohorts[i].name.as_str())
                        .collect();
                    err(
                        &cohort_sources[start],
                        format!("Cohort {}", cluster.cohorts[start].name),
                        "spec.parent".into(),
                        format!(
                            "parent chain {} is a cycle; a cohort tree must have a root",
                            path.join(" → ")
                        ),
                    );
                    has_cycle = true;
                    break;
                }
                if chain.len() > cluster.cohorts.len() {
                    break;
                }
                chain.push(next.index());
                current = cluster.cohorts[next.index()].parent;
            }
        }
        if has_cycle {
            return Err(ConfigErrors(errors));
        }

        for s in &self.cluster_queues {
            let name = object_name(&s.item.metadata);
            let object = format!("ClusterQueue {name}");
            if cluster.cluster_queue_ids.contains_key(&name) {
                err(
                    &s.source,
                    object,
                    "metadata.name".into(),
                    "defined twice; rename one".into(),
                );
                continue;
            }
            let spec = &s.item.spec;
            let (groups, quotas) = quota_table(
                &cluster,
                &spec.resource_groups,
                &s.source,
                &object,
                frs,
                &mut err,
            );
            let cohort = spec
                .cohort
                .as_ref()
                .and_then(|c| cohort_ids.get(c).copied());
            if cohort.is_none() {
                for (fr, quota) in quotas.iter().enumerate() {
                    if let Some(q) = quota {
                        if q.borrowing_limit.is_some() || q.lending_limit.is_some() {
                            let (f, r) = cluster.split(FlavorResource(fr as u32));
                            err(
                                &s.source,
                                object.clone(),
                                format!("spec.resourceGroups (flavor {}, resource {})", cluster.flavors[f.index()].name, cluster.resources[r.index()]),
                                "borrowingLimit/lendingLimit need a cohort to borrow from or lend to; set spec.cohort or remove the limit".into(),
                            );
                            break;
                        }
                    }
                }
            }
            if let Some(selector) = &spec.namespace_selector {
                if let Err(message) = selector::check_label_selector(selector) {
                    err(
                        &s.source,
                        object.clone(),
                        "spec.namespaceSelector".into(),
                        message,
                    );
                }
            }
            let fungibility = |policy: Option<FungibilityPolicy>, default: Fungibility| match policy
            {
                None => default,
                Some(FungibilityPolicy::TryNextFlavor) => Fungibility::TryNextFlavor,
                Some(_) => Fungibility::MayStopSearch,
            };
            let ff = spec.flavor_fungibility.clone().unwrap_or_default();
            let preemption = spec.preemption.clone().unwrap_or_default();
            let duration = |text: &Option<String>,
                            field: &str,
                            default: Millis,
                            err: &mut dyn FnMut(&str, String, String, String)|
             -> Millis {
                match text {
                    None => default,
                    Some(t) => Millis::parse(t).unwrap_or_else(|e| {
                        err(&s.source, object.clone(), field.to_string(), e.to_string());
                        default
                    }),
                }
            };
            let scheduling = spec.scheduling.clone().unwrap_or_default();
            let adaptive_interval = match &scheduling.adaptive_weights {
                Some(a) if a.enabled => {
                    let field = "spec.scheduling.adaptiveWeights.adjustmentInterval";
                    let interval = duration(
                        &a.adjustment_interval,
                        field,
                        Millis::from_secs(300),
                        &mut err,
                    );
                    let min = crate::model::limits::MIN_ADJUSTMENT_INTERVAL;
                    if interval < min {
                        err(
                            &s.source,
                            object.clone(),
                            field.to_string(),
                            format!("is {interval}, shorter than the minimum {min}; weights adjusted more often than that only cost cycles"),
                        );
                    }
                    Some(interval.max(min))
                }
                _ => None,
            };
            let usage_half_life = duration(
                &scheduling
                    .adaptive_weights
                    .as_ref()
                    .and_then(|a| a.usage_half_life.clone()),
                "spec.scheduling.adaptiveWeights.usageHalfLife",
                Millis::from_secs(3600),
                &mut err,
            )
            .max(Millis(1));
            let retry = spec.retry_policy.as_ref().map(|r| RetryPolicy {
                max_retries: r.max_retries.unwrap_or(RetryPolicy::DEFAULT.max_retries),
                backoff: duration(
                    &r.backoff_duration,
                    "spec.retryPolicy.backoffDuration",
                    RetryPolicy::DEFAULT.backoff,
                    &mut err,
                ),
            });
            let reclaim_timeout = match &spec.resource_reclaim {
                Some(r) if r.enabled => match &r.reclaim_timeout {
                    None => {
                        err(
                            &s.source,
                            object.clone(),
                            "spec.resourceReclaim.reclaimTimeout".into(),
                            "required when resourceReclaim is enabled (e.g. `2h`)".into(),
                        );
                        None
                    }
                    t => Some(duration(
                        t,
                        "spec.resourceReclaim.reclaimTimeout",
                        Millis::MAX,
                        &mut err,
                    )),
                },
                _ => None,
            };
            let autoscaling = match &spec.autoscaling {
                Some(a) if a.enabled => {
                    if let (Some(min), Some(max)) = (a.min_replicas, a.max_replicas) {
                        if min > max {
                            err(
                                &s.source,
                                object.clone(),
                                "spec.autoscaling".into(),
                                format!("minReplicas {min} is above maxReplicas {max}"),
                            );
                        }
                    }
                    let target = a.target_utilization.unwrap_or(80.0);
                    if !(target > 0.0 && target <= 100.0) {
                        err(
                            &s.source,
                            object.clone(),
                            "spec.autoscaling.targetUtilization".into(),
                            format!("{target} is not a percentage in (0, 100]"),
                        );
                    }
                    Some(AutoscalingPolicy {
                        min_replicas: a.min_replicas,
                        max_replicas: a.max_replicas,
                        target_utilization: target,
                    })
                }
                _ => None,
            };
            let when_can_borrow = fungibility(ff.when_can_borrow, Fungibility::MayStopSearch);
            let when_can_preempt = fungibility(ff.when_can_preempt, Fungibility::TryNextFlavor);
            if ff.preference.is_some()
                && (when_can_borrow, when_can_preempt)
                    != (Fungibility::TryNextFlavor, Fungibility::TryNextFlavor)
            {
                // Kueue's API server refuses it the same way.
                err(
                    &s.source,
                    object.clone(),
                    "spec.flavorFungibility.preference".into(),
                    "may only be set when whenCanBorrow and whenCanPreempt are both TryNextFlavor; set them or drop preference".into(),
                );
            }
            if preemption
                .borrow_within_cohort
                .as_ref()
                .is_some_and(|b| b.policy != api::BorrowWithinCohortPolicy::Never)
                && preemption.reclaim_within_cohort.unwrap_or_default()
                    == api::ReclaimWithinCohort::Never
            {
                // Kueue's API server refuses it the same way.
                err(
                    &s.source,
                    object.clone(),
                    "spec.preemption.borrowWithinCohort.policy".into(),
                    "needs reclaimWithinCohort other than Never (preempting while borrowing is reclaiming); set reclaimWithinCohort or make the policy Never".into(),
                );
            }
            let priority_weight =
                class_weight(spec.priority_class.as_ref(), &s.source, &object, &mut err)
                    .unwrap_or(1.0);
            cluster.cluster_queue_ids.insert(
                name.clone(),
                ClusterQueueId(cluster.cluster_queues.len() as u32),
            );
            cluster.cluster_queues.push(ClusterQueue {
                name,
                cohort,
                groups,
                quotas,
                strategy: spec.queueing_strategy.unwrap_or_default(),
                namespace_selector: spec.namespace_selector.clone(),
                when_can_borrow,
                when_can_preempt,
                preference: ff.preference.unwrap_or_default(),
                within_cluster_queue: preemption.within_cluster_queue.unwrap_or_default(),
                reclaim_within_cohort: preemption.reclaim_within_cohort.unwrap_or_default(),
                borrow_within_cohort: preemption
                    .borrow_within_cohort
                    .as_ref()
                    .filter(|b| b.policy == api::BorrowWithinCohortPolicy::LowerPriority)
                    .map(|b| b.max_priority_threshold),
                fair_weight: weight_of(spec.fair_sharing.as_ref(), &s.source, &object, &mut err),
                stop_policy: spec.stop_policy.unwrap_or_default(),
                priority_weight,
                algorithm: scheduling.algorithm.unwrap_or_default(),
                adaptive_interval,
                usage_half_life,
                autoscaling,
                retry,
                reclaim_timeout,
            });
        }

        for s in &self.priority_classes {
            let name = object_name(&s.item.metadata);
            let object = format!("WorkloadPriorityClass {name}");
            let weight = s.item.weight.unwrap_or(1.0);
            if !(weight.is_finite() && weight >= 0.0) {
                err(
                    &s.source,
                    object.clone(),
                    "weight".into(),
                    format!("{weight} must be a finite number ≥ 0"),
                );
            }
            if cluster
                .priority_classes
                .insert(
                    name,
                    PriorityClass {
                        value: s.item.value,
                        weight,
                    },
                )
                .is_some()
            {
                err(
                    &s.source,
                    object,
                    "metadata.name".into(),
                    "defined twice; rename one".into(),
                );
            }
        }

        for s in &self.namespaces {
            cluster
                .namespaces
                .insert(s.item.0.clone(), s.item.1.clone());
        }

        for s in &self.local_queues {
            let name = object_name(&s.item.metadata);
            let namespace = s
                .item
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_string());
            let object = format!("LocalQueue {namespace}/{name}");
            let spec = &s.item.spec;
            let Some(cq) = cluster.cluster_queue_id(&spec.cluster_queue) else {
                err(
                    &s.source,
                    object,
                    "spec.clusterQueue".into(),
                    format!(
                        "ClusterQueue `{}` is not defined; define it or fix the name",
                        spec.cluster_queue
                    ),
                );
                continue;
            };
            let mut bounds = Vec::new();
            for (i, rq) in spec.resource_quotas.iter().enumerate() {
                let mut parse =
                    |q: &Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
                     what: &str| {
                        q.as_ref().and_then(|q| match Amount::from_quantity(q) {
                            Ok(a) if a.is_negative() => {
                                err(
                                    &s.source,
                                    object.clone(),
                                    format!("spec.resourceQuotas[{i}].{what}"),
                                    format!("{a} is negative; bounds must be ≥ 0"),
                                );
                                None
                            }
                            Ok(a) => Some(a),
                            Err(e) => {
                                err(
                                    &s.source,
                                    object.clone(),
                                    format!("spec.resourceQuotas[{i}].{what}"),
                                    e.to_string(),
                                );
                                None
                            }
                        })
                    };
                let b = ResourceBounds {
                    resource: rq.name.clone(),
                    min: parse(&rq.min, "min"),
                    max: parse(&rq.max, "max"),
                    default: parse(&rq.default, "default"),
                };
                if let (Some(min), Some(max)) = (b.min, b.max) {
                    if min > max {
                        err(
                            &s.source,
                            object.clone(),
                            format!("spec.resourceQuotas[{i}]"),
                            format!("min {min} is above max {max}"),
                        );
                    }
                }
                if let Some(d) = b.default {
                    if b.min.is_some_and(|m| d < m) || b.max.is_some_and(|m| d > m) {
                        err(
                            &s.source,
                            object.clone(),
                            format!("spec.resourceQuotas[{i}].default"),
                            format!("{d} lies outside [min, max]"),
                        );
                    }
                }
                bounds.push(b);
            }
            let estimation = match &spec.resource_estimation {
                Some(e) if e.enabled => {
                    let window = match &e.history_window {
                        None => HistoryWindow::Count(100),
                        Some(api::HistoryWindow::Count(n)) => HistoryWindow::Count(*n),
                        Some(api::HistoryWindow::Duration(t)) => match Millis::parse(t) {
                            Ok(d) => HistoryWindow::Duration(d),
                            Err(e) => {
                                err(
                                    &s.source,
                                    object.clone(),
                                    "spec.resourceEstimation.historyWindow".into(),
                                    format!("{e}; or give a count of finished workloads"),
                                );
                                HistoryWindow::Count(100)
                            }
                        },
                    };
                    let confidence = e.confidence_level.unwrap_or(0.9);
                    if !(confidence > 0.0 && confidence <= 1.0) {
                        err(
                            &s.source,
                            object.clone(),
                            "spec.resourceEstimation.confidenceLevel".into(),
                            format!("{confidence} is not in (0, 1]"),
                        );
                    }
                    Some(Estimation { window, confidence })
                }
                _ => None,
            };
            let key = (namespace.clone(), name.clone());
            if cluster.local_queue_ids.contains_key(&key) {
                err(
                    &s.source,
                    object,
                    "metadata.name".into(),
                    "defined twice in this namespace; rename one".into(),
                );
                continue;
            }
            cluster
                .local_queue_ids
                .insert(key, LocalQueueId(cluster.local_queues.len() as u32));
            cluster.local_queues.push(LocalQueue {
                namespace,
                name,
                cluster_queue: cq,
                priority: spec.priority,
                priority_weight: class_weight(
                    spec.priority_class.as_ref(),
                    &s.source,
                    &object,
                    &mut err,
                ),
                resource_bounds: bounds,
                estimation,
                stop_policy: spec.stop_policy.unwrap_or_default(),
            });
        }

        if errors.is_empty() {
            Ok(cluster)
        } else {
            Err(ConfigErrors(errors))
        }
    }
}

/// The weight of a queue's `priorityClass`, if it gives one; a bad one is
/// reported and read as 1.
fn class_weight(
    class: Option<&api::PriorityClassWeight>,
    source: &str,
    object: &str,
    err: &mut dyn FnMut(&str, String, String, String),
) -> Option<f64> {
    let weight = class?.weight?;
    if weight.is_finite() && weight >= 0.0 {
        Some(weight)
    } else {
        err(
            source,
            object.to_string(),
            "spec.priorityClass.weight".into(),
            format!("{weight} must be a finite number ≥ 0"),
        );
        Some(1.0)
    }
}

fn weight_of(
    fair: Option<&api::FairSharing>,
    source: &str,
    object: &str,
    err: &mut dyn FnMut(&str, String, String, String),
) -> f64 {
    match fair.and_then(|f| f.weight.as_ref()) {
        None => 1.0,
        Some(q) => match Amount::from_quantity(q) {
            Ok(a) if !a.is_negative() => a.as_f64(),
            Ok(a) => {
                err(
                    source,
                    object.to_string(),
                    "spec.fairSharing.weight".into(),
                    format!("{a} is negative; weights must be ≥ 0"),
                );
                1.0
            }
            Err(e) => {
                err(
                    source,
                    object.to_string(),
                    "spec.fairSharing.weight".into(),
                    e.to_string(),
                );
                1.0
            }
        },
    }
}
