//! The admission webhooks, served over TLS (rustls) on every replica,
//! leader or not:
//!
//! - `POST /mutate-job` (mutating): holds every new job of an integration's
//!   kind that names a queue, so none starts before admission. The patch
//!   is the driver's own hold transform (`inject::hold`).
//! - `POST /validate-config` (validating): refuses a queue configuration
//!   object (ResourceFlavor, Cohort, ClusterQueue, LocalQueue,
//!   WorkloadPriorityClass, Topology) whose change would make the configuration
//!   invalid, with the simulator's messages (`review::check_config` over
//!   the reflectors' stores).
//!
//! The certificate comes from a mounted directory (reloaded on change), or
//! is generated with a real validity and kept in a Secret that every
//! replica watches and reloads from and any replica rotates — a new
//! serving certificate from the same CA before the old one expires, a new
//! CA through a bundle of both (`rotation`, deciding through `certs::due`);
//! the CA bundle is patched into the webhook configurations
//! (`certs::keep_ca_bundles`). The job-hold webhook's rules are kept
//! covering every job kind served (`rules`).

pub mod certs;
pub mod review;
pub mod rotation;
pub mod rules;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::jobs::Integrations;
use arbiter_policy::reload::DirWatcher;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use axum_server::tls_rustls::RustlsConfig;
use k8s_openapi::api::core::v1::{Namespace as KubeNamespace, Node};
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::runtime::reflector::Store;
use kube::Client;
use serde_json::Value;

use crate::config;
pub use certs::{CertError, Rotation};
use review::Verdict;

/// What the validating webhook reads: the reflectors' stores.
#[derive(Clone)]
pub struct ConfigView {
    pub config: Vec<Store<DynamicObject>>,
    pub namespaces: Store<KubeNamespace>,
    pub nodes: Store<Node>,
}

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub enum CertSource {
    /// `tls.crt` and `tls.key` in a directory (a mounted Secret), reloaded when they change.
    Dir(PathBuf),
    /// Generated and kept in the Secret `namespace/name`, valid for
    /// `names`, rotated as `rotation` says.
    Secret {
        namespace: String,
        name: String,
        names: Vec<String>,
        rotation: Rotation,
    },
}

/// How the webhooks are served.
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    pub certs: CertSource,
    /// The Mutating- and ValidatingWebhookConfiguration whose `caBundle`
    /// is kept equal to the certificate's CA (`None`: left alone, as with
    /// cert-manager's CA injector).
    pub configuration: Option<String>,
}

struct WebhookState {
    integrations: Integrations,
    view: ConfigView,
}

/// The running server.
pub struct Webhook {
    pub address: SocketAddr,
    ca_bundle: tokio::sync::watch::Receiver<String>,
    server: tokio::task::JoinHandle<()>,
    ca_bundles: Option<tokio::task::JoinHandle<()>>,
    keeper: Option<tokio::task::JoinHandle<()>>,
    _reload: Option<DirWatcher>,
}

impl Webhook {
    /// The CA bundle clients must trust now (it changes when a CA is
    /// rotated in or out).
    pub fn ca_pem(&self) -> String {
        self.ca_bundle.borrow().clone()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.server.abort();
        for task in self.ca_bundles.iter().chain(&self.keeper) {
            task.abort();
        }
    }
}

/// Why the webhook server did not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error("binding the webhook port {address}: {source}; pass another --webhook-address")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("watching the certificate directory {dir}: {source}")]
    Watch {
        dir: PathBuf,
        source: arbiter_policy::reload::WatchError,
    },
}

/// Binds `address` and serves both webhooks until the returned `Webhook` is dropped.
pub async fn start(
    client: &Client,
    address: SocketAddr,
    options: &WebhookOptions,
    integrations: Integrations,
    view: ConfigView,
) -> Result<Webhook, WebhookError> {
    let (serving, what, keeper) = match &options.certs {
        CertSource::Dir(dir) => (certs::read_dir(dir)?, dir.display().to_string(), None),
        CertSource::Secret {
            namespace,
            name,
            names,
            rotation,
        } => {
            let keeper = rotation::Keeper::load(
                client,
                namespace,
                name,
                names.clone(),
                *rotation,
                options.configuration.clone(),
            )
            .await?;
            (
                keeper.stored().serving(),
                format!("Secret {namespace}/{name}"),
                Some(keeper),
            )
        }
    };
    let tls = certs::server_config(
        serving.cert_pem.as_bytes(),
        serving.key_pem.as_bytes(),
        &what,
    )?;
    let tls = RustlsConfig::from_config(Arc::new(tls));
    let reload = match &options.certs {
        CertSource::Dir(dir) => Some(watch_certs(dir, tls.clone())?),
        CertSource::Secret { .. } => None,
    };
    // A mounted directory's CA is read once; the Secret's follows it.
    let ca_bundle = match &keeper {
        Some(keeper) => keeper.ca_bundle(),
        None => tokio::sync::watch::channel(serving.ca_pem.clone()).1,
    };
    let listener = std::net::TcpListener::bind(address)
        .map_err(|source| WebhookError::Bind { address, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| WebhookError::Bind { address, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| WebhookError::Bind { address, source })?;
    let state = Arc::new(WebhookState { integrations, view });
    let app = Router::new()
        .route("/mutate-job", post(mutate))
        .route("/validate-config", post(validate))
        .with_state(state);
    let server = axum_server::from_tcp_rustls(listener, tls.clone())
        .map_err(|source| WebhookError::Bind { address, source })?;
    let keeper = keeper.map(|keeper| keeper.run(tls));
    let server = tokio::spawn(async move {
        if let Err(e) = server.serve(app.into_make_service()).await {
            tracing::error!(error = %e, "the webhook server stopped");
        }
    });
    let ca_bundles = options
        .configuration
        .as_ref()
        .map(|name| certs::keep_ca_bundles(client.clone(), name.clone(), ca_bundle.clone()));
    tracing::info!(address = %bound, certificate = %what, "webhooks serving /mutate-job and /validate-config");
    Ok(Webhook {
        address: bound,
        ca_bundle,
        server,
        ca_bundles,
        keeper,
        _reload: reload,
    })
}

/// Reloads the certificate when the mounted directory changes (the
/// kubelet's `..data` swap when cert-manager renews it); a pair that does
/// not load is logged and the one in use kept.
fn watch_certs(dir: &std::path::Path, tls: RustlsConfig) -> Result<DirWatcher, WebhookError> {
    let shown = dir.display().to_string();
    let path = dir.to_path_buf();
    DirWatcher::spawn(dir, Duration::from_millis(200), move || {
        let loaded = certs::read_dir(&path).and_then(|s| {
            certs::server_config(s.cert_pem.as_bytes(), s.key_pem.as_bytes(), &shown)
        });
        match loaded {
            Ok(config) => {
                tls.reload_from_config(Arc::new(config));
                tracing::info!(dir = %shown, "webhook certificate reloaded");
            }
            Err(e) => tracing::warn!(error = %e, "the changed webhook certificate does not load; the one in use stays"),
        }
    })
    .map_err(|source| WebhookError::Watch {
        dir: dir.to_path_buf(),
        source,
    })
}

fn json_response(review: AdmissionReview<DynamicObject>) -> Response {
    match serde_json::to_vec(&review) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The request of an AdmissionReview body, or the response to send instead.
fn read_review(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, Box<Response>> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).map_err(|e| {
        Box::new(
            (
                StatusCode::BAD_REQUEST,
                format!("not an AdmissionReview: {e}"),
            )
                .into_response(),
        )
    })?;
    review
        .try_into()
        .map_err(|e: kube::core::admission::ConvertAdmissionReviewError| {
            Box::new(json_response(
                AdmissionResponse::invalid(e.to_string()).into_review(),
            ))
        })
}

async fn mutate(State(state): State<Arc<WebhookState>>, body: Bytes) -> Response {
    mutation(&state.integrations, &body)
}

/// The mutating webhook's answer to an AdmissionReview `body` (public for
/// the fuzz target: it is what the API server, or anything reaching the
/// port, sends).
pub fn mutation(integrations: &Integrations, body: &[u8]) -> Response {
    let request = match read_review(body) {
        Ok(r) => r,
        Err(response) => return *response,
    };
    let mut response = AdmissionResponse::from(&request);
    if let (Operation::Create, Some(object)) = (&request.operation, &request.object) {
        let object = serde_json::to_value(object).unwrap_or(Value::Null);
        match review::hold_patch(integrations, &object) {
            Ok(None) => {}
            Ok(Some(patch)) => match response.clone().with_patch(patch) {
                Ok(patched) => response = patched,
                Err(e) => {
                    response = response.deny(format!("Arbiter could not write the hold: {e}"))
                }
            },
            Err(message) => {
                tracing::info!(job = %format!("{}/{}", request.namespace.as_deref().unwrap_or(""), request.name), %message, "job refused: it cannot be held");
                response = response.deny(message);
            }
        }
    }
    json_response(response.into_review())
}

async fn validate(State(state): State<Arc<WebhookState>>, body: Bytes) -> Response {
    let view = &state.view;
    let current = config::api_objects(view.config.iter().flat_map(|s| s.state()));
    let namespaces = config::namespaces(&view.namespaces.state());
    let nodes: Vec<Node> = view.nodes.state().iter().map(|n| (**n).clone()).collect();
    let resources: Vec<String> = config::node_resources(&nodes).collect();
    validation(&current, &namespaces, &resources, &body)
}

/// The validating webhook's answer to an AdmissionReview `body`, against
/// the configuration `current` (public for the fuzz target).
pub fn validation(
    current: &[config::ApiObject],
    namespaces: &std::collections::BTreeMap<String, arbiter_core::model::cluster::Namespace>,
    resources: &[String],
    body: &[u8],
) -> Response {
    let request = match read_review(body) {
        Ok(r) => r,
        Err(response) => return *response,
    };
    let mut response = AdmissionResponse::from(&request);
    if let (Operation::Create | Operation::Update, Some(object)) =
        (&request.operation, &request.object)
    {
        let candidate = serde_json::to_value(object).unwrap_or(Value::Null);
        match review::check_config(current, namespaces, resources, &candidate) {
            Verdict::Allowed(warnings) => {
                if !warnings.is_empty() {
                    response.warnings = Some(warnings);
                }
            }
            Verdict::Denied(errors) => {
                response = response.deny(errors.join("; "));
                response.result.code = 422;
                response.result.reason = "Invalid".into();
            }
        }
    }
    json_response(response.into_review())
}
