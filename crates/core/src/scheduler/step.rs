//! The driver API: the one entry both drivers — the simulator in virtual
//! time, the operator in a cluster — call. Given the current time and what
//! happened outside since the last call ([`Input`]s, applied in order), a
//! [`Scheduler::step`] fires the due timers, runs scheduling cycles until
//! nothing changes (at most [`MAX_CYCLES_PER_STEP`]), asks for the
//! autoscale plan and returns it with every decision and the next time it
//! needs waking. The driver owns the clock and the world; the step owns
//! every decision.

use crate::model::cluster::FlavorId;
use crate::model::Millis;

use super::autoscale::ScaleRequest;
use super::entry::Carried;
use super::hooks::Hooks;
use super::workload::{Workload, WorkloadId};
use super::{Event, Scheduler, MAX_CYCLES_PER_STEP};

/// Something that happened outside the core.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// A job arrived at this step's time, its queue time: the workload
    /// `intake` made of it against this scheduler's configuration. Its id
    /// comes back in [`Step::submitted`], in input order.
    Submit(Workload),
    /// [`Input::Submit`] of a job that was queued before this step (created
    /// while the driver was not watching): `queue_time` (at most the step's
    /// time) orders it in its queue instead of the step's time.
    SubmitQueued {
        /// The workload.
        workload: Workload,
        /// When it was first queued.
        queue_time: Millis,
        /// What it brings from before the driver restarted.
        carried: Carried,
    },
    /// An admitted workload ran to completion.
    Finish(WorkloadId),
    /// Every pod of an admitted workload is ready (or has run to its end):
    /// `waitForPodsReady` stops waiting for it.
    PodsReady(WorkloadId),
    /// The pods of an admitted workload said ready before are no longer
    /// all ready (a pod failed, its node went away): with
    /// `waitForPodsReady.recoveryTimeout`, they must be again within it.
    PodsNotReady(WorkloadId),
    /// An admitted workload failed; `message` is what the driver saw.
    Fail {
        /// The workload.
        workload: WorkloadId,
        /// What the driver saw.
        message: String,
    },
    /// The job was deleted: forget the workload, releasing its quota and
    /// nodes ([`Event::Withdrawn`]). Its id may be reused afterwards.
    Withdraw(WorkloadId),
    /// A node of the flavor became ready (a scale-up done or a new node).
    NodeReady(FlavorId),
    /// An idle node of the flavor went away.
    NodeRemoved(FlavorId),
    /// `nodes` of a scale-up of the flavor are no longer in flight: they
    /// arrived, as nodes of the driver's own pools (the operator's Nodes),
    /// or will not. Unlike [`Input::NodeReady`] it adds no capacity.
    ProvisioningDone {
        /// The flavor scaled up.
        flavor: FlavorId,
        /// Nodes no longer in flight.
        nodes: u32,
    },
}

/// What one step decided.
#[derive(Debug, Default)]
pub struct Step {
    /// Ids of the submitted workloads, in the order of their inputs.
    pub submitted: Vec<WorkloadId>,
    /// Every decision, in the order taken.
    pub events: Vec<Event>,
    /// Nodes to provision, and idle nodes no longer used.
    pub scale: Vec<ScaleRequest>,
    /// When to step again if nothing happens outside (`None`: not until something does).
    pub next_wake: Option<Millis>,
    /// Scheduling cycles run.
    pub cycles: u32,
}

impl Scheduler {
    /// Applies `inputs` at `now`, fires due timers, schedules until nothing
    /// changes and plans autoscaling. `now` should not go back in time; an
    /// earlier `now` is treated as the latest one seen.
    pub fn step(&mut self, now: Millis, inputs: Vec<Input>, hooks: &mut dyn Hooks) -> Step {
        self.step_observed(now, inputs, hooks, &mut |_| {})
    }

    /// [`Scheduler::step`], calling `observe` after the inputs are applied,
    /// after the timers fired and after every cycle — for checks that the
    /// state holds its invariants at every point (the property tests).
    pub fn step_observed(
        &mut self,
        now: Millis,
        inputs: Vec<Input>,
        hooks: &mut dyn Hooks,
        observe: &mut dyn FnMut(&Scheduler),
    ) -> Step {
        let now = now.max(self.now);
        self.now = now;
        let mut step = Step::default();
        for input in inputs {
            if !matches!(input, Input::PodsReady(_) | Input::PodsNotReady(_)) {
                self.cluster_changed();
            }
            match input {
                Input::Submit(workload) => step.submitted.push(self.submit(workload, now, now)),
                Input::SubmitQueued {
                    workload,
                    queue_time,
                    carried,
                } => {
                    let id = self.submit(workload, now, queue_time);
                    self.carry(id, carried, now);
                    step.submitted.push(id);
                }
                Input::Finish(id) => step.events.extend(self.finish(id, now)),
                Input::Fail { workload, message } => {
                    step.events.extend(self.fail(workload, &message, now))
                }
                Input::Withdraw(id) => step.events.extend(self.withdraw(id, now)),
                Input::PodsReady(id) => {
                    self.pods_ready(id);
                }
                Input::PodsNotReady(id) => {
                    self.pods_not_ready(id, now);
                }
                Input::NodeReady(flavor) => {
                    self.node_ready(flavor);
                }
                Input::NodeRemoved(flavor) => {
                    self.node_removed(flavor);
                }
                Input::ProvisioningDone { flavor, nodes } => self.provisioning_done(flavor, nodes),
            }
        }
        observe(self);
        step.events.extend(self.fire_timers(now, hooks));
        observe(self);
        let mut more = true;
        while more && step.cycles < MAX_CYCLES_PER_STEP {
            let cycle = self.schedule(now, hooks);
            step.cycles += 1;
            step.events.extend(cycle.events);
            more = cycle.progress;
            observe(self);
        }
        step.scale = self.plan_autoscale(now, hooks);
        step.next_wake = if more { Some(now) } else { self.next_timer() };
        step
    }
}
