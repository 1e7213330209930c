//! `shortest-first`: the default bundle's `weight` plugin. It orders
//! workloads by their `resourceEstimation` runtime estimate, shorter first:
//!
//! ```text
//! score = scale / (1 + runtimeSeconds / referenceSeconds)
//! ```
//!
//! so a workload estimated at 0 s scores `scale`, one at `referenceSeconds`
//! scores `scale / 2`, and longer ones approach 0. A workload without an
//! estimate (estimation off for its LocalQueue, or no history yet) scores
//! `unknownScore`, by default 0: below every estimated workload, because an
//! unknown runtime may be arbitrarily long, while among themselves such
//! workloads keep the host's order. Set `unknownScore` to `scale / 2` to
//! treat them as one reference length instead.
//!
//! Params (the policy's `config`), all optional: `scale` (100),
//! `referenceSeconds` (3600), `unknownScore` (0). An unknown or invalid
//! param fails the call with a message, so a typo shows up in the bundle's
//! tests instead of silently using a default.

use arbiter_plugin_sdk::{
    export_weight, export_weight_fields, serde_json, Estimate, WeightRequest, WeightResponse,
};
use serde::Deserialize;

/// All the plugin reads of a workload; it declares just this field with
/// `export_weight_fields!`, so the host sends nothing else and a batch of
/// thousands decodes into a few bytes per workload.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Item {
    pub estimate: Option<Estimate>,
}

/// The policy's `config`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Params {
    /// The score of a workload estimated to take no time.
    pub scale: f64,
    /// The runtime that halves the score, in seconds.
    pub reference_seconds: f64,
    /// The score of a workload without an estimate.
    pub unknown_score: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            scale: 100.0,
            reference_seconds: 3600.0,
            unknown_score: 0.0,
        }
    }
}

impl Params {
    /// Reads and checks the request's `params` (`null` means all defaults).
    pub fn parse(params: &serde_json::Value) -> Result<Params, String> {
        let parsed: Params = if params.is_null() {
            Params::default()
        } else {
            Params::deserialize(params).map_err(|error| format!("params: {error}"))?
        };
        if !parsed.scale.is_finite() {
            return Err(format!("params.scale must be finite, got {}", parsed.scale));
        }
        if !(parsed.reference_seconds.is_finite() && parsed.reference_seconds > 0.0) {
            return Err(format!(
                "params.referenceSeconds must be a positive number of seconds, got {}",
                parsed.reference_seconds
            ));
        }
        if !parsed.unknown_score.is_finite() {
            return Err(format!(
                "params.unknownScore must be finite, got {}",
                parsed.unknown_score
            ));
        }
        Ok(parsed)
    }

    /// The score of one workload.
    pub fn score(&self, workload: &Item) -> f64 {
        match &workload.estimate {
            Some(estimate) => {
                let runtime = estimate.runtime_seconds.max(0.0);
                self.scale / (1.0 + runtime / self.reference_seconds)
            }
            None => self.unknown_score,
        }
    }
}

/// The `weight` hook: one score per workload, in request order.
pub fn weight(request: WeightRequest<Item>) -> Result<WeightResponse, String> {
    let params = Params::parse(&request.params)?;
    Ok(WeightResponse {
        scores: request.workloads.iter().map(|w| params.score(w)).collect(),
    })
}

export_weight!(weight);
// All it reads of each workload; the host sends nothing else of the batch.
export_weight_fields!["workloads.estimate"];

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_plugin_sdk::call_json;
    use serde_json::{json, Value};

    fn workload(runtime_seconds: Option<f64>) -> Item {
        Item {
            estimate: runtime_seconds.map(|runtime_seconds| Estimate {
                runtime_seconds,
                samples: 10,
            }),
        }
    }

    fn scores(runtimes: &[Option<f64>], params: Value) -> Result<Vec<f64>, String> {
        weight(WeightRequest {
            workloads: runtimes.iter().map(|&r| workload(r)).collect(),
            params,
            ..WeightRequest::default()
        })
        .map(|response| response.scores)
    }

    #[test]
    fn shorter_estimates_score_higher_with_default_params() {
        let scores = scores(&[Some(7200.0), Some(0.0), Some(3600.0), None], Value::Null).unwrap();
        assert_eq!(scores, [100.0 / 3.0, 100.0, 50.0, 0.0]);
    }

    #[test]
    fn params_set_scale_reference_and_unknown_score() {
        let params = json!({"scale": 10, "referenceSeconds": 60, "unknownScore": 5});
        assert_eq!(
            scores(&[Some(60.0), None, Some(180.0)], params).unwrap(),
            [5.0, 5.0, 2.5]
        );
    }

    #[test]
    fn a_negative_estimate_counts_as_zero() {
        assert_eq!(scores(&[Some(-5.0)], json!({})).unwrap(), [100.0]);
    }

    #[test]
    fn bad_params_fail_the_call_with_a_message() {
        let error = scores(&[None], json!({"referenceSeconds": 0})).unwrap_err();
        assert!(error.contains("params.referenceSeconds"), "{error}");
        let error = scores(&[None], json!({"referenceSecs": 60})).unwrap_err();
        assert!(error.contains("unknown field `referenceSecs`"), "{error}");
        let error = scores(&[None], json!({"scale": "high"})).unwrap_err();
        assert!(error.starts_with("params:"), "{error}");
    }

    #[test]
    fn answers_the_host_json_one_score_per_workload_in_order() {
        let request = json!({
            "workloads": [
                {"name": "long", "namespace": "research", "estimate": {"runtimeSeconds": 3600, "samples": 3}},
                {"name": "new", "namespace": "research", "estimate": null},
                {"name": "short", "namespace": "dev", "estimate": {"runtimeSeconds": 0, "samples": 9}}
            ],
            "queues": {}, "clusterQueues": {}, "tenants": {},
            "now": 120,
            "params": {"scale": 100}
        });
        let out = call_json(request.to_string().as_bytes(), weight).unwrap();
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out, json!({"scores": [50.0, 0.0, 100.0]}));
    }
}
