//! The job readers: a JSON object as a watch hands it over → every
//! built-in integration's readers (`Integrations::extract`: the pod sets
//! and queue; per integration `is_held`, `ended`, `pods_ready`,
//! `progress`), the Node readers (`config::pools`: a Node whose
//! `arbiter.dev/devices` annotation is the input's text, on a flavor that
//! selects it) and the hold the webhook would write (`review::hold_patch`).
//! The input is tried as the object itself, and as its `kind` set to each
//! built-in kind. Any panic, stack overflow, timeout or OOM is a finding;
//! errors are fine.
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use arbiter_core::jobs::Integrations;
use arbiter_core::model::cluster::Cluster;
use arbiter_operator::config::{self, ApiObject};
use arbiter_operator::webhook::review;
use k8s_openapi::api::core::v1::Node;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fn integrations() -> &'static Integrations {
    static INTEGRATIONS: OnceLock<Integrations> = OnceLock::new();
    INTEGRATIONS.get_or_init(Integrations::builtin)
}

/// One flavor selecting `pool: a`, in a ClusterQueue covering GPUs.
fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let objects: Vec<ApiObject> = [
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ResourceFlavor",
                   "metadata": {"name": "a"}, "spec": {"nodeLabels": {"pool": "a"}}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue",
                   "metadata": {"name": "cq"},
                   "spec": {"namespaceSelector": {}, "resourceGroups": [{
                       "coveredResources": ["cpu", "nvidia.com/gpu"],
                       "flavors": [{"name": "a", "resources": [
                           {"name": "cpu", "nominalQuota": 64},
                           {"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}),
        ]
        .into_iter()
        .map(ApiObject::new)
        .collect();
        let resources = ["cpu".to_string(), "nvidia.com/gpu".to_string()];
        match config::build(&objects, &BTreeMap::new(), resources) {
            Ok(built) => built.cluster,
            Err(problems) => panic!("the fuzz target's own configuration: {problems:?}"),
        }
    })
}

fn read(object: &Value) {
    let _ = integrations().extract(object);
    for (api_version, kind) in integrations().kinds() {
        if let Some(integration) = integrations().find(api_version, kind) {
            let _ = integration.is_held(object);
            let _ = integration.ended(object);
            let _ = integration.pods_ready(object);
            let _ = integration.progress(object);
        }
    }
    let _ = review::hold_patch(integrations(), object);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "labels": {"pool": "a"},
                         "annotations": {"arbiter.dev/devices": text}},
            "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}}
        }))
        .expect("a Node");
        let _ = config::pools(cluster(), &[node]);
    }
    let Ok(object) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    read(&object);
    if object.is_object() {
        let kinds: Vec<(String, String)> = integrations()
            .kinds()
            .map(|(a, k)| (a.to_string(), k.to_string()))
            .collect();
        for (api_version, kind) in kinds {
            let mut typed = object.clone();
            typed["apiVersion"] = Value::String(api_version);
            typed["kind"] = Value::String(kind);
            read(&typed);
        }
    }
});
