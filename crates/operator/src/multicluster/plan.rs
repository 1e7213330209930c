//! The dispatch state machine: what to do next with one manager job, a
//! pure function of what was observed of it and of its workers. No I/O,
//! no clock: the caller says which workers answered and which are lost.
//! Called by `multicluster::dispatch` once per job per pass; every action
//! is idempotent, so a restart or a repeated pass never doubles one.
//!
//! The rules, MultiKueue's where it has one:
//! - a job that is not admitted (held) or has finished has no copy on any
//!   worker (Kueue deletes the remote objects of a finished or evicted
//!   workload); a held one also forgets its worker, so a new admission
//!   chooses afresh;
//! - an admitted job runs on exactly one worker, the one recorded on it
//!   (the assignment, written before the copy is made); a copy on any
//!   other reachable worker is stale and deleted before anything else;
//! - the assigned worker's copy is made when missing and its status copied
//!   back while it exists;
//! - an assigned worker unreachable for less than the lost-worker timeout
//!   is waited for; past it (Kueue's `workerLostTimeout`) the job is given
//!   to another reachable worker, chosen by the caller's `pick` (the
//!   placement policy, or the first in the config's order). The copy on
//!   the lost worker is deleted when it answers again.

/// Whether a worker answered this pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Its API answered.
    Up,
    /// Unreachable, for less than the lost-worker timeout.
    Down,
    /// Unreachable for the lost-worker timeout or longer.
    Lost,
}

/// One worker of the job's MultiKueueConfig, as observed this pass.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerFacts {
    /// The MultiKueueCluster's name.
    pub name: String,
    /// Whether it answered.
    pub reach: Reach,
    /// Whether it holds a copy of this job (only known when `Up`).
    pub has_copy: bool,
}

/// The manager's job as observed this pass.
#[derive(Clone, Debug, PartialEq)]
pub struct JobFacts {
    /// Held (`spec.suspend`): not admitted, or evicted.
    pub suspended: bool,
    /// Ended (its status copied back from the worker says so).
    pub finished: bool,
    /// The worker recorded on it, if any.
    pub assigned: Option<String>,
}

/// One step toward the wanted state, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Delete the copy on this worker.
    Delete(String),
    /// Record this worker on the manager's job.
    Assign(String),
    /// Forget the recorded worker.
    Unassign,
    /// Make the copy on this worker.
    Create(String),
    /// Copy this worker's status of the job back to the manager's job.
    Sync(String),
}

/// What to do with one job. `workers` are the config's, in its order;
/// `pick` chooses among the indices (into `workers`) of the reachable
/// candidates, given in config order and never empty, and returns one of
/// them. An action's failure stops the caller's pass for this job; the
/// next pass plans again from what it then observes.
pub fn plan(
    job: &JobFacts,
    workers: &[WorkerFacts],
    pick: &mut dyn FnMut(&[usize]) -> usize,
) -> Vec<Action> {
    let mut actions = Vec::new();
    let copies = |except: Option<&str>| {
        workers
            .iter()
            .filter(|w| w.reach == Reach::Up && w.has_copy && Some(w.name.as_str()) != except)
            .map(|w| Action::Delete(w.name.clone()))
            .collect::<Vec<_>>()
    };
    if job.suspended || job.finished {
        actions.extend(copies(None));
        if job.suspended && job.assigned.is_some() {
            actions.push(Action::Unassign);
        }
        return actions;
    }
    let assigned = job
        .assigned
        .as_deref()
        .and_then(|name| workers.iter().find(|w| w.name == name));
    // Without a record (it was lost or never written), a reachable copy is
    // adopted rather than a second one made.
    let adopted = match (&job.assigned, assigned) {
        (None, _) => workers.iter().find(|w| w.reach == Reach::Up && w.has_copy),
        _ => None,
    };
    let keep = assigned.or(adopted);
    actions.extend(copies(keep.map(|w| w.name.as_str())));
    match keep {
        Some(worker) if adopted.is_some() => {
            actions.push(Action::Assign(worker.name.clone()));
            actions.push(Action::Sync(worker.name.clone()));
        }
        Some(worker) => match (worker.reach, worker.has_copy) {
            (Reach::Up, true) => actions.push(Action::Sync(worker.name.clone())),
            (Reach::Up, false) => actions.push(Action::Create(worker.name.clone())),
            (Reach::Down, _) => {}
            (Reach::Lost, _) => actions.extend(choose(workers, Some(&worker.name), pick)),
        },
        // No record, or one naming a worker no longer in the config.
        None => actions.extend(choose(workers, None, pick)),
    }
    actions
}

/// A new worker among the reachable ones but `except`: assign, then create.
fn choose(
    workers: &[WorkerFacts],
    except: Option<&str>,
    pick: &mut dyn FnMut(&[usize]) -> usize,
) -> Vec<Action> {
    let candidates: Vec<usize> = workers
        .iter()
        .enumerate()
        .filter(|(_, w)| w.reach == Reach::Up && Some(w.name.as_str()) != except)
        .map(|(i, _)| i)
        .collect();
    if candidates.is_empty() {
        return Vec::new();
    }
    let chosen = pick(&candidates);
    let name = match candidates.contains(&chosen) {
        true => workers[chosen].name.clone(),
        false => workers[candidates[0]].name.clone(),
    };
    vec![Action::Assign(name.clone()), Action::Create(name)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::*;

    fn worker(name: &str, reach: Reach, has_copy: bool) -> WorkerFacts {
        WorkerFacts {
            name: name.to_string(),
            reach,
            has_copy,
        }
    }

    fn admitted(assigned: Option<&str>) -> JobFacts {
        JobFacts {
            suspended: false,
            finished: false,
            assigned: assigned.map(str::to_string),
        }
    }

    fn first(candidates: &[usize]) -> usize {
        candidates[0]
    }

    fn s(name: &str) -> String {
        name.to_string()
    }

    #[test]
    fn an_admitted_job_is_assigned_then_created_on_the_picked_worker() {
        let workers = [
            worker("w1", Reach::Up, false),
            worker("w2", Reach::Up, false),
        ];
        assert_eq!(
            plan(&admitted(None), &workers, &mut first),
            [Assign(s("w1")), Create(s("w1"))]
        );
        let mut last = |c: &[usize]| *c.last().unwrap();
        assert_eq!(
            plan(&admitted(None), &workers, &mut last),
            [Assign(s("w2")), Create(s("w2"))]
        );
    }

    #[test]
    fn an_unreachable_worker_is_never_picked_and_a_bad_pick_falls_back() {
        let workers = [
            worker("w1", Reach::Down, false),
            worker("w2", Reach::Up, false),
        ];
        let mut seen = Vec::new();
        let mut out_of_range = |c: &[usize]| {
            seen = c.to_vec();
            7
        };
        assert_eq!(
            plan(&admitted(None), &workers, &mut out_of_range),
            [Assign(s("w2")), Create(s("w2"))]
        );
        assert_eq!(seen, [1]);
        let none_up = [
            worker("w1", Reach::Down, false),
            worker("w2", Reach::Lost, false),
        ];
        assert_eq!(plan(&admitted(None), &none_up, &mut first), []);
    }

    #[test]
    fn the_assigned_copy_is_made_when_missing_and_synced_while_it_exists() {
        let missing = [
            worker("w1", Reach::Up, false),
            worker("w2", Reach::Up, false),
        ];
        assert_eq!(
            plan(&admitted(Some("w2")), &missing, &mut first),
            [Create(s("w2"))]
        );
        let there = [
            worker("w1", Reach::Up, false),
            worker("w2", Reach::Up, true),
        ];
        assert_eq!(
            plan(&admitted(Some("w2")), &there, &mut first),
            [Sync(s("w2"))]
        );
    }

    #[test]
    fn a_copy_on_another_worker_is_deleted_before_anything_else() {
        let workers = [
            worker("w1", Reach::Up, true),
            worker("w2", Reach::Up, false),
        ];
        assert_eq!(
            plan(&admitted(Some("w2")), &workers, &mut first),
            [Delete(s("w1")), Create(s("w2"))]
        );
    }

    #[test]
    fn a_down_worker_is_waited_for_and_a_lost_one_replaced() {
        let down = [
            worker("w1", Reach::Up, false),
            worker("w2", Reach::Down, false),
        ];
        assert_eq!(plan(&admitted(Some("w2")), &down, &mut first), []);
        let lost = [
            worker("w1", Reach::Up, false),
            worker("w2", Reach::Lost, false),
        ];
        assert_eq!(
            plan(&admitted(Some("w2")), &lost, &mut first),
            [Assign(s("w1")), Create(s("w1"))]
        );
        // Lost with nowhere else to go: wait.
        let alone = [worker("w2", Reach::Lost, false)];
        assert_eq!(plan(&admitted(Some("w2")), &alone, &mut first), []);
    }

    #[test]
    fn the_lost_workers_copy_is_deleted_when_it_answers_again() {
        // Reassigned to w1 while w2 was lost; w2 is back with its old copy.
        let back = [worker("w1", Reach::Up, true), worker("w2", Reach::Up, true)];
        assert_eq!(
            plan(&admitted(Some("w1")), &back, &mut first),
            [Delete(s("w2")), Sync(s("w1"))]
        );
    }

    #[test]
    fn without_a_record_a_reachable_copy_is_adopted_not_doubled() {
        let workers = [
            worker("w1", Reach::Up, false),
            worker("w2", Reach::Up, true),
        ];
        assert_eq!(
            plan(&admitted(None), &workers, &mut first),
            [Assign(s("w2")), Sync(s("w2"))]
        );
    }

    #[test]
    fn a_record_of_a_worker_gone_from_the_config_is_replaced() {
        let workers = [worker("w1", Reach::Up, false)];
        assert_eq!(
            plan(&admitted(Some("old")), &workers, &mut first),
            [Assign(s("w1")), Create(s("w1"))]
        );
    }

    #[test]
    fn a_held_job_has_no_copy_and_forgets_its_worker() {
        let held = JobFacts {
            suspended: true,
            finished: false,
            assigned: Some(s("w2")),
        };
        let workers = [
            worker("w1", Reach::Down, true),
            worker("w2", Reach::Up, true),
        ];
        assert_eq!(
            plan(&held, &workers, &mut first),
            [Delete(s("w2")), Unassign]
        );
    }

    #[test]
    fn a_finished_job_keeps_its_record_and_loses_its_copies() {
        let done = JobFacts {
            suspended: false,
            finished: true,
            assigned: Some(s("w2")),
        };
        let workers = [worker("w1", Reach::Up, true), worker("w2", Reach::Up, true)];
        assert_eq!(
            plan(&done, &workers, &mut first),
            [Delete(s("w1")), Delete(s("w2"))]
        );
        let gone = [
            worker("w1", Reach::Up, false),
            worker("w2", Reach::Up, false),
        ];
        assert_eq!(plan(&done, &gone, &mut first), []);
    }
}
