//! What the `bundle` and `cel` targets share: one WebAssembly runtime, a
//! ConfigMap holding a bundle, and a fixed request per hook to evaluate a
//! loaded policy against (the `evaluate` of `arbiter policy eval`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use arbiter_policy::bundle::{self, Bundle, BundleError, Files, Hook, LoadOptions};
use arbiter_policy::wasm::Runtime;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use serde_json::{json, Value};

/// The repo's own plugin, so bundles naming a module can load one. It is
/// compiled once: the runtime caches modules by digest.
pub const PLUGIN: &[u8] = include_bytes!("../../../policies/plugins/shortest-first.wasm");
/// Module names a fuzzed bundle.yaml may use for [`PLUGIN`].
pub const PLUGIN_NAMES: [&str; 2] = ["plugins/shortest-first.wasm", "plugin.wasm"];

pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        Runtime::new().unwrap_or_else(|e| panic!("the WebAssembly runtime does not start: {e}"))
    })
}

/// A ConfigMap `fuzz/bundle` with `bundle.yaml` (in `data` if UTF-8, else
/// in `binaryData`) and [`PLUGIN`] under each of [`PLUGIN_NAMES`].
pub fn configmap(bundle_yaml: &[u8]) -> ConfigMap {
    let mut data = BTreeMap::new();
    let mut binary: BTreeMap<String, ByteString> = PLUGIN_NAMES
        .iter()
        .map(|name| (name.to_string(), ByteString(PLUGIN.to_vec())))
        .collect();
    match std::str::from_utf8(bundle_yaml) {
        Ok(text) => {
            data.insert("bundle.yaml".to_string(), text.to_string());
        }
        Err(_) => {
            binary.insert("bundle.yaml".to_string(), ByteString(bundle_yaml.to_vec()));
        }
    }
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("bundle".into()),
            namespace: Some("fuzz".into()),
            ..ObjectMeta::default()
        },
        data: Some(data),
        binary_data: Some(binary),
        ..ConfigMap::default()
    }
}

/// Loads `bundle_yaml` from a ConfigMap: parse, validate, compile, and the
/// bundle's own tests when `run_tests`.
pub fn load(
    bundle_yaml: &[u8],
    tenant: Option<&str>,
    run_tests: bool,
) -> Result<Bundle, BundleError> {
    let cm = configmap(bundle_yaml);
    let options = LoadOptions {
        tenant: tenant.map(str::to_string),
        run_tests,
    };
    bundle::load(Files::ConfigMap(&cm), runtime(), &options)
}

fn workload(name: &str, gpus: i64) -> Value {
    json!({
        "name": name, "namespace": "team-a", "kind": "Job",
        "labels": {"team": "a", "arbiter.dev/queue-name": "q"},
        "annotations": {"note": "x"},
        "priority": 10, "priorityClass": "batch", "priorityWeight": 1.5,
        "queueName": "q", "clusterQueue": "cq",
        "podSets": [
            {"name": "main", "count": 2, "minCount": 1, "requests": {"nvidia.com/gpu": gpus as f64, "cpu": 4.0}},
            {"name": "aux", "count": 1, "requests": {"cpu": 0.5}}
        ],
        "requests": {"nvidia.com/gpu": 2.0 * gpus as f64, "cpu": 8.5},
        "gpus": 2 * gpus, "ageSeconds": 120.0, "retries": 1, "evictions": 0,
        "estimate": {"runtimeSeconds": 600.0, "samples": 3},
        "flavors": ["a100"]
    })
}

fn queue() -> Value {
    json!({"name": "q", "namespace": "team-a", "priority": 5, "clusterQueue": "cq"})
}

fn cluster_queue(name: &str, usage: f64) -> Value {
    json!({
        "name": name, "cohort": "all", "weight": 1.0, "share": 0.25, "decayedUsage": usage,
        "nominal": {"a100": {"nvidia.com/gpu": 8.0}}, "usage": {"a100": {"nvidia.com/gpu": 2.0}},
        "priorityWeight": 1.0, "admitted": 1, "pending": 2
    })
}

fn tenant() -> Value {
    json!({"name": "team-a", "labels": {"tier": "gold"}, "annotations": {}})
}

fn flavor(name: &str) -> Value {
    json!({
        "name": name, "nodes": 4, "minNodes": 1, "maxNodes": 8, "utilization": 0.5,
        "pendingNodes": 1.0, "targetUtilization": 80.0
    })
}

/// A small fixed request for `hook`, as `arbiter policy eval` takes it.
pub fn request(hook: Hook) -> &'static Value {
    static REQUESTS: OnceLock<[Value; 6]> = OnceLock::new();
    let requests = REQUESTS.get_or_init(|| {
        [
            json!({
                "workload": workload("w", 1), "queue": queue(), "clusterQueue": cluster_queue("cq", 10.0),
                "tenant": tenant(), "cohort": {"name": "all", "parent": null},
                "flavors": {"main": {"nvidia.com/gpu": "a100"}}, "borrowing": false, "now": 300.0
            }),
            json!({
                "workloads": [workload("w0", 1), workload("w1", 4)],
                "queues": {"team-a/q": queue()},
                "clusterQueues": {"cq": cluster_queue("cq", 10.0)},
                "tenants": {"team-a": tenant()},
                "now": 300.0
            }),
            json!({"clusterQueues": [cluster_queue("cq", 10.0), cluster_queue("other", 0.0)], "now": 300.0}),
            json!({"flavors": [flavor("a100"), flavor("v100")], "now": 300.0}),
            json!({
                "workload": workload("w", 1), "queue": queue(), "clusterQueue": cluster_queue("cq", 10.0),
                "tenant": tenant(), "candidates": ["a100", "v100"], "now": 300.0
            }),
            json!({
                "workload": workload("w", 1), "podSet": "main", "flavor": "a100",
                "pod": {"requests": {"cpu": 4.0, "example.com/gpu-milli": 500.0}},
                "nodes": [
                    {"index": 0, "name": "a100-0", "free": {"cpu": 60.0, "example.com/gpu-milli": 1500.0},
                     "allocatable": {"cpu": 64.0, "example.com/gpu-milli": 2000.0},
                     "devices": [{"resource": "example.com/gpu-milli", "perCard": 1000.0, "cards": [500.0, 1000.0]}]},
                    {"index": 1, "name": "a100-1", "free": {"cpu": 64.0}, "allocatable": {"cpu": 64.0}}
                ],
                "typical": [{"requests": {"example.com/gpu-milli": 500.0}, "share": 1.0}],
                "now": 300.0
            }),
        ]
    });
    // In the order of `Hook::ALL`.
    &requests[hook_index(hook)]
}

fn hook_index(hook: Hook) -> usize {
    Hook::ALL.iter().position(|&h| h == hook).unwrap_or(0)
}

/// Evaluates every policy of `bundle` on its hook's fixed request; errors are fine.
pub fn evaluate_all(bundle: &Bundle) {
    for policy in &bundle.policies {
        let _ = arbiter_policy::test::evaluate(policy, request(policy.hook));
        let _ = policy.reads();
        let _ = policy.applies_to("team-a", "Job", "cq");
    }
}

/// Once per process: the fixed requests decode and a trivial policy on each
/// hook evaluates, so a harness mistake is not taken for a clean run.
pub fn self_check() {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| {
        let expressions = [
            "workload.gpus >= 1 && 'a100' in workload.flavors",
            "double(workload.priority) * workload.priorityWeight",
            "clusterQueue.weight",
            "double(flavor.nodes)",
            "['a100']",
            "node.free['cpu'] - pod.requests['cpu']",
        ];
        for (hook, expression) in Hook::ALL.into_iter().zip(expressions) {
            let yaml = json!({
                "apiVersion": "arbiter.dev/v1alpha1", "kind": "PolicyBundle",
                "metadata": {"name": "self-check"},
                "spec": {"policies": [{"name": "p", "hook": hook.to_string(), "cel": {"expression": expression}}]}
            })
            .to_string();
            let bundle = load(yaml.as_bytes(), None, true)
                .unwrap_or_else(|e| panic!("fuzz self-check: {hook}: {e}"));
            for policy in &bundle.policies {
                if let Err(e) = arbiter_policy::test::evaluate(policy, request(hook)) {
                    panic!("fuzz self-check: {} on its fixed request: {e}", hook);
                }
            }
        }
    });
}
