//! The placement hook through the scheduler: a policy's scores move a pod
//! to the node it ranks first and a plugin's card choice is the card the
//! pod holds; a bad answer (wrong length, a card out of range) fails the
//! policy and the built-in best fit stands; DryRun decides nothing; the
//! decision log and statistics count each answer.

use super::*;
use arbiter_core::scheduler::capacity::{DeviceSpec, PoolSpec};
use arbiter_core::scheduler::hooks::DefaultHooks;
use arbiter_core::scheduler::workload::Placement;

const GPU_MILLI: &str = "example.com/gpu-milli";

/// Flavor `gpu` covering `cpu` and `example.com/gpu-milli`, ClusterQueue
/// `cq`, LocalQueue `q` in `research`.
const CLUSTER: &str = "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: gpu}\n\
---\napiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  resourceGroups:\n  \
- coveredResources: [cpu, example.com/gpu-milli]\n    flavors:\n    \
- name: gpu\n      resources: [{name: cpu, nominalQuota: \"1000\"}, {name: example.com/gpu-milli, nominalQuota: \"100000\"}]\n\
---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: q, namespace: research}\nspec: {clusterQueue: cq}\n";

/// Two nodes of flavor `gpu`, each 64 CPUs and two cards of 1000 gpu-milli.
fn gpu_scheduler() -> Scheduler {
    let cluster = cluster_from(CLUSTER);
    let cpu = cluster.resource_id("cpu").expect("cpu is covered");
    let milli = cluster
        .resource_id(GPU_MILLI)
        .expect("gpu-milli is covered");
    let pool = PoolSpec {
        flavor: FlavorId(0),
        nodes: 2,
        allocatable: vec![
            (cpu, Amount::from_units(64)),
            (milli, Amount::from_units(2000)),
        ],
        min_nodes: 2,
        max_nodes: 2,
        devices: vec![DeviceSpec {
            resource: milli,
            cards: 2,
            per_card: Amount::from_units(1000),
        }],
        names: Vec::new(),
    };
    Scheduler::new(Arc::new(cluster), &[pool])
}

/// Submits a one-pod Job asking 4 CPUs and `milli` gpu-milli to `research/q`
/// and runs a step with `hooks`; where its pod went.
fn place_one(state: &mut Scheduler, name: &str, milli: i64, hooks: &mut dyn Hooks) -> Placement {
    let cluster = state.cluster();
    let local_queue = cluster
        .local_queue_id("research", "q")
        .expect("LocalQueue q");
    let cluster_queue = cluster.local_queues[local_queue.index()].cluster_queue;
    let per_pod = vec![
        (
            cluster.resource_id("cpu").expect("cpu"),
            Amount::from_units(4),
        ),
        (
            cluster.resource_id(GPU_MILLI).expect("gpu-milli"),
            Amount::from_units(milli),
        ),
    ];
    let workload = Workload {
        kind: "Job".into(),
        namespace: "research".into(),
        name: name.into(),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        queue_name: "q".into(),
        local_queue,
        cluster_queue,
        priority: 0,
        priority_class: None,
        priority_weight: 1.0,
        pod_sets: vec![PodSetRequest {
            name: "main".into(),
            count: 1,
            min_count: None,
            per_pod,
            node_selector: BTreeMap::new(),
            required_affinity: None,
            tolerations: Vec::new(),
            topology: None,
        }],
    };
    let step = state.step(seconds(1), vec![Input::Submit(workload)], hooks);
    let admission = state.entry(step.submitted[0]).admission.as_ref();
    let placements = &admission
        .unwrap_or_else(|| panic!("{name} is admitted"))
        .placements;
    assert_eq!(placements.len(), 1, "{placements:?}");
    placements[0].clone()
}

/// A module whose `arbiter_placement` always answers `response`.
fn answering(response: &str) -> Vec<u8> {
    let escaped = response.replace('\\', "\\\\").replace('"', "\\\"");
    let packed = (1024u64 << 32) | response.len() as u64;
    wat::parse_str(format!(
        r#"(module
          (memory (export "memory") 1)
          (data (i32.const 1024) "{escaped}")
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param i32) (result i32) i32.const 4096)
          (func (export "arbiter_placement") (param i32 i32) (result i64) i64.const {packed}))"#
    ))
    .expect("valid WAT")
}

fn plugin_bundle(response: &str, failure_policy: &str) -> Bundle {
    load_configmap(
        "platform",
        "placer",
        None,
        &format!(
            "  - {{name: placer, hook: placement, failurePolicy: {failure_policy}, wasm: {{module: p.wasm}}}}\n"
        ),
        &[("p.wasm", answering(response))],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn without_a_placement_policy_the_engine_never_places() {
    let mut engine = engine(vec![platform(
        "rules",
        "  - {name: w, hook: weight, cel: {expression: '1.0'}}\n",
    )]);
    assert!(!engine.places());
    let mut state = gpu_scheduler();
    let placed = place_one(&mut state, "a", 500, &mut engine);
    // Best fit: the first of two equally empty nodes.
    assert_eq!(placed.node, 0);
    assert_eq!(engine.evaluations(), 1, "only the weight policy ran");
}

#[test]
fn a_placement_policy_moves_the_pod_to_the_node_it_ranks_first() {
    let mut state = gpu_scheduler();
    assert_eq!(
        place_one(&mut state, "best-fit", 500, &mut DefaultHooks).node,
        0
    );

    let mut engine = engine(vec![platform(
        "rules",
        "  - {name: last-node, hook: placement, cel: {expression: 'double(node.index) + node.free[\"cpu\"] / 1000.0'}}\n",
    )]);
    assert!(engine.places());
    let mut state = gpu_scheduler();
    let first = place_one(&mut state, "a", 500, &mut engine);
    assert_eq!(first.node, 1, "the policy ranks node 1 first");
    // The next pod sees the first one's CPUs taken off node 1: the scores
    // are 1.06 (node 1, 60 CPUs free) against 0.064 (node 0).
    let second = place_one(&mut state, "b", 500, &mut engine);
    assert_eq!(second.node, 1);
    let logged = log(&engine);
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert_eq!(logged[0].1, "research/a");
    assert_eq!(
        logged[0].2,
        serde_json::json!({"podSet": "main", "flavor": "gpu", "nodes": 2, "best": "gpu-1", "score": 1.064})
    );
    assert_eq!(stats_of(&engine, "last-node").evaluations, 2);
}

#[test]
fn a_plugin_picks_the_node_and_the_card() {
    let mut engine = engine(vec![plugin_bundle(
        r#"{"scores":[0,1],"cards":[null,1]}"#,
        "Fail",
    )]);
    let mut state = gpu_scheduler();
    let placed = place_one(&mut state, "a", 500, &mut engine);
    assert_eq!(placed.node, 1);
    assert_eq!(placed.cards.len(), 1, "{:?}", placed.cards);
    assert_eq!(
        placed.cards[0].card, 1,
        "the plugin's card, not the fullest"
    );
    let logged = log(&engine);
    assert_eq!(logged[0].2["card"], 1);
}

#[test]
fn a_bad_answer_fails_the_policy_and_best_fit_stands() {
    for (response, wrong) in [
        (r#"{"scores":[1]}"#, "returned 1 scores for 2 inputs"),
        (r#"{"scores":[0,1],"cards":[null,2]}"#, "cards[1] is 2"),
        (r#"{"scores":[0,1],"cards":[null]}"#, "returned 1 cards"),
        (r#"{"nodes":[0,1]}"#, "not a valid placement response"),
    ] {
        for failure_policy in ["Fail", "Ignore"] {
            let mut engine = engine(vec![plugin_bundle(response, failure_policy)]);
            let mut state = gpu_scheduler();
            let placed = place_one(&mut state, "a", 500, &mut engine);
            assert_eq!(placed.node, 0, "{response}: best fit places it");
            let decisions = engine.decisions();
            assert_eq!(decisions.len(), 1);
            assert_eq!(
                decisions[0].error.as_deref(),
                Some("bad_output"),
                "{response}"
            );
            let reason = decisions[0].reason.as_deref().unwrap_or_default();
            assert!(reason.contains(wrong), "{response}: {reason}");
            assert_eq!(engine.errors(), 1);
        }
    }
}

#[test]
fn a_dry_run_placement_is_logged_but_the_next_policy_decides() {
    let mut engine = engine(vec![platform(
        "rules",
        "  - {name: dry, hook: placement, mode: DryRun, cel: {expression: 'double(node.index)'}}\n  \
         - {name: other-flavor, hook: placement, match: {flavors: [cpu-only]}, cel: {expression: 'double(node.index)'}}\n  \
         - {name: first-node, hook: placement, cel: {expression: '-double(node.index)'}}\n",
    )]);
    let mut state = gpu_scheduler();
    // first-node's scores tie nothing: node 0 scores 0, node 1 scores -1.
    let placed = place_one(&mut state, "a", 1000, &mut engine);
    assert_eq!(placed.node, 0);
    let policies: Vec<String> = log(&engine).into_iter().map(|(p, ..)| p).collect();
    assert_eq!(
        policies,
        ["dry", "first-node"],
        "other-flavor matches flavor cpu-only only"
    );
}

#[test]
fn bundle_tests_check_placement_scores() {
    let policy = "  - {name: p, hook: placement, wasm: {module: p.wasm}}\n  \
                  tests:\n  \
                  - {name: scores, policy: p, input: {nodes: [{name: a}, {name: b}]}, expect: {scores: [0, 1]}}\n";
    let bundle = load_configmap(
        "platform",
        "placer",
        None,
        policy,
        &[(
            "p.wasm",
            answering(r#"{"scores":[0,1],"cards":[null,null]}"#),
        )],
    );
    assert!(bundle.is_ok(), "{:?}", bundle.err().map(|e| e.to_string()));
    let failing = policy.replace("scores: [0, 1]", "scores: [1, 0]");
    let error = load_configmap(
        "platform",
        "placer",
        None,
        &failing,
        &[("p.wasm", answering(r#"{"scores":[0,1]}"#))],
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("expected scores [1.0, 0.0], got [0.0, 1.0]"),
        "{error}"
    );
}

#[test]
fn a_tenant_bundle_may_not_hold_a_placement_policy() {
    let error = load_bundle(
        "team-a-rules",
        Some("team-a"),
        "  - {name: my-nodes, hook: placement, cel: {expression: '1.0'}}\n",
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("policy my-nodes: hook placement is not allowed in a tenant bundle"),
        "{error}"
    );
}

#[test]
fn the_shipped_bestfit_bundle_loads_passes_its_tests_and_places_best_fit() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/placement-bestfit");
    let options = LoadOptions {
        tenant: None,
        run_tests: true,
    };
    let bundle =
        bundle::load(Files::Dir(&dir), runtime(), &options).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bundle.tests.len(), 3);
    // Through the scheduler: a first pod on node 1 (forced by a policy
    // that prefers it), then BestFit sends the second pod to that fuller node.
    let mut state = gpu_scheduler();
    let mut prefer_last = engine(vec![platform(
        "rules",
        "  - {name: last, hook: placement, cel: {expression: 'double(node.index)'}}\n",
    )]);
    assert_eq!(place_one(&mut state, "a", 500, &mut prefer_last).node, 1);
    let mut bestfit = engine(vec![bundle]);
    let placed = place_one(&mut state, "b", 500, &mut bestfit);
    assert_eq!(placed.node, 1, "the fuller node fits best");
    assert_eq!(
        placed.cards[0].card, 0,
        "the core takes the fullest card that holds it"
    );
}

/// Flavors `t4` (listed first: one node of 8 cards, 128 CPUs) and `a10`
/// (one node of 1 card, 16 CPUs), both in ClusterQueue `cq`.
fn two_flavor_scheduler() -> Scheduler {
    let yaml = "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: t4}\n\
---\napiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: a10}\n\
---\napiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  resourceGroups:\n  \
- coveredResources: [cpu, example.com/gpu-milli]\n    flavors:\n    \
- name: t4\n      resources: [{name: cpu, nominalQuota: \"1000\"}, {name: example.com/gpu-milli, nominalQuota: \"100000\"}]\n    \
- name: a10\n      resources: [{name: cpu, nominalQuota: \"1000\"}, {name: example.com/gpu-milli, nominalQuota: \"100000\"}]\n\
---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: q, namespace: research}\nspec: {clusterQueue: cq}\n";
    let cluster = cluster_from(yaml);
    let cpu = cluster.resource_id("cpu").expect("cpu");
    let milli = cluster.resource_id(GPU_MILLI).expect("gpu-milli");
    let pool = |flavor: &str, cpus: i64, cards: u16| PoolSpec {
        flavor: cluster.flavor_id(flavor).expect("flavor"),
        nodes: 1,
        allocatable: vec![
            (cpu, Amount::from_units(cpus)),
            (milli, Amount::from_units(1000 * cards as i64)),
        ],
        min_nodes: 1,
        max_nodes: 1,
        devices: vec![DeviceSpec {
            resource: milli,
            cards,
            per_card: Amount::from_units(1000),
        }],
        names: Vec::new(),
    };
    let pools = [pool("t4", 128, 8), pool("a10", 16, 1)];
    Scheduler::new(Arc::new(cluster), &pools)
}

#[test]
fn a_flavor_policy_can_let_placement_choose_among_its_flavors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/placement-bestfit");
    let options = LoadOptions {
        tenant: None,
        run_tests: true,
    };
    let both = "  - {name: both, hook: flavor, cel: {expression: \"['t4', 'a10']\"}}\n";
    let by_placement =
        "  - {name: both, hook: flavor, orderByPlacement: true, cel: {expression: \"['t4', 'a10']\"}}\n";
    let flavor_of = |flavor_policy: &str| {
        let bestfit =
            bundle::load(Files::Dir(&dir), runtime(), &options).unwrap_or_else(|e| panic!("{e}"));
        let mut engine = engine(vec![platform("flavors", flavor_policy), bestfit]);
        let mut state = two_flavor_scheduler();
        let placed = place_one(&mut state, "a", 500, &mut engine);
        state.cluster().flavors[placed.flavor.index()].name.clone()
    };
    // The listed order: t4 first, and it has room.
    assert_eq!(flavor_of(both), "t4");
    // By placement: BestFit scores the small a10 node fuller (16 CPUs and
    // one card leave less free), so a10 is tried first and taken.
    assert_eq!(flavor_of(by_placement), "a10");
}

#[test]
fn placement_chooses_the_flavor_with_no_flavor_policy() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/placement-bestfit");
    let options = LoadOptions {
        tenant: None,
        run_tests: true,
    };
    let bestfit =
        bundle::load(Files::Dir(&dir), runtime(), &options).unwrap_or_else(|e| panic!("{e}"));
    let flavor_of = |hooks: &mut dyn Hooks| {
        let mut state = two_flavor_scheduler();
        let placed = place_one(&mut state, "a", 500, hooks);
        state.cluster().flavors[placed.flavor.index()].name.clone()
    };
    // Without a placement policy: Kueue's listed order.
    assert_eq!(flavor_of(&mut DefaultHooks), "t4");
    // BestFit alone: the fuller a10 node fits best, so a10 is tried first.
    assert_eq!(flavor_of(&mut engine(vec![bestfit])), "a10");
    // A placement policy that does not take the workload orders nothing.
    let elsewhere = platform(
        "elsewhere",
        "  - {name: a10-first, hook: placement, match: {namespaces: [other]}, \
         cel: {expression: \"node.name.startsWith('a10') ? 1.0 : 0.0\"}}\n",
    );
    assert_eq!(flavor_of(&mut engine(vec![elsewhere])), "t4");
}

#[test]
fn order_by_placement_is_for_flavor_policies_only() {
    let refused = load_configmap(
        "platform",
        "x",
        None,
        "  - {name: w, hook: weight, orderByPlacement: true, cel: {expression: '1.0'}}\n",
        &[],
    );
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("orderByPlacement"), "{message}");
}

#[test]
fn worker_clusters_are_ranked_by_the_same_placement_policies() {
    use crate::view::{NodeView, PlacementInput, WorkloadView};
    let input = |names: &[&str]| PlacementInput {
        workload: WorkloadView {
            name: "train".into(),
            namespace: "research".into(),
            kind: "Job".into(),
            ..WorkloadView::default()
        },
        nodes: names
            .iter()
            .enumerate()
            .map(|(i, name)| NodeView {
                index: i as u32,
                name: name.to_string(),
                ..NodeView::default()
            })
            .collect(),
        ..PlacementInput::default()
    };
    let mut none = engine(vec![platform(
        "rules",
        "  - {name: w, hook: weight, cel: {expression: '1.0'}}\n",
    )]);
    assert_eq!(none.rank_clusters(Millis(0), input(&["w1", "w2"])), None);
    let mut engine = engine(vec![platform(
        "rules",
        "  - {name: dry, hook: placement, mode: DryRun, cel: {expression: '5.0'}}\n  \
         - {name: other-ns, hook: placement, match: {namespaces: [elsewhere]}, cel: {expression: '7.0'}}\n  \
         - {name: w2-first, hook: placement, cel: {expression: \"node.name == 'w2' ? 10.0 : 1.0\"}}\n",
    )]);
    assert_eq!(
        engine.rank_clusters(Millis(1000), input(&["w1", "w2"])),
        Some(vec![1.0, 10.0])
    );
    let policies: Vec<String> = log(&engine).into_iter().map(|(p, ..)| p).collect();
    assert_eq!(policies, ["dry", "w2-first"]);
}
