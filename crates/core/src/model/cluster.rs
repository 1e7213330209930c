//! The checked cluster configuration: flavors, cohorts, ClusterQueues,
//! LocalQueues, priority classes and namespaces, with names resolved to
//! dense ids and quantities parsed. Built once from the wire types by
//! [`ClusterBuilder`]; every problem becomes a [`ConfigError`] naming the
//! source, the object, the field and the fix. The scheduler core reads only
//! this. Pure: no I/O.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::api::{
    self, FungibilityPolicy, QueueingStrategy, ReclaimWithinCohort, ResourceGroup,
    SchedulingAlgorithm, StopPolicy, WithinClusterQueue,
};
use super::{selector, Amount, Millis};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub $inner);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}
id_type!(/// A resource name (`cpu`, `nvidia.com/gpu`), interned.
    ResourceId(u16));
id_type!(/// A ResourceFlavor.
    FlavorId(u16));
id_type!(/// A (flavor, resource) pair, dense: `flavor * resources + resource`.
    FlavorResource(u32));
id_type!(/// A ClusterQueue.
    ClusterQueueId(u32));
id_type!(/// A cohort (explicit or implied by a ClusterQueue's `cohort`).
    CohortId(u32));
id_type!(/// A LocalQueue.
    LocalQueueId(u32));

/// Quota of one (flavor, resource) in a ClusterQueue or Cohort.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quota {
    pub nominal: Amount,
    pub borrowing_limit: Option<Amount>,
    pub lending_limit: Option<Amount>,
}

#[derive(Clone, Debug)]
pub struct Flavor {
    pub name: String,
    pub node_labels: BTreeMap<String, String>,
    pub node_taints: Vec<Taint>,
    pub tolerations: Vec<Toleration>,
}

/// Resources assigned together, and the flavors to try in order.
#[derive(Clone, Debug)]
pub struct Group {
    pub resources: Vec<ResourceId>,
    pub flavors: Vec<FlavorId>,
}

/// What to do when a flavor allows borrowing / needs preemption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fungibility {
    MayStopSearch,
    TryNextFlavor,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub backoff: Millis,
}

impl RetryPolicy {
    /// What an empty `retryPolicy: {}` means; also bounds `resourceReclaim`
    /// evictions of a ClusterQueue without a retryPolicy.
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        max_retries: 3,
        backoff: Millis(60_000),
    };
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoscalingPolicy {
    pub min_replicas: Option<u32>,
    pub max_replicas: Option<u32>,
    pub target_utilization: f64,
}

#[derive(Clone, Debug)]
pub struct ClusterQueue {
    pub name: String,
    pub cohort: Option<CohortId>,
    pub groups: Vec<Group>,
    /// Indexed by [`FlavorResource`]; `None` where the queue has no quota.
    pub quotas: Vec<Option<Quota>>,
    pub strategy: QueueingStrategy,
    /// `None`: every namespace (DESIGN §3).
    pub namespace_selector: Option<LabelSelector>,
    pub when_can_borrow: Fungibility,
    pub when_can_preempt: Fungibility,
    pub within_cluster_queue: WithinClusterQueue,
    pub reclaim_within_cohort: ReclaimWithinCohort,
    pub fair_weight: f64,
    pub stop_policy: StopPolicy,
    /// Weight of the priority in the default weighting policy.
    pub priority_weight: f64,
    pub algorithm: SchedulingAlgorithm,
    pub adaptive_interval: Option<Millis>,
    /// Half-life of the decayed usage policies see (`adaptiveWeights.usageHalfLife`).
    pub usage_half_life: Millis,
    pub autoscaling: Option<AutoscalingPolicy>,
    pub retry: Option<RetryPolicy>,
    pub reclaim_timeout: Option<Millis>,
}

#[derive(Clone, Debug)]
pub struct Cohort {
    pub name: String,
    pub parent: Option<CohortId>,
    /// The cohort's own quota, lent to its members (indexed by FlavorResource).
    pub quotas: Vec<Option<Quota>>,
    pub fair_weight: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ResourceBounds {
    pub resource: String,
    pub min: Option<Amount>,
    pub max: Option<Amount>,
    pub default: Option<Amount>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HistoryWindow {
    Count(u32),
    Duration(Millis),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimation {
    pub window: HistoryWindow,
    pub confidence: f64,
}

#[derive(Clone, Debug)]
pub struct LocalQueue {
    pub namespace: String,
    pub name: String,
    pub cluster_queue: ClusterQueueId,
    pub priority: Option<i32>,
    pub resource_bounds: Vec<ResourceBounds>,
    pub estimation: Option<Estimation>,
    pub stop_policy: StopPolicy,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PriorityClass {
    pub value: i32,
    pub weight: f64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Namespace {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// The whole checked configuration.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    pub resources: Vec<String>,
    pub flavors: Vec<Flavor>,
    pub cohorts: Vec<Cohort>,
    pub cluster_queues: Vec<ClusterQueue>,
    pub local_queues: Vec<LocalQueue>,
    pub priority_classes: BTreeMap<String, PriorityClass>,
    pub namespaces: BTreeMap<String, Namespace>,
    /// Fair sharing on for every cohort tree (Simulation/operator flag).
    pub fair_sharing_everywhere: bool,
    resource_ids: BTreeMap<String, ResourceId>,
    flavor_ids: BTreeMap<String, FlavorId>,
    cluster_queue_ids: BTreeMap<String, ClusterQueueId>,
    local_queue_ids: BTreeMap<(String, String), LocalQueueId>,
}

impl Cluster {
    pub fn resource_id(&self, name: &str) -> Option<ResourceId> {
        self.resource_ids.get(name).copied()
    }
    pub fn flavor_id(&self, name: &str) -> Option<FlavorId> {
        self.flavor_ids.get(name).copied()
    }
    pub fn cluster_queue_id(&self, name: &str) -> Option<ClusterQueueId> {
        self.cluster_queue_ids.get(name).copied()
    }
    pub fn local_queue_id(&self, namespace: &str, name: &str) -> Option<LocalQueueId> {
        self.local_queue_ids
            .get(&(namespace.to_string(), name.to_string()))
            .copied()
    }
    pub fn resource_name(&self, id: ResourceId) -> &str {
        &self.resources[id.index()]
    }
    pub fn flavor_resource_count(&self) -> usize {
        self.flavors.len() * self.resources.len()
    }
    pub fn flavor_resource(&self, flavor: FlavorId, resource: ResourceId) -> FlavorResource {
        FlavorResource(flavor.0 as u32 * self.resources.len() as u32 + resource.0 as u32)
    }
    pub fn split(&self, fr: FlavorResource) -> (FlavorId, ResourceId) {
        let n = self.resources.len() as u32;
        (FlavorId((fr.0 / n) as u16), ResourceId((fr.0 % n) as u16))
    }
    pub fn cluster_queue(&self, id: ClusterQueueId) -> &ClusterQueue {
        &self.cluster_queues[id.index()]
    }
    /// The top of the cohort tree `cohort` belongs to.
    pub fn root_cohort(&self, mut cohort: CohortId) -> CohortId {
        while let Some(parent) = self.cohorts[cohort.index()].parent {
            cohort = parent;
        }
        cohort
    }
    /// Is fair sharing on for the tree holding this ClusterQueue?
    pub fn fair_sharing_for(&self, cq: ClusterQueueId) -> bool {
        if self.fair_sharing_everywhere {
            return true;
        }
        let uses = |q: &ClusterQueue| {
            matches!(
                q.algorithm,
                SchedulingAlgorithm::FairSharing | SchedulingAlgorithm::Policy
            )
        };
        match self.cluster_queue(cq).cohort {
            None => uses(self.cluster_queue(cq)),
            Some(cohort) => {
                let root = self.root_cohort(cohort);
                self.cluster_queues
                    .iter()
                    .any(|q| q.cohort.is_some_and(|c| self.root_cohort(c) == root) && uses(q))
            }
        }
    }
    /// Does the ClusterQueue admit workloads from this namespace?
    pub fn namespace_allowed(&self, cq: ClusterQueueId, namespace: &str) -> bool {
        match &self.cluster_queue(cq).namespace_selector {
            None => true,
            Some(selector) => {
                let empty = BTreeMap::new();
                let labels = self
                    .namespaces
                    .get(namespace)
                    .map_or(&empty, |ns| &ns.labels);
                let mut with_name = labels.clone();
                with_name.insert("kubernetes.io/metadata.name".into(), namespace.to_string());
                selector::label_selector_matches(selector, &with_name)
            }
        }
    }
}

/// One problem in the configuration, for a person to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Where the object came from (`cluster.yaml (document 3)`).
    pub source: String,
    /// `ClusterQueue ml`.
    pub object: String,
    /// `spec.resourceGroups[0].flavors[1].name`, or empty.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.source.is_empty() {
            write!(f, "{}: ", self.source)?;
        }
        write!(f, "{}", self.object)?;
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// All problems found, in input order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, err) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{err}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

struct Sourced<T> {
    source: String,
    item: T,
}

/// Collects wire objects (with where they came from) and checks them.
#[derive(Default)]
pub struct ClusterBuilder {
    flavors: Vec<Sourced<api::ResourceFlavor>>,
    cohorts: Vec<Sourced<api::Cohort>>,
    cluster_queues: Vec<Sourced<api::ClusterQueue>>,
    local_queues: Vec<Sourced<api::LocalQueue>>,
    priority_classes: Vec<Sourced<api::WorkloadPriorityClass>>,
    namespaces: Vec<Sourced<(String, Namespace)>>,
    fair_sharing_everywhere: bool,
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
    pub fn namespace(&mut self, source: impl Into<String>, name: String, namespace: Namespace) {
        self.namespaces.push(Sourced {
            source: source.into(),
            item: (name, namespace),
        });
    }
    pub fn fair_sharing_everywhere(&mut self, enabled: bool) {
        self.fair_sharing_everywhere = enabled;
    }
    pub fn resource(&mut self, name: &str) {
        self.extra_resources.push(name.to_string());
    }

    pub fn build(self) -> Result<Cluster, ConfigErrors> {
        let mut errors = Vec::new();
        let mut cluster = Cluster {
            fair_sharing_everywhere: self.fair_sharing_everywhere,
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
                Some(a) if a.enabled => Some(duration(
                    &a.adjustment_interval,
                    "spec.scheduling.adaptiveWeights.adjustmentInterval",
                    Millis::from_secs(300),
                    &mut err,
                )),
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
            let priority_weight = match spec.priority_class.as_ref().and_then(|p| p.weight) {
                Some(w) if !(w.is_finite() && w >= 0.0) => {
                    err(
                        &s.source,
                        object.clone(),
                        "spec.priorityClass.weight".into(),
                        format!("{w} must be a finite number ≥ 0"),
                    );
                    1.0
                }
                Some(w) => w,
                None => 1.0,
            };
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
                within_cluster_queue: preemption.within_cluster_queue.unwrap_or_default(),
                reclaim_within_cohort: preemption.reclaim_within_cohort.unwrap_or_default(),
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

/// Checks resource groups and lays their quotas out by FlavorResource.
fn quota_table(
    cluster: &Cluster,
    groups: &[ResourceGroup],
    source: &str,
    object: &str,
    frs: usize,
    err: &mut dyn FnMut(&str, String, String, String),
) -> (Vec<Group>, Vec<Option<Quota>>) {
    let mut quotas = vec![None; frs];
    let mut checked = Vec::new();
    let mut seen_resources: BTreeMap<&str, usize> = BTreeMap::new();
    for (gi, group) in groups.iter().enumerate() {
        let mut resources = Vec::new();
        for (ri, name) in group.covered_resources.iter().enumerate() {
            if let Some(prev) = seen_resources.insert(name, gi) {
                err(source, object.to_string(), format!("spec.resourceGroups[{gi}].coveredResources[{ri}]"),
                    format!("resource `{name}` is already covered by resourceGroups[{prev}]; a resource belongs to one group"));
            }
            if let Some(id) = cluster.resource_id(name) {
                resources.push(id);
            }
        }
        let mut flavors = Vec::new();
        for (fi, fq) in group.flavors.iter().enumerate() {
            let field = format!("spec.resourceGroups[{gi}].flavors[{fi}]");
            let Some(flavor) = cluster.flavor_id(&fq.name) else {
                let known: Vec<&str> = cluster.flavors.iter().map(|f| f.name.as_str()).collect();
                err(source, object.to_string(), format!("{field}.name"),
                    format!("ResourceFlavor `{}` is not defined (defined: {}); define it or fix the name", fq.name, if known.is_empty() { "none".to_string() } else { known.join(", ") }));
                continue;
            };
            if flavors.contains(&flavor) {
                err(
                    source,
                    object.to_string(),
                    format!("{field}.name"),
                    format!("flavor `{}` is listed twice in this group", fq.name),
                );
                continue;
            }
            flavors.push(flavor);
            for (qi, rq) in fq.resources.iter().enumerate() {
                let qfield = format!("{field}.resources[{qi}]");
                let Some(pos) = group.covered_resources.iter().position(|r| r == &rq.name) else {
                    err(source, object.to_string(), format!("{qfield}.name"),
                        format!("resource `{}` is not in this group's coveredResources [{}]; add it there or remove this quota", rq.name, group.covered_resources.join(", ")));
                    continue;
                };
                let Some(resource) = resources.get(pos).copied() else {
                    continue;
                };
                let mut amount = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
                                  what: &str| {
                    match Amount::from_quantity(q) {
                        Ok(a) if a.is_negative() => {
                            err(
                                source,
                                object.to_string(),
                                format!("{qfield}.{what}"),
                                format!("{a} is negative; quotas must be ≥ 0"),
                            );
                            None
                        }
                        Ok(a) => Some(a),
                        Err(e) => {
                            err(
                                source,
                                object.to_string(),
                                format!("{qfield}.{what}"),
                                e.to_string(),
                            );
                            None
                        }
                    }
                };
                let nominal = amount(&rq.nominal_quota, "nominalQuota").unwrap_or_default();
                let borrowing_limit = rq
                    .borrowing_limit
                    .as_ref()
                    .and_then(|q| amount(q, "borrowingLimit"));
                let lending_limit = rq
                    .lending_limit
                    .as_ref()
                    .and_then(|q| amount(q, "lendingLimit"));
                if let Some(l) = lending_limit {
                    if l > nominal {
                        err(source, object.to_string(), format!("{qfield}.lendingLimit"), format!("{l} exceeds nominalQuota {nominal}; a queue can lend at most what it has"));
                    }
                }
                quotas[cluster.flavor_resource(flavor, resource).index()] = Some(Quota {
                    nominal,
                    borrowing_limit,
                    lending_limit,
                });
            }
            for name in &group.covered_resources {
                if !fq.resources.iter().any(|r| &r.name == name) {
                    err(source, object.to_string(), format!("{field}.resources"),
                        format!("flavor `{}` gives no quota for covered resource `{name}`; every flavor lists every covered resource (use nominalQuota: 0)", fq.name));
                }
            }
        }
        checked.push(Group { resources, flavors });
    }
    (checked, quotas)
}
