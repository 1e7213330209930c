//! The [`Hooks`] the scheduler core calls, answered by the pinned bundles:
//! which policies apply (`match`, and a tenant bundle only for its own
//! namespace), what a `DryRun` policy may not do (act), what a failure
//! means (`failurePolicy`), which answer wins (admission: the first
//! enforcing denial; weight: platform scores add up, tenant scores go into
//! the tenant's own score; fairShare, autoscale, flavor, placement: the
//! first enforcing policy to answer for a subject; placement in
//! `placement`), and when an answer is reused
//! instead of evaluated. It never decides anything itself: without a policy
//! for a hook, the answer is [`DefaultHooks`]'.

use std::sync::Arc;
use std::time::Instant;

use super::decisions::Answer;
use super::inputs::{
    admission_input, cluster_queue_views, flavor_input, flavor_views, reads, tenant_weight_input,
    weight_input, workload_name,
};
use super::{Engine, Memo};
use crate::compiled::{Bundle, Policy};
use crate::eval::{Logs, PolicyError};
use crate::hooks::{self, HookKind};
use crate::spec::{FailurePolicy, Mode};
use crate::view::{build, *};
use crate::wasm::Hook;
use arbiter_core::model::Millis;
use arbiter_core::scheduler::capacity::NodeScore;
use arbiter_core::scheduler::hooks::{
    AdmissionRequest, AdmissionVerdict, AutoscaleRequest, DefaultHooks, FairShareRequest,
    FlavorOrder, FlavorRequest, Hooks, PlacementRequest, Weight, WeightRequest,
};
use arbiter_core::scheduler::{Entry, HookState};

fn micros_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
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

    fn policies_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
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
                let result = hooks::Admission::evaluate(policy, input, &mut self.written);
                let micros = micros_since(start);
                let result = self.settle(&bundle, policy, result);
                let who = Some(workload_name(&input.workload));
                let verdict = match result {
                    Ok(out) => {
                        let retryable = out.retryable.unwrap_or(true);
                        let label = if out.allowed { "allow" } else { "deny" };
                        self.record(Answer {
                            workload: who,
                            reason: out.reason.clone(),
                            ..Answer::given(&bundle, policy, request.now, micros, label.into())
                        });
                        (!out.allowed).then(|| AdmissionVerdict::Deny {
                            policy: policy.name.clone(),
                            reason: out
                                .reason
                                .unwrap_or_else(|| format!("denied by {}", policy.name)),
                            retryable,
                            tenant: bundle.tenant.clone(),
                        })
                    }
                    Err(e) => {
                        self.record(Answer {
                            workload: who,
                            ..Answer::failed(&bundle, policy, request.now, micros, &e)
                        });
                        (policy.failure_policy == FailurePolicy::Fail).then(|| {
                            AdmissionVerdict::Deny {
                                policy: policy.name.clone(),
                                reason: format!(
                                    "policy failed ({e}); failurePolicy Fail holds the workload until it succeeds"
                                ),
                                retryable: true,
                                tenant: bundle.tenant.clone(),
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
        // Tenant bundles: only their own namespace's workloads, into the tenant
        // score, and only the views those workloads use (docs/design.md §3).
        let tenants: Vec<(String, Arc<Bundle>)> = self
            .pinned
            .tenants
            .iter()
            .map(|(ns, b)| (ns.clone(), b.clone()))
            .collect();
        for (ns, bundle) in tenants {
            if !bundle.policies.iter().any(|p| p.hook == Hook::Weight) {
                continue;
            }
            let (view, own) = tenant_weight_input(&input, &ns);
            if own.is_empty() {
                continue;
            }
            for &i in &own {
                weights[i].tenant = Some(0.0);
            }
            for policy in bundle.policies.iter().filter(|p| p.hook == Hook::Weight) {
                let picked: Vec<usize> = (0..view.workloads.len())
                    .filter(|&k| applies(&bundle, policy, &view.workloads[k]))
                    .collect();
                for (k, score) in self.run_weight(&bundle, policy, &view, &picked, now) {
                    if let Some(t) = weights[own[k]].tenant.as_mut() {
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
        let views = cluster_queue_views(state, quotas);
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
                hooks::FairShare::evaluate(policy, &input, logs)
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
        let views = flavor_views(request);
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
                let wanted = hooks::Autoscale::evaluate(policy, &input, logs)?;
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

    fn orders_flavors(&self) -> bool {
        self.has_hook(Hook::Flavor)
    }

    fn flavor(&mut self, request: &FlavorRequest<'_>) -> Option<FlavorOrder> {
        if !self.has_hook(Hook::Flavor) {
            return None;
        }
        let state = request.state;
        let now = self.now;
        let mut input: Option<FlavorInput> = None;
        let bundles = self.pinned.platform.clone();
        let reads = reads(&bundles, Hook::Flavor);
        for bundle in bundles {
            for policy in bundle.policies.iter().filter(|p| p.hook == Hook::Flavor) {
                let input = input.get_or_insert_with(|| flavor_input(request, reads, now));
                if !applies(&bundle, policy, &input.workload) {
                    continue;
                }
                let start = Instant::now();
                let result = hooks::Flavor::evaluate(policy, input, &mut self.written);
                let micros = micros_since(start);
                let result = self.settle(&bundle, policy, result);
                let who = Some(workload_name(&input.workload));
                match result {
                    Ok(order) => {
                        self.record(Answer {
                            workload: who,
                            ..Answer::given(&bundle, policy, now, micros, order.clone().into())
                        });
                        if policy.mode == Mode::Enforce {
                            let cluster = state.cluster();
                            return Some(FlavorOrder {
                                flavors: order
                                    .iter()
                                    .filter_map(|f| cluster.flavor_id(f))
                                    .collect(),
                                by_placement: policy.order_by_placement,
                            });
                        }
                    }
                    Err(e) => self.record(Answer {
                        workload: who,
                        ..Answer::failed(&bundle, policy, now, micros, &e)
                    }),
                }
            }
        }
        None
    }

    fn places(&self) -> bool {
        self.has_placement()
    }

    fn places_workload(&self, state: HookState<'_>, entry: &Entry) -> bool {
        self.places_for(state, entry)
    }

    fn placement(&mut self, request: &PlacementRequest<'_>) -> Option<Vec<NodeScore>> {
        self.place(request)
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
                    let result = evaluate(policy, &picked, &mut self.written);
                    micros = micros_since(start) / picked.len() as f64;
                    let result = self.settle(bundle, policy, result);
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
                        Err(e) => self.record(Answer::failed(bundle, policy, now, micros, &e)),
                    }
                }
                answered.sort_by_key(|&(i, _, _)| i);
                for &(i, value, reused) in &answered {
                    let subject = names[i].clone();
                    let micros = if reused { 0.0 } else { micros };
                    self.record(Answer {
                        subject: Some(subject),
                        reused,
                        ..Answer::given(bundle, policy, now, micros, value.into())
                    });
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
        let result = hooks::Weight::evaluate(policy, view, &mut self.written);
        let micros = micros_since(start) / picked.len() as f64;
        let result = self.settle(bundle, policy, result);
        match result {
            Ok(scores) => {
                for (k, &i) in picked.iter().enumerate() {
                    self.record(Answer {
                        workload: Some(workload_name(&input.workloads[i])),
                        ..Answer::given(bundle, policy, now, micros, scores[k].into())
                    });
                }
                if policy.mode == Mode::Enforce {
                    picked.iter().copied().zip(scores).collect()
                } else {
                    Vec::new()
                }
            }
            Err(e) => {
                let micros = micros * picked.len() as f64;
                self.record(Answer::failed(bundle, policy, now, micros, &e));
                Vec::new()
            }
        }
    }
}
