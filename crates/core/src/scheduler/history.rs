//! What the scheduler remembers of the past for policies: each
//! ClusterQueue's GPU usage with exponential decay (the fair-share hook's
//! `clusterQueue.decayedUsage`) and each LocalQueue's runtime estimate from
//! its finished workloads (`resourceEstimation`, `workload.estimate`), and
//! each ClusterQueue's recent pod shapes (the placement hook's typical pods).
//! Pure: time only arrives as the `now` the caller passes.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::model::cluster::{
    Cluster, ClusterQueueId, Estimation, FlavorId, FlavorResource, HistoryWindow, LocalQueueId,
    ResourceId,
};
use crate::model::{Amount, Millis};

use super::quota::QuotaTree;

/// Everything the scheduler remembers of the past, per queue: decayed GPU
/// usage per ClusterQueue, runtime history per LocalQueue (where
/// `resourceEstimation` is on), recent pod shapes per ClusterQueue.
///
/// What it guarantees: the decayed integrals only move forward in time —
/// [`History::advance`] to an instant at or before the last one changes
/// nothing, so calling it several times within one instant counts the
/// usage once; a LocalQueue without `resourceEstimation` never gets an
/// estimate; [`History::carry_over`] keeps the history of a queue that
/// keeps its name across a configuration change. What it never does: read
/// a clock (time is the caller's `now`), or change quota usage.
#[derive(Debug)]
pub(super) struct History {
    /// Per ClusterQueue: decayed GPU usage.
    decayed: Vec<DecayedUsage>,
    /// Per LocalQueue: runtime history, where `resourceEstimation` is on.
    runtimes: Vec<Option<RuntimeHistory>>,
    /// Per ClusterQueue: the shapes of the pods last submitted to it.
    shapes: Vec<PodShapes>,
    /// Every (flavor, `nvidia.com/gpu`) pair: the usage `decayed` counts.
    gpu_resources: Vec<FlavorResource>,
    /// The time the decayed-usage integrals were last brought to.
    at: Millis,
}

impl History {
    /// No history yet, for the queues of `cluster`.
    pub fn new(cluster: &Cluster) -> History {
        History {
            decayed: cluster
                .cluster_queues
                .iter()
                .map(|cq| DecayedUsage::new(cq.usage_half_life))
                .collect(),
            runtimes: runtime_histories(cluster),
            shapes: vec![PodShapes::default(); cluster.cluster_queues.len()],
            gpu_resources: match cluster.resource_id(super::GPU) {
                Some(gpu) => (0..cluster.flavors.len())
                    .map(|f| cluster.flavor_resource(FlavorId(f as u16), gpu))
                    .collect(),
                None => Vec::new(),
            },
            at: Millis::ZERO,
        }
    }

    /// Brings every ClusterQueue's decayed usage to `now`, the GPUs `quota`
    /// says each uses having been in use since the last call (usage changes
    /// only at call instants). At or before the last call: nothing.
    pub fn advance(&mut self, now: Millis, quota: &QuotaTree) {
        if now <= self.at {
            return;
        }
        self.at = now;
        for (i, decayed) in self.decayed.iter_mut().enumerate() {
            let cq = ClusterQueueId(i as u32);
            let gpus: Amount = self
                .gpu_resources
                .iter()
                .map(|&fr| quota.usage(cq, fr))
                .sum();
            decayed.advance(now, gpus.as_f64());
        }
    }

    /// `cq`'s decayed GPU-seconds as of the last [`History::advance`].
    #[inline]
    pub fn decayed_usage(&self, cq: ClusterQueueId) -> f64 {
        self.decayed[cq.index()].value()
    }

    /// Records `pods` pods submitted to `cq`, asking `per_pod` each, that
    /// may run on `flavors` (empty: any).
    #[inline]
    pub fn record_pods(
        &mut self,
        cq: ClusterQueueId,
        per_pod: &[(ResourceId, Amount)],
        flavors: &[FlavorId],
        pods: u32,
    ) {
        self.shapes[cq.index()].record(per_pod, flavors, pods);
    }

    /// Records a run to completion in `lq` of `runtime`, ended at `now`;
    /// nothing where `resourceEstimation` is off.
    #[inline]
    pub fn record_runtime(&mut self, lq: LocalQueueId, now: Millis, runtime: Millis) {
        if let Some(history) = self.runtimes[lq.index()].as_mut() {
            history.record(now, runtime);
        }
    }

    /// `lq`'s runtime estimate, if `resourceEstimation` is on and something finished.
    #[inline]
    pub fn estimate(&self, lq: LocalQueueId) -> Option<Estimate> {
        self.runtimes[lq.index()].as_ref()?.estimate()
    }

    /// The typical pods of `cq` ([`PodShapes::typical`]).
    pub fn typical_pods(&self, cq: ClusterQueueId) -> Vec<TypicalPod> {
        self.shapes[cq.index()].typical()
    }

    /// The typical pods of every ClusterQueue together, each queue's
    /// shares weighted by the pods it remembers.
    pub fn typical_pods_all(&self) -> Vec<TypicalPod> {
        let total: u64 = self.shapes.iter().map(PodShapes::pods).sum();
        let mut merged: BTreeMap<PodRequest, f64> = BTreeMap::new();
        for shapes in &self.shapes {
            let weight = shapes.pods() as f64 / total.max(1) as f64;
            for t in shapes.typical() {
                let key = PodRequest {
                    per_pod: t.per_pod,
                    flavors: t.flavors,
                };
                *merged.entry(key).or_default() += t.share * weight;
            }
        }
        merged
            .into_iter()
            .map(|(shape, share)| TypicalPod {
                per_pod: shape.per_pod,
                flavors: shape.flavors,
                share,
            })
            .collect()
    }

    /// Takes over `old`'s history (kept under `old_cluster`) by name into
    /// this one's queues of `cluster`: its time, decayed usage per
    /// ClusterQueue, runtime history per LocalQueue that still estimates.
    /// Pod shapes start afresh.
    pub fn carry_over(&mut self, cluster: &Cluster, old: &History, old_cluster: &Cluster) {
        self.at = old.at;
        for (i, cq) in old_cluster.cluster_queues.iter().enumerate() {
            if let Some(new) = cluster.cluster_queue_id(&cq.name) {
                self.decayed[new.index()] = old.decayed[i].clone();
            }
        }
        for (i, lq) in old_cluster.local_queues.iter().enumerate() {
            let new = cluster.local_queue_id(&lq.namespace, &lq.name);
            if let (Some(new), Some(history)) = (new, &old.runtimes[i]) {
                if self.runtimes[new.index()].is_some() {
                    self.runtimes[new.index()] = Some(history.clone());
                }
            }
        }
    }
}

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
fn runtime_histories(cluster: &Cluster) -> Vec<Option<RuntimeHistory>> {
    cluster
        .local_queues
        .iter()
        .map(|lq| lq.estimation.map(RuntimeHistory::new))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::cluster::tests::build;

    /// `busy` and `idle` (2 GPUs each on `a100`, usage half-life 1h), LocalQueue
    /// `q` of `busy` with `resourceEstimation`, `r` of `idle` without.
    const CLUSTER: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: busy}
spec:
  scheduling: {adaptiveWeights: {enabled: true, adjustmentInterval: 1m, usageHalfLife: 1h}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: idle}
spec:
  scheduling: {adaptiveWeights: {enabled: true, adjustmentInterval: 1m, usageHalfLife: 1h}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: ns, name: q}
spec: {clusterQueue: busy, resourceEstimation: {enabled: true}}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: ns, name: r}
spec: {clusterQueue: idle}
"#;

    fn cluster() -> Cluster {
        build(CLUSTER)
    }

    #[test]
    fn history_counts_an_instant_once_and_never_moves_back() {
        let cluster = cluster();
        let busy = cluster.cluster_queue_id("busy").unwrap();
        let idle = cluster.cluster_queue_id("idle").unwrap();
        let gpu = cluster.resource_id(super::super::GPU).unwrap();
        let mut quota = QuotaTree::new(&cluster);
        quota.add_usage(
            busy,
            cluster.flavor_resource(FlavorId(0), gpu),
            Amount::from_units(2),
        );
        let mut history = History::new(&cluster);
        history.advance(Millis::from_secs(600), &quota);
        let once = history.decayed_usage(busy);
        assert!(once > 0.0);
        assert_eq!(history.decayed_usage(idle), 0.0);
        // The same instant again, or an earlier one, changes nothing.
        history.advance(Millis::from_secs(600), &quota);
        history.advance(Millis::from_secs(300), &quota);
        assert_eq!(history.decayed_usage(busy), once);
        history.advance(Millis::from_secs(1200), &quota);
        assert!(history.decayed_usage(busy) > once);
    }

    #[test]
    fn only_an_estimating_local_queue_gets_an_estimate_and_it_carries_over_by_name() {
        let cluster = cluster();
        let q = cluster.local_queue_id("ns", "q").unwrap();
        let r = cluster.local_queue_id("ns", "r").unwrap();
        let mut history = History::new(&cluster);
        history.record_runtime(q, Millis::from_secs(100), Millis::from_secs(40));
        history.record_runtime(r, Millis::from_secs(100), Millis::from_secs(40));
        assert_eq!(
            history.estimate(q).map(|e| e.runtime),
            Some(Millis::from_secs(40))
        );
        assert_eq!(history.estimate(r), None);
        history.record_pods(ClusterQueueId(0), &[], &[], 3);
        assert_eq!(history.typical_pods_all().len(), 1);

        let mut next = History::new(&cluster);
        next.carry_over(&cluster, &history, &cluster);
        assert_eq!(next.estimate(q), history.estimate(q));
        assert_eq!(next.estimate(r), None);
        // Pod shapes start afresh.
        assert!(next.typical_pods_all().is_empty());
    }

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

    /// Every shape of the pods remembered, most frequent first (ties:
    /// smaller requests first), each with its share of them (the shares sum
    /// to 1). All of them, rare ones included: a policy that wants only the
    /// most frequent (FGD's paper keeps those that make up 95 %) cuts the
    /// list itself; on the paper's benchmark counting every shape placed
    /// better (BENCHMARKS.md).
    pub fn typical(&self) -> Vec<TypicalPod> {
        let mut by_count: Vec<(&PodRequest, u64)> =
            self.counts.iter().map(|(k, &c)| (k, c)).collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        by_count
            .into_iter()
            .map(|(shape, count)| TypicalPod {
                per_pod: shape.per_pod.clone(),
                flavors: shape.flavors.clone(),
                share: count as f64 / self.pods.max(1) as f64,
            })
            .collect()
    }
}
