//! Kueue's manager beside a test cluster: the binary `scripts/kueue.sh`
//! builds from the Go module proxy (cached by version), its CRDs, and the
//! manager started against the test API server as a given token user.
//! The performance comparison (`examples/operator-perf.rs --against kueue`)
//! and the shadow mode's end-to-end test (`crates/operator/tests/shadow.rs`)
//! both start it through here.
//!
//! Kueue runs as shipped (`config/components/manager/controller_manager_config.yaml`:
//! client QPS 50 / burst 100, the same controller concurrency) except what
//! a process on loopback needs: leader election off, its own ports, the
//! `batch/job` integration only (the others' CRDs are not installed), and
//! its certificate managed outside it (`internalCertManagement.enable:
//! false`: the Jobs are created suspended, so its webhooks are never
//! called). `tuned` raises the client QPS / burst to 5,000 / 10,000, the
//! same as the test cluster gives kube-controller-manager.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::{crd_documents, ensure_serving_cert, io, workspace_root, Error, TestCluster};

/// Kueue's group and version for the objects tests apply.
pub const API_VERSION: &str = "kueue.x-k8s.io/v1beta2";

/// The script that builds Kueue (relative to the repository root).
const BUILD_SCRIPT: &str = "scripts/kueue.sh";

/// Where Kueue v0.17 reads its metrics serving certificate when it does
/// not manage certificates itself, and its visibility server's (both
/// hard-coded: `cmd/kueue/main.go`, `pkg/visibility/server.go`).
const FIXED_CERT_DIRS: [&str; 2] = ["/etc/kueue/metrics/certs", "/visibility"];

/// How long the manager may take to report ready (a bound on a hang on a
/// loaded machine, not a measurement).
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// The directory `scripts/kueue.sh` built Kueue into, building it first
/// when it is not there yet (a few minutes; `scripts/test.sh` builds it
/// before the tests).
pub fn build() -> Result<PathBuf, Error> {
    let script = workspace_root().join(BUILD_SCRIPT);
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .map_err(io(format!("running {}", script.display())))?;
    if !output.status.success() {
        return Err(Error::Other(format!(
            "{BUILD_SCRIPT} could not build Kueue (see its output above); it needs Go 1.25 or newer on PATH"
        )));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim().to_string(),
    ))
}

/// Installs Kueue's CRDs (every file `scripts/kueue.sh` copied into `dir`).
pub async fn install_crds(cluster: &TestCluster, dir: &Path) -> Result<(), Error> {
    let crds = dir.join("crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&crds)
        .map_err(io(format!("reading {}", crds.display())))?
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

/// A free loopback port.
fn free_port() -> Result<u16, Error> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io("finding a free loopback port"))
}

/// Kueue's manager, running; dropping it stops it.
pub struct Manager {
    child: Child,
    health: u16,
    log: PathBuf,
}

impl Manager {
    /// Starts the manager built into `dir` as the token user whose
    /// `kubeconfig` is given, logging to `log`.
    pub fn start(
        cluster: &TestCluster,
        dir: &Path,
        kubeconfig: &Path,
        tuned: bool,
        log: &Path,
    ) -> Result<Manager, Error> {
        for fixed in FIXED_CERT_DIRS {
            ensure_serving_cert(Path::new(fixed)).map_err(|e| {
                Error::Other(format!("Kueue v0.17 reads a serving certificate from {fixed} (a fixed path); it could not be written there: {e}"))
            })?;
        }
        let webhook_certs = cluster.dir().join("kueue-webhook-certs");
        ensure_serving_cert(&webhook_certs)?;
        let health = free_port()?;
        let config = configuration(tuned, health, free_port()?, free_port()?, &webhook_certs);
        let config_path = cluster.dir().join("kueue-config.yaml");
        let text =
            serde_json::to_string_pretty(&config).map_err(|e| Error::Other(e.to_string()))?;
        std::fs::write(&config_path, text)
            .map_err(io(format!("writing {}", config_path.display())))?;
        let binary = dir.join("kueue");
        let stderr =
            std::fs::File::create(log).map_err(io(format!("creating {}", log.display())))?;
        let child = Command::new(&binary)
            .arg(format!("--config={}", config_path.display()))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--visibility-server-port={}", free_port()?))
            .current_dir(cluster.dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(io(format!("starting {}", binary.display())))?;
        Ok(Manager {
            child,
            health,
            log: log.to_path_buf(),
        })
    }

    /// The port of its health probes (`/readyz`).
    pub fn health_port(&self) -> u16 {
        self.health
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until its `/readyz` answers 200 (its caches synced, its
    /// controllers started).
    pub async fn wait_ready(&mut self) -> Result<(), Error> {
        let deadline = std::time::Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(Error::Exited {
                    process: "kueue",
                    status: status.to_string(),
                    log: self.log_tail(),
                });
            }
            if ready(self.health).await {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(Error::NotReady {
                    process: "kueue",
                    seconds: READY_TIMEOUT.as_secs(),
                    log: self.log_tail(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The end of its log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = text.len().saturating_sub(4000);
        let start = (start..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(text.len());
        text[start..].to_string()
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `GET /readyz` on the loopback port answers 200.
async fn ready(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let request =
        format!("GET /readyz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.is_ok() && head.ends_with(b"200")
}
