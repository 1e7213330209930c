//! Kueue v0.17 as the system under test (`--against kueue`): its manager
//! built from the Go module proxy by `scripts/kueue.sh`, its CRDs, the
//! shape's queue configuration as `kueue.x-k8s.io/v1beta2` objects, and the
//! manager started against the same test API server as the same token
//! user, so the runner measures it exactly as it measures Arbiter.
//!
//! Kueue runs as shipped (`config/components/manager/controller_manager_config.yaml`:
//! client QPS 50 / burst 100, the same controller concurrency) except what
//! a process on loopback needs: leader election off, its own ports, the
//! `batch/job` integration only (the others' CRDs are not installed), and
//! its certificate managed outside it (`internalCertManagement.enable:
//! false`: the Jobs are created suspended, so its webhooks are never
//! called). The tuned run raises the client QPS / burst to 5,000 / 10,000,
//! the same as the test cluster gives kube-controller-manager, so its rate
//! limiter is not the bound.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context as _};
use arbiter_testcluster::{crd_documents, workspace_root, TestCluster};
use serde_json::{json, Value};

use super::probe::{free_port, Process};

/// Kueue's group and version for every object the runner applies.
const API_VERSION: &str = "kueue.x-k8s.io/v1beta2";

/// Where Kueue v0.17 reads its metrics serving certificate when it does
/// not manage certificates itself, and its visibility server's (both
/// hard-coded: `cmd/kueue/main.go`, `pkg/visibility/server.go`).
const FIXED_CERT_DIRS: [&str; 2] = ["/etc/kueue/metrics/certs", "/visibility"];

/// The directory `scripts/kueue.sh` built Kueue into (building it first
/// when it is not there yet: a few minutes).
pub fn build() -> anyhow::Result<PathBuf> {
    let script = workspace_root().join("scripts/kueue.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !output.status.success() {
        bail!("{} failed (see above)", script.display());
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim().to_string(),
    ))
}

/// Kueue's CRDs (every file `scripts/kueue.sh` copied).
pub async fn install_crds(cluster: &TestCluster, dir: &Path) -> anyhow::Result<()> {
    let crds = dir.join("crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&crds)
        .with_context(|| format!("reading {}", crds.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let documents = crd_documents(&file)?;
        cluster.install_crds(&documents).await?;
    }
    Ok(())
}

/// One object of the shape's queue configuration (`arbiter.dev/v1alpha1`)
/// as Kueue spells it: `cohortName` and `parentName` (v1beta2), and an
/// empty `namespaceSelector` on a ClusterQueue, which in Kueue (unlike
/// Arbiter) admits from no namespace when left out.
pub fn object(arbiter: &Value) -> anyhow::Result<Value> {
    let mut value = arbiter.clone();
    value["apiVersion"] = json!(API_VERSION);
    let rename = |value: &mut Value, from: &str, to: &str| {
        if let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) {
            if let Some(v) = spec.remove(from) {
                spec.insert(to.to_string(), v);
            }
        }
    };
    match value["kind"].as_str().unwrap_or_default() {
        "ResourceFlavor" | "LocalQueue" | "WorkloadPriorityClass" => {}
        "Cohort" => rename(&mut value, "parent", "parentName"),
        "ClusterQueue" => {
            rename(&mut value, "cohort", "cohortName");
            if value["spec"].get("namespaceSelector").is_none() {
                value["spec"]["namespaceSelector"] = json!({});
            }
        }
        other => bail!("no Kueue object for kind {other:?}"),
    }
    Ok(value)
}

/// The labels that queue a Job in Kueue.
pub fn job_labels(priority_class: &str) -> Value {
    json!({"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": priority_class})
}

/// Kueue's manager Configuration: shipped values, loopback ports.
fn configuration(tuned: bool, health: u16, metrics: u16, webhook: u16, cert_dir: &Path) -> Value {
    let (qps, burst) = if tuned { (5000, 10000) } else { (50, 100) };
    json!({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "health": {"healthProbeBindAddress": format!("127.0.0.1:{health}")},
        "metrics": {"bindAddress": format!("127.0.0.1:{metrics}")},
        "webhook": {"port": webhook, "host": "127.0.0.1", "certDir": cert_dir},
        "leaderElection": {"leaderElect": false},
        "internalCertManagement": {"enable": false},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 5,
            "LocalQueue.kueue.x-k8s.io": 1, "Cohort.kueue.x-k8s.io": 1,
            "ClusterQueue.kueue.x-k8s.io": 1, "ResourceFlavor.kueue.x-k8s.io": 1}},
        "clientConnection": {"qps": qps, "burst": burst},
        "integrations": {"frameworks": ["batch/job"]},
    })
}

/// Starts Kueue's manager as the token user whose `kubeconfig` is given;
/// returns it and the port of its health probes (`/readyz`).
pub fn start(
    cluster: &TestCluster,
    dir: &Path,
    kubeconfig: &Path,
    tuned: bool,
    log: &Path,
) -> anyhow::Result<(Process, u16)> {
    for dir in FIXED_CERT_DIRS {
        arbiter_testcluster::ensure_serving_cert(Path::new(dir)).with_context(|| {
            format!("Kueue v0.17 reads a serving certificate from {dir} (a fixed path); this run could not write one there")
        })?;
    }
    let webhook_certs = cluster.dir().join("kueue-webhook-certs");
    arbiter_testcluster::ensure_serving_cert(&webhook_certs)?;
    let health = free_port()?;
    let config = configuration(tuned, health, free_port()?, free_port()?, &webhook_certs);
    let config_path = cluster.dir().join("kueue-config.yaml");
    std::fs::write(&config_path, serde_json::to_string_pretty(&config)?)
        .with_context(|| format!("writing {}", config_path.display()))?;
    let binary = dir.join("kueue");
    let child = Command::new(&binary)
        .arg(format!("--config={}", config_path.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--visibility-server-port={}", free_port()?))
        .current_dir(cluster.dir())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    Ok((Process(child), health))
}
