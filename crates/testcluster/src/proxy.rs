//! A fault-injecting proxy between a client (the operator under test) and
//! the test cluster's API server, for tests of what the operator does when
//! the API misbehaves in ways a real cluster does but a healthy loopback
//! API server never will: answering 429 (API Priority and Fairness) or 500
//! for a while, or going silent (a network partition: requests and open
//! watches hang, nothing refused).
//!
//! The proxy terminates TLS with a certificate from the cluster's CA (so a
//! client trusts it exactly as it trusts the API server), forwards each
//! request over its own TLS connection, and streams responses back, watches
//! included. Authentication passes through: the client's bearer token is
//! forwarded as sent.
//!
//! ```no_run
//! # async fn demo(cluster: &arbiter_testcluster::TestCluster) -> Result<(), arbiter_testcluster::Error> {
//! use arbiter_testcluster::proxy::{Fault, Requests};
//! let proxy = cluster.fault_proxy().await?;
//! let client = proxy.client_for("admin").await?; // talks to the API through the proxy
//! proxy.inject(Fault::Status { code: 429, requests: Requests::Writes });
//! // … the client's writes are refused with 429 …
//! proxy.heal();
//! # drop(client); Ok(()) }
//! ```

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::Client;
use rcgen::{CertificateParams, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{Error, TestCluster};

/// What the proxy does instead of forwarding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The chosen requests are answered with `code` and a Kubernetes
    /// `Status` body, never reaching the API server (a 429 also says
    /// `Retry-After: 1`, as API Priority and Fairness does).
    Status { code: u16, requests: Requests },
    /// Nothing reaches the API server and nothing comes back: new requests
    /// and the responses under way (watches included) wait until
    /// [`FaultProxy::heal`], then go on as if the network had come back.
    Partition,
}

/// Which requests a [`Fault::Status`] answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requests {
    /// Every request, reads and watches included.
    All,
    /// Every request but `GET` (creates, updates, patches, deletes).
    Writes,
}

/// How many requests the proxy forwarded and how many it answered itself
/// with an injected fault, so a test can tell its fault was met.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub forwarded: u64,
    pub injected: u64,
}

/// A running proxy; stops when dropped (its connections with it).
pub struct FaultProxy {
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    state: Arc<State>,
    accept: JoinHandle<()>,
    kubeconfig: kube::config::Kubeconfig,
    tokens: std::collections::BTreeMap<String, String>,
}

struct State {
    fault: Mutex<Option<Fault>>,
    /// `true` while partitioned; waited on by held requests and responses.
    partitioned: watch::Sender<bool>,
    /// Raised to drop every open connection at once.
    reset: watch::Sender<u64>,
    forwarded: AtomicU64,
    injected: AtomicU64,
    upstream: HttpClient<hyper_rustls::HttpsConnector<HttpConnector>, Incoming>,
    upstream_base: String,
}

type ProxyBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

impl TestCluster {
    /// Starts a [`FaultProxy`] in front of this cluster's API server.
    pub async fn fault_proxy(&self) -> Result<FaultProxy, Error> {
        FaultProxy::start(self).await
    }
}

impl FaultProxy {
    async fn start(cluster: &TestCluster) -> Result<FaultProxy, Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()])?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "arbiter-test-fault-proxy");
        let cert = params.signed_by(&key, cluster.ca())?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server_config = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(tls)?
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .map_err(tls)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));

        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(cluster.ca().der().to_vec()))
            .map_err(tls)?;
        let client_config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(client_config)
            .https_only()
            .enable_http1()
            .build();
        let upstream = HttpClient::builder(TokioExecutor::new()).build(connector);

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(crate::io("binding the fault proxy"))?;
        let address = listener
            .local_addr()
            .map_err(crate::io("the fault proxy's address"))?;
        let state = Arc::new(State {
            fault: Mutex::new(None),
            partitioned: watch::channel(false).0,
            reset: watch::channel(0).0,
            forwarded: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            upstream,
            upstream_base: cluster.server.clone(),
        });
        let accept = tokio::spawn(accept_loop(listener, acceptor, state.clone()));
        let server = format!("https://{address}");
        let mut kubeconfig = cluster.kubeconfig("", None);
        for named in &mut kubeconfig.clusters {
            if let Some(c) = named.cluster.as_mut() {
                c.server = Some(server.clone());
            }
        }
        Ok(FaultProxy {
            server,
            state,
            accept,
            kubeconfig,
            tokens: cluster.tokens.clone(),
        })
    }

    /// Starts answering with `fault` (replacing any fault before it).
    pub fn inject(&self, fault: Fault) {
        let partition = fault == Fault::Partition;
        *lock(&self.state.fault) = Some(fault);
        self.state.partitioned.send_replace(partition);
    }

    /// Forwards everything again; what a partition held goes on.
    pub fn heal(&self) {
        *lock(&self.state.fault) = None;
        self.state.partitioned.send_replace(false);
    }

    /// Drops every open connection at once (a reset, as when a load
    /// balancer in front of the API server fails over): requests under way
    /// fail and watches end.
    pub fn reset_connections(&self) {
        self.state.reset.send_modify(|n| *n += 1);
    }

    pub fn counts(&self) -> Counts {
        Counts {
            forwarded: self.state.forwarded.load(Ordering::Relaxed),
            injected: self.state.injected.load(Ordering::Relaxed),
        }
    }

    /// A kubeconfig that authenticates with `token` through the proxy.
    pub fn kubeconfig(&self, token: &str) -> kube::config::Kubeconfig {
        let mut kubeconfig = self.kubeconfig.clone();
        for named in &mut kubeconfig.auth_infos {
            if let Some(auth) = named.auth_info.as_mut() {
                auth.token = Some(token.to_string().into());
            }
        }
        kubeconfig
    }

    /// A client configuration for one of the cluster's token users,
    /// through the proxy. kube's clients retry 429, 503 and 504 answers by
    /// themselves (`default_retry`, up to 15 times with a backoff growing
    /// to minutes); a test that counts requests turns that off here.
    pub async fn config_for(&self, user: &str) -> Result<kube::Config, Error> {
        let token = self
            .tokens
            .get(user)
            .ok_or_else(|| Error::Other(format!("the test cluster has no token user '{user}'")))?;
        Ok(kube::Config::from_custom_kubeconfig(
            self.kubeconfig(token),
            &kube::config::KubeConfigOptions::default(),
        )
        .await?)
    }

    /// A client for one of the cluster's token users, through the proxy.
    pub async fn client_for(&self, user: &str) -> Result<Client, Error> {
        Ok(Client::try_from(self.config_for(user).await?)?)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.reset_connections();
        self.state.partitioned.send_replace(false);
    }
}

fn tls(e: impl std::fmt::Display) -> Error {
    Error::Other(format!("the fault proxy's TLS set-up: {e}"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    state: Arc<State>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let state = state.clone();
        tokio::spawn(async move {
            let mut reset = state.reset.subscribe();
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let service_state = state.clone();
            let service = hyper::service::service_fn(move |request| {
                let state = service_state.clone();
                async move { Ok::<_, Infallible>(handle(&state, request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service);
            tokio::select! {
                _ = connection => {}
                _ = reset.changed() => {}
            }
        });
    }
}

/// Waits while the proxy is partitioned.
async fn until_connected(state: &State) {
    let mut partitioned = state.partitioned.subscribe();
    let _ = partitioned.wait_for(|p| !*p).await;
}

async fn handle(state: &Arc<State>, request: Request<Incoming>) -> Response<ProxyBody> {
    until_connected(state).await;
    let injected = match &*lock(&state.fault) {
        Some(Fault::Status { code, requests }) => {
            let applies = match requests {
                Requests::All => true,
                Requests::Writes => request.method() != Method::GET,
            };
            applies.then_some(*code)
        }
        _ => None,
    };
    if let Some(code) = injected {
        state.injected.fetch_add(1, Ordering::Relaxed);
        return status_response(code);
    }
    state.forwarded.fetch_add(1, Ordering::Relaxed);
    let (mut parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    parts.uri = match format!("{}{path}", state.upstream_base).parse() {
        Ok(uri) => uri,
        Err(_) => return status_response(400),
    };
    match state
        .upstream
        .request(Request::from_parts(parts, body))
        .await
    {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            // Each frame waits out a partition before it is passed on; a
            // reset ends the response, so what a partition held never
            // reaches the client after its connection was reset (its
            // connection may not have noticed the reset yet).
            let held = state.clone();
            let reset = state.reset.subscribe();
            let frames = body.into_data_stream().then(move |data| {
                let held = held.clone();
                let mut reset = reset.clone();
                async move {
                    tokio::select! {
                        biased;
                        _ = reset.changed() => {
                            return Err(Box::<dyn std::error::Error + Send + Sync>::from(
                                "the connection was reset by the test's fault proxy",
                            ));
                        }
                        _ = until_connected(&held) => {}
                    }
                    data.map(Frame::data)
                        .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
                }
            });
            Response::from_parts(parts, BodyExt::boxed(StreamBody::new(frames)))
        }
        Err(e) => {
            let mut response = status_response(502);
            *response.body_mut() = Full::new(Bytes::from(format!("the fault proxy: {e}")))
                .map_err(|never| match never {})
                .boxed();
            response
        }
    }
}

/// A Kubernetes `Status` failure with `code`.
fn status_response(code: u16) -> Response<ProxyBody> {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let reason = match code {
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        _ => "Unknown",
    };
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": reason, "code": code,
        "message": format!("injected by the test's fault proxy ({code})"),
    });
    let mut builder = Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json");
    if code == 429 {
        builder = builder.header(http::header::RETRY_AFTER, "1");
    }
    builder
        .body(
            Full::new(Bytes::from(body.to_string()))
                .map_err(|never| match never {})
                .boxed(),
        )
        .expect("a response from valid parts")
}
