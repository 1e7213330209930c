//! The Simulation's node pools (`spec.nodePools`), checked against the
//! cluster: flavor, allocatable, devices, labels, node bounds and
//! provisioning delay. Called by `scenario`'s build; reads no file.

use arbiter_core::model::cluster::Cluster;
use arbiter_core::model::load::Source;
use arbiter_core::model::sim_api;
use arbiter_core::model::{limits, Amount, Millis};
use arbiter_core::scheduler::capacity::{DeviceSpec, PoolSpec};

use super::SimPool;
/// The Simulation's node pools, checked against the cluster; a pool with
/// an unknown flavor or too many nodes is left out with an error.
pub(super) fn node_pools(
    cluster: &Cluster,
    source: &Source,
    sim: &sim_api::Simulation,
    errors: &mut Vec<String>,
) -> Vec<SimPool> {
    sim.spec
        .node_pools
        .iter()
        .enumerate()
        .filter_map(|(i, pool)| {
            let field = format!("{source}: Simulation spec.nodePools[{i}]");
            node_pool(cluster, &field, pool, errors)
        })
        .collect()
}

/// One node pool (named `field` in errors): its flavor, allocatable,
/// devices, node bounds and provisioning delay.
fn node_pool(
    cluster: &Cluster,
    field: &str,
    pool: &sim_api::NodePool,
    errors: &mut Vec<String>,
) -> Option<SimPool> {
    let Some(flavor) = cluster.flavor_id(&pool.flavor) else {
        errors.push(format!(
            "{field}.flavor: ResourceFlavor `{}` is not defined; define it or fix the name",
            pool.flavor
        ));
        return None;
    };
    let mut allocatable = Vec::new();
    for (name, q) in &pool.allocatable {
        match Amount::from_quantity(q) {
            Ok(a) if a.is_negative() => {
                errors.push(format!("{field}.allocatable.{name}: {a} is negative"))
            }
            Ok(a) => {
                if let Some(r) = cluster.resource_id(name) {
                    allocatable.push((r, a));
                }
            }
            Err(e) => errors.push(format!("{field}.allocatable.{name}: {e}")),
        }
    }
    allocatable.sort();
    let mut devices = Vec::new();
    for (name, device) in &pool.devices {
        let field = format!("{field}.devices.{name}");
        let Some(r) = cluster.resource_id(name) else {
            // Nothing asks for it: no card of it is ever taken.
            continue;
        };
        let Some(&(_, total)) = allocatable.iter().find(|(ar, _)| *ar == r) else {
            errors.push(format!(
                "{field}: the pool's allocatable does not list {name}; give each node's total there (cards × one card)"
            ));
            continue;
        };
        match DeviceSpec::split(r, name, total, device.cards as u64) {
            Ok(spec) => devices.push(spec),
            Err(e) => errors.push(format!("{field}.cards: {e}")),
        }
    }
    let min_nodes = pool.min_nodes.unwrap_or(pool.nodes);
    let max_nodes = pool.max_nodes.unwrap_or(pool.nodes);
    let cap = limits::MAX_NODES_PER_POOL;
    if max_nodes.max(pool.nodes) > cap {
        errors.push(format!(
            "{field}: nodes {}, maxNodes {max_nodes}: more than the {cap} nodes a pool may have; split it into several pools",
            pool.nodes
        ));
        return None;
    }
    if min_nodes > max_nodes || pool.nodes > max_nodes {
        errors.push(format!(
            "{field}: nodes {}, minNodes {min_nodes}, maxNodes {max_nodes} must satisfy minNodes ≤ maxNodes and nodes ≤ maxNodes",
            pool.nodes
        ));
    }
    let provisioning_delay = match pool.provisioning_delay.as_deref().map(Millis::parse) {
        None => Millis::ZERO,
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            errors.push(format!("{field}.provisioningDelay: {e}"));
            Millis::ZERO
        }
    };
    let mut labels = cluster.flavors[flavor.index()].node_labels.clone();
    for (key, value) in &pool.labels {
        match labels.get(key) {
            Some(given) if given != value => errors.push(format!(
                "{field}.labels.{key}: {value}, but ResourceFlavor {}'s nodeLabels give {given}; drop one",
                pool.flavor
            )),
            _ => {
                labels.insert(key.clone(), value.clone());
            }
        }
    }
    Some(SimPool {
        labels,
        spec: PoolSpec {
            flavor,
            nodes: pool.nodes,
            allocatable,
            min_nodes,
            max_nodes,
            devices,
            names: Vec::new(),
        },
        provisioning_delay,
    })
}
