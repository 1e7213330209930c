//! The webhook server's certificate: read from a mounted directory
//! (`tls.crt`, `tls.key`, as a cert-manager Secret mounts them; reloaded
//! when the kubelet swaps the files), or generated with rcgen and kept in
//! a Secret of the operator's namespace (`rotation` keeps that Secret).
//!
//! This module makes and judges certificates without any I/O of its own
//! and never reads the clock (the time is passed in): what the Secret
//! holds ([`Stored`]: `tls.crt`, `tls.key`, `ca.crt` — the CA bundle, the
//! CA that signs first — and `ca.key`), a new CA (valid
//! [`Rotation::ca_validity`]) and serving certificates it signs (valid
//! [`Rotation::validity`]), when the Secret needs a change ([`due`]) and
//! what that change writes ([`Stored::apply`]). It also builds rustls'
//! server configuration, and holds the one task here that talks to the
//! API: [`keep_ca_bundles`], which keeps the CA bundle in the `caBundle`
//! of the webhook configurations. Called by `webhook::start` and
//! `webhook::rotation`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::ByteString;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData,
};
use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{RootCertStore, ServerConfig};
use serde_json::json;
use time::OffsetDateTime;
use tokio::sync::watch;

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
    #[error("the Secret {secret}: {source}; the operator needs create, and get, list, watch and update on that Secret, in its namespace (deploy/rbac.yaml)")]
    Secret { secret: String, source: kube::Error },
    #[error("the webhook certificate's rotation settings: {0}")]
    Rotation(String),
}

/// A serving certificate and key, and the CA that signed it.
#[derive(Clone, Debug)]
pub struct Serving {
    pub cert_pem: String,
    pub key_pem: String,
    /// What clients trust: the CA, or the certificate itself when mounted without one.
    pub ca_pem: String,
}

const DAY: Duration = Duration::from_secs(86_400);

/// How long generated certificates live and when they are replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// A serving certificate's validity (default 365 days).
    pub validity: Duration,
    /// A serving certificate is replaced this long before it expires
    /// (default 30 days).
    pub renew_before: Duration,
    /// How often each replica looks at the Secret (default an hour).
    pub check_every: Duration,
    /// A CA's validity (default 10 years). A CA is replaced once it has
    /// less than `validity + renew_before` left, so no serving certificate
    /// outlives the CA that signed it.
    pub ca_validity: Duration,
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation {
            validity: 365 * DAY,
            renew_before: 30 * DAY,
            check_every: Duration::from_secs(3600),
            ca_validity: 3650 * DAY,
        }
    }
}

impl Rotation {
    /// Refuses settings under which certificates could not be kept.
    pub fn check(&self) -> Result<(), CertError> {
        if self.check_every.is_zero() {
            return Err(CertError::Rotation(
                "check_every is zero; give it a period (the default is an hour)".into(),
            ));
        }
        if self.renew_before >= self.validity {
            return Err(CertError::Rotation(format!(
                "renew_before ({:?}) is not shorter than validity ({:?}), so every new certificate would be due at once",
                self.renew_before, self.validity
            )));
        }
        if self.ca_validity <= self.validity.saturating_add(self.renew_before) {
            return Err(CertError::Rotation(format!(
                "ca_validity ({:?}) must exceed validity + renew_before ({:?}), or every new CA would be due at once",
                self.ca_validity,
                self.validity.saturating_add(self.renew_before)
            )));
        }
        Ok(())
    }
}

/// Generated certificates start this long before they are made, for
/// clocks (replicas', the API server's) a little behind ours.
const BACKDATE: Duration = Duration::from_secs(300);

/// When a certificate made at `now` and valid `validity` starts and ends:
/// from a little before `now` (for clocks behind ours) to `now +
/// validity`, to the second.
fn window(
    now: SystemTime,
    validity: Duration,
) -> Result<(OffsetDateTime, OffsetDateTime), CertError> {
    let out_of_range = || {
        CertError::Rotation(format!(
            "a certificate valid {validity:?} from {now:?} ends past what a certificate can say (the year 9999); shorten the validity"
        ))
    };
    let at = |t: Option<SystemTime>| {
        let seconds = t
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_secs()).ok())
            .ok_or_else(out_of_range)?;
        OffsetDateTime::from_unix_timestamp(seconds).map_err(|_| out_of_range())
    };
    let start = at(Some(now.checked_sub(BACKDATE).unwrap_or(now)))?;
    Ok((start, at(now.checked_add(validity))?))
}

fn unix_seconds(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A new CA valid from `now` for `validity`: its certificate (DER and
/// PEM) and key (PEM).
fn new_ca(
    validity: Duration,
    now: SystemTime,
) -> Result<(CertificateDer<'static>, String, String), CertError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    // Each CA its own name, so two in one bundle are told apart.
    params.distinguished_name.push(
        DnType::CommonName,
        format!("arbiter-webhook-ca-{}", unix_seconds(now)),
    );
    (params.not_before, params.not_after) = window(now, validity)?;
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((cert.der().clone(), cert.pem(), key.serialize_pem()))
}

/// A serving certificate for `names`, signed by the CA `ca` with `ca_key`,
/// valid from `now` for `validity` but never past the CA: its certificate
/// and key, PEM.
fn sign_serving(
    ca: &CertificateDer<'_>,
    ca_key: &str,
    names: &[String],
    validity: Duration,
    now: SystemTime,
) -> Result<(String, String), CertError> {
    let ca_not_after = x509_parser::parse_x509_certificate(ca)
        .map_err(|e| CertError::Pem {
            what: "ca.crt".into(),
            expected: "certificate",
            problem: e.to_string(),
        })?
        .1
        .validity()
        .not_after
        .timestamp();
    let issuer = Issuer::from_ca_cert_der(ca, KeyPair::from_pem(ca_key)?)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params
        .distinguished_name
        .push(DnType::CommonName, names.first().map_or("arbiter", |n| n));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let (not_before, not_after) = window(now, validity)?;
    params.not_before = not_before;
    params.not_after = match OffsetDateTime::from_unix_timestamp(ca_not_after) {
        Ok(ca_end) if ca_end < not_after => ca_end,
        _ => not_after,
    };
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The certificates of a PEM bundle, in order; what is not a certificate
/// is skipped.
fn bundle_certs(pem_text: &str) -> Vec<CertificateDer<'static>> {
    pem::parse_many(pem_text)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.tag() == "CERTIFICATE")
        .map(|p| CertificateDer::from(p.into_contents()))
        .collect()
}

fn to_pem(certs: &[CertificateDer<'_>]) -> String {
    let blocks: Vec<pem::Pem> = certs
        .iter()
        .map(|c| pem::Pem::new("CERTIFICATE", c.to_vec()))
        .collect();
    pem::encode_many_config(
        &blocks,
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

/// The CA bundle while the CA changes: `new_ca` first, then each
/// certificate of `old` that is still valid at `now` (so what is served,
/// signed by an older CA, stays verifiable), none twice.
pub fn staged_bundle(new_ca: &str, old: &str, now: SystemTime) -> String {
    let now = unix_seconds(now);
    let mut certs = bundle_certs(new_ca);
    for cert in bundle_certs(old) {
        let valid = x509_parser::parse_x509_certificate(&cert)
            .is_ok_and(|(_, c)| c.validity().not_after.timestamp() > now);
        if valid && !certs.contains(&cert) {
            certs.push(cert);
        }
    }
    to_pem(&certs)
}

/// What the certificate Secret holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The serving certificate (PEM).
    pub tls_crt: String,
    /// Its key (PEM).
    pub tls_key: String,
    /// The CA bundle clients trust (PEM): the CA that signs first, then
    /// an older one while the CA changes.
    pub ca_crt: String,
    /// The key of the bundle's first CA (PEM); absent in a Secret written
    /// before certificates were rotated.
    pub ca_key: Option<String>,
}

impl Stored {
    /// A new CA and a serving certificate for `names` signed by it.
    pub fn generate(
        names: &[String],
        rotation: &Rotation,
        now: SystemTime,
    ) -> Result<Stored, CertError> {
        let (ca, ca_crt, ca_key) = new_ca(rotation.ca_validity, now)?;
        let (tls_crt, tls_key) = sign_serving(&ca, &ca_key, names, rotation.validity, now)?;
        Ok(Stored {
            tls_crt,
            tls_key,
            ca_crt,
            ca_key: Some(ca_key),
        })
    }

    /// A Secret's `data`; a key missing reads as empty (and so as a
    /// certificate that is due for replacement).
    pub fn from_data(data: Option<&BTreeMap<String, ByteString>>) -> Stored {
        let get = |key: &str| {
            data.and_then(|d| d.get(key))
                .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        };
        Stored {
            tls_crt: get("tls.crt").unwrap_or_default(),
            tls_key: get("tls.key").unwrap_or_default(),
            ca_crt: get("ca.crt").unwrap_or_default(),
            ca_key: get("ca.key"),
        }
    }

    /// As a Secret's `data` (type `kubernetes.io/tls`).
    pub fn to_data(&self) -> BTreeMap<String, ByteString> {
        [
            ("tls.crt", Some(&self.tls_crt)),
            ("tls.key", Some(&self.tls_key)),
            ("ca.crt", Some(&self.ca_crt)),
            ("ca.key", self.ca_key.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), ByteString(v?.as_bytes().to_vec()))))
        .collect()
    }

    /// What is served, and what clients trust.
    pub fn serving(&self) -> Serving {
        Serving {
            cert_pem: self.tls_crt.clone(),
            key_pem: self.tls_key.clone(),
            ca_pem: self.ca_crt.clone(),
        }
    }

    /// The Secret after `due` (`None` for [`Due::Nothing`]).
    pub fn apply(
        &self,
        due: &Due,
        names: &[String],
        rotation: &Rotation,
        now: SystemTime,
    ) -> Result<Option<Stored>, CertError> {
        let signed_by_first = |bundle: String| -> Result<Stored, CertError> {
            let ca = bundle_certs(&self.ca_crt);
            let (Some(first), Some(ca_key)) = (ca.first(), self.ca_key.as_deref()) else {
                return Err(CertError::Pem {
                    what: "ca.crt and ca.key".into(),
                    expected: "CA certificate and key",
                    problem: "missing".into(),
                });
            };
            let (tls_crt, tls_key) = sign_serving(first, ca_key, names, rotation.validity, now)?;
            Ok(Stored {
                tls_crt,
                tls_key,
                ca_crt: bundle,
                ca_key: self.ca_key.clone(),
            })
        };
        Ok(Some(match due {
            Due::Nothing => return Ok(None),
            Due::Renew(_) => {
                let first = bundle_certs(&self.ca_crt)
                    .into_iter()
                    .take(1)
                    .collect::<Vec<_>>();
                signed_by_first(to_pem(&first))?
            }
            Due::Switch => signed_by_first(self.ca_crt.clone())?,
            Due::StageCa(_) => {
                let (_, ca_crt, ca_key) = new_ca(rotation.ca_validity, now)?;
                Stored {
                    tls_crt: self.tls_crt.clone(),
                    tls_key: self.tls_key.clone(),
                    ca_crt: staged_bundle(&ca_crt, &self.ca_crt, now),
                    ca_key: Some(ca_key),
                }
            }
            Due::Regenerate(_) => Stored::generate(names, rotation, now)?,
        }))
    }
}

/// What the certificate Secret needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Due {
    /// Nothing: the serving certificate is signed by the CA kept and good
    /// for longer than `renew_before`.
    Nothing,
    /// A new serving certificate signed by the CA kept; the bundle reduced
    /// to that CA (an older one, kept through a CA change, leaves here).
    Renew(Why),
    /// A new CA: put first in the bundle with its key, the served
    /// certificate left as it is, so the bundle can reach every `caBundle`
    /// before anything it alone verifies is served.
    StageCa(Why),
    /// A serving certificate signed by the staged CA, the bundle kept;
    /// only once the bundle is in every `caBundle` (the caller checks).
    Switch,
    /// A new CA and serving certificate at once: nothing the bundle
    /// verifies is served, so there is no window to keep.
    Regenerate(Why),
}

/// Why a certificate is replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// The serving certificate expires in `seconds_left`.
    Expiring { seconds_left: i64 },
    /// The serving certificate is not one the bundle verifies for the
    /// names served: unreadable, not matching its key, expired, for other
    /// names or signed by a CA not in `ca.crt`.
    Unusable(String),
    /// The Secret has no `ca.key` (written before certificates were rotated).
    NoCaKey,
    /// The CA cannot sign: unreadable, not a CA, or `ca.key` not its key.
    CaUnusable(String),
    /// The CA expires in `seconds_left`, too soon for a serving
    /// certificate's validity and renewal margin.
    CaExpiring { seconds_left: i64 },
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Expiring { seconds_left } => {
                write!(f, "the serving certificate expires in {seconds_left} s")
            }
            Why::Unusable(problem) => write!(f, "the serving certificate is unusable: {problem}"),
            Why::NoCaKey => write!(f, "the Secret has no ca.key (written by an older Arbiter)"),
            Why::CaUnusable(problem) => write!(f, "the CA cannot sign: {problem}"),
            Why::CaExpiring { seconds_left } => write!(f, "the CA expires in {seconds_left} s"),
        }
    }
}

impl std::fmt::Display for Due {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Due::Nothing => write!(f, "nothing due"),
            Due::Renew(why) => write!(f, "new serving certificate from the CA kept ({why})"),
            Due::StageCa(why) => write!(f, "new CA added to the bundle ({why})"),
            Due::Switch => write!(f, "serving certificate signed by the new CA"),
            Due::Regenerate(why) => write!(f, "new CA and serving certificate ({why})"),
        }
    }
}

/// Whether `cert` verifies against the CAs `roots` for every one of
/// `names` at `now` (signature, validity, names: what a TLS client checks).
fn verifies(
    cert: &CertificateDer<'_>,
    roots: &[CertificateDer<'_>],
    names: &[String],
    now: SystemTime,
) -> Result<(), String> {
    let mut store = RootCertStore::empty();
    for root in roots {
        // A bundle entry that is no CA cannot anchor anything; skipped.
        let _ = store.add(root.clone().into_owned());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider)
        .build()
        .map_err(|e| format!("no usable CA: {e}"))?;
    let now = UnixTime::since_unix_epoch(now.duration_since(UNIX_EPOCH).unwrap_or_default());
    for name in names {
        let server_name =
            ServerName::try_from(name.clone()).map_err(|e| format!("name {name}: {e}"))?;
        verifier
            .verify_server_cert(cert, &[], &server_name, &[], now)
            .map_err(|e| format!("for {name}: {e}"))?;
    }
    Ok(())
}

/// Whether the bundle's first CA can sign with `ca.key` long enough.
fn signing_ca(stored: &Stored, rotation: &Rotation, now: SystemTime) -> Result<(), Why> {
    let key_pem = stored.ca_key.as_deref().ok_or(Why::NoCaKey)?;
    let first = bundle_certs(&stored.ca_crt)
        .into_iter()
        .next()
        .ok_or_else(|| Why::CaUnusable("ca.crt holds no certificate".into()))?;
    let (_, ca) = x509_parser::parse_x509_certificate(&first)
        .map_err(|e| Why::CaUnusable(format!("ca.crt: {e}")))?;
    if !ca.is_ca() {
        return Err(Why::CaUnusable(
            "the first certificate of ca.crt is not a CA".into(),
        ));
    }
    let key = KeyPair::from_pem(key_pem).map_err(|e| Why::CaUnusable(format!("ca.key: {e}")))?;
    if key.subject_public_key_info() != ca.public_key().raw {
        return Err(Why::CaUnusable(
            "ca.key is not the key of the first certificate of ca.crt".into(),
        ));
    }
    let seconds_left = ca.validity().not_after.timestamp() - unix_seconds(now);
    let margin = rotation.validity.saturating_add(rotation.renew_before);
    if seconds_left <= i64::try_from(margin.as_secs()).unwrap_or(i64::MAX) {
        return Err(Why::CaExpiring { seconds_left });
    }
    Ok(())
}

/// What the Secret holding `stored` needs at `now`, serving `names`.
pub fn due(stored: &Stored, names: &[String], rotation: &Rotation, now: SystemTime) -> Due {
    let bundle = bundle_certs(&stored.ca_crt);
    let ca = signing_ca(stored, rotation, now);
    let serving = server_config(
        stored.tls_crt.as_bytes(),
        stored.tls_key.as_bytes(),
        "the Secret's",
    )
    .map_err(|e| e.to_string())
    .and_then(|_| {
        bundle_certs(&stored.tls_crt)
            .into_iter()
            .next()
            .ok_or_else(|| "tls.crt holds no certificate".to_string())
    })
    .and_then(|cert| {
        verifies(&cert, &bundle, names, now).map_err(|e| format!("not verified by ca.crt {e}"))?;
        Ok(cert)
    });
    let cert = match (serving, ca) {
        (Err(problem), Ok(())) => return Due::Renew(Why::Unusable(problem)),
        (Err(problem), Err(_)) => return Due::Regenerate(Why::Unusable(problem)),
        (Ok(_), Err(why)) => return Due::StageCa(why),
        (Ok(cert), Ok(())) => cert,
    };
    let signing = bundle.first().map(std::slice::from_ref).unwrap_or_default();
    if verifies(&cert, signing, names, now).is_err() {
        return Due::Switch;
    }
    let seconds_left = x509_parser::parse_x509_certificate(&cert)
        .map_or(0, |(_, c)| c.validity().not_after.timestamp())
        - unix_seconds(now);
    if seconds_left <= i64::try_from(rotation.renew_before.as_secs()).unwrap_or(i64::MAX) {
        return Due::Renew(Why::Expiring { seconds_left });
    }
    Due::Nothing
}

/// A CA and a serving certificate for `names` signed by it, valid as
/// [`Rotation::default`] says.
pub fn generate(names: &[String]) -> Result<Serving, CertError> {
    Stored::generate(names, &Rotation::default(), SystemTime::now()).map(|s| s.serving())
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
) -> Result<bool, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if ops.is_empty() {
        return Ok(false);
    }
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::Value::Array(ops)).map_err(kube::Error::SerdeError)?;
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map(|_| true)
}

/// Keeps the CA bundle `ca` holds in the `caBundle` of the Mutating- and
/// ValidatingWebhookConfiguration named `configuration`: now, whenever
/// either is created or changed (a re-apply of `deploy/` that drops it),
/// and whenever the bundle changes (a CA rotated in or out). Runs until
/// the task is dropped; failures are logged and retried at the next change.
pub fn keep_ca_bundles(
    client: Client,
    configuration: String,
    mut ca: watch::Receiver<String>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        let selector = format!("metadata.name={configuration}");
        let m = versions(mutating.clone(), &selector).map(|c| c.map(Configuration::Mutating));
        let v = versions(validating.clone(), &selector).map(|c| c.map(Configuration::Validating));
        let mut both = std::pin::pin!(futures::stream::select(m, v));
        let mut latest_mutating = None;
        let mut latest_validating = None;
        let mut ca_open = true;
        loop {
            // What to bring to the bundle: the configuration that changed,
            // or both when the bundle did.
            let (mutating_due, validating_due) = tokio::select! {
                changed = ca.changed(), if ca_open => {
                    // A closed channel: the bundle never changes again.
                    ca_open = changed.is_ok();
                    (ca_open, ca_open)
                }
                next = both.next() => match next {
                    None => return,
                    Some(Err(e)) => {
                        tracing::warn!(name = %configuration, error = %e, "watching the webhook configurations failed; retrying with backoff");
                        continue;
                    }
                    Some(Ok(Configuration::Mutating(c))) => {
                        latest_mutating = Some(c);
                        (true, false)
                    }
                    Some(Ok(Configuration::Validating(c))) => {
                        latest_validating = Some(c);
                        (false, true)
                    }
                },
            };
            let bundle = ca.borrow_and_update().clone().into_bytes();
            if let Some(c) = latest_mutating.as_ref().filter(|_| mutating_due) {
                let ops = ca_patch(
                    c.webhooks
                        .iter()
                        .flatten()
                        .map(|w| (w.name.as_str(), w.client_config.ca_bundle.as_ref())),
                    &bundle,
                );
                report(
                    "MutatingWebhookConfiguration",
                    &configuration,
                    patch_ops(&mutating, &configuration, ops).await,
                );
            }
            if let Some(c) = latest_validating.as_ref().filter(|_| validating_due) {
                let ops = ca_patch(
                    c.webhooks
                        .iter()
                        .flatten()
                        .map(|w| (w.name.as_str(), w.client_config.ca_bundle.as_ref())),
                    &bundle,
                );
                report(
                    "ValidatingWebhookConfiguration",
                    &configuration,
                    patch_ops(&validating, &configuration, ops).await,
                );
            }
        }
    })
}

/// Each version of the objects `api` watches by `selector`.
fn versions<K>(
    api: Api<K>,
    selector: &str,
) -> impl futures::Stream<Item = Result<K, watcher::Error>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    watcher::watcher(api, watcher::Config::default().fields(selector))
        .default_backoff()
        .applied_objects()
}

enum Configuration {
    Mutating(MutatingWebhookConfiguration),
    Validating(ValidatingWebhookConfiguration),
}

fn report(kind: &str, name: &str, result: Result<bool, kube::Error>) {
    match result {
        Ok(false) => {}
        Ok(true) => {
            tracing::info!(%kind, %name, "caBundle set to the webhook certificate's CA bundle")
        }
        Err(e) => {
            tracing::warn!(%kind, %name, error = %e, "setting caBundle failed; tried again on the next change")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        service_names("arbiter", "arbiter-system")
    }

    /// Serving certificates for 100 s, renewed 10 s before; CAs for 1000 s.
    fn short() -> Rotation {
        Rotation {
            validity: Duration::from_secs(100),
            renew_before: Duration::from_secs(10),
            check_every: Duration::from_secs(1),
            ca_validity: Duration::from_secs(1000),
        }
    }

    /// `s` seconds into a fixed day.
    fn t(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn leaf(stored: &Stored) -> CertificateDer<'static> {
        bundle_certs(&stored.tls_crt).remove(0)
    }

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

    #[test]
    fn generated_certificates_have_the_configured_validity() {
        let stored = Stored::generate(&names(), &short(), t(0)).unwrap();
        let end = |cert: &CertificateDer<'_>| {
            x509_parser::parse_x509_certificate(cert)
                .unwrap()
                .1
                .validity()
                .not_after
                .timestamp()
        };
        assert_eq!(end(&leaf(&stored)), unix_seconds(t(100)));
        assert_eq!(end(&bundle_certs(&stored.ca_crt)[0]), unix_seconds(t(1000)));
        // The defaults: a year, and ten for the CA.
        let stored = Stored::generate(&names(), &Rotation::default(), t(0)).unwrap();
        assert_eq!(end(&leaf(&stored)), unix_seconds(t(365 * 86_400)));
        assert_eq!(
            end(&bundle_certs(&stored.ca_crt)[0]),
            unix_seconds(t(3650 * 86_400))
        );
    }

    #[test]
    fn a_certificate_is_due_within_renew_before_of_its_expiry() {
        let stored = Stored::generate(&names(), &short(), t(0)).unwrap();
        let at = |s| due(&stored, &names(), &short(), t(s));
        assert_eq!(at(0), Due::Nothing);
        assert_eq!(at(89), Due::Nothing);
        assert_eq!(at(90), Due::Renew(Why::Expiring { seconds_left: 10 }));
        assert!(
            matches!(at(101), Due::Renew(Why::Unusable(ref p)) if p.contains("xpired")),
            "{:?}",
            at(101)
        );
    }

    #[test]
    fn a_certificate_unreadable_mismatched_or_for_other_names_is_due() {
        let stored = Stored::generate(&names(), &short(), t(0)).unwrap();
        let other = Stored::generate(&names(), &short(), t(0)).unwrap();
        let unusable = |stored: &Stored| match due(stored, &names(), &short(), t(1)) {
            Due::Renew(Why::Unusable(problem)) => problem,
            other => panic!("expected a renewal, got {other:?}"),
        };
        let garbage = Stored {
            tls_crt: "junk".into(),
            ..stored.clone()
        };
        assert!(unusable(&garbage).contains("tls.crt"));
        let mismatched = Stored {
            tls_key: other.tls_key.clone(),
            ..stored.clone()
        };
        unusable(&mismatched);
        // Signed by a CA the bundle does not hold.
        let foreign = Stored {
            tls_crt: other.tls_crt.clone(),
            tls_key: other.tls_key.clone(),
            ..stored.clone()
        };
        unusable(&foreign);
        let elsewhere = Stored::generate(&["other.example".into()], &short(), t(0)).unwrap();
        assert!(unusable(&elsewhere).contains("arbiter.arbiter-system.svc"));
        // Nothing left to keep: no CA key either, so all of it anew.
        let hopeless = Stored {
            ca_key: None,
            ..garbage
        };
        assert!(matches!(
            due(&hopeless, &names(), &short(), t(1)),
            Due::Regenerate(Why::Unusable(_))
        ));
    }

    #[test]
    fn a_renewal_is_signed_by_the_kept_ca_and_verifies_against_the_bundle() {
        let stored = Stored::generate(&names(), &short(), t(0)).unwrap();
        let due_now = due(&stored, &names(), &short(), t(95));
        let renewed = stored
            .apply(&due_now, &names(), &short(), t(95))
            .unwrap()
            .unwrap();
        assert_eq!(renewed.ca_crt, stored.ca_crt);
        assert_eq!(renewed.ca_key, stored.ca_key);
        assert_ne!(renewed.tls_crt, stored.tls_crt);
        verifies(
            &leaf(&renewed),
            &bundle_certs(&stored.ca_crt),
            &names(),
            t(150),
        )
        .unwrap();
        assert_eq!(due(&renewed, &names(), &short(), t(150)), Due::Nothing);
        assert_eq!(
            stored
                .apply(&Due::Nothing, &names(), &short(), t(95))
                .unwrap(),
            None
        );
    }

    #[test]
    fn a_secret_without_ca_key_changes_ca_through_a_bundle_of_both() {
        // As an older Arbiter wrote it: no ca.key.
        let old = Stored {
            ca_key: None,
            ..Stored::generate(&names(), &Rotation::default(), t(0)).unwrap()
        };
        let old_ca = bundle_certs(&old.ca_crt);
        let first = due(&old, &names(), &short(), t(1));
        assert_eq!(first, Due::StageCa(Why::NoCaKey));
        let staged = old
            .apply(&first, &names(), &short(), t(1))
            .unwrap()
            .unwrap();
        // The new CA first, the old one after; what is served unchanged.
        let bundle = bundle_certs(&staged.ca_crt);
        assert_eq!(bundle.len(), 2);
        assert_eq!(bundle[1], old_ca[0]);
        assert_eq!(
            (&staged.tls_crt, &staged.tls_key),
            (&old.tls_crt, &old.tls_key)
        );
        verifies(&leaf(&staged), &bundle, &names(), t(2)).unwrap();
        // Then the served certificate from the new CA; the bundle kept.
        assert_eq!(due(&staged, &names(), &short(), t(2)), Due::Switch);
        let switched = staged
            .apply(&Due::Switch, &names(), &short(), t(2))
            .unwrap()
            .unwrap();
        assert_eq!(switched.ca_crt, staged.ca_crt);
        verifies(&leaf(&switched), &bundle[..1], &names(), t(3)).unwrap();
        assert!(verifies(&leaf(&switched), &old_ca, &names(), t(3)).is_err());
        assert_eq!(due(&switched, &names(), &short(), t(3)), Due::Nothing);
        // The old CA leaves at the next renewal.
        let next = due(&switched, &names(), &short(), t(95));
        assert!(matches!(next, Due::Renew(Why::Expiring { .. })), "{next:?}");
        let renewed = switched
            .apply(&next, &names(), &short(), t(95))
            .unwrap()
            .unwrap();
        assert_eq!(bundle_certs(&renewed.ca_crt), bundle[..1]);
        verifies(&leaf(&renewed), &bundle[..1], &names(), t(96)).unwrap();
    }

    #[test]
    fn a_ca_near_its_own_expiry_is_replaced_before_it_signs_too_short() {
        let stored = Stored::generate(&names(), &short(), t(0)).unwrap();
        // Renewed along the way, last at 880 s; the CA ends at 1000 s.
        let renewed = stored
            .apply(
                &Due::Renew(Why::Expiring { seconds_left: 0 }),
                &names(),
                &short(),
                t(880),
            )
            .unwrap()
            .unwrap();
        assert_eq!(due(&renewed, &names(), &short(), t(885)), Due::Nothing);
        assert_eq!(
            due(&renewed, &names(), &short(), t(895)),
            Due::StageCa(Why::CaExpiring { seconds_left: 105 })
        );
        // A serving certificate never outlives its CA.
        let late = stored
            .apply(
                &Due::Renew(Why::Expiring { seconds_left: 0 }),
                &names(),
                &short(),
                t(950),
            )
            .unwrap()
            .unwrap();
        let end = x509_parser::parse_x509_certificate(&leaf(&late))
            .unwrap()
            .1
            .validity()
            .not_after
            .timestamp();
        assert_eq!(end, unix_seconds(t(1000)));
    }

    #[test]
    fn a_ca_key_that_is_not_the_cas_is_refused() {
        let stored = Stored::generate(&names(), &short(), t(0)).unwrap();
        let other = Stored::generate(&names(), &short(), t(0)).unwrap();
        let wrong = Stored {
            ca_key: other.ca_key,
            ..stored
        };
        assert!(matches!(
            due(&wrong, &names(), &short(), t(1)),
            Due::StageCa(Why::CaUnusable(_))
        ));
    }

    #[test]
    fn the_staged_bundle_puts_the_new_ca_first_and_drops_expired_and_repeated_ones() {
        let (a, a_pem, _) = new_ca(Duration::from_secs(100), t(0)).unwrap();
        let (b, b_pem, _) = new_ca(Duration::from_secs(1000), t(0)).unwrap();
        let (c, c_pem, _) = new_ca(Duration::from_secs(1000), t(150)).unwrap();
        let both = format!("{a_pem}{b_pem}");
        assert_eq!(
            bundle_certs(&staged_bundle(&c_pem, &both, t(50))),
            [c.clone(), a.clone(), b.clone()]
        );
        // a has expired by 200 s.
        let staged = staged_bundle(&c_pem, &both, t(200));
        assert_eq!(bundle_certs(&staged), [c.clone(), b.clone()]);
        assert_eq!(
            bundle_certs(&staged_bundle(&c_pem, &staged, t(200))),
            [c.clone(), b.clone()]
        );
        assert_eq!(
            bundle_certs(&staged_bundle(&c_pem, "junk", t(200))),
            std::slice::from_ref(&c)
        );
    }

    #[test]
    fn the_secret_data_round_trips_and_missing_keys_read_as_due() {
        let stored = Stored::generate(&names(), &short(), t(0)).unwrap();
        let data = stored.to_data();
        assert_eq!(Stored::from_data(Some(&data)), stored);
        let old = Stored {
            ca_key: None,
            ..stored
        };
        let data = old.to_data();
        assert!(!data.contains_key("ca.key"));
        assert_eq!(Stored::from_data(Some(&data)), old);
        let empty = Stored::from_data(None);
        assert!(matches!(
            due(&empty, &names(), &short(), t(1)),
            Due::Regenerate(_)
        ));
    }

    #[test]
    fn rotation_settings_that_cannot_work_are_refused() {
        Rotation::default().check().unwrap();
        short().check().unwrap();
        for bad in [
            Rotation {
                check_every: Duration::ZERO,
                ..short()
            },
            Rotation {
                renew_before: Duration::from_secs(100),
                ..short()
            },
            Rotation {
                ca_validity: Duration::from_secs(110),
                ..short()
            },
        ] {
            let error = bad.check().unwrap_err();
            assert!(error.to_string().contains("rotation settings"), "{error}");
        }
        // Past what a certificate can say: refused when made, not a panic.
        let forever = Rotation {
            ca_validity: Duration::MAX,
            ..short()
        };
        let error = Stored::generate(&names(), &forever, t(0)).unwrap_err();
        assert!(error.to_string().contains("year 9999"), "{error}");
    }
}
