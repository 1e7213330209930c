//! A trace as a user models it for `arbiter simulate`: one ResourceFlavor
//! per GPU model (its nodes labelled [`MODEL_LABEL`]), node pools per
//! model declaring their cards (`nodePools[].devices`), one ClusterQueue
//! listing every model's flavor with the nodes' totals as quota, and a
//! Workload per task of the order — a task pinned to GPU models (`gpu_spec`)
//! carries a node selector (one model) or a required node affinity
//! (several) on that label; the others, CPU-only ones included, may run
//! anywhere. Task `k` of the order arrives at `k` seconds and runs until
//! the end (no runtime): each is tried once, as it arrives, and nothing
//! departs — the FGD paper's protocol. A task that does not fit is set
//! aside (BestEffortFIFO) and never tried again, as nothing is ever freed
//! that could wake it. [`measure`] reads the paper's metric off the run's
//! report and recounts every card and node from the report's placements.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Task, Trace};
use crate::report::Report;

/// The node label holding a node's GPU model (its value, as in the trace).
pub const MODEL_LABEL: &str = "gpu.model";
/// The namespace, LocalQueue and ClusterQueue of the scenario.
pub const QUEUE: &str = "openb";
/// The device resource: 1000 per GPU, held per card.
pub const GPU_RESOURCE: &str = "example.com/gpu-milli";

/// The ResourceFlavor of a GPU model: its name in lower case.
pub fn flavor_name(model: &str) -> String {
    model.to_ascii_lowercase()
}

/// The Workload of the `k`-th task of the order (copies of a task get
/// their own).
pub fn workload_name(task: &Task, k: usize) -> String {
    format!("{}-{k}", task.name.to_ascii_lowercase())
}

/// The scenario's queueing objects and Simulation (no Workload).
fn cluster(trace: &Trace, out: &mut String) {
    for model in &trace.models {
        let _ = write!(
            out,
            "---\napiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {{name: {}}}\nspec: {{nodeLabels: {{{MODEL_LABEL}: {model}}}}}\n",
            flavor_name(model)
        );
    }
    // Quota: what the model's nodes hold, so only the nodes limit admission.
    let mut totals: Vec<[i64; 3]> = vec![[0; 3]; trace.models.len()];
    for s in trace.shapes() {
        let t = &mut totals[s.model];
        t[0] += s.cpu_milli * s.nodes as i64;
        t[1] += s.memory_mib * s.nodes as i64;
        t[2] += s.gpus as i64 * 1000 * s.nodes as i64;
    }
    let _ = write!(
        out,
        "---\n# Every GPU model's flavor; Kueue's default strategy: a workload that does\n# not fit is set aside until something is freed (here: never).\napiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {{name: {QUEUE}}}\nspec:\n  namespaceSelector: {{}}\n  queueingStrategy: BestEffortFIFO\n  resourceGroups:\n  - coveredResources: [cpu, memory, {GPU_RESOURCE}]\n    flavors:\n"
    );
    for (model, [cpu, memory, gpu]) in trace.models.iter().zip(&totals) {
        let _ = write!(
            out,
            "    - name: {}\n      resources:\n      - {{name: cpu, nominalQuota: {cpu}m}}\n      - {{name: memory, nominalQuota: {memory}Mi}}\n      - {{name: {GPU_RESOURCE}, nominalQuota: \"{gpu}\"}}\n",
            flavor_name(model)
        );
    }
    let _ = write!(
        out,
        "---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {{name: {QUEUE}, namespace: {QUEUE}}}\nspec: {{clusterQueue: {QUEUE}}}\n---\napiVersion: sim.arbiter.dev/v1alpha1\nkind: Simulation\nmetadata: {{name: {QUEUE}}}\nspec:\n  nodePools:\n"
    );
    for s in trace.shapes() {
        let _ = writeln!(
            out,
            "  - {{flavor: {}, nodes: {}, allocatable: {{cpu: {}m, memory: {}Mi, {GPU_RESOURCE}: \"{}\"}}, devices: {{{GPU_RESOURCE}: {{cards: {}}}}}}}",
            flavor_name(&trace.models[s.model]),
            s.nodes,
            s.cpu_milli,
            s.memory_mib,
            s.gpus as u32 * 1000,
            s.gpus
        );
    }
}

/// The Workload of task `task`, `k`-th of the order.
fn workload(task: &Task, k: usize, out: &mut String) {
    let _ = write!(
        out,
        "---\napiVersion: arbiter.dev/v1alpha1\nkind: Workload\nmetadata: {{name: {}, namespace: {QUEUE}, annotations: {{sim.arbiter.dev/arrival: {k}s}}}}\nspec:\n  queueName: {QUEUE}\n  podSets:\n  - name: main\n    template:\n      spec:\n",
        workload_name(task, k)
    );
    let mut models: Vec<&str> = task.gpu_spec.iter().map(String::as_str).collect();
    models.sort_unstable();
    models.dedup();
    match models.as_slice() {
        [] => {}
        [model] => {
            let _ = writeln!(out, "        nodeSelector: {{{MODEL_LABEL}: {model}}}");
        }
        several => {
            let _ = writeln!(
                out,
                "        affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{{key: {MODEL_LABEL}, operator: In, values: [{}]}}]}}]}}}}}}",
                several.join(", ")
            );
        }
    }
    let gpu = if task.gpu_total() > 0 {
        format!(", {GPU_RESOURCE}: \"{}\"", task.gpu_total())
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "        containers:\n        - name: main\n          resources: {{requests: {{cpu: {}m, memory: {}Mi{gpu}}}}}",
        task.cpu_milli, task.memory_mib
    );
}

/// The scenario of `order` (indices into `trace.tasks`) as one YAML
/// stream: what `arbiter simulate` reads.
pub fn scenario(trace: &Trace, order: &[usize]) -> String {
    let mut out = String::with_capacity(600 * order.len() + 4096);
    let _ = writeln!(
        out,
        "# {} tasks of an openb trace in submission order, task k arriving at k s,\n# none departing (made by examples/openb.rs; see crates/sim/src/trace/manifests.rs).",
        order.len()
    );
    cluster(trace, &mut out);
    for (k, &index) in order.iter().enumerate() {
        workload(&trace.tasks[index], k, &mut out);
    }
    out
}

/// A policy bundle with one flavor policy listing every GPU model's flavor
/// with `orderByPlacement: true`: a workload's flavors are tried in the
/// order of where the placement policy would put its first pod.
pub fn flavor_order_bundle(trace: &Trace) -> String {
    let names: Vec<String> = trace
        .models
        .iter()
        .map(|m| format!("'{}'", flavor_name(m)))
        .collect();
    format!(
        "# The ClusterQueue's flavors tried in the order placement prefers (made by\n# examples/openb.rs); use it beside a placement policy.\napiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: openb-flavor-order, version: \"1\"}}\nspec:\n  policies:\n  - name: gpu-models\n    hook: flavor\n    orderByPlacement: true\n    cel: {{expression: \"[{}]\"}}\n",
        names.join(", ")
    )
}

/// What a run of [`scenario`] gave: after each task of the order, the GPU
/// arrived and the GPU allocated so far (milli-GPUs), and how many tasks
/// were admitted.
#[derive(Clone, Debug)]
pub struct Measured {
    pub capacity_milli: i64,
    pub arrived: Vec<i64>,
    pub allocated: Vec<i64>,
    pub admitted: usize,
}

impl Measured {
    /// The paper's metric at `percent` arrived ([`super::allocation_at`]).
    pub fn allocation_at(&self, percent: i64) -> Option<f64> {
        super::allocation_at(self.capacity_milli, &self.arrived, &self.allocated, percent)
    }
}

/// The paper's measures from the report of a run of
/// `scenario(trace, order)`: the GPU allocated after each arrival (the
/// tasks admitted by then), with every card and node recounted from the
/// report's placements — an error if any holds more than it has, if an
/// admitted task has no placement, or is on a model it may not use.
pub fn measure(trace: &Trace, order: &[usize], report: &Report) -> Result<Measured, String> {
    let by_name: BTreeMap<&str, usize> = report
        .workloads
        .iter()
        .enumerate()
        .map(|(i, w)| (w.name.as_str(), i))
        .collect();
    let shapes = trace.shapes();
    // Per flavor: node index → shape index.
    let mut nodes_of: Vec<Vec<usize>> = vec![Vec::new(); trace.models.len()];
    for (i, s) in shapes.iter().enumerate() {
        nodes_of[s.model].extend(std::iter::repeat_n(i, s.nodes as usize));
    }
    let flavor_of: BTreeMap<String, usize> = trace
        .models
        .iter()
        .enumerate()
        .map(|(i, m)| (flavor_name(m), i))
        .collect();
    let mut cards: BTreeMap<(usize, usize, u16), i64> = BTreeMap::new();
    let mut held: BTreeMap<(usize, usize), [i64; 2]> = BTreeMap::new();
    let mut admissions: Vec<(f64, i64)> = Vec::new();
    let mut arrivals = Vec::with_capacity(order.len());
    for (k, &index) in order.iter().enumerate() {
        let task = &trace.tasks[index];
        let name = workload_name(task, k);
        let w = &report.workloads[*by_name
            .get(name.as_str())
            .ok_or(format!("{name}: not in the report"))?];
        arrivals.push((w.arrival_seconds, task.gpu_total()));
        let Some(at) = w.admitted_seconds else {
            continue;
        };
        admissions.push((at, task.gpu_total()));
        let [p] = w.placement.as_slice() else {
            return Err(format!(
                "{name}: admitted with placements {:?}",
                w.placement
            ));
        };
        let (flavor, node) = p
            .node
            .rsplit_once('-')
            .and_then(|(f, n)| Some((*flavor_of.get(f)?, n.parse::<usize>().ok()?)))
            .ok_or(format!("{name}: placed on an unknown node {}", p.node))?;
        let model = &trace.models[flavor];
        if !task.gpu_spec.is_empty() && !task.gpu_spec.contains(model) {
            return Err(format!(
                "{name}: asks {:?}, placed on {model}",
                task.gpu_spec
            ));
        }
        let shape = &shapes[*nodes_of[flavor]
            .get(node)
            .ok_or(format!("{name}: no node {}", p.node))?];
        let taken = p.cards.get(GPU_RESOURCE).cloned().unwrap_or_default();
        let per_card = if task.gpu_total() <= 1000 {
            task.gpu_total()
        } else {
            1000
        };
        if taken.len() as i64 * per_card != task.gpu_total() {
            return Err(format!(
                "{name}: asks {} milli-GPU, holds cards {taken:?}",
                task.gpu_total()
            ));
        }
        for card in taken {
            if card >= shape.gpus {
                return Err(format!("{name}: card {card} of {} does not exist", p.node));
            }
            let used = cards.entry((flavor, node, card)).or_default();
            *used += per_card;
            if *used > 1000 {
                return Err(format!("{}: card {card} holds {used} milli-GPU", p.node));
            }
        }
        let used = held.entry((flavor, node)).or_default();
        used[0] += task.cpu_milli;
        used[1] += task.memory_mib;
        if used[0] > shape.cpu_milli || used[1] > shape.memory_mib {
            return Err(format!(
                "{}: holds {}m CPU, {} MiB",
                p.node, used[0], used[1]
            ));
        }
    }
    admissions.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut arrived, mut allocated) = (0, 0);
    let mut next = 0;
    let mut out = Measured {
        capacity_milli: trace.gpu_capacity(),
        arrived: Vec::with_capacity(order.len()),
        allocated: Vec::with_capacity(order.len()),
        admitted: admissions.len(),
    };
    for (at, gpu) in arrivals {
        arrived += gpu;
        while next < admissions.len() && admissions[next].0 <= at {
            allocated += admissions[next].1;
            next += 1;
        }
        out.arrived.push(arrived);
        out.allocated.push(allocated);
    }
    Ok(out)
}
