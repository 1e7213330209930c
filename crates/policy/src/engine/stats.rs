//! Per-policy evaluation statistics: [`PolicyStats`] (evaluations, reused
//! answers, errors by kind, latency total, maximum and histogram), kept
//! across reloads by (bundle name, bundle source, policy name) and found on
//! the hot path by the policy's address among the pinned bundles, each with
//! its Prometheus handle when the engine has metrics. Fed by the engine's
//! `decisions`; read by the drivers (the report's `byPolicy`), with what the
//! decision log and the plugin lines dropped at their per-policy caps. It never
//! measures time itself: the caller passes the microseconds.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::Serialize;

use crate::compiled::{Bundle, Policy};
use crate::metrics::{PolicyHandle, PolicyMetrics};

/// Evaluation statistics of one policy.
#[derive(Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStats {
    pub bundle: String,
    /// Where the bundle was loaded from (its directory or ConfigMap): tells
    /// apart bundles that share a name, such as two tenants' copies.
    pub source: String,
    pub policy: String,
    pub hook: String,
    pub language: String,
    pub evaluations: u64,
    /// Answers reused without evaluating, for an input identical to the one
    /// the policy last decided on (fairShare and autoscale CEL policies that
    /// do not read `now`).
    pub reused: u64,
    /// Errors by kind (`timeout`, `trap`, `cel`, …).
    pub errors: BTreeMap<String, u64>,
    pub total_micros: f64,
    pub max_micros: f64,
    /// Latency histogram: upper bound in µs → count (powers of 4 from 1 µs).
    pub latency_micros: BTreeMap<String, u64>,
    /// Decisions not kept in the decision log: the policy already had its
    /// cap of entries there (identical repeats are counted, never dropped).
    pub decisions_dropped: u64,
    /// `arbiter.log` lines not kept: the policy already had its cap of lines.
    pub log_lines_dropped: u64,
}

impl PolicyStats {
    fn record(&mut self, micros: f64, error: Option<&'static str>) {
        self.evaluations += 1;
        self.total_micros += micros;
        self.max_micros = self.max_micros.max(micros);
        if let Some(kind) = error {
            *self.errors.entry(kind.to_string()).or_insert(0) += 1;
        }
        let mut bucket = 0;
        let mut bound = 1.0;
        while micros > bound && bound < 1e7 {
            bound *= 4.0;
            bucket += 1;
        }
        let key = if micros > bound {
            "+Inf"
        } else {
            latency_key(bucket)
        };
        match self.latency_micros.get_mut(key) {
            Some(count) => *count += 1,
            None => {
                self.latency_micros.insert(key.to_string(), 1);
            }
        }
    }
}

/// Per-policy statistics, kept across reloads by (bundle name, bundle
/// source, policy name) and found on the hot path by the policy's address
/// in the bundles in force.
#[derive(Default)]
pub(super) struct StatsTable {
    all: Vec<PolicyTally>,
    /// Report order.
    by_name: BTreeMap<(String, String, String), usize>,
    /// By `&Policy` address; valid while the same bundles are pinned.
    by_address: HashMap<usize, usize>,
}

impl StatsTable {
    /// The statistics of `policy` of `bundle`, created on its first evaluation.
    pub(super) fn tally(
        &mut self,
        metrics: Option<&PolicyMetrics>,
        bundle: &Bundle,
        policy: &Policy,
    ) -> &mut PolicyTally {
        let address = policy as *const Policy as usize;
        let at = match self.by_address.get(&address) {
            Some(&at) => at,
            None => {
                let key = (
                    bundle.name.clone(),
                    bundle.source.clone(),
                    policy.name.clone(),
                );
                let at = match self.by_name.get(&key) {
                    Some(&at) => at,
                    None => {
                        let hook = policy.hook.to_string();
                        self.all.push(PolicyTally {
                            slot: self.all.len(),
                            metrics: metrics.map(|m| m.policy(&bundle.source, &policy.name, &hook)),
                            stats: PolicyStats {
                                bundle: bundle.name.clone(),
                                source: bundle.source.clone(),
                                policy: policy.name.clone(),
                                hook,
                                language: policy.language().into(),
                                ..PolicyStats::default()
                            },
                        });
                        self.by_name.insert(key, self.all.len() - 1);
                        self.all.len() - 1
                    }
                };
                self.by_address.insert(address, at);
                at
            }
        };
        &mut self.all[at]
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &PolicyStats> {
        self.by_name.values().map(|&at| &self.all[at].stats)
    }

    /// Forgets the policies' addresses: the bundles pinned next may put
    /// another policy at an address one of these had.
    pub(super) fn forget_addresses(&mut self) {
        self.by_address.clear();
    }
}

/// The latency histogram key of bucket `i`: its bound, 4^i µs, right-aligned.
fn latency_key(i: usize) -> &'static str {
    static KEYS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        let mut bound = 1.0f64;
        (0..=12)
            .map(|_| {
                let key = format!("{bound:>9}");
                bound *= 4.0;
                key
            })
            .collect()
    });
    keys.get(i).map_or("+Inf", String::as_str)
}

/// One policy's statistics, and its Prometheus handle when the engine has metrics.
pub(super) struct PolicyTally {
    /// Its place in the table, the same across reloads: the decision log and
    /// the plugin lines keep their per-policy counts by it.
    pub(super) slot: usize,
    stats: PolicyStats,
    metrics: Option<PolicyHandle>,
}

impl PolicyTally {
    /// One evaluation that took `micros` and failed with `error`, if any.
    pub(super) fn record(&mut self, micros: f64, error: Option<&'static str>) {
        self.stats.record(micros, error);
        if let Some(metrics) = &mut self.metrics {
            metrics.record(micros / 1e6, error);
        }
    }

    /// One decision the decision log did not keep.
    pub(super) fn decision_dropped(&mut self) {
        self.stats.decisions_dropped += 1;
    }

    /// `n` `arbiter.log` lines not kept.
    pub(super) fn log_lines_dropped(&mut self, n: u64) {
        self.stats.log_lines_dropped += n;
    }

    /// One answer reused without evaluating (not timed).
    pub(super) fn record_reused(&mut self) {
        self.stats.reused += 1;
        if let Some(metrics) = &mut self.metrics {
            metrics.record_reused();
        }
    }
}
