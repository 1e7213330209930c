//! The wire format of a policy bundle: `bundle.yaml` as serde and schemars
//! types (its JSON Schema is `plugin-sdk/schema/bundle.json`), from the
//! bundle's metadata down to each policy's `match`, `failurePolicy`, `mode`,
//! `limits` and the bundle's own tests. Plain data: nothing here checks,
//! compiles or evaluates anything — the loader (`bundle`) decodes these and
//! turns them into the checked types of `compiled`; `test` reads a test's
//! `input` and `expect`; the engine reads `match`, `mode` and
//! `failurePolicy`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::wasm::Hook;

/// `apiVersion` of a bundle.
pub const API_VERSION: &str = "arbiter.dev/v1alpha1";

/// `Fail`: an error denies admission (retryably) and counts as a failed
/// decision; `Ignore`: an error allows admission. For the other hooks both
/// fall back to the built-in behaviour for that call (score 0, configured
/// weights, target-utilisation autoscaling, listed flavor order, best-fit
/// placement).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum FailurePolicy {
    #[default]
    Fail,
    Ignore,
}

/// `DryRun` policies decide and are logged, but never act.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Mode {
    #[default]
    Enforce,
    DryRun,
}

/// Which workloads (or ClusterQueues, flavors) a policy applies to; empty lists match all.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Match {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_queues: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelSpec {
    /// admission: bool (true allows); weight, fairShare: number; autoscale: integer; flavor: list of flavor names; placement: number, evaluated per candidate node (higher is better).
    pub expression: String,
    /// admission only: the reason shown when the expression denies (a string expression).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_expression: Option<String>,
    /// admission only: `false` rejects for good; default true (tried again later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WasmSpec {
    /// File name in the bundle (a key of the ConfigMap's `binaryData`).
    pub module: String,
    /// Hex sha256 the module must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The policy's `params`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mi_b: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    pub name: String,
    pub hook: Hook,
    #[serde(default, rename = "match")]
    pub matches: Match,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasm: Option<WasmSpec>,
    /// The policy's `params` (for CEL; a WASM policy may also give it under `wasm.config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsSpec>,
    /// For a `flavor` policy: of the flavors it answers, those each pod
    /// set may use are tried in the order of where the `placement` hook
    /// would put its pods (the flavor of the best-scored node first)
    /// instead of the order answered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub order_by_placement: bool,
}

/// A bundle's own unit test: one policy, one input, what it must decide.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestSpec {
    pub name: String,
    pub policy: String,
    /// The hook's request (as in the plugin ABI); omitted fields take defaults.
    #[serde(default)]
    pub input: serde_json::Value,
    pub expect: Expect,
}

/// Expected result; only the fields given are checked.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<bool>,
    /// The denial reason contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_contains: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// weight: one per workload; placement: one per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavors: Option<Vec<String>>,
    /// The evaluation fails (with an error of this kind, e.g. `timeout`, `trap`, `cel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleMeta {
    pub name: String,
    #[serde(default)]
    pub version: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleSpecBody {
    /// A tenant bundle: only `weight` (and `admission`) policies, for this namespace's workloads, under stricter limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default)]
    pub policies: Vec<PolicySpec>,
    #[serde(default)]
    pub tests: Vec<TestSpec>,
}

/// `bundle.yaml`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BundleSpec {
    pub api_version: String,
    pub kind: String,
    pub metadata: BundleMeta,
    pub spec: BundleSpecBody,
}
