//! What happened to the jobs since the last tick, as the core's `Input`s:
//! new jobs queued (or held and told why they cannot be), ended ones
//! finished or failed, pods ready or no longer, jobs gone withdrawn. Reads
//! the index and sets the wants a read implies (a job is held until
//! admitted); decides nothing. Called by `Driver::tick` before the step.

use arbiter_core::jobs::JobInfo;
use arbiter_core::model::cluster::Cluster;
use arbiter_core::scheduler::Carried;

use super::index::ObservedJob;
use super::*;

/// A job that names a queue but cannot be queued, to note after the read:
/// its key, uid, the reason's code, the message and, when it could be
/// read, the job.
type Unqueueable = (JobKey, String, &'static str, String, Option<JobInfo>);

/// What one tick read of the jobs: the step's inputs, and what to do with
/// the step's answer.
#[derive(Default)]
pub(super) struct JobReading {
    /// What the step is given, in the order read.
    pub inputs: Vec<Input>,
    /// Workloads withdrawn by `inputs` (each once).
    withdrawn: BTreeSet<WorkloadId>,
    /// The jobs submitted, in the order of their `Submit` inputs: key, uid
    /// and template paths.
    pub submits: Vec<(JobKey, String, Vec<Option<String>>)>,
    /// Jobs that cannot be queued whose message changed.
    unqueued: Vec<Unqueueable>,
    /// Workloads whose status may have changed.
    pub touched: BTreeSet<WorkloadId>,
    /// Failed jobs created anew by the writer, seen again: they own their
    /// Workload once the step is taken.
    pub adopted: Vec<JobKey>,
}

impl Driver {
    /// Reads the jobs that changed (all of them on a `sweep`) into the
    /// step's inputs: each job's own change, the jobs gone withdrawn, the
    /// provisioning results. Jobs that cannot be queued are told here.
    pub(super) fn read_changes(&mut self, sweep: bool) -> JobReading {
        let mut changes = JobReading::default();
        // The changed ones first, in the order they were seen, so jobs new
        // in this tick are queued in that order even in a sweep.
        let mut keys: Vec<JobKey> = self.index.changed.clone();
        if sweep {
            let changed: HashSet<&JobKey> = self.index.changed.iter().collect();
            keys.extend(
                self.index
                    .iter()
                    .map(|(k, _)| k)
                    .filter(|k| !changed.contains(k))
                    .cloned(),
            );
        }
        let cluster = self
            .scheduler
            .as_ref()
            .expect("configured")
            .cluster_arc()
            .clone();
        for key in &keys {
            self.read_job(key, &cluster, &mut changes);
        }
        for (key, uid, reason, message, job) in std::mem::take(&mut changes.unqueued) {
            self.note_unqueued(&key, uid, reason, message, job.as_ref());
        }
        self.forget_unqueued(sweep);
        self.withdraw_gone(sweep, &mut changes);
        // A job of no one's queue any more, gone or being deleted is left
        // as it is (a tracked one once its withdrawal is stepped).
        for key in &self.index.changed {
            let ours = self
                .index
                .get(key)
                .is_some_and(|s| s.queue_label && !s.deleting);
            if !ours && !self.tracked.contains_key(key) {
                self.writer.forget(key);
            }
        }
        self.provisioning_inputs(&mut changes.inputs);
        changes
    }

    /// One job read: an unreadable one held and told, a tracked one's
    /// change turned into inputs, a new one queued (or held and told why
    /// it cannot be).
    fn read_job(&mut self, key: &JobKey, cluster: &Cluster, changes: &mut JobReading) {
        let Some(seen) = self.index.get(key) else {
            return;
        };
        let info = match &seen.info {
            Ok(info) => info,
            Err(e) => {
                // Arbiter's job (it names a queue) that cannot be
                // read: held, so it never runs unadmitted, and told.
                if seen.queue_label && !self.tracked.contains_key(key) {
                    self.writer.want(key, &seen.uid, Want::Held);
                    if self.unqueued_changed(key, &seen.uid, e) {
                        let uid = seen.uid.clone();
                        let entry = (key.clone(), uid, "InvalidJob", e.clone(), None);
                        changes.unqueued.push(entry);
                    }
                }
                return;
            }
        };
        // Being deleted (a finalizer may keep the object a while):
        // gone for the scheduler, its quota free at once.
        if !queued(seen) {
            return;
        }
        if let Some(tracked) = self.tracked.get_mut(key) {
            let scheduler = self.scheduler.as_ref().expect("configured");
            read_tracked(key, tracked, seen, scheduler, &mut self.writer, changes);
            return;
        }
        if seen.ended.is_some() {
            return;
        }
        let (code, message) = match intake(cluster, info, None) {
            Intake::Queued(workload) => {
                self.writer.want(key, &seen.uid, Want::Held);
                changes
                    .submits
                    .push((key.clone(), seen.uid.clone(), template_paths(info)));
                // Queued as of the job's creation (Kueue orders by it
                // too), so jobs created while the operator was down keep
                // their order.
                let kind = &self.jobs[key.watch].resource.kind;
                let carried = take_carried(&mut self.read_back, kind, key, seen);
                changes.inputs.push(match seen.created {
                    Some(queue_time) => Input::SubmitQueued {
                        workload,
                        queue_time,
                        carried,
                    },
                    None => Input::Submit(workload),
                });
                return;
            }
            Intake::Rejected(rejection) => (rejection.code(), rejection.to_string()),
            Intake::Unqueued(why) => (why.code(), why.to_string()),
        };
        self.writer.want(key, &seen.uid, Want::Held);
        if self.unqueued_changed(key, &seen.uid, &message) {
            let entry = (
                key.clone(),
                seen.uid.clone(),
                code,
                message,
                Some(info.clone()),
            );
            changes.unqueued.push(entry);
        }
    }

    /// Known jobs gone, being deleted, or no longer naming a queue:
    /// withdrawn. Only a job read again or gone can have become so; every
    /// tracked job is looked at on a `sweep` all the same.
    fn withdraw_gone(&self, sweep: bool, changes: &mut JobReading) {
        let candidates: Box<dyn Iterator<Item = &JobKey>> = if sweep {
            Box::new(self.tracked.keys())
        } else {
            Box::new(self.index.changed.iter())
        };
        for key in candidates {
            let Some(tracked) = self.tracked.get(key) else {
                continue;
            };
            // Gone while being created anew: not withdrawn; the writer
            // makes the creation.
            if self.index.get(key).is_some_and(queued)
                || changes.withdrawn.contains(&tracked.id)
                || tracked.recreate.is_some()
            {
                continue;
            }
            changes.inputs.push(Input::Withdraw(tracked.id));
            changes.withdrawn.insert(tracked.id);
        }
    }
}

/// A tracked job read again: replaced (withdrawn) or created anew by us
/// (adopted), ended (finished or failed, and left as it is), its pods
/// ready or no longer all ready.
fn read_tracked(
    key: &JobKey,
    tracked: &mut KnownJob,
    seen: &ObservedJob,
    scheduler: &Scheduler,
    writer: &mut JobWriter,
    changes: &mut JobReading,
) {
    if tracked.owner.uid != seen.uid {
        let replaced = tracked.recreate.as_ref().map(|(_, uid)| uid);
        if replaced.is_some() && seen.retry_of.as_ref() == replaced {
            // The failed job, created anew by us to run
            // again: the same workload, a new object.
            tracked.owner.uid = seen.uid.clone();
            tracked.ended = None;
            tracked.recreate = None;
            tracked.published = None;
            changes.adopted.push(key.clone());
        } else {
            // Deleted and created again under the same name.
            changes.inputs.push(Input::Withdraw(tracked.id));
            changes.withdrawn.insert(tracked.id);
        }
        return;
    }
    if tracked.recreate.is_some() {
        // The failed job is still there: the writer
        // deletes it and creates it anew.
        return;
    }
    if let (None, Some(ended)) = (&tracked.ended, &seen.ended) {
        // An ended job is left as it is.
        writer.forget(key);
        tracked.ended = Some(ended.clone());
        changes.inputs.push(match ended {
            Ended::Succeeded => Input::Finish(tracked.id),
            Ended::Failed { message } => Input::Fail {
                workload: tracked.id,
                message: message.clone(),
            },
        });
        changes.touched.insert(tracked.id);
    }
    // Its pods are ready (a kind that cannot say: at once),
    // or, ready once, no longer all are (a pod failed, its
    // node went away: `recoveryTimeout`).
    let awaiting = scheduler.awaiting_pods(tracked.id);
    if awaiting && seen.pods_ready != Some(false) {
        changes.inputs.push(Input::PodsReady(tracked.id));
        changes.touched.insert(tracked.id);
    } else if !awaiting
        && seen.pods_ready == Some(false)
        && scheduler.entry(tracked.id).status == Status::Admitted
    {
        changes.inputs.push(Input::PodsNotReady(tracked.id));
        changes.touched.insert(tracked.id);
    }
}

/// What a new job's Workload carried from before a restart, if it is this
/// job's (or the failed one's it runs again in place of); taken from
/// `read_back`.
fn take_carried(
    read_back: &mut HashMap<(String, String), (String, Carried)>,
    kind: &str,
    key: &JobKey,
    seen: &ObservedJob,
) -> Carried {
    let name = crate::workloads::workload_name(kind, &key.name);
    read_back
        .remove(&(key.namespace.clone(), name))
        .filter(|(owner, _)| *owner == seen.uid || Some(owner) == seen.retry_of.as_ref())
        .map(|(_, carried)| carried)
        .unwrap_or_default()
}
