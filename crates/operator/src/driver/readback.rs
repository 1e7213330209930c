//! Reading back what was admitted after a start: every released job that
//! carries an `arbiter.dev/admission` record goes to `Scheduler::restore`
//! with its flavors, counts, times and the places of its pods (no policy
//! asked, nothing admitted twice); a job whose record no longer fits the
//! configuration is held again and queued as new, and so is one whose
//! record Arbiter did not write for it (`record_trusted`: its seal, or its
//! Workload's sealed admission saying the same; a Workload's unsealed word,
//! which anyone allowed to write Workloads could forge, only when no seal
//! can be had). And the Workloads: what
//! each says a waiting job carried (retry and requeue counts, a backoff
//! under way) is given to the job when it is queued, and the publisher
//! starts from their conditions, so a condition's `lastTransitionTime`
//! stays when its status does.

use super::*;
use arbiter_core::model::api;
use kube::api::{Api, ListParams};

/// Workloads read per list request.
const PAGE: u32 = 500;
/// Tries of each list request before the Workloads are given up on (the
/// waits between them double from one second: 15 seconds in all).
const LIST_ATTEMPTS: u32 = 5;

/// Per Workload (namespace, name): the uid of the job owning it, its
/// admission and that admission's seal.
pub(super) type WorkloadAdmissions =
    HashMap<(String, String), (String, Option<api::Admission>, Option<String>)>;

/// Whether a Workload's admission and a job's record say the same: per pod
/// set, the flavors and the count.
fn same_admission(admission: &api::Admission, record: &inject::Recorded) -> bool {
    admission.pod_set_assignments.len() == record.flavors.len()
        && admission
            .pod_set_assignments
            .iter()
            .zip(record.flavors.iter().zip(&record.counts))
            .all(|(a, (flavors, count))| {
                a.flavors == *flavors && a.count.unwrap_or(*count) == *count
            })
}

impl Driver {
    /// Reads every Workload once (paged): keeps what each carried for its
    /// job and tells the publisher its conditions. A failure is logged and
    /// leaves the counters to start again (nothing is decided from them
    /// but backoffs and limits). Returns each Workload's owning job's uid
    /// and admission, by (namespace, name); `None` if they could not be read.
    pub(super) async fn read_back_workloads(&mut self) -> Option<WorkloadAdmissions> {
        let api: Api<api::Workload> = Api::all(self.client.clone());
        let mut params = ListParams::default().limit(PAGE);
        let mut read = 0usize;
        let mut admissions = WorkloadAdmissions::new();
        loop {
            let mut attempt = 0;
            let page = loop {
                match api.list(&params).await {
                    Ok(page) => break page,
                    Err(e) if attempt + 1 < LIST_ATTEMPTS => {
                        attempt += 1;
                        tracing::info!(error = %e, attempt, "reading the Workloads back failed; trying again");
                        tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, read, "reading the Workloads back failed {LIST_ATTEMPTS} times; waiting jobs start their retry and requeue counts again, and an admission record without a valid seal is trusted only if no seal could be asked for");
                        return None;
                    }
                }
            };
            for workload in page.items {
                read += 1;
                let (Some(namespace), Some(name)) =
                    (workload.metadata.namespace, workload.metadata.name)
                else {
                    continue;
                };
                let owner = workload
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .find(|o| o.controller == Some(true))
                    .map(|o| o.uid.clone())
                    .unwrap_or_default();
                let Some(status) = workload.status else {
                    admissions.insert((namespace, name), (owner, None, None));
                    continue;
                };
                admissions.insert(
                    (namespace.clone(), name.clone()),
                    (
                        owner.clone(),
                        status.admission.clone(),
                        status.admission_seal.clone(),
                    ),
                );
                self.publisher
                    .seed_conditions(&namespace, &name, status.conditions.clone());
                let carried = crate::workloads::carried(&status);
                if carried != Default::default() {
                    self.read_back.insert((namespace, name), (owner, carried));
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
        tracing::info!(
            workloads = read,
            carried = self.read_back.len(),
            "Workloads read back"
        );
        Some(admissions)
    }

    /// Whether the admission record `text` on job `key` (uid `uid`) is one
    /// Arbiter wrote for it: its seal holds, or its Workload says the same
    /// admission under a seal that holds (the record's made with an
    /// earlier key). Without a key, or with one made during this start,
    /// no seal can hold: the Workload's word is taken (and with the
    /// Workloads unread, the record's, as before seals were written).
    fn record_trusted(
        &self,
        key: &JobKey,
        uid: &str,
        text: &str,
        seal: Option<&str>,
        record: &inject::Recorded,
        admissions: Option<&WorkloadAdmissions>,
    ) -> bool {
        if let (Some(sealer), Some(seal)) = (&self.sealer, seal) {
            if sealer.verify(uid, text, seal) {
                return true;
            }
        }
        // Whether no seal can be asked for.
        let unsealed = self.sealer.as_ref().is_none_or(|s| s.made_now());
        let Some(admissions) = admissions else {
            return unsealed;
        };
        let name = crate::workloads::workload_name(&self.jobs[key.watch].resource.kind, &key.name);
        let Some((owner, Some(admission), admission_seal)) =
            admissions.get(&(key.namespace.clone(), name))
        else {
            return false;
        };
        let sealed = || {
            let (Some(sealer), Some(seal)) = (&self.sealer, admission_seal) else {
                return false;
            };
            sealer.verify_admission(uid, admission, seal)
        };
        owner == uid && same_admission(admission, record) && (unsealed || sealed())
    }

    /// Reads back the admitted jobs after a start (see the module docs).
    pub(super) async fn restore(&mut self) {
        let admissions = self.read_back_workloads().await;
        let Some(cluster) = self.scheduler.as_ref().map(|s| s.cluster_arc().clone()) else {
            return;
        };
        let mut restored = Vec::new();
        let mut keys = Vec::new();
        let mut unreadable = Vec::new();
        let mut forged = Vec::new();
        for (key, seen) in self.index.iter() {
            if seen.held || seen.ended.is_some() || !seen.recorded {
                continue;
            }
            let Some(job) = self.job_value(key) else {
                continue;
            };
            let Some(record) = inject::recorded(&job) else {
                continue;
            };
            let record = match record {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(job = %key, error = %e, "holding the job again and queueing it as new");
                    unreadable.push(key.clone());
                    continue;
                }
            };
            let annotation = |name: &str| {
                job.pointer("/metadata/annotations")
                    .and_then(|a| a.get(name))
                    .and_then(serde_json::Value::as_str)
            };
            let text = annotation(inject::ADMISSION_ANNOTATION).unwrap_or_default();
            let seal = annotation(crate::seal::SEAL_ANNOTATION);
            if !self.record_trusted(key, &seen.uid, text, seal, &record, admissions.as_ref()) {
                tracing::warn!(job = %key, "its admission record is not one Arbiter wrote for it (no valid seal, and no sealed admission of its Workload says the same); holding it again and queueing it as new");
                forged.push((key.clone(), seen.uid.clone()));
                continue;
            }
            let Ok(info) = &seen.info else {
                unreadable.push(key.clone());
                continue;
            };
            let Intake::Queued(workload) = intake(&cluster, info, None) else {
                unreadable.push(key.clone());
                continue;
            };
            // Its counters, if its Workload (of this job) carried any.
            let name =
                crate::workloads::workload_name(&self.jobs[key.watch].resource.kind, &key.name);
            let carried = self
                .read_back
                .remove(&(key.namespace.clone(), name))
                .filter(|(owner, _)| *owner == seen.uid || Some(owner) == seen.retry_of.as_ref())
                .map(|(_, carried)| carried)
                .unwrap_or_default();
            restored.push(Restored {
                carried,
                workload,
                flavors: record.flavors.clone(),
                counts: record.counts.clone(),
                admitted_at: Millis(record.admitted_at),
                queue_time: Millis(record.queue_time),
                placements: inject::placed_pods(&record),
            });
            keys.push((key.clone(), seen.uid.clone(), template_paths(info)));
        }
        let Some(scheduler) = self.scheduler.as_mut() else {
            return;
        };
        let results = scheduler.restore(restored);
        let Some(scheduler) = self.scheduler.as_ref() else {
            return;
        };
        let count = results.iter().filter(|r| r.is_ok()).count();
        for (result, (key, uid, paths)) in results.into_iter().zip(keys) {
            match result {
                Ok(id) => {
                    self.by_id.insert(id, key.clone());
                    let owner = self.owner(&key, uid);
                    // Its Workload may never have been written (the
                    // operator stopped with it waiting): created if absent.
                    let spec = crate::workloads::object(&owner, scheduler.entry(id), scheduler);
                    self.publisher.workload(&owner, Some(spec), None);
                    self.tracked
                        .insert(key.clone(), KnownJob::new(id, owner, paths));
                    // Released as recorded: kept so.
                    if let Some((pod_sets, record)) = self.admission(id, &key) {
                        let uid = self.tracked[&key].owner.uid.clone();
                        self.writer
                            .want(&key, &uid, Want::Released { pod_sets, record });
                    }
                }
                Err(e) => {
                    tracing::warn!(job = %key, error = %e, "admission read back does not fit; holding the job again");
                    unreadable.push(key);
                }
            }
        }
        tracing::info!(restored = count, "admissions read back from the jobs");
        for (key, uid) in forged {
            let owner = self.owner(&key, uid);
            self.publisher.event(
                &owner,
                true,
                "AdmissionRecordRejected",
                format!(
                    "its {} annotation is not one Arbiter wrote for this job (edited, copied from another job, or its seal {} removed), and no admission Arbiter sealed in its Workload says the same: held again and queued as new",
                    inject::ADMISSION_ANNOTATION,
                    crate::seal::SEAL_ANNOTATION
                ),
            );
            unreadable.push(key);
        }
        for key in &unreadable {
            if let Some(seen) = self.index.get(key) {
                self.writer.want(key, &seen.uid, Want::Held);
            }
        }
    }
}
