//! A job's desired state and the next write that brings it there — a pure
//! function of the core's decision ([`Want`]) and the object as last seen
//! ([`Observed`]), so every write follows from comparing the two, never
//! from remembering what was written. `writer` calls [`next`] on every
//! change of either and makes the one write it names, until it names none.
//!
//! A job held by Kubernetes' rules moves through these writes in order:
//! released onto another admission, it is held first (a running job's
//! template cannot change); held with its integration's
//! `hold.clearStatus` fields set (a `batch/v1 Job`'s `startTime`), they
//! are cleared before its template changes; then what admission injected
//! is taken out (held) or replaced (admitted).

use serde_json::Value;

use arbiter_core::jobs::Integration;

use crate::inject::{self, PodSetAdmission, Recorded};

/// What a job must be, as the core decided.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Want {
    /// Not admitted (queued, evicted, or not queued at all): held, and
    /// carrying nothing an admission injected.
    Held,
    /// Admitted: this admission injected and recorded, and released.
    Released {
        pod_sets: Vec<PodSetAdmission>,
        record: Recorded,
    },
    /// Failed, to run again: the failed job (uid `replaces`) deleted and
    /// `fresh` created in its place.
    Replaced { fresh: Box<Value>, replaces: String },
}

/// What [`next`] needs of a job object.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Observed {
    pub held: bool,
    /// Its admission record (`Some(Err)`: there, but unreadable).
    pub record: Option<Result<Recorded, String>>,
    /// One of its integration's `hold.clearStatus` fields is set.
    pub status_set: bool,
    pub uid: String,
    /// The uid of the failed job it was created anew in place of.
    pub retry_of: Option<String>,
}

impl Observed {
    pub fn of(job: &Value, integration: &Integration) -> Observed {
        Observed {
            held: integration.is_held(job),
            record: inject::recorded(job),
            status_set: crate::jobs::status_set(job, integration),
            uid: crate::jobs::uid(job),
            retry_of: inject::retry_of(job),
        }
    }
}

/// One write of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Suspend it (the integration's hold), nothing else.
    Hold,
    /// Clear its integration's `hold.clearStatus` fields.
    ClearStatus,
    /// Take out what an admission injected, and its record.
    Restore,
    /// Inject the admission (after taking out an earlier one), record it, release.
    Admit,
    /// Delete the failed job (while it is that one) and create it anew.
    Recreate,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Hold => "hold",
            Step::ClearStatus => "clear status",
            Step::Restore => "restore",
            Step::Admit => "admit",
            Step::Recreate => "create anew",
        })
    }
}

/// Whether `record` is `want`'s admission: the same flavors, counts and
/// time (a job evicted and admitted again is a new admission, even onto
/// the same flavors: its pods start again).
fn same_admission(record: &Recorded, want: &Recorded) -> bool {
    record.flavors == want.flavors
        && record.counts == want.counts
        && record.admitted_at == want.admitted_at
}

/// The next write that brings `job` (`None`: no object of that name) to
/// `want`; `None` when it is there (or nothing can be written).
pub(super) fn next(want: &Want, job: Option<&Observed>) -> Option<Step> {
    match want {
        Want::Replaced { replaces, .. } => match job {
            None => Some(Step::Recreate),
            Some(job) if job.uid == *replaces => Some(Step::Recreate),
            // Created anew already, or a job of the user's under the name.
            Some(_) => None,
        },
        Want::Held => {
            let job = job?;
            if !job.held {
                Some(Step::Hold)
            } else if job.record.is_none() {
                None
            } else if job.status_set {
                Some(Step::ClearStatus)
            } else {
                Some(Step::Restore)
            }
        }
        Want::Released { record, .. } => {
            let job = job?;
            let admitted = matches!(&job.record, Some(Ok(r)) if same_admission(r, record));
            match (job.held, admitted) {
                (false, true) => None,
                // Running without this admission: held before it changes.
                (false, false) => Some(Step::Hold),
                (true, _) if job.status_set => Some(Step::ClearStatus),
                (true, _) => Some(Step::Admit),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn record(flavor: &str) -> Recorded {
        Recorded {
            flavors: vec![BTreeMap::from([("nvidia.com/gpu".into(), flavor.into())])],
            counts: vec![2],
            admitted_at: 1,
            queue_time: 0,
            injected: Vec::new(),
            placements: Vec::new(),
        }
    }

    fn released(flavor: &str) -> Want {
        Want::Released {
            pod_sets: Vec::new(),
            record: record(flavor),
        }
    }

    fn job(held: bool, record: Option<Recorded>, status_set: bool) -> Observed {
        Observed {
            held,
            record: record.map(Ok),
            status_set,
            uid: "uid-1".into(),
            retry_of: None,
        }
    }

    /// Applies `step` to `job` as the API would, for walking a job to its want.
    fn apply(job: &mut Observed, step: Step, want: &Want) {
        match step {
            Step::Hold => {
                job.held = true;
                // A suspended Job's controller clears startTime only later;
                // a started one has it set.
                job.status_set = true;
            }
            Step::ClearStatus => job.status_set = false,
            Step::Restore => job.record = None,
            Step::Admit => {
                let Want::Released { record, .. } = want else {
                    panic!("admit without an admission")
                };
                job.record = Some(Ok(record.clone()));
                job.held = false;
            }
            Step::Recreate => panic!("not a step of this walk"),
        }
    }

    /// The steps that bring `job` to `want`, in order.
    fn walk(mut job: Observed, want: &Want) -> Vec<Step> {
        let mut steps = Vec::new();
        while let Some(step) = next(want, Some(&job)) {
            assert!(steps.len() < 5, "no convergence: {steps:?}");
            apply(&mut job, step, want);
            steps.push(step);
        }
        steps
    }

    #[test]
    fn a_queued_job_is_held_and_a_held_one_left_alone() {
        assert_eq!(walk(job(false, None, false), &Want::Held), [Step::Hold]);
        assert_eq!(walk(job(true, None, false), &Want::Held), []);
        assert_eq!(walk(job(true, None, true), &Want::Held), []);
    }

    #[test]
    fn an_admission_is_written_in_one_step_onto_a_held_job() {
        assert_eq!(
            walk(job(true, None, false), &released("a100")),
            [Step::Admit]
        );
        assert_eq!(
            walk(job(false, Some(record("a100")), false), &released("a100")),
            []
        );
    }

    #[test]
    fn an_evicted_job_is_held_its_status_cleared_and_its_template_restored() {
        let running = job(false, Some(record("a100")), true);
        assert_eq!(
            walk(running, &Want::Held),
            [Step::Hold, Step::ClearStatus, Step::Restore]
        );
        // Held already, its controller having cleared startTime.
        assert_eq!(
            walk(job(true, Some(record("a100")), false), &Want::Held),
            [Step::Restore]
        );
        // A record someone broke is taken out all the same.
        let mut broken = job(true, None, false);
        broken.record = Some(Err("not Arbiter's".into()));
        assert_eq!(next(&Want::Held, Some(&broken)), Some(Step::Restore));
    }

    #[test]
    fn a_job_running_on_another_admission_is_held_before_it_is_admitted_again() {
        let running = job(false, Some(record("a100")), true);
        assert_eq!(
            walk(running, &released("h100")),
            [Step::Hold, Step::ClearStatus, Step::Admit]
        );
        // Released by someone else, without an admission.
        assert_eq!(
            walk(job(false, None, false), &released("h100")),
            [Step::Hold, Step::ClearStatus, Step::Admit]
        );
        // Held with an earlier admission still injected: replaced in one write.
        assert_eq!(
            walk(job(true, Some(record("a100")), false), &released("h100")),
            [Step::Admit]
        );
        // Evicted and admitted again onto the same flavor: a new admission.
        let mut again = record("a100");
        again.admitted_at = 2;
        let want = Want::Released {
            pod_sets: Vec::new(),
            record: again,
        };
        assert_eq!(
            walk(job(false, Some(record("a100")), false), &want),
            [Step::Hold, Step::ClearStatus, Step::Admit]
        );
    }

    #[test]
    fn only_the_failed_job_itself_is_replaced() {
        let want = Want::Replaced {
            fresh: Box::new(Value::Null),
            replaces: "uid-1".into(),
        };
        assert_eq!(
            next(&want, Some(&job(false, None, false))),
            Some(Step::Recreate)
        );
        // Deleted, the creation still to make.
        assert_eq!(next(&want, None), Some(Step::Recreate));
        let mut fresh = job(true, None, false);
        fresh.uid = "uid-2".into();
        fresh.retry_of = Some("uid-1".into());
        assert_eq!(next(&want, Some(&fresh)), None);
        let mut users = job(false, None, false);
        users.uid = "uid-3".into();
        assert_eq!(
            next(&want, Some(&users)),
            None,
            "another job under the name"
        );
    }

    #[test]
    fn nothing_is_written_to_a_job_that_is_not_there() {
        assert_eq!(next(&Want::Held, None), None);
        assert_eq!(next(&released("a100"), None), None);
    }
}
