//! A bundle's own tests (`spec.tests`): each names a policy, gives the
//! hook's request (omitted fields take their defaults) and what the policy
//! must decide. Run by the loader before a bundle may be swapped in, and by
//! `arbiter policy test`. Evaluation goes through [`super::eval`], the path
//! the scheduler uses. A bundle's tests are bounded before any runs
//! ([`check_budget`]): at most [`MAX_TESTS`] (tenant [`MAX_TENANT_TESTS`]),
//! and the plugin calls they make may take at most [`TEST_BUDGET`] (tenant
//! [`TENANT_TEST_BUDGET`]) counted from each tested plugin's own deadline.

use std::time::Duration;

use serde::de::DeserializeOwned;

use super::compiled::{Bundle, Policy};
use super::eval::{self, PolicyError};
use super::spec::{Expect, TestSpec};
use super::text;
use super::view::*;
use super::wasm::Hook;

/// Most tests a platform bundle may have.
pub const MAX_TESTS: usize = 1_000;
/// Most tests a tenant bundle may have.
pub const MAX_TENANT_TESTS: usize = 200;
/// Most time a platform bundle's tests may spend in plugins, counted as the
/// sum of each WASM test's per-call deadline (`limits.timeoutMs`), so a
/// bundle is refused before any test runs, the same way on every machine.
pub const TEST_BUDGET: Duration = Duration::from_secs(30);
/// The same for a tenant bundle.
pub const TENANT_TEST_BUDGET: Duration = Duration::from_secs(2);

fn whose(tenant: bool) -> &'static str {
    if tenant {
        "a tenant bundle"
    } else {
        "a platform bundle"
    }
}

/// Why `count` tests are too many for a (tenant) bundle; `None` if they are not.
pub fn too_many(count: usize, tenant: bool) -> Option<String> {
    let max = if tenant { MAX_TENANT_TESTS } else { MAX_TESTS };
    (count > max).then(|| {
        format!(
            "spec.tests has {count} tests; {} may have at most {max}; keep one test per distinct case",
            whose(tenant)
        )
    })
}

/// Why a bundle's tests may not run: too many, or plugin tests that could
/// take longer than the budget. `None` when within both caps.
pub fn over_budget(bundle: &Bundle) -> Option<String> {
    let tenant = bundle.tenant.is_some();
    if let Some(message) = too_many(bundle.tests.len(), tenant) {
        return Some(message);
    }
    let budget = if tenant {
        TENANT_TEST_BUDGET
    } else {
        TEST_BUDGET
    };
    let (mut plugin_tests, mut worst) = (0usize, Duration::ZERO);
    for t in &bundle.tests {
        if let Some(policy) = bundle.policy(&t.policy) {
            if policy.language() == "wasm" {
                plugin_tests += 1;
                worst = worst.saturating_add(policy.limits.timeout);
            }
        }
    }
    (worst > budget).then(|| {
        format!(
            "spec.tests: its {plugin_tests} plugin tests may take up to {} ms (the sum of each tested policy's limits.timeoutMs); \
             {}'s tests may take at most {} ms; test fewer cases against plugins, or lower their limits.timeoutMs",
            worst.as_millis(),
            whose(tenant),
            budget.as_millis()
        )
    })
}

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
            // A failure quotes what the policy said: made safe to print.
            failure: match bundle.policy(&t.policy) {
                Some(policy) => run_one(policy, t)
                    .err()
                    .map(|f| text::clean(&f, text::MAX_ERROR_BYTES)),
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
    let to_json = |r: Result<serde_json::Value, PolicyError>| {
        r.map_err(|e| text::clean(&e.to_string(), text::MAX_ERROR_BYTES))
    };
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
        Hook::Placement => {
            let i: PlacementInput = input(&test)?;
            to_json(eval::placement(policy, &i, &mut logs).map(|o| serde_json::json!(o)))
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
        Hook::Placement => {
            let i: PlacementInput = input(test)?;
            match eval::placement(policy, &i, &mut logs) {
                Err(err) => check_err(&Err(err)).map(|_| ()),
                Ok(out) => {
                    check_err(&Ok(()))?;
                    match &e.scores {
                        Some(want) if !close(want, &out.scores) => {
                            Err(format!("expected scores {want:?}, got {:?}", out.scores))
                        }
                        _ => Ok(()),
                    }
                }
            }
        }
    }
}
