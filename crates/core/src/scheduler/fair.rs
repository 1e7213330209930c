//! Fair sharing (DESIGN §3): each ClusterQueue's weighted dominant resource
//! share (Kueue's DRS, integer per mille of its cohort tree's lendable
//! capacity), the adaptive weights the fair-share hook sets every
//! `adjustmentInterval`, and the decayed GPU usage policies read. Only
//! measures and weighs; ordering and preemption use the numbers.

use crate::model::cluster::{ClusterQueueId, FlavorResource};
use crate::model::{Amount, Millis};

use super::hooks::{FairShareRequest, Hooks};
use super::Scheduler;

impl Scheduler {
    /// Brings every ClusterQueue's decayed usage to `now` (usage changes only at call instants).
    pub(super) fn advance_history(&mut self, now: Millis) {
        // Within one instant the integrals do not move (a step calls this
        // from its timers, every cycle and the autoscale plan).
        if now <= self.history_at {
            return;
        }
        self.history_at = now;
        for (i, decayed) in self.decayed.iter_mut().enumerate() {
            let cq = ClusterQueueId(i as u32);
            let gpus: Amount = self
                .gpu_resources
                .iter()
                .map(|&fr| self.quota.usage(cq, fr))
                .sum();
            decayed.advance(now, gpus.as_f64());
        }
    }

    pub(super) fn adjust_fair_weights(&mut self, now: Millis, hooks: &mut dyn Hooks) {
        let shares: Vec<f64> = (0..self.cluster.cluster_queues.len())
            .map(|i| self.share(ClusterQueueId(i as u32), &[]))
            .collect();
        let request = FairShareRequest {
            state: self,
            shares: &shares,
            now,
        };
        let weights = hooks.fair_share(&request);
        if weights.len() == self.fair_weights.len() {
            for (i, w) in weights.into_iter().enumerate() {
                if w.is_finite() && w >= 0.0 {
                    self.fair_weights[i] = w;
                }
            }
        }
        let interval = self
            .cluster
            .cluster_queues
            .iter()
            .filter_map(|cq| cq.adaptive_interval)
            .min();
        self.next_fair_adjust = interval.map(|i| now.saturating_add(i.max(Millis(1))));
    }

    /// Weighted dominant resource share of `cq` if it also used `extra`
    /// (per mille of its cohort tree's lendable capacity, divided by weight).
    pub(super) fn share(&self, cq: ClusterQueueId, extra: &[(FlavorResource, Amount)]) -> f64 {
        let def = self.cluster.cluster_queue(cq);
        let Some(cohort) = def.cohort else { return 0.0 };
        let root = self.quota.cohort_node(self.cluster.root_cohort(cohort));
        let resources = self.cluster.resources.len();
        let mut borrowed = vec![Amount::ZERO; resources];
        let mut lendable = vec![Amount::ZERO; resources];
        for fr in 0..self.quota.flavor_resources() {
            let fr = FlavorResource(fr as u32);
            let (_, r) = self.cluster.split(fr);
            let add = extra
                .iter()
                .filter(|(f, _)| *f == fr)
                .map(|(_, a)| *a)
                .sum::<Amount>();
            borrowed[r.index()] +=
                (self.quota.usage(cq, fr) + add).positive_sub(self.quota.nominal(cq, fr));
            lendable[r.index()] += self.quota.root_capacity(root, fr);
        }
        let dominant = borrowed
            .iter()
            .zip(&lendable)
            .filter(|(_, l)| !l.is_zero())
            .map(|(b, l)| (b.milli() as i128 * 1000 / l.milli() as i128) as i64)
            .max()
            .unwrap_or(0);
        if dominant == 0 {
            return 0.0;
        }
        let weight = self.fair_weights[cq.index()];
        if weight <= 0.0 {
            f64::INFINITY
        } else {
            dominant as f64 / weight
        }
    }
}
