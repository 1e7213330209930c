//! What the tests of `deploy/` and its Helm chart (`deploy.rs`, `helm.rs`)
//! share: the repository's files read as YAML, JSON values read leniently,
//! and a real kube-apiserver started with an administrator's client, its
//! kinds found by discovery.

#![allow(dead_code)]

use std::fmt::Display;
use std::path::Path;

use arbiter_testcluster::TestCluster;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, GroupVersionKind, PostParams};
use kube::discovery::{pinned_kind, ApiCapabilities};
use kube::Client;
use serde_json::{json, Value};

/// The repository's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The YAML documents of `text` (empty ones left out); `what` names it in errors.
pub fn documents(text: &str, what: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| {
            serde::Deserialize::deserialize(doc).unwrap_or_else(|e| panic!("{what}: not YAML: {e}"))
        })
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

/// The strings of an array (none when `value` is not one).
pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The items of an array (none when `value` is not one).
pub fn items(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// A test cluster started, and its administrator's client.
pub async fn start_cluster() -> (TestCluster, Client) {
    let cluster = TestCluster::start()
        .await
        .unwrap_or_else(|e| panic!("the test cluster did not start: {e}"));
    let admin = cluster
        .admin_client()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (cluster, admin)
}

pub async fn create_namespace(client: &Client, name: &str) {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))
        .unwrap_or_else(|e| panic!("{e}"));
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("namespace {name}: {e}"));
}

/// The API resource of `object`'s `apiVersion` and `kind`, as the API
/// server serves it; `what` names the object if it does not.
pub async fn served(
    client: &Client,
    object: &Value,
    what: impl Display,
) -> (ApiResource, ApiCapabilities) {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap_or_default();
    let gvk = GroupVersionKind::gvk(group, version, kind);
    pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("{what}: {gvk:?} is not served: {e}"))
}
