//! The checked cluster configuration and how it is made. Manifests
//! (`model::api` wire types, with their source) go into a
//! [`ClusterBuilder`], which checks them once into a [`Cluster`]: names
//! resolved to dense ids, quotas by (flavor, resource), the cohort tree,
//! every policy parsed; every problem a [`ConfigError`] naming source,
//! object, field and fix. The scheduler core reads only the `Cluster`.
//! Nothing here does I/O. `checked` holds the types and lookups,
//! `builder` the checking, `lenient` building what is valid (each object
//! in force or not on its own, as Kueue does), `resource_groups` the quota
//! tables shared by Cohorts and ClusterQueues, `queue_fields` a queue's
//! other fields (policies, durations, bounds), `strategies` fair-sharing
//! preemption's configured rules, `error` the error types; everything public
//! is re-exported here, so callers name `model::cluster::X`.

mod builder;
mod checked;
mod error;
mod lenient;
mod queue_fields;
mod resource_groups;
mod strategies;
#[cfg(test)]
pub(crate) mod tests;

pub use builder::ClusterBuilder;
pub use checked::{
    AutoscalingPolicy, Cluster, ClusterQueue, ClusterQueueId, Cohort, CohortId, Estimation, Flavor,
    FlavorId, FlavorResource, Fungibility, Group, HistoryWindow, LocalQueue, LocalQueueId,
    Namespace, PodsReadyPolicy, PriorityClass, Quota, ResourceBounds, ResourceId, RetryPolicy,
    Topology, TopologyId,
};
pub use error::{ConfigError, ConfigErrors};
pub use lenient::Inactive;
pub use strategies::{FairPreemptionStrategies, PreemptionStrategy};
