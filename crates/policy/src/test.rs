//! A bundle's own tests (`spec.tests`): each names a policy, gives the
//! hook's request (omitted fields take their defaults) and what the policy
//! must decide. Run by the loader before a bundle may be swapped in, and by
//! `arbiter policy test`. Evaluation goes through [`super::eval`], the path
//! the scheduler uses.

use serde::de::DeserializeOwned;

use super::compiled::{Bundle, Policy};
use super::eval::{self, PolicyError};
use super::spec::{Expect, TestSpec};
use super::view::*;
use super::wasm::Hook;

/// The outcome of one test.
#[derive(Clone, Debug, PartialEq)]
pub struct TestResult {
    pub name: String,
    pub policy: String,
    /// `None`: passed.
    pub failure: Option<String>,
}

/// Runs every test of the bundle.
pub fn run(bundle: &Bundle) -> Vec<TestResult> {
    bundle
        .tests
        .iter()
        .map(|t| TestResult {
            name: t.name.clone(),
            policy: t.policy.clone(),
            failure: match bundle.policy(&t.policy) {
                Some(policy) => run_one(policy, t).err(),
                None => Some(format!("no policy named {}", t.policy)),
            },
        })
        .collect()
}

fn input<T: DeserializeOwned>(test: &TestSpec) -> Result<T, String> {
    let value = if test.input.is_null() {
        serde_json::json!({})
    } else {
        test.input.clone()
    };
    serde_path_to_error::deserialize(value).map_err(|e| {
        format!(
            "input.{}: {}; see plugin-sdk/schema for the request shape",
            e.path(),
            e.inner()
        )
    })
}

/// Evaluates `policy` on a JSON request as the hook would; the result as JSON.
pub fn evaluate(policy: &Policy, request: &serde_json::Value) -> Result<serde_json::Value, String> {
    let test = TestSpec {
        name: String::new(),
        policy: policy.name.clone(),
        input: request.clone(),
        expect: Expect::default(),
    };
    let mut logs = Vec::new();
    let to_json = |r: Result<serde_json::Value, PolicyError>| r.map_err(|e| e.to_string());
    match policy.hook {
        Hook::Admission => {
            let i: AdmissionInput = input(&test)?;
            to_json(eval::admission(policy, &i, &mut logs).map(|o| serde_json::json!(o)))
        }
        Hook::Weight => {
            let i: WeightInput = input(&test)?;
            to_json(eval::weight(policy, &i, &mut logs).map(|s| serde_json::json!({ "scores": s })))
        }
        Hook::FairShare => {
            let i: FairShareInput = input(&test)?;
            to_json(
                eval::fair_share(policy, &i, &mut logs)
                    .map(|w| serde_json::json!({ "weights": w })),
            )
        }
        Hook::Autoscale => {
            let i: AutoscaleInput = input(&test)?;
            to_json(
                eval::autoscale(policy, &i, &mut logs).map(|n| serde_json::json!({ "nodes": n })),
            )
        }
        Hook::Flavor => {
            let i: FlavorInput = input(&test)?;
            to_json(
                eval::flavor(policy, &i, &mut logs).map(|f| serde_json::json!({ "flavors": f })),
            )
        }
    }
}

fn run_one(policy: &Policy, test: &TestSpec) -> Result<(), String> {
    let mut logs = Vec::new();
    let e = &test.expect;
    let check_err = |r: &Result<(), PolicyError>| -> Result<bool, String> {
        match (r, &e.error) {
            (Err(err), Some(kind)) if err.kind == kind => Ok(true),
            (Err(err), Some(kind)) => Err(format!("expected a {kind} error, got {err}")),
            (Err(err), None) => Err(format!("evaluation failed: {err}")),
            (Ok(()), Some(kind)) => Err(format!("expected a {kind} error, but it succeeded")),
            (Ok(()), None) => Ok(false),
        }
    };
    let close = |a: &[f64], b: &[f64]| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| (x - y).abs() <= 1e-9 * x.abs().max(1.0))
    };
    match policy.hook {
        Hook::Admission => {
            let i: AdmissionInput = input(test)?;
            let r = eval::admission(policy, &i, &mut logs);
            let out = match r {
                Ok(o) => o,
                Err(err) => return check_err(&Err(err)).map(|_| ()),
            };
            check_err(&Ok(()))?;
            if let Some(allowed) = e.allowed {
                if out.allowed != allowed {
                    return Err(format!(
                        "expected allowed={allowed}, got allowed={} ({})",
                        out.allowed,
                        out.reason.unwrap_or_default()
                    ));
                }
            }
            if let Some(text) = &e.reason_contains {
                let reason = out.reason.unwrap_or_default();
                if !reason.contains(text.as_str()) {
                    return Err(format!(
                        "expected the reason to contain {text:?}, got {reason:?}"
                    ));
                }
            }
            if let Some(retryable) = e.retryable {
                if out.retryable.unwrap_or(true) != retryable {
                    return Err(format!("expected retryable={retryable}"));
                }
            }
            Ok(())
        }
        Hook::Weight => {
            let i: WeightInput = input(test)?;
            match eval::weight(policy, &i, &mut logs) {
                Err(err) => check_err(&Err(err)).map(|_| ()),
                Ok(scores) => {
                    check_err(&Ok(()))?;
                    match &e.scores {
                        Some(want) if !close(want, &scores) => {
                            Err(format!("expected scores {want:?}, got {scores:?}"))
                        }
                        _ => Ok(()),
                    }
                }
            }
        }
        Hook::FairShare => {
            let i: FairShareInput = input(test)?;
            match eval::fair_share(policy, &i, &mut logs) {
                Err(err) => check_err(&Err(err)).map(|_| ()),
                Ok(weights) => {
                    check_err(&Ok(()))?;
                    match &e.weights {
                        Some(want) if !close(want, &weights) => {
                            Err(format!("expected weights {want:?}, got {weights:?}"))
                        }
                        _ => Ok(()),
                    }
                }
            }
        }
        Hook::Autoscale => {
            let i: AutoscaleInput = input(test)?;
            match eval::autoscale(policy, &i, &mut logs) {
                Err(err) => check_err(&Err(err)).map(|_| ()),
                Ok(nodes) => {
                    check_err(&Ok(()))?;
                    match &e.nodes {
                        Some(want) if want != &nodes => {
                            Err(format!("expected nodes {want:?}, got {nodes:?}"))
                        }
                        _ => Ok(()),
                    }
                }
            }
        }
        Hook::Flavor => {
            let i: FlavorInput = input(test)?;
            match eval::flavor(policy, &i, &mut logs) {
                Err(err) => check_err(&Err(err)).map(|_| ()),
                Ok(flavors) => {
                    check_err(&Ok(()))?;
                    match &e.flavors {
                        Some(want) if want != &flavors => {
                            Err(format!("expected flavors {want:?}, got {flavors:?}"))
                        }
                        _ => Ok(()),
                    }
                }
            }
        }
    }
}
