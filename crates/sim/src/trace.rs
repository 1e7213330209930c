//! A GPU-cluster trace replayed pod by pod onto the core's node capacity,
//! as the FGD paper (*Beware of Fragmentation*, USENIX ATC'23) measures
//! schedulers on Alibaba's openb trace: every task is tried once, in the
//! order given, and nothing departs. The nodes become one flavor per GPU
//! model and a pool per node shape, with `example.com/gpu-milli` held per
//! card (1000 per GPU), so a share needs one card with room and whole GPUs
//! need fully free cards. The placement is the core's
//! ([`Capacity::place`]): best fit, or the scores of a [`Scorer`] — the
//! same path the placement hook takes at admission.

use std::collections::BTreeMap;
use std::path::Path;

use arbiter_core::model::cluster::{FlavorId, ResourceId};
use arbiter_core::model::Amount;
use arbiter_core::scheduler::capacity::{By, Capacity, DeviceSpec, PoolSpec, Scorer, Scratch};
use arbiter_core::scheduler::workload::Placement;
use serde::Deserialize;

pub mod manifests;

/// The resources of a replay, by `ResourceId`.
pub const RESOURCES: [&str; 3] = ["cpu", "memory", "example.com/gpu-milli"];
pub const CPU: ResourceId = ResourceId(0);
pub const MEMORY: ResourceId = ResourceId(1);
pub const GPU_MILLI: ResourceId = ResourceId(2);

/// One GPU node of the trace.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct TraceNode {
    #[serde(rename = "sn")]
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    #[serde(rename = "gpu")]
    pub gpus: u16,
    pub model: String,
}

#[derive(Deserialize)]
struct TaskRow {
    name: String,
    cpu_milli: i64,
    memory_mib: i64,
    num_gpu: u32,
    gpu_milli: i64,
    #[serde(default)]
    gpu_spec: String,
}

/// One task (one pod) of the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub num_gpu: u32,
    /// Per GPU, 0–1000 (the artifact caps larger values at 1000).
    pub gpu_milli: i64,
    /// The GPU models it may run on; empty: any.
    pub gpu_spec: Vec<String>,
}

impl Task {
    /// The GPU it asks in all, in milli-GPUs.
    pub fn gpu_total(&self) -> i64 {
        self.num_gpu as i64 * self.gpu_milli
    }
}

/// Nodes of one shape: GPU model (index into [`Trace::models`]), CPU,
/// memory, GPUs, and how many.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeShape {
    pub model: usize,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub gpus: u16,
    pub nodes: u32,
}

/// A trace: its nodes, and its tasks sorted by name.
#[derive(Clone, Debug)]
pub struct Trace {
    pub nodes: Vec<TraceNode>,
    pub tasks: Vec<Task>,
    /// The GPU models, in order of first appearance in the node list: flavor `i` is model `i`.
    pub models: Vec<String>,
}

/// A trace file that cannot be read, with where and why.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct TraceError {
    pub file: String,
    pub message: String,
}

fn rows<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, TraceError> {
    let fail = |message: String| TraceError {
        file: path.display().to_string(),
        message,
    };
    let mut reader = csv::Reader::from_path(path).map_err(|e| fail(e.to_string()))?;
    reader
        .deserialize()
        .map(|row| {
            row.map_err(|e| {
                let at = e
                    .position()
                    .map(|p| format!("line {}: ", p.line()))
                    .unwrap_or_default();
                fail(format!("{at}{e}"))
            })
        })
        .collect()
}

impl Trace {
    /// Reads a node list (`sn, cpu_milli, memory_mib, gpu, model`) and a
    /// task list (`name, cpu_milli, memory_mib, num_gpu, gpu_milli,
    /// gpu_spec, …`) as Alibaba publishes them.
    pub fn load(nodes: &Path, tasks: &Path) -> Result<Trace, TraceError> {
        let node_rows: Vec<TraceNode> = rows(nodes)?;
        let mut models: Vec<String> = Vec::new();
        for (i, n) in node_rows.iter().enumerate() {
            if n.gpus == 0 || n.model.is_empty() {
                return Err(TraceError {
                    file: nodes.display().to_string(),
                    message: format!(
                        "row {}: node {} has no GPU or no model; give a list of GPU nodes",
                        i + 1,
                        n.name
                    ),
                });
            }
            if !models.contains(&n.model) {
                models.push(n.model.clone());
            }
        }
        let mut list = Vec::new();
        for (i, r) in rows::<TaskRow>(tasks)?.into_iter().enumerate() {
            if r.cpu_milli < 0 || r.memory_mib < 0 {
                return Err(TraceError {
                    file: tasks.display().to_string(),
                    message: format!("row {}: task {} asks a negative amount", i + 1, r.name),
                });
            }
            list.push(Task {
                name: r.name,
                cpu_milli: r.cpu_milli,
                memory_mib: r.memory_mib,
                num_gpu: r.num_gpu,
                gpu_milli: if r.num_gpu == 0 {
                    0
                } else {
                    r.gpu_milli.clamp(0, 1000)
                },
                gpu_spec: r
                    .gpu_spec
                    .split('|')
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned)
                    .collect(),
            });
        }
        list.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Trace {
            nodes: node_rows,
            tasks: list,
            models,
        })
    }

    /// The nodes' GPU capacity, in milli-GPUs.
    pub fn gpu_capacity(&self) -> i64 {
        self.nodes.iter().map(|n| n.gpus as i64 * 1000).sum()
    }

    /// The node shapes (GPU model, CPU, memory, GPUs) in order of first
    /// appearance in the node list, with how many nodes have each.
    pub fn shapes(&self) -> Vec<NodeShape> {
        let mut out: Vec<NodeShape> = Vec::new();
        let mut index: BTreeMap<(usize, i64, i64, u16), usize> = BTreeMap::new();
        for n in &self.nodes {
            let model = self
                .model_index(&n.model)
                .expect("every node's model is listed");
            let key = (model, n.cpu_milli, n.memory_mib, n.gpus);
            let at = *index.entry(key).or_insert_with(|| {
                out.push(NodeShape {
                    model,
                    cpu_milli: n.cpu_milli,
                    memory_mib: n.memory_mib,
                    gpus: n.gpus,
                    nodes: 0,
                });
                out.len() - 1
            });
            out[at].nodes += 1;
        }
        out
    }

    /// The nodes as the core's capacity: flavor `i` is GPU model `i`, one
    /// pool per node shape ([`Trace::shapes`], in that order),
    /// `example.com/gpu-milli` held per card.
    pub fn capacity(&self) -> Capacity {
        let pools: Vec<PoolSpec> = self
            .shapes()
            .into_iter()
            .map(|s| PoolSpec {
                flavor: FlavorId(s.model as u16),
                nodes: s.nodes,
                allocatable: vec![
                    (CPU, Amount::from_milli(s.cpu_milli)),
                    (MEMORY, Amount::from_units(s.memory_mib << 20)),
                    (GPU_MILLI, Amount::from_units(s.gpus as i64 * 1000)),
                ],
                min_nodes: s.nodes,
                max_nodes: s.nodes,
                devices: vec![DeviceSpec {
                    resource: GPU_MILLI,
                    cards: s.gpus,
                    per_card: Amount::from_units(1000),
                }],
                names: Vec::new(),
            })
            .collect();
        Capacity::new(self.models.len(), RESOURCES.len(), &pools)
    }

    pub fn model_index(&self, model: &str) -> Option<usize> {
        self.models.iter().position(|m| m == model)
    }

    /// What one pod of `task` asks.
    pub fn per_pod(&self, task: &Task) -> Vec<(ResourceId, Amount)> {
        let mut per_pod = vec![
            (CPU, Amount::from_milli(task.cpu_milli)),
            (MEMORY, Amount::from_units(task.memory_mib << 20)),
        ];
        if task.gpu_total() > 0 {
            per_pod.push((GPU_MILLI, Amount::from_units(task.gpu_total())));
        }
        per_pod
    }

    /// The flavors (GPU models) `task` may use: its `gpu_spec`, or all.
    pub fn flavors_for(&self, task: &Task) -> Vec<FlavorId> {
        if task.gpu_spec.is_empty() {
            return (0..self.models.len()).map(|m| FlavorId(m as u16)).collect();
        }
        task.gpu_spec
            .iter()
            .filter_map(|m| self.model_index(m))
            .map(|m| FlavorId(m as u16))
            .collect()
    }
}

/// The FGD paper artifact's submission order of `tasks` per seed, topped up
/// to `ratio` of the nodes' GPU capacity: what `script`
/// (`examples/openb/order.go`) prints, run with `go run` so that Go's own
/// `math/rand` draws it. Indices are into the tasks sorted by name
/// ([`Trace::tasks`]); copies repeat an index.
pub fn artifact_orders(
    script: &Path,
    tasks: &Path,
    nodes: &Path,
    ratio: f64,
    seeds: &[u64],
) -> Result<BTreeMap<u64, Vec<usize>>, String> {
    let out = std::process::Command::new("go")
        .arg("run")
        .arg(script)
        .arg(tasks)
        .arg(nodes)
        .arg(ratio.to_string())
        .args(seeds.iter().map(u64::to_string))
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(|e| {
            format!(
                "running `go run {}`: {e} (Go must be on PATH)",
                script.display()
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "go run {}: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let mut orders = BTreeMap::new();
    while let Some(head) = lines.next() {
        let seed: u64 = head
            .strip_prefix("seed ")
            .and_then(|s| s.parse().ok())
            .ok_or(format!(
                "{} printed {head:?}, not `seed N`",
                script.display()
            ))?;
        let order = lines
            .next()
            .ok_or(format!("{} stopped early", script.display()))?
            .split(' ')
            .map(|i| {
                i.parse()
                    .map_err(|_| format!("{} printed {i:?}", script.display()))
            })
            .collect::<Result<Vec<usize>, String>>()?;
        orders.insert(seed, order);
    }
    Ok(orders)
}

/// A replay's outcome: after each task, the GPU asked by the tasks so far
/// and the GPU allocated, in milli-GPUs; and where each task went.
#[derive(Debug)]
pub struct Replay {
    pub capacity_milli: i64,
    pub arrived: Vec<i64>,
    pub allocated: Vec<i64>,
    /// Per task of the order: its placements, or `None` if it did not fit.
    pub placed: Vec<Option<Vec<Placement>>>,
    /// The nodes at the end.
    pub end: Capacity,
}

impl Replay {
    /// The paper's allocation metric at `percent` of the GPU capacity
    /// arrived ([`allocation_at`]).
    pub fn allocation_at(&self, percent: i64) -> Option<f64> {
        allocation_at(self.capacity_milli, &self.arrived, &self.allocated, percent)
    }
}

/// The paper's allocation metric at `percent` of the GPU capacity arrived:
/// given, after each task of the order, the GPU arrived so far and the GPU
/// allocated (milli-GPUs), the mean allocation (percent of capacity) over
/// the tasks after which the arrived GPU, rounded to a whole percent, is
/// `percent` (the artifact's `merge_alloc_discrete.py`, including its
/// fallback to ±1 percent when none is).
pub fn allocation_at(
    capacity_milli: i64,
    arrived: &[i64],
    allocated: &[i64],
    percent: i64,
) -> Option<f64> {
    let pct = |milli: i64| milli as f64 * 100.0 / capacity_milli as f64;
    let mean = |window: i64| {
        let picked: Vec<f64> = arrived
            .iter()
            .zip(allocated)
            .filter(|(a, _)| (round_half_even(pct(**a)) - percent).abs() <= window)
            .map(|(_, u)| pct(*u))
            .collect();
        (!picked.is_empty()).then(|| picked.iter().sum::<f64>() / picked.len() as f64)
    };
    mean(0).or_else(|| mean(1))
}

/// Python's `round(x)`: halves to even.
fn round_half_even(x: f64) -> i64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 && r as i64 % 2 != 0 {
        (r - x.signum()) as i64
    } else {
        r as i64
    }
}

/// Tries each task of `order` (indices into `trace.tasks`) once, in order,
/// on the nodes its GPU models allow, and keeps it there if it fits. With
/// `scorer`, pods go where it scores highest (among equal scores, the
/// node first in an order of the nodes drawn from `seed`, as the
/// artifact's scheduler prefers the node whose randomly prefixed name
/// sorts first); without, best fit.
pub fn replay(
    trace: &Trace,
    order: &[usize],
    scorer: Option<&mut dyn Scorer>,
    seed: u64,
) -> Replay {
    replay_observed(trace, order, scorer, seed, &mut |_, _| {})
}

/// Told what each task's pod asks as it arrives, and the flavors it may
/// use (empty: any).
pub type Arrivals<'a> = dyn FnMut(&[(ResourceId, Amount)], &[FlavorId]) + 'a;

/// [`replay`], telling `arrived_pod` what each task's pod asks as it arrives,
/// before it is placed (as the scheduler records a workload's pods when it
/// is submitted).
pub fn replay_observed(
    trace: &Trace,
    order: &[usize],
    mut scorer: Option<&mut dyn Scorer>,
    seed: u64,
    arrived_pod: &mut Arrivals<'_>,
) -> Replay {
    let mut capacity = trace.capacity();
    let mut arrived = 0;
    let mut allocated = 0;
    let mut out = Replay {
        capacity_milli: trace.gpu_capacity(),
        arrived: Vec::with_capacity(order.len()),
        allocated: Vec::with_capacity(order.len()),
        placed: Vec::with_capacity(order.len()),
        end: Capacity::default(),
    };
    for &index in order {
        let task = &trace.tasks[index];
        arrived += task.gpu_total();
        let per_pod = trace.per_pod(task);
        let flavors = trace.flavors_for(task);
        arrived_pod(
            &per_pod,
            if task.gpu_spec.is_empty() {
                &[]
            } else {
                &flavors
            },
        );
        let mut by = match scorer.as_deref_mut() {
            Some(scorer) => By::Score { scorer, salt: seed },
            None => By::BestFit,
        };
        let placed = capacity.place(&mut Scratch::default(), 0, &flavors, 1, &per_pod, &mut by);
        if let Some(p) = &placed {
            capacity.commit(p);
            allocated += task.gpu_total();
        }
        out.arrived.push(arrived);
        out.allocated.push(allocated);
        out.placed.push(placed);
    }
    out.end = capacity;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_rounding() {
        assert_eq!(round_half_even(99.5), 100);
        assert_eq!(round_half_even(100.5), 100);
        assert_eq!(round_half_even(100.49), 100);
        assert_eq!(round_half_even(100.51), 101);
    }
}
