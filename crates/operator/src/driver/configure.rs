//! The configuration as the stores hold it, built again only when it
//! changed: the queue objects, Namespaces and Nodes (and the resources jobs
//! ask) fingerprinted; a new one is the core's `reconfigure` (the first,
//! `Scheduler::new` and the read-back). An object left out (invalid, or
//! depending on one) is told on the object (`activity`); the rest is in
//! force. Nodes whose device annotation cannot be read are told in Events.
//! The pools' topology labels go to the core with every new set of pools
//! (`label_pools`: a reconfiguration forgets them), before the read-back.
//! Job kinds the API did not serve are looked for again (`rediscover`).

use std::collections::HashSet;

use super::*;
use crate::finalizers;

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
        let config::ConfigInputs {
            objects,
            namespaces,
            nodes,
            resources,
            fingerprint,
        } = config::ConfigInputs::read(
            self.config.iter().flat_map(|w| w.store.state()),
            &self.namespaces.store.state(),
            &self.nodes.store.state(),
            self.index.resources().cloned(),
        );
        if fingerprint == self.fingerprint {
            return (self.scheduler.is_some(), false);
        }
        self.fingerprint = fingerprint;
        // Each object in force or not on its own (Kueue's rule): one bad
        // object never holds back the others.
        let built = config::build_lenient(&objects, &namespaces, resources);
        for warning in &built.warnings {
            tracing::warn!(%warning, "queue configuration");
        }
        let stored: Vec<_> = self.config.iter().flat_map(|w| w.store.state()).collect();
        let counts = self
            .activity
            .update(&built.cluster, &stored, &self.publisher);
        if let Some((_, metrics)) = &self.admin {
            metrics.set_queue_objects(&counts);
        }
        let mut cluster = built.cluster;
        cluster.pods_ready = self.options.pods_ready;
        cluster.preemption_strategies = self.options.preemption_strategies;
        let cluster = Arc::new(cluster);
        let config::NodePools {
            pools,
            labels,
            problems,
        } = config::pools(&cluster, &nodes);
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
                // A reconfiguration forgets the pools' topology labels.
                scheduler.label_pools(&labels);
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
                let mut scheduler = Scheduler::new(cluster, &pools);
                scheduler.label_pools(&labels);
                self.scheduler = Some(scheduler);
                self.restore().await;
            }
        }
        (true, true)
    }

    /// Adds the in-use finalizer to every ClusterQueue and ResourceFlavor,
    /// and takes it off one being deleted once it is free (`finalizers`);
    /// the writes run off the driver's task, each sent once per version of
    /// its object (again after `FINALIZE_RETRY` if it failed).
    pub(super) fn finalize(&mut self) {
        const FINALIZE_RETRY: Duration = Duration::from_secs(5);
        let Some(scheduler) = &self.scheduler else {
            return;
        };
        let cluster = scheduler.cluster();
        let stored: Vec<_> = self.config.iter().flat_map(|w| w.store.state()).collect();
        let due = finalizers::due(&stored, |name| {
            cluster
                .cluster_queue_id(name)
                .map_or(0, |id| scheduler.admitted_count(id))
        });
        let key = |c: &finalizers::Change| {
            (
                c.object.metadata.uid.clone().unwrap_or_default(),
                c.add,
                c.object
                    .metadata
                    .resource_version
                    .clone()
                    .unwrap_or_default(),
            )
        };
        let keys: HashSet<_> = due.iter().map(key).collect();
        self.finalizing
            .retain(|k, sent| keys.contains(k) && sent.elapsed() < FINALIZE_RETRY);
        for change in due {
            let k = key(&change);
            if self.finalizing.contains_key(&k) {
                continue;
            }
            self.finalizing.insert(k, std::time::Instant::now());
            let client = self.client.clone();
            tokio::spawn(async move {
                match finalizers::write(&client, &change).await {
                    Ok(()) => tracing::info!(
                        object = %change.name(),
                        finalizer = finalizers::IN_USE_FINALIZER,
                        added = change.add,
                        "finalizer written"
                    ),
                    // Changed or gone meanwhile: the next look decides again.
                    Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                    Err(error) => tracing::warn!(
                        object = %change.name(),
                        %error,
                        "could not write the in-use finalizer; tried again later"
                    ),
                }
            });
        }
    }
}

impl Driver {
    /// Looks again for job kinds the API did not serve (see `unserved`).
    pub(super) async fn rediscover(&mut self) {
        if self.unserved.is_empty() || self.discovered_at.elapsed() < self.options.rediscover {
            return;
        }
        self.discovered_at = std::time::Instant::now();
        let (found, unserved) =
            discover_jobs(&self.client, &self.integrations, &self.unserved, &self.wake).await;
        for job in &found {
            let _ = job.watched.store.wait_until_ready().await;
            self.writer.add(job);
            tracing::info!(kind = %job.watched.what, "the API serves this job kind now; watching its jobs");
        }
        self.jobs.extend(found);
        self.unserved = unserved;
        if let Ok(mut served) = self.served.lock() {
            *served = self.jobs.iter().map(|j| j.resource.clone()).collect();
        }
    }
}
