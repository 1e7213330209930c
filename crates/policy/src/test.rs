//! A bundle's own tests (`spec.tests`): each names a policy, gives the
//! hook's request (omitted fields take their defaults) and what the policy
//! must decide. Run by the loader before a bundle may be swapped in, and by
//! `arbiter policy test`. Evaluation goes through [`super::eval`], the path
//! the scheduler uses; each hook's descriptor (`hooks`) reads the request
//! and checks the answer. A bundle's tests are bounded before any runs
//! ([`check_budget`]): at most [`MAX_TESTS`] (tenant [`MAX_TENANT_TESTS`]),
//! and the plugin calls they make may take at most [`TEST_BUDGET`] (tenant
//! [`TENANT_TEST_BUDGET`]) counted from each tested plugin's own deadline.

use std::time::Duration;

use super::compiled::{Bundle, Policy};
use super::hooks;
use super::spec::TestSpec;
use super::text;

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

/// Evaluates `policy` on a JSON request as the hook would; the result as JSON.
pub fn evaluate(policy: &Policy, request: &serde_json::Value) -> Result<serde_json::Value, String> {
    (hooks::descriptor(policy.hook).evaluate_json)(policy, request)
}

/// One test of `policy`, checked the way its hook's descriptor says.
fn run_one(policy: &Policy, test: &TestSpec) -> Result<(), String> {
    (hooks::descriptor(policy.hook).run_test)(policy, test)
}
