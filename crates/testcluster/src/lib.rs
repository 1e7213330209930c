//! A real Kubernetes control plane for Arbiter's end-to-end tests: etcd and
//! kube-apiserver (built from their Go modules by `scripts/test-cluster.sh`)
//! started on free loopback ports, with real RBAC, token authentication and
//! serving certificates signed by a CA made for the run.
//!
//! ```no_run
//! # async fn demo() -> Result<(), arbiter_testcluster::Error> {
//! let cluster = arbiter_testcluster::TestCluster::start().await?;
//! let admin = cluster.admin_client().await?;
//! let user = cluster.client_for("alice").await?; // token user "alice", no groups beyond authenticated
//! # drop((admin, user)); Ok(()) }
//! ```
//!
//! [`TestCluster::start`] runs the API server alone: nothing runs pods, no
//! garbage collector deletes dependents and no token controller fills
//! ServiceAccount secrets (tokens come from the TokenRequest API, which the
//! API server serves itself). [`TestCluster::start_full`] adds what makes
//! pods run — kube-controller-manager, kube-scheduler, kwok (fake Nodes and
//! the pods' life cycle) and the Kubeflow training-operator — see `full`.
//! Everything is removed when the value drops.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use kube::Client;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

mod crds;
mod full;
pub mod kueue;
pub mod proxy;
pub mod tcp;
pub use crds::{crd_documents, wait_established};
pub use full::{
    add_node, ensure_serving_cert, NodeSpec, FAIL_LABEL, KWOK_NODE_ANNOTATION, NEVER_READY_LABEL,
    READY_AFTER_ANNOTATION, RUN_FOR_ANNOTATION,
};

/// Where the binaries are looked for when `ARBITER_TEST_CLUSTER_BIN` is unset.
const BUILD_SCRIPT: &str = "scripts/test-cluster.sh";

/// How long start-up may take before it is reported as failed. A cold
/// kube-apiserver on a loaded 2-core machine needs 10–30 s; this bounds a
/// hang, it does not measure anything.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// Every way bringing the control plane up can fail, each with what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the test cluster's binaries were not found: {0}")]
    Binaries(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("generating the test cluster's certificates: {0}")]
    Certificates(#[from] rcgen::Error),
    #[error("{process} did not become ready within {seconds} s; its log ends:\n{log}")]
    NotReady {
        process: &'static str,
        seconds: u64,
        log: String,
    },
    #[error("{process} exited during start-up ({status}); its log ends:\n{log}")]
    Exited {
        process: &'static str,
        status: String,
        log: String,
    },
    #[error("building a client: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("calling the API server: {0}")]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Other(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// A running etcd + kube-apiserver. Dropping it stops both and removes
/// their data.
pub struct TestCluster {
    dir: tempfile::TempDir,
    etcd: Child,
    apiserver: Child,
    /// How etcd and the API server were started, to start them again.
    etcd_command: Command,
    apiserver_command: Command,
    /// `http://127.0.0.1:PORT` of etcd's client port.
    etcd_url: String,
    /// `https://127.0.0.1:PORT` of the API server.
    pub server: String,
    ca_pem: String,
    ca: CertifiedIssuer<'static, KeyPair>,
    tokens: BTreeMap<String, String>,
    /// Where the binaries are.
    bin: PathBuf,
    /// The full cluster's processes beside etcd and the API server.
    components: Vec<full::Component>,
}

impl fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestCluster")
            .field("server", &self.server)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

/// A token user of the cluster (from the API server's `--token-auth-file`).
struct TokenUser {
    name: &'static str,
    groups: &'static [&'static str],
}

/// The token users every cluster has: an administrator, and plain users for
/// tests of what RBAC refuses (no roles bound until a test binds some).
const USERS: &[TokenUser] = &[
    TokenUser {
        name: "admin",
        groups: &["system:masters"],
    },
    TokenUser {
        name: "alice",
        groups: &[],
    },
    TokenUser {
        name: "bob",
        groups: &[],
    },
];

/// What a test may change about how the control plane starts.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Flags added after the harness's own to kube-apiserver's (a later
    /// flag wins), e.g. `--watch-cache=false` to have every watch and list
    /// read etcd directly.
    pub apiserver_args: Vec<String>,
}

impl TestCluster {
    /// Starts etcd and kube-apiserver and waits until `/readyz` says ok.
    pub async fn start() -> Result<TestCluster, Error> {
        Self::start_with(&Options::default()).await
    }

    /// [`TestCluster::start`] with `options`.
    pub async fn start_with(options: &Options) -> Result<TestCluster, Error> {
        let bin = binaries()?;
        let dir = tempfile::Builder::new()
            .prefix("arbiter-test-cluster-")
            .tempdir()
            .map_err(io("creating the test cluster's directory"))?;
        let root = dir.path().to_path_buf();

        // Certificates: a CA for the run, the API server's serving
        // certificate for 127.0.0.1/localhost, a service-account signing key.
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "arbiter-test-cluster-ca");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
        let ca_pem = ca.pem();
        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec![
            "127.0.0.1".to_string(),
            "localhost".to_string(),
            "kubernetes.default.svc".to_string(),
        ])?;
        serving
            .distinguished_name
            .push(rcgen::DnType::CommonName, "kube-apiserver");
        let serving = serving.signed_by(&serving_key, &ca)?;
        let sa_key = KeyPair::generate()?;
        write(&root.join("ca.crt"), &ca_pem)?;
        write(&root.join("serving.crt"), &serving.pem())?;
        write(&root.join("serving.key"), &serving_key.serialize_pem())?;
        write(&root.join("sa.key"), &sa_key.serialize_pem())?;
        write(&root.join("sa.pub"), &sa_key.public_key_pem())?;

        let mut tokens = BTreeMap::new();
        let mut csv = String::new();
        for (i, user) in USERS.iter().enumerate() {
            let token = random_token(i)?;
            csv.push_str(&format!(
                "{token},{},uid-{},\"{}\"\n",
                user.name,
                user.name,
                user.groups.join(",")
            ));
            tokens.insert(user.name.to_string(), token);
        }
        write(&root.join("tokens.csv"), &csv)?;

        let etcd_client = free_port()?;
        let etcd_peer = free_port()?;
        let etcd_log = root.join("etcd.log");
        let mut etcd_command = Command::new(bin.join("etcd"));
        etcd_command
            .arg(format!("--data-dir={}", root.join("etcd").display()))
            .arg(format!(
                "--listen-client-urls=http://127.0.0.1:{etcd_client}"
            ))
            .arg(format!(
                "--advertise-client-urls=http://127.0.0.1:{etcd_client}"
            ))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{etcd_peer}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}"
            ))
            .arg(format!(
                "--initial-cluster=default=http://127.0.0.1:{etcd_peer}"
            ))
            .arg("--unsafe-no-fsync")
            .arg("--log-level=warn");
        let mut etcd = spawn(&mut etcd_command, &etcd_log, "etcd")?;

        let secure = free_port()?;
        let apiserver_log = root.join("kube-apiserver.log");
        let mut apiserver_command = Command::new(bin.join("kube-apiserver"));
        apiserver_command
            .arg(format!("--etcd-servers=http://127.0.0.1:{etcd_client}"))
            .arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={secure}"))
            .arg(format!("--cert-dir={}", root.join("certs").display()))
            .arg(format!(
                "--tls-cert-file={}",
                root.join("serving.crt").display()
            ))
            .arg(format!(
                "--tls-private-key-file={}",
                root.join("serving.key").display()
            ))
            .arg(format!(
                "--token-auth-file={}",
                root.join("tokens.csv").display()
            ))
            .arg("--service-account-issuer=https://kubernetes.default.svc")
            .arg(format!(
                "--service-account-key-file={}",
                root.join("sa.pub").display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                root.join("sa.key").display()
            ))
            .arg("--authorization-mode=RBAC")
            .arg("--service-cluster-ip-range=10.0.0.0/24")
            .arg("--disable-admission-plugins=ServiceAccount")
            .arg("--allow-privileged=true")
            // No `kubernetes` Service endpoints for a loopback address.
            .arg("--endpoint-reconciler-type=none")
            .arg("--v=1")
            .args(&options.apiserver_args);
        let apiserver = spawn(&mut apiserver_command, &apiserver_log, "kube-apiserver");
        let apiserver = match apiserver {
            Ok(child) => child,
            Err(e) => {
                let _ = etcd.kill();
                let _ = etcd.wait();
                return Err(e);
            }
        };

        let mut cluster = TestCluster {
            dir,
            etcd,
            apiserver,
            etcd_command,
            apiserver_command,
            etcd_url: format!("http://127.0.0.1:{etcd_client}"),
            server: format!("https://127.0.0.1:{secure}"),
            ca_pem,
            ca,
            tokens,
            bin,
            components: Vec::new(),
        };
        cluster.wait_ready().await?;
        Ok(cluster)
    }

    /// Stops the API server (SIGKILL: every watch and request breaks off,
    /// as in a control-plane failure), waits `down`, starts it again on the
    /// same port and etcd, and waits until it is ready. Its earlier log is
    /// kept as `kube-apiserver.log.N`.
    pub async fn restart_apiserver(&mut self, down: std::time::Duration) -> Result<(), Error> {
        self.stop_apiserver()?;
        tokio::time::sleep(down).await;
        self.start_apiserver().await
    }

    /// Stops the API server (SIGKILL), leaving everything else running: a
    /// cluster its clients cannot reach until [`TestCluster::start_apiserver`].
    pub fn stop_apiserver(&mut self) -> Result<(), Error> {
        let _ = self.apiserver.kill();
        let _ = self.apiserver.wait();
        Ok(())
    }

    /// Starts the API server stopped by [`TestCluster::stop_apiserver`]
    /// again on the same port and etcd, and waits until it is ready. Its
    /// earlier log is kept as `kube-apiserver.log.N`.
    pub async fn start_apiserver(&mut self) -> Result<(), Error> {
        let log = self.keep_log("kube-apiserver.log")?;
        self.apiserver = spawn(&mut self.apiserver_command, &log, "kube-apiserver")?;
        self.wait_ready().await
    }

    /// Stops etcd (SIGKILL, as in a storage failure: the API server stays
    /// up and answers errors, its watches quiet), waits `down`, starts it
    /// again on the same ports and data, and waits until the API server is
    /// ready again. Its earlier log is kept as `etcd.log.N`.
    pub async fn restart_etcd(&mut self, down: std::time::Duration) -> Result<(), Error> {
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
        let log = self.keep_log("etcd.log")?;
        tokio::time::sleep(down).await;
        self.etcd = spawn(&mut self.etcd_command, &log, "etcd")?;
        self.wait_ready().await
    }

    /// Compacts etcd's history up to its current revision (physically, as
    /// the API server's own periodic compaction does) and returns that
    /// revision. A watch resuming from an older resourceVersion is then
    /// answered `410 Gone` by an API server that reads etcd directly
    /// (started with `--watch-cache=false`, see [`Options`]) and has to
    /// list again.
    pub async fn compact_etcd(&self) -> Result<i64, Error> {
        // Any range read answers the current revision in its header.
        let range = self
            .etcd_call("/v3/kv/range", serde_json::json!({"key": "Lw=="}))
            .await?;
        let revision = range["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse::<i64>().ok())
            .ok_or_else(|| Error::Other(format!("etcd's range answer has no revision: {range}")))?;
        self.etcd_call(
            "/v3/kv/compaction",
            serde_json::json!({"revision": revision.to_string(), "physical": true}),
        )
        .await?;
        Ok(revision)
    }

    /// Calls etcd's JSON gateway: POST `path` with `body`.
    async fn etcd_call(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> Result<serde_json::Value, Error> {
        use http_body_util::{BodyExt, Full};
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<Full<bytes::Bytes>>();
        let failed = |e: &dyn fmt::Display| Error::Other(format!("etcd {path}: {e}"));
        let request = http::Request::post(format!("{}{path}", self.etcd_url))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(bytes::Bytes::from(body.to_string())))
            .map_err(|e| failed(&e))?;
        let response = client.request(request).await.map_err(|e| failed(&e))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| failed(&e))?
            .to_bytes();
        if !status.is_success() {
            return Err(failed(&format!(
                "{status}: {}",
                String::from_utf8_lossy(&body)
            )));
        }
        serde_json::from_slice(&body).map_err(|e| failed(&e))
    }

    /// Renames the log `name` to `name.N` (the first N free) and returns
    /// its path, for a restarted process to write anew.
    fn keep_log(&self, name: &str) -> Result<PathBuf, Error> {
        let log = self.dir.path().join(name);
        let mut n = 1;
        while log.with_extension(format!("log.{n}")).exists() {
            n += 1;
        }
        std::fs::rename(&log, log.with_extension(format!("log.{n}")))
            .map_err(io(format!("keeping {name}")))?;
        Ok(log)
    }

    /// Polls `/readyz` until it answers `ok`, failing with the log's tail
    /// when a process exits or start-up takes longer than `START_TIMEOUT`.
    async fn wait_ready(&mut self) -> Result<(), Error> {
        let client = self.admin_client().await?;
        let started = std::time::Instant::now();
        loop {
            for (process, child, log) in [
                ("etcd", &mut self.etcd, "etcd.log"),
                ("kube-apiserver", &mut self.apiserver, "kube-apiserver.log"),
            ] {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(Error::Exited {
                        process,
                        status: status.to_string(),
                        log: tail(&self.dir.path().join(log)),
                    });
                }
            }
            let request = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| Error::Other(e.to_string()))?;
            if let Ok(body) = client.request_text(request).await {
                if body.trim() == "ok" {
                    return Ok(());
                }
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(Error::NotReady {
                    process: "kube-apiserver",
                    seconds: START_TIMEOUT.as_secs(),
                    log: tail(&self.dir.path().join("kube-apiserver.log")),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The PEM of the CA that signed the API server's certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The run's CA, to sign more certificates (a webhook's, say).
    pub fn ca(&self) -> &CertifiedIssuer<'static, KeyPair> {
        &self.ca
    }

    /// The directory holding the cluster's files (logs, certificates).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The static token of one of the token users (`admin`, `alice`, `bob`).
    pub fn token(&self, user: &str) -> Result<&str, Error> {
        self.tokens.get(user).map(String::as_str).ok_or_else(|| {
            Error::Other(format!(
                "the test cluster has no token user '{user}'; it has {}",
                self.tokens.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }

    /// A kubeconfig that authenticates with `token` and trusts the run's CA.
    pub fn kubeconfig(&self, token: &str, namespace: Option<&str>) -> Kubeconfig {
        let b64 = base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes());
        Kubeconfig {
            clusters: vec![NamedCluster {
                name: "test".into(),
                cluster: Some(Cluster {
                    server: Some(self.server.clone()),
                    certificate_authority_data: Some(b64),
                    ..Cluster::default()
                }),
                other: Default::default(),
            }],
            auth_infos: vec![NamedAuthInfo {
                name: "user".into(),
                auth_info: Some(AuthInfo {
                    token: Some(token.to_string().into()),
                    ..AuthInfo::default()
                }),
                other: Default::default(),
            }],
            contexts: vec![NamedContext {
                name: "test".into(),
                context: Some(Context {
                    cluster: "test".into(),
                    user: Some("user".into()),
                    namespace: namespace.map(str::to_string),
                    ..Context::default()
                }),
                other: Default::default(),
            }],
            current_context: Some("test".into()),
            ..Kubeconfig::default()
        }
    }

    /// Writes [`kubeconfig`](Self::kubeconfig) to `NAME.kubeconfig` in the
    /// cluster's directory (for a process such as `arbiter run`).
    pub fn write_kubeconfig(&self, name: &str, token: &str) -> Result<PathBuf, Error> {
        let path = self.dir.path().join(format!("{name}.kubeconfig"));
        let yaml = serde_yaml_ng::to_string(&self.kubeconfig(token, None))
            .map_err(|e| Error::Other(format!("serializing a kubeconfig: {e}")))?;
        write(&path, &yaml)?;
        Ok(path)
    }

    /// A client authenticating with `token`.
    pub async fn client_with_token(&self, token: &str) -> Result<Client, Error> {
        let config = kube::Config::from_custom_kubeconfig(
            self.kubeconfig(token, None),
            &KubeConfigOptions::default(),
        )
        .await?;
        Ok(Client::try_from(config)?)
    }

    /// A client for one of the token users.
    pub async fn client_for(&self, user: &str) -> Result<Client, Error> {
        let token = self.token(user)?.to_string();
        self.client_with_token(&token).await
    }

    /// A client in group `system:masters`.
    pub async fn admin_client(&self) -> Result<Client, Error> {
        self.client_for("admin").await
    }

    /// A real ServiceAccount token (TokenRequest API, valid one hour) for
    /// `namespace/name`, creating the ServiceAccount if it does not exist.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, Error> {
        let admin = self.admin_client().await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(admin, namespace);
        if accounts.get_opt(name).await?.is_none() {
            let account = ServiceAccount {
                metadata: kube::api::ObjectMeta {
                    name: Some(name.to_string()),
                    namespace: Some(namespace.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            };
            accounts.create(&PostParams::default(), &account).await?;
        }
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(vec!["https://kubernetes.default.svc".into()]),
                expiration_seconds: Some(3600),
                ..Default::default()
            }),
            ..Default::default()
        };
        let answer = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await?;
        answer.status.and_then(|s| s.token).ok_or_else(|| {
            Error::Other(format!(
                "TokenRequest for {namespace}/{name} returned no token"
            ))
        })
    }

    /// Installs CRDs and waits until each is `Established`.
    pub async fn install_crds(&self, crds: &[CustomResourceDefinition]) -> Result<(), Error> {
        let client = self.admin_client().await?;
        crds::install(&client, crds).await
    }

    /// The last lines of the API server's log (for a failing test's message).
    pub fn apiserver_log_tail(&self) -> String {
        tail(&self.dir.path().join("kube-apiserver.log"))
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for component in &mut self.components {
            let _ = component.child.kill();
            let _ = component.child.wait();
        }
        for child in [&mut self.apiserver, &mut self.etcd] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The directory holding `etcd` and `kube-apiserver`: `ARBITER_TEST_CLUSTER_BIN`,
/// else what `scripts/test-cluster.sh --print` reports for the default versions.
pub fn binaries() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os("ARBITER_TEST_CLUSTER_BIN") {
        let dir = PathBuf::from(dir);
        return check_binaries(dir, "ARBITER_TEST_CLUSTER_BIN");
    }
    let script = workspace_root().join(BUILD_SCRIPT);
    let output = Command::new("bash")
        .arg(&script)
        .arg("--print")
        .output()
        .map_err(io(format!("running {}", script.display())))?;
    if !output.status.success() {
        return Err(Error::Binaries(format!(
            "kube-apiserver and etcd are not built yet; run `{BUILD_SCRIPT}` (10-20 min the first time; scripts/test.sh does it) or point ARBITER_TEST_CLUSTER_BIN at a directory holding both"
        )));
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim().to_string());
    check_binaries(dir, BUILD_SCRIPT)
}

fn check_binaries(dir: PathBuf, from: &str) -> Result<PathBuf, Error> {
    for name in ["etcd", "kube-apiserver"] {
        if !dir.join(name).is_file() {
            return Err(Error::Binaries(format!(
                "{} (from {from}) holds no {name}; run `{BUILD_SCRIPT}`",
                dir.display()
            )));
        }
    }
    Ok(dir)
}

/// The repository root (this crate is `crates/testcluster`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn spawn(command: &mut Command, log: &Path, what: &str) -> Result<Child, Error> {
    let file = std::fs::File::create(log).map_err(io(format!("creating {}", log.display())))?;
    let err = file
        .try_clone()
        .map_err(io(format!("opening {}", log.display())))?;
    command
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(io(format!("starting {what}")))
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(io(format!("writing {}", path.display())))
}

/// Ports handed out so far by this process ([`free_port`]).
static PORTS_GIVEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A free loopback port for a component to listen on. Taken below the
/// kernel's ephemeral range (`ip_local_port_range`, 32768 and up by
/// default), where a port the kernel would give out (`127.0.0.1:0`) could
/// become an outgoing connection's local port between this check and the
/// component's own bind — a test cluster's components once failed to start
/// that way; and never the same port twice in a process, since the tests
/// of one binary start clusters side by side. Each candidate is checked
/// free by binding it. Falls back to a kernel-given port where the
/// ephemeral range leaves no room below it.
fn free_port() -> Result<u16, Error> {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    const LOW: u32 = 10_000;
    if ephemeral_low > LOW + 1_000 {
        let span = ephemeral_low - LOW;
        // Processes start at different places, so two at once rarely meet.
        let start = std::process::id().wrapping_mul(7_919) % span;
        for _ in 0..span {
            let n = PORTS_GIVEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let port = (LOW + (start + n) % span) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io("finding a free port"))?;
    Ok(listener
        .local_addr()
        .map_err(io("finding a free port"))?
        .port())
}

/// 32 random bytes as hex, from the kernel.
fn random_token(salt: usize) -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io("reading /dev/urandom for a token"))?;
    let mut token = format!("t{salt}");
    for b in bytes {
        token.push_str(&format!("{b:02x}"));
    }
    Ok(token)
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
