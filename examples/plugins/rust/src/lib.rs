//! `urgent-first`, in Rust: a tenant `weight` plugin ordering a tenant's
//! own workloads: those labelled `urgent=true` first, then fewer GPUs,
//! then older. The same policy as `examples/plugins/go` and
//! `examples/plugins/c` (`examples/plugins/README.md` has the formula);
//! `tests/plugin_languages.rs` checks the three score every workload
//! identically.

use arbiter_plugin_sdk::{export_weight, export_weight_fields, WeightRequest, WeightResponse};

/// More GPUs than this score as this many.
const MAX_GPUS: i64 = (1 << 14) - 1;
/// Whole seconds; older scores as this old.
const MAX_AGE: u64 = (1 << 32) - 1;

/// Exact in an `f64`: urgent × 2^46 + (MAX_GPUS − gpus) × 2^32 + age.
pub fn score(workload: &arbiter_plugin_sdk::Workload) -> f64 {
    let urgent = u64::from(workload.labels.get("urgent").is_some_and(|v| v == "true"));
    let gpus = workload.gpus.clamp(0, MAX_GPUS) as u64;
    let age = if workload.age_seconds >= MAX_AGE as f64 {
        MAX_AGE
    } else if workload.age_seconds > 0.0 {
        workload.age_seconds.floor() as u64
    } else {
        0
    };
    (urgent << 46 | (MAX_GPUS as u64 - gpus) << 32 | age) as f64
}

pub fn weight(request: WeightRequest) -> WeightResponse {
    WeightResponse {
        scores: request.workloads.iter().map(score).collect(),
    }
}

export_weight!(weight);
export_weight_fields!["workloads.labels", "workloads.gpus", "workloads.ageSeconds"];

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_plugin_sdk::call_json;

    #[test]
    fn scores_as_the_host_sends_them() {
        let request = r#"{"workloads":[
            {"labels":{"urgent":"true"},"gpus":8,"ageSeconds":10.9},
            {"labels":{"urgent":"false"},"gpus":0,"ageSeconds":1e300},
            {"gpus":-3,"ageSeconds":-1},
            {"labels":{"\u0075rgent":"true","team":"ü"},"gpus":99999}
        ],"now":5,"params":null}"#;
        let out = call_json(request.as_bytes(), weight).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"scores":[140698833649674.0,70368744177663.0,70364449210368.0,70368744177664.0]}"#
        );
    }
}
