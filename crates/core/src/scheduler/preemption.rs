//! Preemption (DESIGN §3, Kueue's): the candidates a head may preempt —
//! within its ClusterQueue by priority, reclaim from borrowing queues of its
//! cohort — in Kueue's order, the minimal victim set (greedy, then every
//! victim not needed put back), fair sharing's share strategies, and the
//! preemption itself once the preemptor is sure to fit. Evicts only victims
//! of an admission that then happens.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use crate::model::api::{ReclaimWithinCohort, WithinClusterQueue};
use crate::model::cluster::{ClusterQueueId, FlavorResource};
use crate::model::{Amount, Millis};

use super::assign::{Assignment, Mode};
use super::hooks::{AdmissionVerdict, Hooks};
use super::reason::{Eviction, NotFit, Reason, Requeue};
use super::workload::{Admission, Seq, WorkloadId};
use super::{Cycle, Event, Scheduler, Score};

/// (same queue, priority, newest admission first, newest first, id): Kueue's victim order.
/// "Newest" is by the queue slot a workload was admitted from (its own
/// unless a tenant handed it the slot of a workload asking the same), so a
/// tenant's order never changes which other workload is a victim.
type CandidateKey = (bool, i32, Reverse<Millis>, Reverse<Seq>, WorkloadId);

impl Scheduler {
    pub(super) fn fits(&self, cq: ClusterQueueId, usage: &[(FlavorResource, Amount)]) -> bool {
        usage
            .iter()
            .all(|&(fr, amount)| amount <= self.quota.available(cq, fr))
    }

    fn uses_any(&self, id: WorkloadId, frs: &[(FlavorResource, Amount)]) -> bool {
        self.entries[id.index()]
            .admission
            .as_ref()
            .is_some_and(|a| {
                a.usage
                    .iter()
                    .any(|(fr, _)| frs.iter().any(|(n, _)| n == fr))
            })
    }

    fn is_borrowing_on(&self, cq: ClusterQueueId, frs: &[(FlavorResource, Amount)]) -> bool {
        frs.iter()
            .any(|&(fr, _)| self.quota.usage(cq, fr) > self.quota.nominal(cq, fr))
    }

    fn charge(&mut self, id: WorkloadId, sign: i64) {
        let entry = &self.entries[id.index()];
        let cq = entry.workload.cluster_queue;
        if let Some(admission) = &entry.admission {
            for &(fr, amount) in &admission.usage {
                self.quota.add_usage(cq, fr, amount.saturating_mul(sign));
            }
        }
    }

    /// Candidates for preempting on behalf of `id`, in Kueue's order.
    pub(super) fn preemption_candidates(
        &self,
        cq: ClusterQueueId,
        id: WorkloadId,
        needed: &[(FlavorResource, Amount)],
    ) -> Vec<WorkloadId> {
        let def = self.cluster.cluster_queue(cq);
        let me = &self.entries[id.index()];
        let priority = me.workload.priority;
        // (same queue, priority, newest admission first, newest first, id): Kueue's victim order.
        let mut candidates: Vec<CandidateKey> = Vec::new();
        let seq = |w: WorkloadId| self.entries[w.index()].slot.seq;
        let admitted_at = |w: WorkloadId| {
            self.entries[w.index()]
                .admission
                .as_ref()
                .map_or(Millis::ZERO, |a| a.at)
        };
        let below = (priority, WorkloadId(0));
        let up_to = (priority, WorkloadId(u32::MAX));
        let admitted = |queue: ClusterQueueId, inclusive: bool| {
            let set = &self.states[queue.index()].admitted;
            if inclusive {
                set.range(..=up_to)
            } else {
                set.range(..below)
            }
        };
        if def.within_cluster_queue != WithinClusterQueue::Never {
            let inclusive =
                def.within_cluster_queue == WithinClusterQueue::LowerOrNewerEqualPriority;
            for &(p, w) in admitted(cq, inclusive) {
                let other = &self.entries[w.index()];
                let allowed = match def.within_cluster_queue {
                    WithinClusterQueue::Never => false,
                    WithinClusterQueue::LowerPriority => p < priority,
                    WithinClusterQueue::LowerOrNewerEqualPriority => {
                        p < priority
                            || (p == priority && other.slot.queue_time > me.slot.queue_time)
                    }
                };
                if allowed && self.uses_any(w, needed) {
                    candidates.push((true, p, Reverse(admitted_at(w)), Reverse(seq(w)), w));
                }
            }
        }
        let would_borrow = needed
            .iter()
            .any(|&(fr, amount)| self.quota.usage(cq, fr) + amount > self.quota.nominal(cq, fr));
        let fair = self.fair[cq.index()];
        if def.reclaim_within_cohort != ReclaimWithinCohort::Never && (fair || !would_borrow) {
            for &other_cq in self.tree_members[cq.index()].iter() {
                if other_cq == cq || !self.is_borrowing_on(other_cq, needed) {
                    continue;
                }
                let all = &self.states[other_cq.index()].admitted;
                let eligible: Box<dyn Iterator<Item = &(i32, WorkloadId)>> =
                    match def.reclaim_within_cohort {
                        ReclaimWithinCohort::Any => Box::new(all.iter()),
                        _ => Box::new(admitted(other_cq, false)),
                    };
                for &(p, w) in eligible {
                    if self.uses_any(w, needed) {
                        candidates.push((false, p, Reverse(admitted_at(w)), Reverse(seq(w)), w));
                    }
                }
            }
        }
        candidates.sort();
        candidates.into_iter().map(|c| c.4).collect()
    }

    /// Finds a minimal victim set by removing candidates in order until the
    /// preemptor fits, then putting back every victim not needed. Leaves the
    /// quota tree as it found it.
    fn minimal_victims(
        &mut self,
        cq: ClusterQueueId,
        needed: &[(FlavorResource, Amount)],
        candidates: &[WorkloadId],
        accept: &dyn Fn(&Scheduler, WorkloadId) -> bool,
    ) -> Option<Vec<WorkloadId>> {
        let mut removed: Vec<WorkloadId> = Vec::new();
        let mut found = false;
        for &w in candidates {
            let other_cq = self.entries[w.index()].workload.cluster_queue;
            if other_cq != cq && !self.is_borrowing_on(other_cq, needed) {
                continue;
            }
            if !accept(self, w) {
                continue;
            }
            self.charge(w, -1);
            removed.push(w);
            if self.fits(cq, needed) {
                found = true;
                break;
            }
        }
        if !found {
            for &w in &removed {
                self.charge(w, 1);
            }
            return None;
        }
        let mut victims = vec![true; removed.len()];
        for i in (0..removed.len().saturating_sub(1)).rev() {
            self.charge(removed[i], 1);
            if self.fits(cq, needed) {
                victims[i] = false;
            } else {
                self.charge(removed[i], -1);
            }
        }
        let chosen: Vec<WorkloadId> = removed
            .iter()
            .zip(&victims)
            .filter(|(_, v)| **v)
            .map(|(w, _)| *w)
            .collect();
        for &w in &chosen {
            self.charge(w, 1);
        }
        Some(chosen)
    }

    pub(super) fn try_preempt(
        &mut self,
        cq: ClusterQueueId,
        id: WorkloadId,
        assignment: Assignment,
        now: Millis,
        hooks: &mut dyn Hooks,
        cycle: &mut Cycle,
    ) -> bool {
        let needed = &assignment.usage;
        let candidates = &assignment.candidates;
        let victims = if self.fair[cq.index()] {
            let mine_after = self.share(cq, needed);
            // Kueue's fair-sharing strategies: a victim's queue must keep at least the
            // preemptor's share — LessThanOrEqualToFinalShare (after removing the victim),
            // then LessThanInitialShare (strictly, before removing it).
            let by_share = |strict: bool| {
                move |sched: &Scheduler, w: WorkloadId| {
                    let other_cq = sched.entries[w.index()].workload.cluster_queue;
                    if other_cq == cq {
                        return true;
                    }
                    if strict {
                        return mine_after < sched.share(other_cq, &[]);
                    }
                    let without: Vec<_> = sched.entries[w.index()]
                        .admission
                        .iter()
                        .flat_map(|a| a.usage.iter().map(|&(fr, amount)| (fr, -amount)))
                        .collect();
                    mine_after <= sched.share(other_cq, &without)
                }
            };
            let mut ordered = candidates.clone();
            let shares: BTreeMap<WorkloadId, Score> = ordered
                .iter()
                .map(|&w| {
                    (
                        w,
                        Score(self.share(self.entries[w.index()].workload.cluster_queue, &[])),
                    )
                })
                .collect();
            ordered.sort_by_key(|w| Reverse(shares[w]));
            let first = by_share(false);
            match self.minimal_victims(cq, needed, &ordered, &first) {
                Some(v) => Some(v),
                None => {
                    let second = by_share(true);
                    self.minimal_victims(cq, needed, &ordered, &second)
                }
            }
        } else {
            self.minimal_victims(cq, needed, candidates, &|_, _| true)
        };
        let Some(victims) = victims.filter(|v| !v.is_empty()) else {
            let reason = Reason::PreemptionFailed {
                not_fit: assignment.not_fit.unwrap_or(NotFit {
                    pod_set: 0,
                    problems: Vec::new(),
                }),
                candidates: candidates.len(),
            };
            cycle.progress |= self.set_aside(cq, id, reason);
            return false;
        };
        // Release the victims for real, then assign again: the preemptor now fits in quota;
        // it must also find room on nodes.
        let saved: Vec<(WorkloadId, Admission)> = victims
            .iter()
            .filter_map(|&w| self.entries[w.index()].admission.clone().map(|a| (w, a)))
            .collect();
        for (w, a) in &saved {
            let wcq = self.entries[w.index()].workload.cluster_queue;
            for &(fr, amount) in &a.usage {
                self.quota.add_usage(wcq, fr, -amount);
            }
            self.capacity.release(&a.placements);
        }
        let retry = self.assign_head(cq, id, hooks);
        // Restore; evict() releases again for real if we go ahead.
        for (w, a) in &saved {
            let wcq = self.entries[w.index()].workload.cluster_queue;
            for &(fr, amount) in &a.usage {
                self.quota.add_usage(wcq, fr, amount);
            }
            self.capacity.commit(&a.placements);
        }
        if retry.mode != Mode::Fit {
            let reason = Reason::PreemptionNotEnough {
                not_fit: assignment.not_fit.unwrap_or(NotFit {
                    pod_set: 0,
                    problems: Vec::new(),
                }),
                victims: victims.len(),
                after: retry.not_fit,
            };
            cycle.progress |= self.set_aside(cq, id, reason);
            return false;
        }
        // One admission question per attempt: a denial is carried out as is.
        let verdict = self.ask_admission(id, &retry, now, hooks);
        if verdict != AdmissionVerdict::Allow {
            return self.decide(cq, id, retry, verdict, now, cycle);
        }
        let preemptor = {
            let e = &self.entries[id.index()];
            format!("{}/{}", e.workload.namespace, e.workload.name)
        };
        let priority = self.entries[id.index()].workload.priority;
        for &w in &victims {
            let reclaimed_by = (self.entries[w.index()].workload.cluster_queue != cq)
                .then(|| self.cluster.cluster_queue(cq).name.clone());
            let cause = Eviction::Preempted {
                preemptor: preemptor.clone(),
                priority,
                reclaimed_by,
            };
            self.evict(w, cause, Some(preemptor.clone()), &mut cycle.events);
            self.entries[w.index()].preempted_at = Some(now);
            self.requeue_in_place(w);
            cycle.events.push(Event::Requeued {
                workload: w,
                cause: Requeue::Preempted,
            });
        }
        self.admit(cq, id, retry, now);
        cycle.events.push(Event::Admitted { workload: id });
        true
    }
}
