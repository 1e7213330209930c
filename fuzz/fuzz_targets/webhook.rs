//! The admission webhooks' request decoding and answers: bytes as the API
//! server (or anything reaching the port) sends them → the mutating
//! webhook's answer (`webhook::mutation`: AdmissionReview decoding, the
//! hold patch for every built-in job kind) or the validating webhook's
//! (`webhook::validation`: the configuration built with the object as it
//! would be, against a small configuration in force). The first byte
//! chooses which. Any panic, stack overflow, timeout or OOM is a finding;
//! refusals are fine.
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use arbiter_core::jobs::Integrations;
use arbiter_operator::config::ApiObject;
use arbiter_operator::webhook;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

/// A flavor, a ClusterQueue using it and a LocalQueue, as the stores hold them.
fn current() -> &'static [ApiObject] {
    static CURRENT: OnceLock<Vec<ApiObject>> = OnceLock::new();
    CURRENT.get_or_init(|| {
        [
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ResourceFlavor",
                   "metadata": {"name": "a100"},
                   "spec": {"nodeLabels": {"nvidia.com/gpu.product": "A100"}}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue",
                   "metadata": {"name": "research"},
                   "spec": {"namespaceSelector": {}, "resourceGroups": [{
                       "coveredResources": ["cpu", "nvidia.com/gpu"],
                       "flavors": [{"name": "a100", "resources": [
                           {"name": "cpu", "nominalQuota": 64},
                           {"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}),
            json!({"apiVersion": "arbiter.dev/v1alpha1", "kind": "LocalQueue",
                   "metadata": {"name": "research", "namespace": "team-a"},
                   "spec": {"clusterQueue": "research"}}),
        ]
        .into_iter()
        .map(ApiObject::new)
        .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    if which % 2 == 0 {
        static INTEGRATIONS: OnceLock<Integrations> = OnceLock::new();
        let integrations = INTEGRATIONS.get_or_init(Integrations::builtin);
        let _ = webhook::mutation(integrations, body);
    } else {
        let resources = vec!["cpu".to_string(), "nvidia.com/gpu".to_string()];
        let _ = webhook::validation(current(), &BTreeMap::new(), &resources, body);
    }
});
