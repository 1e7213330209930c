//! The worker clusters as the dispatcher reaches them: one client per
//! MultiKueueCluster, built from the kubeconfig in its Secret (key
//! `kubeconfig`, in the operator's namespace) and built again when the
//! Secret or the cluster's spec changes; and each worker's reach — when it
//! last failed to answer, so that past the lost-worker timeout it counts as
//! lost. A client is a connection pool: a worker that comes back is
//! reached again by the next request, nothing to reconnect by hand. Reads
//! Secrets; never writes to the manager.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arbiter_core::model::api::{MultiKueueCluster, MULTIKUEUE_SECRET_KEY};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};

use super::plan::Reach;

/// How long one request to a worker may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A worker's client, or why there is none (naming the object and the fix).
pub enum Connection {
    /// Built from the Secret of this resourceVersion.
    Ready { client: Client, source: String },
    /// The MultiKueueCluster or its Secret cannot give a client.
    Broken(String),
}

/// One worker: how it is reached and since when it has not answered.
pub struct Worker {
    /// Its client.
    pub connection: Connection,
    /// The first failure of the current run of failures; `None`: it answered last.
    down_since: Option<Instant>,
}

impl Worker {
    /// Its reach now, with `lost_after` the lost-worker timeout.
    pub fn reach(&self, now: Instant, lost_after: Duration) -> Reach {
        match self.down_since {
            None => Reach::Up,
            Some(since) if now.duration_since(since) >= lost_after => Reach::Lost,
            Some(_) => Reach::Down,
        }
    }

    /// It answered.
    pub fn answered(&mut self) {
        self.down_since = None;
    }

    /// It did not answer (at `now`); returns whether this starts a run of failures.
    pub fn failed(&mut self, now: Instant) -> bool {
        let first = self.down_since.is_none();
        self.down_since.get_or_insert(now);
        first
    }
}

/// Every worker named by a MultiKueueCluster, by name.
#[derive(Default)]
pub struct Workers {
    by_name: BTreeMap<String, Worker>,
}

impl Workers {
    /// Brings the clients in line with `clusters` (the MultiKueueClusters
    /// in use) and their Secrets in `namespace`; a worker whose client
    /// changes keeps its reach.
    pub async fn refresh(
        &mut self,
        manager: &Client,
        namespace: &str,
        clusters: &[MultiKueueCluster],
    ) {
        let secrets: Api<Secret> = Api::namespaced(manager.clone(), namespace);
        let mut kept = BTreeMap::new();
        for cluster in clusters {
            let name = cluster.name_any();
            let mut worker = self.by_name.remove(&name).unwrap_or(Worker {
                connection: Connection::Broken(String::new()),
                down_since: None,
            });
            let connection = connect(&secrets, namespace, cluster, &worker.connection).await;
            if let Some(connection) = connection {
                if let Connection::Broken(why) = &connection {
                    tracing::warn!(cluster = %name, "{why}");
                }
                worker.connection = connection;
            }
            kept.insert(name, worker);
        }
        self.by_name = kept;
    }

    /// The worker named `name`, if a MultiKueueCluster names it.
    pub fn get(&self, name: &str) -> Option<&Worker> {
        self.by_name.get(name)
    }

    /// The workers, by name.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&String, &mut Worker)> {
        self.by_name.iter_mut()
    }
}

/// A new connection for `cluster` when its Secret changed since `current`
/// was built (or `current` is broken); `None`: keep `current`.
async fn connect(
    secrets: &Api<Secret>,
    namespace: &str,
    cluster: &MultiKueueCluster,
    current: &Connection,
) -> Option<Connection> {
    let name = cluster.name_any();
    let Some(kubeconfig) = cluster.spec.kubeconfig() else {
        return Some(Connection::Broken(format!(
            "MultiKueueCluster {name}: spec.kubeConfig (or spec.clusterSource.kubeConfig) is missing; set location to the name of a Secret in {namespace} holding the worker's kubeconfig under the key {MULTIKUEUE_SECRET_KEY}"
        )));
    };
    if let Some(other) = kubeconfig
        .location_type
        .as_deref()
        .filter(|t| *t != "Secret")
    {
        return Some(Connection::Broken(format!(
            "MultiKueueCluster {name}: spec.kubeConfig.locationType {other} is not supported; use Secret (a Secret in {namespace})"
        )));
    }
    let secret = match secrets.get_opt(&kubeconfig.location).await {
        Ok(Some(secret)) => secret,
        Ok(None) => {
            return Some(Connection::Broken(format!(
                "MultiKueueCluster {name}: the Secret {namespace}/{} does not exist; create it with the worker's kubeconfig under the key {MULTIKUEUE_SECRET_KEY}",
                kubeconfig.location
            )))
        }
        Err(e) => {
            return Some(Connection::Broken(format!(
                "MultiKueueCluster {name}: reading the Secret {namespace}/{}: {e}",
                kubeconfig.location
            )))
        }
    };
    let version = format!(
        "{}/{}",
        cluster.resource_version().unwrap_or_default(),
        secret.resource_version().unwrap_or_default()
    );
    if matches!(current, Connection::Ready { source, .. } if *source == version) {
        return None;
    }
    Some(
        match client_from(&name, namespace, &kubeconfig.location, &secret).await {
            Ok(client) => Connection::Ready {
                client,
                source: version,
            },
            Err(why) => Connection::Broken(why),
        },
    )
}

/// A client from the kubeconfig in `secret`, with a bounded request time.
async fn client_from(
    cluster: &str,
    namespace: &str,
    secret_name: &str,
    secret: &Secret,
) -> Result<Client, String> {
    let at = format!("MultiKueueCluster {cluster}: the Secret {namespace}/{secret_name}");
    let bytes = secret
        .data
        .as_ref()
        .and_then(|data| data.get(MULTIKUEUE_SECRET_KEY))
        .ok_or_else(|| {
            format!("{at} has no key {MULTIKUEUE_SECRET_KEY}; put the worker's kubeconfig there")
        })?;
    let text = std::str::from_utf8(&bytes.0)
        .map_err(|_| format!("{at}: key {MULTIKUEUE_SECRET_KEY} is not UTF-8 text"))?;
    let kubeconfig = Kubeconfig::from_yaml(text)
        .map_err(|e| format!("{at}: key {MULTIKUEUE_SECRET_KEY} is not a kubeconfig: {e}"))?;
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("{at}: its kubeconfig cannot be used: {e}"))?;
    config.connect_timeout = Some(REQUEST_TIMEOUT);
    config.read_timeout = Some(REQUEST_TIMEOUT);
    config.write_timeout = Some(REQUEST_TIMEOUT);
    Client::try_from(config).map_err(|e| format!("{at}: building a client: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_down_then_lost_and_up_once_it_answers() {
        let start = Instant::now();
        let mut worker = Worker {
            connection: Connection::Broken(String::new()),
            down_since: None,
        };
        let timeout = Duration::from_secs(60);
        assert_eq!(worker.reach(start, timeout), Reach::Up);
        assert!(worker.failed(start));
        assert!(!worker.failed(start + Duration::from_secs(30)));
        assert_eq!(
            worker.reach(start + Duration::from_secs(59), timeout),
            Reach::Down
        );
        assert_eq!(
            worker.reach(start + Duration::from_secs(60), timeout),
            Reach::Lost
        );
        worker.answered();
        assert_eq!(
            worker.reach(start + Duration::from_secs(90), timeout),
            Reach::Up
        );
    }
}
