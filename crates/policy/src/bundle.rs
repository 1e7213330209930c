//! Policy bundles (DESIGN §4): `bundle.yaml` plus the WebAssembly modules
//! it names, from a directory or a ConfigMap, through one loader.
//!
//! [`load`] runs the whole pipeline but the swap: parse → validate →
//! compile (CEL programs, WASM modules shared by digest) → run the bundle's
//! own tests (`test`). Every error names the bundle source, the policy and
//! the field (and line/column for CEL) and says what to do. It reads the
//! wire types of `spec` and builds the checked types of `compiled` (both
//! re-exported here, so `bundle::Policy` and `bundle::PolicySpec` keep
//! working). Nothing here touches scheduler state; the engine evaluates what
//! this module builds, and the reloader decides when a loaded bundle
//! replaces the one in force. Called by the CLI, `sources` and whatever
//! drives a `reload::Reloadable`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use sha2::{Digest, Sha256};

use super::cel::{self, CelLimits, Params};
pub use super::compiled::{Bundle, Policy, Program};
pub use super::spec::{
    BundleMeta, BundleSpec, BundleSpecBody, CelSpec, Expect, FailurePolicy, LimitsSpec, Match,
    Mode, PolicySpec, TestSpec, WasmSpec, API_VERSION,
};
use super::test;
use super::view::WeightFields;
pub use super::wasm::Hook;
use super::wasm::{Plugin, Runtime};
use arbiter_core::model::load::{self, Source};

/// Kubernetes refuses ConfigMaps larger than this (data and binaryData together).
pub const CONFIGMAP_LIMIT: usize = 1024 * 1024;
/// The label that marks a ConfigMap as a policy bundle.
pub const CONFIGMAP_LABEL: &str = "arbiter.dev/policy-bundle";

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
    let results = test::run(&bundle);
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
