//! [`ClusterBuilder`]: collects the wire objects (ResourceFlavors, Cohorts,
//! ClusterQueues, LocalQueues, WorkloadPriorityClasses, Namespaces), each
//! with where it came from, and checks them into a [`Cluster`] in one
//! pass: names interned to dense ids, cohorts implied by ClusterQueues
//! created, the cohort tree checked for cycles, durations and policies
//! parsed (a queue's fields beyond names and quotas in `queue_fields`).
//! Every problem becomes a [`ConfigError`] naming the source, the object,
//! the field and the fix; it reports all it finds, except that a cohort
//! cycle stops it before the ClusterQueues. It must never do I/O or panic
//! on input. Called by the simulator's scenario loading.

use std::collections::BTreeMap;

use crate::model::api::{self, ResourceGroup, HOSTNAME_LABEL};
use crate::model::{selector, Amount};

use super::checked::{
    Cluster, ClusterQueue, ClusterQueueId, Cohort, CohortId, Flavor, FlavorId, Fungibility,
    LocalQueue, LocalQueueId, Namespace, PodsReadyPolicy, PriorityClass, ResourceBounds,
    ResourceId, Topology, TopologyId,
};
use super::error::{ConfigError, ConfigErrors};
use super::queue_fields::{self, fungibility, ReportError};
use super::resource_groups::quota_table;
use super::strategies::FairPreemptionStrategies;

/// Most levels a Topology may have (Kueue's `maxItems`).
const MAX_TOPOLOGY_LEVELS: usize = 16;

#[derive(Clone)]
pub(super) struct Sourced<T> {
    pub(super) source: String,
    pub(super) item: T,
}

/// Collects wire objects (with where they came from) and checks them.
#[derive(Clone, Default)]
pub struct ClusterBuilder {
    pub(super) flavors: Vec<Sourced<api::ResourceFlavor>>,
    pub(super) topologies: Vec<Sourced<api::Topology>>,
    topology_aware: bool,
    pub(super) cohorts: Vec<Sourced<api::Cohort>>,
    pub(super) cluster_queues: Vec<Sourced<api::ClusterQueue>>,
    pub(super) local_queues: Vec<Sourced<api::LocalQueue>>,
    pub(super) priority_classes: Vec<Sourced<api::WorkloadPriorityClass>>,
    namespaces: Vec<Sourced<(String, Namespace)>>,
    fair_sharing_everywhere: bool,
    pods_ready: Option<PodsReadyPolicy>,
    preemption_strategies: FairPreemptionStrategies,
    /// Resources named by workloads, so they get ids even if no queue covers them.
    extra_resources: Vec<String>,
}

fn object_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

impl ClusterBuilder {
    /// An empty builder.
    pub fn new() -> ClusterBuilder {
        ClusterBuilder::default()
    }
    /// Adds a ResourceFlavor read from `source`.
    pub fn flavor(&mut self, source: impl Into<String>, item: api::ResourceFlavor) {
        self.flavors.push(Sourced {
            source: source.into(),
            item,
        });
    }
    /// Makes the configuration topology-aware: the driver reads Topology
    /// objects, so `topologyName` must name one and pod sets' topology
    /// requests are honoured. Off unless called: both are ignored.
    pub fn topology_aware(&mut self, on: bool) {
        self.topology_aware = on;
    }
    /// Adds a Topology read from `source`.
    pub fn topology(&mut self, source: impl Into<String>, item: api::Topology) {
        self.topologies.push(Sourced {
            source: source.into(),
            item,
        });
    }
    /// Adds a Cohort read from `source`.
    pub fn cohort(&mut self, source: impl Into<String>, item: api::Cohort) {
        self.cohorts.push(Sourced {
            source: source.into(),
            item,
        });
    }
    /// Adds a ClusterQueue read from `source`.
    pub fn cluster_queue(&mut self, source: impl Into<String>, item: api::ClusterQueue) {
        self.cluster_queues.push(Sourced {
            source: source.into(),
            item,
        });
    }
    /// Adds a LocalQueue read from `source`.
    pub fn local_queue(&mut self, source: impl Into<String>, item: api::LocalQueue) {
        self.local_queues.push(Sourced {
            source: source.into(),
            item,
        });
    }
    /// Adds a WorkloadPriorityClass read from `source`.
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
    /// Adds the metadata of namespace `name`, read from `source`.
    pub fn namespace(&mut self, source: impl Into<String>, name: String, namespace: Namespace) {
        self.namespaces.push(Sourced {
            source: source.into(),
            item: (name, namespace),
        });
    }
    /// Turns fair sharing on for every cohort tree.
    pub fn fair_sharing_everywhere(&mut self, enabled: bool) {
        self.fair_sharing_everywhere = enabled;
    }
    /// Sets all-or-nothing admission (`waitForPodsReady`); `None`: off.
    pub fn pods_ready(&mut self, policy: Option<PodsReadyPolicy>) {
        self.pods_ready = policy;
    }
    /// Sets fair-sharing preemption's strategies (Kueue's
    /// `fairSharing.preemptionStrategies`); Kueue's default unless called.
    pub fn preemption_strategies(&mut self, strategies: FairPreemptionStrategies) {
        self.preemption_strategies = strategies;
    }
    /// Declares a resource even if no queue lists it.
    pub fn resource(&mut self, name: &str) {
        self.extra_resources.push(name.to_string());
    }

    /// Checks everything collected into a [`Cluster`], phase by phase:
    /// resource names, flavors, cohorts (a cycle stops here), ClusterQueues,
    /// priority classes, Namespaces, LocalQueues. All problems found, or
    /// the cluster.
    pub fn build(self) -> Result<Cluster, ConfigErrors> {
        let mut errors = Vec::new();
        let mut cluster = Cluster {
            fair_sharing_everywhere: self.fair_sharing_everywhere,
            pods_ready: self.pods_ready,
            preemption_strategies: self.preemption_strategies,
            topology_aware: self.topology_aware,
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
        self.intern_resources(&mut cluster);
        let topologies = self.check_topologies(&mut cluster, &mut err);
        self.check_flavors(&mut cluster, &topologies, &mut err);
        let cohorts = self.check_cohorts(&mut cluster, &mut err);
        if has_cohort_cycle(&cluster, &cohorts.sources, &mut err) {
            return Err(ConfigErrors(errors));
        }
        for s in &self.cluster_queues {
            check_cluster_queue(&mut cluster, &cohorts.ids, s, &mut err);
        }
        self.check_priority_classes(&mut cluster, &mut err);
        for s in &self.namespaces {
            cluster
                .namespaces
                .insert(s.item.0.clone(), s.item.1.clone());
        }
        for s in &self.local_queues {
            check_local_queue(&mut cluster, s, &mut err);
        }
        if errors.is_empty() {
            Ok(cluster)
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// Gives every resource an id: those the queues and cohorts cover, then
    /// those only workloads name, sorted for stable ids.
    fn intern_resources(&self, cluster: &mut Cluster) {
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
    }

    /// The Topologies, each name once, each with levels, each level's
    /// node label given and listed once; their ids by name.
    fn check_topologies(
        &self,
        cluster: &mut Cluster,
        err: &mut ReportError<'_>,
    ) -> BTreeMap<String, TopologyId> {
        let mut ids = BTreeMap::new();
        for s in &self.topologies {
            let name = object_name(&s.item.metadata);
            let object = format!("Topology {name}");
            if ids.contains_key(&name) {
                err(
                    &s.source,
                    object,
                    "metadata.name".into(),
                    "defined twice; rename one".into(),
                );
                continue;
            }
            let levels = &s.item.spec.levels;
            let mut valid = true;
            if levels.is_empty() {
                err(
                    &s.source,
                    object.clone(),
                    "spec.levels".into(),
                    "is empty; list the levels' node labels, widest first (e.g. a block label, a rack label, kubernetes.io/hostname)".into(),
                );
                valid = false;
            }
            if levels.len() > MAX_TOPOLOGY_LEVELS {
                err(
                    &s.source,
                    object.clone(),
                    "spec.levels".into(),
                    format!(
                        "has {} levels; a Topology has at most {MAX_TOPOLOGY_LEVELS} (Kueue's limit)",
                        levels.len()
                    ),
                );
                valid = false;
            }
            for (i, level) in levels.iter().enumerate() {
                let field = format!("spec.levels[{i}].nodeLabel");
                if level.node_label == HOSTNAME_LABEL && i + 1 != levels.len() {
                    err(
                        &s.source,
                        object.clone(),
                        field,
                        format!("{HOSTNAME_LABEL} can only be the last (narrowest) level, as in Kueue; move it to the end"),
                    );
                    valid = false;
                } else if level.node_label.is_empty() {
                    err(
                        &s.source,
                        object.clone(),
                        field,
                        "is empty; give the node label of this level".into(),
                    );
                    valid = false;
                } else if let Some(first) = levels[..i]
                    .iter()
                    .position(|l| l.node_label == level.node_label)
                {
                    err(
                        &s.source,
                        object.clone(),
                        field,
                        format!(
                            "{} is also level {first}; each level needs its own node label",
                            level.node_label
                        ),
                    );
                    valid = false;
                }
            }
            if valid {
                ids.insert(name.clone(), TopologyId(cluster.topologies.len() as u16));
                cluster.topologies.push(Topology {
                    name,
                    levels: levels.iter().map(|l| l.node_label.clone()).collect(),
                });
            }
        }
        ids
    }

    /// The ResourceFlavors, each name once, each Topology named existing.
    fn check_flavors(
        &self,
        cluster: &mut Cluster,
        topologies: &BTreeMap<String, TopologyId>,
        err: &mut ReportError<'_>,
    ) {
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
            let named = s.item.spec.topology_name.as_ref();
            let topology = match named.filter(|_| self.topology_aware) {
                None => None,
                Some(topology) => match topologies.get(topology) {
                    Some(&id) => Some(id),
                    None => {
                        let message = if self
                            .topologies
                            .iter()
                            .any(|t| t.item.metadata.name.as_deref() == Some(topology.as_str()))
                        {
                            format!("Topology {topology} is invalid (see its own errors); fix it")
                        } else {
                            format!("Topology {topology} does not exist; create it (kind: Topology) or fix the name")
                        };
                        err(
                            &s.source,
                            format!("ResourceFlavor {name}"),
                            "spec.topologyName".into(),
                            message,
                        );
                        continue;
                    }
                },
            };
            cluster
                .flavor_ids
                .insert(name.clone(), FlavorId(cluster.flavors.len() as u16));
            cluster.flavors.push(Flavor {
                name,
                node_labels: s.item.spec.node_labels.clone(),
                node_taints: s.item.spec.node_taints.clone(),
                tolerations: s.item.spec.tolerations.clone(),
                topology,
            });
        }
    }

    /// The cohorts: the Cohort objects first (each name once, with its
    /// quotas and weight), then those only named by a ClusterQueue or as a
    /// parent; then each one's parent resolved.
    fn check_cohorts(&self, cluster: &mut Cluster, err: &mut ReportError<'_>) -> CohortNames {
        let mut cohorts = CohortNames::default();
        let mut cohort_parents: Vec<Option<String>> = Vec::new();
        let frs = cluster.flavor_resource_count();
        for s in &self.cohorts {
            let name = object_name(&s.item.metadata);
            if cohorts.ids.contains_key(&name) {
                err(
                    &s.source,
                    format!("Cohort {name}"),
                    "metadata.name".into(),
                    "defined twice; rename one".into(),
                );
                continue;
            }
            cohorts
                .ids
                .insert(name.clone(), CohortId(cluster.cohorts.len() as u32));
            cohort_parents.push(s.item.spec.parent.clone());
            cohorts.sources.push(s.source.clone());
            let object = format!("Cohort {name}");
            let quotas = quota_table(
                cluster,
                &s.item.spec.resource_groups,
                &s.source,
                &object,
                frs,
                err,
            )
            .1;
            cluster.cohorts.push(Cohort {
                name,
                parent: None,
                quotas,
                fair_weight: weight_of(s.item.spec.fair_sharing.as_ref(), &s.source, &object, err),
            });
        }
        let implied: Vec<String> = self
            .cluster_queues
            .iter()
            .filter_map(|s| s.item.spec.cohort.clone())
            .chain(cohort_parents.iter().flatten().cloned())
            .collect();
        for name in implied {
            if !cohorts.ids.contains_key(&name) {
                cohorts
                    .ids
                    .insert(name.clone(), CohortId(cluster.cohorts.len() as u32));
                cohort_parents.push(None);
                cohorts.sources.push(String::new());
                cluster.cohorts.push(Cohort {
                    name,
                    parent: None,
                    quotas: vec![None; frs],
                    fair_weight: 1.0,
                });
            }
        }
        for (i, parent) in cohort_parents.iter().enumerate() {
            cluster.cohorts[i].parent = parent.as_ref().and_then(|p| cohorts.ids.get(p).copied());
        }
        cohorts
    }

    /// The WorkloadPriorityClasses, each name once, weights finite and
    /// non-negative.
    fn check_priority_classes(&self, cluster: &mut Cluster, err: &mut ReportError<'_>) {
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
    }
}

/// The cohorts by name, and per cohort where it was defined (empty for
/// one only named by others).
#[derive(Default)]
struct CohortNames {
    ids: BTreeMap<String, CohortId>,
    sources: Vec<String>,
}

/// Reports each cohort whose parent chain comes back to it; true if there
/// is one (a cohort tree must have a root).
fn has_cohort_cycle(cluster: &Cluster, sources: &[String], err: &mut ReportError<'_>) -> bool {
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
                    &sources[start],
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
    has_cycle
}

/// Checks one ClusterQueue into `cluster` (unless its name is taken): its
/// quotas, cohort, namespace selector and every policy field.
fn check_cluster_queue(
    cluster: &mut Cluster,
    cohort_ids: &BTreeMap<String, CohortId>,
    s: &Sourced<api::ClusterQueue>,
    err: &mut ReportError<'_>,
) {
    let name = object_name(&s.item.metadata);
    let object = format!("ClusterQueue {name}");
    if cluster.cluster_queue_ids.contains_key(&name) {
        err(
            &s.source,
            object,
            "metadata.name".into(),
            "defined twice; rename one".into(),
        );
        return;
    }
    let (source, spec) = (s.source.as_str(), &s.item.spec);
    let frs = cluster.flavor_resource_count();
    let (groups, quotas) = quota_table(cluster, &spec.resource_groups, source, &object, frs, err);
    let cohort = spec
        .cohort
        .as_ref()
        .and_then(|c| cohort_ids.get(c).copied());
    if cohort.is_none() {
        queue_fields::check_limits_need_cohort(cluster, &quotas, source, &object, err);
    }
    if let Some(selector) = &spec.namespace_selector {
        if let Err(message) = selector::check_label_selector(selector) {
            err(
                source,
                object.clone(),
                "spec.namespaceSelector".into(),
                message,
            );
        }
    }
    let ff = spec.flavor_fungibility.clone().unwrap_or_default();
    let preemption = spec.preemption.clone().unwrap_or_default();
    let scheduling = spec.scheduling.clone().unwrap_or_default();
    let adaptive_interval = queue_fields::adaptive_interval(&scheduling, source, &object, err);
    let usage_half_life = queue_fields::usage_half_life(&scheduling, source, &object, err);
    let retry = queue_fields::retry(spec.retry_policy.as_ref(), source, &object, err);
    let reclaim = spec.resource_reclaim.as_ref();
    let reclaim_timeout = queue_fields::reclaim_timeout(reclaim, source, &object, err);
    let autoscaling = queue_fields::autoscaling(spec.autoscaling.as_ref(), source, &object, err);
    queue_fields::check_preference(&ff, source, &object, err);
    queue_fields::check_borrow_within_cohort(&preemption, source, &object, err);
    let priority_weight =
        class_weight(spec.priority_class.as_ref(), source, &object, err).unwrap_or(1.0);
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
        when_can_borrow: fungibility(ff.when_can_borrow, Fungibility::MayStopSearch),
        when_can_preempt: fungibility(ff.when_can_preempt, Fungibility::TryNextFlavor),
        preference: ff.preference.unwrap_or_default(),
        within_cluster_queue: preemption.within_cluster_queue.unwrap_or_default(),
        reclaim_within_cohort: preemption.reclaim_within_cohort.unwrap_or_default(),
        borrow_within_cohort: preemption
            .borrow_within_cohort
            .as_ref()
            .filter(|b| b.policy == api::BorrowWithinCohortPolicy::LowerPriority)
            .map(|b| b.max_priority_threshold),
        fair_weight: weight_of(spec.fair_sharing.as_ref(), source, &object, err),
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

/// Checks one LocalQueue into `cluster` (unless its ClusterQueue is
/// unknown or its name taken in its namespace): its resource bounds,
/// estimation and priority-class weight.
fn check_local_queue(
    cluster: &mut Cluster,
    s: &Sourced<api::LocalQueue>,
    err: &mut ReportError<'_>,
) {
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
        return;
    };
    let bounds: Vec<ResourceBounds> = spec
        .resource_quotas
        .iter()
        .enumerate()
        .map(|(i, rq)| queue_fields::resource_bounds(i, rq, &s.source, &object, err))
        .collect();
    let estimation =
        queue_fields::estimation(spec.resource_estimation.as_ref(), &s.source, &object, err);
    let key = (namespace.clone(), name.clone());
    if cluster.local_queue_ids.contains_key(&key) {
        err(
            &s.source,
            object,
            "metadata.name".into(),
            "defined twice in this namespace; rename one".into(),
        );
        return;
    }
    cluster
        .local_queue_ids
        .insert(key, LocalQueueId(cluster.local_queues.len() as u32));
    cluster.local_queues.push(LocalQueue {
        namespace,
        name,
        cluster_queue: cq,
        priority: spec.priority,
        priority_weight: class_weight(spec.priority_class.as_ref(), &s.source, &object, err),
        resource_bounds: bounds,
        estimation,
        stop_policy: spec.stop_policy.unwrap_or_default(),
    });
}

/// The weight of a queue's `priorityClass`, if it gives one; a bad one is
/// reported and read as 1.
fn class_weight(
    class: Option<&api::PriorityClassWeight>,
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
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
    err: &mut ReportError<'_>,
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
