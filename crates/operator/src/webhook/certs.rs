//! The webhook server's certificate: read from a mounted directory
//! (`tls.crt`, `tls.key`, as a cert-manager Secret mounts them; reloaded
//! when the kubelet swaps the files), or generated: a CA and a serving
//! certificate made with rcgen, kept in a Secret of the operator's
//! namespace so every replica serves the same one, and the CA written into
//! the `caBundle` of the webhook configurations.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use serde_json::json;

/// Why the webhook has no certificate.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("reading {path}: {source}; mount the webhook's certificate Secret there (tls.crt and tls.key)")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} is not a usable PEM {expected}: {problem}")]
    Pem {
        what: String,
        expected: &'static str,
        problem: String,
    },
    #[error("the TLS configuration refuses the certificate and key: {0}")]
    Tls(#[from] rustls::Error),
    #[error("generating the webhook certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("the Secret {secret}: {source}; the operator needs get and create on Secrets in its namespace")]
    Secret { secret: String, source: kube::Error },
    #[error("the Secret {secret} has no {key}; delete it to have a new certificate generated, or fill it (type kubernetes.io/tls)")]
    SecretKey { secret: String, key: &'static str },
}

/// A serving certificate and key, and the CA that signed it.
#[derive(Clone, Debug)]
pub struct Serving {
    pub cert_pem: String,
    pub key_pem: String,
    /// What clients trust: the CA, or the certificate itself when mounted without one.
    pub ca_pem: String,
}

/// A CA and a serving certificate for `names` (DNS names or IP addresses)
/// signed by it.
pub fn generate(names: &[String]) -> Result<Serving, CertError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "arbiter-webhook-ca");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params
        .distinguished_name
        .push(DnType::CommonName, names.first().map_or("arbiter", |n| n));
    let cert = params.signed_by(&key, &ca)?;
    Ok(Serving {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        ca_pem: ca.pem(),
    })
}

/// The DNS names a Service `name` in `namespace` answers to, and loopback
/// (for a webhook configuration that calls `https://127.0.0.1:PORT`).
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        service.to_string(),
        "localhost".to_string(),
        "127.0.0.1".to_string(),
    ]
}

/// rustls' server configuration for a PEM certificate chain and key
/// (`what` names where they came from, for errors).
pub fn server_config(
    cert_pem: &[u8],
    key_pem: &[u8],
    what: &str,
) -> Result<ServerConfig, CertError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| CertError::Pem {
            what: format!("{what} tls.crt"),
            expected: "certificate",
            problem: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(CertError::Pem {
            what: format!("{what} tls.crt"),
            expected: "certificate",
            problem: "no CERTIFICATE block".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| CertError::Pem {
        what: format!("{what} tls.key"),
        expected: "private key",
        problem: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    Ok(config)
}

/// Reads `tls.crt` and `tls.key` (and `ca.crt` when present) from `dir`.
pub fn read_dir(dir: &Path) -> Result<Serving, CertError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|source| CertError::Read { path, source })
    };
    let cert_pem = read("tls.crt")?;
    let key_pem = read("tls.key")?;
    let ca_pem = read("ca.crt").unwrap_or_else(|_| cert_pem.clone());
    Ok(Serving {
        cert_pem,
        key_pem,
        ca_pem,
    })
}

/// The certificate kept in the Secret `namespace/name`, made and stored
/// there first if the Secret does not exist. Replicas starting together
/// agree: the one whose create loses reads the winner's.
pub async fn from_secret(
    client: &Client,
    namespace: &str,
    name: &str,
    names: &[String],
) -> Result<Serving, CertError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let shown = format!("{namespace}/{name}");
    let fail = |source| CertError::Secret {
        secret: shown.clone(),
        source,
    };
    if let Some(secret) = secrets.get_opt(name).await.map_err(fail)? {
        return from_secret_data(&secret, &shown);
    }
    let made = generate(names)?;
    let data = [
        ("tls.crt", &made.cert_pem),
        ("tls.key", &made.key_pem),
        ("ca.crt", &made.ca_pem),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
    .collect();
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some([("app.kubernetes.io/name".to_string(), "arbiter".to_string())].into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(data),
        ..Default::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(secret = %shown, "generated the webhook certificate and stored it");
            Ok(made)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let secret = secrets.get(name).await.map_err(fail)?;
            from_secret_data(&secret, &shown)
        }
        Err(e) => Err(fail(e)),
    }
}

fn from_secret_data(secret: &Secret, shown: &str) -> Result<Serving, CertError> {
    let get = |key: &'static str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .ok_or(CertError::SecretKey {
                secret: shown.to_string(),
                key,
            })
    };
    let cert_pem = get("tls.crt")?;
    Ok(Serving {
        key_pem: get("tls.key")?,
        ca_pem: get("ca.crt").unwrap_or_else(|_| cert_pem.clone()),
        cert_pem,
    })
}

/// JSON Patch operations that set `caBundle` on each webhook of a
/// configuration whose `caBundle` is not `ca` already (each guarded by a
/// test of the webhook's name, so a concurrent reorder fails the patch
/// rather than writing the wrong entry).
fn ca_patch<'a>(
    webhooks: impl Iterator<Item = (&'a str, Option<&'a ByteString>)>,
    ca: &[u8],
) -> Vec<serde_json::Value> {
    let mut ops = Vec::new();
    for (i, (name, current)) in webhooks.enumerate() {
        if current.is_some_and(|c| c.0 == ca) {
            continue;
        }
        ops.push(json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": name}));
        ops.push(
            json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"),
                        "value": k8s_openapi::ByteString(ca.to_vec())}),
        );
    }
    ops
}

pub(super) async fn patch_ops<K>(
    api: &Api<K>,
    name: &str,
    ops: Vec<serde_json::Value>,
) -> Result<(), kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if ops.is_empty() {
        return Ok(());
    }
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::Value::Array(ops)).map_err(kube::Error::SerdeError)?;
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map(|_| ())
}

/// A configuration's webhooks as (name, caBundle).
type WebhooksOf<K> = for<'a> fn(&'a K) -> Vec<(&'a str, Option<&'a ByteString>)>;

/// The patches that bring each version of the configuration `api` watches
/// (by `selector`) to `ca`; `webhooks` lists a configuration's webhooks
/// as (name, caBundle).
fn ca_patches<K>(
    api: Api<K>,
    selector: &str,
    ca: Vec<u8>,
    webhooks: WebhooksOf<K>,
) -> impl futures::Stream<Item = Result<Vec<serde_json::Value>, watcher::Error>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    watcher(api, watcher::Config::default().fields(selector))
        .default_backoff()
        .applied_objects()
        .map(move |o| o.map(|c| ca_patch(webhooks(&c).into_iter(), &ca)))
}

/// Keeps `ca` in the `caBundle` of the Mutating- and
/// ValidatingWebhookConfiguration named `configuration`, now and whenever
/// either is created or changed (a re-apply of `deploy/` that drops it).
/// Runs until the task is dropped; failures are logged and retried.
pub fn keep_ca_bundles(
    client: Client,
    configuration: String,
    ca: String,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        let selector = format!("metadata.name={configuration}");
        let ca = ca.into_bytes();
        let m = ca_patches(mutating.clone(), &selector, ca.clone(), |c| {
            c.webhooks
                .iter()
                .flatten()
                .map(|w| (w.name.as_str(), w.client_config.ca_bundle.as_ref()))
                .collect()
        })
        .map(|ops| (true, ops));
        let v = ca_patches(validating.clone(), &selector, ca, |c| {
            c.webhooks
                .iter()
                .flatten()
                .map(|w| (w.name.as_str(), w.client_config.ca_bundle.as_ref()))
                .collect()
        })
        .map(|ops| (false, ops));
        let mut both = std::pin::pin!(futures::stream::select(m, v));
        while let Some((is_mutating, ops)) = both.next().await {
            let kind = if is_mutating {
                "MutatingWebhookConfiguration"
            } else {
                "ValidatingWebhookConfiguration"
            };
            let ops = match ops {
                Ok(ops) => ops,
                Err(e) => {
                    tracing::warn!(%kind, name = %configuration, error = %e, "watching the webhook configuration failed; retrying with backoff");
                    continue;
                }
            };
            if ops.is_empty() {
                continue;
            }
            let result = if is_mutating {
                patch_ops(&mutating, &configuration, ops).await
            } else {
                patch_ops(&validating, &configuration, ops).await
            };
            match result {
                Ok(()) => {
                    tracing::info!(%kind, name = %configuration, "caBundle set to the webhook certificate's CA")
                }
                Err(e) => {
                    tracing::warn!(%kind, name = %configuration, error = %e, "setting caBundle failed; tried again on the next change")
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_certificate_makes_a_server_configuration() {
        let made = generate(&service_names("arbiter", "arbiter-system")).unwrap();
        server_config(
            made.cert_pem.as_bytes(),
            made.key_pem.as_bytes(),
            "generated",
        )
        .unwrap();
        assert!(made.ca_pem.contains("BEGIN CERTIFICATE"));
        assert_ne!(made.ca_pem, made.cert_pem);
    }

    #[test]
    fn a_bad_key_is_named() {
        let made = generate(&["localhost".to_string()]).unwrap();
        let error = server_config(made.cert_pem.as_bytes(), b"not a key", "/certs").unwrap_err();
        assert!(error.to_string().contains("/certs tls.key"), "{error}");
        let error = server_config(b"", made.key_pem.as_bytes(), "/certs").unwrap_err();
        assert!(error.to_string().contains("/certs tls.crt"), "{error}");
    }

    #[test]
    fn the_ca_patch_touches_only_webhooks_without_the_ca() {
        let ca = b"CA".to_vec();
        let same = ByteString(ca.clone());
        let ops = ca_patch([("a", Some(&same)), ("b", None)].into_iter(), &ca);
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0]["path"], "/webhooks/1/name");
        assert_eq!(ops[1]["path"], "/webhooks/1/clientConfig/caBundle");
        assert!(ca_patch([("a", Some(&same))].into_iter(), &ca).is_empty());
    }
}
