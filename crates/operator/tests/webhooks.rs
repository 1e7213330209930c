//! The admission webhooks against a real kube-apiserver, which calls them
//! at `https://127.0.0.1:PORT`: the mutating one holds a new job that names
//! a queue (the API returns it suspended, before any controller saw it);
//! the validating one refuses bad configuration objects with the
//! simulator's messages; the generated certificate's CA is written into
//! the configurations' `caBundle`; a mounted certificate is reloaded when
//! its files change; the generated one is rotated while jobs are created
//! through the webhook (a new serving certificate from the same CA, a new
//! CA after the Secret is deleted, and a Secret an older Arbiter wrote,
//! without `ca.key`, moved to a new CA with no job refused).

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arbiter_core::jobs::Integrations;
use arbiter_operator::webhook::{certs, CertSource, Rotation, Webhook, WebhookOptions};
use arbiter_operator::{Operator, OperatorBuilder};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, PostParams};
use kube::Client;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};
use support::*;

/// A job as a user writes it: not suspended.
fn unsuspended(name: &str, labels: Value) -> Job {
    let mut job = serde_json::to_value(job(name, 1)).unwrap();
    job["metadata"]["labels"] = labels;
    job["spec"]["suspend"] = json!(false);
    serde_json::from_value(job).unwrap()
}

/// Retries `create` while the API server cannot reach the webhook yet
/// (its caBundle not written, its certificate not reloaded).
async fn create_when_served(jobs: &Api<Job>, job: &Job) -> Job {
    let started = Instant::now();
    loop {
        match jobs.create(&PostParams::default(), job).await {
            Ok(created) => return created,
            Err(e) if started.elapsed() < PATIENCE => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("creating a job through the webhook: {e}"),
        }
    }
}

/// The operator serving its webhooks with a generated certificate, its CA
/// kept in the configurations named `arbiter`, as `arbiter run` does by
/// default (nothing scheduled: [`serve_webhooks`]).
async fn serve_generated(operator: OperatorBuilder) -> Operator {
    serve_rotated(operator, Rotation::default()).await
}

/// [`serve_generated`] with the certificate rotated as `rotation` says.
async fn serve_rotated(operator: OperatorBuilder, rotation: Rotation) -> Operator {
    serve_webhooks(operator, rotation, Some("arbiter")).await
}

/// The webhooks `operator` serves.
fn webhooks(operator: &Operator) -> &Webhook {
    operator
        .webhook()
        .expect("the operator serves its webhooks")
}

fn api_message(error: kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message,
        other => panic!("expected the API to refuse, got {other}"),
    }
}

#[tokio::test]
async fn the_webhooks_hold_new_jobs_and_refuse_bad_configuration() {
    let (_cluster, admin) = cluster_with_setup().await;
    let operator = serve_generated(Operator::builder(admin.clone())).await;
    let served = webhooks(&operator);
    // Installed without caBundle, as deploy/ does; the operator fills it in.
    let (mutating, validating) = webhook_configurations(served.address.port(), None);
    apply_webhooks(&admin, &mutating, &validating).await;
    let m: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    let v: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    let started = Instant::now();
    loop {
        let mc = m.get("arbiter").await.unwrap();
        let vc = v.get("arbiter").await.unwrap();
        let all_set = mc
            .webhooks
            .iter()
            .flatten()
            .map(|w| &w.client_config.ca_bundle)
            .chain(
                vc.webhooks
                    .iter()
                    .flatten()
                    .map(|w| &w.client_config.ca_bundle),
            )
            .all(|ca| ca.as_ref().map(|b| b.0.as_slice()) == Some(served.ca_pem().as_bytes()));
        if all_set {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "caBundle never written: {mc:?} {vc:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The certificate is kept in the Secret, for the other replicas.
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "arbiter-system");
    let secret = secrets.get("arbiter-webhook-tls").await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    assert_eq!(
        secret.data.as_ref().unwrap()["ca.crt"].0,
        served.ca_pem().as_bytes()
    );

    // Mutating: the API hands back the job suspended, with either label.
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    for (name, label) in [
        ("held-arbiter", "arbiter.dev/queue-name"),
        ("held-kueue", "kueue.x-k8s.io/queue-name"),
    ] {
        let created =
            create_when_served(&jobs, &unsuspended(name, json!({label: "research"}))).await;
        assert!(
            suspended(&created),
            "{name} was created running: {created:?}"
        );
    }
    // A job naming no queue is not Arbiter's and is left as written.
    let free = jobs
        .create(
            &PostParams::default(),
            &unsuspended("free", json!({"team": "a"})),
        )
        .await
        .unwrap();
    assert!(!suspended(&free));

    // Validating: the simulator's checks, over what the API holds.
    let queues = |yaml: &str| -> DynamicObject { serde_yaml_ng::from_str(yaml).unwrap() };
    let (resource, _) = kube::discovery::pinned_kind(
        &admin,
        &kube::api::GroupVersionKind::gvk("arbiter.dev", "v1alpha1", "ClusterQueue"),
    )
    .await
    .unwrap();
    let cqs: Api<DynamicObject> = Api::all_with(admin.clone(), &resource);
    let unknown_flavor = queues(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: inference}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
"#,
    );
    let message = api_message(
        cqs.create(&PostParams::default(), &unknown_flavor)
            .await
            .unwrap_err(),
    );
    assert!(
        message.contains("ClusterQueue inference")
            && message.contains("ResourceFlavor `h100` is not defined"),
        "{message}"
    );
    // The same object with the flavor defined is accepted.
    apply_yaml(
        &admin,
        "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: h100}\nspec: {nodeLabels: {gpu: h100}}\n",
    )
    .await;
    // (once the webhook's store has seen the flavor)
    let started = Instant::now();
    while let Err(e) = cqs.create(&PostParams::default(), &unknown_flavor).await {
        assert!(
            started.elapsed() < PATIENCE,
            "still refused with h100 defined: {e}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // An update that breaks a valid object is refused, and the object
    // stays. (One the schema can see — a negative quota — the API server
    // refuses before the webhook: `queue_objects.rs`.)
    let mut research = cqs.get("research").await.unwrap();
    research.data["spec"]["resourceGroups"][0]["flavors"][0]["name"] = json!("b200");
    let message = api_message(
        cqs.replace("research", &PostParams::default(), &research)
            .await
            .unwrap_err(),
    );
    assert!(message.contains("ClusterQueue research"), "{message}");
    assert!(
        message.contains("ResourceFlavor `b200` is not defined"),
        "{message}"
    );

    // A cohort cycle is refused on the object that closes it.
    let (cohort_resource, _) = kube::discovery::pinned_kind(
        &admin,
        &kube::api::GroupVersionKind::gvk("arbiter.dev", "v1alpha1", "Cohort"),
    )
    .await
    .unwrap();
    let cohorts: Api<DynamicObject> = Api::all_with(admin.clone(), &cohort_resource);
    cohorts
        .create(
            &PostParams::default(),
            &queues("apiVersion: arbiter.dev/v1alpha1\nkind: Cohort\nmetadata: {name: org}\nspec: {parent: lab}\n"),
        )
        .await
        .unwrap();
    // The webhook reads the stores; give the watch a moment to deliver `org`.
    let started = Instant::now();
    let message = loop {
        match cohorts
            .create(
                &PostParams::default(),
                &queues("apiVersion: arbiter.dev/v1alpha1\nkind: Cohort\nmetadata: {name: lab}\nspec: {parent: org}\n"),
            )
            .await
        {
            Err(e) => break api_message(e),
            Ok(_) => {
                cohorts
                    .delete("lab", &Default::default())
                    .await
                    .unwrap();
                assert!(started.elapsed() < PATIENCE, "a cohort cycle was accepted");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert!(message.to_lowercase().contains("cycle"), "{message}");
    drop(operator);
}

#[tokio::test]
async fn a_mounted_certificate_is_reloaded_when_its_files_change() {
    let (cluster, admin) = cluster_with_setup().await;
    let dir = cluster.dir().join("webhook-certs");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |serving: &certs::Serving| {
        // As the kubelet swaps a Secret volume: new files, then a rename.
        for (name, text) in [
            ("tls.crt", &serving.cert_pem),
            ("tls.key", &serving.key_pem),
        ] {
            let tmp = dir.join(format!(".{name}.tmp"));
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, dir.join(name)).unwrap();
        }
    };
    let names = certs::service_names("arbiter", "arbiter-system");
    let first = certs::generate(&names).unwrap();
    write(&first);
    let options = WebhookOptions {
        certs: CertSource::Dir(dir.clone()),
        configuration: None,
    };
    let operator = Operator::builder(admin.clone())
        .webhooks(LOOPBACK, options)
        .without_scheduling()
        .start()
        .await
        .unwrap();
    let served = webhooks(&operator);
    let port = served.address.port();
    let (mutating, validating) = webhook_configurations(port, Some(&first.ca_pem));
    apply_webhooks(&admin, &mutating, &validating).await;
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    let labels = json!({"arbiter.dev/queue-name": "research"});
    let created = create_when_served(&jobs, &unsuspended("before", labels.clone())).await;
    assert!(suspended(&created));

    // A renewed certificate from another CA: the API server trusts only
    // the new CA, so jobs are created again only once the server reloaded.
    let second = certs::generate(&names).unwrap();
    let (mutating, validating) = webhook_configurations(port, Some(&second.ca_pem));
    apply_webhooks(&admin, &mutating, &validating).await;
    write(&second);
    let created = create_when_served(&jobs, &unsuspended("after", labels)).await;
    assert!(suspended(&created));
    drop(operator);
}

/// Serving certificates valid 20 s, replaced 12 s before they expire,
/// checked every `check_every`: a rotation every 8 s or so.
fn fast(check_every: Duration) -> Rotation {
    Rotation {
        validity: Duration::from_secs(20),
        renew_before: Duration::from_secs(12),
        check_every,
        ..Rotation::default()
    }
}

const SECRET: &str = "arbiter-webhook-tls";

/// The Secret's `key`.
async fn secret_value(secrets: &Api<Secret>, key: &str) -> Option<Vec<u8>> {
    secrets
        .get_opt(SECRET)
        .await
        .unwrap()
        .and_then(|s| s.data)
        .and_then(|d| d.get(key).map(|v| v.0.clone()))
}

/// The caBundle the API server holds for the job-hold webhook.
async fn api_ca_bundle(admin: &Client) -> Option<Vec<u8>> {
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .get("arbiter")
        .await
        .unwrap()
        .webhooks
        .and_then(|w| w.into_iter().next())
        .and_then(|w| w.client_config.ca_bundle)
        .map(|b| b.0)
}

/// The certificate the webhook at `address` presents in a TLS handshake,
/// which must verify for 127.0.0.1 (the name the API server calls)
/// against the CAs of `bundle`.
async fn presented(address: SocketAddr, bundle: &[u8]) -> Result<Vec<u8>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(bundle) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (_, session) = tls.get_ref();
    session
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .ok_or_else(|| "no certificate presented".to_string())
}

/// The DER of the first certificate in `pem`.
fn der(pem: &[u8]) -> Vec<u8> {
    CertificateDer::pem_slice_iter(pem)
        .next()
        .unwrap()
        .unwrap()
        .to_vec()
}

/// Creates jobs named `prefix-N` until one comes back held: the API server
/// calls the webhook (its configuration seen, its caBundle trusted).
async fn create_until_held(jobs: &Api<Job>, prefix: &str) {
    let labels = json!({"arbiter.dev/queue-name": "research"});
    let started = Instant::now();
    for attempt in 0.. {
        let name = format!("{prefix}-{attempt}");
        if let Ok(created) = jobs
            .create(&PostParams::default(), &unsuspended(&name, labels.clone()))
            .await
        {
            if suspended(&created) {
                return;
            }
        }
        assert!(
            started.elapsed() < PATIENCE,
            "no job created through the webhook came back held"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Creates job `name` through the webhook; it must be accepted and held.
async fn create_held(jobs: &Api<Job>, name: &str, during: &str) {
    let labels = json!({"arbiter.dev/queue-name": "research"});
    let created = jobs
        .create(&PostParams::default(), &unsuspended(name, labels))
        .await
        .unwrap_or_else(|e| panic!("job {name} refused {during}: {e}"));
    assert!(suspended(&created), "{name} was created running {during}");
}

#[tokio::test]
async fn the_generated_certificate_is_rotated_while_serving() {
    let (_cluster, admin) = cluster_with_setup().await;
    let operator = serve_rotated(
        Operator::builder(admin.clone()),
        fast(Duration::from_secs(1)),
    )
    .await;
    let served = webhooks(&operator);
    let (mutating, validating) = webhook_configurations(served.address.port(), None);
    apply_webhooks(&admin, &mutating, &validating).await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "arbiter-system");
    let ca = secret_value(&secrets, "ca.crt").await.unwrap();
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    create_until_held(&jobs, "first").await;

    // Jobs every 250 ms for 30 s (and until the certificate has changed
    // twice): every one accepted and held, the certificate presented
    // always one the API server's caBundle verifies.
    let mut in_secret: Vec<Vec<u8>> = Vec::new();
    let mut presented_seen: Vec<Vec<u8>> = Vec::new();
    let started = Instant::now();
    for i in 0.. {
        create_held(
            &jobs,
            &format!("rotating-{i}"),
            "while the certificate rotates",
        )
        .await;
        let tls = secret_value(&secrets, "tls.crt").await.unwrap();
        if !in_secret.contains(&tls) {
            in_secret.push(tls);
        }
        // A renewal keeps the CA: the Secret's bundle and the caBundle stay.
        assert!(
            secret_value(&secrets, "ca.crt").await.unwrap() == ca,
            "the Secret's ca.crt changed on a renewal"
        );
        let bundle = api_ca_bundle(&admin).await.unwrap();
        assert!(bundle == ca, "the caBundle changed on a renewal");
        let cert = presented(served.address, &bundle)
            .await
            .unwrap_or_else(|e| {
                panic!("the presented certificate is not trusted by the caBundle: {e}")
            });
        if !presented_seen.contains(&cert) {
            presented_seen.push(cert);
        }
        if started.elapsed() >= Duration::from_secs(30)
            && in_secret.len() >= 3
            && presented_seen.len() >= 3
        {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the certificate did not change twice: {} in the Secret, {} presented",
            in_secret.len(),
            presented_seen.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // What was presented is what the Secret held.
    assert!(presented_seen
        .iter()
        .all(|c| in_secret.iter().any(|s| der(s) == *c)));

    // The Secret deleted: made again with a new CA, the caBundle follows,
    // and jobs are held again.
    secrets.delete(SECRET, &Default::default()).await.unwrap();
    let started = Instant::now();
    let new_ca = loop {
        match secret_value(&secrets, "ca.crt").await {
            Some(new) if new != ca => break new,
            _ => {}
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the Secret was not made again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    while api_ca_bundle(&admin).await.as_ref() != Some(&new_ca) {
        assert!(
            started.elapsed() < PATIENCE,
            "the caBundle did not follow the new CA"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let labels = json!({"arbiter.dev/queue-name": "research"});
    let created = create_when_served(&jobs, &unsuspended("after-delete", labels)).await;
    assert!(suspended(&created));
    presented(served.address, &new_ca)
        .await
        .unwrap_or_else(|e| panic!("the new CA does not verify what is served: {e}"));
    drop(operator);
}

#[tokio::test]
async fn a_secret_from_an_older_version_moves_to_a_new_ca_without_a_refused_job() {
    let (_cluster, admin) = cluster_with_setup().await;
    // As an older Arbiter wrote it: rcgen's default validity, no ca.key.
    let names = certs::service_names("arbiter", "arbiter-system");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "arbiter-webhook-ca");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(names.clone())
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let old_ca = ca.pem().into_bytes();
    let old_tls = cert.der().to_vec();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": SECRET, "namespace": "arbiter-system"},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": cert.pem(), "tls.key": key.serialize_pem(), "ca.crt": ca.pem()}
    }))
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "arbiter-system");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    // Checked every 2 s: the new CA, in the bundle from the start, waits
    // two checks before it signs what is served, so the switch comes once
    // jobs are being created.
    let operator = serve_rotated(
        Operator::builder(admin.clone()),
        fast(Duration::from_secs(2)),
    )
    .await;
    let served = webhooks(&operator);
    // The configurations as that older Arbiter left them: its CA in caBundle.
    let old_ca_pem = String::from_utf8(old_ca.clone()).unwrap();
    let (mutating, validating) = webhook_configurations(served.address.port(), Some(&old_ca_pem));
    apply_webhooks(&admin, &mutating, &validating).await;
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    create_until_held(&jobs, "first").await;

    // Jobs every 250 ms until the old CA has left the Secret and the
    // caBundle: every one accepted and held, what is presented always
    // verified by the caBundle the API server holds at that moment.
    let mut presented_seen: Vec<Vec<u8>> = Vec::new();
    let started = Instant::now();
    for i in 0.. {
        create_held(&jobs, &format!("switching-{i}"), "while the CA changes").await;
        let bundle = api_ca_bundle(&admin).await.unwrap();
        let cert = presented(served.address, &bundle)
            .await
            .unwrap_or_else(|e| {
                panic!("the presented certificate is not trusted by the caBundle: {e}")
            });
        if !presented_seen.contains(&cert) {
            presented_seen.push(cert);
        }
        let stored_ca = secret_value(&secrets, "ca.crt").await.unwrap();
        let single_new_ca = CertificateDer::pem_slice_iter(&stored_ca).count() == 1
            && der(&stored_ca) != der(&old_ca);
        if single_new_ca && bundle == stored_ca {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the CA did not change: the Secret's ca.crt holds {} certificates",
            CertificateDer::pem_slice_iter(&stored_ca).count()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The loop began while the old certificate was served, and saw the
    // new CA's take over.
    assert!(
        presented_seen.first() == Some(&old_tls),
        "the CA changed before the jobs began; the test saw no switch under load"
    );
    let new_ca = secret_value(&secrets, "ca.crt").await.unwrap();
    let last = presented(served.address, &new_ca).await.unwrap();
    assert!(last != old_tls, "the old certificate is still served");
    assert!(secret_value(&secrets, "ca.key").await.is_some());
    drop(operator);
}

/// A job kind of the operator's configuration: `example.com/v1 Sweep`.
const SWEEP_INTEGRATION: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: JobIntegration
metadata: {name: sweeps}
spec:
  jobApiVersion: example.com/v1
  jobKind: Sweep
  podSets: "[{'name': 'trial', 'count': object.spec.trials, 'template': object.spec.template, 'templatePath': 'spec.template'}]"
  hold: {path: spec.paused, held: true, released: false}
"#;

#[tokio::test]
async fn a_user_defined_kind_is_held_at_creation_too() {
    let (cluster, admin) = cluster_with_setup().await;
    cluster
        .install_crds(&[open_crd("example.com", "Sweep", "sweeps")])
        .await
        .unwrap();
    let (spec, _) =
        arbiter_core::jobs::IntegrationSpec::from_manifest_yaml(SWEEP_INTEGRATION).unwrap();
    // Served as `arbiter run` serves them: the job-hold rules kept to the
    // kinds served.
    let operator = Operator::builder(admin.clone())
        .integrations(Integrations::with_extra(vec![spec]).unwrap());
    let operator = serve_generated(operator).await;
    let served = webhooks(&operator);
    // The configuration as deploy/ has it: no rule for the new kind.
    let (mutating, validating) = webhook_configurations(served.address.port(), None);
    apply_webhooks(&admin, &mutating, &validating).await;
    let m: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    let started = Instant::now();
    loop {
        let current = m.get("arbiter").await.unwrap();
        let covered = current.webhooks.iter().flatten().all(|w| {
            w.rules.iter().flatten().any(|r| {
                r.resources.as_deref() == Some(&["sweeps".to_string()][..])
                    && r.api_groups.as_deref() == Some(&["example.com".to_string()][..])
            })
        });
        if covered {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the job-hold webhooks never gained a rule for sweeps: {current:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A Sweep created to run at once comes back held.
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("example.com", "v1", "Sweep"),
        "sweeps",
    );
    let sweeps: Api<DynamicObject> = Api::namespaced_with(admin.clone(), "team-a", &resource);
    let sweep: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Sweep",
        "metadata": {"name": "lr-search", "namespace": "team-a",
                     "labels": {"arbiter.dev/queue-name": "research"}},
        "spec": {"paused": false, "trials": 2, "template": {"spec": {"containers": [
            {"name": "trial", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}}
    }))
    .unwrap();
    let started = Instant::now();
    let created = loop {
        match sweeps.create(&PostParams::default(), &sweep).await {
            Ok(created) => break created,
            Err(e) if started.elapsed() < PATIENCE => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("creating a Sweep through the webhook: {e}"),
        }
    };
    assert_eq!(created.data["spec"]["paused"], json!(true), "{created:?}");
}
