//! Property tests for the invariants of docs/design.md §3. Random small clusters
//! (1–3 flavors, 1–2 cohorts, 2–5 ClusterQueues with random quotas, limits,
//! preemption and queueing policies, optional node pools) and random
//! workload streams are written as YAML, loaded and built the way
//! `arbiter simulate` does, then driven through the simulator's own step
//! loop (`sim::driver::run_with`) with an observer, so the state can be
//! checked after every cycle:
//!
//! - a ClusterQueue never uses more than nominal + borrowingLimit;
//! - a cohort never lends more than its subtree has;
//! - no node holds more than its allocatable, and every pod is placed;
//! - no card of a device resource (`example.com/gpu-milli` on pools that
//!   declare it per card) holds more than one card, and every admitted pod
//!   asking it holds exactly its request of cards;
//! - no workload is lost: each ends in one state, and none that would fit
//!   an empty cluster is left pending once the cluster is idle;
//! - the same scenario gives the same report, byte for byte.
//!
//! The checks recompute quota and capacity from the admissions and the
//! configuration (an oracle independent of `core::quota`), and compare
//! with what the scheduler reports.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

use arbiter_core::model::api::QueueingStrategy;
use arbiter_core::model::cluster::{Cluster, ClusterQueueId, CohortId, FlavorId, FlavorResource};
use arbiter_core::model::{Amount, Millis};
use arbiter_core::scheduler::capacity::PoolSpec;
use arbiter_core::scheduler::hooks::{DefaultHooks, Hooks, Weight, WeightRequest};
use arbiter_core::scheduler::intake::{intake, Intake};
use arbiter_core::scheduler::{Entry, Input, Scheduler, Status, Step, WorkloadId};
use arbiter_sim::driver::{self, Observer};
use arbiter_sim::scenario::{self, Scenario};
use proptest::prelude::*;

// ---------------------------------------------------------------- generation

#[derive(Clone, Debug)]
struct PoolGen {
    nodes: u32,
    gpus: u32,
    cpus: u32,
    /// `example.com/gpu-milli` held per card (a device), not as one number.
    shared: bool,
}

#[derive(Clone, Debug)]
struct QuotaGen {
    gpu: u32,
    cpu: u32,
    borrowing: Option<u32>,
    lending: Option<u32>,
}

#[derive(Clone, Debug)]
struct CqGen {
    cohort: Option<usize>,
    strict: bool,
    within: &'static str,
    reclaim: &'static str,
    when_can_borrow: &'static str,
    when_can_preempt: &'static str,
    fair_sharing: bool,
    weight: u32,
    /// Per flavor slot: (sort key, quota); `None` where the queue does not list the flavor.
    flavors: Vec<Option<(u8, QuotaGen)>>,
    retry: Option<(u32, u32)>,
    reclaim_timeout: Option<u32>,
}

#[derive(Clone, Debug)]
struct PodSetGen {
    count: u32,
    gpu: u32,
    cpu: u32,
    /// `example.com/gpu-milli` per pod: a share of a card, whole cards, or 0.
    milli: u32,
}

#[derive(Clone, Debug)]
struct JobGen {
    cq: usize,
    arrival: u32,
    runtime: u32,
    priority: i32,
    pod_sets: Vec<PodSetGen>,
    /// Also asks for a resource no ClusterQueue covers.
    uncovered: bool,
}

#[derive(Clone, Debug)]
struct ScenarioGen {
    pools: Vec<Option<PoolGen>>,
    cohorts: usize,
    nested: bool,
    cohort_gpus: Option<u32>,
    /// The second cohort's `fairSharing.weight` (hierarchical fair sharing).
    cohort_weight: Option<u32>,
    global_fair: bool,
    cqs: Vec<CqGen>,
    jobs: Vec<JobGen>,
}

fn pool() -> impl Strategy<Value = PoolGen> {
    (
        1u32..=3,
        prop::sample::select(vec![2u32, 4, 8]),
        prop::sample::select(vec![16u32, 32, 64]),
        prop::bool::weighted(0.7),
    )
        .prop_map(|(nodes, gpus, cpus, shared)| PoolGen {
            nodes,
            gpus,
            cpus,
            shared,
        })
}

fn quota() -> impl Strategy<Value = QuotaGen> {
    (
        0u32..=12,
        0u32..=48,
        prop::option::of(0u32..=8),
        prop::option::of(0u32..=12),
    )
        .prop_map(|(gpu, cpu, borrowing, lending)| QuotaGen {
            gpu,
            cpu,
            borrowing,
            lending: lending.map(|l| l.min(gpu)),
        })
}

fn cluster_queue() -> impl Strategy<Value = CqGen> {
    (
        (
            prop::option::of(0usize..2),
            any::<bool>(),
            prop::sample::select(vec!["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
            prop::sample::select(vec!["Never", "LowerPriority", "Any"]),
            prop::sample::select(vec!["MayStopSearch", "TryNextFlavor", "Borrow"]),
            prop::sample::select(vec!["MayStopSearch", "TryNextFlavor", "Preempt"]),
        ),
        (
            prop::bool::weighted(0.25),
            0u32..=3,
            prop::collection::vec(prop::option::of((any::<u8>(), quota())), 3),
            prop::option::weighted(0.2, (0u32..=2, 1u32..=60)),
            prop::option::weighted(0.15, 30u32..=300),
        ),
    )
        .prop_map(
            |(
                (cohort, strict, within, reclaim, when_can_borrow, when_can_preempt),
                (fair_sharing, weight, flavors, retry, reclaim_timeout),
            )| CqGen {
                cohort,
                strict,
                within,
                reclaim,
                when_can_borrow,
                when_can_preempt,
                fair_sharing,
                weight,
                flavors,
                retry,
                reclaim_timeout,
            },
        )
}

fn job() -> impl Strategy<Value = JobGen> {
    (
        0usize..5,
        0u32..=600,
        1u32..=400,
        -3i32..=3,
        prop::collection::vec(
            (
                1u32..=4,
                0u32..=4,
                1u32..=8,
                prop_oneof![
                    3 => Just(0u32),
                    3 => (1u32..=9).prop_map(|tenths| tenths * 100),
                    1 => Just(1000u32),
                    1 => Just(2000u32),
                ],
            )
                .prop_map(|(count, gpu, cpu, milli)| PodSetGen {
                    count,
                    gpu,
                    cpu,
                    milli,
                }),
            1..=2,
        ),
        prop::bool::weighted(0.05),
    )
        .prop_map(
            |(cq, arrival, runtime, priority, pod_sets, uncovered)| JobGen {
                cq,
                arrival,
                runtime,
                priority,
                pod_sets,
                uncovered,
            },
        )
}

fn scenario_gen() -> impl Strategy<Value = ScenarioGen> {
    (
        prop::collection::vec(prop::option::of(pool()), 1..=3),
        1usize..=2,
        any::<bool>(),
        prop::option::weighted(0.3, 1u32..=8),
        prop::option::weighted(0.3, 0u32..=3),
        prop::bool::weighted(0.2),
        prop::collection::vec(cluster_queue(), 2..=5),
        prop::collection::vec(job(), 1..=30),
    )
        .prop_map(
            |(pools, cohorts, nested, cohort_gpus, cohort_weight, global_fair, cqs, jobs)| {
                ScenarioGen {
                    pools,
                    cohorts,
                    nested,
                    cohort_gpus,
                    cohort_weight,
                    global_fair,
                    cqs,
                    jobs,
                }
            },
        )
}

// ---------------------------------------------------------------- YAML

const GPU: &str = "nvidia.com/gpu";
/// GPUs shared by fractions: 1000 per card.
const MILLI: &str = "example.com/gpu-milli";

impl ScenarioGen {
    /// The flavors a ClusterQueue lists, in its order (never empty).
    fn flavors_of(&self, cq: &CqGen) -> Vec<(usize, QuotaGen)> {
        let mut listed: Vec<(u8, usize, QuotaGen)> = cq
            .flavors
            .iter()
            .enumerate()
            .take(self.pools.len())
            .filter_map(|(f, q)| q.clone().map(|(key, q)| (key, f, q)))
            .collect();
        listed.sort_by_key(|(key, f, _)| (*key, *f));
        let mut flavors: Vec<(usize, QuotaGen)> =
            listed.into_iter().map(|(_, f, q)| (f, q)).collect();
        if flavors.is_empty() {
            flavors.push((
                0,
                QuotaGen {
                    gpu: 4,
                    cpu: 16,
                    borrowing: None,
                    lending: None,
                },
            ));
        }
        flavors
    }

    fn yaml(&self) -> String {
        let mut y = String::new();
        let doc = |y: &mut String| y.push_str("---\n");
        let mut sim = String::from(
            "apiVersion: sim.arbiter.dev/v1alpha1\nkind: Simulation\nmetadata: {name: prop}\nspec:\n",
        );
        let _ = writeln!(sim, "  fairSharing: {{enabled: {}}}", self.global_fair);
        if self.pools.iter().any(Option::is_some) {
            sim.push_str("  nodePools:\n");
        }
        for (f, pool) in self.pools.iter().enumerate() {
            doc(&mut y);
            let _ = writeln!(
                y,
                "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {{name: f{f}}}"
            );
            if let Some(p) = pool {
                let devices = if p.shared {
                    format!(", devices: {{{MILLI}: {{cards: {}}}}}", p.gpus)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    sim,
                    "  - {{flavor: f{f}, nodes: {}, allocatable: {{{GPU}: \"{}\", cpu: \"{}\", {MILLI}: \"{}\"}}{devices}}}",
                    p.nodes,
                    p.gpus,
                    p.cpus,
                    p.gpus * 1000
                );
            }
        }
        doc(&mut y);
        y.push_str(&sim);
        let cohort_count = self.cohorts;
        if self.nested && cohort_count == 2
            || self.cohort_gpus.is_some()
            || self.cohort_weight.is_some()
        {
            doc(&mut y);
            let _ = writeln!(
                y,
                "apiVersion: arbiter.dev/v1alpha1\nkind: Cohort\nmetadata: {{name: c{}}}\nspec:",
                cohort_count - 1
            );
            if self.nested && cohort_count == 2 {
                y.push_str("  parent: c0\n");
            }
            if let Some(weight) = self.cohort_weight {
                let _ = writeln!(y, "  fairSharing: {{weight: \"{weight}\"}}");
            }
            if let Some(gpus) = self.cohort_gpus {
                let _ = writeln!(
                    y,
                    "  resourceGroups:\n  - coveredResources: [cpu, {GPU}, {MILLI}]\n    flavors:\n    - name: f0\n      resources:\n      - {{name: cpu, nominalQuota: \"8\"}}\n      - {{name: {GPU}, nominalQuota: \"{gpus}\"}}\n      - {{name: {MILLI}, nominalQuota: \"{}\"}}",
                    gpus * 1000
                );
            }
        }
        for (i, cq) in self.cqs.iter().enumerate() {
            doc(&mut y);
            let _ = writeln!(
                y,
                "apiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {{name: cq{i}}}\nspec:"
            );
            if let Some(c) = cq.cohort {
                let _ = writeln!(y, "  cohort: c{}", c % cohort_count);
            }
            let _ = writeln!(
                y,
                "  queueingStrategy: {}",
                if cq.strict {
                    "StrictFIFO"
                } else {
                    "BestEffortFIFO"
                }
            );
            let _ = writeln!(
                y,
                "  preemption: {{withinClusterQueue: {}, reclaimWithinCohort: {}}}",
                cq.within, cq.reclaim
            );
            let _ = writeln!(
                y,
                "  flavorFungibility: {{whenCanBorrow: {}, whenCanPreempt: {}}}",
                cq.when_can_borrow, cq.when_can_preempt
            );
            let _ = writeln!(y, "  fairSharing: {{weight: \"{}\"}}", cq.weight);
            if cq.fair_sharing {
                y.push_str("  scheduling: {algorithm: fair-sharing}\n");
            }
            if let Some((max, backoff)) = cq.retry {
                let _ = writeln!(
                    y,
                    "  retryPolicy: {{maxRetries: {max}, backoffDuration: {backoff}s}}"
                );
            }
            if let Some(timeout) = cq.reclaim_timeout {
                let _ = writeln!(
                    y,
                    "  resourceReclaim: {{enabled: true, reclaimTimeout: {timeout}s}}"
                );
            }
            let _ = writeln!(
                y,
                "  resourceGroups:\n  - coveredResources: [cpu, {GPU}, {MILLI}]\n    flavors:"
            );
            for (f, q) in self.flavors_of(cq) {
                let limits = |borrow: Option<u32>, lend: Option<u32>| {
                    let mut s = String::new();
                    if cq.cohort.is_some() {
                        if let Some(b) = borrow {
                            let _ = write!(s, ", borrowingLimit: \"{b}\"");
                        }
                        if let Some(l) = lend {
                            let _ = write!(s, ", lendingLimit: \"{l}\"");
                        }
                    }
                    s
                };
                let _ = writeln!(
                    y,
                    "    - name: f{f}\n      resources:\n      - {{name: cpu, nominalQuota: \"{}\"{}}}\n      - {{name: {GPU}, nominalQuota: \"{}\"{}}}\n      - {{name: {MILLI}, nominalQuota: \"{}\"{}}}",
                    q.cpu,
                    limits(q.borrowing.map(|b| b * 4), None),
                    q.gpu,
                    limits(q.borrowing, q.lending),
                    q.gpu * 1000,
                    limits(q.borrowing.map(|b| b * 1000), q.lending.map(|l| l * 1000))
                );
            }
            doc(&mut y);
            let _ = writeln!(
                y,
                "apiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {{name: lq, namespace: ns{i}}}\nspec: {{clusterQueue: cq{i}}}"
            );
        }
        for (j, job) in self.jobs.iter().enumerate() {
            doc(&mut y);
            let _ = writeln!(
                y,
                "apiVersion: arbiter.dev/v1alpha1\nkind: Workload\nmetadata:\n  name: w{j}\n  namespace: ns{}\n  annotations: {{sim.arbiter.dev/arrival: {}s, sim.arbiter.dev/runtime: {}s}}\nspec:\n  queueName: lq\n  priority: {}\n  podSets:",
                job.cq % self.cqs.len(),
                job.arrival,
                job.runtime,
                job.priority
            );
            for (p, ps) in job.pod_sets.iter().enumerate() {
                let mut requests = format!("cpu: \"{}\"", ps.cpu);
                if ps.gpu > 0 {
                    let _ = write!(requests, ", {GPU}: \"{}\"", ps.gpu);
                }
                if ps.milli > 0 {
                    let _ = write!(requests, ", {MILLI}: \"{}\"", ps.milli);
                }
                if job.uncovered && p == 0 {
                    requests.push_str(", example.com/fpga: \"1\"");
                }
                let _ = writeln!(
                    y,
                    "  - {{name: ps{p}, count: {}, requests: {{{requests}}}}}",
                    ps.count
                );
            }
        }
        y
    }
}

fn build(yaml: &str) -> Result<Scenario, TestCaseError> {
    let loaded = arbiter_core::model::load::load_str(yaml, Path::new("prop.yaml"))
        .map_err(|e| TestCaseError::fail(format!("load: {e}\n{yaml}")))?;
    prop_assert!(
        loaded.warnings.is_empty(),
        "generated YAML has unknown fields: {:?}",
        loaded.warnings
    );
    scenario::build(loaded).map_err(|e| TestCaseError::fail(format!("build: {e}\n{yaml}")))
}

// ---------------------------------------------------------------- oracle

/// Usage per (ClusterQueue, flavor-resource), summed from admissions.
type Usage = BTreeMap<(ClusterQueueId, FlavorResource), Amount>;

fn usage_of(entries: &[Entry]) -> Usage {
    let mut usage = Usage::new();
    for entry in entries {
        if let Some(admission) = &entry.admission {
            for &(fr, amount) in &admission.usage {
                *usage.entry((entry.workload.cluster_queue, fr)).or_default() += amount;
            }
        }
    }
    usage
}

/// Kueue's cohort arithmetic, recomputed from the configuration: per node,
/// the subtree quota and the part it keeps (does not lend).
struct Tree<'a> {
    cluster: &'a Cluster,
    usage: &'a Usage,
}

impl Tree<'_> {
    fn cq_quota(&self, cq: ClusterQueueId, fr: FlavorResource) -> (Amount, Amount) {
        let def = self.cluster.cluster_queue(cq);
        let Some(q) = def.quotas[fr.index()] else {
            return (Amount::ZERO, Amount::ZERO);
        };
        let lendable = q.lending_limit.unwrap_or(Amount::MAX).min(q.nominal);
        let guaranteed = if def.cohort.is_some() {
            q.nominal - lendable
        } else {
            q.nominal
        };
        (q.nominal, guaranteed)
    }

    /// (subtree quota, guaranteed part, usage above the children's guaranteed parts).
    fn cohort(&self, cohort: CohortId, fr: FlavorResource) -> (Amount, Amount, Amount) {
        let own = self.cluster.cohorts[cohort.index()].quotas[fr.index()];
        let mut subtree = own.map_or(Amount::ZERO, |q| q.nominal);
        let mut usage = Amount::ZERO;
        for (i, cq) in self.cluster.cluster_queues.iter().enumerate() {
            if cq.cohort == Some(cohort) {
                let id = ClusterQueueId(i as u32);
                let (nominal, guaranteed) = self.cq_quota(id, fr);
                subtree += nominal - guaranteed;
                let used = self.usage.get(&(id, fr)).copied().unwrap_or_default();
                usage += used.positive_sub(guaranteed);
            }
        }
        for (i, child) in self.cluster.cohorts.iter().enumerate() {
            if child.parent == Some(cohort) {
                let (child_subtree, child_guaranteed, child_usage) =
                    self.cohort(CohortId(i as u32), fr);
                subtree += child_subtree - child_guaranteed;
                usage += child_usage.positive_sub(child_guaranteed);
            }
        }
        let guaranteed = match own.and_then(|q| q.lending_limit) {
            Some(limit) if self.cluster.cohorts[cohort.index()].parent.is_some() => {
                subtree - limit.min(subtree)
            }
            _ if self.cluster.cohorts[cohort.index()].parent.is_some() => Amount::ZERO,
            _ => subtree,
        };
        (subtree, guaranteed, usage)
    }
}

/// Every quota invariant broken by `usage`, described.
fn quota_violations(cluster: &Cluster, usage: &Usage) -> Vec<String> {
    let mut out = Vec::new();
    let frs = cluster.flavor_resource_count();
    for (i, cq) in cluster.cluster_queues.iter().enumerate() {
        let id = ClusterQueueId(i as u32);
        for fr in (0..frs).map(|f| FlavorResource(f as u32)) {
            let used = usage.get(&(id, fr)).copied().unwrap_or_default();
            let limit = match cq.quotas[fr.index()] {
                None => Amount::ZERO,
                Some(q) if cq.cohort.is_none() => q.nominal,
                Some(q) => q
                    .borrowing_limit
                    .map_or(Amount::MAX, |b| q.nominal.saturating_add(b)),
            };
            if used > limit || used.is_negative() {
                out.push(format!(
                    "ClusterQueue {} uses {used} of {:?}, limit nominal+borrowingLimit = {limit}",
                    cq.name,
                    cluster.split(fr)
                ));
            }
        }
    }
    let tree = Tree { cluster, usage };
    for (i, cohort) in cluster.cohorts.iter().enumerate() {
        for fr in (0..frs).map(|f| FlavorResource(f as u32)) {
            let (subtree, _, lent) = tree.cohort(CohortId(i as u32), fr);
            if cohort.parent.is_none() && lent > subtree {
                out.push(format!(
                    "cohort {} lends {lent} of {:?} but its subtree has {subtree}",
                    cohort.name,
                    cluster.split(fr)
                ));
            }
        }
    }
    out
}

/// Every capacity invariant broken by the admissions: nodes over
/// allocatable, pods on nodes that are not ready, pods left unplaced.
fn capacity_violations(scheduler: &Scheduler) -> Vec<String> {
    let cluster = scheduler.cluster();
    let mut out = Vec::new();
    let mut used: BTreeMap<(FlavorId, u32), BTreeMap<usize, Amount>> = BTreeMap::new();
    // Per (flavor, node, resource, card): what placements hold of it.
    let mut on_cards: BTreeMap<(FlavorId, u32, usize, u16), Amount> = BTreeMap::new();
    for entry in scheduler.entries() {
        let Some(admission) = &entry.admission else {
            continue;
        };
        let mut placed: BTreeMap<FlavorId, u32> = BTreeMap::new();
        for p in &admission.placements {
            match scheduler.node(p.flavor, p.node) {
                None => out.push(format!(
                    "{} placed on missing node {}",
                    entry.workload.name, p.node
                )),
                Some((_, false)) => out.push(format!(
                    "{} placed on node {} of {:?}, which is not ready",
                    entry.workload.name, p.node, p.flavor
                )),
                Some(_) => {}
            }
            *placed.entry(p.flavor).or_default() += p.pods;
            // Pods asking a device resource hold exactly that much of cards.
            if let Some((pool, _)) = scheduler.node(p.flavor, p.node) {
                for device in &pool.devices {
                    let asked = p
                        .per_pod
                        .iter()
                        .find(|(r, _)| *r == device.resource)
                        .map_or(Amount::ZERO, |(_, a)| a.saturating_mul(p.pods as i64));
                    let held = p
                        .cards
                        .iter()
                        .filter(|u| u.resource == device.resource)
                        .fold(Amount::ZERO, |sum, u| sum + u.amount);
                    if held != asked {
                        out.push(format!(
                            "{}: {} pods asking {asked} {} on node {} hold {held} of its cards",
                            entry.workload.name,
                            p.pods,
                            cluster.resources[device.resource.index()],
                            p.node
                        ));
                    }
                }
            }
            for u in &p.cards {
                *on_cards
                    .entry((p.flavor, p.node, u.resource.index(), u.card))
                    .or_default() += u.amount;
            }
            let node = used.entry((p.flavor, p.node)).or_default();
            for &(r, a) in &p.per_pod {
                *node.entry(r.index()).or_default() += a.saturating_mul(p.pods as i64);
            }
        }
        let mut expected: BTreeMap<FlavorId, u32> = BTreeMap::new();
        for (ps, flavors) in entry.workload.pod_sets.iter().zip(&admission.pod_sets) {
            if let Some(&(_, f)) = flavors.flavors.first() {
                if scheduler.has_pools(f) {
                    *expected.entry(f).or_default() += ps.count;
                }
            }
        }
        if placed != expected {
            out.push(format!(
                "{}: pods placed per flavor {placed:?}, pod sets need {expected:?}",
                entry.workload.name
            ));
        }
    }
    for (&(flavor, node, r, card), &amount) in &on_cards {
        let per_card = scheduler.node(flavor, node).and_then(|(pool, _)| {
            let device = pool.devices.iter().find(|d| d.resource.index() == r)?;
            (card < device.cards).then_some(device.per_card)
        });
        match per_card {
            None => out.push(format!(
                "node {node} of flavor {} has no card {card} of {}",
                cluster.flavors[flavor.index()].name,
                cluster.resources[r]
            )),
            Some(per_card) if amount > per_card => out.push(format!(
                "card {card} of node {node} of flavor {} holds {amount} {} > one card's {per_card}",
                cluster.flavors[flavor.index()].name,
                cluster.resources[r]
            )),
            Some(_) => {}
        }
    }
    for ((flavor, node), resources) in &used {
        let Some((pool, _)) = scheduler.node(*flavor, *node) else {
            continue;
        };
        for (&r, &amount) in resources {
            if let Some(&(_, allocatable)) = pool.allocatable.iter().find(|(pr, _)| pr.index() == r)
            {
                if amount > allocatable {
                    out.push(format!(
                        "node {node} of flavor {} holds {amount} {} > allocatable {allocatable}",
                        cluster.flavors[flavor.index()].name,
                        cluster.resources[r]
                    ));
                }
            }
        }
    }
    out
}

/// Checks the whole state; called after every cycle and timer.
fn check(scheduler: &Scheduler) -> Result<(), TestCaseError> {
    let cluster = scheduler.cluster();
    for entry in scheduler.entries() {
        prop_assert_eq!(
            entry.status == Status::Admitted,
            entry.admission.is_some(),
            "{}: status {:?} but admission {:?}",
            entry.workload.name,
            entry.status,
            entry.admission
        );
    }
    let usage = usage_of(scheduler.entries());
    for cq in 0..cluster.cluster_queues.len() {
        let cq = ClusterQueueId(cq as u32);
        for fr in (0..cluster.flavor_resource_count()).map(|f| FlavorResource(f as u32)) {
            let ours = usage.get(&(cq, fr)).copied().unwrap_or_default();
            prop_assert_eq!(
                scheduler.usage(cq, fr),
                ours,
                "quota tree usage of {} at {:?} differs from its admissions",
                &cluster.cluster_queue(cq).name,
                cluster.split(fr)
            );
        }
    }
    let tree = Tree {
        cluster,
        usage: &usage,
    };
    for c in 0..cluster.cohorts.len() {
        let cohort = CohortId(c as u32);
        for fr in (0..cluster.flavor_resource_count()).map(|f| FlavorResource(f as u32)) {
            prop_assert_eq!(
                scheduler.cohort_usage(cohort, fr),
                tree.cohort(cohort, fr).2,
                "cohort {} usage at {:?}",
                &cluster.cohorts[c].name,
                cluster.split(fr)
            );
        }
    }
    let broken = quota_violations(cluster, &usage);
    prop_assert!(broken.is_empty(), "quota: {broken:#?}");
    let broken = capacity_violations(scheduler);
    prop_assert!(broken.is_empty(), "capacity: {broken:#?}");
    Ok(())
}

// ---------------------------------------------------------------- driving

/// Replays the scenario through the simulator's loop, checking after every
/// cycle. Returns the scheduler at the end and, per job, its workload id.
fn drive(scenario: &Scenario) -> Result<(Scheduler, Vec<WorkloadId>), TestCaseError> {
    drive_with(scenario, &mut DefaultHooks)
}

/// Kueue's hooks, except that every workload gets a tenant score from its
/// name: tenant permutations happen all the time.
struct TenantScores;

impl Hooks for TenantScores {
    fn weight(&mut self, batch: &[WeightRequest<'_>]) -> Vec<Weight> {
        batch
            .iter()
            .map(|r| Weight {
                score: 0.0,
                tenant: Some(
                    r.entry
                        .workload
                        .name
                        .bytes()
                        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
                        as f64
                        % 97.0,
                ),
            })
            .collect()
    }
    fn orders_flavors(&self) -> bool {
        false
    }
}

/// Kueue's hooks, but saying the flavor hook may answer: the scheduler
/// then assigns every head afresh, never reusing a queue's last assignment.
struct AssignAfresh;

impl Hooks for AssignAfresh {}

/// Replays the scenario through the simulator's own loop (`sim::driver`,
/// the one step loop there is), checking after every cycle and bounding the
/// run. Jobs without a runtime annotation would run forever; the generated
/// ones all have one.
fn drive_with(
    scenario: &Scenario,
    hooks: &mut dyn Hooks,
) -> Result<(Scheduler, Vec<WorkloadId>), TestCaseError> {
    struct Checks {
        failure: Option<TestCaseError>,
        steps: u32,
    }
    impl Observer for Checks {
        fn cycle(&mut self, scheduler: &Scheduler) {
            if self.failure.is_none() {
                self.failure = check(scheduler).err();
            }
        }
        fn step(&mut self, now: Millis, _: &Scheduler, step: &Step) -> ControlFlow<()> {
            self.steps += 1;
            if self.failure.is_none() && self.steps >= 20_000 {
                self.failure = Some(TestCaseError::fail("the run does not end"));
            }
            if self.failure.is_none() && step.cycles >= 1_000 {
                self.failure = Some(TestCaseError::fail(format!(
                    "cycles at {now} never stop making progress"
                )));
            }
            if self.failure.is_some() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }
    let mut checks = Checks {
        failure: None,
        steps: 0,
    };
    let run = driver::run_with(scenario, hooks, &mut |_| {}, &mut checks);
    if let Some(failure) = checks.failure {
        return Err(failure);
    }
    for job in &scenario.jobs {
        match intake(&scenario.cluster, &job.info, job.explicit_priority) {
            Intake::Queued(_) => {}
            other => prop_assert!(false, "job {} not queued: {other:?}", job.info.name),
        }
    }
    let ids = run
        .workloads
        .into_iter()
        .enumerate()
        .map(|(i, id)| id.ok_or_else(|| TestCaseError::fail(format!("job {i} never arrived"))))
        .collect::<Result<_, _>>()?;
    Ok((run.scheduler, ids))
}

/// Would this workload be admitted by an empty cluster?
fn fits_alone(scenario: &Scenario, entry: &Entry) -> bool {
    let pools: Vec<PoolSpec> = scenario.pools.iter().map(|p| p.spec.clone()).collect();
    let mut alone = Scheduler::new(Arc::clone(&scenario.cluster), &pools);
    let step = alone.step(
        Millis::ZERO,
        vec![Input::Submit(entry.workload.clone())],
        &mut DefaultHooks,
    );
    step.submitted
        .first()
        .is_some_and(|&id| alone.entry(id).status == Status::Admitted)
}

/// After the run: every workload is in exactly one final state, and none
/// that would fit the (now idle) cluster is stranded in a queue.
fn check_nothing_lost(scenario: &Scenario, scheduler: &Scheduler) -> Result<(), TestCaseError> {
    let cluster = scheduler.cluster();
    let entries = scheduler.entries();
    prop_assert_eq!(entries.len(), scenario.jobs.len());
    let mut by_state: BTreeMap<String, usize> = BTreeMap::new();
    for entry in entries {
        *by_state.entry(format!("{:?}", entry.status)).or_default() += 1;
        prop_assert!(
            matches!(
                entry.status,
                Status::Finished
                    | Status::Rejected
                    | Status::Deactivated
                    | Status::Unschedulable
                    | Status::Queued
                    | Status::Inadmissible
            ),
            "{} ends {:?} although nothing more can happen",
            &entry.workload.name,
            entry.status
        );
    }
    prop_assert_eq!(by_state.values().sum::<usize>(), entries.len());
    // StrictFIFO: only the head of each queue must be admissible; it may block
    // the rest. The head is first by priority, then by the queue slot it holds:
    // its own (queue time, input order) unless a tenant's scores handed it
    // another of the tenant's slots — then the tenant's choice may block it.
    let mut heads: BTreeMap<ClusterQueueId, usize> = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate() {
        if entry.status == Status::Queued {
            let head = heads.entry(entry.workload.cluster_queue).or_insert(i);
            let current = &entries[*head];
            let earlier = entry
                .workload
                .priority
                .cmp(&current.workload.priority)
                .reverse()
                .then_with(|| entry.slot.queue_order(&current.slot))
                .is_lt();
            if earlier {
                *head = i;
            }
        }
    }
    for (i, entry) in entries.iter().enumerate() {
        let cq = entry.workload.cluster_queue;
        let strict = cluster.cluster_queue(cq).strategy == QueueingStrategy::StrictFIFO;
        let pending = matches!(entry.status, Status::Queued | Status::Inadmissible);
        let must_be_tried = !strict || heads.get(&cq) == Some(&i);
        if pending && must_be_tried {
            let reason = scheduler.reason_text(WorkloadId(i as u32));
            prop_assert!(
                !reason.is_empty(),
                "{} is pending without a reason",
                &entry.workload.name
            );
            prop_assert!(
                !fits_alone(scenario, entry),
                "{} is left {:?} in an idle cluster it fits ({})",
                &entry.workload.name,
                entry.status,
                reason
            );
        }
    }
    Ok(())
}

fn report_json(scenario: &Scenario) -> String {
    report_json_with(scenario, &mut DefaultHooks)
}

fn report_json_with(scenario: &Scenario, hooks: &mut dyn Hooks) -> String {
    let mut report = arbiter_sim::driver::run(scenario, hooks, &mut |_| {});
    report.scheduler.cpu_seconds = 0.0;
    serde_json::to_string_pretty(&report).unwrap_or_else(|e| panic!("report: {e}"))
}

fn state_name(status: Status) -> &'static str {
    match status {
        Status::Admitted => "admitted",
        Status::Finished => "finished",
        Status::Rejected => "rejected",
        _ => "pending",
    }
}

/// One thing a driver does between steps, for the driver-API property.
#[derive(Clone, Debug)]
enum Op {
    /// Let this many seconds pass (timers fire, cycles run).
    Wait(u32),
    /// Withdraw the k-th live workload (modulo their number).
    Withdraw(usize),
    /// The k-th admitted workload finishes.
    Finish(usize),
    /// The k-th admitted workload fails.
    Fail(usize),
    /// The same configuration arrives again (the operator re-reads it).
    Reconfigure,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u32..=120).prop_map(Op::Wait),
        any::<usize>().prop_map(Op::Withdraw),
        any::<usize>().prop_map(Op::Finish),
        any::<usize>().prop_map(Op::Fail),
        Just(Op::Reconfigure),
    ]
}

/// Drives the core through its driver API as the operator will: every job
/// arrives at once, then withdrawals, finishes, failures and reconfigurations
/// with the same configuration, in random order; the state is checked after
/// every step and reconfiguration.
fn drive_api(scenario: &Scenario, ops: &[Op]) -> Result<(), TestCaseError> {
    let pools: Vec<PoolSpec> = scenario.pools.iter().map(|p| p.spec.clone()).collect();
    let mut scheduler = Scheduler::new(scenario.cluster.clone(), &pools);
    let inputs: Vec<Input> = scenario
        .jobs
        .iter()
        .filter_map(
            |job| match intake(&scenario.cluster, &job.info, job.explicit_priority) {
                Intake::Queued(w) => Some(Input::Submit(w)),
                _ => None,
            },
        )
        .collect();
    let submitted = inputs.len();
    let mut now = Millis::ZERO;
    let step = scheduler.step(now, inputs, &mut DefaultHooks);
    let ids = step.submitted;
    prop_assert_eq!(ids.len(), submitted);
    check(&scheduler)?;
    let mut withdrawn = Vec::new();
    let pick = |scheduler: &Scheduler, k: usize, admitted: bool| {
        let candidates: Vec<WorkloadId> = scheduler
            .live()
            .filter(|(_, e)| !admitted || e.status == Status::Admitted)
            .map(|(id, _)| id)
            .collect();
        (!candidates.is_empty()).then(|| candidates[k % candidates.len()])
    };
    for op in ops {
        let input = match *op {
            Op::Wait(secs) => {
                now = now.saturating_add(Millis::from_secs(secs as i64));
                None
            }
            Op::Withdraw(k) => pick(&scheduler, k, false).map(|id| {
                withdrawn.push(id);
                Input::Withdraw(id)
            }),
            Op::Finish(k) => pick(&scheduler, k, true).map(Input::Finish),
            Op::Fail(k) => pick(&scheduler, k, true).map(|workload| Input::Fail {
                workload,
                message: "the test failed it".into(),
            }),
            Op::Reconfigure => {
                let before: Vec<(WorkloadId, Status, Option<Millis>)> = scheduler
                    .live()
                    .map(|(id, e)| (id, e.status, e.admission.as_ref().map(|a| a.at)))
                    .collect();
                let report = scheduler.reconfigure(scenario.cluster.clone(), &pools);
                prop_assert_eq!(
                    &report,
                    &Default::default(),
                    "the same configuration orphans nothing"
                );
                for (id, status, at) in before {
                    let entry = scheduler.entry(id);
                    if status == Status::Admitted {
                        prop_assert_eq!(
                            entry.status,
                            Status::Admitted,
                            "{} lost its admission",
                            &entry.workload.name
                        );
                        prop_assert_eq!(entry.admission.as_ref().map(|a| a.at), at);
                    } else {
                        prop_assert_ne!(
                            entry.status,
                            Status::Admitted,
                            "{} admitted by a reconfiguration",
                            &entry.workload.name
                        );
                    }
                }
                check(&scheduler)?;
                None
            }
        };
        let step = scheduler.step(now, input.into_iter().collect(), &mut DefaultHooks);
        prop_assert!(step.cycles < 1_000, "cycles never stop making progress");
        check(&scheduler)?;
    }
    // Nothing lost: every workload is either withdrawn by us or still known.
    for id in ids {
        let status = scheduler.entry(id).status;
        prop_assert_eq!(
            status == Status::Withdrawn,
            withdrawn.contains(&id),
            "{:?} is {:?}",
            id,
            status
        );
    }
    Ok(())
}

proptest! {
    // No failure persistence: proptest finds no src/ beside tests/; a failure prints its case.
    // Shrinking is bounded by a count: a run that does not end costs 20,000
    // steps per try, and unbounded shrinking of one took longer than CI has.
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, max_shrink_iters: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_driver_api_keeps_quota_capacity_and_workloads(
        generated in scenario_gen(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let scenario = build(&generated.yaml())?;
        drive_api(&scenario, &ops)?;
    }

    #[test]
    fn scheduler_keeps_quota_capacity_and_workloads(generated in scenario_gen()) {
        let yaml = generated.yaml();
        let scenario = build(&yaml)?;
        let (scheduler, _) = drive(&scenario)?;
        check_nothing_lost(&scenario, &scheduler)?;
    }

    #[test]
    fn tenant_permutations_keep_quota_capacity_and_workloads(generated in scenario_gen()) {
        let yaml = generated.yaml();
        let scenario = build(&yaml)?;
        let (scheduler, _) = drive_with(&scenario, &mut TenantScores)?;
        check_nothing_lost(&scenario, &scheduler)?;
    }

    #[test]
    fn same_scenario_same_report(generated in scenario_gen()) {
        let yaml = generated.yaml();
        // The bounded drive first: a scenario that never ends fails here instead of hanging.
        let scenario = build(&yaml)?;
        let (scheduler, ids) = drive(&scenario)?;
        let first = report_json(&build(&yaml)?);
        let second = report_json(&build(&yaml)?);
        prop_assert!(first == second, "two runs of the same scenario differ");
        // Reusing a queue's last head assignment (`scheduler::memo`) decides
        // exactly as assigning every head afresh.
        let afresh = report_json_with(&build(&yaml)?, &mut AssignAfresh);
        prop_assert!(first == afresh, "reusing head assignments changed the report of\n{}", &yaml);
        // The simulator's driver and a direct drive of the core agree on every outcome.
        let report: serde_json::Value = serde_json::from_str(&first)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (i, id) in ids.iter().enumerate() {
            let state = report["workloads"][i]["state"].as_str().unwrap_or_default();
            prop_assert_eq!(
                state,
                state_name(scheduler.entry(*id).status),
                "workload {} in the report of\n{}",
                i,
                &yaml
            );
        }
    }
}

// ---------------------------------------------------------------- the checks can fail

const TWO_QUEUES: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: f0}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: a}
spec:
  cohort: c
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: f0
      resources: [{name: nvidia.com/gpu, nominalQuota: "4", borrowingLimit: "2"}]
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: b}
spec:
  cohort: c
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: f0
      resources: [{name: nvidia.com/gpu, nominalQuota: "4", lendingLimit: "1"}]
"#;

#[test]
fn quota_oracle_reports_overuse_and_overlending() {
    let scenario = scenario::build(
        arbiter_core::model::load::load_str(TWO_QUEUES, Path::new("two.yaml"))
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let cluster = &scenario.cluster;
    let a = cluster.cluster_queue_id("a").unwrap_or_else(|| panic!("a"));
    let b = cluster.cluster_queue_id("b").unwrap_or_else(|| panic!("b"));
    let f0 = cluster.flavor_id("f0").unwrap_or_else(|| panic!("f0"));
    let gpu = cluster.resource_id(GPU).unwrap_or_else(|| panic!("gpu"));
    let fr = cluster.flavor_resource(f0, gpu);
    let gpus = |n| Amount::from_units(n);

    // a: 4 own + 1 lent by b (borrowingLimit 2 not reached): fine.
    let ok: Usage = [((a, fr), gpus(5)), ((b, fr), gpus(3))].into();
    assert!(quota_violations(cluster, &ok).is_empty());
    // a: beyond nominal 4 + borrowingLimit 2.
    let over_limit: Usage = [((a, fr), gpus(7))].into();
    assert_eq!(quota_violations(cluster, &over_limit).len(), 2);
    // The cohort holds a's 4 and b's lendable 1. Both at 5: a draws 5 from
    // it (it keeps nothing back), b draws 2 above its guaranteed 3: 7 > 5.
    let over_lent: Usage = [((a, fr), gpus(5)), ((b, fr), gpus(5))].into();
    let broken = quota_violations(cluster, &over_lent);
    assert!(
        broken.iter().any(|m| m.contains("cohort c lends")),
        "{broken:?}"
    );
}

// ---------------------------------------------------------------- regressions found by the properties

fn drives_to_the_end(yaml: &str) -> Scheduler {
    let scenario = build(yaml).unwrap_or_else(|e| panic!("{e}"));
    let (scheduler, _) = drive(&scenario).unwrap_or_else(|e| panic!("{e}"));
    check_nothing_lost(&scenario, &scheduler).unwrap_or_else(|e| panic!("{e}"));
    scheduler
}

fn queue(name: &str, cohort: &str, cpu: u32, gpu: u32, extra: &str) -> String {
    format!(
        "---\napiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n{cohort}{extra}  resourceGroups:\n  - coveredResources: [cpu, {GPU}]\n    flavors:\n    - name: f0\n      resources:\n      - {{name: cpu, nominalQuota: \"{cpu}\"}}\n      - {{name: {GPU}, nominalQuota: \"{gpu}\"}}\n---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {{name: lq, namespace: {name}}}\nspec: {{clusterQueue: {name}}}\n"
    )
}

fn workload(
    name: &str,
    ns: &str,
    arrival: u32,
    runtime: u32,
    priority: i32,
    pod_sets: &str,
) -> String {
    format!(
        "---\napiVersion: arbiter.dev/v1alpha1\nkind: Workload\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations: {{sim.arbiter.dev/arrival: {arrival}s, sim.arbiter.dev/runtime: {runtime}s}}\nspec:\n  queueName: lq\n  priority: {priority}\n  podSets: {pod_sets}\n"
    )
}

const FLAVOR: &str =
    "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: f0}\n";

#[test]
fn preemption_chains_do_not_cycle_within_one_instant() {
    // w3 reclaims from borrowing w2, w4 preempts w3 in its queue and borrows,
    // w0 reclaims from w4, w2 preempts w0 in its queue and borrows, w3 again…
    let preempting =
        "  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n";
    let yaml = [
        FLAVOR.to_string(),
        queue("a", "  cohort: c\n", 16, 4, preempting),
        queue("b", "  cohort: c\n", 16, 4, preempting),
        workload("w4", "b", 0, 257, 0, "[{name: p, count: 2, requests: {cpu: \"6\", nvidia.com/gpu: \"4\"}}]"),
        workload("w0", "a", 256, 73, 0, "[{name: p, count: 1, requests: {cpu: \"3\", nvidia.com/gpu: \"1\"}}]"),
        workload("w2", "a", 259, 224, 1, "[{name: p, count: 3, requests: {cpu: \"7\"}}, {name: q, count: 3, requests: {cpu: \"3\"}}]"),
        workload("w3", "b", 444, 1, -1, "[{name: p, count: 1, requests: {cpu: \"5\", nvidia.com/gpu: \"1\"}}]"),
    ]
    .concat();
    let scheduler = drives_to_the_end(&yaml);
    assert!(scheduler
        .entries()
        .iter()
        .all(|e| e.status == Status::Finished));
}

#[test]
fn reclaim_without_retry_policy_ends() {
    let yaml = [
        FLAVOR.to_string(),
        queue(
            "a",
            "",
            4,
            0,
            "  resourceReclaim: {enabled: true, reclaimTimeout: 30s}\n",
        ),
        workload(
            "long",
            "a",
            0,
            100,
            0,
            "[{name: p, count: 1, requests: {cpu: \"1\"}}]",
        ),
    ]
    .concat();
    let scheduler = drives_to_the_end(&yaml);
    let entry = &scheduler.entries()[0];
    assert_eq!(
        entry.status,
        Status::Deactivated,
        "{}",
        scheduler.reason_text(WorkloadId(0))
    );
}

#[test]
fn pod_sets_together_over_quota_never_fit_and_block_nobody() {
    let yaml = [
        FLAVOR.to_string(),
        queue("a", "", 16, 4, "  queueingStrategy: StrictFIFO\n"),
        workload("big", "a", 0, 1, 0, "[{name: p, count: 1, requests: {nvidia.com/gpu: \"1\"}}, {name: q, count: 1, requests: {nvidia.com/gpu: \"4\"}}]"),
        workload("small", "a", 0, 1, 0, "[{name: p, count: 1, requests: {cpu: \"1\"}}]"),
    ]
    .concat();
    let scheduler = drives_to_the_end(&yaml);
    let [big, small] = scheduler.entries() else {
        panic!("two workloads")
    };
    assert_eq!(big.status, Status::Unschedulable);
    let reason = scheduler.reason_text(WorkloadId(0));
    assert!(reason.contains("could ever give"), "{reason}");
    assert_eq!(small.status, Status::Finished);
}

/// Found by `tenant_permutations_keep_quota_capacity_and_workloads`: in a
/// StrictFIFO queue the tenant's scores hand w12's slot to w0, which can
/// never fit (3 pods of 2 GPUs, two 2-GPU nodes) and then blocked the queue
/// — the tenant's own choice. The oracle must take the slot-holder as the
/// head; with Kueue's hooks w12 is the head and is admitted.
#[test]
fn strict_fifo_head_is_the_holder_of_the_first_slot() {
    let generated = ScenarioGen {
        pools: vec![Some(PoolGen {
            nodes: 2,
            gpus: 2,
            cpus: 16,
            shared: false,
        })],
        cohorts: 1,
        nested: false,
        cohort_gpus: None,
        cohort_weight: None,
        global_fair: false,
        cqs: vec![
            CqGen {
                cohort: None,
                strict: false,
                within: "Never",
                reclaim: "Never",
                when_can_borrow: "MayStopSearch",
                when_can_preempt: "MayStopSearch",
                fair_sharing: false,
                weight: 0,
                flavors: vec![None, None, None],
                retry: None,
                reclaim_timeout: None,
            },
            CqGen {
                cohort: None,
                strict: true,
                within: "LowerPriority",
                reclaim: "Never",
                when_can_borrow: "MayStopSearch",
                when_can_preempt: "MayStopSearch",
                fair_sharing: false,
                weight: 0,
                flavors: vec![
                    Some((
                        0,
                        QuotaGen {
                            gpu: 6,
                            cpu: 20,
                            borrowing: None,
                            lending: None,
                        },
                    )),
                    None,
                    None,
                ],
                retry: None,
                reclaim_timeout: None,
            },
        ],
        jobs: vec![
            JobGen {
                cq: 1,
                arrival: 431,
                runtime: 1,
                priority: -1,
                pod_sets: vec![PodSetGen {
                    count: 3,
                    gpu: 2,
                    cpu: 1,
                    milli: 0,
                }],
                uncovered: false,
            },
            JobGen {
                cq: 1,
                arrival: 0,
                runtime: 39,
                priority: 0,
                pod_sets: vec![
                    PodSetGen {
                        count: 3,
                        gpu: 0,
                        cpu: 5,
                        milli: 0,
                    },
                    PodSetGen {
                        count: 1,
                        gpu: 0,
                        cpu: 5,
                        milli: 0,
                    },
                ],
                uncovered: false,
            },
            JobGen {
                cq: 0,
                arrival: 0,
                runtime: 1,
                priority: 0,
                pod_sets: vec![PodSetGen {
                    count: 1,
                    gpu: 0,
                    cpu: 1,
                    milli: 0,
                }],
                uncovered: false,
            },
            JobGen {
                cq: 0,
                arrival: 0,
                runtime: 1,
                priority: 0,
                pod_sets: vec![PodSetGen {
                    count: 2,
                    gpu: 4,
                    cpu: 7,
                    milli: 0,
                }],
                uncovered: false,
            },
            JobGen {
                cq: 1,
                arrival: 119,
                runtime: 78,
                priority: 2,
                pod_sets: vec![PodSetGen {
                    count: 4,
                    gpu: 1,
                    cpu: 2,
                    milli: 0,
                }],
                uncovered: false,
            },
            JobGen {
                cq: 3,
                arrival: 321,
                runtime: 92,
                priority: 0,
                pod_sets: vec![
                    PodSetGen {
                        count: 2,
                        gpu: 2,
                        cpu: 8,
                        milli: 0,
                    },
                    PodSetGen {
                        count: 4,
                        gpu: 2,
                        cpu: 3,
                        milli: 0,
                    },
                ],
                uncovered: false,
            },
            JobGen {
                cq: 2,
                arrival: 220,
                runtime: 279,
                priority: 0,
                pod_sets: vec![PodSetGen {
                    count: 3,
                    gpu: 3,
                    cpu: 8,
                    milli: 0,
                }],
                uncovered: false,
            },
            JobGen {
                cq: 1,
                arrival: 172,
                runtime: 244,
                priority: -2,
                pod_sets: vec![PodSetGen {
                    count: 2,
                    gpu: 2,
                    cpu: 1,
                    milli: 0,
                }],
                uncovered: false,
            },
            JobGen {
                cq: 3,
                arrival: 242,
                runtime: 210,
                priority: 1,
                pod_sets: vec![
                    PodSetGen {
                        count: 2,
                        gpu: 4,
                        cpu: 1,
                        milli: 0,
                    },
                    PodSetGen {
                        count: 4,
                        gpu: 2,
                        cpu: 1,
                        milli: 0,
                    },
                ],
                uncovered: false,
            },
            JobGen {
                cq: 4,
                arrival: 250,
                runtime: 198,
                priority: 1,
                pod_sets: vec![
                    PodSetGen {
                        count: 4,
                        gpu: 0,
                        cpu: 2,
                        milli: 0,
                    },
                    PodSetGen {
                        count: 4,
                        gpu: 2,
                        cpu: 3,
                        milli: 0,
                    },
                ],
                uncovered: false,
            },
            JobGen {
                cq: 0,
                arrival: 4,
                runtime: 392,
                priority: 0,
                pod_sets: vec![PodSetGen {
                    count: 3,
                    gpu: 0,
                    cpu: 4,
                    milli: 0,
                }],
                uncovered: false,
            },
            JobGen {
                cq: 2,
                arrival: 374,
                runtime: 160,
                priority: 3,
                pod_sets: vec![
                    PodSetGen {
                        count: 3,
                        gpu: 2,
                        cpu: 1,
                        milli: 0,
                    },
                    PodSetGen {
                        count: 3,
                        gpu: 2,
                        cpu: 8,
                        milli: 0,
                    },
                ],
                uncovered: false,
            },
            JobGen {
                cq: 3,
                arrival: 430,
                runtime: 278,
                priority: -1,
                pod_sets: vec![PodSetGen {
                    count: 4,
                    gpu: 0,
                    cpu: 5,
                    milli: 0,
                }],
                uncovered: false,
            },
        ],
    };
    let scenario = build(&generated.yaml()).unwrap_or_else(|e| panic!("{e:?}"));
    let (scheduler, _) = drive(&scenario).unwrap_or_else(|e| panic!("{e}"));
    check_nothing_lost(&scenario, &scheduler).unwrap_or_else(|e| panic!("{e}"));
    let (scheduler, _) = drive_with(&scenario, &mut TenantScores).unwrap_or_else(|e| panic!("{e}"));
    check_nothing_lost(&scenario, &scheduler).unwrap_or_else(|e| panic!("{e}"));
    let status = |name: &str| {
        scheduler
            .entries()
            .iter()
            .find(|e| e.workload.name == name)
            .map(|e| e.status)
    };
    // Since then the scheduler knows w0 can never fit (the pool's node
    // count is part of the check), so it no longer blocks anyone.
    assert_eq!(status("w0"), Some(Status::Unschedulable));
    assert_eq!(status("w12"), Some(Status::Finished));
}
