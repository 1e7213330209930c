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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use schemars::JsonSchema;
use serde::Serialize;

use super::compiled::{Bundle, Policy};
use super::eval::{self, Logs, PolicyError};
use super::metrics::{PolicyHandle, PolicyMetrics};
use super::reload::Reloadable;
use super::spec::{FailurePolicy, Mode};
use super::view::{build, *};
use super::wasm::Hook;
use arbiter_core::model::cluster::{ClusterQueueId, FlavorId};
use arbiter_core::model::Millis;
use arbiter_core::scheduler::hooks::{
    AdmissionRequest, AdmissionVerdict, AutoscaleRequest, DefaultHooks, FairShareRequest,
    FlavorRequest, Hooks, Weight, WeightRequest,
};
use arbiter_core::scheduler::Scheduler;

/// One policy decision, as the decision log records it.
#[derive(Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub at_seconds: f64,
    pub bundle: String,
    pub policy: String,
    pub hook: Hook,
    /// `Enforce` or `DryRun`.
    pub mode: Mode,
    /// `namespace/name` for workload hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// The ClusterQueue or flavor a fairShare/autoscale decision is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// `allow`, `deny`, a score, a weight, a node count, a flavor list — or `error`.
    pub result: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The error kind when the evaluation failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall-clock time of the evaluation (a batch's time is split evenly over its items).
    pub duration_micros: f64,
    /// The answer was reused, not evaluated: the policy had already decided
    /// on exactly this input (see [`Policy::reusable`]); `durationMicros` is 0.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

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
struct StatsTable {
    all: Vec<Tracked>,
    /// Report order.
    by_name: BTreeMap<(String, String, String), usize>,
    /// By `&Policy` address; valid while the same bundles are pinned.
    by_address: HashMap<usize, usize>,
}

impl StatsTable {
    /// The statistics of `policy` of `bundle`, created on its first evaluation.
    fn tracked(
        &mut self,
        metrics: Option<&PolicyMetrics>,
        bundle: &Bundle,
        policy: &Policy,
    ) -> &mut Tracked {
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
                        self.all.push(Tracked {
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

    fn iter(&self) -> impl Iterator<Item = &PolicyStats> {
        self.by_name.values().map(|&at| &self.all[at].stats)
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
struct Tracked {
    stats: PolicyStats,
    metrics: Option<PolicyHandle>,
}

impl Tracked {
    fn record(&mut self, micros: f64, error: Option<&'static str>) {
        self.stats.record(micros, error);
        if let Some(metrics) = &mut self.metrics {
            metrics.record(micros / 1e6, error);
        }
    }
}

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
    decisions: Vec<Decision>,
    /// Keep per-workload weight decisions in the log (they are numerous).
    pub log_weights: bool,
    logs: Logs,
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
            decisions: Vec::new(),
            log_weights: true,
            logs: Vec::new(),
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
            self.stats.by_address.clear();
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
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }
    pub fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.decisions)
    }
    /// Lines plugins wrote with `arbiter.log` since the last call.
    pub fn take_plugin_logs(&mut self) -> Logs {
        std::mem::take(&mut self.logs)
    }
    pub fn evaluations(&self) -> u64 {
        self.stats().map(|s| s.evaluations).sum()
    }
    pub fn errors(&self) -> u64 {
        self.stats().flat_map(|s| s.errors.values()).sum()
    }

    /// Counts one answer in its policy's statistics and logs the decision;
    /// with `reused`, an answer reused for an unchanged input (not timed).
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        bundle: &Bundle,
        policy: &Policy,
        now: Millis,
        micros: f64,
        workload: Option<String>,
        subject: Option<String>,
        result: serde_json::Value,
        reason: Option<String>,
        error: Option<&PolicyError>,
        reused: bool,
    ) {
        let tracked = self.stats.tracked(self.metrics.as_ref(), bundle, policy);
        if reused {
            tracked.stats.reused += 1;
            if let Some(metrics) = &mut tracked.metrics {
                metrics.record_reused();
            }
        } else {
            tracked.record(micros, error.map(|e| e.kind));
        }
        if policy.hook == Hook::Weight && !self.log_weights && error.is_none() {
            return;
        }
        self.decisions.push(Decision {
            at_seconds: build::seconds(now),
            bundle: bundle.name.clone(),
            policy: policy.name.clone(),
            hook: policy.hook,
            mode: policy.mode,
            workload,
            subject,
            result: if error.is_some() {
                "error".into()
            } else {
                result
            },
            reason: match error {
                Some(e) => Some(e.message.clone()),
                None => reason,
            },
            error: error.map(|e| e.kind.to_string()),
            duration_micros: micros,
            reused,
        });
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

/// `build()` when a matching policy reads the view, else its empty default.
fn built_if<T: Default>(read: bool, build: impl FnOnce() -> T) -> T {
    if read {
        build()
    } else {
        T::default()
    }
}

fn micros_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
}

fn workload_name(w: &WorkloadView) -> String {
    format!("{}/{}", w.namespace, w.name)
}

/// A tenant bundle's policy only ever sees its own namespace's workloads.
fn applies(bundle: &Bundle, policy: &Policy, w: &WorkloadView) -> bool {
    bundle.tenant.as_deref().is_none_or(|t| t == w.namespace)
        && policy.applies_to(&w.namespace, &w.kind, &w.cluster_queue)
}

impl Hooks for Engine {
    fn begin(&mut self, now: Millis) {
        self.now = now;
        self.pin();
    }

    fn admission(&mut self, request: &AdmissionRequest<'_>) -> AdmissionVerdict {
        if !self.has_hook(Hook::Admission) {
            return AdmissionVerdict::Allow;
        }
        let ns = request.entry.workload.namespace.as_str();
        let bundles = self.bundles_for(Some(ns));
        let reads = reads(&bundles, Hook::Admission);
        let mut input: Option<AdmissionInput> = None;
        for bundle in bundles {
            for policy in bundle.policies.iter().filter(|p| p.hook == Hook::Admission) {
                let input = input.get_or_insert_with(|| admission_input(request, reads));
                if !applies(&bundle, policy, &input.workload) {
                    continue;
                }
                let start = Instant::now();
                let result = eval::admission(policy, input, &mut self.logs);
                let micros = micros_since(start);
                let who = Some(workload_name(&input.workload));
                let verdict = match result {
                    Ok(out) => {
                        let retryable = out.retryable.unwrap_or(true);
                        let label = if out.allowed { "allow" } else { "deny" };
                        self.record(
                            &bundle,
                            policy,
                            request.now,
                            micros,
                            who,
                            None,
                            label.into(),
                            out.reason.clone(),
                            None,
                            false,
                        );
                        (!out.allowed).then(|| AdmissionVerdict::Deny {
                            policy: policy.name.clone(),
                            reason: out
                                .reason
                                .unwrap_or_else(|| format!("denied by {}", policy.name)),
                            retryable,
                        })
                    }
                    Err(e) => {
                        self.record(
                            &bundle,
                            policy,
                            request.now,
                            micros,
                            who,
                            None,
                            serde_json::Value::Null,
                            None,
                            Some(&e),
                            false,
                        );
                        (policy.failure_policy == FailurePolicy::Fail).then(|| {
                            AdmissionVerdict::Deny {
                                policy: policy.name.clone(),
                                reason: format!(
                                    "policy failed ({e}); failurePolicy Fail holds the workload until it succeeds"
                                ),
                                retryable: true,
                            }
                        })
                    }
                };
                if let (Some(deny), Mode::Enforce) = (verdict, policy.mode) {
                    return deny;
                }
            }
        }
        AdmissionVerdict::Allow
    }

    fn weight(&mut self, batch: &[WeightRequest<'_>]) -> Vec<Weight> {
        let mut weights = vec![Weight::default(); batch.len()];
        if batch.is_empty() || !self.has_hook(Hook::Weight) {
            return weights;
        }
        let now = batch[0].now;
        let platform = self.bundles_for(None);
        let all = platform.iter().chain(self.pinned.tenants.values());
        let input = weight_input(batch, reads(all, Hook::Weight));
        for bundle in platform {
            for policy in bundle.policies.iter().filter(|p| p.hook == Hook::Weight) {
                let picked: Vec<usize> = (0..input.workloads.len())
                    .filter(|&i| applies(&bundle, policy, &input.workloads[i]))
                    .collect();
                for (i, score) in self.run_weight(&bundle, policy, &input, &picked, now) {
                    weights[i].score += score;
                }
            }
        }
        // Tenant bundles: only their own namespace's workloads, into the tenant score.
        let tenants: Vec<(String, Arc<Bundle>)> = self
            .pinned
            .tenants
            .iter()
            .map(|(ns, b)| (ns.clone(), b.clone()))
            .collect();
        for (ns, bundle) in tenants {
            let own: Vec<usize> = (0..input.workloads.len())
                .filter(|&i| input.workloads[i].namespace == ns)
                .collect();
            if own.is_empty() || !bundle.policies.iter().any(|p| p.hook == Hook::Weight) {
                continue;
            }
            for &i in &own {
                weights[i].tenant = Some(0.0);
            }
            for policy in bundle.policies.iter().filter(|p| p.hook == Hook::Weight) {
                let picked: Vec<usize> = own
                    .iter()
                    .copied()
                    .filter(|&i| applies(&bundle, policy, &input.workloads[i]))
                    .collect();
                for (i, score) in self.run_weight(&bundle, policy, &input, &picked, now) {
                    if let Some(t) = weights[i].tenant.as_mut() {
                        *t += score;
                    }
                }
            }
        }
        weights
    }

    fn fair_share(&mut self, request: &FairShareRequest<'_>) -> Vec<f64> {
        let mut weights = DefaultHooks.fair_share(request);
        if !self.has_hook(Hook::FairShare) {
            return weights;
        }
        let state = request.state;
        // Quota maps are the costly part of a view: built only if some policy reads them.
        let quotas = reads(&self.pinned.platform, Hook::FairShare).quotas;
        let views: Vec<ClusterQueueView> = (0..state.cluster().cluster_queues.len())
            .map(|i| build::cluster_queue(state, ClusterQueueId(i as u32), quotas))
            .collect();
        let names: Vec<String> = views.iter().map(|v| v.name.clone()).collect();
        let now = build::seconds(request.now);
        let mut memo = std::mem::take(&mut self.fair_share_memo);
        let decided = self.first_match(
            Hook::FairShare,
            request.now,
            &names,
            &views,
            &mut memo,
            |policy, name| {
                policy.matches.cluster_queues.is_empty()
                    || policy.matches.cluster_queues.iter().any(|c| c == name)
            },
            |policy, picked, logs| {
                let input = FairShareInput {
                    cluster_queues: picked.iter().map(|&i| views[i].clone()).collect(),
                    now,
                    params: serde_json::Value::Null,
                };
                eval::fair_share(policy, &input, logs)
            },
        );
        self.fair_share_memo = memo;
        for (weight, value) in weights.iter_mut().zip(decided) {
            if let Some(value) = value {
                *weight = value;
            }
        }
        weights
    }

    fn autoscale(&mut self, request: &AutoscaleRequest<'_>) -> Vec<u32> {
        let mut nodes = DefaultHooks.autoscale(request);
        if !self.has_hook(Hook::Autoscale) {
            return nodes;
        }
        let state = request.state;
        let views: Vec<FlavorView> = request
            .flavors
            .iter()
            .map(|l| FlavorView {
                name: build::flavor_name(state, l.flavor),
                nodes: l.nodes,
                min_nodes: l.min_nodes,
                max_nodes: l.max_nodes,
                utilization: l.utilization,
                pending_nodes: l.pending_nodes,
                target_utilization: l.target_utilization,
            })
            .collect();
        let names: Vec<String> = views.iter().map(|v| v.name.clone()).collect();
        let now = build::seconds(request.now);
        let mut memo = std::mem::take(&mut self.autoscale_memo);
        let decided = self.first_match(
            Hook::Autoscale,
            request.now,
            &names,
            &views,
            &mut memo,
            |policy, name| {
                policy.matches.flavors.is_empty()
                    || policy.matches.flavors.iter().any(|f| f == name)
            },
            |policy, picked, logs| {
                let input = AutoscaleInput {
                    flavors: picked.iter().map(|&i| views[i].clone()).collect(),
                    now,
                    params: serde_json::Value::Null,
                };
                let wanted = eval::autoscale(policy, &input, logs)?;
                // Clamped to the pool's bounds before it is logged or acted on.
                Ok(picked
                    .iter()
                    .zip(wanted)
                    .map(|(&i, n)| {
                        let load = &request.flavors[i];
                        n.clamp(
                            load.min_nodes as i64,
                            load.max_nodes.max(load.min_nodes) as i64,
                        ) as u32
                    })
                    .collect())
            },
        );
        self.autoscale_memo = memo;
        for (n, value) in nodes.iter_mut().zip(decided) {
            if let Some(value) = value {
                *n = value;
            }
        }
        nodes
    }

    fn flavor(&mut self, request: &FlavorRequest<'_>) -> Option<Vec<FlavorId>> {
        if !self.has_hook(Hook::Flavor) {
            return None;
        }
        let state = request.state;
        let entry = request.entry;
        let now = self.now;
        let mut input: Option<FlavorInput> = None;
        let bundles = self.pinned.platform.clone();
        let reads = reads(&bundles, Hook::Flavor);
        for bundle in bundles {
            for policy in bundle.policies.iter().filter(|p| p.hook == Hook::Flavor) {
                let input = input.get_or_insert_with(|| FlavorInput {
                    workload: build::workload(state, entry, now),
                    queue: built_if(reads.queue, || build::queue(state, entry)),
                    cluster_queue: built_if(reads.cluster_queue, || {
                        build::cluster_queue(state, request.cluster_queue, reads.quotas)
                    }),
                    tenant: built_if(reads.tenant, || {
                        build::tenant(state, &entry.workload.namespace)
                    }),
                    candidates: request
                        .candidates
                        .iter()
                        .map(|&f| build::flavor_name(state, f))
                        .collect(),
                    now: build::seconds(now),
                    params: serde_json::Value::Null,
                });
                if !applies(&bundle, policy, &input.workload) {
                    continue;
                }
                let start = Instant::now();
                let result = eval::flavor(policy, input, &mut self.logs);
                let micros = micros_since(start);
                let who = Some(workload_name(&input.workload));
                match result {
                    Ok(order) => {
                        self.record(
                            &bundle,
                            policy,
                            now,
                            micros,
                            who,
                            None,
                            order.clone().into(),
                            None,
                            None,
                            false,
                        );
                        if policy.mode == Mode::Enforce {
                            let cluster = state.cluster();
                            return Some(
                                order.iter().filter_map(|f| cluster.flavor_id(f)).collect(),
                            );
                        }
                    }
                    Err(e) => self.record(
                        &bundle,
                        policy,
                        now,
                        micros,
                        who,
                        None,
                        serde_json::Value::Null,
                        None,
                        Some(&e),
                        false,
                    ),
                }
            }
        }
        None
    }
}

impl Engine {
    /// For hooks that decide per subject (ClusterQueue, flavor): each
    /// platform policy of `hook`, in bundle order, is evaluated once on the
    /// subjects it matches that no enforcing policy has decided yet; the
    /// first enforcing policy to succeed decides. Returns the decided value
    /// per subject (`None`: the built-in answer stands).
    ///
    /// A [`Policy::reusable`] policy is not evaluated again for a subject
    /// whose view equals the one it last answered for: its answer is
    /// reused, and logged as such.
    #[allow(clippy::too_many_arguments)]
    fn first_match<V: Clone + PartialEq, T: Copy + Into<serde_json::Value>>(
        &mut self,
        hook: Hook,
        now: Millis,
        names: &[String],
        views: &[V],
        memo: &mut Memo<V, T>,
        matches: impl Fn(&Policy, &str) -> bool,
        evaluate: impl Fn(&Policy, &[usize], &mut Logs) -> Result<Vec<T>, PolicyError>,
    ) -> Vec<Option<T>> {
        let mut decided: Vec<Option<T>> = vec![None; names.len()];
        for (b, bundle) in self.pinned.platform.clone().iter().enumerate() {
            for (p, policy) in bundle.policies.iter().enumerate() {
                if policy.hook != hook {
                    continue;
                }
                let mut picked: Vec<usize> = (0..names.len())
                    .filter(|&i| decided[i].is_none() && matches(policy, &names[i]))
                    .collect();
                // (subject, answer, reused); logged in subject order.
                let mut answered: Vec<(usize, T, bool)> = Vec::new();
                let reusable = policy.reusable();
                if reusable {
                    let known = memo.entry((b, p)).or_default();
                    picked.retain(|&i| match known.get(names[i].as_str()) {
                        Some((view, value)) if *view == views[i] => {
                            answered.push((i, *value, true));
                            false
                        }
                        _ => true,
                    });
                }
                let mut micros = 0.0;
                if !picked.is_empty() {
                    let start = Instant::now();
                    let result = evaluate(policy, &picked, &mut self.logs);
                    micros = micros_since(start) / picked.len() as f64;
                    match result {
                        Ok(values) => {
                            for (&i, value) in picked.iter().zip(values) {
                                if reusable {
                                    memo.entry((b, p))
                                        .or_default()
                                        .insert(names[i].clone(), (views[i].clone(), value));
                                }
                                answered.push((i, value, false));
                            }
                        }
                        Err(e) => self.record(
                            bundle,
                            policy,
                            now,
                            micros,
                            None,
                            None,
                            serde_json::Value::Null,
                            None,
                            Some(&e),
                            false,
                        ),
                    }
                }
                answered.sort_by_key(|&(i, _, _)| i);
                for &(i, value, reused) in &answered {
                    let subject = names[i].clone();
                    let micros = if reused { 0.0 } else { micros };
                    self.record(
                        bundle,
                        policy,
                        now,
                        micros,
                        None,
                        Some(subject),
                        value.into(),
                        None,
                        None,
                        reused,
                    );
                }
                if policy.mode == Mode::Enforce {
                    for (i, value, _) in answered {
                        decided[i] = Some(value);
                    }
                }
            }
        }
        decided
    }

    /// Evaluates one weight policy on the workloads `picked` (indices into `input.workloads`).
    /// Returns (index, score) for Enforce policies that succeeded; DryRun and failures give nothing.
    fn run_weight(
        &mut self,
        bundle: &Bundle,
        policy: &Policy,
        input: &WeightInput,
        picked: &[usize],
        now: Millis,
    ) -> Vec<(usize, f64)> {
        if picked.is_empty() {
            return Vec::new();
        }
        let subset;
        let view = if picked.len() == input.workloads.len() {
            input
        } else {
            subset = WeightInput {
                workloads: picked.iter().map(|&i| input.workloads[i].clone()).collect(),
                queues: input.queues.clone(),
                cluster_queues: input.cluster_queues.clone(),
                tenants: input.tenants.clone(),
                now: input.now,
                params: serde_json::Value::Null,
            };
            &subset
        };
        let start = Instant::now();
        let result = eval::weight(policy, view, &mut self.logs);
        let micros = micros_since(start) / picked.len() as f64;
        match result {
            Ok(scores) => {
                for (k, &i) in picked.iter().enumerate() {
                    self.record(
                        bundle,
                        policy,
                        now,
                        micros,
                        Some(workload_name(&input.workloads[i])),
                        None,
                        scores[k].into(),
                        None,
                        None,
                        false,
                    );
                }
                if policy.mode == Mode::Enforce {
                    picked.iter().copied().zip(scores).collect()
                } else {
                    Vec::new()
                }
            }
            Err(e) => {
                self.record(
                    bundle,
                    policy,
                    now,
                    micros * picked.len() as f64,
                    None,
                    None,
                    serde_json::Value::Null,
                    None,
                    Some(&e),
                    false,
                );
                Vec::new()
            }
        }
    }
}

/// The admission request's views: the workload, and the context views in `reads`.
fn admission_input(request: &AdmissionRequest<'_>, reads: Reads) -> AdmissionInput {
    let state = request.state;
    let entry = request.entry;
    let cluster = state.cluster();
    let cq = entry.workload.cluster_queue;
    let flavors = entry
        .workload
        .pod_sets
        .iter()
        .zip(request.flavors)
        .map(|(ps, f)| {
            (
                ps.name.clone(),
                f.flavors
                    .iter()
                    .map(|&(r, fl)| {
                        (
                            cluster.resource_name(r).to_string(),
                            build::flavor_name(state, fl),
                        )
                    })
                    .collect(),
            )
        })
        .collect();
    let mut workload = build::workload(state, entry, request.now);
    workload.flavors = build::flavor_names(state, request.flavors);
    AdmissionInput {
        workload,
        queue: built_if(reads.queue, || build::queue(state, entry)),
        cluster_queue: built_if(reads.cluster_queue, || {
            build::cluster_queue(state, cq, reads.quotas)
        }),
        tenant: built_if(reads.tenant, || {
            build::tenant(state, &entry.workload.namespace)
        }),
        cohort: built_if(reads.cohort, || build::cohort(state, cq)),
        flavors,
        borrowing: request.borrowing,
        now: build::seconds(request.now),
        params: serde_json::Value::Null,
    }
}

/// The context views the `hook` policies of `bundles` read, together.
fn reads<'b>(bundles: impl IntoIterator<Item = &'b Arc<Bundle>>, hook: Hook) -> Reads {
    bundles
        .into_iter()
        .flat_map(|b| b.policies.iter())
        .filter(|p| p.hook == hook)
        .fold(Reads::default(), |reads, p| reads.union(p.reads()))
}

/// The weight batch's views: the workloads, and the context maps in `reads`.
fn weight_input(batch: &[WeightRequest<'_>], reads: Reads) -> WeightInput {
    let state: &Scheduler = batch[0].state;
    let now = batch[0].now;
    let mut input = WeightInput {
        now: build::seconds(now),
        ..WeightInput::default()
    };
    for r in batch {
        let w = build::workload(state, r.entry, now);
        let wl = &r.entry.workload;
        if reads.queue {
            input
                .queues
                .entry(format!("{}/{}", w.namespace, w.queue_name))
                .or_insert_with(|| build::queue(state, r.entry));
        }
        if reads.cluster_queue && !input.cluster_queues.contains_key(&w.cluster_queue) {
            input.cluster_queues.insert(
                w.cluster_queue.clone(),
                build::cluster_queue(state, wl.cluster_queue, reads.quotas),
            );
        }
        if reads.tenant && !input.tenants.contains_key(&w.namespace) {
            input
                .tenants
                .insert(w.namespace.clone(), build::tenant(state, &w.namespace));
        }
        input.workloads.push(w);
    }
    input
}
