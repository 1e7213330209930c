//! The admission record's seal. A released job carries what admitted it
//! (`inject::ADMISSION_ANNOTATION`), and after a restart or failover the
//! new leader reads admissions back from those records — so a record is
//! trusted only if Arbiter wrote it for that job: the annotation
//! [`SEAL_ANNOTATION`] holds an HMAC-SHA256 of the job's uid and the
//! record's text, keyed with 32 random bytes kept in the Secret
//! [`KEY_SECRET`] of the operator's namespace (made when absent; every
//! replica reads the same one). A tenant who may edit its jobs can neither
//! forge a record nor copy one from another job. The job's Workload
//! carries the seal of its admission too (`status.admissionSeal`,
//! [`Sealer::seal_admission`]), written again with every status: a record
//! whose own seal does not hold (made with an earlier key) is trusted when
//! the Workload's sealed admission says the same — never on a Workload's
//! unsealed word, which anyone allowed to write Workloads could forge,
//! except when there is no key or it was made during this start
//! ([`Sealer::made_now`]: before seals, or the Secret deleted), when the
//! Workload's agreement is the only witness left (`driver::readback`).

use arbiter_core::model::api::Admission;
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
pub struct Sealer {
    key: hmac::Key,
    /// The key was made during this start (its Secret was absent).
    made: bool,
}

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
        Sealer {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
            made: false,
        }
    }

    /// Whether the key was made during this start (its Secret absent:
    /// a first start, or the Secret deleted): no record or Workload can
    /// carry its seal yet.
    pub fn made_now(&self) -> bool {
        self.made
    }

    /// The seal of `record` (the annotation's text) on the job `uid`.
    pub fn seal(&self, uid: &str, record: &str) -> String {
        use base64::Engine as _;
        let tag = hmac::sign(&self.key, &message(uid, record));
        base64::engine::general_purpose::STANDARD.encode(tag.as_ref())
    }

    /// Whether `seal` is this key's seal of `record` on the job `uid`
    /// (compared in constant time).
    pub fn verify(&self, uid: &str, record: &str, seal: &str) -> bool {
        use base64::Engine as _;
        let Ok(tag) = base64::engine::general_purpose::STANDARD.decode(seal) else {
            return false;
        };
        hmac::verify(&self.key, &message(uid, record), &tag).is_ok()
    }

    /// The seal of a Workload's `admission` for the job `uid`: kept in the
    /// Workload's `status.admissionSeal`, it lets a Workload witness its
    /// job's admission record after a restart (`driver::readback`) where
    /// the record's own seal does not hold (made with an earlier key).
    pub fn seal_admission(&self, uid: &str, admission: &Admission) -> String {
        self.seal(uid, &admission_text(admission))
    }

    /// Whether `seal` is this key's seal of `admission` for the job `uid`.
    pub fn verify_admission(&self, uid: &str, admission: &Admission, seal: &str) -> bool {
        self.verify(uid, &admission_text(admission), seal)
    }
}

/// What a Workload admission's seal covers: its JSON (maps in key order),
/// marked apart from every admission record's text (which is never
/// prefixed so), so a seal of one can never pass for the other's.
fn admission_text(admission: &Admission) -> String {
    let json = serde_json::to_string(admission).unwrap_or_default();
    format!("Workload.status.admission {json}")
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
    let made = |sealer: Sealer| Sealer {
        made: true,
        ..sealer
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(secret = %shown, "made the admission records' sealing key");
            Ok(made(Sealer::new(&key)))
        }
        // Another replica made it meanwhile: made during this start too.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            from(&secrets.get(KEY_SECRET).await.map_err(fail)?).map(made)
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

    #[test]
    fn a_workload_admission_seal_holds_for_its_job_and_admission_only() {
        use arbiter_core::model::api::PodSetAssignment;
        let sealer = Sealer::new(&[7u8; 32]);
        let admission = Admission {
            cluster_queue: "research".into(),
            pod_set_assignments: vec![PodSetAssignment {
                name: "main".into(),
                flavors: [("nvidia.com/gpu".to_string(), "a100".to_string())].into(),
                count: Some(1),
            }],
        };
        let seal = sealer.seal_admission("uid-1", &admission);
        assert!(sealer.verify_admission("uid-1", &admission, &seal));
        assert!(!sealer.verify_admission("uid-2", &admission, &seal));
        let mut more = admission.clone();
        more.pod_set_assignments[0].count = Some(4);
        assert!(!sealer.verify_admission("uid-1", &more, &seal));
        // Never the seal of an admission record, nor the other way round.
        let text = serde_json::to_string(&admission).unwrap();
        assert!(!sealer.verify("uid-1", &text, &seal));
        assert!(!sealer.verify_admission("uid-1", &admission, &sealer.seal("uid-1", &text)));
        assert!(!sealer.made_now());
    }
}
