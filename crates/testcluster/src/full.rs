//! The full test cluster: beside etcd and kube-apiserver, the processes
//! that make pods happen — kube-controller-manager (the Job controller,
//! the garbage collector, ServiceAccounts, node life cycle …),
//! kube-scheduler (binds pods to Nodes), kwok (fake Nodes: their status
//! and leases, and the pods' life cycle as `kwok-stages.yaml` says) and the
//! Kubeflow training-operator (PyTorchJob, TFJob, MPIJob, XGBoostJob,
//! PaddleJob; its CRDs installed). It runs without its defaulting
//! webhook, so jobs name their containers and ports as it expects
//! (`pytorch` with port `pytorchjob-port`, …). Each gets its own free loopback ports and its log in the
//! cluster's directory; start-up waits for every one to say it is ready.
//!
//! Nodes are made by [`TestCluster::add_node`]: kwok manages only Nodes
//! annotated [`KWOK_NODE_ANNOTATION`], so a test may still create a Node
//! nothing manages (it stays NotReady).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Secret, ServiceAccount};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use rcgen::{CertificateParams, KeyPair};
use serde_json::json;

use crate::{free_port, io, spawn, tail, write, Error, TestCluster, START_TIMEOUT};

/// The annotation that makes a Node kwok's to manage.
pub const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// Pod annotation: how long a running pod runs before it succeeds (or
/// fails, when labelled [`FAIL_LABEL`]), a Go duration (`"2s"`). A pod
/// without it runs until it is deleted.
pub const RUN_FOR_ANNOTATION: &str = "arbiter.test/run-for";
/// Pod annotation: how long a bound pod takes to start and turn ready.
pub const READY_AFTER_ANNOTATION: &str = "arbiter.test/ready-after";
/// Pod label `"true"`: the pod fails after [`RUN_FOR_ANNOTATION`] (exit code 1).
pub const FAIL_LABEL: &str = "arbiter.test/fail";
/// Pod label `"true"`: the pod is bound but never starts (stays Pending, not ready).
pub const NEVER_READY_LABEL: &str = "arbiter.test/never-ready";

/// cluster-autoscaler's ProvisioningRequest CRD, beside the binaries.
const PROVISIONING_CRD: &str = "autoscaling.x-k8s.io_provisioningrequests.yaml";

/// The Stages kwok runs (Node and pod life cycles).
const KWOK_STAGES: &str = include_str!("kwok-stages.yaml");

/// Where the training-operator reads its webhook certificate (it has no
/// flag for it); shared by every test cluster on the machine.
const TRAINING_OPERATOR_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// The Kubeflow kinds the training-operator v1.8.1 runs: its scheme name
/// and CRD (copied from the shared test data into `tests/data/crds/`).
/// (JAXJob came after v1.8.1; MXJob's CRD is not in the test data.)
const KUBEFLOW_KINDS: &[(&str, &str)] = &[
    ("pytorchjob", "kubeflow.org_pytorchjobs.yaml"),
    ("tfjob", "kubeflow.org_tfjobs.yaml"),
    ("mpijob", "kubeflow.org_mpijobs.yaml"),
    ("xgboostjob", "kubeflow.org_xgboostjobs.yaml"),
    ("paddlejob", "kubeflow.org_paddlejobs.yaml"),
];

/// One process of the full cluster beside etcd and the API server.
pub(crate) struct Component {
    pub name: &'static str,
    pub child: Child,
    /// Its log's file name in the cluster's directory.
    log: String,
}

/// A Node of the full cluster (managed by kwok).
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `(key, value, effect)`.
    pub taints: Vec<(String, String, String)>,
    /// Allocatable resources (`cpu`, `memory`, `nvidia.com/gpu`, …); `pods` defaults to 110.
    pub allocatable: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

impl NodeSpec {
    /// A Node with `cpu` cores, 512 GiB of memory, 1 TiB of ephemeral
    /// storage (the training-operator's MPI launcher asks for some) and
    /// `gpus` of `nvidia.com/gpu`.
    pub fn gpu(name: &str, cpu: u32, gpus: u32) -> NodeSpec {
        let mut allocatable = BTreeMap::new();
        allocatable.insert("cpu".to_string(), cpu.to_string());
        allocatable.insert("memory".to_string(), "512Gi".to_string());
        allocatable.insert("ephemeral-storage".to_string(), "1Ti".to_string());
        if gpus > 0 {
            allocatable.insert("nvidia.com/gpu".to_string(), gpus.to_string());
        }
        NodeSpec {
            name: name.to_string(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            allocatable,
            annotations: BTreeMap::new(),
        }
    }

    pub fn label(mut self, key: &str, value: &str) -> NodeSpec {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> NodeSpec {
        self.taints
            .push((key.to_string(), value.to_string(), effect.to_string()));
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> NodeSpec {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }
}

impl TestCluster {
    /// Starts a cluster that runs pods: etcd, kube-apiserver,
    /// kube-controller-manager, kube-scheduler, kwok and the Kubeflow
    /// training-operator (its CRDs installed first), and waits until each
    /// is ready. No Node exists yet: add them with [`TestCluster::add_node`].
    ///
    /// A component that exits during start-up is started again once, on a
    /// whole new cluster (new ports, new directory), the first failure
    /// printed: on a loaded machine one such exit was seen whose log said
    /// nothing of why (its last lines were its flags).
    pub async fn start_full() -> Result<TestCluster, Error> {
        match Self::start_full_once().await {
            Err(first @ Error::Exited { .. }) => {
                eprintln!("the full test cluster did not start; starting it again once: {first}");
                Self::start_full_once().await
            }
            other => other,
        }
    }

    async fn start_full_once() -> Result<TestCluster, Error> {
        let mut cluster = TestCluster::start().await?;
        let bin = cluster.bin.clone();
        for name in [
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
            "training-operator",
        ] {
            if !bin.join(name).is_file() {
                return Err(Error::Binaries(format!(
                    "{} holds no {name}, which the full test cluster runs; run `{}`",
                    bin.display(),
                    crate::BUILD_SCRIPT
                )));
            }
        }
        let root = cluster.dir().to_path_buf();
        let admin_token = cluster.token("admin")?.to_string();
        let kubeconfig = cluster.write_kubeconfig("admin", &admin_token)?;
        let kubeconfig = kubeconfig.display().to_string();
        let client = cluster.admin_client().await?;

        // kube-controller-manager: every controller, signing ServiceAccount
        // tokens with the API server's key.
        let (mut command, port) =
            control_plane_command(&bin, "kube-controller-manager", &kubeconfig, &root)?;
        command
            .arg("--controllers=*")
            .arg("--use-service-account-credentials=false")
            .arg(format!(
                "--service-account-private-key-file={}",
                root.join("sa.key").display()
            ))
            .arg(format!("--root-ca-file={}", root.join("ca.crt").display()));
        cluster.add_component("kube-controller-manager", &mut command)?;
        let controller_manager = format!("https://127.0.0.1:{port}");

        let (mut command, port) =
            control_plane_command(&bin, "kube-scheduler", &kubeconfig, &root)?;
        cluster.add_component("kube-scheduler", &mut command)?;
        let scheduler = format!("https://127.0.0.1:{port}");

        let stages = root.join("kwok.yaml");
        write(&stages, KWOK_STAGES)?;
        let port = free_port()?;
        let mut command = Command::new(bin.join("kwok"));
        command
            .arg(format!("--kubeconfig={kubeconfig}"))
            .arg(format!("--config={}", stages.display()))
            .arg("--manage-all-nodes=false")
            .arg(format!(
                "--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake"
            ))
            // Pod IPs away from the service range (10.0.0.0/24); they are
            // only written into pod status, nothing is sent to them.
            .arg("--cidr=10.128.0.0/16")
            .arg("--node-ip=10.127.0.1")
            .arg(format!("--server-address=127.0.0.1:{port}"))
            // kwok reads $HOME/.kwok for defaults; keep each run apart.
            .env("HOME", &root);
        cluster.add_component("kwok", &mut command)?;
        let kwok = format!("http://127.0.0.1:{port}");

        // The training-operator: its CRDs Established first, the Secret it
        // insists on, a serving certificate where it reads one.
        let crd_dir = crate::workspace_root().join("tests/data/crds");
        let mut crds = Vec::new();
        for (_, file) in KUBEFLOW_KINDS {
            crds.extend(crate::crd_documents(&crd_dir.join(file))?);
        }
        // cluster-autoscaler's ProvisioningRequest (no autoscaler runs: a
        // test plays it).
        let provisioning = bin.join(PROVISIONING_CRD);
        if !provisioning.is_file() {
            return Err(Error::Binaries(format!(
                "{} holds no {PROVISIONING_CRD}; run `{}`",
                bin.display(),
                crate::BUILD_SCRIPT
            )));
        }
        crds.extend(crate::crd_documents(&provisioning)?);
        crate::crds::install(&client, &crds).await?;
        training_operator_prerequisites(&client).await?;
        let metrics = free_port()?;
        let probe = free_port()?;
        let webhook = free_port()?;
        let mut command = Command::new(bin.join("training-operator"));
        command
            .arg(format!("--kubeconfig={kubeconfig}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{probe}"))
            .arg(format!("--webhook-server-port={webhook}"))
            .arg("--leader-elect=false")
            .args(
                KUBEFLOW_KINDS
                    .iter()
                    .map(|(scheme, _)| format!("--enable-scheme={scheme}")),
            )
            .env("MY_POD_NAMESPACE", "kubeflow");
        cluster.add_component("training-operator", &mut command)?;
        let training_operator = format!("http://127.0.0.1:{probe}");

        let checks = [
            ("kube-controller-manager", controller_manager, "/healthz"),
            ("kube-scheduler", scheduler, "/readyz"),
            ("kwok", kwok, "/healthz"),
            ("training-operator", training_operator, "/readyz"),
        ];
        for (name, url, path) in checks {
            cluster.wait_component(name, &url, path).await?;
        }
        // The controller-manager's ServiceAccount controller is running
        // once `default` exists; pods may reference it from then on.
        cluster.wait_default_service_account(&client).await?;
        Ok(cluster)
    }

    fn add_component(&mut self, name: &'static str, command: &mut Command) -> Result<(), Error> {
        let log = format!("{name}.log");
        let child = spawn(command, &self.dir().join(&log), name)?;
        self.components.push(Component { name, child, log });
        Ok(())
    }

    /// Polls `url` + `path` until it answers `ok`, failing with the
    /// component's log when it exits or start-up takes too long.
    async fn wait_component(
        &mut self,
        name: &'static str,
        url: &str,
        path: &str,
    ) -> Result<(), Error> {
        let mut config = kube::Config::new(
            url.parse()
                .map_err(|e| Error::Other(format!("{name}'s address {url}: {e}")))?,
        );
        config.accept_invalid_certs = true;
        let client = Client::try_from(config)?;
        let started = Instant::now();
        loop {
            self.check_components()?;
            let request = http::Request::get(path)
                .body(Vec::new())
                .map_err(|e| Error::Other(e.to_string()))?;
            if let Ok(body) = client.request_text(request).await {
                if body.trim() == "ok" {
                    return Ok(());
                }
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(Error::NotReady {
                    process: name,
                    seconds: START_TIMEOUT.as_secs(),
                    log: self.component_log(name),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn wait_default_service_account(&mut self, client: &Client) -> Result<(), Error> {
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        let started = Instant::now();
        while accounts.get_opt("default").await?.is_none() {
            self.check_components()?;
            if started.elapsed() > START_TIMEOUT {
                return Err(Error::NotReady {
                    process: "kube-controller-manager",
                    seconds: START_TIMEOUT.as_secs(),
                    log: self.component_log("kube-controller-manager"),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(())
    }

    /// Fails with its log if a component has exited.
    pub(crate) fn check_components(&mut self) -> Result<(), Error> {
        let dir = self.dir().to_path_buf();
        for component in &mut self.components {
            if let Ok(Some(status)) = component.child.try_wait() {
                return Err(Error::Exited {
                    process: component.name,
                    status: status.to_string(),
                    log: tail(&dir.join(&component.log)),
                });
            }
        }
        Ok(())
    }

    /// The last lines of a component's log (`kube-scheduler`, `kwok`, …).
    pub fn component_log(&self, name: &str) -> String {
        self.components
            .iter()
            .find(|c| c.name == name)
            .map(|c| tail(&self.dir().join(&c.log)))
            .unwrap_or_else(|| format!("no component {name} runs in this cluster"))
    }

    /// The last lines of every component's log, each under its name (for a
    /// failing test's message).
    pub fn logs_tail(&self) -> String {
        let mut text = String::new();
        for component in &self.components {
            text.push_str(&format!(
                "--- {} ---\n{}\n",
                component.name,
                tail(&self.dir().join(&component.log))
            ));
        }
        text
    }

    /// Adds a Node that kwok manages: it turns Ready within a second and
    /// runs the pods kube-scheduler binds to it (`kwok-stages.yaml`). Its
    /// `kubernetes.io/hostname` label is its name unless `spec` sets one.
    pub async fn add_node(&self, spec: &NodeSpec) -> Result<(), Error> {
        add_node(&self.admin_client().await?, spec).await
    }
}

/// [`TestCluster::add_node`] through `client` (for a task that plays a
/// controller adding Nodes, such as a test's cluster-autoscaler).
pub async fn add_node(client: &Client, spec: &NodeSpec) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut labels = spec.labels.clone();
    labels
        .entry("kubernetes.io/hostname".into())
        .or_insert_with(|| spec.name.clone());
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert("type".into(), "kwok".into());
    let mut annotations = spec.annotations.clone();
    annotations.insert(KWOK_NODE_ANNOTATION.into(), "fake".into());
    let taints: Vec<_> = spec
        .taints
        .iter()
        .map(|(key, value, effect)| json!({"key": key, "value": value, "effect": effect}))
        .collect();
    let mut allocatable = spec.allocatable.clone();
    allocatable
        .entry("pods".into())
        .or_insert_with(|| "110".into());
    // Created with its status, as a kubelet registers: kwok may read the
    // Node the moment it exists, and its first status (from
    // `node-initialize`) keeps the allocatable it read — a status written
    // after the create could be overwritten by one made without it.
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": spec.name, "labels": labels, "annotations": annotations},
        "spec": {"taints": taints},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }))
    .map_err(|e| Error::Other(format!("Node {}: {e}", spec.name)))?;
    let created = nodes.create(&PostParams::default(), &node).await?;
    if created
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .is_none_or(|a| a.is_empty())
    {
        let status = json!({"status": {"allocatable": allocatable, "capacity": allocatable}});
        nodes
            .patch_status(&spec.name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
    }
    Ok(())
}

/// The command line kube-controller-manager and kube-scheduler share: the
/// admin kubeconfig for everything, no leader election, no client rate
/// limit, serving on a free
/// loopback port (returned) with a certificate made in its own directory.
fn control_plane_command(
    bin: &Path,
    name: &str,
    kubeconfig: &str,
    root: &Path,
) -> Result<(Command, u16), Error> {
    let port = free_port()?;
    let mut command = Command::new(bin.join(name));
    command
        .arg(format!("--kubeconfig={kubeconfig}"))
        .arg(format!("--authentication-kubeconfig={kubeconfig}"))
        .arg(format!("--authorization-kubeconfig={kubeconfig}"))
        .arg("--authentication-skip-lookup=true")
        .arg("--leader-elect=false")
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={port}"))
        .arg(format!(
            "--cert-dir={}",
            root.join(format!("{name}-certs")).display()
        ))
        // No client-side rate limit (kwokctl's "unlimited"): the test
        // cluster should not hold a benchmark to 20 requests a second.
        .arg("--kube-api-qps=5000")
        .arg("--kube-api-burst=10000")
        .arg("--v=1");
    Ok((command, port))
}

/// What the training-operator needs before it starts: the `kubeflow`
/// Namespace, the (empty) Secret its certificate rotator insists on, and a
/// serving certificate in the directory it reads (the API server never
/// calls its webhook: no configuration for it is installed).
async fn training_operator_prerequisites(client: &Client) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt("kubeflow").await?.is_none() {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "kubeflow"}}))
                .map_err(|e| Error::Other(e.to_string()))?;
        namespaces
            .create(&PostParams::default(), &namespace)
            .await?;
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kubeflow");
    if secrets
        .get_opt("training-operator-webhook-cert")
        .await?
        .is_none()
    {
        let secret: Secret = serde_json::from_value(
            json!({"metadata": {"name": "training-operator-webhook-cert", "namespace": "kubeflow"}}),
        )
        .map_err(|e| Error::Other(e.to_string()))?;
        secrets.create(&PostParams::default(), &secret).await?;
    }
    ensure_serving_cert(Path::new(TRAINING_OPERATOR_CERT_DIR))
}

/// A self-signed certificate in `dir` (`tls.crt`, `tls.key`, for
/// `localhost`), unless one is there: both written into a directory of
/// their own that is then renamed to `dir`, so clusters starting side by
/// side never read half a pair (the first rename wins; the others find
/// `dir` there). For a component that serves TLS from a fixed directory
/// (the training-operator's webhooks, Kueue's metrics).
pub fn ensure_serving_cert(dir: &Path) -> Result<(), Error> {
    if dir.join("tls.crt").is_file() && dir.join("tls.key").is_file() {
        return Ok(());
    }
    let parent = dir.parent().unwrap_or(Path::new("/tmp"));
    std::fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
    let staging = tempfile::Builder::new()
        .prefix(".serving-certs-")
        .tempdir_in(parent)
        .map_err(io(format!("creating a directory in {}", parent.display())))?;
    let key = KeyPair::generate()?;
    let cert = CertificateParams::new(vec!["localhost".to_string()])?.self_signed(&key)?;
    write(&staging.path().join("tls.key"), &key.serialize_pem())?;
    write(&staging.path().join("tls.crt"), &cert.pem())?;
    let staged = staging.keep();
    if std::fs::rename(&staged, dir).is_err() {
        // Another cluster's pair got there first (or `dir` is left over
        // without files: then it is reported below).
        let _ = std::fs::remove_dir_all(&staged);
    }
    if dir.join("tls.crt").is_file() && dir.join("tls.key").is_file() {
        Ok(())
    } else {
        Err(Error::Other(format!(
            "{} holds no tls.crt and tls.key; remove the directory and start again",
            dir.display()
        )))
    }
}
