//! Scenario generators for Kueue's published scheduler-performance shapes
//! (`test/performance/scheduler` in Kueue): cohorts of ClusterQueues with
//! 20 CPU nominal quota and a borrowing limit of 100, fed by three workload
//! classes (small, medium, large). Produces ordinary scenario YAML, so the
//! same text runs through `arbiter simulate` and the benchmarks. Pure.

use std::fmt::Write;

/// One workload class of a [`PerfScenario`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Class {
    pub name: &'static str,
    /// Workloads per ClusterQueue.
    pub count: u32,
    pub cpu: u32,
    pub runtime_ms: u32,
    pub priority: i32,
    pub interval_ms: u32,
}

/// A whole benchmark scenario in one of Kueue's performance shapes: its
/// cohorts, ClusterQueues per cohort and workload classes.
#[derive(Clone, Debug, PartialEq)]
pub struct PerfScenario {
    pub cohorts: u32,
    pub queues_per_cohort: u32,
    pub classes: Vec<Class>,
}

impl PerfScenario {
    /// 5 cohorts × 6 ClusterQueues; per queue 350 small, 100 medium, 50 large: 15,000 workloads.
    pub fn baseline() -> PerfScenario {
        PerfScenario {
            cohorts: 5,
            queues_per_cohort: 6,
            classes: vec![
                Class {
                    name: "small",
                    count: 350,
                    cpu: 1,
                    runtime_ms: 200,
                    priority: 50,
                    interval_ms: 100,
                },
                Class {
                    name: "medium",
                    count: 100,
                    cpu: 5,
                    runtime_ms: 500,
                    priority: 100,
                    interval_ms: 500,
                },
                Class {
                    name: "large",
                    count: 50,
                    cpu: 20,
                    runtime_ms: 1000,
                    priority: 200,
                    interval_ms: 1200,
                },
            ],
        }
    }

    /// 10 cohorts × 100 ClusterQueues, 50,000 workloads in the baseline's 7:2:1 mix.
    pub fn large_scale() -> PerfScenario {
        let mut shape = PerfScenario::baseline();
        shape.cohorts = 10;
        shape.queues_per_cohort = 100;
        for (class, count) in shape.classes.iter_mut().zip([35, 10, 5]) {
            class.count = count;
        }
        shape
    }

    pub fn workloads(&self) -> u64 {
        let per_queue: u64 = self.classes.iter().map(|c| c.count as u64).sum();
        per_queue * (self.cohorts * self.queues_per_cohort) as u64
    }

    /// The scenario as multi-document YAML.
    pub fn to_yaml(&self) -> String {
        let mut out =
            String::with_capacity(4096 + 1024 * (self.cohorts * self.queues_per_cohort) as usize);
        let _ = writeln!(
            out,
            "# Kueue scheduler-performance shape: {} cohorts x {} ClusterQueues, {} workloads.",
            self.cohorts,
            self.queues_per_cohort,
            self.workloads()
        );
        out.push_str("apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: default}\nspec: {}\n");
        for c in 0..self.cohorts {
            for q in 0..self.queues_per_cohort {
                let cq = format!("cq-{c}-{q}");
                let ns = format!("ns-{c}-{q}");
                let _ = write!(
                    out,
                    "---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: {cq}}}
spec:
  cohort: cohort-{c}
  preemption: {{reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{{name: cpu, nominalQuota: \"20\", borrowingLimit: \"100\"}}]
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {{name: lq, namespace: {ns}}}
spec: {{clusterQueue: {cq}}}
"
                );
                for class in &self.classes {
                    let _ = write!(
                        out,
                        "---
apiVersion: sim.arbiter.dev/v1alpha1
kind: WorkloadGenerator
metadata: {{name: {name}-{c}-{q}}}
spec:
  count: {count}
  namespace: {ns}
  queueName: lq
  interval: {interval}ms
  priority: {priority}
  runtime: {runtime}ms
  podSets: [{{name: main, count: 1, requests: {{cpu: \"{cpu}\"}}}}]
",
                        name = class.name,
                        count = class.count,
                        interval = class.interval_ms,
                        priority = class.priority,
                        runtime = class.runtime_ms,
                        cpu = class.cpu,
                    );
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_have_the_published_sizes() {
        assert_eq!(PerfScenario::baseline().workloads(), 15_000);
        assert_eq!(PerfScenario::large_scale().workloads(), 50_000);
    }

    #[test]
    fn generated_yaml_loads_and_builds() {
        let yaml = PerfScenario {
            cohorts: 2,
            queues_per_cohort: 2,
            classes: PerfScenario::baseline().classes,
        }
        .to_yaml();
        let loaded =
            arbiter_core::model::load::load_str(&yaml, std::path::Path::new("gen.yaml")).unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let scenario = crate::scenario::build(loaded).unwrap();
        assert_eq!(scenario.jobs.len(), 4 * 500);
        assert_eq!(scenario.cluster.cluster_queues.len(), 4);
    }
}
