//! Kueue v0.17 as the system under test (`--against kueue`): its manager
//! (built, installed and started by `arbiter_testcluster::kueue`, shared
//! with the shadow mode's end-to-end test), the shape's queue
//! configuration as `kueue.x-k8s.io/v1beta2` objects, and the labels that
//! queue a Job in Kueue; the manager runs against the same test API server
//! as the same token user, so the runner measures it exactly as it
//! measures Arbiter.

use std::path::{Path, PathBuf};

use anyhow::bail;
use arbiter_testcluster::kueue::{Manager, API_VERSION};
use arbiter_testcluster::TestCluster;
use serde_json::{json, Value};

/// The directory `scripts/kueue.sh` built Kueue into (building it first
/// when it is not there yet: a few minutes).
pub fn build() -> anyhow::Result<PathBuf> {
    Ok(arbiter_testcluster::kueue::build()?)
}

/// Kueue's CRDs (every file `scripts/kueue.sh` copied).
pub async fn install_crds(cluster: &TestCluster, dir: &Path) -> anyhow::Result<()> {
    Ok(arbiter_testcluster::kueue::install_crds(cluster, dir).await?)
}

/// One object of the shape's queue configuration (`arbiter.dev/v1alpha1`)
/// as Kueue spells it: `cohortName` and `parentName` (v1beta2), and an
/// empty `namespaceSelector` on a ClusterQueue, which in Kueue (unlike
/// Arbiter) admits from no namespace when left out.
pub fn object(arbiter: &Value) -> anyhow::Result<Value> {
    let mut value = arbiter.clone();
    value["apiVersion"] = json!(API_VERSION);
    let rename = |value: &mut Value, from: &str, to: &str| {
        if let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) {
            if let Some(v) = spec.remove(from) {
                spec.insert(to.to_string(), v);
            }
        }
    };
    match value["kind"].as_str().unwrap_or_default() {
        "ResourceFlavor" | "LocalQueue" | "WorkloadPriorityClass" => {}
        "Cohort" => rename(&mut value, "parent", "parentName"),
        "ClusterQueue" => {
            rename(&mut value, "cohort", "cohortName");
            if value["spec"].get("namespaceSelector").is_none() {
                value["spec"]["namespaceSelector"] = json!({});
            }
        }
        other => bail!("no Kueue object for kind {other:?}"),
    }
    Ok(value)
}

/// The labels that queue a Job in Kueue.
pub fn job_labels(priority_class: &str) -> Value {
    json!({"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": priority_class})
}

/// Starts Kueue's manager as the token user whose `kubeconfig` is given;
/// returns it and the port of its health probes (`/readyz`).
pub fn start(
    cluster: &TestCluster,
    dir: &Path,
    kubeconfig: &Path,
    tuned: bool,
    log: &Path,
) -> anyhow::Result<(Manager, u16)> {
    let manager = Manager::start(cluster, dir, kubeconfig, tuned, log)?;
    let health = manager.health_port();
    Ok((manager, health))
}
