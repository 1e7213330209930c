//! Topology-aware placement on a cluster that runs pods
//! (`TestCluster::start_full`): a Topology of block, rack and host levels,
//! a flavor naming it, and kwok Nodes labelled with their block and rack.
//! The operator admits a pod set asking for a level only inside one domain
//! of it and keeps its pods there; kube-scheduler binds them, so where the
//! pods run is read from their `spec.nodeName` and the Nodes' labels.
//!
//! The racks: block b1 has racks r1 (Nodes n1, n2) and r2 (n3, n4); block
//! b2 has rack r1 (n5, n6, n7) — the same rack name in another block is
//! another rack. Each Node has 4 GPUs; every pod here asks for 4, so a
//! Node holds one pod and a rack holds as many pods as it has Nodes.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use arbiter_testcluster::{NodeSpec, TestCluster, RUN_FOR_ANNOTATION};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use support::*;

const BLOCK: &str = "example.com/block";
const RACK: &str = "example.com/rack";

/// The Nodes: (name, block, rack).
const NODES: [(&str, &str, &str); 7] = [
    ("n1", "b1", "r1"),
    ("n2", "b1", "r1"),
    ("n3", "b1", "r2"),
    ("n4", "b1", "r2"),
    ("n5", "b2", "r1"),
    ("n6", "b2", "r1"),
    ("n7", "b2", "r1"),
];

/// A Topology `dc` (block, rack, host), flavor `tas` naming it, and a
/// ClusterQueue whose quota is more than the Nodes hold (so where pods
/// fit, not quota, decides).
const SETUP: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: Topology
metadata: {name: dc}
spec:
  levels:
  - nodeLabel: example.com/block
  - nodeLabel: example.com/rack
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: tas}
spec:
  nodeLabels: {example.com/pool: tas}
  topologyName: dc
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: tas
      resources:
      - {name: cpu, nominalQuota: 512}
      - {name: nvidia.com/gpu, nominalQuota: 256}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: research, namespace: team-a}
spec: {clusterQueue: research}
"#;

/// A full cluster with Arbiter's CRDs, `team-a`, `setup` applied and the
/// racked Nodes; the operator is not started.
async fn racked_cluster(setup: &str) -> (TestCluster, Client) {
    let (cluster, admin) = full_cluster_applying(setup).await;
    for (name, block, rack) in NODES {
        cluster
            .add_node(
                &NodeSpec::gpu(name, 16, 4)
                    .label("example.com/pool", "tas")
                    .label(BLOCK, block)
                    .label(RACK, rack),
            )
            .await
            .unwrap();
    }
    (cluster, admin)
}

fn start(client: &Client) -> tokio::task::JoinHandle<()> {
    start_operator_configured(
        client.clone(),
        Box::new(arbiter_core::scheduler::hooks::DefaultHooks),
        test_driver_options(),
    )
}

/// A pod template asking 4 GPUs (and a core), running until deleted, with
/// `annotations`.
fn template(annotations: Value) -> Value {
    json!({
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "pytorch", "image": "pytorch",
                "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "4"},
                              "limits": {"nvidia.com/gpu": "4"}}}]
        }
    })
}

/// A held batch Job of `pods` pods in parallel whose template makes the
/// topology request `annotation: level`.
fn job(name: &str, pods: u32, annotation: &str, level: &str) -> Job {
    job_with(name, pods, json!({annotation: level}))
}

/// A held batch Job of `pods` pods in parallel in LocalQueue `research`
/// whose pod template has `annotations`.
fn job_with(name: &str, pods: u32, annotations: Value) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "team-a",
                     "labels": {"arbiter.dev/queue-name": "research"}},
        "spec": {
            "suspend": true,
            "parallelism": pods,
            "completions": pods,
            "template": template(annotations)
        }
    }))
    .unwrap()
}

const REQUIRED: &str = "kueue.x-k8s.io/podset-required-topology";
const PREFERRED: &str = "kueue.x-k8s.io/podset-preferred-topology";

/// (block, rack) of Node `node`.
fn place_of(node: &str) -> (&'static str, &'static str) {
    NODES
        .iter()
        .find(|(n, _, _)| *n == node)
        .map(|&(_, b, r)| (b, r))
        .unwrap_or_else(|| panic!("no Node {node}"))
}

/// Waits until `count` pods matching `selector` are bound and running;
/// returns the Nodes they run on.
async fn running_on(
    client: &Client,
    cluster: &TestCluster,
    selector: &str,
    count: usize,
) -> Vec<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "team-a");
    let started = std::time::Instant::now();
    loop {
        let pods = api
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap()
            .items;
        let running: Vec<String> = pods
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        if running.len() == count {
            return running;
        }
        if started.elapsed() > PATIENCE {
            let states: Vec<_> = pods
                .iter()
                .map(|p| {
                    (
                        p.metadata.name.clone(),
                        p.spec.as_ref().and_then(|s| s.node_name.clone()),
                        p.spec.as_ref().and_then(|s| s.node_selector.clone()),
                        p.status.as_ref().and_then(|s| s.phase.clone()),
                    )
                })
                .collect();
            panic!(
                "pods {selector}: {count} running did not happen within {} s; they are {states:#?}\n{}",
                PATIENCE.as_secs(),
                cluster.logs_tail(),
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `count` pods matching `selector` are bound (running or
/// done); returns the Nodes they were bound to.
async fn bound_to(client: &Client, selector: &str, count: usize) -> Vec<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "team-a");
    let started = std::time::Instant::now();
    loop {
        let nodes: Vec<String> = api
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap()
            .items
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        if nodes.len() == count {
            return nodes;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "pods {selector}: {count} bound did not happen; bound: {nodes:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The (block, rack) domains `nodes` are in.
fn racks(nodes: &[String]) -> BTreeSet<(&'static str, &'static str)> {
    nodes.iter().map(|n| place_of(n)).collect()
}

/// The node selector of the Job's pod template.
async fn template_selector(jobs: &Api<Job>, name: &str) -> BTreeMap<String, String> {
    jobs.get(name)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.node_selector)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_required_rack_runs_every_pod_in_one_rack_and_one_no_rack_holds_waits_with_the_reason() {
    let (cluster, client) = racked_cluster(SETUP).await;
    let _operator = start(&client);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    // Four pods: no rack has four Nodes. Queued first, it holds back nothing.
    jobs.create(&PostParams::default(), &job("too-wide", 4, REQUIRED, RACK))
        .await
        .unwrap();
    // Three pods: only rack r1 of block b2 holds them.
    jobs.create(&PostParams::default(), &job("three", 3, REQUIRED, RACK))
        .await
        .unwrap();

    let nodes = running_on(&client, &cluster, "job-name=three", 3).await;
    assert_eq!(
        racks(&nodes),
        BTreeSet::from([("b2", "r1")]),
        "pods on {nodes:?}"
    );
    let selector = template_selector(&jobs, "three").await;
    assert_eq!(selector.get(BLOCK).map(String::as_str), Some("b2"));
    assert_eq!(selector.get(RACK).map(String::as_str), Some("r1"));
    assert_eq!(
        selector.get("example.com/pool").map(String::as_str),
        Some("tas")
    );

    let (reason, message) = wait_condition(&client, "job-too-wide", "QuotaReserved", "False").await;
    assert_eq!(reason, "NoFit", "{message}");
    // (3 while rack b2/r1 is free, 2 once `three` holds it.)
    assert!(
        message.contains("tas: topology dc allows to fit only ")
            && message.contains(" out of 4 pod(s) in one example.com/rack domain (3 example.com/rack domain(s) of ready nodes)"),
        "{message}"
    );
    stays_held(&jobs, "too-wide").await;

    // Two pods more: block b1's racks hold two each; the fuller one goes
    // first (Kueue's BestFit picks the domain with the least room: a tie,
    // then the smallest values), so b1/r1.
    jobs.create(&PostParams::default(), &job("two", 2, REQUIRED, RACK))
        .await
        .unwrap();
    let nodes = running_on(&client, &cluster, "job-name=two", 2).await;
    assert_eq!(
        racks(&nodes),
        BTreeSet::from([("b1", "r1")]),
        "pods on {nodes:?}"
    );
    stays_held(&jobs, "too-wide").await;
}

#[tokio::test]
async fn a_preferred_level_falls_back_to_what_the_core_chose_and_only_that_is_selected() {
    let (cluster, client) = racked_cluster(SETUP).await;
    let _operator = start(&client);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    // Five pods prefer one rack: no rack (3 Nodes at most) nor block (4)
    // holds them, so they go anywhere on the flavor, selected by nothing
    // but its label. They run a moment and finish.
    let annotations = json!({PREFERRED: RACK, RUN_FOR_ANNOTATION: "2s"});
    jobs.create(&PostParams::default(), &job_with("spread", 5, annotations))
        .await
        .unwrap();
    let nodes = bound_to(&client, "job-name=spread", 5).await;
    let blocks: BTreeSet<_> = racks(&nodes).into_iter().map(|(b, _)| b).collect();
    assert_eq!(blocks, BTreeSet::from(["b1", "b2"]), "pods on {nodes:?}");
    let selector = template_selector(&jobs, "spread").await;
    assert_eq!(
        selector,
        BTreeMap::from([("example.com/pool".to_string(), "tas".to_string())])
    );
    wait_condition(&client, "job-spread", "Finished", "True").await;

    // Four pods prefer one rack: none has four Nodes; block b1 has. Only
    // the block is selected: the core chose no rack.
    jobs.create(&PostParams::default(), &job("wide", 4, PREFERRED, RACK))
        .await
        .unwrap();
    let nodes = running_on(&client, &cluster, "job-name=wide", 4).await;
    let blocks: BTreeSet<_> = racks(&nodes).into_iter().map(|(b, _)| b).collect();
    assert_eq!(blocks, BTreeSet::from(["b1"]), "pods on {nodes:?}");
    let selector = template_selector(&jobs, "wide").await;
    assert_eq!(selector.get(BLOCK).map(String::as_str), Some("b1"));
    assert!(!selector.contains_key(RACK), "{selector:?}");

    // Three pods prefer one host: none holds three; rack b2/r1 does, and
    // that rack (not a host) is selected.
    jobs.create(
        &PostParams::default(),
        &job("racked", 3, PREFERRED, "kubernetes.io/hostname"),
    )
    .await
    .unwrap();
    let nodes = running_on(&client, &cluster, "job-name=racked", 3).await;
    assert_eq!(
        racks(&nodes),
        BTreeSet::from([("b2", "r1")]),
        "pods on {nodes:?}"
    );
    let selector = template_selector(&jobs, "racked").await;
    assert_eq!(
        selector.get(RACK).map(String::as_str),
        Some("r1"),
        "{selector:?}"
    );
    assert!(
        !selector.contains_key("kubernetes.io/hostname"),
        "{selector:?}"
    );
}

#[tokio::test]
async fn each_pod_set_of_a_pytorchjob_runs_inside_one_rack() {
    let (cluster, client) = racked_cluster(SETUP).await;
    let _operator = start(&client);
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("kubeflow.org", "v1", "PyTorchJob"),
        "pytorchjobs",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "team-a", &resource);
    let replica = |n: u32| {
        json!({"replicas": n, "restartPolicy": "Never",
               "template": template(json!({REQUIRED: RACK}))})
    };
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "team-a",
                     "labels": {"arbiter.dev/queue-name": "research"}},
        "spec": {"runPolicy": {"suspend": true},
                 "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(3)}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &job).await.unwrap();
    // The three workers fit only rack b2/r1; the master the fullest rack
    // left with room.
    let workers = running_on(
        &client,
        &cluster,
        "training.kubeflow.org/job-name=bert,training.kubeflow.org/replica-type=worker",
        3,
    )
    .await;
    assert_eq!(
        racks(&workers),
        BTreeSet::from([("b2", "r1")]),
        "workers on {workers:?}"
    );
    let master = running_on(
        &client,
        &cluster,
        "training.kubeflow.org/job-name=bert,training.kubeflow.org/replica-type=master",
        1,
    )
    .await;
    assert_eq!(racks(&master).len(), 1, "master on {master:?}");
}

#[tokio::test]
async fn a_restarted_operator_keeps_an_admitted_pod_set_in_its_domain_and_counts_it_there() {
    let (cluster, client) = racked_cluster(SETUP).await;
    let operator = start(&client);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("three", 3, REQUIRED, RACK))
        .await
        .unwrap();
    let nodes = running_on(&client, &cluster, "job-name=three", 3).await;
    assert_eq!(racks(&nodes), BTreeSet::from([("b2", "r1")]));
    let before = template_selector(&jobs, "three").await;

    // The operator stops (as a crash would) and starts again.
    operator.abort();
    let _ = operator.await;
    let _operator = start(&client);

    // Read back where it was: its pods hold rack b2/r1, so three more
    // pods fit no rack and wait, and two go to a rack of block b1.
    jobs.create(
        &PostParams::default(),
        &job("three-more", 3, REQUIRED, RACK),
    )
    .await
    .unwrap();
    jobs.create(&PostParams::default(), &job("two", 2, REQUIRED, RACK))
        .await
        .unwrap();
    let nodes = running_on(&client, &cluster, "job-name=two", 2).await;
    assert_eq!(
        racks(&nodes),
        BTreeSet::from([("b1", "r1")]),
        "pods on {nodes:?}"
    );
    let (_, message) = wait_condition(&client, "job-three-more", "QuotaReserved", "False").await;
    assert!(message.contains("example.com/rack domain"), "{message}");
    stays_held(&jobs, "three-more").await;
    // The first job ran on, as it was.
    let after = jobs.get("three").await.unwrap();
    assert!(released(&after));
    assert_eq!(template_selector(&jobs, "three").await, before);
    assert_eq!(
        running_on(&client, &cluster, "job-name=three", 3)
            .await
            .len(),
        3
    );
}

/// A Topology that cannot be in force (the host level must be the last)
/// and its flavor's queue, beside a queue on a flavor without one.
const BROKEN: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: Topology
metadata: {name: dc}
spec:
  levels:
  - nodeLabel: kubernetes.io/hostname
  - nodeLabel: example.com/rack
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: tas}
spec:
  nodeLabels: {example.com/pool: tas}
  topologyName: dc
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: plain}
spec:
  nodeLabels: {example.com/pool: plain}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: tas
      resources:
      - {name: cpu, nominalQuota: 512}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: plain}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: plain
      resources:
      - {name: cpu, nominalQuota: 512}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: research, namespace: team-a}
spec: {clusterQueue: research}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: plain, namespace: team-a}
spec: {clusterQueue: plain}
"#;

#[tokio::test]
async fn a_topology_with_errors_holds_its_flavors_queue_with_the_reason_and_nothing_else() {
    let (cluster, client) = racked_cluster(BROKEN).await;
    cluster
        .add_node(&NodeSpec::gpu("p1", 16, 4).label("example.com/pool", "plain"))
        .await
        .unwrap();
    let _operator = start(&client);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("waits", 2, REQUIRED, RACK))
        .await
        .unwrap();
    let mut plain = serde_json::to_value(job_with("runs", 1, json!({}))).unwrap();
    plain["metadata"]["labels"]["arbiter.dev/queue-name"] = json!("plain");
    let plain: Job = serde_json::from_value(plain).unwrap();
    jobs.create(&PostParams::default(), &plain).await.unwrap();

    // The Topology says what is wrong with it.
    let note = wait_event_in(&client, "default", "dc", "Inactive", |_| true).await;
    assert!(
        note.contains("spec.levels[0].nodeLabel") && note.contains("last"),
        "{note}"
    );
    // The queue on the other flavor admits meanwhile.
    assert_eq!(
        running_on(&client, &cluster, "job-name=runs", 1).await,
        ["p1"]
    );
    // The job of the Topology's flavor waits, told why.
    let (_, message) = wait_condition(&client, "job-waits", "QuotaReserved", "False").await;
    assert!(message.contains("dc"), "{message}");
    stays_held(&jobs, "waits").await;

    // Fixed, the Topology is in force and the job runs inside one rack.
    apply_yaml(&client, SETUP).await;
    let nodes = running_on(&client, &cluster, "job-name=waits", 2).await;
    assert_eq!(racks(&nodes).len(), 1, "pods on {nodes:?}");
}
