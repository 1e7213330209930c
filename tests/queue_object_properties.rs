//! Each queue object is in force or not on its own (issue 33, Kueue's
//! rule), over random sets of queue objects, valid and not: flavors (some
//! named but never defined), Cohorts whose parents may form cycles or name
//! a Cohort that is not an object, ClusterQueues with random cohorts,
//! flavors and quotas (some negative), LocalQueues naming random
//! ClusterQueues (some never defined). `ClusterBuilder::build_lenient`
//! must keep in force exactly the objects that are valid and depend on
//! nothing invalid — computed here from the rules, not from the builder —
//! and list every other one as inactive, once.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use arbiter_core::model::cluster::ClusterBuilder;
use arbiter_core::model::load::load_str;
use proptest::prelude::*;

const FLAVORS: usize = 3;
const COHORTS: usize = 4;
const QUEUES: usize = 5;
const LOCAL_QUEUES: usize = 6;

#[derive(Clone, Debug)]
struct Queue {
    cohort: Option<usize>,
    flavor: usize,
    quota: i64,
}

#[derive(Clone, Debug)]
struct Objects {
    /// Which of f0..f2 are defined.
    flavors: Vec<bool>,
    /// Cohort objects c0..c3: `None` not an object; `Some(parent)`.
    cohorts: Vec<Option<Option<usize>>>,
    /// ClusterQueues q0..q4: `None` not defined.
    queues: Vec<Option<Queue>>,
    /// LocalQueues l0..l5 in namespace `t`, each naming q0..q5 (q5 never defined).
    local_queues: Vec<usize>,
}

fn objects() -> impl Strategy<Value = Objects> {
    let queue = (
        proptest::option::of(0..COHORTS),
        0..FLAVORS,
        prop_oneof![4 => 0i64..16, 1 => -8i64..0],
    )
        .prop_map(|(cohort, flavor, quota)| Queue {
            cohort,
            flavor,
            quota,
        });
    (
        proptest::collection::vec(prop::bool::weighted(0.8), FLAVORS),
        proptest::collection::vec(
            proptest::option::weighted(0.6, proptest::option::of(0..COHORTS + 1)),
            COHORTS,
        ),
        proptest::collection::vec(proptest::option::weighted(0.8, queue), QUEUES),
        proptest::collection::vec(0..QUEUES + 1, LOCAL_QUEUES),
    )
        .prop_map(|(flavors, cohorts, queues, local_queues)| Objects {
            flavors,
            cohorts,
            queues,
            local_queues,
        })
}

fn yaml(o: &Objects) -> String {
    let mut out = String::new();
    let doc = |out: &mut String, text: String| {
        let _ = write!(out, "---\napiVersion: arbiter.dev/v1alpha1\n{text}");
    };
    for (i, defined) in o.flavors.iter().enumerate() {
        if *defined {
            doc(
                &mut out,
                format!("kind: ResourceFlavor\nmetadata: {{name: f{i}}}\n"),
            );
        }
    }
    for (i, cohort) in o.cohorts.iter().enumerate() {
        if let Some(parent) = cohort {
            let spec = match parent {
                Some(p) => format!("{{parent: c{p}}}"),
                None => "{}".to_string(),
            };
            doc(
                &mut out,
                format!("kind: Cohort\nmetadata: {{name: c{i}}}\nspec: {spec}\n"),
            );
        }
    }
    for (i, queue) in o.queues.iter().enumerate() {
        if let Some(q) = queue {
            let cohort = q
                .cohort
                .map(|c| format!("  cohort: c{c}\n"))
                .unwrap_or_default();
            doc(
                &mut out,
                format!(
                    "kind: ClusterQueue\nmetadata: {{name: q{i}}}\nspec:\n{cohort}  resourceGroups:\n  - coveredResources: [gpu]\n    flavors:\n    - name: f{}\n      resources: [{{name: gpu, nominalQuota: {}}}]\n",
                    q.flavor, q.quota
                ),
            );
        }
    }
    for (i, queue) in o.local_queues.iter().enumerate() {
        doc(
            &mut out,
            format!("kind: LocalQueue\nmetadata: {{name: l{i}, namespace: t}}\nspec: {{clusterQueue: q{queue}}}\n"),
        );
    }
    out
}

/// What the rules say is in force: (Cohort objects, ClusterQueues, LocalQueues).
fn expected(o: &Objects) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    // A Cohort object is valid unless following its parents (through
    // Cohort objects) comes back to one already on the way.
    let parent = |c: usize| -> Option<usize> { o.cohorts.get(c).copied().flatten().flatten() };
    let valid_cohort = |start: usize| -> bool {
        let mut seen = BTreeSet::new();
        let mut at = Some(start);
        while let Some(c) = at {
            if !seen.insert(c) {
                return false;
            }
            at = parent(c);
        }
        true
    };
    let cohorts: BTreeSet<String> = (0..COHORTS)
        .filter(|&c| o.cohorts[c].is_some() && valid_cohort(c))
        .map(|c| format!("c{c}"))
        .collect();
    let queues: BTreeSet<String> = o
        .queues
        .iter()
        .enumerate()
        .filter_map(|(i, q)| {
            let q = q.as_ref()?;
            let cohort_ok = match q.cohort {
                None => true,
                // A cohort that is no object is implied, with no parent.
                Some(c) => o.cohorts[c].is_none() || cohorts.contains(&format!("c{c}")),
            };
            (o.flavors[q.flavor] && q.quota >= 0 && cohort_ok).then(|| format!("q{i}"))
        })
        .collect();
    let local_queues = o
        .local_queues
        .iter()
        .enumerate()
        .filter(|(_, q)| queues.contains(&format!("q{q}")))
        .map(|(i, _)| format!("t/l{i}"))
        .collect();
    (cohorts, queues, local_queues)
}

fn builder(text: &str) -> ClusterBuilder {
    let loaded = load_str(text, Path::new("random.yaml")).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut builder = ClusterBuilder::new();
    for doc in loaded.documents {
        if let Some(other) = builder.add(doc.source.to_string(), doc.manifest) {
            panic!("not generated: {other:?}");
        }
    }
    builder
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_valid_object_that_depends_on_nothing_invalid_is_in_force(o in objects()) {
        let text = yaml(&o);
        let (cluster, inactive) = builder(&text).build_lenient();
        let (cohorts, queues, local_queues) = expected(&o);

        let in_force_queues: BTreeSet<String> =
            cluster.cluster_queues.iter().map(|q| q.name.clone()).collect();
        prop_assert_eq!(&in_force_queues, &queues, "{}", text);
        let in_force_local: BTreeSet<String> = cluster
            .local_queues
            .iter()
            .map(|l| format!("{}/{}", l.namespace, l.name))
            .collect();
        prop_assert_eq!(&in_force_local, &local_queues, "{}", text);
        // Cohort objects in force keep their parent; those left out are gone
        // (a ClusterQueue of theirs is left out with them).
        let left_out: BTreeMap<(&str, &str), &str> = inactive
            .iter()
            .map(|i| ((i.kind, i.name.as_str()), i.reason))
            .collect();
        prop_assert_eq!(left_out.len(), inactive.len(), "listed once: {:?}", inactive);
        for c in 0..COHORTS {
            let name = format!("c{c}");
            if o.cohorts[c].is_some() {
                prop_assert_eq!(
                    left_out.contains_key(&("Cohort", name.as_str())),
                    !cohorts.contains(&name),
                    "Cohort {}: {:?}\n{}", name, inactive, text
                );
            }
        }
        for (i, q) in o.queues.iter().enumerate() {
            let name = format!("q{i}");
            if q.is_some() {
                prop_assert_eq!(
                    left_out.contains_key(&("ClusterQueue", name.as_str())),
                    !queues.contains(&name),
                    "ClusterQueue {}: {:?}\n{}", name, inactive, text
                );
            }
        }
        for i in 0..LOCAL_QUEUES {
            let name = format!("t/l{i}");
            prop_assert_eq!(
                left_out.contains_key(&("LocalQueue", name.as_str())),
                !local_queues.contains(&name),
                "LocalQueue {}: {:?}\n{}", name, inactive, text
            );
        }
        // Every ClusterQueue in force is built with its own cohort.
        for q in &cluster.cluster_queues {
            let i: usize = q.name[1..].parse().unwrap();
            let want = o.queues[i].as_ref().and_then(|q| q.cohort).map(|c| format!("c{c}"));
            let got = q.cohort.map(|c| cluster.cohorts[c.index()].name.clone());
            prop_assert_eq!(got, want, "{}", text);
        }
        // And the strict build refuses exactly when something is left out.
        prop_assert_eq!(builder(&text).build().is_ok(), inactive.is_empty(), "{}", text);
    }
}
