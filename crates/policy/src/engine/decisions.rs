//! The decision log: one [`Decision`] per answer a policy gave (or failed
//! to give), and [`Engine::record`], the one place an answer is counted in
//! its policy's statistics and logged. Called by `hooks` after every
//! evaluation and every reused answer. It never changes an answer, and
//! leaves successful `weight` decisions out of the log when the engine is
//! told not to keep them (they are numerous).

use schemars::JsonSchema;
use serde::Serialize;

use super::Engine;
use crate::compiled::{Bundle, Policy};
use crate::eval::PolicyError;
use crate::spec::Mode;
use crate::view::build;
use crate::wasm::Hook;
use arbiter_core::model::Millis;

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

impl Engine {
    /// Counts one answer in its policy's statistics and logs the decision;
    /// with `reused`, an answer reused for an unchanged input (not timed).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
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
            tracked.record_reused();
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
}
