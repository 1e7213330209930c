//! Flavor assignment (Kueue's): for each pod set and each resource group it
//! uses, try the ClusterQueue's flavors in order (or the flavor hook's
//! order), honouring node selectors, taints, quota, physical capacity and
//! `flavorFungibility`. The result says whether the workload fits now, fits
//! only by preempting, or does not fit — with a reason a person can act on.
//! Pure: reads the quota tree and capacity, changes nothing.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::model::cluster::{Cluster, ClusterQueueId, FlavorId, FlavorResource, Fungibility};
use crate::model::selector::{node_constraints_allow, untolerated_taint};
use crate::model::Amount;

use super::capacity::{Capacity, Scratch};
use super::quota::QuotaTree;
use super::workload::{Placement, PodSetFlavors, Workload};

/// How a workload (or one flavor for one pod set) fits; ordered best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    Fit,
    Preempt,
    NoFit,
}

#[derive(Clone, Debug)]
pub struct Assignment {
    pub pod_sets: Vec<PodSetFlavors>,
    /// Quota charged, aggregated by (flavor, resource), sorted.
    pub usage: Vec<(FlavorResource, Amount)>,
    pub placements: Vec<Placement>,
    pub mode: Mode,
    pub borrowing: bool,
    /// Why the workload does not fit (empty when it fits).
    pub reason: String,
}

pub struct Context<'a> {
    pub cluster: &'a Cluster,
    pub quota: &'a QuotaTree,
    pub capacity: &'a Capacity,
}

struct Choice {
    flavor: FlavorId,
    mode: Mode,
    borrowing: bool,
    scratch_after: Option<Scratch>,
    placements: Vec<Placement>,
}

/// Assigns flavors to every pod set of `workload` in ClusterQueue `cq`.
/// `preferred` may reorder the flavors tried (the flavor hook).
pub fn assign(
    ctx: &Context<'_>,
    cq: ClusterQueueId,
    workload: &Workload,
    preferred: Option<&[FlavorId]>,
) -> Assignment {
    let cluster = ctx.cluster;
    let def = cluster.cluster_queue(cq);
    let mut usage: BTreeMap<FlavorResource, Amount> = BTreeMap::new();
    let mut scratch = Scratch::default();
    let mut out = Assignment {
        pod_sets: Vec::with_capacity(workload.pod_sets.len()),
        usage: Vec::new(),
        placements: Vec::new(),
        mode: Mode::Fit,
        borrowing: false,
        reason: String::new(),
    };
    for ps in &workload.pod_sets {
        let mut flavors_of_ps = PodSetFlavors {
            name: ps.name.clone(),
            flavors: Vec::new(),
        };
        let mut placed = false;
        for group in &def.groups {
            let requested: Vec<_> = ps
                .per_pod
                .iter()
                .filter(|(r, _)| group.resources.contains(r))
                .copied()
                .collect();
            if requested.is_empty() {
                continue;
            }
            let order: Vec<FlavorId> = match preferred {
                Some(p) => p
                    .iter()
                    .copied()
                    .filter(|f| group.flavors.contains(f))
                    .collect(),
                None => group.flavors.clone(),
            };
            let mut reasons = Vec::new();
            let mut best: Option<Choice> = None;
            for &f in &order {
                let flavor = &cluster.flavors[f.index()];
                if !node_constraints_allow(
                    &ps.node_selector,
                    ps.required_affinity.as_ref(),
                    &flavor.node_labels,
                ) {
                    reasons.push(format!(
                        "{}: excluded by pod set {}'s nodeSelector/affinity",
                        flavor.name, ps.name
                    ));
                    continue;
                }
                if let Some(taint) =
                    untolerated_taint(&flavor.node_taints, &[&ps.tolerations, &flavor.tolerations])
                {
                    reasons.push(format!(
                        "{}: taint {}={}:{} not tolerated",
                        flavor.name,
                        taint.key,
                        taint.value.as_deref().unwrap_or(""),
                        taint.effect
                    ));
                    continue;
                }
                let mut mode = Mode::Fit;
                let mut borrowing = false;
                for &(r, per_pod) in &requested {
                    let fr = cluster.flavor_resource(f, r);
                    let need = per_pod.saturating_mul(ps.count as i64)
                        + usage.get(&fr).copied().unwrap_or_default();
                    let available = ctx.quota.available(cq, fr);
                    if need <= available {
                        if ctx.quota.usage(cq, fr) + need > ctx.quota.nominal(cq, fr) {
                            borrowing = true;
                        }
                        continue;
                    }
                    let potential = ctx.quota.potential(cq, fr);
                    mode = mode.max(if need <= potential {
                        Mode::Preempt
                    } else {
                        Mode::NoFit
                    });
                    reasons.push(shortfall(ctx, cq, f, fr, need, available, potential));
                }
                let mut choice = Choice {
                    flavor: f,
                    mode,
                    borrowing,
                    scratch_after: None,
                    placements: Vec::new(),
                };
                if mode == Mode::Fit && !placed && ctx.capacity.has_pools(f) {
                    let mut trial = scratch.clone();
                    match ctx.capacity.place(&mut trial, f, ps.count, &ps.per_pod) {
                        Some(p) => {
                            choice.placements = p;
                            choice.scratch_after = Some(trial);
                        }
                        None => {
                            choice.mode = Mode::NoFit;
                            reasons.push(format!(
                                "{}: quota allows it but no {} node has room for {} pod(s) of {} ({} nodes ready)",
                                flavor.name,
                                flavor.name,
                                ps.count,
                                describe(cluster, &ps.per_pod),
                                ctx.capacity.ready_nodes(f)
                            ));
                        }
                    }
                }
                let stop = match (choice.mode, choice.borrowing) {
                    (Mode::Fit, false) => true,
                    (Mode::Fit, true) => def.when_can_borrow == Fungibility::MayStopSearch,
                    (Mode::Preempt, _) => def.when_can_preempt == Fungibility::MayStopSearch,
                    (Mode::NoFit, _) => false,
                };
                let better = choice.mode != Mode::NoFit
                    && best
                        .as_ref()
                        .is_none_or(|b| (choice.mode, choice.borrowing) < (b.mode, b.borrowing));
                if better {
                    best = Some(choice);
                }
                if stop {
                    break;
                }
            }
            match best {
                Some(choice) => {
                    for &(r, per_pod) in &requested {
                        let fr = cluster.flavor_resource(choice.flavor, r);
                        *usage.entry(fr).or_default() += per_pod.saturating_mul(ps.count as i64);
                        flavors_of_ps.flavors.push((r, choice.flavor));
                    }
                    if let Some(s) = choice.scratch_after {
                        scratch = s;
                        placed = true;
                    }
                    out.placements.extend(choice.placements);
                    out.mode = out.mode.max(choice.mode);
                    out.borrowing |= choice.borrowing;
                    if choice.mode != Mode::Fit && out.reason.is_empty() {
                        out.reason = format!("pod set {}: {}", ps.name, reasons.join("; "));
                    }
                }
                None => {
                    out.mode = Mode::NoFit;
                    if out.reason.is_empty() || !out.reason.starts_with("pod set") {
                        out.reason = format!(
                            "pod set {}: {}",
                            ps.name,
                            if reasons.is_empty() {
                                "no flavor listed for its resources".to_string()
                            } else {
                                reasons.join("; ")
                            }
                        );
                    }
                }
            }
        }
        out.pod_sets.push(flavors_of_ps);
    }
    out.usage = usage.into_iter().collect();
    out
}

/// `needs 16 nvidia.com/gpu in a100-80gb; ClusterQueue ml has 8 free (nominal 32, borrowed 0); cohort gpu has 0 to lend`
fn shortfall(
    ctx: &Context<'_>,
    cq: ClusterQueueId,
    flavor: FlavorId,
    fr: FlavorResource,
    need: Amount,
    available: Amount,
    potential: Amount,
) -> String {
    let cluster = ctx.cluster;
    let (_, r) = cluster.split(fr);
    let def = cluster.cluster_queue(cq);
    let nominal = ctx.quota.nominal(cq, fr);
    let usage = ctx.quota.usage(cq, fr);
    let mut text = format!(
        "needs {} {} in {}; ClusterQueue {} has {} free (nominal {}, borrowed {})",
        need,
        cluster.resource_name(r),
        cluster.flavors[flavor.index()].name,
        def.name,
        available,
        nominal,
        ctx.quota.borrowed(cq, fr)
    );
    if let Some(cohort) = def.cohort {
        let own_free = nominal.positive_sub(usage);
        let _ = write!(
            text,
            "; cohort {} has {} to lend",
            cluster.cohorts[cohort.index()].name,
            available.positive_sub(own_free)
        );
    }
    if need > potential {
        let _ = write!(text, "; it can never have more than {potential}");
    }
    text
}

/// `4 × (nvidia.com/gpu 8, cpu 32)`-style description of per-pod requests.
pub fn describe(
    cluster: &Cluster,
    per_pod: &[(crate::model::cluster::ResourceId, Amount)],
) -> String {
    let parts: Vec<String> = per_pod
        .iter()
        .map(|(r, a)| format!("{} {}", cluster.resource_name(*r), a))
        .collect();
    parts.join(", ")
}

/// Why this workload can never be admitted in `cq` as configured, if so:
/// a resource no group covers, or a pod set larger than any flavor's quota or nodes.
pub fn never_fits(ctx: &Context<'_>, cq: ClusterQueueId, workload: &Workload) -> Option<String> {
    let cluster = ctx.cluster;
    let def = cluster.cluster_queue(cq);
    for ps in &workload.pod_sets {
        for &(r, _) in &ps.per_pod {
            if !def.groups.iter().any(|g| g.resources.contains(&r)) {
                return Some(format!(
                    "pod set {} requests {}, which ClusterQueue {} does not cover; add it to a resourceGroup's coveredResources",
                    ps.name,
                    cluster.resource_name(r),
                    def.name
                ));
            }
        }
        for group in &def.groups {
            let requested: Vec<_> = ps
                .per_pod
                .iter()
                .filter(|(r, _)| group.resources.contains(r))
                .copied()
                .collect();
            if requested.is_empty() {
                continue;
            }
            let possible = group.flavors.iter().any(|&f| {
                let flavor = &cluster.flavors[f.index()];
                node_constraints_allow(
                    &ps.node_selector,
                    ps.required_affinity.as_ref(),
                    &flavor.node_labels,
                ) && untolerated_taint(&flavor.node_taints, &[&ps.tolerations, &flavor.tolerations])
                    .is_none()
                    && requested.iter().all(|&(r, per_pod)| {
                        per_pod.saturating_mul(ps.count as i64)
                            <= ctx.quota.potential(cq, cluster.flavor_resource(f, r))
                    })
                    && ctx.capacity.pod_could_ever_fit(f, &ps.per_pod)
            });
            if !possible {
                let wants: Vec<String> = requested
                    .iter()
                    .map(|&(r, a)| {
                        format!(
                            "{} {}",
                            a.saturating_mul(ps.count as i64),
                            cluster.resource_name(r)
                        )
                    })
                    .collect();
                return Some(format!(
                    "pod set {} needs {} ({} pod(s)), more than any flavor of ClusterQueue {} could ever give (quota, node size, selectors and taints considered)",
                    ps.name,
                    wants.join(", "),
                    ps.count,
                    def.name
                ));
            }
        }
    }
    // Pod sets share the quota: a total beyond all of a group's flavors together never fits.
    for group in &def.groups {
        for &r in &group.resources {
            let total: Amount = workload.pod_sets.iter().map(|ps| ps.total(r)).sum();
            let potential: Amount = group
                .flavors
                .iter()
                .map(|&f| ctx.quota.potential(cq, cluster.flavor_resource(f, r)))
                .sum();
            if total > potential {
                return Some(format!(
                    "its pod sets need {total} {} in total, more than the flavors of ClusterQueue {} could ever give together ({potential})",
                    cluster.resource_name(r),
                    def.name
                ));
            }
        }
    }
    None
}
