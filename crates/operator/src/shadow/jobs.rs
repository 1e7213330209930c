//! The shadow's arrivals and departures: the jobs that changed, as the
//! shadow scheduler's `Input`s. A new job naming a Kueue queue is submitted as
//! of its creation (or tracked as refused when Arbiter cannot queue it);
//! a job that ended under Kueue finishes (or fails) in the shadow if
//! Arbiter had admitted it there, else is withdrawn; a job gone is
//! withdrawn and its last outcome settled. Decides nothing; writes nothing.

use arbiter_core::jobs::Ended;
use arbiter_core::scheduler::intake::{intake, Intake};
use arbiter_core::scheduler::{Carried, Input, Status};

use super::*;

/// The label that queues a job in Kueue.
const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

impl Shadow {
    /// Reads the jobs that changed (every job after the configuration
    /// changed) into the step's inputs; returns them and the jobs submitted,
    /// in the order of their `Submit` inputs.
    pub(super) fn read_jobs(&mut self, now: i64, rebuilt: bool) -> (Vec<Input>, Vec<JobKey>) {
        let mut keys: Vec<JobKey> = self.index.changed.clone();
        if rebuilt {
            keys.extend(self.index.iter().map(|(k, _)| k.clone()));
            keys.extend(self.tracked.keys().cloned());
            keys.sort();
            keys.dedup();
        }
        let mut inputs = Vec::new();
        let mut submits = Vec::new();
        for key in keys {
            let present = self.index.get(&key).is_some_and(|seen| !seen.deleting);
            if !present {
                self.gone(&key, &mut inputs);
                continue;
            }
            let tracked = self.tracked.get(&key);
            match tracked {
                Some(tracked) if tracked.unqueued && rebuilt => {
                    self.forget(&key);
                    self.arrive(&key, now, &mut inputs, &mut submits);
                }
                Some(tracked) if tracked.ended_at.is_none() => {
                    if let Some(ended) = self.ended(&key) {
                        self.end(&key, ended, now, &mut inputs);
                    }
                }
                Some(_) => {}
                None => self.arrive(&key, now, &mut inputs, &mut submits),
            }
        }
        (inputs, submits)
    }

    /// A job not seen before: submitted if it names a queue, has not
    /// ended and Arbiter can queue it; tracked as refused if it cannot.
    fn arrive(
        &mut self,
        key: &JobKey,
        now: i64,
        inputs: &mut Vec<Input>,
        submits: &mut Vec<JobKey>,
    ) {
        let Some(seen) = self.index.get(key) else {
            return;
        };
        // Kueue's jobs only: one queued by Arbiter's own label alone is
        // no job Kueue would decide on.
        let kueues = seen.info.as_ref().map_or(seen.queue_label, |info| {
            info.labels.contains_key(KUEUE_QUEUE_LABEL)
        });
        if !kueues || seen.ended.is_some() {
            return;
        }
        let created = seen.created.map(|c| c.0);
        let tolerance = self.shadow.tolerance.as_millis() as i64;
        let timed = created.is_some_and(|c| c + tolerance >= self.started_at);
        let mut tracked = Tracked::new(seen.uid.clone(), created, timed);
        let cluster = self.scheduler.as_ref().expect("configured").cluster_arc();
        let refused = match &seen.info {
            Err(e) => Some(format!("Arbiter cannot read the job: {e}")),
            Ok(info) => match intake(cluster, info, None) {
                Intake::Queued(workload) => {
                    inputs.push(Input::SubmitQueued {
                        workload,
                        queue_time: Millis(created.unwrap_or(now).min(now)),
                        carried: Carried::default(),
                    });
                    submits.push(key.clone());
                    None
                }
                Intake::Rejected(rejection) => Some(format!("{}: {rejection}", rejection.code())),
                Intake::Unqueued(why) => Some(format!("{}: {why}", why.code())),
            },
        };
        tracked.unqueued = refused.is_some();
        tracked.arbiter.refused = refused;
        self.by_uid.insert(seen.uid.clone(), key.clone());
        self.by_name
            .insert(format!("{}/{}", key.namespace, key.name), key.clone());
        self.tracked.insert(key.clone(), tracked);
    }

    /// A tracked job ended under Kueue: finished or failed in the shadow if
    /// admitted there, else withdrawn (it never ran in Arbiter's world).
    fn end(&mut self, key: &JobKey, ended: Ended, now: i64, inputs: &mut Vec<Input>) {
        let scheduler = self.scheduler.as_ref().expect("configured");
        let Some(tracked) = self.tracked.get_mut(key) else {
            return;
        };
        tracked.ended_at = Some(now);
        let Some(id) = tracked.id else {
            return;
        };
        let admitted_now = scheduler
            .get(id)
            .is_some_and(|e| e.status == Status::Admitted);
        inputs.push(match (admitted_now, ended) {
            (true, Ended::Succeeded) => Input::Finish(id),
            (true, Ended::Failed { message }) => Input::Fail {
                workload: id,
                message,
            },
            (false, _) => {
                // Forgotten here, not on its `Withdrawn`: the step may
                // give its id to a job submitted in the same step.
                tracked.id = None;
                self.by_id.remove(&id);
                Input::Withdraw(id)
            }
        });
    }

    /// A tracked job deleted: withdrawn from the shadow, its last outcome settled.
    fn gone(&mut self, key: &JobKey, inputs: &mut Vec<Input>) {
        let Some(tracked) = self.tracked.get(key) else {
            return;
        };
        if let Some(id) = tracked.id {
            inputs.push(Input::Withdraw(id));
        }
        self.settled.add(&tracked.outcome);
        self.forget(key);
    }

    /// Forgets the job `key` (its workload, if any, withdrawn by the caller).
    fn forget(&mut self, key: &JobKey) {
        if let Some(tracked) = self.tracked.remove(key) {
            self.kueue.forget(&tracked.uid);
            self.by_uid.remove(&tracked.uid);
            if let Some(id) = tracked.id {
                self.by_id.remove(&id);
            }
        }
        self.by_name
            .remove(&format!("{}/{}", key.namespace, key.name));
    }
}
