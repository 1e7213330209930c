//! Rebuilding state without re-deciding it: [`Scheduler::restore`] takes
//! the admissions a driver reads back after a restart (no admission hook,
//! no policy runs), and [`Scheduler::reconfigure`] takes a new
//! configuration while workloads exist. Semantics of a reconfiguration:
//!
//! - ids stay: every workload keeps its [`WorkloadId`], its queue time,
//!   input order, score and retry count;
//! - admitted workloads stay admitted, charged to the new quota even if it
//!   is now smaller (Kueue: a lower quota evicts nothing; the queue admits
//!   nothing more until usage falls);
//! - an admitted workload whose ClusterQueue, LocalQueue, flavor or
//!   resource is gone stays running as [`Status::Detached`]: it holds its
//!   nodes, is charged to no quota, is never preempted, and re-attaches if a
//!   later configuration brings its queue and flavors back;
//! - pending workloads are re-evaluated: set-aside ones go back in their
//!   queues, `Unschedulable` ones are checked again;
//! - a pending workload whose LocalQueue (or its ClusterQueue) or requested
//!   resource is gone waits as [`Status::Orphaned`] with that reason, and is
//!   queued again, with its original queue time, once a configuration has
//!   them;
//! - nothing is lost: withdrawn slots stay free, finished and rejected
//!   workloads stay as they were, timers (backoff, reclaim) are re-armed;
//! - history carries over by name (decayed usage per ClusterQueue, runtime
//!   estimates per LocalQueue, nodes being provisioned per flavor); adaptive
//!   fair-sharing weights start again from the configured ones;
//! - pods stay on their nodes where those are still there with room (named
//!   nodes found by name, anonymous ones by index), and are placed again
//!   best-fit otherwise (in admission order).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::model::cluster::{Cluster, ClusterQueueId, FlavorId, FlavorResource, ResourceId};
use crate::model::{Amount, Millis};

use super::assign;
use super::capacity::{By, Capacity, PoolSpec, Scratch};
use super::entry::Entry;
use super::pods_ready::Unready;
use super::reason::Reason;
use super::store::Workloads;
use super::timers::TimerKind;
use super::workload::{Admission, Placement, PodSetFlavors, Seq, Status, Workload, WorkloadId};
use super::Scheduler;

mod leftovers;
mod places;
pub(super) use leftovers::Leftovers;
use places::{named_placements, NamedPlacement, NodeKey};

/// An admitted workload read back after a restart.
#[derive(Clone, Debug, PartialEq)]
pub struct Restored {
    /// The workload as intake makes it against the configuration in force.
    pub workload: Workload,
    /// Per pod set (same order as `workload.pod_sets`): resource name → flavor name.
    pub flavors: Vec<BTreeMap<String, String>>,
    /// Pods admitted per pod set (below the count after partial admission).
    pub counts: Vec<u32>,
    /// When it was admitted.
    pub admitted_at: Millis,
    /// When it was first queued.
    pub queue_time: Millis,
    /// Where its pods run, as recorded; empty: placed again best-fit. Kept
    /// when every node named is there with room, placed again otherwise.
    pub placements: Vec<PlacedPods>,
    /// Its counters from before the restart (retries, requeues,
    /// evictions); a backoff it carries means nothing to an admitted
    /// workload and is ignored.
    pub carried: super::entry::Carried,
}

/// Pods of one pod set on one named node, as a driver records them.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacedPods {
    /// Index into the workload's pod sets.
    pub pod_set: u32,
    /// The flavor's name.
    pub flavor: String,
    /// The node's name.
    pub node: String,
    /// Pods on the node.
    pub pods: u32,
    /// What these pods hold per card: resource name, card, amount.
    pub cards: Vec<(String, u16, Amount)>,
}

/// Why an admission read back cannot be restored. The workload is not
/// added; the driver should hold its job again and submit it as pending.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RestoreError {
    /// The admission names more or fewer pod sets than the workload has.
    #[error("{workload}: its admission lists {given} pod sets but the workload has {expected}; submit it again as pending")]
    PodSets {
        /// The workload, as `namespace/name`.
        workload: String,
        /// Pod sets the admission names.
        given: usize,
        /// Pod sets the workload has.
        expected: usize,
    },
    /// A pod set was admitted on a flavor its ClusterQueue does not list.
    #[error("{workload}: pod set {pod_set} was admitted on flavor {flavor}, which ClusterQueue {cluster_queue} does not list for {resource}; submit it again as pending")]
    Flavor {
        /// The workload, as `namespace/name`.
        workload: String,
        /// The pod set's name.
        pod_set: String,
        /// The resource's name.
        resource: String,
        /// The flavor's name.
        flavor: String,
        /// The ClusterQueue's name.
        cluster_queue: String,
    },
    /// A pod set was admitted with more pods than it has.
    #[error("{workload}: pod set {pod_set} was admitted with {admitted} pods, more than its {count}; submit it again as pending")]
    Count {
        /// The workload, as `namespace/name`.
        workload: String,
        /// The pod set's name.
        pod_set: String,
        /// Pods admitted.
        admitted: u32,
        /// Pods the pod set has.
        count: u32,
    },
}

/// What a reconfiguration did to the workloads it could not keep as they were.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reconfigured {
    /// Admitted workloads whose queue or flavor is gone (now or still): running, charged to no quota.
    pub detached: Vec<WorkloadId>,
    /// Pending workloads whose queue or resource is gone: waiting with a reason.
    pub orphaned: Vec<WorkloadId>,
    /// Orphaned or detached workloads the new configuration took back.
    pub adopted: Vec<WorkloadId>,
}

/// Per pod set: resource name → flavor name.
type FlavorNames = Vec<Vec<(String, String)>>;

/// An admitted workload to install again: when it was admitted, its input
/// order, its id and its flavors by name.
type ToInstall = (Millis, Seq, WorkloadId, FlavorNames);

/// What a reconfiguration gathers as it takes the old workloads over.
#[derive(Default)]
struct Reconfiguring {
    /// Per workload orphaned, detached or to install again, its requests by name.
    orphans: BTreeMap<WorkloadId, Portable>,
    report: Reconfigured,
    to_install: Vec<ToInstall>,
    /// Admitted workloads to detach once the others are installed.
    detached: BTreeSet<WorkloadId>,
}

fn resource_name(cluster: &Cluster, r: ResourceId) -> String {
    cluster
        .resources
        .get(r.index())
        .cloned()
        .unwrap_or_default()
}

/// A workload's requests by name, so it can be resolved against another configuration.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Portable {
    /// Per pod set: per-pod requests by resource name.
    requests: Vec<Vec<(String, Amount)>>,
    /// For an admission: per pod set, resource name → flavor name.
    flavors: Option<FlavorNames>,
    /// For an admission: when, pods per pod set, borrowing.
    admitted: Option<(Millis, Vec<u32>, bool)>,
    /// Where its pods are.
    placements: Vec<NamedPlacement>,
    /// The ClusterQueue it was admitted by or queued in, for reasons.
    cluster_queue: String,
    /// Was it scored by the weight hook (does it go back to its queue or to scoring)?
    scored: bool,
}

impl Portable {
    /// It no longer runs: resolve it as a pending workload from now on.
    pub(super) fn forget_admission(&mut self) {
        self.flavors = None;
        self.admitted = None;
        self.placements.clear();
        self.scored = true;
    }

    fn of(cluster: &Cluster, capacity: &Capacity, entry: &Entry) -> Portable {
        let name = |r: ResourceId| {
            cluster
                .resources
                .get(r.index())
                .cloned()
                .unwrap_or_default()
        };
        let flavor = |f: FlavorId| {
            cluster
                .flavors
                .get(f.index())
                .map(|f| f.name.clone())
                .unwrap_or_default()
        };
        Portable {
            requests: entry
                .workload
                .pod_sets
                .iter()
                .map(|ps| ps.per_pod.iter().map(|&(r, a)| (name(r), a)).collect())
                .collect(),
            flavors: entry.admission.as_ref().map(|a| {
                a.pod_sets
                    .iter()
                    .map(|ps| {
                        ps.flavors
                            .iter()
                            .map(|&(r, f)| (name(r), flavor(f)))
                            .collect()
                    })
                    .collect()
            }),
            admitted: entry
                .admission
                .as_ref()
                .map(|a| (a.at, a.counts.clone(), a.borrowing)),
            placements: entry
                .admission
                .as_ref()
                .map(|a| named_placements(cluster, capacity, &a.placements))
                .unwrap_or_default(),
            cluster_queue: cluster
                .cluster_queues
                .get(entry.workload.cluster_queue.index())
                .map(|cq| cq.name.clone())
                .unwrap_or_default(),
            scored: !matches!(entry.status, Status::Scoring | Status::Unschedulable),
        }
    }
}

/// The workload's ids in `cluster`, or why it has none there.
fn resolve(
    cluster: &Cluster,
    workload: &Workload,
    portable: &Portable,
) -> Result<Workload, Reason> {
    let removed = || Reason::QueueRemoved {
        namespace: workload.namespace.clone(),
        queue: workload.queue_name.clone(),
    };
    let lq = cluster
        .local_queue_id(&workload.namespace, &workload.queue_name)
        .ok_or_else(removed)?;
    let mut resolved = workload.clone();
    resolved.local_queue = lq;
    resolved.cluster_queue = cluster.local_queues[lq.index()].cluster_queue;
    for (ps, requests) in resolved.pod_sets.iter_mut().zip(&portable.requests) {
        ps.per_pod = per_pod_ids(cluster, requests).map_err(|missing| Reason::ResourceRemoved {
            pod_set: ps.name.clone(),
            resource: missing.to_string(),
        })?;
    }
    Ok(resolved)
}

/// Per-pod requests by name in `cluster`'s resource ids, sorted; or the
/// first resource name it does not know.
fn per_pod_ids<'a>(
    cluster: &Cluster,
    requests: &'a [(String, Amount)],
) -> Result<Vec<(ResourceId, Amount)>, &'a str> {
    let mut per_pod = requests
        .iter()
        .map(|(name, amount)| {
            cluster
                .resource_id(name)
                .map(|r| (r, *amount))
                .ok_or(name.as_str())
        })
        .collect::<Result<Vec<_>, _>>()?;
    per_pod.sort();
    Ok(per_pod)
}

/// The admission's flavors in `cluster`, if every one still exists and the
/// ClusterQueue lists it for that resource.
fn resolve_flavors(
    cluster: &Cluster,
    cq: ClusterQueueId,
    flavors: &[Vec<(String, String)>],
) -> Option<Vec<PodSetFlavors>> {
    let def = cluster.cluster_queue(cq);
    flavors
        .iter()
        .map(|pod_set| {
            let flavors = pod_set
                .iter()
                .map(|(resource, flavor)| {
                    let r = cluster.resource_id(resource)?;
                    let f = cluster.flavor_id(flavor)?;
                    def.groups
                        .iter()
                        .any(|g| g.resources.contains(&r) && g.flavors.contains(&f))
                        .then_some((r, f))
                })
                .collect::<Option<Vec<_>>>()?;
            Some(PodSetFlavors { flavors })
        })
        .collect()
}

impl Scheduler {
    /// Quota usage of pod sets admitted on `flavors` with `counts` pods:
    /// what admission would have charged.
    fn usage_of(
        &self,
        workload: &Workload,
        flavors: &[PodSetFlavors],
        counts: &[u32],
    ) -> Vec<(FlavorResource, Amount)> {
        let mut usage: BTreeMap<FlavorResource, Amount> = BTreeMap::new();
        for ((ps, chosen), &count) in workload.pod_sets.iter().zip(flavors).zip(counts) {
            for &(r, f) in &chosen.flavors {
                let fr = self.cluster.flavor_resource(f, r);
                *usage.entry(fr).or_default() += ps.per_pod_of(r).saturating_mul(count as i64);
            }
        }
        usage.into_iter().collect()
    }

    /// Rebuilds admitted workloads read back after a restart, before the
    /// first step: each is charged to its ClusterQueue's quota (even past
    /// it), placed where its record says when that still holds (nodes there
    /// by name, with room, every pod placed) and best-fit otherwise, and
    /// its reclaim timer armed from
    /// its admission time. No hook is asked. One result per input, in order.
    pub fn restore(&mut self, admitted: Vec<Restored>) -> Vec<Result<WorkloadId, RestoreError>> {
        admitted
            .into_iter()
            .map(|restored| self.restore_one(restored))
            .collect()
    }

    fn restore_one(&mut self, restored: Restored) -> Result<WorkloadId, RestoreError> {
        let Restored {
            workload,
            flavors,
            counts,
            admitted_at,
            queue_time,
            placements: recorded,
            carried,
        } = restored;
        let who = format!("{}/{}", workload.namespace, workload.name);
        let cq = workload.cluster_queue;
        if flavors.len() != workload.pod_sets.len() || counts.len() != workload.pod_sets.len() {
            return Err(RestoreError::PodSets {
                workload: who,
                given: flavors.len().min(counts.len()),
                expected: workload.pod_sets.len(),
            });
        }
        let mut chosen = Vec::with_capacity(flavors.len());
        for ((ps, by_resource), &count) in workload.pod_sets.iter().zip(&flavors).zip(&counts) {
            if count > ps.count {
                return Err(RestoreError::Count {
                    workload: who,
                    pod_set: ps.name.clone(),
                    admitted: count,
                    count: ps.count,
                });
            }
            let mut pairs = Vec::with_capacity(ps.per_pod.len());
            for &(r, _) in &ps.per_pod {
                let resource = self.cluster.resource_name(r).to_string();
                let flavor = by_resource.get(&resource).cloned().unwrap_or_default();
                pairs.push((resource, flavor));
            }
            match resolve_flavors(&self.cluster, cq, std::slice::from_ref(&pairs)) {
                Some(mut resolved) => chosen.push(resolved.remove(0)),
                None => {
                    let (resource, flavor) = pairs
                        .iter()
                        .find(|pair| {
                            resolve_flavors(&self.cluster, cq, &[vec![(*pair).clone()]]).is_none()
                        })
                        .cloned()
                        .unwrap_or_default();
                    return Err(RestoreError::Flavor {
                        workload: who,
                        pod_set: ps.name.clone(),
                        resource,
                        flavor,
                        cluster_queue: self.cluster.cluster_queue(cq).name.clone(),
                    });
                }
            }
        }
        let usage = self.usage_of(&workload, &chosen, &counts);
        let named: Vec<NamedPlacement> = recorded
            .into_iter()
            .filter_map(|p| {
                let ps = workload.pod_sets.get(p.pod_set as usize)?;
                Some(NamedPlacement {
                    pod_set: p.pod_set,
                    flavor: p.flavor,
                    node: NodeKey::Name(p.node),
                    per_pod: ps
                        .per_pod
                        .iter()
                        .map(|&(r, a)| (resource_name(&self.cluster, r), a))
                        .collect(),
                    pods: p.pods,
                    cards: p.cards,
                })
            })
            .collect();
        let placements = self.restored_placements(&workload, &chosen, &counts, &named);
        let borrowing = usage
            .iter()
            .any(|&(fr, amount)| self.quota.usage(cq, fr) + amount > self.quota.nominal(cq, fr));
        let id = self.submit(workload, queue_time, queue_time);
        self.unscored.remove(id);
        let entry = &mut self.workloads[id];
        entry.reason = Reason::None;
        entry.retries = carried.retries;
        entry.pods_ready_requeues = carried.pods_ready_requeues;
        entry.evictions = carried.evictions;
        self.install(
            cq,
            id,
            Admission {
                at: admitted_at,
                pod_sets: chosen,
                usage,
                placements,
                borrowing,
                counts,
            },
        );
        Ok(id)
    }

    /// Takes a new configuration (and node pools) while workloads exist; see
    /// the module documentation for what happens to each workload.
    pub fn reconfigure(&mut self, cluster: Arc<Cluster>, pools: &[PoolSpec]) -> Reconfigured {
        let mut next = Scheduler::new(cluster, pools);
        let old = std::mem::replace(self, Scheduler::new(next.cluster.clone(), &[]));
        next.carry_over_history(&old);
        let (orphans, old_detached) = old.leftovers.into_parts();
        let mut taking = Reconfiguring {
            orphans,
            ..Reconfiguring::default()
        };
        let (workloads, old_entries) = Workloads::reopen(old.workloads);
        next.workloads = workloads;
        for (i, entry) in old_entries.into_iter().enumerate() {
            let id = WorkloadId(i as u32);
            let mut portable = match taking.orphans.remove(&id) {
                Some(p) => p,
                None => Portable::of(&old.cluster, &old.capacity, &entry),
            };
            if let Some(placements) = old_detached.get(&id) {
                portable.placements = named_placements(&old.cluster, &old.capacity, placements);
            }
            next.take_over(id, entry, portable, &mut taking);
        }
        next.install_again(std::mem::take(&mut taking.to_install), &mut taking.orphans);
        next.rearm_pods_ready(&old.unready);
        let mut detached = BTreeMap::new();
        for &id in &taking.detached {
            detached.insert(id, next.detach(id, &taking.orphans));
            taking.report.detached.push(id);
        }
        let orphans = taking
            .orphans
            .into_iter()
            .filter(|(id, _)| {
                matches!(
                    next.workloads[*id].status,
                    Status::Orphaned | Status::Detached
                )
            })
            .collect();
        next.leftovers = Leftovers::new(detached, orphans);
        *self = next;
        taking.report
    }

    /// Carries the old scheduler's counters and clock over, and its history
    /// by name: decayed usage per ClusterQueue, runtime estimates per
    /// LocalQueue, nodes being provisioned per flavor, the next adaptive
    /// weight adjustment.
    fn carry_over_history(&mut self, old: &Scheduler) {
        self.cycles = old.cycles;
        self.now = old.now;
        // Workloads not scored yet keep the backoff they carried.
        self.unscored.carry_over(&old.unscored);
        self.history
            .carry_over(&self.cluster, &old.history, &old.cluster);
        self.provisioning
            .carry_over(&self.cluster, &old.provisioning, &old.cluster);
        self.fair.carry_over(&old.fair, old.now);
    }

    /// Takes one old workload (`entry`, its requests by name in
    /// `portable`) into this scheduler under its new configuration: kept
    /// as it was when it is over, to be installed again when admitted and
    /// still fitting, detached when admitted and not, queued again when
    /// pending and resolvable, orphaned otherwise.
    fn take_over(
        &mut self,
        id: WorkloadId,
        mut entry: Entry,
        portable: Portable,
        taking: &mut Reconfiguring,
    ) {
        let resolved = resolve(&self.cluster, &entry.workload, &portable);
        let status = entry.status;
        if let Ok(workload) = &resolved {
            entry.workload = workload.clone();
        }
        let was_detached = status == Status::Detached;
        match (status, resolved) {
            (Status::Withdrawn | Status::Finished | Status::Rejected | Status::Deactivated, _) => {
                self.workloads.keep(entry);
            }
            (Status::Admitted | Status::Detached, Ok(workload)) => {
                entry.admission = None;
                let flavors = portable.flavors.clone().unwrap_or_default();
                let fits = resolve_flavors(&self.cluster, workload.cluster_queue, &flavors)
                    .is_some()
                    && flavors.len() == workload.pod_sets.len();
                let at = portable.admitted.as_ref().map_or(self.now, |a| a.0);
                if fits {
                    if was_detached {
                        taking.report.adopted.push(id);
                    }
                    taking.to_install.push((at, entry.seq, id, flavors));
                } else {
                    taking.detached.insert(id);
                }
                taking.orphans.insert(id, portable);
                self.workloads.keep(entry);
            }
            (Status::Admitted | Status::Detached, Err(_)) => {
                taking.detached.insert(id);
                taking.orphans.insert(id, portable);
                self.workloads.keep(entry);
            }
            (_, Ok(_)) => {
                if status == Status::Orphaned {
                    taking.report.adopted.push(id);
                }
                let backoff_until = match (&entry.reason, status) {
                    (Reason::Backoff { until, .. }, Status::Backoff)
                    | (Reason::PodsReadyBackoff { until, .. }, Status::Backoff) => Some(*until),
                    _ => None,
                };
                if backoff_until.is_none() {
                    entry.reason = Reason::None;
                }
                let scored = portable.scored;
                self.workloads.keep(entry);
                self.requeue(id, scored, backoff_until);
            }
            (_, Err(reason)) => {
                entry.status = Status::Orphaned;
                entry.reason = reason;
                entry.admission = None;
                taking.report.orphaned.push(id);
                taking.orphans.insert(id, portable);
                self.workloads.keep(entry);
            }
        }
    }

    /// Installs the admitted workloads that still fit again, in admission
    /// order so their placements are deterministic: on their flavors,
    /// charged to the new quota, their pods where they were if those nodes
    /// have room, else placed again best-fit.
    fn install_again(
        &mut self,
        mut to_install: Vec<ToInstall>,
        orphans: &mut BTreeMap<WorkloadId, Portable>,
    ) {
        to_install.sort();
        for (at, _, id, flavors) in to_install {
            let portable = orphans.remove(&id);
            let workload = self.workloads[id].workload.clone();
            let cq = workload.cluster_queue;
            let chosen = resolve_flavors(&self.cluster, cq, &flavors).unwrap_or_default();
            let named = portable.as_ref().map_or(&[][..], |p| &p.placements[..]);
            let (counts, borrowing) = match portable.as_ref().and_then(|p| p.admitted.clone()) {
                Some((_, counts, borrowing)) => (counts, borrowing),
                None => (workload.pod_sets.iter().map(|p| p.count).collect(), false),
            };
            let usage = self.usage_of(&workload, &chosen, &counts);
            // The pods stay on their nodes where those are still there with
            // room; otherwise they are placed again, best-fit.
            let placements = match self.kept_placements(named) {
                Some(kept) => kept,
                None => self.place_all(&workload, &chosen, &counts),
            };
            // Not a new admission: the epoch stays, so the driver's finish events still match.
            let entry = &mut self.workloads[id];
            entry.epoch = entry.epoch.wrapping_sub(1);
            self.install(
                cq,
                id,
                Admission {
                    at,
                    pod_sets: chosen,
                    usage,
                    placements,
                    borrowing,
                    counts,
                },
            );
        }
    }

    /// Admitted workloads whose pods were not all ready still wait, with
    /// their timeout counted from their admission, under the policy now in
    /// force.
    fn rearm_pods_ready(&mut self, unready: &Unready) {
        for id in unready.iter() {
            if self.workloads[id].status != Status::Admitted {
                continue;
            }
            match unready.recovering_since(id) {
                Some(since) => self.await_recovery(id, since),
                None => self.await_pods_ready(id),
            }
        }
    }

    /// Puts a pending workload back where it waits: its queue (scored before),
    /// scoring, `Unschedulable` if it can never fit, or its backoff.
    fn requeue(&mut self, id: WorkloadId, scored: bool, backoff_until: Option<Millis>) {
        let entry = &self.workloads[id];
        let cq = entry.workload.cluster_queue;
        let never = if !self
            .cluster
            .namespace_allowed(cq, &entry.workload.namespace)
        {
            Some(Reason::NamespaceNotSelected)
        } else {
            assign::never_fits(&self.ctx(), cq, &entry.workload).map(Reason::NeverFits)
        };
        if let Some(reason) = never {
            let entry = &mut self.workloads[id];
            entry.status = Status::Unschedulable;
            entry.reason = reason;
            return;
        }
        if let Some(until) = backoff_until {
            let entry = &mut self.workloads[id];
            entry.status = Status::Backoff;
            let epoch = entry.epoch;
            self.timers.arm(until, TimerKind::BackoffEnds, id, epoch);
        } else if scored {
            self.enqueue(id);
        } else {
            self.workloads[id].status = Status::Scoring;
            self.unscored.push(id);
        }
    }

    /// Keeps an admitted workload running outside any quota: its pods stay
    /// on their nodes where those are still there with room, else on nodes
    /// of their flavor where that flavor still exists. The nodes it holds.
    fn detach(
        &mut self,
        id: WorkloadId,
        portable: &BTreeMap<WorkloadId, Portable>,
    ) -> Vec<Placement> {
        let entry = &mut self.workloads[id];
        entry.admission = None;
        entry.status = Status::Detached;
        let Some(p) = portable.get(&id) else {
            entry.reason = Reason::Detached {
                cluster_queue: String::new(),
            };
            return Vec::new();
        };
        entry.reason = Reason::Detached {
            cluster_queue: p.cluster_queue.clone(),
        };
        let placements = match self.kept_placements(&p.placements) {
            Some(kept) => kept,
            None => {
                let scratch = &mut Scratch::default();
                let counts = p.admitted.as_ref().map(|a| a.1.clone()).unwrap_or_default();
                let mut placements = Vec::new();
                for (i, ((requests, flavors), count)) in p
                    .requests
                    .iter()
                    .zip(p.flavors.iter().flatten())
                    .zip(&counts)
                    .enumerate()
                {
                    let Some(flavor) = flavors.first().and_then(|(_, f)| self.cluster.flavor_id(f))
                    else {
                        continue;
                    };
                    let Ok(per_pod) = per_pod_ids(&self.cluster, requests) else {
                        continue;
                    };
                    if let Some(placed) = self.capacity.place(
                        scratch,
                        i as u32,
                        &[flavor],
                        *count,
                        &per_pod,
                        &mut By::BestFit,
                    ) {
                        placements.extend(placed);
                    }
                }
                placements
            }
        };
        self.capacity.commit(&placements);
        placements
    }
}

#[cfg(test)]
#[path = "restore_tests.rs"]
mod tests;
