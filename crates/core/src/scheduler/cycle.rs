//! One scheduling cycle (docs/design.md §3): score new arrivals, take every
//! ClusterQueue's head, assign flavors (with partial admission), order the
//! heads across ClusterQueues and admit what fits — asking the admission
//! hook once per attempt — or hand the head to `preemption`. Changes
//! scheduler state only through admissions, set-asides and rejections.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use crate::model::api::StopPolicy;
use crate::model::cluster::{ClusterQueueId, FlavorId, FlavorResource};
use crate::model::{Amount, Millis};

use super::assign::{self, Assignment, Mode};
use super::fair::Contender;
use super::hooks::{AdmissionRequest, AdmissionVerdict, Hooks};
use super::reason::Reason;
use super::timers::TimerKind;
use super::workload::{Admission, Status, WorkloadId};
use super::{Cycle, Event, Scheduler};

/// A ClusterQueue's head in one cycle, with its nominated assignment.
struct Head {
    cq: ClusterQueueId,
    id: WorkloadId,
    assignment: Assignment,
    order: (u32, Reverse<i32>, Millis, super::Seq),
}

impl Scheduler {
    /// Which head goes next: the first left in order, or, when it is in a
    /// cohort tree with fair sharing, the winner of the tournament among
    /// the heads of that tree still left.
    fn next_head(&mut self, heads: &[Option<Head>], first: usize) -> usize {
        let Some(head) = &heads[first] else {
            return first;
        };
        let cq = head.cq;
        if !self.fair.enabled(cq) || self.cluster.cluster_queue(cq).cohort.is_none() {
            return first;
        }
        let tree = self.trees.tree_of(cq);
        let mut at = Vec::new();
        let mut contenders = Vec::new();
        for (i, h) in heads.iter().enumerate().skip(first) {
            let Some(h) = h else { continue };
            if self.trees.tree_of(h.cq) != tree {
                continue;
            }
            let entry = &self.workloads[h.id];
            at.push(i);
            contenders.push(Contender {
                cq: h.cq,
                usage: &h.assignment.usage,
                priority: entry.workload.priority,
                queue_time: entry.slot.queue_time,
                seq: entry.slot.seq,
            });
        }
        if contenders.len() < 2 {
            return first;
        }
        at[self.tournament(&contenders)]
    }

    /// One scheduling cycle at `now`: score new arrivals, take every
    /// ClusterQueue's head, order them (docs/design.md §3) and admit what fits,
    /// preempting where allowed.
    pub(super) fn schedule(&mut self, now: Millis, hooks: &mut dyn Hooks) -> Cycle {
        self.cycles += 1;
        hooks.begin(now);
        if hooks.policies_changed() {
            self.epoch += 1;
            self.wake_all();
        }
        self.advance_history(now);
        self.score_new(now, hooks);
        let mut cycle = Cycle::default();
        if self.admission_blocked_by().is_some() {
            // `blockAdmission`: an admitted workload's pods are not all
            // ready; `reason` says so for everything waiting.
            return cycle;
        }
        let mut heads = Vec::with_capacity(self.queues.active().len());
        let active: Vec<ClusterQueueId> = self.queues.active().iter().copied().collect();
        for cq in active {
            let def = self.cluster.cluster_queue(cq);
            let Some(first) = self.queues.head(cq) else {
                continue;
            };
            if def.stop_policy != StopPolicy::None {
                // Nothing is examined; `reason` says the queue is stopped.
                continue;
            }
            let assignment = self.assign_head_reusing(cq, first.id, hooks);
            let entry = &self.workloads[first.id];
            // Kueue's order: by how far up the cohort tree the head
            // borrows, then priority, then time. Fair sharing decides
            // among a tree's heads by tournament, in turn with the others.
            let order = (
                assignment.borrow_level,
                Reverse(entry.workload.priority),
                entry.slot.queue_time,
                entry.slot.seq,
            );
            heads.push(Some(Head {
                cq,
                id: first.id,
                assignment,
                order,
            }));
        }
        heads.sort_by_key(|h| h.as_ref().map(|h| h.order));
        let mut changed_trees: BTreeSet<usize> = BTreeSet::new();
        let mut nodes_changed = false;
        let mut cursor = 0;
        loop {
            while heads.get(cursor).is_some_and(Option::is_none) {
                cursor += 1;
            }
            if cursor == heads.len() {
                break;
            }
            let next = self.next_head(&heads, cursor);
            let Some(Head {
                cq,
                id,
                mut assignment,
                ..
            }) = heads[next].take()
            else {
                continue;
            };
            if changed_trees.contains(&self.trees.tree_of(cq))
                || (nodes_changed && !assignment.placements.is_empty())
            {
                assignment = self.assign_head_reusing(cq, id, hooks);
            }
            let lq = &self.cluster.local_queues[self.workloads[id].workload.local_queue.index()];
            if lq.stop_policy != StopPolicy::None {
                // Whatever the queueing strategy: a stopped LocalQueue blocks nobody.
                self.workloads[id].reason = Reason::LocalQueueStopped {
                    policy: lq.stop_policy,
                };
                self.park(cq, id);
                cycle.progress = true;
                continue;
            }
            let admitted = match assignment.mode {
                Mode::Fit => self.try_admit(cq, id, assignment, now, hooks, &mut cycle),
                Mode::Preempt if self.workloads[id].preempted_at == Some(now) => {
                    let reason = Reason::PreemptedThisInstant {
                        not_fit: assignment.not_fit,
                    };
                    cycle.progress |= self.set_aside(cq, id, reason);
                    false
                }
                Mode::Preempt => {
                    let reserved = cycle.reserved.len();
                    let admitted = self.try_preempt(cq, id, assignment, now, hooks, &mut cycle);
                    if cycle.reserved.len() > reserved {
                        // Heads after it in its tree see the quota it holds.
                        changed_trees.insert(self.trees.tree_of(cq));
                    }
                    admitted
                }
                Mode::NoFit => {
                    let reason = assignment.not_fit.map_or(Reason::None, Reason::NoFit);
                    cycle.progress |= self.set_aside(cq, id, reason);
                    false
                }
            };
            if admitted {
                changed_trees.insert(self.trees.tree_of(cq));
                nodes_changed |= self.workloads[id]
                    .admission
                    .as_ref()
                    .is_some_and(|a| !a.placements.is_empty());
                cycle.progress = true;
            }
        }
        // The reserved quota released. A tree nothing else changed since
        // its first reservation has its usage as before, and so its version.
        let untouched: Vec<(ClusterQueueId, u64)> = std::mem::take(&mut cycle.reserved_trees)
            .into_iter()
            .filter(|t| t.only_reserved && self.quota.version(t.cq) == t.after)
            .map(|t| (t.cq, t.before))
            .collect();
        for (cq, fr, amount) in std::mem::take(&mut cycle.reserved) {
            self.quota.add_usage(cq, fr, -amount);
        }
        for (cq, version) in untouched {
            self.quota.restore_version(cq, version);
        }
        cycle
    }

    /// Assigns flavors to a head. A workload with `minCount`s that neither
    /// fits whole nor can preempt to fit whole is admitted with the most
    /// pods that fit or fit by preempting (Kueue's partial admission: every
    /// pod set gives up `k / Σ reducible` of its reducible pods, rounded
    /// down, the smallest such `k` found by binary search as Kueue's
    /// `PodSetReducer` finds it).
    pub(super) fn assign_head(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        hooks: &mut dyn Hooks,
    ) -> Assignment {
        let orders = self.flavor_orders(cq, id, hooks);
        let whole = self.assign_counts(cq, id, &orders, None);
        let pod_sets = &self.workloads[id].workload.pod_sets;
        let full: Vec<u32> = pod_sets.iter().map(|ps| ps.count).collect();
        let reducible: Vec<u32> = pod_sets
            .iter()
            .map(|ps| ps.count - ps.min_count.unwrap_or(ps.count).min(ps.count))
            .collect();
        let total: u64 = reducible.iter().map(|&r| u64::from(r)).sum();
        if whole.mode == Mode::Fit || total == 0 || self.can_preempt_for(cq, id, &whole) {
            return whole;
        }
        let counts = |k: u64| -> Vec<u32> {
            full.iter()
                .zip(&reducible)
                .map(|(&n, &r)| n - (u64::from(r) * k / total) as u32)
                .collect()
        };
        // Go's sort.Search over 0..=total; 0 (the whole workload) is known
        // not to do. The last `k` that did is where the search ends.
        let (mut lo, mut hi) = (1, total + 1);
        let mut best = None;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let assignment = self.assign_counts(cq, id, &orders, Some(&counts(mid)));
            if assignment.mode == Mode::Fit || self.can_preempt_for(cq, id, &assignment) {
                best = Some(assignment);
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        best.unwrap_or(whole)
    }

    /// Assigns flavors to `counts` pods per pod set (all of them with
    /// `None`), each pod set trying flavors in `orders`' order.
    fn assign_counts(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        orders: &[Option<Vec<FlavorId>>],
        counts: Option<&[u32]>,
    ) -> Assignment {
        // Kueue's preemption oracle: assign, answer what it asked about
        // preempting, assign again until it asks nothing new (each round
        // answers at least one more question; a few rounds at most).
        let mut oracle = assign::Oracle::default();
        // What each answer's victim search found, for reuse below.
        let mut found: Vec<((FlavorResource, Amount), assign::Victims)> = Vec::new();
        let mut assignment = loop {
            let entry = &self.workloads[id];
            let ctx = assign::Context {
                oracle: Some(&oracle),
                ..self.ctx()
            };
            let assignment = assign::assign(&ctx, cq, &entry.workload, orders, counts);
            let asked = oracle.take_asked();
            if asked.is_empty() {
                break assignment;
            }
            let mut as_assumed = true;
            for (fr, need) in asked {
                let (answer, victims) = self.simulate_preemption(cq, id, fr, need);
                as_assumed &= answer == assign::ASSUMED;
                oracle.answers.insert((fr, need), answer);
                found.push(((fr, need), victims));
            }
            if as_assumed {
                // Assigning again with these answers would decide the same.
                break assignment;
            }
        };
        // A workload needing one flavor resource asked the oracle about
        // exactly its usage: the preemption needs the same victims, as long
        // as its cohort tree does not change first (the cycle assigns again
        // when it does).
        if assignment.mode == Mode::Preempt {
            if let [only] = assignment.usage[..] {
                assignment.victims = found
                    .into_iter()
                    .find(|(asked, _)| *asked == only)
                    .map(|(_, v)| v);
            }
        }
        assignment
    }

    /// Asks the admission hook about a head that fits, once, and acts on the verdict.
    fn try_admit(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        assignment: Assignment,
        now: Millis,
        hooks: &mut dyn Hooks,
        cycle: &mut Cycle,
    ) -> bool {
        let verdict = self.ask_admission(id, &assignment, now, hooks);
        self.decide(cq, id, assignment, verdict, now, hooks, cycle)
    }

    /// The admission hook's verdict on admitting `id` with `assignment`.
    pub(super) fn ask_admission(
        &self,
        id: WorkloadId,
        assignment: &Assignment,
        now: Millis,
        hooks: &mut dyn Hooks,
    ) -> AdmissionVerdict {
        hooks.admission(&AdmissionRequest {
            state: self.hook_state(),
            entry: &self.workloads[id],
            flavors: &assignment.pod_sets,
            borrowing: assignment.borrowing,
            now,
        })
    }

    /// Carries out an admission verdict: admit, reject for good, or set aside to retry.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decide(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        assignment: Assignment,
        verdict: AdmissionVerdict,
        now: Millis,
        hooks: &mut dyn Hooks,
        cycle: &mut Cycle,
    ) -> bool {
        match verdict {
            AdmissionVerdict::Allow => {
                self.admit(cq, id, assignment, now, hooks);
                cycle.events.push(Event::Admitted { workload: id });
                true
            }
            AdmissionVerdict::Deny {
                policy,
                reason,
                retryable: false,
                ..
            } => {
                self.dequeue(id);
                let entry = &mut self.workloads[id];
                entry.status = Status::Rejected;
                entry.reason = Reason::Rejected {
                    policy: policy.clone(),
                    message: reason.clone(),
                };
                cycle.events.push(Event::Rejected {
                    workload: id,
                    policy,
                    message: reason,
                });
                cycle.progress = true;
                false
            }
            AdmissionVerdict::Deny {
                policy,
                reason,
                retryable: true,
                tenant,
            } => {
                let reason = Reason::Denied {
                    policy,
                    message: reason,
                };
                if tenant.is_some() {
                    // Whatever the queueing strategy: what a tenant's own
                    // policy holds back blocks no one else (as a stopped
                    // LocalQueue), now and at every later try (`set_aside`).
                    let entry = &mut self.workloads[id];
                    entry.reason = reason;
                    entry.held_by_tenant = true;
                    self.park(cq, id);
                    cycle.progress = true;
                } else {
                    // A platform policy's denial holds a StrictFIFO queue, as Kueue's would.
                    self.workloads[id].held_by_tenant = false;
                    cycle.progress |= self.set_aside(cq, id, reason);
                }
                false
            }
        }
    }

    pub(super) fn admit(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        assignment: Assignment,
        now: Millis,
        hooks: &mut dyn Hooks,
    ) {
        let placements = self
            .placed_by_policy(id, &assignment, now, hooks)
            .unwrap_or(assignment.placements);
        self.dequeue(id);
        self.install(
            cq,
            id,
            Admission {
                at: now,
                pod_sets: assignment.pod_sets,
                usage: assignment.usage,
                placements,
                borrowing: assignment.borrowing,
                counts: assignment.counts,
            },
        );
        self.await_pods_ready(id);
    }

    /// Makes `admission` the workload's: charges its quota, holds its nodes,
    /// arms its reclaim timer. Admission and restore both come through here.
    pub(super) fn install(&mut self, cq: ClusterQueueId, id: WorkloadId, admission: Admission) {
        for &(fr, amount) in &admission.usage {
            self.quota.add_usage(cq, fr, amount);
        }
        self.capacity.commit(&admission.placements);
        let priority = self.workloads[id].workload.priority;
        self.queues.admit(cq, priority, id);
        let at = admission.at;
        let entry = &mut self.workloads[id];
        entry.epoch += 1;
        entry.status = Status::Admitted;
        entry.reason = Reason::None;
        entry.held_by_tenant = false;
        entry.admission = Some(admission);
        if let Some(timeout) = self.cluster.cluster_queue(cq).reclaim_timeout {
            self.timers.arm(
                at.saturating_add(timeout),
                TimerKind::Reclaim,
                id,
                entry.epoch,
            );
        }
    }
}
