//! Which worker clusters a manager's job may run on: its queue label names
//! a LocalQueue of its namespace, that LocalQueue a ClusterQueue, whose
//! `spec.admissionChecks` name an AdmissionCheck with the controller
//! `kueue.x-k8s.io/multikueue`, whose parameters name a MultiKueueConfig,
//! which lists the MultiKueueClusters (Kueue's chain). Pure: a lookup over
//! the objects listed, each broken link an error naming the object, the
//! field and the fix.

use std::collections::BTreeMap;

use arbiter_core::jobs::QUEUE_NAME_LABELS;
use arbiter_core::model::api::{
    AdmissionCheck, ClusterQueue, LocalQueue, MultiKueueConfig, MULTIKUEUE_CONTROLLER,
};
use kube::ResourceExt;

/// The queue objects the lookup reads, by name (LocalQueues by namespace
/// and name).
#[derive(Default)]
pub struct Routes {
    /// LocalQueues by (namespace, name).
    pub local_queues: BTreeMap<(String, String), LocalQueue>,
    /// ClusterQueues by name.
    pub cluster_queues: BTreeMap<String, ClusterQueue>,
    /// AdmissionChecks by name.
    pub checks: BTreeMap<String, AdmissionCheck>,
    /// MultiKueueConfigs by name.
    pub configs: BTreeMap<String, MultiKueueConfig>,
}

/// Where a job may go: its ClusterQueue, and the workers of its config in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// The job's ClusterQueue.
    pub cluster_queue: String,
    /// Its LocalQueue.
    pub queue: String,
    /// The MultiKueueConfig's clusters, in its order.
    pub clusters: Vec<String>,
}

impl Routes {
    /// Collects listed objects.
    pub fn new(
        local_queues: Vec<LocalQueue>,
        cluster_queues: Vec<ClusterQueue>,
        checks: Vec<AdmissionCheck>,
        configs: Vec<MultiKueueConfig>,
    ) -> Routes {
        Routes {
            local_queues: local_queues
                .into_iter()
                .map(|q| ((q.namespace().unwrap_or_default(), q.name_any()), q))
                .collect(),
            cluster_queues: cluster_queues
                .into_iter()
                .map(|q| (q.name_any(), q))
                .collect(),
            checks: checks.into_iter().map(|c| (c.name_any(), c)).collect(),
            configs: configs.into_iter().map(|c| (c.name_any(), c)).collect(),
        }
    }

    /// The route of `job`, or what is missing.
    pub fn route<K: ResourceExt>(&self, kind: &str, job: &K) -> Result<Route, String> {
        let namespace = job.namespace().unwrap_or_default();
        let who = format!("{kind} {namespace}/{}", job.name_any());
        let labels = job.labels();
        let queue = QUEUE_NAME_LABELS
            .iter()
            .find_map(|label| labels.get(*label))
            .ok_or_else(|| {
                format!("{who} is managedBy {MULTIKUEUE_CONTROLLER} but has no queue label ({}); label it with its LocalQueue", QUEUE_NAME_LABELS.join(" or "))
            })?;
        let local = self
            .local_queues
            .get(&(namespace.clone(), queue.clone()))
            .ok_or_else(|| format!("{who}: LocalQueue {namespace}/{queue} does not exist"))?;
        let cq_name = &local.spec.cluster_queue;
        let cq = self.cluster_queues.get(cq_name).ok_or_else(|| {
            format!(
                "{who}: ClusterQueue {cq_name} (of LocalQueue {namespace}/{queue}) does not exist"
            )
        })?;
        let check = cq
            .spec
            .admission_checks
            .iter()
            .filter_map(|name| self.checks.get(name))
            .find(|c| c.spec.controller_name == MULTIKUEUE_CONTROLLER)
            .ok_or_else(|| {
                format!("{who}: ClusterQueue {cq_name} has no AdmissionCheck with controllerName {MULTIKUEUE_CONTROLLER} in spec.admissionChecks; add one, or take managedBy off the job")
            })?;
        let check_name = check.name_any();
        let parameters = check
            .spec
            .parameters
            .as_ref()
            .filter(|p| p.kind == "MultiKueueConfig")
            .ok_or_else(|| {
                format!("AdmissionCheck {check_name}: spec.parameters must name a MultiKueueConfig (kind: MultiKueueConfig, name: ...)")
            })?;
        let config = self.configs.get(&parameters.name).ok_or_else(|| {
            format!(
                "AdmissionCheck {check_name}: MultiKueueConfig {} (spec.parameters.name) does not exist",
                parameters.name
            )
        })?;
        Ok(Route {
            cluster_queue: cq_name.clone(),
            queue: queue.clone(),
            clusters: config.spec.clusters.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;
    use serde_json::json;

    fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).unwrap()
    }

    fn routes() -> Routes {
        Routes::new(
            vec![object(
                json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "LocalQueue",
                "metadata": {"name": "q", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}),
            )],
            vec![object(
                json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue",
                "metadata": {"name": "cq"}, "spec": {"admissionChecks": ["other", "mk"]}}),
            )],
            vec![
                object(
                    json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "AdmissionCheck",
                    "metadata": {"name": "other"}, "spec": {"controllerName": "example.com/x"}}),
                ),
                object(
                    json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "AdmissionCheck",
                    "metadata": {"name": "mk"}, "spec": {"controllerName": MULTIKUEUE_CONTROLLER,
                    "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "workers"}}}),
                ),
            ],
            vec![object(
                json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "MultiKueueConfig",
                "metadata": {"name": "workers"}, "spec": {"clusters": ["w1", "w2"]}}),
            )],
        )
    }

    fn job(queue: Option<&str>) -> Job {
        let labels = match queue {
            Some(q) => json!({"kueue.x-k8s.io/queue-name": q}),
            None => json!({}),
        };
        object(json!({"metadata": {"name": "train", "namespace": "team-a", "labels": labels}}))
    }

    #[test]
    fn a_job_is_routed_through_its_queues_check_to_the_configs_clusters() {
        let route = routes().route("Job", &job(Some("q"))).unwrap();
        assert_eq!(route.cluster_queue, "cq");
        assert_eq!(route.queue, "q");
        assert_eq!(route.clusters, ["w1", "w2"]);
    }

    #[test]
    fn each_broken_link_is_named() {
        let routes = routes();
        let err = routes.route("Job", &job(None)).unwrap_err();
        assert!(
            err.contains("Job team-a/train") && err.contains("queue label"),
            "{err}"
        );
        let err = routes.route("Job", &job(Some("nope"))).unwrap_err();
        assert!(
            err.contains("LocalQueue team-a/nope does not exist"),
            "{err}"
        );
        let mut no_config = routes;
        no_config.configs.clear();
        let err = no_config.route("Job", &job(Some("q"))).unwrap_err();
        assert!(
            err.contains("AdmissionCheck mk") && err.contains("workers"),
            "{err}"
        );
        no_config.checks.remove("mk");
        let err = no_config.route("Job", &job(Some("q"))).unwrap_err();
        assert!(
            err.contains("ClusterQueue cq has no AdmissionCheck"),
            "{err}"
        );
    }
}
