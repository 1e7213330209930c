//! The documented caps on numbers that arrive in manifests, scenarios and
//! jobs. Past a cap the input is refused with a message naming the field,
//! the value and the cap (exit 1 in the CLI), instead of the scheduler
//! spending minutes or gigabytes on it. Data only; checked where each
//! number is read (`jobs`, `model::cluster`, the simulator's scenario).

use super::Millis;

/// Pods in one pod set (Job `parallelism`, `replicas`, a Workload's `count`).
pub(crate) const MAX_PODS_PER_POD_SET: u32 = 100_000;
/// Nodes in one simulated node pool (`nodes` and `maxNodes`).
pub const MAX_NODES_PER_POOL: u32 = 10_000;

/// Cards of one device resource per node (`Simulation` node pools' `devices`).
pub const MAX_CARDS_PER_NODE: u32 = 256;
/// Workloads one `WorkloadGenerator` may generate (`count`).
pub const MAX_GENERATED_WORKLOADS: u32 = 1_000_000;
/// The shortest `adaptiveWeights.adjustmentInterval`.
pub(crate) const MIN_ADJUSTMENT_INTERVAL: Millis = Millis(1_000);
