//! CRDs into the test cluster: from YAML files (multi-document, as
//! upstream ships them) or typed values, applied server-side, then waited
//! on until the API server reports them `Established`.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;

use crate::Error;

/// The field manager the harness applies with.
const MANAGER: &str = "arbiter-testcluster";

/// How long a CRD may take to be established (bounds a hang only).
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// Every `CustomResourceDefinition` document of a YAML file.
pub fn crd_documents(path: &Path) -> Result<Vec<CustomResourceDefinition>, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        what: format!("reading {}", path.display()),
        source,
    })?;
    let mut crds = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
        let value = <serde_json::Value as serde::Deserialize>::deserialize(doc)
            .map_err(|e| Error::Other(format!("{}: document {}: {e}", path.display(), i + 1)))?;
        if value.is_null()
            || value.get("kind").and_then(|k| k.as_str()) != Some("CustomResourceDefinition")
        {
            continue;
        }
        let crd: CustomResourceDefinition = serde_json::from_value(value).map_err(|e| {
            Error::Other(format!(
                "{}: document {} is not a valid CustomResourceDefinition: {e}",
                path.display(),
                i + 1
            ))
        })?;
        crds.push(crd);
    }
    Ok(crds)
}

pub(crate) async fn install(
    client: &Client,
    crds: &[CustomResourceDefinition],
) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut crd = crd.clone();
        crd.metadata.managed_fields = None;
        crd.metadata.resource_version = None;
        crd.status = None;
        api.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(|e| Error::Other(format!("installing CRD {name}: {e}")))?;
    }
    for crd in crds {
        wait_established(client, crd.metadata.name.as_deref().unwrap_or_default()).await?;
    }
    Ok(())
}

/// Waits until CRD `name` has condition `Established=True`.
pub async fn wait_established(client: &Client, name: &str) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let started = std::time::Instant::now();
    loop {
        let crd = api.get(name).await?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        if started.elapsed() > ESTABLISH_TIMEOUT {
            return Err(Error::Other(format!(
                "CRD {name} was not established within {} s",
                ESTABLISH_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
