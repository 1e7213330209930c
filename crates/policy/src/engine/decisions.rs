//! The decision log: one [`Decision`] per answer a policy gave (or failed
//! to give), and [`Engine::record`], the one place an answer is counted in
//! its policy's statistics and logged. Called by `hooks` after every
//! evaluation and every reused answer. It never changes an answer, and
//! leaves successful `weight` decisions out of the log when the engine is
//! told not to keep them (they are numerous).
//!
//! The log is bounded per policy. A decision identical to the policy's
//! latest for the same workload or subject (same result, reason, error,
//! mode, and evaluated or reused alike) is counted on that entry (`repeats`, `lastAtSeconds`) instead of
//! stored again, so a denial retried every cycle is one entry. A policy
//! holds at most [`MAX_DECISIONS_PER_POLICY`] entries
//! ([`MAX_TENANT_DECISIONS_PER_POLICY`] for a tenant bundle's) until the
//! log is taken; later new ones are dropped and counted in the policy's
//! statistics (`decisionsDropped`). Each entry names its bundle by source
//! and tenant as well as by name, so a tenant bundle named like the
//! platform's is never mistaken for it. An engine keeping
//! [`RecentDecisions`](super::RecentDecisions) (the operator's) records
//! there instead: a ring of the newest, never taken.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Serialize;

use super::Engine;
use crate::compiled::{Bundle, Policy};
use crate::eval::PolicyError;
use crate::hooks;
use crate::spec::Mode;
use crate::view::build;
use crate::wasm::Hook;
use arbiter_core::model::Millis;

/// Most entries a platform bundle's policy keeps in the decision log.
pub const MAX_DECISIONS_PER_POLICY: usize = 100_000;
/// Most entries a tenant bundle's policy keeps in the decision log.
pub const MAX_TENANT_DECISIONS_PER_POLICY: usize = 1_000;

/// One policy decision, as the decision log records it.
#[derive(Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub at_seconds: f64,
    /// The bundle's `metadata.name` (chosen by its author: see `source`).
    pub bundle: String,
    /// Where the bundle was loaded from — its directory, or `ConfigMap
    /// ns/name` — the report's `bundles[].source` and the metrics' `bundle`
    /// label.
    pub source: String,
    /// The namespace of a tenant bundle; null for a platform bundle.
    pub tenant: Option<String>,
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
    /// `allow`, `deny`, a score, a weight, a node count, a flavor list, a
    /// placement (`{podSet, flavor, nodes, best, score, card?}`: the node
    /// scored highest, first in order among equals) — or `error`.
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
    /// How many identical decisions (same policy, workload or subject,
    /// result, reason, error, mode and `reused`) followed this one, counted
    /// here instead of stored again. Their durations are not kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repeats: u64,
    /// When the last of those repeats was decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_at_seconds: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Decision {
    /// Is `other` the same decision as `self` again (a repeat to count)?
    pub(super) fn same_as(&self, other: &Decision) -> bool {
        self.result == other.result
            && self.reason == other.reason
            && self.error == other.error
            && self.mode == other.mode
            && self.bundle == other.bundle
            && self.reused == other.reused
    }
}

/// The entries, and per policy (by its statistics slot) what it holds.
#[derive(Default)]
pub(super) struct DecisionLog {
    entries: Vec<Decision>,
    policies: Vec<PolicyEntries>,
}

#[derive(Default)]
struct PolicyEntries {
    kept: usize,
    /// Index in `entries` of its latest entry per workload or subject.
    latest: HashMap<String, usize>,
}

impl DecisionLog {
    /// Logs `decision` of the policy in `slot`: as a repeat of that
    /// policy's latest entry for the same workload or subject if it is
    /// identical, else as a new entry if the policy holds fewer than `cap`.
    /// Returns whether it was kept (counted or stored).
    fn push(&mut self, slot: usize, cap: usize, decision: Decision) -> bool {
        if self.policies.len() <= slot {
            self.policies.resize_with(slot + 1, PolicyEntries::default);
        }
        let policy = &mut self.policies[slot];
        let key = decision
            .workload
            .as_deref()
            .or(decision.subject.as_deref())
            .unwrap_or("");
        if let Some(&at) = policy.latest.get(key) {
            let latest = &mut self.entries[at];
            if latest.same_as(&decision) {
                latest.repeats += 1;
                latest.last_at_seconds = Some(decision.at_seconds);
                return true;
            }
        }
        if policy.kept >= cap {
            return false;
        }
        policy.kept += 1;
        policy.latest.insert(key.to_string(), self.entries.len());
        self.entries.push(decision);
        true
    }

    pub(super) fn entries(&self) -> &[Decision] {
        &self.entries
    }

    /// The entries so far; every policy starts again from an empty log.
    pub(super) fn take(&mut self) -> Vec<Decision> {
        self.policies.clear();
        std::mem::take(&mut self.entries)
    }
}

/// One answer a policy gave (or failed to give), as [`Engine::record`]
/// counts and logs it. Start from [`Answer::given`] or [`Answer::failed`]
/// and name the workload or subject it is about.
pub(super) struct Answer<'a> {
    pub bundle: &'a Bundle,
    pub policy: &'a Policy,
    /// When the scheduler asked.
    pub now: Millis,
    /// Wall-clock time of the evaluation (0 for a reused answer).
    pub micros: f64,
    /// `namespace/name` for workload hooks.
    pub workload: Option<String>,
    /// The ClusterQueue or flavor a fairShare/autoscale answer is about.
    pub subject: Option<String>,
    /// What was decided; ignored when `error` is given (logged as `error`).
    pub result: serde_json::Value,
    /// Why (an admission denial's reason).
    pub reason: Option<String>,
    /// Why the evaluation failed.
    pub error: Option<&'a PolicyError>,
    /// Reused for an unchanged input, not evaluated (not timed).
    pub reused: bool,
}

impl<'a> Answer<'a> {
    /// `policy` of `bundle` answered `result`, evaluated in `micros`.
    pub(super) fn given(
        bundle: &'a Bundle,
        policy: &'a Policy,
        now: Millis,
        micros: f64,
        result: serde_json::Value,
    ) -> Answer<'a> {
        Answer {
            bundle,
            policy,
            now,
            micros,
            workload: None,
            subject: None,
            result,
            reason: None,
            error: None,
            reused: false,
        }
    }

    /// `policy` of `bundle` failed with `error` after `micros`.
    pub(super) fn failed(
        bundle: &'a Bundle,
        policy: &'a Policy,
        now: Millis,
        micros: f64,
        error: &'a PolicyError,
    ) -> Answer<'a> {
        Answer {
            error: Some(error),
            ..Answer::given(bundle, policy, now, micros, serde_json::Value::Null)
        }
    }
}

impl Engine {
    /// Counts one answer in its policy's statistics and logs the decision;
    /// a reused answer is counted as such (not timed).
    pub(super) fn record(&mut self, answer: Answer<'_>) {
        let Answer {
            bundle,
            policy,
            now,
            micros,
            workload,
            subject,
            result,
            reason,
            error,
            reused,
        } = answer;
        let tally = self.stats.tally(self.metrics.as_ref(), bundle, policy);
        if reused {
            tally.record_reused();
        } else {
            tally.record(micros, error.map(|e| e.kind));
        }
        if hooks::descriptor(policy.hook).numerous && !self.log_weights && error.is_none() {
            return;
        }
        let decision = Decision {
            at_seconds: build::seconds(now),
            bundle: bundle.name.clone(),
            source: bundle.source.clone(),
            tenant: bundle.tenant.clone(),
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
            repeats: 0,
            last_at_seconds: None,
        };
        if let Some(recent) = &self.recent {
            recent.push(decision);
            return;
        }
        let cap = if bundle.tenant.is_some() {
            MAX_TENANT_DECISIONS_PER_POLICY
        } else {
            MAX_DECISIONS_PER_POLICY
        };
        let slot = tally.slot;
        let kept = self.decisions.push(slot, cap, decision);
        if !kept {
            self.stats
                .tally(self.metrics.as_ref(), bundle, policy)
                .decision_dropped();
        }
    }
}
