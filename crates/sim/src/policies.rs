//! Running a scenario with policy bundles: which bundles are in force (the
//! Simulation's `spec.policies`, or the command line's), loading them into
//! the engine, and the report's `policies` section and decision log.
//! The CLI and the tests both come through here, so the golden report is
//! what `arbiter simulate --reproducible` writes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use arbiter_core::scheduler::hooks::DefaultHooks;
use arbiter_policy::bundle::{self, BundleError, Hook, LoadOptions};
use arbiter_policy::engine::{Decision, Engine};
use arbiter_policy::wasm::Runtime;

use super::driver::{self, Progress};
use super::report::{BundleReport, PoliciesReport, Report};
use super::scenario::Scenario;

/// Which bundles a run uses.
#[derive(Clone, Debug, Default)]
pub struct PolicyChoice {
    /// Platform bundles; `None`: those the Simulation names.
    pub platform: Option<Vec<PathBuf>>,
    /// Tenant bundles: namespace → bundle.
    pub tenants: Vec<(String, PathBuf)>,
    /// No bundles at all (Kueue's behaviour).
    pub none: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PolicySetupError {
    #[error("starting the WebAssembly runtime: {0}")]
    Runtime(String),
    #[error("loading the policy bundle {path}: {error}")]
    Bundle { path: String, error: BundleError },
    #[error(
        "{path} is the tenant bundle of {tenant}; pass it as --tenant-policies {tenant}={path}"
    )]
    TenantAsPlatform { path: String, tenant: String },
    #[error("two tenant bundles for {0}; give one bundle per tenant")]
    DuplicateTenant(String),
}

/// The engine for a run, or `None` when no bundle is in force.
pub fn engine(
    scenario: &Scenario,
    choice: &PolicyChoice,
) -> Result<Option<Engine>, PolicySetupError> {
    let platform: &[PathBuf] = match (&choice.platform, choice.none) {
        (_, true) => &[],
        (Some(paths), false) => paths,
        (None, false) => &scenario.policies,
    };
    if platform.is_empty() && choice.tenants.is_empty() {
        return Ok(None);
    }
    let runtime = Runtime::new().map_err(|e| PolicySetupError::Runtime(e.to_string()))?;
    let mut bundles = Vec::new();
    for path in platform {
        let shown = path.display().to_string();
        let b = bundle::load_path(path, &runtime, &LoadOptions::default()).map_err(|error| {
            PolicySetupError::Bundle {
                path: shown.clone(),
                error,
            }
        })?;
        if let Some(tenant) = &b.tenant {
            return Err(PolicySetupError::TenantAsPlatform {
                path: shown,
                tenant: tenant.clone(),
            });
        }
        bundles.push(b);
    }
    let mut tenants = BTreeMap::new();
    for (ns, path) in &choice.tenants {
        let options = LoadOptions {
            tenant: Some(ns.clone()),
            run_tests: true,
        };
        let b = bundle::load_path(path, &runtime, &options).map_err(|error| {
            PolicySetupError::Bundle {
                path: path.display().to_string(),
                error,
            }
        })?;
        if tenants.insert(ns.clone(), b).is_some() {
            return Err(PolicySetupError::DuplicateTenant(ns.clone()));
        }
    }
    Ok(Some(Engine::fixed(bundles, tenants)))
}

/// Runs the scenario with the engine (or Kueue's behaviour without one) and
/// returns the report and every decision. `reproducible` zeroes the measured
/// fields (CPU seconds, policy latencies).
pub fn run(
    scenario: &Scenario,
    engine: Option<&mut Engine>,
    reproducible: bool,
    progress: &mut dyn FnMut(Progress),
) -> (Report, Vec<Decision>) {
    let Some(engine) = engine else {
        let mut report = driver::run(scenario, &mut DefaultHooks, progress);
        if reproducible {
            report.scheduler.cpu_seconds = 0.0;
        }
        return (report, Vec::new());
    };
    let mut report = driver::run(scenario, engine, progress);
    let mut decisions = engine.take_decisions();
    let mut by_policy: Vec<_> = engine.stats().cloned().collect();
    if reproducible {
        report.scheduler.cpu_seconds = 0.0;
        for d in &mut decisions {
            d.duration_micros = 0.0;
        }
        for s in &mut by_policy {
            s.total_micros = 0.0;
            s.max_micros = 0.0;
            s.latency_micros.clear();
        }
    }
    report.policies = Some(PoliciesReport {
        bundles: engine
            .bundles()
            .iter()
            .map(|b| BundleReport {
                name: b.name.clone(),
                version: b.version.clone(),
                digest: b.digest.clone(),
                tenant: b.tenant.clone(),
                source: b.source.clone(),
            })
            .collect(),
        evaluations: engine.evaluations(),
        errors: engine.errors(),
        by_policy,
        decisions: decisions
            .iter()
            .filter(|d| d.hook != Hook::Weight || d.error.is_some())
            .cloned()
            .collect(),
    });
    (report, decisions)
}
