//! The policy engine: the [`Hooks`] the scheduler core calls, implemented
//! by the bundles in force. Shared by the simulator and the operator.
//!
//! At the start of every scheduler call ([`Hooks::begin`]) the engine pins
//! the bundles in force, so one cycle always sees whole bundles even while a
//! reload swaps them. Which sources there are may change too: an engine
//! built with [`Engine::shared`] reads its [`SharedSources`] at each pin, so
//! a driver's bundle watcher adds, replaces and removes platform and tenant
//! sources from its own task while the scheduler runs, and the scheduler
//! hears of every change ([`Hooks::policies_changed`]). It applies each policy's `match`, `mode` and
//! `failurePolicy`, confines tenant bundles to their own namespace, keeps
//! per-policy statistics (and, given [`PolicyMetrics`], feeds the same
//! numbers to Prometheus) and the decision log. It never decides anything
//! itself: without policies every hook gives [`DefaultHooks`]' answer.
//!
//! `hooks` (the [`Hooks`] impl: which policies apply to what, `mode`,
//! `failurePolicy`, tenant confinement, first enforcing answer wins for
//! fairShare/autoscale/flavor, reuse of time-free answers), `inputs`
//! (building each hook's request from the scheduler's state, only the
//! context views some policy reads), `placement` (the placement hook:
//! platform policies scoring nodes per pod), `stats` ([`PolicyStats`], kept across
//! reloads, and their Prometheus handles), `decisions` ([`Decision`], the
//! log, bounded per policy with repeats counted, and the one place an
//! answer is counted and logged), `recent` ([`RecentDecisions`], the ring
//! a long-running process keeps instead of the log), `logs` (the `arbiter.log` lines kept per
//! policy, bounded the same way). This file holds
//! the [`Engine`] itself: the bundle sources, what one scheduler call has
//! pinned, and the accessors the drivers read after a run.

mod decisions;
mod hooks;
mod inputs;
mod logs;
mod placement;
mod recent;
mod stats;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

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
pub use recent::{RecentDecisions, RECENT_DECISIONS};
pub use stats::PolicyStats;
use stats::StatsTable;

/// The bundles the engine draws on: platform bundles in order, and tenant bundles by namespace.
#[derive(Clone, Default)]
pub struct Sources {
    pub platform: Vec<Arc<Reloadable<Bundle>>>,
    pub tenants: BTreeMap<String, Arc<Reloadable<Bundle>>>,
}

/// The set of [`Sources`] an engine draws on, shared with whoever changes it
/// while the scheduler runs (the operator's bundle watcher). A change is an
/// atomic swap of the whole set: an engine pins either the set before it or
/// the one after, never a mix, and a cycle that pinned keeps its bundles
/// even if their sources are removed meanwhile. Readers never wait.
pub struct SharedSources {
    current: ArcSwap<Sources>,
    /// Serialises `update`s, so none is lost to another.
    changing: Mutex<()>,
}

impl SharedSources {
    pub fn new(sources: Sources) -> Arc<SharedSources> {
        Arc::new(SharedSources {
            current: ArcSwap::from_pointee(sources),
            changing: Mutex::new(()),
        })
    }

    /// The set in force now.
    pub fn snapshot(&self) -> Arc<Sources> {
        self.current.load_full()
    }

    /// Changes the set: `change` edits a copy, which then replaces the set
    /// in force. The next [`Hooks::begin`] of an engine over it pins the new
    /// set (a source's [`Reloadable::report_to`] is the caller's to call).
    pub fn update<R>(&self, change: impl FnOnce(&mut Sources) -> R) -> R {
        let _one_at_a_time = self.changing.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = Sources::clone(&self.current.load());
        let result = change(&mut next);
        self.current.store(Arc::new(next));
        result
    }
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
    sources: Arc<SharedSources>,
    pinned: Pinned,
    /// The pinned bundles changed since the scheduler last asked
    /// ([`Hooks::policies_changed`]).
    changed: bool,
    fair_share_memo: Memo<ClusterQueueView, f64>,
    autoscale_memo: Memo<FlavorView, u32>,
    stats: StatsTable,
    metrics: Option<PolicyMetrics>,
    decisions: DecisionLog,
    /// Where decisions go instead of `decisions`, when given.
    recent: Option<RecentDecisions>,
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
    /// Engine over a set of sources fixed from now on (each may still reload).
    pub fn new(sources: Sources) -> Engine {
        Engine::shared(SharedSources::new(sources))
    }

    /// Engine over a set of sources that may change while it runs: every
    /// pin reads the set in force.
    pub fn shared(sources: Arc<SharedSources>) -> Engine {
        let mut engine = Engine {
            sources,
            pinned: Pinned::default(),
            changed: false,
            fair_share_memo: HashMap::new(),
            autoscale_memo: HashMap::new(),
            stats: StatsTable::default(),
            metrics: None,
            decisions: DecisionLog::default(),
            recent: None,
            log_weights: true,
            written: Vec::new(),
            logs: PluginLines::default(),
            now: Millis::ZERO,
        };
        engine.pin();
        // What it pinned first is what the scheduler starts with.
        engine.changed = false;
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
    /// Sources added to a [`SharedSources`] later report where their adder
    /// tells them to.
    pub fn with_metrics(mut self, metrics: &PolicyMetrics) -> Engine {
        let sources = self.sources.snapshot();
        for source in sources.platform.iter().chain(sources.tenants.values()) {
            source.report_to(metrics, &source.current().source);
        }
        self.metrics = Some(metrics.clone());
        self
    }

    /// Pins the bundles in force. A source added or removed changes the
    /// pinned lists as a reload does: the memos (keyed by platform bundle
    /// index) are emptied and policy addresses forgotten. The bundles
    /// compared are still held, so no address is reused during the check.
    fn pin(&mut self) {
        let sources = self.sources.snapshot();
        let platform: Vec<Arc<Bundle>> = sources.platform.iter().map(|s| s.current()).collect();
        let same = platform.len() == self.pinned.platform.len()
            && platform
                .iter()
                .zip(&self.pinned.platform)
                .all(|(a, b)| Arc::ptr_eq(a, b));
        if !same {
            self.fair_share_memo.clear();
            self.autoscale_memo.clear();
        }
        let tenants: BTreeMap<String, Arc<Bundle>> = sources
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
            self.changed = true;
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
    /// Records every decision from now on in `recent` (a bounded ring the
    /// caller reads while the engine runs) instead of the decision log,
    /// which then stays empty: for a process that never takes the log.
    pub fn keep_recent(mut self, recent: RecentDecisions) -> Engine {
        self.recent = Some(recent);
        self
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
