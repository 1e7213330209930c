//! Shared GPUs in a real cluster (kube-apiserver + etcd): Nodes declare
//! their cards (`arbiter.dev/devices`), the pods of a pod set placed per
//! card are gated at admission and each is given the core's node and cards
//! (node selector, `arbiter.dev/gpu-cards`) and ungated; the places survive
//! a Node added before them and an operator restart (read back from the
//! job's record), and a pod replacing a failed one takes the place it
//! left. The test plays the job controller (it creates the pods from the
//! released template); nothing runs them.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use support::*;

/// A Node of 4 T4 cards (4000 gpu-milli) whose hostname label is `host`.
async fn add_t4(client: &Client, name: &str, host: &str) {
    add_t4_declaring(client, name, host, "example.com/gpu-milli=4").await
}

/// A T4 Node of 4000 gpu-milli whose device annotation is `devices`.
async fn add_t4_declaring(client: &Client, name: &str, host: &str, devices: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name,
            "labels": {"gpu": "t4", "kubernetes.io/hostname": host},
            "annotations": {"arbiter.dev/devices": devices}},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let resources = json!({"cpu": "32", "example.com/gpu-milli": "4000", "pods": "110"});
    let status = json!({"status": {"allocatable": resources, "capacity": resources}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// A queued Job of `pods` pods asking `milli` gpu-milli each.
fn shared_job(name: &str, pods: u32, milli: u32) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "team-a",
                     "labels": {"arbiter.dev/queue-name": "research"}},
        "spec": {
            "suspend": true, "parallelism": pods, "completions": pods,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "infer", "image": "server",
                    "resources": {"requests": {"cpu": "1", "example.com/gpu-milli": milli.to_string()},
                                  "limits": {"example.com/gpu-milli": milli.to_string()}}}]
            }}
        }
    }))
    .unwrap()
}

/// A pod of `job` as the job controller makes it: the released template.
async fn create_pod(pods: &Api<Pod>, job: &Job, name: &str) {
    let template = serde_json::to_value(&job.spec.as_ref().unwrap().template).unwrap();
    let mut pod =
        json!({"metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
    pod["metadata"]["name"] = json!(name);
    pod["metadata"]["namespace"] = json!("team-a");
    let pod: Pod = serde_json::from_value(pod).unwrap();
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating pod {name}: {e}"));
}

fn gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == "arbiter.dev/placement"))
}

/// Waits until pod `name` is ungated; returns (hostname selected, node
/// annotation, cards annotation).
async fn wait_placed(pods: &Api<Pod>, name: &str) -> (String, String, String) {
    let started = std::time::Instant::now();
    loop {
        let pod = pods.get(name).await.unwrap();
        if !gated(&pod) {
            let selector = pod.spec.as_ref().and_then(|s| s.node_selector.clone());
            let annotations = pod.metadata.annotations.clone().unwrap_or_default();
            let get = |m: Option<&BTreeMap<String, String>>, k: &str| {
                m.and_then(|m| m.get(k)).cloned().unwrap_or_default()
            };
            return (
                get(selector.as_ref(), "kubernetes.io/hostname"),
                get(Some(&annotations), "arbiter.dev/node"),
                get(Some(&annotations), "arbiter.dev/gpu-cards"),
            );
        }
        if started.elapsed() > PATIENCE {
            panic!(
                "pod {name} was not given its place within {} s; it is now {}",
                PATIENCE.as_secs(),
                serde_json::to_string_pretty(&pod).unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn pods_placed_per_card_are_given_their_node_and_card_and_keep_them() {
    let (_cluster, admin) = cluster_with_setup().await;
    apply_yaml(&admin, &shared_gpu_setup("research")).await;
    add_t4(&admin, "t4-a", "host-a").await;
    add_t4(&admin, "t4-b", "host-b").await;
    let operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");

    // Three half cards and one pod of two whole cards.
    jobs.create(&PostParams::default(), &shared_job("halves", 3, 500))
        .await
        .unwrap();
    let halves = wait_for(&jobs, "halves", "admission", released).await;
    jobs.create(&PostParams::default(), &shared_job("pair", 1, 2000))
        .await
        .unwrap();
    let pair = wait_for(&jobs, "pair", "admission", released).await;

    // The template is gated and its pods labelled with the job and pod set.
    let template = serde_json::to_value(&halves.spec.as_ref().unwrap().template).unwrap();
    assert_eq!(
        template["spec"]["schedulingGates"],
        json!([{"name": "arbiter.dev/placement"}])
    );
    let labels = &template["metadata"]["labels"];
    assert_eq!(
        labels["arbiter.dev/job-uid"],
        json!(halves.metadata.uid.clone().unwrap())
    );
    assert_eq!(labels["arbiter.dev/pod-set"], "0");
    let record: Value = serde_json::from_str(
        &halves.metadata.annotations.as_ref().unwrap()["arbiter.dev/admission"],
    )
    .unwrap();
    assert_eq!(record["placements"][0]["node"], "t4-a", "{record}");

    for name in ["halves-0", "halves-1", "halves-2"] {
        create_pod(&pods, &halves, name).await;
    }
    create_pod(&pods, &pair, "pair-0").await;
    let mut cards = Vec::new();
    for name in ["halves-0", "halves-1", "halves-2"] {
        let (host, node, card) = wait_placed(&pods, name).await;
        assert_eq!((host.as_str(), node.as_str()), ("host-a", "t4-a"));
        cards.push(card);
    }
    // Best fit: two halves fill card 0, the third starts card 1; the pair
    // takes the two whole cards left on the same Node.
    cards.sort();
    assert_eq!(cards, ["0", "0", "1"]);
    assert_eq!(
        wait_placed(&pods, "pair-0").await,
        ("host-a".into(), "t4-a".into(), "2,3".into())
    );

    // A Node sorted before t4-a (every index shifts), then a restart: the
    // places are found by name, from the job's record.
    add_t4(&admin, "t4-0", "host-0").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    operator.abort();
    let operator = start_operator(admin.clone());

    // halves-1 fails; its replacement takes the place it left.
    let (_, _, left) = wait_placed(&pods, "halves-1").await;
    let failed = json!({"status": {"phase": "Failed"}});
    pods.patch_status("halves-1", &PatchParams::default(), &Patch::Merge(&failed))
        .await
        .unwrap();
    let halves = jobs.get("halves").await.unwrap();
    assert!(released(&halves), "halves was held again after the restart");
    create_pod(&pods, &halves, "halves-3").await;
    assert_eq!(
        wait_placed(&pods, "halves-3").await,
        ("host-a".into(), "t4-a".into(), left)
    );

    // A fourth half has no place left in the job's admission: it stays gated.
    create_pod(&pods, &halves, "halves-4").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(gated(&pods.get("halves-4").await.unwrap()));
    // A pod in another namespace labelled with the job's uid gets nothing.
    create_namespace(&admin, "team-b").await;
    let intruders: Api<Pod> = Api::namespaced(admin.clone(), "team-b");
    let template = serde_json::to_value(&halves.spec.as_ref().unwrap().template).unwrap();
    let intruder: Pod = serde_json::from_value(json!({
        "metadata": {"name": "intruder", "namespace": "team-b", "labels": template["metadata"]["labels"].clone()},
        "spec": template["spec"].clone()}))
    .unwrap();
    intruders
        .create(&PostParams::default(), &intruder)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(gated(&intruders.get("intruder").await.unwrap()));
    let listed = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.iter().filter(|p| gated(p)).count(), 1);
    operator.abort();
}

/// A pod that already selects another hostname cannot be given its place
/// (a gated pod's node selector may gain keys, not change them): the API
/// refuses the patch, the operator says so in a Warning Event on the pod and
/// tries again later and later, and the pod stays gated with the user's
/// selector.
#[tokio::test]
async fn a_pod_selecting_another_host_stays_gated_with_its_selector() {
    let (_cluster, admin) = cluster_with_setup().await;
    apply_yaml(&admin, &shared_gpu_setup("research")).await;
    add_t4(&admin, "t4-a", "host-a").await;
    let operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");
    let mut pinned = shared_job("pinned", 1, 500);
    let spec = pinned
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap();
    spec.node_selector = Some(
        [(
            "kubernetes.io/hostname".to_string(),
            "elsewhere".to_string(),
        )]
        .into(),
    );
    jobs.create(&PostParams::default(), &pinned).await.unwrap();
    let pinned = wait_for(&jobs, "pinned", "admission", released).await;
    create_pod(&pods, &pinned, "pinned-0").await;
    let note = wait_event(&admin, "pinned-0", "PlacementRefused").await;
    assert!(
        note.contains("only additions to spec.nodeSelector"),
        "{note}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pod = pods.get("pinned-0").await.unwrap();
    assert!(gated(&pod));
    let selector = pod.spec.unwrap().node_selector.unwrap_or_default();
    assert_eq!(
        selector.get("kubernetes.io/hostname").map(String::as_str),
        Some("elsewhere")
    );
    operator.abort();
}

#[tokio::test]
async fn a_node_whose_devices_cannot_be_read_gets_a_warning_event() {
    let (_cluster, admin) = cluster_with_setup().await;
    apply_yaml(&admin, &shared_gpu_setup("research")).await;
    add_t4_declaring(&admin, "t4-odd", "host-odd", "example.com/gpu-milli=3").await;
    let operator = start_operator(admin.clone());
    let note = wait_event_in(&admin, "default", "t4-odd", "InvalidDevices", |_| true).await;
    assert!(
        note.contains("Node t4-odd: annotation arbiter.dev/devices")
            && note.contains("does not split evenly into 3 cards")
            && note.contains("one number each"),
        "{note}"
    );
    operator.abort();
}
