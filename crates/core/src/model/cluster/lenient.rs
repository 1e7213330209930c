//! Building what is valid (Kueue's rule: each queue object is valid or not
//! on its own). [`ClusterBuilder::build_lenient`] builds the configuration
//! without every object that has a problem of its own and without every
//! object that depends on one — the LocalQueues of a ClusterQueue left out,
//! the ClusterQueues of a Cohort left out or in a cycle, the Cohorts under
//! one — and lists each such object as [`Inactive`] with a typed reason and
//! the builder's own errors. Everything else is in force. It reuses the
//! strict builder: build, leave out the objects its errors name (and what
//! depends on them), build again, until nothing is wrong. Nothing here
//! does I/O or panics on input.

use std::collections::{BTreeMap, BTreeSet};

use super::builder::ClusterBuilder;
use super::checked::Cluster;
use super::error::ConfigError;

/// A queue object left out of the configuration in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inactive {
    /// `ResourceFlavor`, `Cohort`, `ClusterQueue`, `LocalQueue` or
    /// `WorkloadPriorityClass`.
    pub kind: &'static str,
    /// The object's name; `namespace/name` for a LocalQueue.
    pub name: String,
    /// Kueue's reason where it has one (`ClusterQueueDoesNotExist`,
    /// `ClusterQueueIsInactive`, `FlavorNotFound`), else Arbiter's
    /// (`InvalidSpec`, `CohortCycle`, `CohortInactive`).
    pub reason: &'static str,
    /// What is wrong, for a person: the object's own errors, or which
    /// object it depends on and why that one is left out.
    pub message: String,
    /// The builder's errors on this object (empty when it is left out only
    /// for what it depends on).
    pub errors: Vec<ConfigError>,
}

impl Inactive {
    /// `Kind name`, as the builder's errors name objects.
    pub fn object(&self) -> String {
        format!("{} {}", self.kind, self.name)
    }
}

/// The kinds the builder names in its errors, in the order they depend on
/// each other.
const KINDS: [&str; 6] = [
    "Topology",
    "ResourceFlavor",
    "WorkloadPriorityClass",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
];

fn split_object(object: &str) -> Option<(&'static str, &str)> {
    let (kind, name) = object.split_once(' ')?;
    KINDS
        .iter()
        .find(|k| **k == kind)
        .map(|k| (*k, name.trim()))
}

impl ClusterBuilder {
    /// The configuration with every valid object that depends on nothing
    /// invalid, and the objects left out (in the order they were found).
    /// `build` is the strict form: any problem refuses all.
    pub fn build_lenient(self) -> (Cluster, Vec<Inactive>) {
        self.build_lenient_after(Vec::new())
    }

    /// [`ClusterBuilder::build_lenient`] when `left_out` were refused
    /// before they reached the builder (an object that did not load): what
    /// depends on them is left out too, and they are listed first.
    pub fn build_lenient_after(self, left_out: Vec<Inactive>) -> (Cluster, Vec<Inactive>) {
        let mut builder = self;
        let mut inactive = left_out;
        builder.leave_out_dependents(&mut inactive);
        loop {
            let errors = match builder.clone().build() {
                Ok(mut cluster) => {
                    cluster.inactive = inactive.clone();
                    return (cluster, inactive);
                }
                Err(errors) => errors.0,
            };
            let mut by_object: BTreeMap<(&'static str, String), Vec<ConfigError>> = BTreeMap::new();
            let mut order = Vec::new();
            for error in errors {
                let Some((kind, name)) = split_object(&error.object) else {
                    continue;
                };
                let key = (kind, name.to_string());
                if !by_object.contains_key(&key) {
                    order.push(key.clone());
                }
                by_object.entry(key).or_default().push(error);
            }
            let mut removed_any = false;
            for key in order {
                let errors = by_object.remove(&key).unwrap_or_default();
                let (kind, name) = key;
                let source = errors.first().map(|e| e.source.clone()).unwrap_or_default();
                if !builder.remove(kind, &name, &source) {
                    continue;
                }
                removed_any = true;
                let (reason, message) = classify(kind, &errors, &inactive);
                inactive.push(Inactive {
                    kind,
                    name,
                    reason,
                    message,
                    errors,
                });
            }
            if !removed_any {
                // Every problem names an object; one that does not (or one
                // already left out) would loop for ever: build without it.
                let mut cluster = builder.without_everything_named();
                cluster.inactive = inactive.clone();
                return (cluster, inactive);
            }
            builder.leave_out_dependents(&mut inactive);
        }
    }

    /// Removes the object `kind name` (the last one from `source` when
    /// the name is defined twice); whether one was there.
    fn remove(&mut self, kind: &str, name: &str, source: &str) -> bool {
        fn last<T>(
            items: &mut Vec<super::builder::Sourced<T>>,
            source: &str,
            named: impl Fn(&T) -> bool,
        ) -> bool {
            let matching: Vec<usize> = items
                .iter()
                .enumerate()
                .filter(|(_, s)| named(&s.item))
                .map(|(i, _)| i)
                .collect();
            let pick = matching
                .iter()
                .rev()
                .find(|&&i| items[i].source == source)
                .or(matching.last())
                .copied();
            match pick {
                Some(i) => {
                    items.remove(i);
                    true
                }
                None => false,
            }
        }
        let is = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            meta.name.as_deref().unwrap_or_default() == name
        };
        match kind {
            "Topology" => last(&mut self.topologies, source, |x| is(&x.metadata)),
            "ResourceFlavor" => last(&mut self.flavors, source, |x| is(&x.metadata)),
            "WorkloadPriorityClass" => {
                last(&mut self.priority_classes, source, |x| is(&x.metadata))
            }
            "Cohort" => last(&mut self.cohorts, source, |x| is(&x.metadata)),
            "ClusterQueue" => last(&mut self.cluster_queues, source, |x| is(&x.metadata)),
            "LocalQueue" => last(&mut self.local_queues, source, |x| {
                let namespace = x.metadata.namespace.as_deref().unwrap_or("default");
                format!(
                    "{namespace}/{}",
                    x.metadata.name.as_deref().unwrap_or_default()
                ) == name
            }),
            _ => false,
        }
    }

    /// Leaves out what names an object left out but would not be refused
    /// for it: a Cohort whose parent, or a ClusterQueue whose cohort, is a
    /// Cohort left out (the builder would imply a fresh one in its place).
    fn leave_out_dependents(&mut self, inactive: &mut Vec<Inactive>) {
        loop {
            let gone: BTreeMap<String, (&'static str, String)> = inactive
                .iter()
                .filter(|i| i.kind == "Cohort")
                .map(|i| (i.name.clone(), (i.reason, i.message.clone())))
                .collect();
            let because = |cohort: &str| {
                gone.get(cohort).map(|(reason, message)| {
                    let reason = if *reason == "CohortCycle" {
                        "CohortCycle"
                    } else {
                        "CohortInactive"
                    };
                    (reason, format!("Cohort {cohort} is inactive: {message}"))
                })
            };
            let mut found = Vec::new();
            for s in &self.cohorts {
                if let Some(parent) = &s.item.spec.parent {
                    if let Some((reason, message)) = because(parent) {
                        let name = s.item.metadata.name.clone().unwrap_or_default();
                        found.push(("Cohort", name, s.source.clone(), reason, message));
                    }
                }
            }
            for s in &self.cluster_queues {
                if let Some(cohort) = &s.item.spec.cohort {
                    if let Some((reason, message)) = because(cohort) {
                        let name = s.item.metadata.name.clone().unwrap_or_default();
                        found.push(("ClusterQueue", name, s.source.clone(), reason, message));
                    }
                }
            }
            if found.is_empty() {
                return;
            }
            for (kind, name, source, reason, message) in found {
                if self.remove(kind, &name, &source) {
                    inactive.push(Inactive {
                        kind,
                        name,
                        reason,
                        message,
                        errors: Vec::new(),
                    });
                }
            }
        }
    }

    /// The last resort of [`ClusterBuilder::build_lenient`]: a
    /// configuration of nothing but the Namespaces and resources (never
    /// reached while every error names its object).
    fn without_everything_named(mut self) -> Cluster {
        self.topologies.clear();
        self.flavors.clear();
        self.cohorts.clear();
        self.cluster_queues.clear();
        self.local_queues.clear();
        self.priority_classes.clear();
        self.build().unwrap_or_default()
    }
}

/// The reason and message for an object left out for `errors`, knowing
/// what was left out before it.
fn classify(
    kind: &'static str,
    errors: &[ConfigError],
    inactive: &[Inactive],
) -> (&'static str, String) {
    let own = errors
        .iter()
        .map(|e| {
            if e.field.is_empty() {
                e.message.clone()
            } else {
                format!("{}: {}", e.field, e.message)
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    let left_out = |kind: &str, name: &str| {
        inactive
            .iter()
            .find(|i| i.kind == kind && i.name == name)
            .map(|i| {
                format!(
                    "{} {} is inactive ({}): {}",
                    i.kind, i.name, i.reason, i.message
                )
            })
    };
    let quoted = |message: &str| -> Option<String> {
        let start = message.find('`')? + 1;
        let len = message[start..].find('`')?;
        Some(message[start..start + len].to_string())
    };
    match kind {
        "LocalQueue" => {
            if let Some(e) = errors.iter().find(|e| e.field == "spec.clusterQueue") {
                let cq = quoted(&e.message).unwrap_or_default();
                return match left_out("ClusterQueue", &cq) {
                    Some(why) => ("ClusterQueueIsInactive", why),
                    None => (
                        "ClusterQueueDoesNotExist",
                        format!("ClusterQueue {cq} does not exist"),
                    ),
                };
            }
        }
        "ClusterQueue" => {
            let missing: BTreeSet<String> = errors
                .iter()
                .filter(|e| e.message.starts_with("ResourceFlavor `"))
                .filter_map(|e| quoted(&e.message))
                .collect();
            if !missing.is_empty() && missing.len() == errors.len() {
                let why: Vec<String> = missing
                    .iter()
                    .map(|f| {
                        left_out("ResourceFlavor", f)
                            .unwrap_or_else(|| format!("ResourceFlavor {f} does not exist"))
                    })
                    .collect();
                return ("FlavorNotFound", why.join("; "));
            }
        }
        "Cohort"
            if errors
                .iter()
                .any(|e| e.field == "spec.parent" && e.message.contains("is a cycle")) =>
        {
            return ("CohortCycle", own);
        }
        _ => {}
    }
    ("InvalidSpec", own)
}

#[cfg(test)]
mod tests {
    use super::super::tests::builder;
    use super::*;

    const GOOD: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: fresh}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: fresh, namespace: team-b}
spec: {clusterQueue: fresh}
"#;

    /// (kind name, reason) of each object left out.
    fn left_out(yaml: &str) -> (Cluster, Vec<(String, &'static str)>) {
        let (cluster, inactive) = builder(yaml).build_lenient();
        let named = inactive.iter().map(|i| (i.object(), i.reason)).collect();
        (cluster, named)
    }

    fn in_force(cluster: &Cluster) {
        let cq = cluster
            .cluster_queue_id("fresh")
            .expect("ClusterQueue fresh in force");
        let lq = cluster
            .local_queue_id("team-b", "fresh")
            .expect("LocalQueue team-b/fresh in force");
        assert_eq!(cluster.local_queues[lq.index()].cluster_queue, cq);
    }

    #[test]
    fn a_valid_configuration_is_built_whole() {
        let (cluster, out) = left_out(GOOD);
        assert!(out.is_empty(), "{out:?}");
        in_force(&cluster);
    }

    #[test]
    fn a_local_queue_whose_cluster_queue_is_gone_is_left_out_alone() {
        let yaml = format!(
            "{GOOD}---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {{name: old, namespace: team-a}}
spec: {{clusterQueue: old}}
"
        );
        let (cluster, inactive) = builder(&yaml).build_lenient();
        in_force(&cluster);
        assert_eq!(inactive.len(), 1, "{inactive:?}");
        assert_eq!(inactive[0].object(), "LocalQueue team-a/old");
        assert_eq!(inactive[0].reason, "ClusterQueueDoesNotExist");
        assert_eq!(inactive[0].message, "ClusterQueue old does not exist");
        assert_eq!(inactive[0].errors[0].field, "spec.clusterQueue");
    }

    #[test]
    fn a_cluster_queue_naming_a_missing_flavor_takes_its_local_queues_with_it() {
        let yaml = format!(
            "{GOOD}---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: h100s}}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{{name: nvidia.com/gpu, nominalQuota: 8}}]
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {{name: h100s, namespace: team-a}}
spec: {{clusterQueue: h100s}}
"
        );
        let (cluster, out) = left_out(&yaml);
        in_force(&cluster);
        assert_eq!(
            out,
            [
                ("ClusterQueue h100s".to_string(), "FlavorNotFound"),
                (
                    "LocalQueue team-a/h100s".to_string(),
                    "ClusterQueueIsInactive"
                ),
            ]
        );
        let (_, inactive) = builder(&yaml).build_lenient();
        assert_eq!(inactive[0].message, "ResourceFlavor h100 does not exist");
        assert!(
            inactive[1]
                .message
                .starts_with("ClusterQueue h100s is inactive (FlavorNotFound): "),
            "{}",
            inactive[1].message
        );
    }

    #[test]
    fn a_negative_quota_leaves_out_its_cluster_queue_only() {
        let yaml = format!(
            "{GOOD}---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: broken}}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{{name: nvidia.com/gpu, nominalQuota: -8}}]
"
        );
        let (cluster, out) = left_out(&yaml);
        in_force(&cluster);
        assert_eq!(out, [("ClusterQueue broken".to_string(), "InvalidSpec")]);
    }

    #[test]
    fn a_cohort_cycle_leaves_out_its_cohorts_what_is_under_them_and_their_queues() {
        let yaml = format!(
            "{GOOD}---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {{name: left}}
spec: {{parent: right}}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {{name: right}}
spec: {{parent: left}}
---
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {{name: below}}
spec: {{parent: left}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: under}}
spec:
  cohort: below
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{{name: nvidia.com/gpu, nominalQuota: 8}}]
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {{name: under, namespace: team-a}}
spec: {{clusterQueue: under}}
"
        );
        let (cluster, out) = left_out(&yaml);
        in_force(&cluster);
        assert_eq!(
            out,
            [
                ("Cohort left".to_string(), "CohortCycle"),
                ("Cohort right".to_string(), "CohortCycle"),
                ("Cohort below".to_string(), "CohortCycle"),
                ("ClusterQueue under".to_string(), "CohortCycle"),
                (
                    "LocalQueue team-a/under".to_string(),
                    "ClusterQueueIsInactive"
                ),
            ]
        );
        assert!(cluster.cohorts.iter().all(|c| c.name != "below"));
    }

    #[test]
    fn a_name_defined_twice_leaves_out_the_later_one() {
        let yaml = format!(
            "{GOOD}---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {{name: a100}}
spec: {{nodeLabels: {{gpu: other}}}}
"
        );
        let (cluster, out) = left_out(&yaml);
        in_force(&cluster);
        assert_eq!(out, [("ResourceFlavor a100".to_string(), "InvalidSpec")]);
        let flavor = cluster.flavor_id("a100").unwrap();
        assert!(cluster.flavors[flavor.index()].node_labels.is_empty());
    }
}
