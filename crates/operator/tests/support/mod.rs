//! What the operator's end-to-end tests share: a real test cluster with
//! Arbiter's CRDs and a small queue setup (one A100 flavor, 8 GPUs of quota
//! and one 8-GPU Node), jobs, the operator in-process, and waits that bound
//! a hang (they measure nothing).

#![allow(dead_code)]

use std::time::Duration;

use arbiter_core::model::api::{ClusterQueue, Workload};
use arbiter_core::scheduler::hooks::{DefaultHooks, Hooks};
use arbiter_operator::policy_sources::{BundleOptions, Bundles};
use arbiter_operator::{DriverOptions, Operator, OperatorBuilder};
use arbiter_policy::metrics::PolicyMetrics;
use arbiter_testcluster::{
    crd_documents, workspace_root, NodeSpec, Options, TestCluster, RUN_FOR_ANNOTATION,
};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

/// How long a test waits for the operator to act before failing. Bounds a
/// hang; the tests measure nothing.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub const SETUP: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB}
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: research, namespace: team-a}
spec: {clusterQueue: research}
"#;

pub async fn apply_yaml(client: &Client, yaml: &str) {
    for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
        let value: Value = serde::Deserialize::deserialize(doc).unwrap();
        let api_version = value["apiVersion"].as_str().unwrap();
        let kind = value["kind"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
        let name = value["metadata"]["name"].as_str().unwrap().to_string();
        let api: Api<DynamicObject> = match value["metadata"]["namespace"].as_str() {
            Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            &name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&value),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
    }
}

/// A bare test cluster (kube-apiserver and etcd: nothing runs a pod) with
/// Arbiter's CRDs, [`SETUP`] and one 8-GPU A100 Node. For tests of what the
/// operator writes; a test that needs jobs to run and end takes
/// [`full_cluster_with_setup`].
pub async fn cluster_with_setup() -> (TestCluster, Client) {
    cluster_with_setup_using(&Options::default()).await
}

/// [`cluster_with_setup`] with the control plane started with `options`.
pub async fn cluster_with_setup_using(options: &Options) -> (TestCluster, Client) {
    let cluster = TestCluster::start_with(options)
        .await
        .unwrap_or_else(|e| panic!("the test cluster did not start: {e}"));
    let admin = setup(&cluster).await;
    (cluster, admin)
}

/// [`cluster_with_setup`] on the full cluster
/// ([`TestCluster::start_full`]): the Node is kwok's, so the Job
/// controller makes the released jobs' pods, kube-scheduler binds them and
/// they run until [`finish`] ends them.
pub async fn full_cluster_with_setup() -> (TestCluster, Client) {
    let cluster = TestCluster::start_full()
        .await
        .unwrap_or_else(|e| panic!("the full test cluster did not start: {e}"));
    let admin = setup(&cluster).await;
    (cluster, admin)
}

async fn setup(cluster: &TestCluster) -> Client {
    let admin = prepare(cluster, SETUP).await;
    add_node(&admin, "gpu-node-1", 8).await;
    admin
}

/// The full cluster ([`TestCluster::start_full`]) with Arbiter's CRDs,
/// `team-a`, `arbiter-system` and `setup` (YAML) applied; no Node, no
/// operator.
pub async fn full_cluster_applying(setup: &str) -> (TestCluster, Client) {
    let cluster = TestCluster::start_full()
        .await
        .unwrap_or_else(|e| panic!("the full test cluster did not start: {e}"));
    let admin = prepare(&cluster, setup).await;
    (cluster, admin)
}

/// Arbiter's CRDs, the namespaces and `setup` on `cluster`; its admin client.
async fn prepare(cluster: &TestCluster, setup: &str) -> Client {
    let admin = cluster.admin_client().await.unwrap();
    let crds = crd_documents(&workspace_root().join("deploy/crds.yaml")).unwrap();
    cluster.install_crds(&crds).await.unwrap();
    // team-a submits jobs; arbiter-system is the operator's own (its
    // webhook certificate Secret and leader Lease).
    for name in ["team-a", "arbiter-system"] {
        create_namespace(&admin, name).await;
    }
    apply_yaml(&admin, setup).await;
    admin
}

/// An A100 Node with 64 cores and `gpus` GPUs (kwok runs its pods on the
/// full cluster).
pub async fn add_node(client: &Client, name: &str, gpus: u32) {
    let spec =
        NodeSpec::gpu(name, 64, gpus).label("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB");
    arbiter_testcluster::add_node(client, &spec)
        .await
        .unwrap_or_else(|e| panic!("adding Node {name}: {e}"));
}

pub fn job(name: &str, gpus: u32) -> Job {
    job_in("team-a", "research", name, gpus)
}

/// A held Job of one pod asking `gpus` GPUs (and a core) in `namespace`'s
/// LocalQueue `queue`.
pub fn job_in(namespace: &str, queue: &str, name: &str, gpus: u32) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"arbiter.dev/queue-name": queue}},
        "spec": {
            "suspend": true,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "train", "image": "pytorch",
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()},
                                  "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
            }}
        }
    }))
    .unwrap()
}

pub fn start_operator(client: Client) -> JoinHandle<()> {
    start_operator_with(client, Box::new(DefaultHooks))
}

pub fn start_operator_with(client: Client, hooks: Box<dyn Hooks + Send>) -> JoinHandle<()> {
    start_operator_configured(client, hooks, driver_options())
}

/// The operator with Kueue's hooks and `options` (the tests' defaults
/// otherwise: [`test_driver_options`]).
pub fn start_operator_configured(
    client: Client,
    hooks: Box<dyn Hooks + Send>,
    options: DriverOptions,
) -> JoinHandle<()> {
    init_tracing();
    let operator = Operator::builder(client)
        .hooks(hooks)
        .driver_options(options);
    run_operator(operator)
}

/// Starts `operator` and runs it until the task is aborted.
pub fn run_operator(operator: OperatorBuilder) -> JoinHandle<()> {
    tokio::spawn(async move {
        let operator = operator.start().await.unwrap();
        let _ = operator.run_until(std::future::pending()).await;
    })
}

/// The driver options every test starts from.
pub fn test_driver_options() -> DriverOptions {
    driver_options()
}

/// The platform namespace of [`start_operator_with_bundles`].
pub const PLATFORM_NAMESPACE: &str = "arbiter-system";

/// The operator as `arbiter run` starts it: the engine over the platform
/// bundle directories `dirs` and the bundle ConfigMaps (platform ones in
/// [`PLATFORM_NAMESPACE`]), all watched from before the first decision,
/// reporting to `metrics` if given.
pub fn start_operator_with_bundles(
    client: Client,
    dirs: Vec<std::path::PathBuf>,
    metrics: Option<PolicyMetrics>,
) -> JoinHandle<()> {
    start_operator_keeping_decisions(client, dirs, metrics).0
}

/// [`start_operator_with_bundles`], also returning where its engine keeps
/// its newest decisions (what the dashboard shows).
pub fn start_operator_keeping_decisions(
    client: Client,
    dirs: Vec<std::path::PathBuf>,
    metrics: Option<PolicyMetrics>,
) -> (JoinHandle<()>, arbiter_policy::engine::RecentDecisions) {
    init_tracing();
    let options = BundleOptions {
        platform_namespace: PLATFORM_NAMESPACE.to_string(),
        dirs,
    };
    let bundles = Bundles::load(options, metrics.as_ref()).unwrap();
    let recent = bundles.recent();
    let operator = Operator::builder(client)
        .bundles(bundles)
        .driver_options(driver_options());
    (run_operator(operator), recent)
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ARBITER_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
}

fn driver_options() -> DriverOptions {
    DriverOptions {
        rediscover: Duration::from_secs(1),
        ..DriverOptions::default()
    }
}

/// Creates the namespace unless it exists (`arbiter-system` and `team-a` always do).
pub async fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => panic!("creating namespace {name}: {e}"),
    }
}

/// Waits until the ConfigMap's `arbiter.dev/bundle-status` annotation
/// satisfies `check`; returns it.
pub async fn wait_bundle_status(
    client: &Client,
    namespace: &str,
    name: &str,
    check: impl Fn(&str) -> bool,
) -> String {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let started = std::time::Instant::now();
    loop {
        let cm = api.get(name).await.unwrap();
        let status = cm
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("arbiter.dev/bundle-status"))
            .cloned();
        if let Some(status) = status.as_deref().filter(|s| check(s)) {
            return status.to_string();
        }
        if started.elapsed() > PATIENCE {
            panic!(
                "ConfigMap {namespace}/{name}: the bundle status did not become what was awaited within {} s; it is {status:?}",
                PATIENCE.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `check` holds for the Job, failing with its last state.
pub async fn wait_for(
    jobs: &Api<Job>,
    name: &str,
    what: &str,
    check: impl Fn(&Job) -> bool,
) -> Job {
    let started = std::time::Instant::now();
    loop {
        // Absent for a moment while a failed job is created anew.
        let job = jobs.get_opt(name).await.unwrap();
        if let Some(job) = job.as_ref().filter(|j| check(j)) {
            return job.clone();
        }
        if started.elapsed() > PATIENCE {
            panic!(
                "job {name}: {what} did not happen within {} s; it is now {}",
                PATIENCE.as_secs(),
                serde_json::to_string_pretty(&job).unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the job's Workload has condition `type_` with `status`, and
/// returns that condition's (reason, message).
pub async fn wait_condition(
    client: &Client,
    workload: &str,
    type_: &str,
    status: &str,
) -> (String, String) {
    wait_condition_within(client, workload, type_, status, PATIENCE).await
}

/// [`wait_condition`] for what takes a controller's period longer than
/// [`PATIENCE`] (pod garbage collection).
pub async fn wait_condition_within(
    client: &Client,
    workload: &str,
    type_: &str,
    status: &str,
    patience: Duration,
) -> (String, String) {
    let api: Api<Workload> = Api::namespaced(client.clone(), "team-a");
    let started = std::time::Instant::now();
    loop {
        let current = api.get_opt(workload).await.unwrap();
        if let Some(found) = current
            .as_ref()
            .and_then(|w| w.status.as_ref())
            .and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == type_ && c.status == status)
                    .map(|c| (c.reason.clone(), c.message.clone()))
            })
        {
            return found;
        }
        if started.elapsed() > patience {
            panic!(
                "Workload {workload}: condition {type_}={status} did not appear within {} s; it is now {}",
                patience.as_secs(),
                serde_json::to_string_pretty(&current).unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits for an Event about job `name` with `reason`; returns its note.
pub async fn wait_event(client: &Client, name: &str, reason: &str) -> String {
    wait_event_in(client, "team-a", name, reason, |_| true).await
}

/// Waits for an Event in `namespace` about the object `name` with `reason`
/// and a note satisfying `check`; returns the note.
pub async fn wait_event_in(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
    check: impl Fn(&str) -> bool,
) -> String {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let started = std::time::Instant::now();
    loop {
        let events = api.list(&ListParams::default()).await.unwrap();
        if let Some(event) = events.items.iter().find(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
                && check(e.note.as_deref().unwrap_or_default())
        }) {
            return event.note.clone().unwrap_or_default();
        }
        if started.elapsed() > PATIENCE {
            let seen: Vec<_> = events
                .items
                .iter()
                .map(|e| {
                    (
                        e.regarding.as_ref().and_then(|r| r.name.clone()),
                        e.reason.clone(),
                        e.note.clone(),
                    )
                })
                .collect();
            panic!(
                "no {reason} Event about {namespace}/{name} as awaited within {} s; events: {seen:#?}",
                PATIENCE.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

pub fn released(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(false)
}

/// Ends a released Job's run on the full cluster: its pods (made by the Job
/// controller) are told to succeed now (`arbiter.test/run-for: 0s`, kwok's
/// `pod-succeed` Stage), and this waits until the Job controller has marked
/// the Job `Complete`. Nothing here writes the Job's status.
pub async fn finish(jobs: &Api<Job>, name: &str) {
    let namespace = jobs
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("Job {name}: {e}"))
        .metadata
        .namespace
        .expect("a namespaced Job");
    let pods: Api<Pod> = Api::namespaced(jobs.clone().into_client(), &namespace);
    let selector = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}"));
    let started = std::time::Instant::now();
    let now = PatchParams::default();
    let annotate = Patch::Merge(json!({"metadata": {"annotations": {RUN_FOR_ANNOTATION: "0s"}}}));
    loop {
        let job = jobs.get(name).await.unwrap();
        if job_complete(&job) {
            return;
        }
        for pod in pods.list(&selector).await.unwrap().items {
            let pod_name = pod.metadata.name.clone().unwrap_or_default();
            let told = pod
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(RUN_FOR_ANNOTATION));
            if !told {
                // The pod may be going away (a conflict or a 404 is fine: the
                // next round sees the pods there are then).
                let _ = pods.patch(&pod_name, &now, &annotate).await;
            }
        }
        assert!(
            started.elapsed() < PATIENCE,
            "Job {namespace}/{name} did not complete within {} s of its pods being told to \
             succeed (is this the full cluster?); its status: {:?}",
            PATIENCE.as_secs(),
            job.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether the Job controller has marked `job` `Complete`.
pub fn job_complete(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

/// Waits a while and checks `name` is still held: the operator had every
/// chance to act (several of its ticks) and did not.
pub async fn stays_held(jobs: &Api<Job>, name: &str) {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let job = jobs.get(name).await.unwrap();
    assert!(suspended(&job), "{name} was released: {:?}", job.spec);
}

/// The webhook configurations `deploy/` installs, but calling loopback.
pub fn webhook_configurations(port: u16, ca: Option<&str>) -> (Value, Value) {
    let client = |path: &str| {
        let mut c = json!({"url": format!("https://127.0.0.1:{port}{path}")});
        if let Some(ca) = ca {
            c["caBundle"] = json!(k8s_openapi::ByteString(ca.as_bytes().to_vec()));
        }
        c
    };
    let job_hook = |name: &str, label: &str| {
        json!({
            "name": name,
            "clientConfig": client("/mutate-job"),
            "objectSelector": {"matchExpressions": [{"key": label, "operator": "Exists"}]},
            "rules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]}],
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 10
        })
    };
    let mutating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "arbiter"},
        "webhooks": [job_hook("jobs.arbiter.dev", "arbiter.dev/queue-name"),
                     job_hook("kueue-jobs.arbiter.dev", "kueue.x-k8s.io/queue-name")]
    });
    let validating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "arbiter"},
        "webhooks": [{
            "name": "config.arbiter.dev",
            "clientConfig": client("/validate-config"),
            "rules": [{"apiGroups": ["arbiter.dev"], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE"],
                       "resources": ["resourceflavors", "cohorts", "clusterqueues", "localqueues", "workloadpriorityclasses"]}],
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 10
        }]
    });
    (mutating, validating)
}

pub async fn apply_webhooks(client: &Client, mutating: &Value, validating: &Value) {
    let m: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let v: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let params = PatchParams::apply("e2e").force();
    m.patch("arbiter", &params, &Patch::Apply(mutating))
        .await
        .unwrap();
    v.patch("arbiter", &params, &Patch::Apply(validating))
        .await
        .unwrap();
}

/// A namespaced CRD for `kind` in `group`/v1 that keeps any fields (for a
/// job kind no upstream CRD exists for).
pub fn open_crd(
    group: &str,
    kind: &str,
    plural: &str,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

/// A flavor `t4` of Nodes labelled `gpu: t4` whose cards are shared
/// (`example.com/gpu-milli`), a ClusterQueue `shared` with quota for
/// plenty of them, and the LocalQueue `team-a/local_queue` onto it.
pub fn shared_gpu_setup(local_queue: &str) -> String {
    format!(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {{name: t4}}
spec:
  nodeLabels: {{gpu: t4}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: shared}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu, example.com/gpu-milli]
    flavors:
    - name: t4
      resources:
      - {{name: cpu, nominalQuota: 64}}
      - {{name: example.com/gpu-milli, nominalQuota: 100000}}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {{name: {local_queue}, namespace: team-a}}
spec: {{clusterQueue: shared}}
"#
    )
}

/// ClusterQueue `queue`'s admitted count and GPU usage, as its status says.
pub async fn queue_usage(client: &Client, queue: &str) -> (i64, String) {
    let cq = Api::<ClusterQueue>::all(client.clone())
        .get(queue)
        .await
        .unwrap();
    let status = serde_json::to_value(cq.status).unwrap();
    let admitted = status["admittedWorkloads"].as_i64().unwrap_or(0);
    let gpus = status["flavorsUsage"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|f| f["resources"].as_array().cloned().unwrap_or_default())
        .find(|r| r["name"] == "nvidia.com/gpu")
        .map(|r| r["total"].as_str().unwrap_or("0").to_string())
        .unwrap_or_else(|| "0".into());
    (admitted, gpus)
}

/// Waits until ClusterQueue `queue`'s status shows `admitted` workloads using `gpus`.
pub async fn wait_queue_usage(client: &Client, queue: &str, admitted: i64, gpus: &str) {
    let started = std::time::Instant::now();
    loop {
        let now = queue_usage(client, queue).await;
        if now == (admitted, gpus.to_string()) {
            return;
        }
        if started.elapsed() > PATIENCE {
            panic!("ClusterQueue {queue}: awaited {admitted} admitted using {gpus} GPUs; it says {now:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A free loopback port.
pub const LOOPBACK: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// The webhooks as `arbiter run` serves them by default: a generated
/// certificate kept in the Secret `arbiter-system/arbiter-webhook-tls`,
/// rotated as `rotation` says, its CA kept in the configurations named
/// `configuration` (`None`: left alone).
pub fn webhook_options(
    rotation: arbiter_operator::webhook::certs::Rotation,
    configuration: Option<&str>,
) -> arbiter_operator::webhook::WebhookOptions {
    use arbiter_operator::webhook::{certs, CertSource, WebhookOptions};
    WebhookOptions {
        certs: CertSource::Secret {
            namespace: "arbiter-system".into(),
            name: "arbiter-webhook-tls".into(),
            names: certs::service_names("arbiter", "arbiter-system"),
            rotation,
        },
        configuration: configuration.map(str::to_string),
    }
}

/// Starts `operator` serving its webhooks on a free loopback port as
/// `arbiter run` does ([`webhook_options`]), its driver's loop not run:
/// nothing is scheduled, held jobs stay held.
pub async fn serve_webhooks(
    operator: OperatorBuilder,
    rotation: arbiter_operator::webhook::certs::Rotation,
    configuration: Option<&str>,
) -> Operator {
    operator
        .webhooks(LOOPBACK, webhook_options(rotation, configuration))
        .without_scheduling()
        .start()
        .await
        .unwrap()
}

/// Creates jobs `{prefix}-0` … of `gpus` each, one at a time, each waited
/// for until released: admission goes on while something else happens.
pub async fn admit_one_by_one(jobs: &Api<Job>, prefix: &str, count: usize, gpus: u32) {
    for i in 0..count {
        let name = format!("{prefix}-{i}");
        jobs.create(&PostParams::default(), &job(&name, gpus))
            .await
            .unwrap();
        wait_for(jobs, &name, "admitted meanwhile", released).await;
    }
}

/// The value of the series `series` (name and labels exactly as encoded).
pub fn sample(registry: &prometheus_client::registry::Registry, series: &str) -> Option<f64> {
    arbiter_policy::metrics::encode(registry)
        .lines()
        .find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            value.parse().ok()
        })
}

/// A `bundle.yaml` named `name`, version `version`, whose one admission
/// policy allows at most `max` GPUs per job.
pub fn gpu_cap(name: &str, version: u32, max: u32) -> String {
    format!(
        r#"apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {{name: {name}, version: "{version}"}}
spec:
  policies:
  - name: at-most-{max}-gpus
    hook: admission
    cel:
      expression: "workload.gpus <= {max}"
      messageExpression: "'jobs may ask for at most {max} GPUs, got ' + string(workload.gpus)"
"#
    )
}

/// Creates or replaces the labelled ConfigMap `namespace/name` with these
/// `data` and `binaryData` entries (server-side apply, as `kubectl apply`
/// would; the operator's status annotation is left alone).
pub async fn put_bundle(
    client: &Client,
    namespace: &str,
    name: &str,
    data: &[(&str, &str)],
    binary: &[(&str, &[u8])],
) {
    let data: std::collections::BTreeMap<&str, &str> = data.iter().copied().collect();
    let binary: std::collections::BTreeMap<&str, k8s_openapi::ByteString> = binary
        .iter()
        .map(|(k, v)| (*k, k8s_openapi::ByteString(v.to_vec())))
        .collect();
    let body = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"arbiter.dev/policy-bundle": "true"}},
        "data": data,
        "binaryData": binary,
    });
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&body),
        )
        .await
        .unwrap_or_else(|e| panic!("applying ConfigMap {namespace}/{name}: {e}"));
}

/// A tenant `bundle.yaml` named `name` holding `policies` (YAML list items).
pub fn tenant_bundle(name: &str, policies: &str) -> String {
    format!(
        "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: {name}, version: \"1\"}}\nspec:\n  policies:\n{policies}"
    )
}

/// The status of an object's condition `type_`, if it has one.
pub fn condition_status(object: &serde_json::Value, type_: &str) -> Option<String> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str())
        .map(str::to_string)
}

/// The pods in `team-a` whose labels match `selector`.
pub async fn pods(client: &Client, selector: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "team-a")
        .list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
}

/// Waits until the pods matching `selector` satisfy `check`; returns them.
pub async fn wait_pods(
    client: &Client,
    cluster: &TestCluster,
    selector: &str,
    what: &str,
    check: impl Fn(&[Pod]) -> bool,
) -> Vec<Pod> {
    let started = std::time::Instant::now();
    loop {
        let found = pods(client, selector).await;
        if check(&found) {
            return found;
        }
        if started.elapsed() > PATIENCE {
            let states: Vec<_> = found
                .iter()
                .map(|p| {
                    (
                        p.metadata.name.clone(),
                        p.spec.as_ref().and_then(|s| s.node_name.clone()),
                        p.status.as_ref().and_then(|s| s.phase.clone()),
                        p.status.as_ref().and_then(|s| s.conditions.clone()),
                    )
                })
                .collect();
            panic!(
                "pods {selector}: {what} did not happen within {} s; they are {states:#?}\n{}",
                PATIENCE.as_secs(),
                cluster.logs_tail(),
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// The Workload `namespace/name`, as JSON (null while there is none).
pub async fn workload_in(client: &Client, namespace: &str, name: &str) -> Value {
    let api: Api<Workload> = Api::namespaced(client.clone(), namespace);
    serde_json::to_value(api.get_opt(name).await.unwrap()).unwrap()
}

/// Waits until the Workload `namespace/name` satisfies `check`; returns it.
pub async fn wait_workload_in(
    client: &Client,
    namespace: &str,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let started = std::time::Instant::now();
    loop {
        let now = workload_in(client, namespace, name).await;
        if check(&now) {
            return now;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "Workload {namespace}/{name}: {what} did not happen within {} s; it is {}",
            PATIENCE.as_secs(),
            serde_json::to_string_pretty(&now).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
