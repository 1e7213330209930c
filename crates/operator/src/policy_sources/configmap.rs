//! What a labelled ConfigMap is to the operator: its [`Key`], its [`Role`]
//! (a platform bundle, or the tenant bundle of its namespace), the digest
//! of what it is built from, the version it claims, and how it loads
//! (`load_configmap`, under the tenant rules for a tenant's). Pure: it
//! never watches, writes or tells; the watcher (`watcher`) and `roles`'
//! outside view (`in_force`, `load_as`) call it.

use std::fmt;

use arbiter_policy::bundle::{self, Bundle, Files, LoadOptions};
use arbiter_policy::text;
use arbiter_policy::wasm::Runtime;
use k8s_openapi::api::core::v1::ConfigMap;
use sha2::{Digest, Sha256};

/// A ConfigMap, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key {
    pub(super) namespace: String,
    pub(super) name: String,
}

impl Key {
    pub(super) fn of(cm: &ConfigMap) -> Key {
        Key {
            namespace: cm.metadata.namespace.clone().unwrap_or_default(),
            name: cm.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// The bundle's source, as the loader names it: the metrics' label.
    pub(super) fn source(&self) -> String {
        format!("ConfigMap {self}")
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a labelled ConfigMap is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Platform,
    /// The tenant bundle of this namespace.
    Tenant(String),
}

impl Role {
    pub(super) fn tenant(&self) -> Option<String> {
        match self {
            Role::Platform => None,
            Role::Tenant(ns) => Some(ns.clone()),
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Role::Platform => "a platform bundle".to_string(),
            Role::Tenant(ns) => format!("the tenant bundle of {ns}"),
        }
    }

    /// What is in force when its first version did not load.
    pub(super) fn nothing_in_force(&self) -> String {
        match self {
            Role::Platform => "no bundle from this ConfigMap is in force".to_string(),
            Role::Tenant(ns) => format!("{ns} has no tenant bundle in force"),
        }
    }
}

/// The digest of what a bundle is built from: `data` and `binaryData`,
/// keys and values (lengths included, so no two contents collide by
/// shifting a boundary). Labels, annotations and `resourceVersion` are not in it.
pub(super) fn content_digest(cm: &ConfigMap) -> String {
    let mut hasher = Sha256::new();
    let mut part = |tag: &[u8], bytes: &[u8]| {
        hasher.update(tag);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    for (key, value) in cm.data.iter().flatten() {
        part(b"k", key.as_bytes());
        part(b"d", value.as_bytes());
    }
    for (key, value) in cm.binary_data.iter().flatten() {
        part(b"k", key.as_bytes());
        part(b"b", &value.0);
    }
    bundle::hex(&hasher.finalize())
}

/// `name@version` as the ConfigMap's `bundle.yaml` claims it, read
/// leniently (the loader may refuse the rest); `None` if it does not say.
pub(super) fn claimed(cm: &ConfigMap) -> Option<String> {
    let text = cm.data.as_ref()?.get("bundle.yaml")?;
    let value: serde_json::Value = serde_yaml_ng::from_str(text).ok()?;
    let name = value.pointer("/metadata/name")?.as_str()?;
    let version = match value.pointer("/metadata/version") {
        Some(serde_json::Value::String(v)) => v.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    Some(text::clean(&format!("{name}@{version}"), 300))
}

/// A bundle ConfigMap, loaded as `role`; a platform one that says it is a
/// tenant's is refused.
pub(super) fn load_configmap(
    cm: &ConfigMap,
    runtime: &Runtime,
    role: &Role,
) -> Result<Bundle, String> {
    let options = LoadOptions {
        tenant: role.tenant(),
        run_tests: true,
    };
    let bundle =
        bundle::load(Files::ConfigMap(cm), runtime, &options).map_err(|e| e.to_string())?;
    match (role, &bundle.tenant) {
        (Role::Platform, Some(tenant)) => Err(format!(
            "{}: bundle.yaml says spec.tenant: {tenant}, but the ConfigMap is in the operator's own namespace, whose bundles are platform bundles; put {tenant}'s bundle in namespace {tenant}",
            bundle.source
        )),
        _ => Ok(bundle),
    }
}

/// The ConfigMaps the tests of `policy_sources` build: `namespace/name`,
/// created at `created` (seconds since the epoch), holding `data`.
#[cfg(test)]
pub(super) fn test_configmap(
    namespace: &str,
    name: &str,
    created: i64,
    data: &[(&str, &str)],
) -> ConfigMap {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            creation_timestamp: Some(Time(Timestamp::from_second(created).expect("a time"))),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::test_configmap as configmap;
    use super::*;
    use crate::policy_sources::dirs::load as load_dir;
    use crate::policy_sources::STATUS_ANNOTATION;
    use k8s_openapi::ByteString;

    #[test]
    fn the_content_digest_follows_data_and_binary_data_only() {
        let base = configmap("p", "rules", 1, &[("bundle.yaml", "a: 1")]);
        let digest = content_digest(&base);
        let mut annotated = base.clone();
        annotated.metadata.annotations = Some(BTreeMap::from([(
            STATUS_ANNOTATION.to_string(),
            "loaded x@1 at 2026-12-01T00:00:00Z".to_string(),
        )]));
        annotated.metadata.resource_version = Some("42".into());
        annotated.metadata.labels = Some(BTreeMap::from([(
            bundle::CONFIGMAP_LABEL.to_string(),
            "yes".to_string(),
        )]));
        assert_eq!(content_digest(&annotated), digest);
        let edited = configmap("p", "rules", 1, &[("bundle.yaml", "a: 2")]);
        assert_ne!(content_digest(&edited), digest);
        // A boundary moved between a key and its value is another content.
        let shifted = configmap("p", "rules", 1, &[("bundle.yam", "la: 1")]);
        assert_ne!(content_digest(&shifted), digest);
        let mut with_module = base.clone();
        with_module.binary_data = Some(BTreeMap::from([(
            "w.wasm".to_string(),
            ByteString(b"\0asm".to_vec()),
        )]));
        assert_ne!(content_digest(&with_module), digest);
    }

    #[test]
    fn the_claimed_version_is_read_even_from_a_bundle_the_loader_refuses() {
        let cm = configmap(
            "p",
            "rules",
            1,
            &[(
                "bundle.yaml",
                "metadata: {name: platform, version: \"2\"}\nspec: {policies: [{name: x, hook: wieght}]}\n",
            )],
        );
        assert_eq!(claimed(&cm).as_deref(), Some("platform@2"));
        let numeric = configmap(
            "p",
            "r",
            1,
            &[("bundle.yaml", "metadata: {name: p, version: 3}")],
        );
        assert_eq!(claimed(&numeric).as_deref(), Some("p@3"));
        let broken = configmap("p", "r", 1, &[("bundle.yaml", "metadata: [unclosed")]);
        assert_eq!(claimed(&broken), None);
        assert_eq!(claimed(&configmap("p", "r", 1, &[])), None);
        let sneaky = configmap(
            "p",
            "r",
            1,
            &[(
                "bundle.yaml",
                "metadata: {name: \"a\\e[2Jb\", version: \"1\"}",
            )],
        );
        assert_eq!(claimed(&sneaky).as_deref(), Some("a\\u{1b}[2Jb@1"));
    }

    #[test]
    fn a_bundle_saying_spec_tenant_is_refused_as_a_platform_bundle() {
        let runtime = Runtime::new().expect("the WebAssembly runtime starts");
        let text = "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {name: t, version: \"1\"}\nspec:\n  tenant: team-a\n  policies:\n  - {name: w, hook: weight, cel: {expression: '1.0'}}\n";
        let cm = configmap("arbiter-system", "rules", 1, &[("bundle.yaml", text)]);
        let error = load_configmap(&cm, &runtime, &Role::Platform)
            .err()
            .expect("refused");
        assert_eq!(
            error,
            "ConfigMap arbiter-system/rules: bundle.yaml says spec.tenant: team-a, but the ConfigMap is in the operator's own namespace, whose bundles are platform bundles; put team-a's bundle in namespace team-a"
        );
        let cm = configmap("team-a", "rules", 1, &[("bundle.yaml", text)]);
        let bundle = load_configmap(&cm, &runtime, &Role::Tenant("team-a".into()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bundle.tenant.as_deref(), Some("team-a"));
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join("bundle.yaml"), text).expect("bundle.yaml");
        let error = load_dir(dir.path(), &runtime).err().expect("refused");
        assert!(
            error.ends_with("but --policies takes platform bundles; ship team-a's bundle as a ConfigMap labelled arbiter.dev/policy-bundle in namespace team-a"),
            "{error}"
        );
    }
}
