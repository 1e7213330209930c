//! The CEL compilers: expression text →
//! - a platform bundle whose one admission policy has it as `expression`
//!   and `messageExpression`, with a small `config`: `cel::compile` under
//!   the default `CelLimits`, as the loader calls it, and `params` folding;
//!   when it compiles, one evaluation on each hook's fixed request (the
//!   compiled program does not depend on the hook), so each hook's result
//!   checks run;
//! - the pod-set CEL of a `JobIntegration` (`arbiter_core::jobs`): compiled
//!   with the built-in integrations, then run on a small job object.
//!
//! Any panic, stack overflow, timeout or OOM is a finding.
#![no_main]

mod common;

use arbiter_core::jobs::{HoldSpec, IntegrationSpec, Integrations};
use arbiter_policy::bundle::Hook;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fn params() -> Value {
    json!({
        "n": 3, "f": 1.5, "s": "team-a", "b": true,
        "list": ["a100", "v100"], "nums": [1, 2, 3],
        "m": {"team-a": 2.0, "team-b": 0.5}
    })
}

fn job(expression: &str) -> (IntegrationSpec, Value) {
    let spec = IntegrationSpec {
        api_version: "fuzz.arbiter.dev/v1".into(),
        kind: "FuzzJob".into(),
        pod_sets: expression.to_string(),
        hold: HoldSpec {
            path: "spec.suspend".into(),
            held: Value::Bool(true),
            released: Value::Bool(false),
            clear_status: Vec::new(),
        },
        finished: None,
        generated: Vec::new(),
        pods_ready: None,
    };
    let object = json!({
        "apiVersion": "fuzz.arbiter.dev/v1", "kind": "FuzzJob",
        "metadata": {"name": "j", "namespace": "team-a", "labels": {"arbiter.dev/queue-name": "q"}},
        "spec": {
            "suspend": true, "replicas": 2, "names": ["a", "b"],
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}}
        }
    });
    (spec, object)
}

fuzz_target!(|data: &[u8]| {
    common::self_check();
    let Ok(expression) = std::str::from_utf8(data) else {
        return;
    };
    // JSON is YAML: the expression reaches the loader exactly as written.
    let yaml = json!({
        "apiVersion": "arbiter.dev/v1alpha1", "kind": "PolicyBundle",
        "metadata": {"name": "fuzz-cel"},
        "spec": {"policies": [{
            "name": "p", "hook": "admission",
            "cel": {"expression": expression, "messageExpression": expression},
            "config": params()
        }]}
    })
    .to_string();
    match common::load(yaml.as_bytes(), None, false) {
        // Compiling does not depend on the hook: one compiled program,
        // evaluated as each hook evaluates it.
        Ok(mut bundle) => {
            for hook in Hook::ALL {
                for policy in &mut bundle.policies {
                    policy.hook = hook;
                }
                common::evaluate_all(&bundle);
            }
        }
        Err(err) => {
            let _ = err.to_string();
        }
    }
    let (spec, object) = job(expression);
    match Integrations::with_extra(vec![spec]) {
        Ok(integrations) => {
            if let Err(err) = integrations.extract(&object) {
                let _ = err.to_string();
            }
        }
        Err(err) => {
            let _ = err.to_string();
        }
    }
});
