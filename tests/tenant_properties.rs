//! Tenant isolation (docs/design.md §3, README "Tenant bundles") proven over random
//! multi-tenant scenarios: ClusterQueues of either queueing strategy, with
//! preemption, a cohort with borrowing and reclaim, fair sharing, node pools
//! and partial admission; three namespaces; workloads of random sizes,
//! priorities, arrival times and tenant scores. They run through the real
//! `Scheduler` (a small driver below: arrivals, finishes at their runtimes,
//! withdrawals), with a `Hooks` that answers for one tenant as its bundle
//! would — scores into the tenant score, denials naming the tenant (a tenant
//! plugin failing under `failurePolicy: Fail` gives the same verdict):
//!
//! - equal runtimes: with a tenant's scores no other tenant's workload is
//!   admitted later — nor at any other time — than without them, and the
//!   tenant's own workloads of each demand are admitted at the same times;
//! - random runtimes: every waiting or admitted workload holds its own queue
//!   position or one of its tenant's whose workload asks the same, so a
//!   tenant never jumps another; in a StrictFIFO queue of one burst the
//!   admissions come in the same order of namespaces and demands as without
//!   the scores;
//! - random runtimes, both strategies: from its tenant's first denial on, a
//!   denied workload blocks nobody — the run is the one in which it was
//!   withdrawn at that instant.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use arbiter_core::model::Millis;
use arbiter_core::scheduler::hooks::{
    AdmissionRequest, AdmissionVerdict, DefaultHooks, Hooks, Weight, WeightRequest,
};
use arbiter_core::scheduler::intake::{intake, Intake};
use arbiter_core::scheduler::{Input, Scheduler, Status, WorkloadId};
use arbiter_sim::scenario::{self, Scenario};
use proptest::prelude::*;

// ---------------------------------------------------------------- generation

/// Pod-set shapes (count, GPUs per pod, CPUs per pod, minCount): few, so
/// that a tenant often has several workloads asking the same.
const SHAPES: [(u32, u32, u32, Option<u32>); 5] = [
    (1, 1, 1, None),
    (1, 4, 2, None),
    (2, 2, 1, None),
    (2, 2, 1, Some(1)),
    (1, 2, 4, None),
];

const TENANTS: usize = 3;

#[derive(Clone, Debug)]
struct CqGen {
    strict: bool,
    within: &'static str,
    reclaim: &'static str,
    cohort: bool,
    fair: bool,
    gpu: u32,
    cpu: u32,
    borrowing: Option<u32>,
    /// GPU quota of a second flavor, if the queue lists one.
    second: Option<u32>,
}

#[derive(Clone, Debug)]
struct JobGen {
    tenant: usize,
    cq: usize,
    arrival: u32,
    priority: i32,
    shape: usize,
    runtime: u32,
    score: i8,
    denied: bool,
}

#[derive(Clone, Debug)]
struct Gen {
    pools: bool,
    cqs: Vec<CqGen>,
    jobs: Vec<JobGen>,
}

fn cluster_queue() -> impl Strategy<Value = CqGen> {
    (
        any::<bool>(),
        prop::sample::select(vec!["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
        prop::sample::select(vec!["Never", "LowerPriority", "Any"]),
        prop::bool::weighted(0.6),
        prop::bool::weighted(0.3),
        2u32..=10,
        4u32..=16,
        prop::option::of(0u32..=6),
        prop::option::weighted(0.3, 2u32..=6),
    )
        .prop_map(
            |(strict, within, reclaim, cohort, fair, gpu, cpu, borrowing, second)| CqGen {
                strict,
                within,
                reclaim,
                cohort,
                fair,
                gpu,
                cpu,
                borrowing,
                second,
            },
        )
}

fn job() -> impl Strategy<Value = JobGen> {
    (
        0..TENANTS,
        0usize..3,
        prop::sample::select(vec![0u32, 0, 0, 10, 30, 90]),
        prop::sample::select(vec![0i32, 0, 1]),
        0..SHAPES.len(),
        20u32..=300,
        any::<i8>(),
        prop::bool::weighted(0.3),
    )
        .prop_map(
            |(tenant, cq, arrival, priority, shape, runtime, score, denied)| JobGen {
                tenant,
                cq,
                arrival,
                priority,
                shape,
                runtime,
                score,
                denied,
            },
        )
}

fn scenario_gen() -> impl Strategy<Value = Gen> {
    (
        prop::bool::weighted(0.4),
        prop::collection::vec(cluster_queue(), 1..=3),
        prop::collection::vec(job(), 2..=16),
    )
        .prop_map(|(pools, cqs, jobs)| Gen { pools, cqs, jobs })
}

impl Gen {
    fn yaml(&self) -> String {
        let mut y = String::new();
        let gpu = "nvidia.com/gpu";
        for f in ["f0", "f1"] {
            let _ = writeln!(
                y,
                "---\napiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {{name: {f}}}"
            );
        }
        y.push_str("---\napiVersion: sim.arbiter.dev/v1alpha1\nkind: Simulation\nmetadata: {name: prop}\nspec:\n");
        if self.pools {
            let _ = writeln!(
                y,
                "  nodePools:\n  - {{flavor: f0, nodes: 2, allocatable: {{{gpu}: \"8\", cpu: \"16\"}}}}\n  \
                 - {{flavor: f1, nodes: 1, allocatable: {{{gpu}: \"4\", cpu: \"16\"}}}}"
            );
        } else {
            y.push_str("  fairSharing: {enabled: false}\n");
        }
        for (i, cq) in self.cqs.iter().enumerate() {
            let _ = writeln!(
                y,
                "---\napiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {{name: cq{i}}}\nspec:\n  \
                 queueingStrategy: {}\n  preemption: {{withinClusterQueue: {}, reclaimWithinCohort: {}}}",
                if cq.strict {
                    "StrictFIFO"
                } else {
                    "BestEffortFIFO"
                },
                cq.within,
                cq.reclaim
            );
            if cq.cohort {
                y.push_str("  cohort: c0\n");
                if cq.fair {
                    y.push_str("  scheduling: {algorithm: fair-sharing}\n");
                }
            }
            let borrowing = match (cq.cohort, cq.borrowing) {
                (true, Some(b)) => format!(", borrowingLimit: \"{b}\""),
                _ => String::new(),
            };
            let _ = writeln!(
                y,
                "  resourceGroups:\n  - coveredResources: [cpu, {gpu}]\n    flavors:\n    - name: f0\n      \
                 resources:\n      - {{name: cpu, nominalQuota: \"{}\"}}\n      - {{name: {gpu}, nominalQuota: \"{}\"{borrowing}}}",
                cq.cpu, cq.gpu
            );
            if let Some(second) = cq.second {
                let _ = writeln!(
                    y,
                    "    - name: f1\n      resources:\n      - {{name: cpu, nominalQuota: \"16\"}}\n      \
                     - {{name: {gpu}, nominalQuota: \"{second}\"}}"
                );
            }
            for t in 0..TENANTS {
                let _ = writeln!(
                    y,
                    "---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {{name: q{i}, namespace: t{t}}}\nspec: {{clusterQueue: cq{i}}}"
                );
            }
        }
        for (j, job) in self.jobs.iter().enumerate() {
            let (count, gpus, cpus, min) = SHAPES[job.shape];
            let min = min.map_or(String::new(), |m| format!(", minCount: {m}"));
            let _ = writeln!(
                y,
                "---\napiVersion: arbiter.dev/v1alpha1\nkind: Workload\nmetadata: {{name: w{j}, namespace: t{}}}\n\
                 spec:\n  queueName: q{}\n  priority: {}\n  podSets:\n  \
                 - {{name: main, count: {count}{min}, requests: {{cpu: \"{cpus}\", {gpu}: \"{gpus}\"}}}}",
                job.tenant,
                job.cq % self.cqs.len(),
                job.priority
            );
        }
        y
    }

    /// What the scheduler sees of job `j` besides its identity: its queue, priority and shape.
    fn demand(&self, j: usize) -> (usize, i32, usize) {
        let job = &self.jobs[j];
        (job.cq % self.cqs.len(), job.priority, job.shape)
    }
}

fn build(gen: &Gen) -> Result<Scenario, TestCaseError> {
    let yaml = gen.yaml();
    let loaded = arbiter_core::model::load::load_str(&yaml, Path::new("prop.yaml"))
        .map_err(|e| TestCaseError::fail(format!("load: {e}\n{yaml}")))?;
    prop_assert!(
        loaded.warnings.is_empty(),
        "generated YAML has unknown fields: {:?}",
        loaded.warnings
    );
    let scenario =
        scenario::build(loaded).map_err(|e| TestCaseError::fail(format!("build: {e}\n{yaml}")))?;
    prop_assert_eq!(scenario.jobs.len(), gen.jobs.len());
    Ok(scenario)
}

// ---------------------------------------------------------------- the tenant's bundle

/// Answers for namespaces as their tenant bundles would: a tenant score for
/// each workload of `scoring`, a tenant's denial for each workload named in
/// `denied`; everything else as Kueue. Records when each denied workload
/// was first asked about.
#[derive(Default)]
struct Tenants {
    scoring: BTreeSet<String>,
    scores: BTreeMap<String, f64>,
    denied: BTreeSet<String>,
    first_denial: BTreeMap<String, Millis>,
}

impl Tenants {
    fn scoring(gen: &Gen, tenants: &[usize]) -> Tenants {
        Tenants {
            scoring: tenants.iter().map(|t| format!("t{t}")).collect(),
            scores: (0..gen.jobs.len())
                .map(|j| (format!("w{j}"), gen.jobs[j].score as f64))
                .collect(),
            ..Tenants::default()
        }
    }
}

impl Hooks for Tenants {
    fn weight(&mut self, batch: &[WeightRequest<'_>]) -> Vec<Weight> {
        batch
            .iter()
            .map(|r| {
                let w = &r.entry.workload;
                Weight {
                    score: 0.0,
                    tenant: self
                        .scoring
                        .contains(&w.namespace)
                        .then(|| self.scores[&w.name]),
                }
            })
            .collect()
    }

    fn admission(&mut self, r: &AdmissionRequest<'_>) -> AdmissionVerdict {
        let w = &r.entry.workload;
        if !self.denied.contains(&w.name) {
            return AdmissionVerdict::Allow;
        }
        self.first_denial.entry(w.name.clone()).or_insert(r.now);
        AdmissionVerdict::Deny {
            policy: "tenant-hold".into(),
            reason: "the tenant holds it".into(),
            retryable: true,
            tenant: Some(w.namespace.clone()),
        }
    }
}

// ---------------------------------------------------------------- driving

/// What a run decided: per job, the times it was admitted; every admission
/// in the order taken (job indices).
#[derive(Debug, Default)]
struct RunDecisions {
    admissions: Vec<Vec<Millis>>,
    order: Vec<usize>,
}

/// Runs the scenario through the scheduler: job `j` arrives at its arrival
/// time (unless in `absent`), runs for `runtime(j)` once admitted, and is
/// withdrawn at `withdraw[j]` if given. `observe` sees the scheduler after
/// every cycle.
fn drive(
    scenario: &Scenario,
    gen: &Gen,
    hooks: &mut dyn Hooks,
    runtime: &dyn Fn(usize) -> Millis,
    absent: &BTreeSet<usize>,
    withdraw: &BTreeMap<usize, Millis>,
    observe: &mut dyn FnMut(&Scheduler),
) -> Result<RunDecisions, TestCaseError> {
    let pools: Vec<_> = scenario.pools.iter().map(|p| p.spec.clone()).collect();
    let mut scheduler = Scheduler::new(scenario.cluster.clone(), &pools);
    let n = gen.jobs.len();
    let mut outcome = RunDecisions {
        admissions: vec![Vec::new(); n],
        order: Vec::new(),
    };
    let mut arrivals: Vec<usize> = (0..n).filter(|j| !absent.contains(j)).collect();
    arrivals.sort_by_key(|&j| (gen.jobs[j].arrival, j));
    let mut next = 0;
    let mut id_of: Vec<Option<WorkloadId>> = vec![None; n];
    let mut job_of: BTreeMap<WorkloadId, usize> = BTreeMap::new();
    // (at, admission number, workload, epoch)
    let mut finishes: BTreeSet<(Millis, usize, WorkloadId, u32)> = BTreeSet::new();
    let mut withdrawals: BTreeSet<(Millis, usize)> =
        withdraw.iter().map(|(&j, &t)| (t, j)).collect();
    let mut wake: Option<Millis> = None;
    for steps in 0.. {
        prop_assert!(steps < 5_000, "the run does not end");
        let arrival = arrivals
            .get(next)
            .map(|&j| Millis::from_secs(gen.jobs[j].arrival as i64));
        let candidates = [
            arrival,
            finishes.first().map(|f| f.0),
            withdrawals.first().map(|w| w.0),
            wake,
        ];
        let Some(now) = candidates.into_iter().flatten().min() else {
            break;
        };
        let mut inputs = Vec::new();
        let mut submitted = Vec::new();
        while let Some(&j) = arrivals.get(next) {
            if Millis::from_secs(gen.jobs[j].arrival as i64) > now {
                break;
            }
            next += 1;
            let job = &scenario.jobs[j];
            match intake(&scenario.cluster, &job.info, job.explicit_priority) {
                Intake::Queued(w) => inputs.push(Input::Submit(w)),
                other => prop_assert!(false, "w{} not queued: {:?}", j, other),
            }
            submitted.push(j);
        }
        while let Some(&(at, _, id, epoch)) = finishes.first() {
            if at > now {
                break;
            }
            finishes.pop_first();
            let entry = scheduler.entry(id);
            if entry.epoch == epoch && entry.status == Status::Admitted {
                inputs.push(Input::Finish(id));
            }
        }
        while let Some(&(at, j)) = withdrawals.first() {
            if at > now {
                break;
            }
            withdrawals.pop_first();
            let id = id_of[j];
            prop_assert!(id.is_some(), "w{} is withdrawn before it arrived", j);
            inputs.extend(id.map(Input::Withdraw));
        }
        let step = scheduler.step_observed(now, inputs, hooks, observe);
        for (&j, &id) in submitted.iter().zip(&step.submitted) {
            id_of[j] = Some(id);
            job_of.insert(id, j);
        }
        for event in &step.events {
            if let arbiter_core::scheduler::Event::Admitted { workload } = event {
                let j = job_of[workload];
                outcome.admissions[j].push(now);
                outcome.order.push(j);
                let epoch = scheduler.entry(*workload).epoch;
                finishes.insert((
                    now.saturating_add(runtime(j)),
                    outcome.order.len(),
                    *workload,
                    epoch,
                ));
            }
        }
        wake = step.next_wake;
    }
    Ok(outcome)
}

fn equal_runtimes(_: usize) -> Millis {
    Millis::from_secs(60)
}

/// Every waiting or admitted workload holds its own queue position, or that
/// of a workload of its own tenant asking the same: a tenant never takes a
/// position from another tenant, nor one that asks for something else.
fn positions_are_the_tenants_own(scheduler: &Scheduler) -> Result<(), String> {
    let owners: BTreeMap<u64, usize> = scheduler
        .entries()
        .iter()
        .enumerate()
        .map(|(i, e)| (e.seq.0, i))
        .collect();
    for entry in scheduler.entries() {
        if !matches!(
            entry.status,
            Status::Queued | Status::Inadmissible | Status::Admitted
        ) || entry.slot.seq == entry.seq
        {
            continue;
        }
        let w = &entry.workload;
        let Some(&owner) = owners.get(&entry.slot.seq.0) else {
            return Err(format!(
                "{}/{} holds a position nobody owns",
                w.namespace, w.name
            ));
        };
        let o = &scheduler.entries()[owner].workload;
        if o.namespace != w.namespace || !o.asks_same_as(w) {
            return Err(format!(
                "{}/{} ({:?}, priority {}) holds the queue position of {}/{} ({:?}, priority {})",
                w.namespace,
                w.name,
                w.pod_sets,
                w.priority,
                o.namespace,
                o.name,
                o.pod_sets,
                o.priority
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Equal runtimes: tenant t0's scores change no other tenant's admission
    /// times, and the times at which t0's workloads of each demand start.
    #[test]
    fn with_equal_runtimes_a_tenants_scores_admit_nobody_else_later(gen in scenario_gen()) {
        let scenario = build(&gen)?;
        let none = BTreeSet::new();
        let no_withdrawals = BTreeMap::new();
        let without = drive(&scenario, &gen, &mut DefaultHooks, &equal_runtimes, &none, &no_withdrawals, &mut |_| {})?;
        let mut bundle = Tenants::scoring(&gen, &[0]);
        let with = drive(&scenario, &gen, &mut bundle, &equal_runtimes, &none, &no_withdrawals, &mut |_| {})?;
        for j in (0..gen.jobs.len()).filter(|&j| gen.jobs[j].tenant != 0) {
            let (a, b) = (&without.admissions[j], &with.admissions[j]);
            for (before, after) in a.iter().zip(b) {
                prop_assert!(after <= before, "t{}/w{} admitted at {} instead of {}\n{}", gen.jobs[j].tenant, j, after, before, gen.yaml());
            }
            prop_assert_eq!(a, b, "t{}/w{}'s admissions changed\n{}", gen.jobs[j].tenant, j, gen.yaml());
        }
        // t0's own admissions, as the times each demand started: which of
        // t0's interchangeable workloads a preemption picks, and so which one
        // is admitted again later, may differ; when they start may not.
        let own = |o: &RunDecisions| {
            let mut times: Vec<_> = (0..gen.jobs.len())
                .filter(|&j| gen.jobs[j].tenant == 0)
                .flat_map(|j| {
                    let demand = gen.demand(j);
                    o.admissions[j].iter().map(move |t| (demand, *t))
                })
                .collect();
            times.sort();
            times
        };
        prop_assert_eq!(own(&without), own(&with), "t0's positions were admitted at other times\n{}", gen.yaml());
    }

    /// Random runtimes, every tenant scoring: at every point each position
    /// is held by its owner or by a workload of the owner's tenant asking the same.
    #[test]
    fn a_tenant_never_takes_a_position_that_is_not_its_own(gen in scenario_gen()) {
        let scenario = build(&gen)?;
        let mut bundle = Tenants::scoring(&gen, &[0, 1, 2]);
        let mut broken: Option<String> = None;
        let runtime = |j: usize| Millis::from_secs(gen.jobs[j].runtime as i64);
        drive(&scenario, &gen, &mut bundle, &runtime, &BTreeSet::new(), &BTreeMap::new(), &mut |s| {
            if broken.is_none() {
                broken = positions_are_the_tenants_own(s).err();
            }
        })?;
        prop_assert!(broken.is_none(), "{}\n{}", broken.unwrap_or_default(), gen.yaml());
    }

    /// Random runtimes, one StrictFIFO queue without preemption, one burst:
    /// t0's scores leave the order of admissions — by namespace and demand — as it was.
    #[test]
    fn in_a_strict_fifo_burst_a_tenant_never_jumps_another(mut gen in scenario_gen()) {
        gen.cqs.truncate(1);
        gen.cqs[0].strict = true;
        gen.cqs[0].within = "Never";
        gen.cqs[0].cohort = false;
        for job in &mut gen.jobs {
            job.arrival = 0;
        }
        let scenario = build(&gen)?;
        let runtime = |j: usize| Millis::from_secs(gen.jobs[j].runtime as i64);
        let none = BTreeSet::new();
        let no_withdrawals = BTreeMap::new();
        let without = drive(&scenario, &gen, &mut DefaultHooks, &runtime, &none, &no_withdrawals, &mut |_| {})?;
        let mut bundle = Tenants::scoring(&gen, &[0]);
        let with = drive(&scenario, &gen, &mut bundle, &runtime, &none, &no_withdrawals, &mut |_| {})?;
        let order = |o: &RunDecisions| -> Vec<(usize, (usize, i32, usize))> {
            o.order.iter().map(|&j| (gen.jobs[j].tenant, gen.demand(j))).collect()
        };
        prop_assert_eq!(order(&without), order(&with), "\n{}", gen.yaml());
        for j in (0..gen.jobs.len()).filter(|&j| gen.jobs[j].tenant != 0) {
            prop_assert_eq!(
                without.admissions[j].is_empty(),
                with.admissions[j].is_empty(),
                "w{} admitted in one run only\n{}", j, gen.yaml()
            );
        }
    }

}

proptest! {
    // More cases: a denial that changes something for others needs a denied
    // workload that is tried again when it no longer fits.
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random runtimes, independent ClusterQueues of both strategies: once
    /// its tenant denied it, a workload changes nothing for anyone — the run
    /// is the one where it was withdrawn at its first denial.
    #[test]
    fn a_tenant_denied_workload_blocks_nobody(mut gen in scenario_gen()) {
        for cq in &mut gen.cqs {
            cq.cohort = false;
        }
        // Node pools are shared between ClusterQueues: with one queue only.
        gen.pools &= gen.cqs.len() == 1;
        let scenario = build(&gen)?;
        let runtime = |j: usize| Millis::from_secs(gen.jobs[j].runtime as i64);
        let denied: BTreeSet<usize> = (0..gen.jobs.len())
            .filter(|&j| gen.jobs[j].tenant == 0 && gen.jobs[j].denied)
            .collect();
        let mut bundle = Tenants {
            denied: denied.iter().map(|j| format!("w{j}")).collect(),
            ..Tenants::default()
        };
        let with = drive(&scenario, &gen, &mut bundle, &runtime, &BTreeSet::new(), &BTreeMap::new(), &mut |_| {})?;
        for &j in &denied {
            prop_assert!(with.admissions[j].is_empty(), "denied w{} was admitted", j);
        }
        // Withdrawn at its first denial; never submitted if that was when it arrived.
        let mut absent = BTreeSet::new();
        let mut withdraw = BTreeMap::new();
        for &j in &denied {
            if let Some(&at) = bundle.first_denial.get(&format!("w{j}")) {
                if at == Millis::from_secs(gen.jobs[j].arrival as i64) {
                    absent.insert(j);
                } else {
                    withdraw.insert(j, at);
                }
            }
        }
        let without = drive(&scenario, &gen, &mut DefaultHooks, &runtime, &absent, &withdraw, &mut |_| {})?;
        for j in (0..gen.jobs.len()).filter(|j| !denied.contains(j)) {
            prop_assert_eq!(
                &with.admissions[j], &without.admissions[j],
                "t{}/w{}: admissions differ with the denial (first denials {:?})\n{}",
                gen.jobs[j].tenant, j, bundle.first_denial, gen.yaml()
            );
        }
    }
}
