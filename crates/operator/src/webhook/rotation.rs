//! The generated certificate's Secret (`CertSource::Secret`), kept by every
//! replica alike, leader or not:
//!
//! - made when absent — at start or when deleted — with a new CA; the
//!   replica whose create loses (409) reads the winner's;
//! - watched (a kube-runtime watcher on its name), so each replica serves
//!   what it holds: the rustls configuration reloaded when `tls.crt` or
//!   `tls.key` change, the CA bundle handed to `certs::keep_ca_bundles`;
//! - checked every `Rotation::check_every` against `certs::due`; whichever
//!   replica finds a change due writes it with the `resourceVersion` it
//!   read, so only one write lands (a conflict means another replica did
//!   it: the Secret is read again).
//!
//! A CA change never leaves the API server unable to verify what is served:
//! the new CA goes into the bundle first, and signs the served certificate
//! only once both webhook configurations have carried that bundle at two
//! checks in a row (the API server's own watch of them has had a check
//! interval to catch up; with no configuration to keep, at once).
//!
//! It decides nothing itself (`certs::due` does) and never panics: a write
//! or read that fails is logged and tried again at the next check, and the
//! certificate in use stays. Called by `webhook::start`.

use std::time::SystemTime;

use axum_server::tls_rustls::RustlsConfig;
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use tokio::sync::watch;

use super::certs::{self, CertError, Due, Rotation, Stored};

/// The Secret's keeper on this replica.
pub struct Keeper {
    client: Client,
    secrets: Api<Secret>,
    name: String,
    /// `namespace/name`, for logs and errors.
    shown: String,
    names: Vec<String>,
    rotation: Rotation,
    configuration: Option<String>,
    /// What the Secret held when last read.
    current: Stored,
    /// The server's configuration and the pair it serves, once running.
    tls: Option<(RustlsConfig, (String, String))>,
    ca_bundle: watch::Sender<String>,
    /// The bundle both webhook configurations carried at the last check.
    in_place_at_last_check: Option<String>,
}

impl Keeper {
    /// Reads the Secret `namespace/name` (made first if absent) and brings
    /// it up to date once, so what is served from the start is usable.
    pub async fn load(
        client: &Client,
        namespace: &str,
        name: &str,
        names: Vec<String>,
        rotation: Rotation,
        configuration: Option<String>,
    ) -> Result<Keeper, CertError> {
        rotation.check()?;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let shown = format!("{namespace}/{name}");
        let fail = |source| CertError::Secret {
            secret: shown.clone(),
            source,
        };
        let secret = match secrets.get_opt(name).await.map_err(fail)? {
            Some(secret) => secret,
            None => create_or_read(&secrets, name, &shown, &names, &rotation).await?,
        };
        let current = Stored::from_data(secret.data.as_ref());
        let (ca_bundle, _) = watch::channel(current.ca_crt.clone());
        let mut keeper = Keeper {
            client: client.clone(),
            secrets,
            name: name.to_string(),
            shown,
            names,
            rotation,
            configuration,
            current,
            tls: None,
            ca_bundle,
            in_place_at_last_check: None,
        };
        keeper.bring_up_to_date(secret).await;
        Ok(keeper)
    }

    /// What the Secret holds now.
    pub fn stored(&self) -> &Stored {
        &self.current
    }

    /// The CA bundle, as it changes.
    pub fn ca_bundle(&self) -> watch::Receiver<String> {
        self.ca_bundle.subscribe()
    }

    /// Keeps the Secret (watch, checks, rotations) and `tls`, which serves
    /// what [`Keeper::stored`] holds, until the task is dropped.
    pub fn run(mut self, tls: RustlsConfig) -> tokio::task::JoinHandle<()> {
        let pair = (self.current.tls_crt.clone(), self.current.tls_key.clone());
        self.tls = Some((tls, pair));
        tokio::spawn(async move {
            let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
            let mut events =
                std::pin::pin!(watcher::watcher(self.secrets.clone(), config).default_backoff());
            let every = self.rotation.check_every;
            let mut checks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = checks.tick() => self.check().await,
                    event = events.next() => match event {
                        Some(Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret))) => {
                            self.observe(&secret)
                        }
                        Some(Ok(watcher::Event::Delete(_))) => {
                            tracing::warn!(secret = %self.shown, "the webhook certificate's Secret was deleted; generating a new CA and certificate");
                            self.recreate().await;
                        }
                        Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
                        Some(Err(e)) => {
                            tracing::warn!(secret = %self.shown, error = %e, "watching the webhook certificate's Secret failed; retrying with backoff (checked every {every:?} meanwhile)");
                        }
                        None => return,
                    },
                }
            }
        })
    }

    /// Reads the Secret and writes what is due.
    async fn check(&mut self) {
        match self.secrets.get_opt(&self.name).await {
            Ok(Some(secret)) => self.bring_up_to_date(secret).await,
            Ok(None) => {
                tracing::warn!(secret = %self.shown, "the webhook certificate's Secret is gone; generating a new CA and certificate");
                self.recreate().await;
            }
            Err(e) => {
                tracing::warn!(secret = %self.shown, error = %e, "reading the webhook certificate's Secret failed; the certificate in use stays, read again at the next check");
            }
        }
    }

    /// Writes what `secret` needs (a rotation step), if anything, over the
    /// version read.
    async fn bring_up_to_date(&mut self, secret: Secret) {
        self.observe(&secret);
        let stored = Stored::from_data(secret.data.as_ref());
        let now = SystemTime::now();
        let due = certs::due(&stored, &self.names, &self.rotation, now);
        match &due {
            Due::Nothing => return,
            Due::Switch if !self.bundle_settled(&stored.ca_crt).await => {
                tracing::debug!(secret = %self.shown, "the new CA waits to be in every caBundle before it signs what is served");
                return;
            }
            _ => {}
        }
        let next = match stored.apply(&due, &self.names, &self.rotation, now) {
            Ok(Some(next)) => next,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(secret = %self.shown, error = %e, step = %due, "making the webhook certificate failed; the certificate in use stays, tried again at the next check");
                return;
            }
        };
        let mut replacement = secret;
        replacement.data = Some(next.to_data());
        replacement.metadata.managed_fields = None;
        // `replacement` carries the resourceVersion read: a replica that
        // wrote since makes this a conflict.
        match self
            .secrets
            .replace(&self.name, &PostParams::default(), &replacement)
            .await
        {
            Ok(written) => {
                tracing::info!(secret = %self.shown, step = %due, "webhook certificate rotated");
                self.observe(&written);
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                tracing::info!(secret = %self.shown, step = %due, "another replica changed the webhook certificate's Secret first; reading it again");
                if let Ok(Some(secret)) = self.secrets.get_opt(&self.name).await {
                    self.observe(&secret);
                }
            }
            Err(e) => {
                tracing::warn!(secret = %self.shown, error = %e, step = %due, "writing the rotated webhook certificate failed; the certificate in use stays, tried again at the next check");
            }
        }
    }

    /// Takes what `secret` holds: serves its certificate if it changed and
    /// loads, and passes its CA bundle on.
    fn observe(&mut self, secret: &Secret) {
        let stored = Stored::from_data(secret.data.as_ref());
        if let Some((tls, served)) = &mut self.tls {
            let pair = (stored.tls_crt.clone(), stored.tls_key.clone());
            if *served != pair {
                let what = format!("Secret {}", self.shown);
                match certs::server_config(pair.0.as_bytes(), pair.1.as_bytes(), &what) {
                    Ok(config) => {
                        tls.reload_from_config(std::sync::Arc::new(config));
                        *served = pair;
                        tracing::info!(secret = %self.shown, "webhook certificate reloaded from the Secret");
                    }
                    Err(e) => {
                        tracing::warn!(secret = %self.shown, error = %e, "the Secret's webhook certificate does not load; the one in use stays (replaced at the next check)");
                    }
                }
            }
        }
        // A bundle with no certificate would lock the API server out: kept
        // out of caBundle (the next check replaces it).
        if stored.ca_crt.contains("BEGIN CERTIFICATE") {
            self.ca_bundle.send_if_modified(|bundle| {
                let changed = *bundle != stored.ca_crt;
                if changed {
                    bundle.clone_from(&stored.ca_crt);
                }
                changed
            });
        }
        self.current = stored;
    }

    /// Makes the Secret anew (or reads the one another replica made).
    async fn recreate(&mut self) {
        match create_or_read(
            &self.secrets,
            &self.name,
            &self.shown,
            &self.names,
            &self.rotation,
        )
        .await
        {
            Ok(secret) => self.observe(&secret),
            Err(e) => {
                tracing::warn!(secret = %self.shown, error = %e, "making the webhook certificate's Secret anew failed; the certificate in use stays, tried again at the next check");
            }
        }
    }

    /// Whether `bundle` is in every `caBundle` of both webhook
    /// configurations now and was at the last check too.
    async fn bundle_settled(&mut self, bundle: &str) -> bool {
        let Some(configuration) = &self.configuration else {
            return true;
        };
        let in_place = match bundle_in_place(&self.client, configuration, bundle).await {
            Ok(in_place) => in_place,
            Err(e) => {
                tracing::warn!(name = %configuration, error = %e, "reading the webhook configurations failed; the new CA waits for the next check");
                false
            }
        };
        let settled = in_place && self.in_place_at_last_check.as_deref() == Some(bundle);
        self.in_place_at_last_check = in_place.then(|| bundle.to_string());
        settled
    }
}

/// Whether every webhook of the Mutating- and ValidatingWebhookConfiguration
/// `name` has `bundle` as its `caBundle` (one that does not exist calls no
/// one, so it holds nothing back).
async fn bundle_in_place(client: &Client, name: &str, bundle: &str) -> Result<bool, kube::Error> {
    let carries = |ca: Option<&ByteString>| ca.is_some_and(|ca| ca.0 == bundle.as_bytes());
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt(name)
        .await?;
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get_opt(name)
        .await?;
    let m = mutating
        .iter()
        .flat_map(|c| c.webhooks.iter().flatten())
        .all(|w| carries(w.client_config.ca_bundle.as_ref()));
    let v = validating
        .iter()
        .flat_map(|c| c.webhooks.iter().flatten())
        .all(|w| carries(w.client_config.ca_bundle.as_ref()));
    Ok(m && v)
}

/// Creates the Secret `name` with a new CA and certificate; when another
/// replica created it first, reads theirs.
async fn create_or_read(
    secrets: &Api<Secret>,
    name: &str,
    shown: &str,
    names: &[String],
    rotation: &Rotation,
) -> Result<Secret, CertError> {
    let fail = |source| CertError::Secret {
        secret: shown.to_string(),
        source,
    };
    let made = Stored::generate(names, rotation, SystemTime::now())?;
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            labels: Some([("app.kubernetes.io/name".to_string(), "arbiter".to_string())].into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(made.to_data()),
        ..Default::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(created) => {
            tracing::info!(secret = %shown, "generated a new CA and webhook certificate and stored them in the Secret");
            Ok(created)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            secrets.get(name).await.map_err(fail)
        }
        Err(e) => Err(fail(e)),
    }
}
