//! Policy bundles (DESIGN §4): `bundle.yaml` plus the WebAssembly modules
//! it names, from a directory or a ConfigMap, through one loader.
//!
//! [`load`] runs the whole pipeline but the swap: parse → validate →
//! compile (CEL programs, WASM modules shared by digest) → run the bundle's
//! own tests. Every error names the bundle source, the policy and the field
//! (and line/column for CEL) and says what to do. Nothing here touches
//! scheduler state; the engine evaluates what this module builds, and the
//! reloader decides when a loaded bundle replaces the one in force.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::cel::{self, CelLimits, CelProgram, Params};
use super::view::{Reads, WeightFields};
pub use super::wasm::Hook;
use super::wasm::{Plugin, Runtime};
use arbiter_core::model::load::{self, Source};

/// `apiVersion` of a bundle.
pub const API_VERSION: &str = "arbiter.dev/v1alpha1";
/// Kubernetes refuses ConfigMaps larger than this (data and binaryData together).
pub const CONFIGMAP_LIMIT: usize = 1024 * 1024;
/// The label that marks a ConfigMap as a policy bundle.
pub const CONFIGMAP_LABEL: &str = "arbiter.dev/policy-bundle";

/// `Fail`: an error denies admission (retryably) and counts as a failed
/// decision; `Ignore`: an error allows admission. For the other hooks both
/// fall back to the built-in behaviour for that call (score 0, configured
/// weights, target-utilisation autoscaling, listed flavor order).
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
    /// admission: bool (true allows); weight, fairShare: number; autoscale: integer; flavor: list of flavor names.
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

/// Limits of one policy's evaluations: a plugin call's limits.
pub use super::wasm::Limits;

/// The defaults and ceilings a bundle's `limits` are checked against.
impl Limits {
    pub const PLATFORM: Limits = Limits {
        timeout: Duration::from_millis(100),
        memory_bytes: 64 << 20,
    };
    pub const PLATFORM_MAX: Limits = Limits {
        timeout: Duration::from_secs(1),
        memory_bytes: 256 << 20,
    };
    pub const TENANT: Limits = Limits {
        timeout: Duration::from_millis(20),
        memory_bytes: 16 << 20,
    };
    pub const TENANT_MAX: Limits = Limits {
        timeout: Duration::from_millis(50),
        memory_bytes: 32 << 20,
    };
}

/// How a policy decides.
pub enum Program {
    Cel {
        expression: CelProgram,
        message: Option<CelProgram>,
        retryable: bool,
    },
    Wasm {
        plugin: Arc<Plugin>,
        module: String,
        /// What a `weight` request sends it (all unless the module declares less).
        weight_fields: WeightFields,
    },
}

/// One checked, compiled policy.
pub struct Policy {
    pub name: String,
    pub hook: Hook,
    pub matches: Match,
    pub program: Program,
    pub params: serde_json::Value,
    pub cel_params: Params,
    pub failure_policy: FailurePolicy,
    pub mode: Mode,
    pub limits: Limits,
}

impl Policy {
    pub fn language(&self) -> &'static str {
        match self.program {
            Program::Cel { .. } => "cel",
            Program::Wasm { .. } => "wasm",
        }
    }
    /// Can an answer be reused for an identical input later? True for a CEL
    /// policy that does not name `now`: CEL is a pure function of its
    /// variables, and `params` are fixed for the bundle's life. A WASM
    /// plugin's request always carries `now`, so its answers are never reused.
    pub fn reusable(&self) -> bool {
        match &self.program {
            Program::Cel {
                expression,
                message,
                ..
            } => !expression.names("now") && !message.as_ref().is_some_and(|m| m.names("now")),
            Program::Wasm { .. } => false,
        }
    }
    /// The context views an evaluation reads: for CEL, those its
    /// expressions name; for WASM, every one, but for a `weight` plugin
    /// only the maps it declares (`arbiter_weight_fields`).
    pub fn reads(&self) -> Reads {
        match &self.program {
            Program::Cel {
                expression,
                message,
                ..
            } => {
                let names =
                    |v: &str| expression.names(v) || message.as_ref().is_some_and(|m| m.names(v));
                let reads_field = |v: &str, f: &str| {
                    expression.reads_field(v, f)
                        || message.as_ref().is_some_and(|m| m.reads_field(v, f))
                };
                Reads {
                    queue: names("queue"),
                    cluster_queue: names("clusterQueue"),
                    tenant: names("tenant"),
                    cohort: names("cohort"),
                    quotas: reads_field("clusterQueue", "nominal")
                        || reads_field("clusterQueue", "usage"),
                }
            }
            Program::Wasm { weight_fields, .. } if self.hook == Hook::Weight => {
                weight_fields.reads()
            }
            Program::Wasm { .. } => Reads::ALL,
        }
    }

    /// Does it apply to a workload of `namespace`/`kind` in `cluster_queue`?
    pub fn applies_to(&self, namespace: &str, kind: &str, cluster_queue: &str) -> bool {
        let m = &self.matches;
        (m.namespaces.is_empty() || m.namespaces.iter().any(|n| n == namespace))
            && (m.kinds.is_empty() || m.kinds.iter().any(|k| k == kind))
            && (m.cluster_queues.is_empty() || m.cluster_queues.iter().any(|c| c == cluster_queue))
    }
}

/// A loaded bundle: checked, compiled and tested.
pub struct Bundle {
    pub name: String,
    pub version: String,
    /// sha256 over `bundle.yaml` and every module, in name order.
    pub digest: String,
    pub tenant: Option<String>,
    pub policies: Vec<Policy>,
    pub tests: Vec<TestSpec>,
    /// Where it came from (a directory, a ConfigMap).
    pub source: String,
}

impl Bundle {
    pub fn policy(&self, name: &str) -> Option<&Policy> {
        self.policies.iter().find(|p| p.name == name)
    }
    /// An empty bundle: Kueue's behaviour.
    pub fn empty(name: &str) -> Bundle {
        Bundle {
            name: name.into(),
            version: String::new(),
            digest: String::new(),
            tenant: None,
            policies: Vec::new(),
            tests: Vec::new(),
            source: String::new(),
        }
    }
}

/// Why a bundle was not loaded. The message names the source, the policy and the field.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{at}: cannot read {file}: {error}; check the path and permissions")]
    Read {
        at: String,
        file: String,
        error: std::io::Error,
    },
    #[error("{at}: {message}")]
    Invalid { at: String, message: String },
    /// bundle.yaml does not decode; the message names the file and field.
    #[error("{0}")]
    Decode(String),
    #[error("{at}: policy {policy}: {message}")]
    Policy {
        at: String,
        policy: String,
        message: String,
    },
    #[error("{at}: {failed} of {total} bundle tests failed:\n{details}")]
    Tests {
        at: String,
        failed: usize,
        total: usize,
        details: String,
    },
}

/// The files of a bundle: a directory or a ConfigMap's `data`/`binaryData`.
pub enum Files<'a> {
    Dir(&'a Path),
    ConfigMap(&'a ConfigMap),
}

impl Files<'_> {
    fn describe(&self) -> String {
        match self {
            Files::Dir(dir) => dir.display().to_string(),
            Files::ConfigMap(cm) => format!(
                "ConfigMap {}/{}",
                cm.metadata.namespace.as_deref().unwrap_or("default"),
                cm.metadata.name.as_deref().unwrap_or("?")
            ),
        }
    }
    fn read(&self, name: &str) -> Result<Vec<u8>, BundleError> {
        let source = self.describe();
        match self {
            Files::Dir(dir) => {
                let file: PathBuf = dir.join(name);
                fs::read(&file).map_err(|error| BundleError::Read {
                    at: source,
                    file: file.display().to_string(),
                    error,
                })
            }
            Files::ConfigMap(cm) => {
                if let Some(text) = cm.data.as_ref().and_then(|d| d.get(name)) {
                    return Ok(text.clone().into_bytes());
                }
                if let Some(bytes) = cm.binary_data.as_ref().and_then(|d| d.get(name)) {
                    return Ok(bytes.0.clone());
                }
                Err(BundleError::Invalid {
                    at: source,
                    message: format!(
                        "has no key {name:?} in data or binaryData; add it (wasm modules go in binaryData)"
                    ),
                })
            }
        }
    }
}

/// The size a ConfigMap has against the API server's 1 MiB limit.
pub fn configmap_size(cm: &ConfigMap) -> usize {
    let data: usize = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    let binary: usize = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.0.len())
        .sum();
    data + binary
}

/// Reads a ConfigMap manifest (YAML) from a file, for `--policies cm.yaml` and tests.
pub fn read_configmap(file: &Path) -> Result<ConfigMap, BundleError> {
    let source = file.display().to_string();
    let text = fs::read_to_string(file).map_err(|error| BundleError::Read {
        at: source.clone(),
        file: source.clone(),
        error,
    })?;
    serde_yaml_ng::from_str(&text).map_err(|e| BundleError::Invalid {
        at: source,
        message: format!("not a ConfigMap: {e}"),
    })
}

/// How to load a bundle.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Load it as this namespace's tenant bundle (its `spec.tenant` must be absent or equal).
    pub tenant: Option<String>,
    /// Run the bundle's tests and refuse it if one fails (always, but for `arbiter policy test`).
    pub run_tests: bool,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            tenant: None,
            run_tests: true,
        }
    }
}

/// Loads a bundle from a directory, or from a file holding a ConfigMap manifest.
pub fn load_path(
    path: &Path,
    runtime: &Runtime,
    options: &LoadOptions,
) -> Result<Bundle, BundleError> {
    if path.is_file() {
        let cm = read_configmap(path)?;
        load(Files::ConfigMap(&cm), runtime, options)
    } else if path.is_dir() {
        load(Files::Dir(path), runtime, options)
    } else {
        Err(BundleError::Invalid {
            at: path.display().to_string(),
            message: "is neither a bundle directory nor a ConfigMap file; give a directory holding bundle.yaml".into(),
        })
    }
}

/// Parse → validate → compile → test. The result is ready to swap in.
pub fn load(
    files: Files<'_>,
    runtime: &Runtime,
    options: &LoadOptions,
) -> Result<Bundle, BundleError> {
    let source = files.describe();
    let invalid = |message: String| BundleError::Invalid {
        at: source.clone(),
        message,
    };
    if let Files::ConfigMap(cm) = &files {
        let size = configmap_size(cm);
        if size > CONFIGMAP_LIMIT {
            return Err(invalid(format!(
                "is {size} bytes; Kubernetes refuses ConfigMaps over 1 MiB ({CONFIGMAP_LIMIT} bytes). \
                 Shrink the modules (release build, opt-level \"s\", strip) or mount the bundle as a directory from another volume"
            )));
        }
    }
    let raw = files.read("bundle.yaml")?;
    let spec = parse(&raw, &source)?;
    let mut hasher = Sha256::new();
    hasher.update(&raw);
    let mut modules: BTreeMap<String, Arc<Plugin>> = BTreeMap::new();
    let mut policies = Vec::with_capacity(spec.spec.policies.len());
    let tenant = match (&options.tenant, &spec.spec.tenant) {
        (Some(forced), Some(own)) if forced != own => {
            return Err(invalid(format!(
                "bundle.yaml says spec.tenant: {own}, but it is loaded as the tenant bundle of {forced}; make them agree"
            )))
        }
        (Some(forced), _) => Some(forced.clone()),
        (None, own) => own.clone(),
    };
    let mut names = BTreeSet::new();
    for p in &spec.spec.policies {
        let fail = |message: String| BundleError::Policy {
            at: source.clone(),
            policy: p.name.clone(),
            message,
        };
        if p.name.is_empty() {
            return Err(invalid(
                "a policy has an empty name; give every policy a unique name".into(),
            ));
        }
        if !names.insert(p.name.clone()) {
            return Err(fail(
                "the name is used twice; policy names must be unique in a bundle".into(),
            ));
        }
        if let Some(ns) = &tenant {
            if !matches!(p.hook, Hook::Weight | Hook::Admission) {
                return Err(fail(format!(
                    "hook {} is not allowed in a tenant bundle (spec.tenant: {ns}); tenant bundles hold only weight and admission policies",
                    p.hook
                )));
            }
            if p.matches.namespaces.iter().any(|n| n != ns) {
                return Err(fail(format!(
                    "match.namespaces names another namespace; a tenant bundle applies only to {ns}"
                )));
            }
        }
        let (default, max) = if tenant.is_some() {
            (Limits::TENANT, Limits::TENANT_MAX)
        } else {
            (Limits::PLATFORM, Limits::PLATFORM_MAX)
        };
        let limits = limits(p.limits.as_ref(), default, max).map_err(&fail)?;
        let params = p
            .config
            .clone()
            .or_else(|| p.wasm.as_ref().and_then(|w| w.config.clone()))
            .unwrap_or(serde_json::Value::Object(Default::default()));
        let program = match (&p.cel, &p.wasm) {
            (Some(c), None) => compile_cel(p.hook, c, &params).map_err(&fail)?,
            (None, Some(w)) => {
                let plugin = match modules.get(&w.module) {
                    Some(plugin) => plugin.clone(),
                    None => {
                        if w.module.contains("..") || w.module.starts_with('/') {
                            return Err(fail(format!(
                                "wasm.module {:?} must be a file name inside the bundle",
                                w.module
                            )));
                        }
                        let bytes = files.read(&w.module)?;
                        let plugin = runtime
                            .load(&w.module, &bytes)
                            .map_err(|e| fail(format!("wasm.module {}: {e}", w.module)))?;
                        modules.insert(w.module.clone(), plugin.clone());
                        plugin
                    }
                };
                if let Some(pin) = &w.sha256 {
                    if !pin.eq_ignore_ascii_case(plugin.digest()) {
                        return Err(fail(format!(
                            "wasm.sha256 pins {pin} but {} has sha256 {}; update the pin if the module changed on purpose",
                            w.module,
                            plugin.digest()
                        )));
                    }
                }
                if !plugin.exports_hook(p.hook) {
                    return Err(fail(format!(
                        "{} does not export {}, which hook {} needs",
                        w.module,
                        p.hook.export_name(),
                        p.hook
                    )));
                }
                let weight_fields = match plugin.weight_fields() {
                    Some(names) => WeightFields::parse(names).map_err(|e| {
                        fail(format!(
                            "wasm.module {}: its arbiter_weight_fields {e}; fix the \
                             declaration in the plugin (plugin-sdk/ABI.md)",
                            w.module
                        ))
                    })?,
                    None => WeightFields::ALL,
                };
                Program::Wasm {
                    plugin,
                    module: w.module.clone(),
                    weight_fields,
                }
            }
            (Some(_), Some(_)) => {
                return Err(fail("has both cel and wasm; give exactly one".into()))
            }
            (None, None) => return Err(fail("has neither cel nor wasm; give exactly one".into())),
        };
        policies.push(Policy {
            name: p.name.clone(),
            hook: p.hook,
            matches: p.matches.clone(),
            program,
            cel_params: Params::new(&params),
            params,
            failure_policy: p.failure_policy,
            mode: p.mode,
            limits,
        });
    }
    for (name, plugin) in &modules {
        hasher.update(name.as_bytes());
        hasher.update(plugin.digest().as_bytes());
    }
    for t in &spec.spec.tests {
        if !names.contains(&t.policy) {
            return Err(invalid(format!(
                "test {} names policy {}, which the bundle does not have",
                t.name, t.policy
            )));
        }
    }
    let bundle = Bundle {
        name: spec.metadata.name.clone(),
        version: spec.metadata.version.clone(),
        digest: hex(&hasher.finalize()),
        tenant,
        policies,
        tests: spec.spec.tests.clone(),
        source: source.clone(),
    };
    if !options.run_tests {
        return Ok(bundle);
    }
    let results = super::test::run(&bundle);
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| r.failure.as_ref().map(|f| format!("  {}: {f}", r.name)))
        .collect();
    if !failed.is_empty() {
        return Err(BundleError::Tests {
            at: source,
            failed: failed.len(),
            total: results.len(),
            details: failed.join("\n"),
        });
    }
    Ok(bundle)
}

fn parse(raw: &[u8], source: &str) -> Result<BundleSpec, BundleError> {
    let invalid = |message: String| BundleError::Invalid {
        at: source.to_string(),
        message,
    };
    let text =
        std::str::from_utf8(raw).map_err(|_| invalid("bundle.yaml is not UTF-8 text".into()))?;
    let value: serde_json::Value = serde_yaml_ng::from_str(text)
        .map_err(|e| invalid(format!("bundle.yaml is not valid YAML: {e}")))?;
    let at = Source {
        file: Path::new(source).join("bundle.yaml"),
        document: 1,
    };
    let mut warnings = Vec::new();
    let spec: BundleSpec =
        load::decode(&value, &at, &mut warnings).map_err(|e| BundleError::Decode(e.to_string()))?;
    if let Some(w) = warnings.first() {
        return Err(BundleError::Decode(w.to_string()));
    }
    if spec.api_version != API_VERSION || spec.kind != "PolicyBundle" {
        return Err(invalid(format!(
            "bundle.yaml is {} {}; expected apiVersion {API_VERSION}, kind PolicyBundle",
            spec.api_version, spec.kind
        )));
    }
    if spec.metadata.name.is_empty() {
        return Err(invalid(
            "bundle.yaml: metadata.name is empty; name the bundle".into(),
        ));
    }
    Ok(spec)
}

fn limits(spec: Option<&LimitsSpec>, default: Limits, max: Limits) -> Result<Limits, String> {
    let mut limits = default;
    if let Some(spec) = spec {
        if let Some(ms) = spec.timeout_ms {
            let timeout = Duration::from_millis(ms);
            if ms == 0 || timeout > max.timeout {
                return Err(format!(
                    "limits.timeoutMs {ms} must be between 1 and {}",
                    max.timeout.as_millis()
                ));
            }
            limits.timeout = timeout;
        }
        if let Some(mib) = spec.memory_mi_b {
            let bytes = (mib as usize).saturating_mul(1 << 20);
            if mib == 0 || bytes > max.memory_bytes {
                return Err(format!(
                    "limits.memoryMiB {mib} must be between 1 and {}",
                    max.memory_bytes >> 20
                ));
            }
            limits.memory_bytes = bytes;
        }
    }
    Ok(limits)
}

/// Compiles a CEL policy, its scalar `params` folded in.
fn compile_cel(hook: Hook, spec: &CelSpec, params: &serde_json::Value) -> Result<Program, String> {
    let limits = CelLimits::default();
    let mut expression =
        cel::compile(&spec.expression, &limits).map_err(|e| format!("cel.expression: {e}"))?;
    expression.fold_params(params);
    let message = match &spec.message_expression {
        Some(m) if hook == Hook::Admission => {
            let mut message =
                cel::compile(m, &limits).map_err(|e| format!("cel.messageExpression: {e}"))?;
            message.fold_params(params);
            Some(message)
        }
        Some(_) => {
            return Err(format!(
                "cel.messageExpression is only for admission policies, not {hook}"
            ))
        }
        None => None,
    };
    if spec.retryable.is_some() && hook != Hook::Admission {
        return Err(format!(
            "cel.retryable is only for admission policies, not {hook}"
        ));
    }
    Ok(Program::Cel {
        expression,
        message,
        retryable: spec.retryable.unwrap_or(true),
    })
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

impl super::reload::Loaded for Bundle {
    fn identity(&self) -> super::reload::Identity {
        super::reload::Identity {
            name: self.name.clone(),
            version: self.version.clone(),
            digest: self.digest.clone(),
        }
    }
}
