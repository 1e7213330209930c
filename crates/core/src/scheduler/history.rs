//! What the scheduler remembers of the past for policies: each
//! ClusterQueue's GPU usage with exponential decay (the fair-share hook's
//! `clusterQueue.decayedUsage`) and each LocalQueue's runtime estimate from
//! its finished workloads (`resourceEstimation`, `workload.estimate`), and
//! each ClusterQueue's recent pod shapes (the placement hook's typical pods).
//! Pure: time only arrives as the `now` the caller passes.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::model::cluster::{Cluster, Estimation, FlavorId, HistoryWindow, ResourceId};
use crate::model::{Amount, Millis};

/// GPU-seconds used, decayed with a half-life: d(t) = ∫ u(s)·2^(−(t−s)/h) ds.
#[derive(Clone, Debug)]
pub(crate) struct DecayedUsage {
    value: f64,
    last: Millis,
    half_life_secs: f64,
}

impl DecayedUsage {
    pub fn new(half_life: Millis) -> DecayedUsage {
        DecayedUsage {
            value: 0.0,
            last: Millis::ZERO,
            half_life_secs: half_life.as_secs_f64().max(0.001),
        }
    }

    /// Brings the integral to `now`, `gpus` having been in use since the last call.
    pub fn advance(&mut self, now: Millis, gpus: f64) {
        if now <= self.last {
            return;
        }
        let dt = now.saturating_sub(self.last).as_secs_f64();
        let keep = (-dt / self.half_life_secs).exp2();
        let mean_life = self.half_life_secs / std::f64::consts::LN_2;
        self.value = self.value * keep + gpus * mean_life * (1.0 - keep);
        self.last = now;
    }

    pub fn value(&self) -> f64 {
        self.value
    }
}

/// Runtimes of a LocalQueue's finished workloads and the estimate they give.
#[derive(Clone, Debug)]
pub struct RuntimeHistory {
    estimation: Estimation,
    /// (finished at, runtime), oldest first.
    runs: VecDeque<(Millis, Millis)>,
    estimate: Option<Estimate>,
}

/// The configured quantile of past runtimes and how many runs it rests on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The quantile of past runtimes.
    pub runtime: Millis,
    /// Runs it rests on.
    pub samples: u32,
}

impl RuntimeHistory {
    /// An empty history estimating as `estimation` says.
    pub fn new(estimation: Estimation) -> RuntimeHistory {
        RuntimeHistory {
            estimation,
            runs: VecDeque::new(),
            estimate: None,
        }
    }

    /// Records a run that finished at `now` and recomputes the estimate (nearest rank).
    pub fn record(&mut self, now: Millis, runtime: Millis) {
        self.runs.push_back((now, runtime));
        match self.estimation.window {
            HistoryWindow::Count(n) => {
                while self.runs.len() > n.max(1) as usize {
                    self.runs.pop_front();
                }
            }
            HistoryWindow::Duration(window) => {
                while self
                    .runs
                    .front()
                    .is_some_and(|&(at, _)| now.saturating_sub(at) > window)
                {
                    self.runs.pop_front();
                }
            }
        }
        let mut runtimes: Vec<Millis> = self.runs.iter().map(|&(_, r)| r).collect();
        runtimes.sort_unstable();
        let q = self.estimation.confidence.clamp(0.0, 1.0);
        let rank = ((q * runtimes.len() as f64).ceil() as usize).clamp(1, runtimes.len());
        self.estimate = Some(Estimate {
            runtime: runtimes[rank - 1],
            samples: runtimes.len() as u32,
        });
    }

    /// The estimate, once there are runs to make it from.
    pub fn estimate(&self) -> Option<Estimate> {
        self.estimate
    }
}

/// Per LocalQueue: its history if `resourceEstimation` is enabled.
pub(crate) fn runtime_histories(cluster: &Cluster) -> Vec<Option<RuntimeHistory>> {
    cluster
        .local_queues
        .iter()
        .map(|lq| lq.estimation.map(RuntimeHistory::new))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decayed_usage_halves_after_one_half_life_without_use() {
        let mut d = DecayedUsage::new(Millis::from_secs(3600));
        d.advance(Millis::from_secs(36_000), 8.0);
        let saturated = d.value();
        // Ten half-lives of 8 GPUs: close to 8 × mean life.
        assert!((saturated - 8.0 * 3600.0 / std::f64::consts::LN_2).abs() / saturated < 0.01);
        d.advance(Millis::from_secs(39_600), 0.0);
        assert!((d.value() - saturated / 2.0).abs() < 1e-6 * saturated);
    }

    #[test]
    fn estimate_is_the_quantile_of_the_window() {
        let mut h = RuntimeHistory::new(Estimation {
            window: HistoryWindow::Count(4),
            confidence: 0.5,
        });
        for (i, r) in [100i64, 10, 20, 30, 40].into_iter().enumerate() {
            h.record(Millis::from_secs(i as i64), Millis::from_secs(r));
        }
        // The window keeps 10, 20, 30, 40; the median by nearest rank is 20.
        let e = h.estimate().unwrap();
        assert_eq!((e.runtime, e.samples), (Millis::from_secs(20), 4));
    }

    #[test]
    fn duration_window_forgets_old_runs() {
        let mut h = RuntimeHistory::new(Estimation {
            window: HistoryWindow::Duration(Millis::from_secs(60)),
            confidence: 1.0,
        });
        h.record(Millis::from_secs(0), Millis::from_secs(500));
        h.record(Millis::from_secs(100), Millis::from_secs(5));
        assert_eq!(h.estimate().unwrap().runtime, Millis::from_secs(5));
    }
}

/// What one pod asks: its requests in `ResourceId` order, and the flavors
/// it may run on (empty: any its ClusterQueue lists).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PodRequest {
    /// What one pod requests, by resource.
    pub per_pod: Arc<[(ResourceId, Amount)]>,
    /// The flavors it may run on; empty: any.
    pub flavors: Arc<[FlavorId]>,
}

/// The pods last submitted to a ClusterQueue, by shape (per-pod requests):
/// the "typical pods" a placement policy such as FGD weighs free capacity
/// against. A sliding window of the last [`PodShapes::WINDOW`] pods.
#[derive(Clone, Debug, Default)]
pub struct PodShapes {
    /// (shape, pods), oldest first.
    recent: VecDeque<(PodRequest, u32)>,
    /// Pods per shape in `recent`.
    counts: BTreeMap<PodRequest, u64>,
    pods: u64,
}

/// A shape of the recent pods and its share of them (0–1).
#[derive(Clone, Debug, PartialEq)]
pub struct TypicalPod {
    /// What one pod requests, by resource.
    pub per_pod: Arc<[(ResourceId, Amount)]>,
    /// The flavors it may run on; empty: any.
    pub flavors: Arc<[FlavorId]>,
    /// Its share of the recent pods (0–1).
    pub share: f64,
}

impl PodShapes {
    /// Pods remembered.
    pub const WINDOW: u64 = 2_000;
    /// The most frequent shapes are typical until they cover this share of the pods.
    pub const COVER: f64 = 0.95;

    /// Records `pods` pods asking `per_pod` each (resources in `ResourceId`
    /// order) that may run on `flavors` (empty: any).
    pub fn record(&mut self, per_pod: &[(ResourceId, Amount)], flavors: &[FlavorId], pods: u32) {
        if pods == 0 {
            return;
        }
        let key = PodRequest {
            per_pod: per_pod.into(),
            flavors: flavors.into(),
        };
        let shape: PodRequest = match self.counts.get_key_value(&key) {
            Some((k, _)) => k.clone(),
            None => key,
        };
        *self.counts.entry(shape.clone()).or_default() += pods as u64;
        self.pods += pods as u64;
        self.recent.push_back((shape, pods));
        while self.pods > Self::WINDOW {
            let Some((old, n)) = self.recent.pop_front() else {
                break;
            };
            self.pods -= n as u64;
            if let Some(c) = self.counts.get_mut(&old) {
                *c -= n as u64;
                if *c == 0 {
                    self.counts.remove(&old);
                }
            }
        }
    }

    /// Pods remembered (at most [`PodShapes::WINDOW`]).
    pub fn pods(&self) -> u64 {
        self.pods
    }

    /// The most frequent shapes, most frequent first (ties: smaller
    /// requests first), until they cover [`PodShapes::COVER`] of the pods
    /// remembered; shares renormalised to sum to 1 over those returned.
    pub fn typical(&self) -> Vec<TypicalPod> {
        let mut by_count: Vec<(&PodRequest, u64)> =
            self.counts.iter().map(|(k, &c)| (k, c)).collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let want = Self::COVER * self.pods as f64;
        let mut covered = 0u64;
        let mut out = Vec::new();
        for (shape, count) in by_count {
            if covered as f64 >= want {
                break;
            }
            covered += count;
            out.push(TypicalPod {
                per_pod: shape.per_pod.clone(),
                flavors: shape.flavors.clone(),
                share: count as f64,
            });
        }
        for t in &mut out {
            t.share /= covered.max(1) as f64;
        }
        out
    }
}
