//! The admission record's seal. A released job carries what admitted it
//! (`inject::ADMISSION_ANNOTATION`), and after a restart or failover the
//! new leader reads admissions back from those records — so a record is
//! trusted only if Arbiter wrote it for that job: the annotation
//! [`SEAL_ANNOTATION`] holds an HMAC-SHA256 of the job's uid and the
//! record's text, keyed with 32 random bytes kept in the Secret
//! [`KEY_SECRET`] of the operator's namespace (made when absent; every
//! replica reads the same one). A tenant who may edit its jobs can neither
//! forge a record nor copy one from another job. A record without a valid
//! seal (written before seals, or while the key could not be read) is
//! trusted only when the job's Workload — which tenants cannot write —
//! says the same admission (`driver::readback`).

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::Client;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// The annotation beside the admission record holding its seal.
pub const SEAL_ANNOTATION: &str = "arbiter.dev/admission-seal";

/// The Secret, in the operator's namespace, holding the sealing key.
pub const KEY_SECRET: &str = "arbiter-record-key";

/// The key's entry in [`KEY_SECRET`].
const KEY_ENTRY: &str = "key";

/// Seals and checks admission records with one key.
#[derive(Clone)]
pub struct Sealer(hmac::Key);

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

/// Why the key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error(
        "the Secret {secret}: {source}; the operator needs get and create on it (deploy/rbac.yaml)"
    )]
    Secret { secret: String, source: kube::Error },
    #[error("the Secret {secret} has no usable `{KEY_ENTRY}` (at least 32 bytes); delete it to have a new key made (every admission record is then checked against its Workload once)")]
    BadKey { secret: String },
    #[error("no random bytes for a new key")]
    Random,
}

impl Sealer {
    pub fn new(key: &[u8]) -> Sealer {
        Sealer(hmac::Key::new(hmac::HMAC_SHA256, key))
    }

    /// The seal of `record` (the annotation's text) on the job `uid`.
    pub fn seal(&self, uid: &str, record: &str) -> String {
        use base64::Engine as _;
        let tag = hmac::sign(&self.0, &message(uid, record));
        base64::engine::general_purpose::STANDARD.encode(tag.as_ref())
    }

    /// Whether `seal` is this key's seal of `record` on the job `uid`
    /// (compared in constant time).
    pub fn verify(&self, uid: &str, record: &str, seal: &str) -> bool {
        use base64::Engine as _;
        let Ok(tag) = base64::engine::general_purpose::STANDARD.decode(seal) else {
            return false;
        };
        hmac::verify(&self.0, &message(uid, record), &tag).is_ok()
    }
}

fn message(uid: &str, record: &str) -> Vec<u8> {
    let mut message = Vec::with_capacity(uid.len() + 1 + record.len());
    message.extend_from_slice(uid.as_bytes());
    message.push(b'\n');
    message.extend_from_slice(record.as_bytes());
    message
}

/// The key in the Secret [`KEY_SECRET`] of `namespace`, made first if the
/// Secret is absent; replicas starting together agree (the one whose
/// create loses reads the winner's).
pub async fn load(client: &Client, namespace: &str) -> Result<Sealer, SealError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let shown = format!("{namespace}/{KEY_SECRET}");
    let fail = |source| SealError::Secret {
        secret: shown.clone(),
        source,
    };
    let from = |secret: &Secret| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(KEY_ENTRY))
            .filter(|k| k.0.len() >= 32)
            .map(|k| Sealer::new(&k.0))
            .ok_or_else(|| SealError::BadKey {
                secret: shown.clone(),
            })
    };
    if let Some(secret) = secrets.get_opt(KEY_SECRET).await.map_err(fail)? {
        return from(&secret);
    }
    let mut key = [0u8; 32];
    SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| SealError::Random)?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(KEY_SECRET.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some([("app.kubernetes.io/name".to_string(), "arbiter".to_string())].into()),
            ..Default::default()
        },
        data: Some([(KEY_ENTRY.to_string(), ByteString(key.to_vec()))].into()),
        ..Default::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(secret = %shown, "made the admission records' sealing key");
            Ok(Sealer::new(&key))
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            from(&secrets.get(KEY_SECRET).await.map_err(fail)?)
        }
        Err(e) => Err(fail(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_holds_for_its_job_and_record_only() {
        let sealer = Sealer::new(&[7u8; 32]);
        let record = r#"{"flavors":[{"nvidia.com/gpu":"a100"}],"counts":[1]}"#;
        let seal = sealer.seal("uid-1", record);
        assert!(sealer.verify("uid-1", record, &seal));
        // Copied onto another job, or the record edited, or another key.
        assert!(!sealer.verify("uid-2", record, &seal));
        let edited = record.replace("a100", "h100");
        assert!(!sealer.verify("uid-1", &edited, &seal));
        assert!(!Sealer::new(&[8u8; 32]).verify("uid-1", record, &seal));
        assert!(!sealer.verify("uid-1", record, "not base64!"));
    }
}
