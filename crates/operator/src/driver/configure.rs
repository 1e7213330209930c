//! The configuration as the stores hold it, built again only when it
//! changed: the queue objects, Namespaces and Nodes (and the resources jobs
//! ask) fingerprinted; a new one is the core's `reconfigure` (the first,
//! `Scheduler::new` and the read-back); Nodes whose device annotation
//! cannot be read are told in Events.

use super::*;

impl Driver {
    /// Rebuilds the configuration when it changed: looked at only when a
    /// queue object, Namespace or Node changed or jobs ask for other
    /// resources. Returns whether a valid configuration has been seen, and
    /// whether it was built now.
    pub(super) async fn refresh_config(&mut self) -> (bool, bool) {
        let mut noted = false;
        for changes in self
            .config
            .iter()
            .map(|w| &w.changes)
            .chain([&self.namespaces.changes, &self.nodes.changes])
        {
            noted |= !changes.take().is_empty();
        }
        if !noted && self.index.resources().eq(self.job_resources.iter()) {
            return (self.scheduler.is_some(), false);
        }
        self.job_resources = self.index.resources().cloned().collect();
        let objects = config::api_objects(self.config.iter().flat_map(|w| w.store.state()));
        let namespaces = config::namespaces(&self.namespaces.store.state());
        let mut nodes: Vec<Node> = self
            .nodes
            .store
            .state()
            .iter()
            .map(|n| (**n).clone())
            .collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut resources: BTreeSet<String> = config::node_resources(&nodes).collect();
        resources.extend(self.index.resources().cloned());
        let node_view: Vec<_> = nodes
            .iter()
            .map(|n| {
                (
                    &n.metadata.name,
                    &n.metadata.labels,
                    n.spec.as_ref().and_then(|s| s.unschedulable),
                    n.status.as_ref().and_then(|s| s.allocatable.as_ref()),
                    n.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(config::DEVICES_ANNOTATION)),
                )
            })
            .collect();
        let fingerprint = serde_json::json!({
            "objects": objects.iter().map(|o| &o.object).collect::<Vec<_>>(),
            "namespaces": namespaces.iter().map(|(k, v)| (k, (&v.labels, &v.annotations))).collect::<Vec<_>>(),
            "nodes": serde_json::to_value(&node_view).unwrap_or_default(),
            "resources": resources,
        })
        .to_string();
        if fingerprint == self.fingerprint {
            return (self.scheduler.is_some(), false);
        }
        self.fingerprint = fingerprint;
        let built = match config::build(&objects, &namespaces, resources) {
            Ok(built) => built,
            Err(errors) => {
                for error in &errors {
                    tracing::error!(%error, "the queue configuration is invalid; the last valid one stays in force");
                }
                return (self.scheduler.is_some(), false);
            }
        };
        for warning in &built.warnings {
            tracing::warn!(%warning, "queue configuration");
        }
        let mut cluster = built.cluster;
        cluster.pods_ready = self.options.pods_ready;
        let cluster = Arc::new(cluster);
        let (pools, problems) = config::pools(&cluster, &nodes);
        for (node, uid, problem) in problems {
            tracing::error!(%problem, "node devices; the Node's resources count as one number each until it is fixed");
            let owner = Owner {
                api_version: "v1".into(),
                kind: "Node".into(),
                namespace: String::new(),
                name: node,
                uid,
            };
            let note = format!("{problem}. Until it is fixed, Arbiter counts the Node's resources as one number each, not per card");
            self.publisher.event(&owner, true, "InvalidDevices", note);
        }
        self.pools = pools.clone();
        match &mut self.scheduler {
            Some(scheduler) => {
                let outcome = scheduler.reconfigure(cluster, &pools);
                tracing::info!(
                    detached = outcome.detached.len(),
                    orphaned = outcome.orphaned.len(),
                    adopted = outcome.adopted.len(),
                    "configuration changed"
                );
                // Names and messages may read differently now: every
                // Workload's status is computed again.
                for tracked in self.tracked.values_mut() {
                    tracked.published = None;
                }
            }
            None => {
                let scheduler = Scheduler::new(cluster, &pools);
                self.scheduler = Some(scheduler);
                self.restore().await;
            }
        }
        (true, true)
    }
}
