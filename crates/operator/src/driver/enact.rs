//! Enacting the step's decisions: each job's want set (`writer`
//! makes the writes: admission injected and released, eviction held and
//! restored, a failed job created anew) — a preemptor's release only once
//! its victims are held —, Events told, the Workload of a withdrawn job
//! forgotten; and what the writer tells back (an admission written, a
//! write refused). Pods of pod sets placed per card get their places
//! (`ungate`).

use std::collections::HashMap;

use arbiter_core::scheduler::reason::render_admission;
use arbiter_core::scheduler::{Event, Eviction, Status, WorkloadId};

use super::converge::Want;
use super::writer::Done;
use super::{Driver, JobKey};
use crate::inject::{self, PodSetAdmission, Recorded};
use crate::ungate::{self, places_of};
use crate::workloads::Owner;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::ObjectRef;

impl Driver {
    /// The step's decisions: jobs' wants set, Events told, the Workload
    /// of a withdrawn job forgotten.
    pub(super) fn enact_events(&mut self, events: &[Event]) {
        // The jobs each preemptor displaced: its release waits for their hold.
        let mut victims: HashMap<&str, Vec<JobKey>> = HashMap::new();
        for event in events {
            if let Event::Evicted {
                workload,
                by: Some(by),
                ..
            } = event
            {
                if let Some(key) = self.by_id.get(workload) {
                    victims.entry(by.as_str()).or_default().push(key.clone());
                }
            }
        }
        for event in events {
            let id = event.workload();
            let Some(key) = self.by_id.get(&id).cloned() else {
                continue;
            };
            match event {
                Event::Admitted { .. } => {
                    if let Some((pod_sets, record)) = self.admission(id, &key) {
                        let uid = self.uid_of(&key);
                        let want = Want::Released { pod_sets, record };
                        let displaced = self.scheduler.as_ref().and_then(|s| {
                            let workload = &s.entry(id).workload;
                            victims
                                .get(format!("{}/{}", workload.namespace, workload.name).as_str())
                        });
                        match displaced {
                            Some(displaced) => {
                                self.deferred
                                    .insert(key.clone(), (uid, want, displaced.clone()));
                            }
                            None => self.writer.want(&key, &uid, want),
                        }
                        if let Some(note) = self.admitted_note(id, &key) {
                            self.announce.insert(key.clone(), note);
                        }
                    }
                }
                Event::Evicted { cause, .. } => {
                    let reason = cause.to_string();
                    if let Some(tracked) = self.tracked.get_mut(&key) {
                        let sentence = format!("Evicted: {reason}");
                        tracked.eviction = Some((cause.code().to_string(), sentence.clone()));
                        self.publisher
                            .event(&tracked.owner, false, cause.code(), sentence);
                    }
                    self.announce.remove(&key);
                    self.deferred.remove(&key);
                    if matches!(cause, Eviction::Failed { .. }) {
                        // A failed job cannot be held and run again: it is
                        // created anew, unless it is not to run again.
                        match self.recreate(id, &key) {
                            Some(want) => {
                                tracing::info!(job = %key, %reason, "failed; creating it anew to run again after its backoff");
                                let uid = self.uid_of(&key);
                                self.writer.want(&key, &uid, want);
                            }
                            None => self.writer.forget(&key),
                        }
                        continue;
                    }
                    tracing::info!(job = %key, %reason, "evicted; holding it again");
                    let uid = self.uid_of(&key);
                    self.writer.want(&key, &uid, Want::Held);
                }
                Event::Rejected {
                    policy, message, ..
                } => {
                    tracing::info!(job = %key, %policy, %message, "rejected");
                    if let Some(tracked) = self.tracked.get(&key) {
                        let note = format!("admission policy {policy}: {message}");
                        self.publisher.event(&tracked.owner, true, "Rejected", note);
                    }
                }
                Event::Deactivated { retries, .. } => {
                    tracing::info!(job = %key, retries, "deactivated after too many retries");
                    let why = self
                        .scheduler
                        .as_ref()
                        .map(|s| s.reason_text(id))
                        .unwrap_or_default();
                    if let Some(tracked) = self.tracked.get(&key) {
                        let note = format!("{why}; it stays out until it is created again");
                        self.publisher
                            .event(&tracked.owner, true, "Deactivated", note);
                    }
                }
                Event::Withdrawn { .. } => {
                    self.by_id.remove(&id);
                    self.writer.forget(&key);
                    self.announce.remove(&key);
                    self.deferred.remove(&key);
                    self.refused.remove(&key);
                    if let Some(tracked) = self.tracked.remove(&key) {
                        self.publisher.forget(&tracked.owner);
                    }
                }
                Event::Finished { .. } => {
                    // A finished job is left as it is.
                    self.writer.forget(&key);
                    self.announce.remove(&key);
                    self.deferred.remove(&key);
                }
                Event::Requeued { .. } => {}
            }
        }
    }

    /// The want that runs failed workload `id`'s job again, and the job
    /// to create remembered until it is seen (`KnownJob::recreate`); none
    /// when the workload is deactivated (the failed job stays as it is, to
    /// be looked at) or the job is gone.
    fn recreate(&mut self, id: WorkloadId, key: &JobKey) -> Option<Want> {
        let scheduler = self.scheduler.as_ref()?;
        let entry = scheduler.entry(id);
        if entry.status == Status::Deactivated {
            return None;
        }
        let failed = self.job_value(key)?;
        let integration = super::index::integration(&self.integrations, &self.jobs[key.watch]);
        let fresh = match crate::inject::recreated(&failed, integration, entry.retries) {
            Ok(fresh) => Box::new(fresh),
            Err(e) => {
                tracing::warn!(job = %key, error = %e, "cannot create the failed job anew; it is not run again");
                return None;
            }
        };
        let tracked = self.tracked.get_mut(key)?;
        let replaces = tracked.owner.uid.clone();
        tracked.recreate = Some((fresh.clone(), replaces.clone()));
        Some(Want::Replaced { fresh, replaces })
    }

    /// Releases the preemptors whose victims are held (or gone, or ended):
    /// a job is never released onto capacity its victims still run on, as
    /// Kueue admits a preemptor only once its victims are evicted.
    pub(super) fn release_deferred(&mut self) {
        let index = &self.index;
        let ready: Vec<JobKey> = self
            .deferred
            .iter()
            .filter(|(_, (_, _, victims))| {
                victims.iter().all(|v| {
                    index
                        .get(v)
                        .is_none_or(|s| s.held || s.ended.is_some() || s.deleting)
                })
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in ready {
            if let Some((uid, want, _)) = self.deferred.remove(&key) {
                self.writer.want(&key, &uid, want);
            }
        }
    }

    /// The uid of tracked job `key`'s object.
    fn uid_of(&self, key: &JobKey) -> String {
        self.tracked
            .get(key)
            .map(|t| t.owner.uid.clone())
            .unwrap_or_default()
    }

    /// The admission Event of workload `id`, told once its job is released.
    fn admitted_note(&self, id: WorkloadId, key: &JobKey) -> Option<(Owner, String)> {
        let scheduler = self.scheduler.as_ref()?;
        let tracked = self.tracked.get(key)?;
        let entry = scheduler.entry(id);
        let admission = entry.admission.as_ref()?;
        let note = format!(
            "Admitted by {}",
            render_admission(scheduler.cluster(), &entry.workload, admission)
        );
        Some((tracked.owner.clone(), note))
    }

    /// What the job needs to know of workload `id`'s admission.
    pub(super) fn admission(
        &self,
        id: WorkloadId,
        key: &JobKey,
    ) -> Option<(Vec<PodSetAdmission>, Recorded)> {
        let paths = &self.tracked.get(key)?.template_paths;
        let nodes = &self.nodes.store;
        inject::admission_of(self.scheduler.as_ref()?, id, paths, &|node| {
            hostname_of(nodes, node)
        })
    }

    /// Reads what the writer told: an admission written is told in an
    /// Event; a refused write in a Warning Event and the Workload's
    /// `JobWriteRefused` condition, once per message, and the condition
    /// taken off once the job's writes go through again.
    pub(super) fn written(&mut self) {
        for done in self.writer.results() {
            match done {
                Done::Admitted(key) => {
                    self.refused.remove(&key);
                    if let Some((owner, note)) = self.announce.remove(&key) {
                        tracing::info!(job = %key, "admitted");
                        self.publisher.event(&owner, false, "Admitted", note);
                    }
                }
                Done::Refused { key, step, message } => {
                    // Told once per message; a job that ended meanwhile
                    // (its last write raced its end) is left as it is.
                    let ended = self.tracked.get(&key).is_some_and(|t| t.ended.is_some());
                    if ended || self.refused.get(&key) == Some(&message) {
                        continue;
                    }
                    tracing::warn!(job = %key, %step, %message, "the API refused a write of the job; tried again when the job or its decision changes");
                    let owner = match self.tracked.get_mut(&key) {
                        Some(tracked) => {
                            tracked.refused =
                                Some(format!("Arbiter could not {step} this job: {message}"));
                            tracked.published = None;
                            tracked.owner.clone()
                        }
                        None => match self.index.get(&key) {
                            Some(seen) => self.owner(&key, seen.uid.clone()),
                            None => continue,
                        },
                    };
                    let note = format!("Arbiter could not {step} this job: {message}; tried again when the job or its decision changes");
                    self.publisher.event(&owner, true, "WriteRefused", note);
                    self.refused.insert(key, message);
                }
                Done::Cleared(key) => {
                    self.refused.remove(&key);
                    if let Some(tracked) = self.tracked.get_mut(&key) {
                        if tracked.refused.take().is_some() {
                            tracked.published = None;
                        }
                    }
                }
            }
        }
    }
}

impl Driver {
    /// Gated pods of admitted workloads get their places (`ungate`).
    pub(super) fn ungate(&mut self, force: bool) {
        let Some(scheduler) = &self.scheduler else {
            return;
        };
        // Built only when a pass looks up a pod's job (most ticks have no
        // gated pod to look at).
        let by_uid: std::cell::OnceCell<HashMap<&str, (&str, WorkloadId)>> =
            std::cell::OnceCell::new();
        let tracked = &self.tracked;
        let nodes = &self.nodes.store;
        let refused = self.ungater.pass(
            force,
            |namespace, job_uid, pod_set| {
                let by_uid = by_uid.get_or_init(|| {
                    tracked
                        .values()
                        .map(|t| (t.owner.uid.as_str(), (t.owner.namespace.as_str(), t.id)))
                        .collect()
                });
                let &(job_namespace, id) = by_uid.get(job_uid)?;
                (job_namespace == namespace).then(|| places_of(scheduler, id, pod_set))?
            },
            |node| hostname_of(nodes, node),
        );
        for ((namespace, name, uid), message) in refused {
            let owner = Owner {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace,
                name,
                uid,
            };
            let note = format!("Arbiter could not give this pod its node and cards, so it stays gated (arbiter.dev/placement); tried again later and later: {message}");
            self.publisher.event(&owner, true, "PlacementRefused", note);
        }
    }
}

/// The `kubernetes.io/hostname` label of Node `node` (its name if it has
/// none, or is not in the store).
fn hostname_of(nodes: &kube::runtime::reflector::Store<Node>, node: &str) -> String {
    nodes
        .get(&ObjectRef::<Node>::new(node))
        .and_then(|n| {
            n.metadata
                .labels
                .as_ref()?
                .get(ungate::HOSTNAME_LABEL)
                .cloned()
        })
        .unwrap_or_else(|| node.to_string())
}
