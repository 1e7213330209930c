//! The Kueue performance shapes' YAML (`arbiter_sim::generate::PerfScenario`) as
//! what the operator benchmarks apply (queue configuration, Namespaces,
//! priority classes) and create (each WorkloadGenerator's Jobs), shared by
//! `operator-perf` and `operator-scale`.

// Each of the two examples uses a part of it.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Context as _;
use arbiter_core::model::{Amount, Millis};
use serde_json::{json, Value};

/// One Job the runner will create.
#[derive(Clone, Debug)]
pub struct Planned {
    pub name: String,
    pub namespace: String,
    pub class: String,
    pub cpu: String,
    pub cpu_cores: f64,
    pub priority_class: String,
    pub runtime: Duration,
    /// When to create it, from the start of the run.
    pub due: Duration,
}

/// One WorkloadGenerator of the shape: `count` Jobs, one every `interval`.
#[derive(Clone, Debug)]
pub struct Generator {
    pub name: String,
    pub namespace: String,
    pub class: String,
    pub cpu: String,
    pub priority_class: String,
    pub runtime: Duration,
    pub interval: Duration,
    pub count: u64,
}

/// What the shape's YAML turns into.
pub struct Plan {
    /// ResourceFlavors, Cohorts, ClusterQueues, LocalQueues, priority classes.
    pub config: Vec<Value>,
    pub namespaces: BTreeSet<String>,
    /// Namespace → ClusterQueue (through its LocalQueue).
    pub cluster_queue_of: BTreeMap<String, String>,
    /// ClusterQueue → nominal CPU (cores).
    pub nominal: BTreeMap<String, f64>,
    pub generators: Vec<Generator>,
    pub jobs: Vec<Planned>,
}

pub fn str_at<'a>(value: &'a Value, pointer: &str) -> anyhow::Result<&'a str> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .with_context(|| format!("no string at {pointer} in {value}"))
}

fn millis(value: &Value, pointer: &str) -> anyhow::Result<Duration> {
    let text = str_at(value, pointer)?;
    let ms = Millis::parse(text).map_err(|e| anyhow::anyhow!("{pointer} {text:?}: {e}"))?;
    Ok(Duration::from_millis(ms.0.max(0) as u64))
}

/// The shape's scenario YAML as what to apply and what to create.
pub fn plan(yaml: &str) -> anyhow::Result<Plan> {
    let mut plan = Plan {
        config: Vec::new(),
        namespaces: BTreeSet::new(),
        cluster_queue_of: BTreeMap::new(),
        nominal: BTreeMap::new(),
        generators: Vec::new(),
        jobs: Vec::new(),
    };
    let mut priorities = BTreeSet::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(yaml).enumerate() {
        let value: Value = serde::Deserialize::deserialize(doc)
            .with_context(|| format!("the shape's document {}", i + 1))?;
        match value["kind"].as_str().unwrap_or_default() {
            "ResourceFlavor" | "Cohort" => plan.config.push(value),
            "ClusterQueue" => {
                let name = str_at(&value, "/metadata/name")?.to_string();
                let nominal = value
                    .pointer("/spec/resourceGroups/0/flavors/0/resources")
                    .and_then(Value::as_array)
                    .and_then(|r| r.iter().find(|r| r["name"] == "cpu"))
                    .and_then(|r| r["nominalQuota"].as_str())
                    .with_context(|| format!("ClusterQueue {name} has no cpu nominalQuota"))?;
                let nominal = Amount::parse(nominal)
                    .map_err(|e| anyhow::anyhow!("ClusterQueue {name}: {e}"))?;
                plan.nominal.insert(name, nominal.as_f64());
                plan.config.push(value);
            }
            "LocalQueue" => {
                let namespace = str_at(&value, "/metadata/namespace")?.to_string();
                let cq = str_at(&value, "/spec/clusterQueue")?.to_string();
                plan.namespaces.insert(namespace.clone());
                plan.cluster_queue_of.insert(namespace, cq);
                plan.config.push(value);
            }
            "WorkloadGenerator" => {
                let generator = str_at(&value, "/metadata/name")?;
                let class = generator.split('-').next().unwrap_or(generator).to_string();
                let spec = &value["spec"];
                let count = spec["count"].as_u64().context("generator count")?;
                let interval = millis(spec, "/interval")?;
                let runtime = millis(spec, "/runtime")?;
                let priority = spec["priority"].as_i64().context("generator priority")?;
                priorities.insert(priority);
                let cpu = str_at(spec, "/podSets/0/requests/cpu")?.to_string();
                let cpu_cores = Amount::parse(&cpu)
                    .map_err(|e| anyhow::anyhow!("{generator}: cpu {cpu}: {e}"))?
                    .as_f64();
                let namespace = str_at(spec, "/namespace")?.to_string();
                for n in 0..count {
                    plan.jobs.push(Planned {
                        name: format!("{generator}-{n}"),
                        namespace: namespace.clone(),
                        class: class.clone(),
                        cpu: cpu.clone(),
                        cpu_cores,
                        priority_class: format!("p{priority}"),
                        runtime,
                        due: interval * (n as u32 + 1),
                    });
                }
                plan.generators.push(Generator {
                    name: generator.to_string(),
                    namespace,
                    class,
                    cpu,
                    priority_class: format!("p{priority}"),
                    runtime,
                    interval,
                    count,
                });
            }
            _ => {}
        }
    }
    for priority in priorities {
        plan.config.push(json!({
            "apiVersion": "arbiter.dev/v1alpha1", "kind": "WorkloadPriorityClass",
            "metadata": {"name": format!("p{priority}")}, "value": priority,
        }));
    }
    plan.jobs.sort_by_key(|j| j.due);
    Ok(plan)
}
