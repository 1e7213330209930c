//! Placements on named nodes (the operator's Nodes) carried across a
//! restart and a reconfiguration: found by name, not by index; a record
//! that no longer holds (node gone, cards edited) is placed again best-fit.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::jobs::{JobInfo, PodSetInfo};
use crate::model::cluster::tests::build;
use crate::scheduler::capacity::DeviceSpec;
use crate::scheduler::intake::{intake, Intake};

const SHARED: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: t4}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [example.com/gpu-milli]
    flavors:
    - {name: t4, resources: [{name: example.com/gpu-milli, nominalQuota: 100000}]}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {namespace: ns, name: q}
spec: {clusterQueue: cq}
"#;

const MILLI: &str = "example.com/gpu-milli";

/// Nodes `names` of 2 cards of 1000 gpu-milli each.
fn pools(c: &Cluster, names: &[&str]) -> Vec<PoolSpec> {
    let milli = c.resource_id(MILLI).unwrap_or_else(|| panic!("{MILLI}"));
    vec![PoolSpec {
        flavor: c.flavor_id("t4").unwrap_or_else(|| panic!("t4")),
        nodes: names.len() as u32,
        allocatable: vec![(milli, Amount::from_units(2000))],
        min_nodes: names.len() as u32,
        max_nodes: names.len() as u32,
        devices: vec![DeviceSpec {
            resource: milli,
            cards: 2,
            per_card: Amount::from_units(1000),
        }],
        names: names.iter().map(|n| n.to_string()).collect(),
    }]
}

/// Two pods of 500 gpu-milli, admitted on t4.
fn restored(c: &Cluster, placements: Vec<PlacedPods>) -> Restored {
    let job = JobInfo {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        namespace: "ns".into(),
        name: "shared".into(),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        queue_name: Some("q".into()),
        priority_class: None,
        pod_sets: vec![PodSetInfo {
            name: "main".into(),
            count: 2,
            min_count: None,
            requests: [(MILLI.to_string(), Amount::from_units(500))].into(),
            node_selector: BTreeMap::new(),
            required_node_affinity: None,
            tolerations: Vec::new(),
            template_path: None,
            topology: None,
        }],
    };
    let Intake::Queued(workload) = intake(c, &job, None) else {
        panic!("not queued")
    };
    Restored {
        workload,
        flavors: vec![[(MILLI.to_string(), "t4".to_string())].into()],
        counts: vec![2],
        admitted_at: Millis::from_secs(1),
        queue_time: Millis::from_secs(1),
        placements,
        carried: Default::default(),
    }
}

fn on(node: &str, cards: &[(u16, i64)]) -> PlacedPods {
    PlacedPods {
        pod_set: 0,
        flavor: "t4".into(),
        node: node.into(),
        pods: 2,
        cards: cards
            .iter()
            .map(|&(card, units)| (MILLI.to_string(), card, Amount::from_units(units)))
            .collect(),
    }
}

/// Where workload `id`'s pods are: node name and cards (card, units).
fn where_placed(s: &Scheduler, id: WorkloadId) -> Vec<(String, Vec<(u16, i64)>)> {
    let admission = s
        .entry(id)
        .admission
        .as_ref()
        .unwrap_or_else(|| panic!("admitted"));
    admission
        .placements
        .iter()
        .map(|p| {
            let name = s.capacity().node_name(p.flavor, p.node).unwrap_or("?");
            let cards = p
                .cards
                .iter()
                .map(|u| (u.card, u.amount.milli() / 1000))
                .collect();
            (name.to_string(), cards)
        })
        .collect()
}

fn restore_one(s: &mut Scheduler, r: Restored) -> WorkloadId {
    s.restore(vec![r])
        .remove(0)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_restart_keeps_the_recorded_node_and_card_by_name() {
    let c = Arc::new(build(SHARED));
    let mut s = Scheduler::new(c.clone(), &pools(&c, &["n-a", "n-b"]));
    // Best fit would put them on n-a; the record says n-b's second card.
    let id = restore_one(&mut s, restored(&c, vec![on("n-b", &[(1, 1000)])]));
    assert_eq!(where_placed(&s, id), [("n-b".to_string(), vec![(1, 1000)])]);
}

#[test]
fn a_record_that_no_longer_holds_is_placed_again_best_fit() {
    let c = Arc::new(build(SHARED));
    for record in [
        // The node is gone.
        vec![on("n-gone", &[(0, 1000)])],
        // Edited: the cards hold less than the two pods ask.
        vec![on("n-b", &[(1, 500)])],
        // A card the node does not have.
        vec![on("n-b", &[(7, 1000)])],
        // Not every pod placed.
        vec![PlacedPods {
            pods: 1,
            ..on("n-b", &[(1, 500)])
        }],
    ] {
        let mut s = Scheduler::new(c.clone(), &pools(&c, &["n-a", "n-b"]));
        let id = restore_one(&mut s, restored(&c, record.clone()));
        assert_eq!(
            where_placed(&s, id),
            [("n-a".to_string(), vec![(0, 1000)])],
            "{record:?}"
        );
    }
}

#[test]
fn a_reconfiguration_that_adds_a_node_before_keeps_pods_on_their_node() {
    let c = Arc::new(build(SHARED));
    let mut s = Scheduler::new(c.clone(), &pools(&c, &["n-a", "n-b"]));
    let id = restore_one(&mut s, restored(&c, vec![on("n-b", &[(1, 1000)])]));
    // A node sorted before both: every index shifts by one.
    s.reconfigure(c.clone(), &pools(&c, &["n-0", "n-a", "n-b"]));
    assert_eq!(where_placed(&s, id), [("n-b".to_string(), vec![(1, 1000)])]);
    let admission = s
        .entry(id)
        .admission
        .as_ref()
        .unwrap_or_else(|| panic!("admitted"));
    assert_eq!(admission.placements[0].node, 2);
    // n-b removed: placed again where there is room.
    s.reconfigure(c.clone(), &pools(&c, &["n-0", "n-a"]));
    assert_eq!(where_placed(&s, id), [("n-0".to_string(), vec![(0, 1000)])]);
}
