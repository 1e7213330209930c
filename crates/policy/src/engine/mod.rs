//! The policy engine: the [`Hooks`] the scheduler core calls, implemented
//! by the bundles in force. Shared by the simulator and the operator.
//!
//! At the start of every scheduler call ([`Hooks::begin`]) the engine pins
//! the bundles in force, so one cycle always sees whole bundles even while a
//! reload swaps them. It applies each policy's `match`, `mode` and
//! `failurePolicy`, confines tenant bundles to their own namespace, keeps
//! per-policy statistics (and, given [`PolicyMetrics`], feeds the same
//! numbers to Prometheus) and the decision log. It never decides anything
//! itself: without policies every hook gives [`DefaultHooks`]' answer.
//!
//! `hooks` (the [`Hooks`] impl: which policies apply to what, `mode`,
//! `failurePolicy`, tenant confinement, first enforcing answer wins for
//! fairShare/autoscale/flavor, reuse of time-free answers), `inputs`
//! (building each hook's request from the scheduler's state, only the
//! context views some policy reads), `stats` ([`PolicyStats`], kept across
//! reloads, and their Prometheus handles), `decisions` ([`Decision`], the
//! log, bounded per policy with repeats counted, and the one place an
//! answer is counted and logged), `logs` (the `arbiter.log` lines kept per
//! policy, bounded the same way). This file holds
//! the [`Engine`] itself: the bundle sources, what one scheduler call has
//! pinned, and the accessors the drivers read after a run.

mod decisions;
mod hooks;
mod inputs;
mod logs;
mod stats;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::compiled::Bundle;
use super::eval::Logs;
use super::metrics::PolicyMetrics;
use super::reload::Reloadable;
use super::view::{ClusterQueueView, FlavorView};
use super::wasm::Hook;
use arbiter_core::model::Millis;
#[cfg(doc)]
use arbiter_core::scheduler::hooks::{DefaultHooks, Hooks};

use decisions::DecisionLog;
pub use decisions::{Decision, MAX_DECISIONS_PER_POLICY, MAX_TENANT_DECISIONS_PER_POLICY};
use logs::PluginLines;
pub use logs::{PluginLine, MAX_LOG_LINES_PER_POLICY, MAX_TENANT_LOG_LINES_PER_POLICY};
pub use stats::PolicyStats;
use stats::StatsTable;

/// The bundles the engine draws on: platform bundles in order, and tenant bundles by namespace.
#[derive(Default)]
pub struct Sources {
    pub platform: Vec<Arc<Reloadable<Bundle>>>,
    pub tenants: BTreeMap<String, Arc<Reloadable<Bundle>>>,
}

/// The bundles of one scheduler call.
#[derive(Default)]
struct Pinned {
    platform: Vec<Arc<Bundle>>,
    tenants: BTreeMap<String, Arc<Bundle>>,
}

/// The answers a subject-keyed policy (fairShare, autoscale) gave last,
/// with the view each was given, by (platform bundle index, policy index)
/// and subject name. Emptied whenever a bundle in force changes.
type Memo<V, T> = HashMap<(usize, usize), HashMap<String, (V, T)>>;

/// The policy engine.
pub struct Engine {
    sources: Sources,
    pinned: Pinned,
    fair_share_memo: Memo<ClusterQueueView, f64>,
    autoscale_memo: Memo<FlavorView, u32>,
    stats: StatsTable,
    metrics: Option<PolicyMetrics>,
    decisions: DecisionLog,
    /// Keep per-workload weight decisions in the log (they are numerous).
    pub log_weights: bool,
    /// What the evaluation running now writes with `arbiter.log`.
    written: Logs,
    /// The lines kept, per policy.
    logs: PluginLines,
    /// The `now` of the current scheduler call.
    now: Millis,
}

impl Engine {
    pub fn new(sources: Sources) -> Engine {
        let mut engine = Engine {
            sources,
            pinned: Pinned::default(),
            fair_share_memo: HashMap::new(),
            autoscale_memo: HashMap::new(),
            stats: StatsTable::default(),
            metrics: None,
            decisions: DecisionLog::default(),
            log_weights: true,
            written: Vec::new(),
            logs: PluginLines::default(),
            now: Millis::ZERO,
        };
        engine.pin();
        engine
    }

    /// Engine over fixed bundles (the simulator's `--policies`).
    pub fn fixed(platform: Vec<Bundle>, tenants: BTreeMap<String, Bundle>) -> Engine {
        Engine::new(Sources {
            platform: platform
                .into_iter()
                .map(|b| Arc::new(Reloadable::new(b)))
                .collect(),
            tenants: tenants
                .into_iter()
                .map(|(ns, b)| (ns, Arc::new(Reloadable::new(b))))
                .collect(),
        })
    }

    /// Feeds every evaluation into `metrics` too (give it before the first
    /// scheduler call), and makes each bundle source that reports nowhere yet
    /// report its bundle in force and reload results there, labelled with
    /// the source of its bundle in force.
    pub fn with_metrics(mut self, metrics: &PolicyMetrics) -> Engine {
        for source in self
            .sources
            .platform
            .iter()
            .chain(self.sources.tenants.values())
        {
            source.report_to(metrics, &source.current().source);
        }
        self.metrics = Some(metrics.clone());
        self
    }

    fn pin(&mut self) {
        let platform: Vec<Arc<Bundle>> =
            self.sources.platform.iter().map(|s| s.current()).collect();
        let same = platform.len() == self.pinned.platform.len()
            && platform
                .iter()
                .zip(&self.pinned.platform)
                .all(|(a, b)| Arc::ptr_eq(a, b));
        if !same {
            self.fair_share_memo.clear();
            self.autoscale_memo.clear();
        }
        let tenants: BTreeMap<String, Arc<Bundle>> = self
            .sources
            .tenants
            .iter()
            .map(|(ns, s)| (ns.clone(), s.current()))
            .collect();
        let same_tenants = tenants.len() == self.pinned.tenants.len()
            && tenants
                .iter()
                .zip(&self.pinned.tenants)
                .all(|((a, x), (b, y))| a == b && Arc::ptr_eq(x, y));
        if !(same && same_tenants) {
            // A policy's address may be reused by the bundles pinned next.
            self.stats.forget_addresses();
        }
        self.pinned.platform = platform;
        self.pinned.tenants = tenants;
    }

    /// The bundles in force now (platform, then tenants).
    pub fn bundles(&self) -> Vec<Arc<Bundle>> {
        self.pinned
            .platform
            .iter()
            .chain(self.pinned.tenants.values())
            .cloned()
            .collect()
    }
    pub fn stats(&self) -> impl Iterator<Item = &PolicyStats> {
        self.stats.iter()
    }
    /// The decision log since the last [`Engine::take_decisions`]
    /// (bounded per policy; see `decisions`).
    pub fn decisions(&self) -> &[Decision] {
        self.decisions.entries()
    }
    /// Takes the decision log; each policy may then log its cap again.
    pub fn take_decisions(&mut self) -> Vec<Decision> {
        self.decisions.take()
    }
    /// Lines plugins wrote with `arbiter.log` since the last call (bounded
    /// per policy, repeats counted; see `logs`).
    pub fn take_plugin_logs(&mut self) -> Vec<PluginLine> {
        self.logs.take()
    }
    pub fn evaluations(&self) -> u64 {
        self.stats().map(|s| s.evaluations).sum()
    }
    pub fn errors(&self) -> u64 {
        self.stats().flat_map(|s| s.errors.values()).sum()
    }

    /// Platform bundles, then the tenant bundle of `namespace` (if any).
    fn bundles_for(&self, namespace: Option<&str>) -> Vec<Arc<Bundle>> {
        let mut out = self.pinned.platform.clone();
        if let Some(t) = namespace.and_then(|ns| self.pinned.tenants.get(ns)) {
            out.push(t.clone());
        }
        out
    }

    fn has_hook(&self, hook: Hook) -> bool {
        self.pinned
            .platform
            .iter()
            .chain(self.pinned.tenants.values())
            .any(|b| b.policies.iter().any(|p| p.hook == hook))
    }
}
