//! What the driver tracks per flavor for the report: utilisation (of node
//! capacity with node pools, else of nominal quota), peak nodes and, with
//! devices, the GPU allocated and fragmented — each a time-weighted
//! average ([`Integral`]).

use arbiter_core::model::cluster::{FlavorId, FlavorResource, ResourceId};
use arbiter_core::model::{Amount, Millis};
use arbiter_core::scheduler::capacity::TypicalShape;
use arbiter_core::scheduler::Scheduler;

use crate::scenario::Scenario;

/// Time-weighted average of a value that changes at discrete instants.
#[derive(Clone, Copy, Default)]
pub(super) struct Integral {
    pub(super) value: f64,
    since: Millis,
    area: f64,
}

impl Integral {
    pub(super) fn set(&mut self, now: Millis, value: f64) {
        self.area += self.value * (now.0 - self.since.0) as f64;
        self.since = now;
        self.value = value;
    }
    pub(super) fn mean(&mut self, end: Millis) -> f64 {
        self.set(end, self.value);
        if end.0 > 0 {
            self.area / end.0 as f64
        } else {
            self.value
        }
    }
}

pub(super) struct FlavorTrack {
    pub(super) name: String,
    pub(super) resource: ResourceId,
    /// Without node pools: the flavor's total nominal quota (denominator).
    pub(super) quota_total: Amount,
    pub(super) quota_used: Amount,
    pub(super) pooled: bool,
    pub(super) usage: Integral,
    pub(super) peak_nodes: u32,
    pub(super) delay: Millis,
    /// (seconds, utilisation) after every step, for the plot.
    pub(super) samples: Vec<(f64, f64)>,
    /// A resource the flavor's pools hold per card (the first, by id), with
    /// the fraction of its capacity allocated and the fraction fragmented.
    pub(super) device: Option<(ResourceId, Integral, Integral)>,
}

pub(super) fn flavor_tracks(scheduler: &Scheduler, scenario: &Scenario) -> Vec<FlavorTrack> {
    let cluster = scheduler.cluster();
    let gpu = cluster.resource_id("nvidia.com/gpu");
    (0..cluster.flavors.len())
        .map(|f| {
            let flavor = FlavorId(f as u16);
            let total_of = |r: ResourceId| -> Amount {
                let fr = cluster.flavor_resource(flavor, r);
                cluster
                    .cluster_queues
                    .iter()
                    .filter_map(|cq| cq.quotas[fr.index()].map(|q| q.nominal))
                    .chain(
                        cluster
                            .cohorts
                            .iter()
                            .filter_map(|c| c.quotas[fr.index()].map(|q| q.nominal)),
                    )
                    .sum()
            };
            let pooled = scheduler.has_pools(flavor);
            let limited = |r: ResourceId| {
                if pooled {
                    scheduler.node_usage(flavor, r).is_some()
                } else {
                    !total_of(r).is_zero()
                }
            };
            let resource = gpu
                .filter(|&g| limited(g))
                .or_else(|| {
                    (0..cluster.resources.len())
                        .map(|r| ResourceId(r as u16))
                        .find(|&r| limited(r))
                })
                .unwrap_or(ResourceId(0));
            let delay = scenario
                .pools
                .iter()
                .find(|p| p.spec.flavor == flavor)
                .map_or(Millis::ZERO, |p| p.provisioning_delay);
            let mut track = FlavorTrack {
                name: cluster.flavors[f].name.clone(),
                resource,
                quota_total: if cluster.resources.is_empty() {
                    Amount::ZERO
                } else {
                    total_of(resource)
                },
                quota_used: Amount::ZERO,
                pooled,
                usage: Integral::default(),
                peak_nodes: scheduler.ready_nodes(flavor),
                delay,
                samples: Vec::new(),
                device: scheduler
                    .device_resources(flavor)
                    .first()
                    .map(|&r| (r, Integral::default(), Integral::default())),
            };
            refresh_pooled(scheduler, &mut track, flavor, Millis::ZERO);
            track
        })
        .collect()
}

pub(super) fn refresh_pooled(
    scheduler: &Scheduler,
    track: &mut FlavorTrack,
    flavor: FlavorId,
    now: Millis,
) {
    if !track.pooled {
        return;
    }
    track.peak_nodes = track.peak_nodes.max(scheduler.ready_nodes(flavor));
    let value = match scheduler.node_usage(flavor, track.resource) {
        Some((used, total)) if !total.is_zero() => used.as_f64() / total.as_f64(),
        _ => 0.0,
    };
    track.usage.set(now, value);
    if let Some((resource, allocated, fragmented)) = &mut track.device {
        let typical = scheduler.typical_pods_all();
        let typical: Vec<TypicalShape<'_>> = typical
            .iter()
            .map(|t| (&t.per_pod[..], &t.flavors[..], t.share))
            .collect();
        if let Some(f) = scheduler
            .fragmentation(flavor, *resource, &typical)
            .filter(|f| !f.capacity.is_zero())
        {
            let capacity = f.capacity.as_f64();
            allocated.set(now, (f.capacity - f.free).as_f64() / capacity);
            fragmented.set(now, f.fragmented / capacity);
        }
    }
}

/// Updates flavor utilisation after quota `usage` was charged (`sign` 1) or released (−1).
pub(super) fn account(
    scheduler: &Scheduler,
    flavors: &mut [FlavorTrack],
    usage: &[(FlavorResource, Amount)],
    sign: i64,
    now: Millis,
) {
    let cluster = scheduler.cluster();
    let mut touched: Vec<FlavorId> = usage.iter().map(|(fr, _)| cluster.split(*fr).0).collect();
    touched.dedup();
    for &(fr, amount) in usage {
        let (f, r) = cluster.split(fr);
        let track = &mut flavors[f.index()];
        if !track.pooled && r == track.resource {
            track.quota_used += amount.saturating_mul(sign);
        }
    }
    for f in touched {
        let track = &mut flavors[f.index()];
        if track.pooled {
            refresh_pooled(scheduler, track, f, now);
        } else {
            let value = if track.quota_total.is_zero() {
                0.0
            } else {
                track.quota_used.as_f64() / track.quota_total.as_f64()
            };
            track.usage.set(now, value);
        }
    }
}
