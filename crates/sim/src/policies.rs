//! Running a scenario with a policy engine: the run itself, and the
//! report's `policies` section (bundles in force, evaluations, errors,
//! statistics, non-weight decisions) and decision log. Which bundles are in
//! force is decided in `arbiter_policy::sources`, given the Simulation's
//! `spec.policies` as the default platform bundles. The CLI and the tests
//! both come through here, so the golden report is what
//! `arbiter simulate --reproducible` writes. It never makes a scheduling
//! decision nor loads a bundle.

use arbiter_core::scheduler::hooks::DefaultHooks;
use arbiter_policy::bundle::Hook;
use arbiter_policy::engine::{Decision, Engine};

use super::driver::{self, Progress};
use super::report::{BundleReport, PoliciesReport, Report};
use super::scenario::Scenario;

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
        decisions_dropped: by_policy.iter().map(|s| s.decisions_dropped).sum(),
        log_lines_dropped: by_policy.iter().map(|s| s.log_lines_dropped).sum(),
        by_policy,
        decisions: decisions
            .iter()
            .filter(|d| d.hook != Hook::Weight || d.error.is_some())
            .cloned()
            .collect(),
    });
    (report, decisions)
}
