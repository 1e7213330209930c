//! Shared GPUs on a cluster that runs pods: Nodes declare their cards
//! (`arbiter.dev/devices`), the pods of a pod set placed per card are
//! gated at admission, made by the Job controller, each given the core's
//! node and cards (node selector, `arbiter.dev/gpu-cards`), ungated and
//! bound there by kube-scheduler; the places survive a Node added before
//! them and an operator restart (read back from the job's record), and the
//! pod the Job controller makes in place of a failed one takes the place
//! it left. A pod beyond the job's admission gets nothing.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use arbiter_testcluster::{NodeSpec, FAIL_LABEL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use support::*;

/// A Node of 4 T4 cards (4000 gpu-milli) whose hostname label is `host`
/// (kwok runs its pods on the full cluster).
async fn add_t4(client: &Client, name: &str, host: &str) {
    add_t4_declaring(client, name, host, "example.com/gpu-milli=4").await
}

/// A T4 Node of 4000 gpu-milli whose device annotation is `devices`.
async fn add_t4_declaring(client: &Client, name: &str, host: &str, devices: &str) {
    let mut spec = NodeSpec::gpu(name, 32, 0)
        .label("gpu", "t4")
        .label("kubernetes.io/hostname", host)
        .annotation("arbiter.dev/devices", devices);
    spec.allocatable
        .insert("example.com/gpu-milli".into(), "4000".into());
    arbiter_testcluster::add_node(client, &spec)
        .await
        .unwrap_or_else(|e| panic!("adding Node {name}: {e}"));
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

/// A pod made by hand from `job`'s released template, without the labels
/// by which the Job controller would adopt it: a pod beyond the job's
/// admission that still names the job (`arbiter.dev/job-uid`).
async fn create_stray_pod(pods: &Api<Pod>, job: &Job, name: &str) {
    let template = serde_json::to_value(&job.spec.as_ref().unwrap().template).unwrap();
    let mut labels = template["metadata"]["labels"].clone();
    for key in [
        "controller-uid",
        "batch.kubernetes.io/controller-uid",
        "job-name",
        "batch.kubernetes.io/job-name",
    ] {
        labels.as_object_mut().unwrap().remove(key);
    }
    let pod = json!({"metadata": {"name": name, "namespace": pods_namespace(pods), "labels": labels},
                     "spec": template["spec"].clone()});
    let pod: Pod = serde_json::from_value(pod).unwrap();
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating pod {name}: {e}"));
}

fn pods_namespace(pods: &Api<Pod>) -> &str {
    pods.namespace().expect("a namespaced Api")
}

/// The names of job `job`'s pods that satisfy `check`, once there are
/// `count` of them.
async fn wait_job_pods(
    pods: &Api<Pod>,
    job: &str,
    count: usize,
    what: &str,
    check: impl Fn(&Pod) -> bool,
) -> BTreeSet<String> {
    let selector = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    let started = std::time::Instant::now();
    loop {
        let listed = pods.list(&selector).await.unwrap().items;
        let found: BTreeSet<String> = listed
            .iter()
            .filter(|p| check(p))
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        if found.len() == count {
            return found;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "job {job}: awaited {count} pods {what} within {} s; its pods are {:#?}",
            PATIENCE.as_secs(),
            listed
                .iter()
                .map(|p| (
                    &p.metadata.name,
                    p.spec.as_ref().map(|s| &s.node_name),
                    p.status.as_ref().map(|s| &s.phase)
                ))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Bound by kube-scheduler to Node `node` and running there.
fn running_on(pod: &Pod, node: &str) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
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
    let (_cluster, admin) = full_cluster_with_setup().await;
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
    wait_for(&jobs, "pair", "admission", released).await;

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

    // The Job controller makes the pods; each is given its place and
    // kube-scheduler binds it there.
    let halves_pods = wait_job_pods(&pods, "halves", 3, "running on t4-a", |p| {
        running_on(p, "t4-a")
    })
    .await;
    let mut cards = Vec::new();
    for name in &halves_pods {
        let (host, node, card) = wait_placed(&pods, name).await;
        assert_eq!((host.as_str(), node.as_str()), ("host-a", "t4-a"));
        cards.push(card);
    }
    // Best fit: two halves fill card 0, the third starts card 1; the pair
    // takes the two whole cards left on the same Node.
    cards.sort();
    assert_eq!(cards, ["0", "0", "1"]);
    let pair_pods = wait_job_pods(&pods, "pair", 1, "running on t4-a", |p| {
        running_on(p, "t4-a")
    })
    .await;
    let pair_pod = pair_pods.first().unwrap();
    assert_eq!(
        wait_placed(&pods, pair_pod).await,
        ("host-a".into(), "t4-a".into(), "2,3".into())
    );

    // A Node sorted before t4-a (every index shifts), then a restart: the
    // places are found by name, from the job's record.
    add_t4(&admin, "t4-0", "host-0").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    operator.abort();
    let operator = start_operator(admin.clone());

    // One of the halves fails (kwok ends it so); the pod the Job controller
    // makes in its place takes the place it left.
    let failing = halves_pods.first().unwrap().clone();
    let (_, _, left) = wait_placed(&pods, &failing).await;
    let fail = json!({"metadata": {"labels": {FAIL_LABEL: "true"}}});
    pods.patch(&failing, &PatchParams::default(), &Patch::Merge(&fail))
        .await
        .unwrap();
    let replacement = wait_job_pods(&pods, "halves", 1, "made anew and running", |p| {
        running_on(p, "t4-a") && !halves_pods.contains(p.metadata.name.as_deref().unwrap_or(""))
    })
    .await;
    let replacement = replacement.first().unwrap();
    assert_eq!(
        wait_placed(&pods, replacement).await,
        ("host-a".into(), "t4-a".into(), left)
    );
    let halves = jobs.get("halves").await.unwrap();
    assert!(released(&halves), "halves was held again after the restart");

    // A fourth half has no place left in the job's admission: it stays gated.
    create_stray_pod(&pods, &halves, "halves-4").await;
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
    let (_cluster, admin) = full_cluster_with_setup().await;
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
    wait_for(&jobs, "pinned", "admission", released).await;
    let made = wait_job_pods(&pods, "pinned", 1, "made", |_| true).await;
    let pod_name = made.first().unwrap();
    let note = wait_event(&admin, pod_name, "PlacementRefused").await;
    assert!(
        note.contains("only additions to spec.nodeSelector"),
        "{note}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pod = pods.get(pod_name).await.unwrap();
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
