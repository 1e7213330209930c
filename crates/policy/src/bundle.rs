//! Policy bundles (docs/design.md §4): `bundle.yaml` plus the WebAssembly modules
//! it names, from a directory or a ConfigMap, through one loader.
//!
//! [`load`](fn@load) runs the whole pipeline but the swap: parse → validate →
//! compile (CEL programs, WASM modules shared by digest) → run the bundle's
//! own tests (`test`). A directory's files are read only if they resolve
//! (symlinks followed) to regular files inside the directory, and only up
//! to their caps ([`MODULE_LIMIT`], [`TENANT_MODULE_LIMIT`],
//! [`BUNDLE_YAML_LIMIT`], [`CONFIGMAP_FILE_LIMIT`]); a module's `sha256`
//! pin is checked on its bytes before it is compiled. Every error names the bundle source, the policy and
//! the field (and line/column for CEL) and says what to do. It reads the
//! wire types of `spec` and builds the checked types of `compiled` (both
//! re-exported here, so `bundle::Policy` and `bundle::PolicySpec` keep
//! working). Nothing here touches scheduler state; the engine evaluates what
//! this module builds, and the reloader decides when a loaded bundle
//! replaces the one in force. Called by the CLI, `sources` and whatever
//! drives a `reload::Reloadable`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use sha2::{Digest, Sha256};

use super::bounded::{self, Refusal};
use arbiter_core::cel_bounds;

use super::cel::{self, CelLimits, Params};
mod compile;

pub use super::compiled::{Bundle, Policy, Program};
use super::hooks;
pub use super::spec::{
    BundleMeta, BundleSpec, BundleSpecBody, CelSpec, Expect, FailurePolicy, LimitsSpec, Match,
    Mode, PolicySpec, TestSpec, WasmSpec, API_VERSION,
};
use super::test;
use super::view::WeightFields;
pub use super::wasm::Hook;
use super::wasm::{LoadLimits, Plugin, Runtime};
use arbiter_core::model::load::{self, Source};
use arbiter_core::model::yaml::UniqueKeys;
use compile::{policy_error, PolicyCompiler};

/// Kubernetes refuses ConfigMaps larger than this (data and binaryData together).
pub const CONFIGMAP_LIMIT: usize = 1024 * 1024;
/// The largest WebAssembly module a platform bundle may hold (compiling
/// takes about a hundred times a module's size in memory).
pub const MODULE_LIMIT: u64 = 8 << 20;
/// The largest WebAssembly module a tenant bundle may hold.
pub const TENANT_MODULE_LIMIT: u64 = 2 << 20;
/// The largest `bundle.yaml`.
pub const BUNDLE_YAML_LIMIT: u64 = 1 << 20;
/// The largest ConfigMap manifest file read by [`read_configmap`]: room for
/// [`CONFIGMAP_LIMIT`] bytes of data in base64 and YAML.
pub const CONFIGMAP_FILE_LIMIT: u64 = 2 << 20;
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
    /// A file that is not read: nothing of its content is shown.
    #[error("{at}: {file}: {problem}")]
    File {
        at: String,
        /// `bundle.yaml`, `policy P: wasm.module M`, or the ConfigMap file.
        file: String,
        problem: FileProblem,
    },
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

/// Why a bundle's file was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileProblem {
    #[error("the path leads outside the bundle directory (an absolute path, `..` or a symlink pointing out); bundle files must be regular files inside the bundle directory")]
    Outside,
    #[error("is {0}, not a regular file; put the file itself in the bundle")]
    NotRegular(&'static str),
    #[error("{}, over the cap of {} bytes for {}; {}", size_text(*size), cap.bytes(), cap.what(), cap.fix())]
    TooLarge { size: Option<u64>, cap: FileCap },
}

fn size_text(size: Option<u64>) -> String {
    match size {
        Some(size) => format!("is {size} bytes"),
        None => "grew while it was read".to_string(),
    }
}

/// Which cap a file of a bundle is read under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileCap {
    /// [`BUNDLE_YAML_LIMIT`]
    BundleYaml,
    /// [`MODULE_LIMIT`]
    Module,
    /// [`TENANT_MODULE_LIMIT`]
    TenantModule,
    /// [`CONFIGMAP_FILE_LIMIT`]
    ConfigMapFile,
}

impl FileCap {
    pub fn bytes(self) -> u64 {
        match self {
            FileCap::BundleYaml => BUNDLE_YAML_LIMIT,
            FileCap::Module => MODULE_LIMIT,
            FileCap::TenantModule => TENANT_MODULE_LIMIT,
            FileCap::ConfigMapFile => CONFIGMAP_FILE_LIMIT,
        }
    }

    fn what(self) -> &'static str {
        match self {
            FileCap::BundleYaml => "bundle.yaml",
            FileCap::Module => "a module of a platform bundle",
            FileCap::TenantModule => "a module of a tenant bundle",
            FileCap::ConfigMapFile => "a ConfigMap manifest",
        }
    }

    fn fix(self) -> &'static str {
        match self {
            FileCap::BundleYaml => "split the policies into several bundles",
            FileCap::Module => "shrink the module (release build, opt-level \"s\", strip, wasm-opt)",
            FileCap::TenantModule => "shrink the module (release build, opt-level \"s\", strip, wasm-opt) or ask the platform team to ship it in a platform bundle",
            FileCap::ConfigMapFile => "Kubernetes refuses ConfigMaps over 1 MiB anyway; shrink the modules or mount the bundle as a directory",
        }
    }
}

/// Reads a regular file up to its cap; `file` names it in the error.
fn read_capped(path: &Path, cap: FileCap, at: &str, file: &str) -> Result<Vec<u8>, BundleError> {
    bounded::read(path, cap.bytes()).map_err(|refusal| {
        let problem = match refusal {
            Refusal::Io(error) => {
                return BundleError::Read {
                    at: at.to_string(),
                    file: path.display().to_string(),
                    error,
                }
            }
            Refusal::NotRegular(kind) => FileProblem::NotRegular(kind),
            Refusal::TooLarge { size } => FileProblem::TooLarge { size, cap },
        };
        BundleError::File {
            at: at.to_string(),
            file: file.to_string(),
            problem,
        }
    })
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
    /// The file `name`, at most `cap` bytes; `file` names it in errors.
    /// In a directory, only a relative path that resolves (symlinks
    /// followed) to a regular file inside the directory is read.
    fn read(&self, name: &str, cap: FileCap, file: &str) -> Result<Vec<u8>, BundleError> {
        let source = self.describe();
        match self {
            Files::Dir(dir) => {
                let outside = || BundleError::File {
                    at: source.clone(),
                    file: file.to_string(),
                    problem: FileProblem::Outside,
                };
                let relative = Path::new(name);
                if !relative
                    .components()
                    .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
                {
                    return Err(outside());
                }
                let path = dir.join(relative);
                let io = |error| BundleError::Read {
                    at: source.clone(),
                    file: path.display().to_string(),
                    error,
                };
                let root = fs::canonicalize(dir).map_err(&io)?;
                let resolved = fs::canonicalize(&path).map_err(&io)?;
                if !resolved.starts_with(&root) {
                    return Err(outside());
                }
                read_capped(&resolved, cap, &source, file)
            }
            Files::ConfigMap(cm) => {
                let found = cm
                    .data
                    .as_ref()
                    .and_then(|d| d.get(name))
                    .map(|text| text.as_bytes())
                    .or_else(|| {
                        cm.binary_data
                            .as_ref()
                            .and_then(|d| d.get(name))
                            .map(|bytes| bytes.0.as_slice())
                    });
                if let Some(bytes) = found {
                    let size = bytes.len() as u64;
                    if size > cap.bytes() {
                        return Err(BundleError::File {
                            at: source,
                            file: file.to_string(),
                            problem: FileProblem::TooLarge {
                                size: Some(size),
                                cap,
                            },
                        });
                    }
                    return Ok(bytes.to_vec());
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
    let bytes = read_capped(file, FileCap::ConfigMapFile, &source, &source)?;
    let text = String::from_utf8(bytes).map_err(|_| BundleError::Invalid {
        at: source.clone(),
        message: "is not UTF-8 text; give a ConfigMap manifest in YAML".into(),
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
        check_configmap_size(cm).map_err(invalid)?;
    }
    let raw = files.read("bundle.yaml", FileCap::BundleYaml, "bundle.yaml")?;
    let spec = parse(&raw, &source)?;
    // Too many tests are refused before anything is compiled.
    let tenant_bundle = options.tenant.is_some() || spec.spec.tenant.is_some();
    if let Some(message) = test::too_many(spec.spec.tests.len(), tenant_bundle) {
        return Err(invalid(message));
    }
    let tenant = bundle_tenant(options, &spec).map_err(invalid)?;
    let mut compiler = PolicyCompiler {
        files: &files,
        runtime,
        source: &source,
        tenant: tenant.as_deref(),
        modules: BTreeMap::new(),
    };
    let mut names = BTreeSet::new();
    let mut policies = Vec::with_capacity(spec.spec.policies.len());
    for p in &spec.spec.policies {
        if p.name.is_empty() {
            return Err(invalid(
                "a policy has an empty name; give every policy a unique name".into(),
            ));
        }
        if !names.insert(p.name.clone()) {
            return Err(policy_error(
                &source,
                p,
                "the name is used twice; policy names must be unique in a bundle".into(),
            ));
        }
        policies.push(compiler.compile(p)?);
    }
    tests_name_policies(&spec, &names).map_err(invalid)?;
    let bundle = Bundle {
        name: spec.metadata.name.clone(),
        version: spec.metadata.version.clone(),
        digest: digest(&raw, &compiler.modules),
        tenant,
        policies,
        tests: spec.spec.tests.clone(),
        source: source.clone(),
    };
    // Checked whether or not the tests run now: `arbiter policy test` runs them next.
    if let Some(message) = test::over_budget(&bundle) {
        return Err(invalid(message));
    }
    if options.run_tests {
        run_tests(&bundle)?;
    }
    Ok(bundle)
}

/// Why a ConfigMap is too large for the API server to hold, if it is.
fn check_configmap_size(cm: &ConfigMap) -> Result<(), String> {
    let size = configmap_size(cm);
    if size > CONFIGMAP_LIMIT {
        return Err(format!(
            "is {size} bytes; Kubernetes refuses ConfigMaps over 1 MiB ({CONFIGMAP_LIMIT} bytes). \
             Shrink the modules (release build, opt-level \"s\", strip) or mount the bundle as a directory from another volume"
        ));
    }
    Ok(())
}

/// The namespace the bundle is a tenant bundle of: the one it is loaded
/// as, which its own `spec.tenant` must then agree with, else its own.
fn bundle_tenant(options: &LoadOptions, spec: &BundleSpec) -> Result<Option<String>, String> {
    match (&options.tenant, &spec.spec.tenant) {
        (Some(forced), Some(own)) if forced != own => Err(format!(
            "bundle.yaml says spec.tenant: {own}, but it is loaded as the tenant bundle of {forced}; make them agree"
        )),
        (Some(forced), _) => Ok(Some(forced.clone())),
        (None, own) => Ok(own.clone()),
    }
}

/// Every test names a policy of the bundle (`names`).
fn tests_name_policies(spec: &BundleSpec, names: &BTreeSet<String>) -> Result<(), String> {
    match spec.spec.tests.iter().find(|t| !names.contains(&t.policy)) {
        Some(t) => Err(format!(
            "test {} names policy {}, which the bundle does not have",
            t.name, t.policy
        )),
        None => Ok(()),
    }
}

/// The bundle's digest: sha256 over `bundle.yaml`, then each module's file
/// name and digest, in name order.
fn digest(raw: &[u8], modules: &BTreeMap<String, Arc<Plugin>>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(raw);
    for (name, plugin) in modules {
        hasher.update(name.as_bytes());
        hasher.update(plugin.digest().as_bytes());
    }
    hex(&hasher.finalize())
}

/// Runs the bundle's own tests; any failure refuses the bundle, every
/// failed test named.
fn run_tests(bundle: &Bundle) -> Result<(), BundleError> {
    let results = test::run(bundle);
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| r.failure.as_ref().map(|f| format!("  {}: {f}", r.name)))
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(BundleError::Tests {
        at: bundle.source.clone(),
        failed: failed.len(),
        total: results.len(),
        details: failed.join("\n"),
    })
}

fn parse(raw: &[u8], source: &str) -> Result<BundleSpec, BundleError> {
    let invalid = |message: String| BundleError::Invalid {
        at: source.to_string(),
        message,
    };
    let text =
        std::str::from_utf8(raw).map_err(|_| invalid("bundle.yaml is not UTF-8 text".into()))?;
    // Keys are unique and numbers finite (a `.nan` in `config` is refused,
    // not turned into null), as in manifests.
    let value = serde_yaml_ng::from_str::<UniqueKeys>(text)
        .map(|v| v.0)
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
    let mut names = vec![
        ("metadata.name".to_string(), &spec.metadata.name),
        ("metadata.version".to_string(), &spec.metadata.version),
    ];
    names.extend(
        spec.spec
            .tenant
            .iter()
            .map(|t| ("spec.tenant".to_string(), t)),
    );
    for (i, p) in spec.spec.policies.iter().enumerate() {
        names.push((format!("spec.policies[{i}].name"), &p.name));
        if let Some(w) = &p.wasm {
            names.push((format!("spec.policies[{i}].wasm.module"), &w.module));
        }
    }
    for (i, t) in spec.spec.tests.iter().enumerate() {
        names.push((format!("spec.tests[{i}].name"), &t.name));
    }
    for (field, name) in names {
        printable(&field, name).map_err(invalid)?;
    }
    Ok(spec)
}

/// Longest name `bundle.yaml` may give (a bundle, version, policy, test, module).
const MAX_NAME_BYTES: usize = 253;

/// A name shown in terminals, reports, logs and Events must be plain text.
fn printable(field: &str, name: &str) -> Result<(), String> {
    if !crate::text::is_clean(name) {
        Err(format!(
            "bundle.yaml: {field} {name:?} holds a control or bidi character; names are shown in terminals, reports and Events, so give printable text"
        ))
    } else if name.len() > MAX_NAME_BYTES {
        Err(format!(
            "bundle.yaml: {field} is {} bytes, over the cap of {MAX_NAME_BYTES}; give a shorter name",
            name.len()
        ))
    } else {
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::OnceLock;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::ByteString;

    use super::*;

    /// A plugin whose `arbiter_weight` always answers `{"scores":[1]}`.
    const WEIGHT_WAT: &str = r#"(module
      (memory (export "memory") 1)
      (data (i32.const 1024) "{\"scores\":[1]}")
      (func (export "arbiter_abi_version") (result i32) i32.const 1)
      (func (export "arbiter_alloc") (param i32) (result i32) i32.const 4096)
      (func (export "arbiter_weight") (param i32 i32) (result i64) i64.const 4398046511118))"#;

    const SOURCE: &str = "ConfigMap platform/rules";

    fn runtime() -> &'static Runtime {
        static RUNTIME: OnceLock<Runtime> = OnceLock::new();
        RUNTIME.get_or_init(|| Runtime::new().expect("the WebAssembly runtime starts"))
    }

    /// bundle.yaml named `t`, version 1, with these `spec` lines.
    fn yaml(spec: &str) -> String {
        format!(
            "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: t, version: \"1\"}}\nspec:\n{spec}"
        )
    }

    /// The ConfigMap `platform/rules` holding `bundle.yaml` and binary files.
    fn configmap(bundle_yaml: &str, binary: &[(&str, Vec<u8>)]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("rules".into()),
                namespace: Some("platform".into()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("bundle.yaml".into(), bundle_yaml.into())])),
            binary_data: Some(
                binary
                    .iter()
                    .map(|(name, bytes)| (name.to_string(), ByteString(bytes.clone())))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    fn load_with(
        bundle_yaml: &str,
        binary: &[(&str, Vec<u8>)],
        options: &LoadOptions,
    ) -> Result<Bundle, BundleError> {
        load(
            Files::ConfigMap(&configmap(bundle_yaml, binary)),
            runtime(),
            options,
        )
    }

    fn loaded(spec: &str) -> Bundle {
        load_with(&yaml(spec), &[], &LoadOptions::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn error_with(bundle_yaml: &str, binary: &[(&str, Vec<u8>)], options: &LoadOptions) -> String {
        match load_with(bundle_yaml, binary, options) {
            Ok(_) => panic!("the bundle loaded but should not have"),
            Err(e) => e.to_string(),
        }
    }

    /// The error of a bundle with these `spec` lines, loaded as a platform bundle.
    fn error(spec: &str) -> String {
        error_with(&yaml(spec), &[], &LoadOptions::default())
    }

    fn as_tenant(namespace: &str) -> LoadOptions {
        LoadOptions {
            tenant: Some(namespace.into()),
            run_tests: true,
        }
    }

    fn weight_module() -> Vec<u8> {
        wat::parse_str(WEIGHT_WAT).expect("valid WAT")
    }

    fn sha256_hex(bytes: &[u8]) -> String {
        hex(&Sha256::digest(bytes))
    }

    #[test]
    fn a_good_bundle_is_parsed_validated_compiled_and_tested() {
        let b = loaded(
            "  policies:\n  \
             - name: cap\n    hook: admission\n    match: {namespaces: [research]}\n    \
               cel: {expression: 'workload.gpus <= params.max', messageExpression: \"'over ' + string(params.max)\", retryable: false}\n    \
               config: {max: 8}\n    failurePolicy: Ignore\n    mode: DryRun\n    limits: {timeoutMs: 250, memoryMiB: 128}\n  \
             - {name: by-priority, hook: weight, cel: {expression: 'double(workload.priority)'}}\n  \
             tests:\n  \
             - {name: sixteen-denied, policy: cap, input: {workload: {gpus: 16}}, expect: {allowed: false, reasonContains: 'over 8', retryable: false}}\n  \
             - {name: scored, policy: by-priority, input: {workloads: [{priority: 3}]}, expect: {scores: [3.0]}}\n",
        );
        assert_eq!((b.name.as_str(), b.version.as_str()), ("t", "1"));
        assert_eq!(b.source, SOURCE);
        assert_eq!(b.tenant, None);
        assert_eq!(b.tests.len(), 2);
        let names: Vec<(&str, Hook, &str)> = b
            .policies
            .iter()
            .map(|p| (p.name.as_str(), p.hook, p.language()))
            .collect();
        assert_eq!(
            names,
            [
                ("cap", Hook::Admission, "cel"),
                ("by-priority", Hook::Weight, "cel")
            ]
        );
        let cap = b.policy("cap").expect("cap is there");
        assert_eq!(cap.matches.namespaces, ["research"]);
        assert_eq!(cap.failure_policy, FailurePolicy::Ignore);
        assert_eq!(cap.mode, Mode::DryRun);
        assert_eq!(
            cap.limits,
            Limits {
                timeout: Duration::from_millis(250),
                memory_bytes: 128 << 20,
            }
        );
        assert_eq!(cap.params, serde_json::json!({"max": 8}));
        assert!(matches!(
            &cap.program,
            Program::Cel {
                message: Some(_),
                retryable: false,
                ..
            }
        ));
        let by_priority = b.policy("by-priority").expect("by-priority is there");
        assert_eq!(by_priority.failure_policy, FailurePolicy::Fail);
        assert_eq!(by_priority.mode, Mode::Enforce);
        // The platform defaults: 100 ms, 64 MiB.
        assert_eq!(
            by_priority.limits,
            Limits {
                timeout: Duration::from_millis(100),
                memory_bytes: 64 << 20,
            }
        );
        assert_eq!(by_priority.params, serde_json::json!({}));
    }

    #[test]
    fn the_digest_is_the_sha256_of_bundle_yaml_and_its_modules() {
        let text = yaml("  policies:\n  - {name: p, hook: admission, cel: {expression: 'true'}}\n");
        let cel_only = load_with(&text, &[], &LoadOptions::default()).unwrap();
        assert_eq!(cel_only.digest, sha256_hex(text.as_bytes()));
        let changed =
            yaml("  policies:\n  - {name: p, hook: admission, cel: {expression: 'false'}}\n");
        assert_ne!(
            load_with(&changed, &[], &LoadOptions::default())
                .unwrap()
                .digest,
            cel_only.digest
        );

        let module = weight_module();
        let text = yaml("  policies:\n  - {name: w, hook: weight, wasm: {module: w.wasm}}\n");
        let with_module = load_with(
            &text,
            &[("w.wasm", module.clone())],
            &LoadOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut whole = text.into_bytes();
        whole.extend(b"w.wasm");
        whole.extend(sha256_hex(&module).as_bytes());
        assert_eq!(with_module.digest, sha256_hex(&whole));
    }

    #[test]
    fn a_module_named_twice_is_loaded_once_and_may_be_pinned_in_any_case() {
        let module = weight_module();
        let pin = sha256_hex(&module).to_uppercase();
        let text = yaml(&format!(
            "  policies:\n  \
             - {{name: a, hook: weight, wasm: {{module: w.wasm, sha256: {pin}}}}}\n  \
             - {{name: b, hook: weight, wasm: {{module: w.wasm, config: {{boost: 2}}}}}}\n"
        ));
        let b = load_with(&text, &[("w.wasm", module)], &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let plugin = |name: &str| match &b.policy(name).expect("policy is there").program {
            Program::Wasm { plugin, module, .. } => {
                assert_eq!(module, "w.wasm");
                plugin.clone()
            }
            Program::Cel { .. } => panic!("{name} is a CEL policy"),
        };
        assert!(Arc::ptr_eq(&plugin("a"), &plugin("b")));
        assert_eq!(b.policy("a").unwrap().language(), "wasm");
        assert_eq!(
            b.policy("b").unwrap().params,
            serde_json::json!({"boost": 2})
        );
    }

    #[test]
    fn a_tenant_bundle_gets_the_tenant_limits_and_its_namespace() {
        let b = load_with(
            &yaml("  policies:\n  - {name: mine, hook: weight, cel: {expression: '1.0'}}\n"),
            &[],
            &as_tenant("team-a"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.tenant.as_deref(), Some("team-a"));
        // The tenant defaults: 20 ms, 16 MiB.
        assert_eq!(
            b.policies[0].limits,
            Limits {
                timeout: Duration::from_millis(20),
                memory_bytes: 16 << 20,
            }
        );
        let own = loaded("  tenant: team-b\n  policies: []\n");
        assert_eq!(own.tenant.as_deref(), Some("team-b"));
    }

    #[test]
    fn parse_errors_name_the_source_and_say_what_is_expected() {
        let not_utf8 = ConfigMap {
            data: None,
            ..configmap("", &[("bundle.yaml", vec![0xff, 0xfe])])
        };
        let e = load(
            Files::ConfigMap(&not_utf8),
            runtime(),
            &LoadOptions::default(),
        )
        .err()
        .expect("refused")
        .to_string();
        assert_eq!(e, format!("{SOURCE}: bundle.yaml is not UTF-8 text"));
        let e = error_with("spec: [unclosed", &[], &LoadOptions::default());
        assert!(
            e.starts_with(&format!("{SOURCE}: bundle.yaml is not valid YAML: ")),
            "{e}"
        );
        let e = error_with(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t}\nspec: {}\n",
            &[],
            &LoadOptions::default(),
        );
        assert_eq!(
            e,
            format!("{SOURCE}: bundle.yaml is v1 ConfigMap; expected apiVersion arbiter.dev/v1alpha1, kind PolicyBundle")
        );
        let e = error_with(
            "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {name: \"\"}\nspec: {}\n",
            &[],
            &LoadOptions::default(),
        );
        assert_eq!(
            e,
            format!("{SOURCE}: bundle.yaml: metadata.name is empty; name the bundle")
        );
    }

    #[test]
    fn a_nan_or_infinite_number_in_bundle_yaml_is_refused_with_its_field() {
        for value in [".nan", ".inf", "-.inf"] {
            let e = error(&format!(
                "  policies:\n  - name: w\n    hook: weight\n    config: {{weight: {value}}}\n    cel: {{expression: \"params.weight\"}}\n"
            ));
            assert!(
                e.starts_with(SOURCE)
                    && e.contains("spec.policies[0].config.weight")
                    && e.contains(&format!("{value} is not a finite number")),
                "{value}: {e}"
            );
        }
    }

    /// A tenant naming itself `platform-default\x1b[2K…` could forge
    /// terminal lines through every place a name is shown.
    #[test]
    fn names_with_control_characters_or_too_long_are_refused() {
        let e = error_with(
            "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {name: \"platform\\e[2K\"}\nspec: {}\n",
            &[],
            &LoadOptions::default(),
        );
        assert_eq!(
            e,
            format!("{SOURCE}: bundle.yaml: metadata.name \"platform\\u{{1b}}[2K\" holds a control or bidi character; names are shown in terminals, reports and Events, so give printable text")
        );
        let e = error(
            "  policies:\n  - {name: \"a\\u202eb\", hook: weight, cel: {expression: '1.0'}}\n",
        );
        assert!(
            e.contains("spec.policies[0].name \"a\\u{202e}b\" holds a control or bidi character"),
            "{e}"
        );
        let e = error(&format!(
            "  policies:\n  - {{name: w, hook: weight, cel: {{expression: '1.0'}}}}\n  tests:\n  - {{name: {}, policy: w, expect: {{}}}}\n",
            "t".repeat(254)
        ));
        assert!(
            e.contains("spec.tests[0].name is 254 bytes, over the cap of 253"),
            "{e}"
        );
    }

    #[test]
    fn a_misspelt_or_mistyped_field_names_the_file_and_the_field() {
        let at = "ConfigMap platform/rules/bundle.yaml (document 1): spec.policies[0]";
        let e = error(
            "  policies:\n  - {name: p, hook: admission, failurPolicy: Ignore, cel: {expression: 'true'}}\n",
        );
        assert!(
            e.starts_with(&format!(
                "{at}.failurPolicy: unknown field `failurPolicy`, expected one of "
            )) && e.contains("`failurePolicy`"),
            "{e}"
        );
        let e = error(
            "  policies:\n  - {name: p, hook: admission, cel: {expression: 'true'}, limits: {timeoutMs: soon}}\n",
        );
        assert!(
            e.starts_with(&format!(
                "{at}.limits.timeoutMs: invalid type: string \"soon\", expected u64"
            )),
            "{e}"
        );
        let e = error("  policies:\n  - {name: p, hook: admision, cel: {expression: 'true'}}\n");
        assert!(
            e.starts_with(&format!("{at}.hook: unknown variant `admision`, expected one of `admission`, `weight`, `fairShare`, `autoscale`, `flavor`, `placement`")),
            "{e}"
        );
    }

    #[test]
    fn validation_errors_name_the_policy_and_the_field() {
        let policy = |message: &str| format!("{SOURCE}: policy p: {message}");
        assert_eq!(
            error("  policies:\n  - {name: '', hook: admission, cel: {expression: 'true'}}\n"),
            format!("{SOURCE}: a policy has an empty name; give every policy a unique name")
        );
        assert_eq!(
            error(
                "  policies:\n  - {name: p, hook: admission, cel: {expression: 'true'}}\n  \
                 - {name: p, hook: weight, cel: {expression: '1.0'}}\n"
            ),
            policy("the name is used twice; policy names must be unique in a bundle")
        );
        assert_eq!(
            error("  policies:\n  - {name: p, hook: admission}\n"),
            policy("has neither cel nor wasm; give exactly one")
        );
        assert_eq!(
            error("  policies:\n  - {name: p, hook: admission, cel: {expression: 'true'}, wasm: {module: w.wasm}}\n"),
            policy("has both cel and wasm; give exactly one")
        );
        assert_eq!(
            error("  policies:\n  - {name: p, hook: weight, cel: {expression: '1.0', messageExpression: \"'x'\"}}\n"),
            policy("cel.messageExpression is only for admission policies, not weight")
        );
        assert_eq!(
            error("  policies:\n  - {name: p, hook: fairShare, cel: {expression: '1.0', retryable: false}}\n"),
            policy("cel.retryable is only for admission policies, not fairShare")
        );
        assert_eq!(
            error("  policies:\n  - {name: p, hook: admission, cel: {expression: 'true'}, limits: {timeoutMs: 0}}\n"),
            policy("limits.timeoutMs 0 must be between 1 and 1000")
        );
        assert_eq!(
            error("  policies:\n  - {name: p, hook: admission, cel: {expression: 'true'}, limits: {memoryMiB: 257}}\n"),
            policy("limits.memoryMiB 257 must be between 1 and 256")
        );
        assert_eq!(
            error(
                "  policies:\n  - {name: p, hook: admission, cel: {expression: 'true'}}\n  \
                 tests:\n  - {name: t1, policy: q, expect: {allowed: true}}\n"
            ),
            format!("{SOURCE}: test t1 names policy q, which the bundle does not have")
        );
    }

    #[test]
    fn tenant_bundles_hold_only_their_own_weight_and_admission_policies() {
        let tenant_error = |spec: &str| error_with(&yaml(spec), &[], &as_tenant("team-a"));
        assert_eq!(
            tenant_error("  policies:\n  - {name: p, hook: fairShare, cel: {expression: '1.0'}}\n"),
            format!(
                "{SOURCE}: policy p: hook fairShare is not allowed in a tenant bundle (spec.tenant: team-a); tenant bundles hold only weight and admission policies"
            )
        );
        assert_eq!(
            tenant_error("  policies:\n  - {name: p, hook: weight, match: {namespaces: [team-b]}, cel: {expression: '1.0'}}\n"),
            format!(
                "{SOURCE}: policy p: match.namespaces names another namespace; a tenant bundle applies only to team-a"
            )
        );
        assert_eq!(
            tenant_error("  policies:\n  - {name: p, hook: weight, cel: {expression: '1.0'}, limits: {timeoutMs: 51}}\n"),
            format!("{SOURCE}: policy p: limits.timeoutMs 51 must be between 1 and 50")
        );
        assert_eq!(
            tenant_error("  tenant: team-b\n  policies: []\n"),
            format!(
                "{SOURCE}: bundle.yaml says spec.tenant: team-b, but it is loaded as the tenant bundle of team-a; make them agree"
            )
        );
        // Its own spec.tenant makes a bundle a tenant bundle too.
        assert_eq!(
            error("  tenant: team-a\n  policies:\n  - {name: p, hook: autoscale, cel: {expression: '1'}}\n"),
            format!(
                "{SOURCE}: policy p: hook autoscale is not allowed in a tenant bundle (spec.tenant: team-a); tenant bundles hold only weight and admission policies"
            )
        );
    }

    #[test]
    fn cel_compile_errors_name_the_policy_the_field_and_the_position() {
        assert_eq!(
            error("  policies:\n  - {name: p, hook: admission, cel: {expression: 'wokload.gpus < 8'}}\n"),
            format!(
                "{SOURCE}: policy p: cel.expression: unknown variable `wokload`; the variables are workload, queue, clusterQueue, tenant, cohort, flavor, node, pod, typical, now and params"
            )
        );
        let e = error("  policies:\n  - name: p\n    hook: admission\n    cel:\n      expression: \"workload.gpus <=\\n  (8 +\"\n");
        assert!(
            e.starts_with(&format!(
                "{SOURCE}: policy p: cel.expression: syntax error at line 2, column "
            )),
            "{e}"
        );
        let e = error("  policies:\n  - {name: p, hook: admission, cel: {expression: 'false', messageExpression: \"'a' +\"}}\n");
        assert!(
            e.starts_with(&format!(
                "{SOURCE}: policy p: cel.messageExpression: syntax error at line 1, column "
            )),
            "{e}"
        );
    }

    #[test]
    fn wasm_errors_name_the_policy_and_the_module() {
        let module = weight_module();
        let with = |spec: &str, files: &[(&str, Vec<u8>)]| {
            error_with(&yaml(spec), files, &LoadOptions::default())
        };
        assert_eq!(
            with("  policies:\n  - {name: w, hook: weight, wasm: {module: ../w.wasm}}\n", &[]),
            format!(
                "{SOURCE}: policy w: wasm.module \"../w.wasm\" must be a file name inside the bundle"
            )
        );
        assert_eq!(
            with("  policies:\n  - {name: w, hook: weight, wasm: {module: nope.wasm}}\n", &[]),
            format!(
                "{SOURCE}: has no key \"nope.wasm\" in data or binaryData; add it (wasm modules go in binaryData)"
            )
        );
        let digest = sha256_hex(&module);
        assert_eq!(
            with(
                "  policies:\n  - {name: w, hook: weight, wasm: {module: w.wasm, sha256: 00ff}}\n",
                &[("w.wasm", module.clone())]
            ),
            format!(
                "{SOURCE}: policy w: wasm.sha256 pins 00ff but w.wasm has sha256 {digest}; update the pin if the module changed on purpose"
            )
        );
        assert_eq!(
            with(
                "  policies:\n  - {name: w, hook: admission, wasm: {module: w.wasm}}\n",
                &[("w.wasm", module)]
            ),
            format!(
                "{SOURCE}: policy w: w.wasm does not export arbiter_admission, which hook admission needs"
            )
        );
        let e = with(
            "  policies:\n  - {name: w, hook: weight, wasm: {module: w.wasm}}\n",
            &[("w.wasm", b"not wasm".to_vec())],
        );
        assert!(
            e.starts_with(&format!(
                "{SOURCE}: policy w: wasm.module w.wasm: plugin w.wasm: not a usable WebAssembly module: "
            )),
            "{e}"
        );
    }

    #[test]
    fn failing_bundle_tests_reject_the_bundle_unless_tests_are_skipped() {
        let text = yaml(
            "  policies:\n  - {name: cap, hook: admission, cel: {expression: 'workload.gpus <= 8'}}\n  \
             tests:\n  \
             - {name: small-allowed, policy: cap, input: {workload: {gpus: 4}}, expect: {allowed: true}}\n  \
             - {name: small-denied, policy: cap, input: {workload: {gpus: 4}}, expect: {allowed: false}}\n  \
             - {name: bad-input, policy: cap, input: {workload: {gpus: many}}, expect: {allowed: true}}\n",
        );
        match load_with(&text, &[], &LoadOptions::default()) {
            Err(BundleError::Tests {
                at,
                failed,
                total,
                details,
            }) => {
                assert_eq!((at.as_str(), failed, total), (SOURCE, 2, 3));
                let lines: Vec<&str> = details.lines().collect();
                assert_eq!(lines.len(), 2, "{details}");
                assert_eq!(
                    lines[0],
                    "  small-denied: expected allowed=false, got allowed=true ()"
                );
                assert!(
                    lines[1].starts_with("  bad-input: input.workload.gpus: ")
                        && lines[1].ends_with("; see plugin-sdk/schema for the request shape"),
                    "{}",
                    lines[1]
                );
            }
            Err(other) => panic!("expected failed tests, got {other}"),
            Ok(_) => panic!("the bundle loaded but its tests fail"),
        }
        let skipped = LoadOptions {
            tenant: None,
            run_tests: false,
        };
        let b = load_with(&text, &[], &skipped).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.tests.len(), 3);
    }

    /// `n` copies of one passing test of policy `w` (a weight policy).
    fn tests_of_w(n: usize) -> String {
        let mut text = String::from("  tests:\n");
        for i in 0..n {
            text.push_str(&format!(
                "  - {{name: t{i}, policy: w, input: {{workloads: [{{}}]}}, expect: {{scores: [1]}}}}\n"
            ));
        }
        text
    }

    /// A tenant bundle with 3,000 tests of a 50 ms plugin never finished
    /// loading: now the count and the plugins' worst case are checked first.
    #[test]
    fn a_bundle_with_too_many_tests_or_too_slow_ones_is_refused_before_they_run() {
        let plugin = |timeout_ms: u32, tests: usize| {
            yaml(&format!(
                "  policies:\n  - {{name: w, hook: weight, wasm: {{module: w.wasm}}, limits: {{timeoutMs: {timeout_ms}}}}}\n{}",
                tests_of_w(tests)
            ))
        };
        let module = [("w.wasm", weight_module())];
        let e = error_with(&plugin(50, 3000), &module, &as_tenant("team-a"));
        assert_eq!(
            e,
            format!("{SOURCE}: spec.tests has 3000 tests; a tenant bundle may have at most 200; keep one test per distinct case")
        );
        // 41 × 50 ms > 2 s; 40 × 50 ms fits.
        let e = error_with(&plugin(50, 41), &module, &as_tenant("team-a"));
        assert_eq!(
            e,
            format!(
                "{SOURCE}: spec.tests: its 41 plugin tests may take up to 2050 ms (the sum of each tested policy's limits.timeoutMs); \
                 a tenant bundle's tests may take at most 2000 ms; test fewer cases against plugins, or lower their limits.timeoutMs"
            )
        );
        load_with(&plugin(50, 40), &module, &as_tenant("team-a")).unwrap_or_else(|e| panic!("{e}"));
        // The same caps hold when the tests are not run at load (`arbiter policy test`).
        let untested = LoadOptions {
            run_tests: false,
            ..as_tenant("team-a")
        };
        assert!(load_with(&plugin(50, 41), &module, &untested).is_err());
        // A platform bundle: 1,000 tests, 30 s of plugin deadlines.
        let e = error_with(&plugin(100, 301), &module, &LoadOptions::default());
        assert!(
            e.contains("its 301 plugin tests may take up to 30100 ms")
                && e.contains("a platform bundle's tests may take at most 30000 ms"),
            "{e}"
        );
        let cel = |tests: usize| {
            yaml(&format!(
                "  policies:\n  - {{name: w, hook: weight, cel: {{expression: '1.0'}}}}\n{}",
                tests_of_w(tests)
            ))
        };
        let e = error_with(&cel(1001), &[], &LoadOptions::default());
        assert!(
            e.contains("spec.tests has 1001 tests; a platform bundle may have at most 1000"),
            "{e}"
        );
        assert_eq!(
            load_with(&cel(1000), &[], &LoadOptions::default())
                .map(|b| b.tests.len())
                .ok(),
            Some(1000)
        );
        assert!(error_with(&cel(201), &[], &as_tenant("team-a")).contains("at most 200"));
    }

    #[test]
    fn a_configmap_over_1_mib_is_refused_before_anything_is_read() {
        let padding = vec![0u8; CONFIGMAP_LIMIT];
        let e = error_with(
            "not even yaml: [",
            &[("pad", padding)],
            &LoadOptions::default(),
        );
        let size = "bundle.yaml".len() + "not even yaml: [".len() + "pad".len() + CONFIGMAP_LIMIT;
        assert!(
            e.starts_with(&format!(
                "{SOURCE}: is {size} bytes; Kubernetes refuses ConfigMaps over 1 MiB ({CONFIGMAP_LIMIT} bytes)."
            )),
            "{e}"
        );
    }

    #[test]
    fn directories_and_configmap_files_load_through_load_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let e = load_path(&missing, runtime(), &LoadOptions::default())
            .err()
            .expect("refused")
            .to_string();
        assert_eq!(
            e,
            format!(
                "{}: is neither a bundle directory nor a ConfigMap file; give a directory holding bundle.yaml",
                missing.display()
            )
        );
        let e = load_path(dir.path(), runtime(), &LoadOptions::default())
            .err()
            .expect("refused")
            .to_string();
        let shown = dir.path().display();
        assert!(
            e.starts_with(&format!("{shown}: cannot read {shown}/bundle.yaml: "))
                && e.ends_with("; check the path and permissions"),
            "{e}"
        );
        let text = yaml("  policies:\n  - {name: p, hook: admission, cel: {expression: 'true'}}\n");
        fs::write(dir.path().join("bundle.yaml"), &text).unwrap();
        let from_dir = load_path(dir.path(), runtime(), &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(from_dir.source, shown.to_string());
        let file = dir.path().join("cm.yaml");
        let indented: String = text.lines().map(|l| format!("    {l}\n")).collect();
        fs::write(
            &file,
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: rules, namespace: platform}}\ndata:\n  bundle.yaml: |\n{indented}"
            ),
        )
        .unwrap();
        let from_file =
            load_path(&file, runtime(), &LoadOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(from_file.source, SOURCE);
        assert_eq!(from_file.digest, from_dir.digest);
    }

    /// A bundle directory holding `bundle.yaml` with these `spec` lines.
    fn dir_bundle(spec: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("bundle.yaml"), yaml(spec)).unwrap();
        dir
    }

    fn dir_error(dir: &Path, options: &LoadOptions) -> String {
        match load(Files::Dir(dir), runtime(), options) {
            Ok(_) => panic!("the bundle loaded but should not have"),
            Err(e) => e.to_string(),
        }
    }

    const OUTSIDE: &str = "the path leads outside the bundle directory (an absolute path, `..` or a symlink pointing out); bundle files must be regular files inside the bundle directory";

    #[test]
    fn a_symlink_out_of_the_bundle_is_refused_and_nothing_of_the_file_is_shown() {
        use std::os::unix::fs::symlink;
        let elsewhere = tempfile::tempdir().unwrap();
        fs::write(elsewhere.path().join("secret.wasm"), "SECRET-CONTENT").unwrap();
        for (link, target, module) in [
            ("root", Path::new("/"), "root/etc/passwd"),
            ("out", elsewhere.path(), "out/secret.wasm"),
        ] {
            let dir = dir_bundle(&format!(
                "  policies:\n  - {{name: w, hook: weight, wasm: {{module: {module}, sha256: 00ff}}}}\n"
            ));
            symlink(target, dir.path().join(link)).unwrap();
            let e = dir_error(dir.path(), &LoadOptions::default());
            assert_eq!(
                e,
                format!(
                    "{}: policy w: wasm.module {module}: {OUTSIDE}",
                    dir.path().display()
                )
            );
        }
        // A symlink that stays inside the bundle (a ConfigMap volume's `..data`) is followed.
        let dir = dir_bundle("  policies:\n  - {name: w, hook: weight, wasm: {module: w.wasm}}\n");
        fs::create_dir(dir.path().join("..data")).unwrap();
        fs::write(dir.path().join("..data/w.wasm"), weight_module()).unwrap();
        symlink("..data/w.wasm", dir.path().join("w.wasm")).unwrap();
        load(Files::Dir(dir.path()), runtime(), &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_module_path_with_dotdot_or_an_absolute_one_is_refused() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("bundle");
        fs::create_dir(&dir).unwrap();
        fs::write(parent.path().join("w.wasm"), weight_module()).unwrap();
        let file = |name: &str| {
            Files::Dir(&dir)
                .read(name, FileCap::Module, "policy w: wasm.module m")
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let refused = Err(format!(
            "{}: policy w: wasm.module m: {OUTSIDE}",
            dir.display()
        ));
        assert_eq!(file("../w.wasm"), refused);
        assert_eq!(file("sub/../../w.wasm"), refused);
        let absolute = parent.path().join("w.wasm");
        assert_eq!(file(&absolute.display().to_string()), refused);
        for module in ["../w.wasm", absolute.display().to_string().as_str()] {
            fs::write(
                dir.join("bundle.yaml"),
                yaml(&format!(
                    "  policies:\n  - {{name: w, hook: weight, wasm: {{module: {module:?}}}}}\n"
                )),
            )
            .unwrap();
            assert_eq!(
                dir_error(&dir, &LoadOptions::default()),
                format!(
                    "{}: policy w: wasm.module {module:?} must be a file name inside the bundle",
                    dir.display()
                )
            );
        }
    }

    #[test]
    fn a_module_that_is_a_device_is_refused_without_reading_it() {
        let dir =
            dir_bundle("  policies:\n  - {name: w, hook: weight, wasm: {module: plugin.wasm}}\n");
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("plugin.wasm")).unwrap();
        assert_eq!(
            dir_error(dir.path(), &LoadOptions::default()),
            format!(
                "{}: policy w: wasm.module plugin.wasm: {OUTSIDE}",
                dir.path().display()
            )
        );
        // A device inside the bundle directory (as a mount could put there) is refused too.
        let e = read_capped(
            Path::new("/dev/zero"),
            FileCap::Module,
            "b",
            "policy w: wasm.module z",
        )
        .expect_err("refused")
        .to_string();
        assert_eq!(
            e,
            "b: policy w: wasm.module z: is a character device, not a regular file; put the file itself in the bundle"
        );
    }

    #[test]
    fn a_fifo_named_as_a_module_is_refused_without_blocking() {
        let dir = dir_bundle("  policies:\n  - {name: w, hook: weight, wasm: {module: p.wasm}}\n");
        let fifo = dir.path().join("p.wasm");
        match std::process::Command::new("mkfifo").arg(&fifo).status() {
            Ok(status) if status.success() => {}
            other => {
                eprintln!("skipped: mkfifo is not available ({other:?})");
                return;
            }
        }
        assert_eq!(
            dir_error(dir.path(), &LoadOptions::default()),
            format!(
                "{}: policy w: wasm.module p.wasm: is a FIFO, not a regular file; put the file itself in the bundle",
                dir.path().display()
            )
        );
    }

    #[test]
    fn a_bundle_yaml_that_is_a_device_or_too_large_is_refused_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/urandom", dir.path().join("bundle.yaml")).unwrap();
        assert_eq!(
            dir_error(dir.path(), &LoadOptions::default()),
            format!("{}: bundle.yaml: {OUTSIDE}", dir.path().display())
        );
        let e = read_capped(
            Path::new("/dev/urandom"),
            FileCap::BundleYaml,
            "b",
            "bundle.yaml",
        )
        .expect_err("refused")
        .to_string();
        assert_eq!(
            e,
            "b: bundle.yaml: is a character device, not a regular file; put the file itself in the bundle"
        );
        fs::remove_file(dir.path().join("bundle.yaml")).unwrap();
        let big = fs::File::create(dir.path().join("bundle.yaml")).unwrap();
        big.set_len(BUNDLE_YAML_LIMIT + 1).unwrap();
        assert_eq!(
            dir_error(dir.path(), &LoadOptions::default()),
            format!(
                "{}: bundle.yaml: is {} bytes, over the cap of {BUNDLE_YAML_LIMIT} bytes for bundle.yaml; split the policies into several bundles",
                dir.path().display(),
                BUNDLE_YAML_LIMIT + 1
            )
        );
    }

    #[test]
    fn an_oversized_module_is_refused_before_it_is_read() {
        let sparse = |dir: &Path, size: u64| {
            let file = fs::File::create(dir.join("big.wasm")).unwrap();
            file.set_len(size).unwrap();
        };
        let platform =
            dir_bundle("  policies:\n  - {name: w, hook: weight, wasm: {module: big.wasm}}\n");
        sparse(platform.path(), MODULE_LIMIT + 1);
        assert_eq!(
            dir_error(platform.path(), &LoadOptions::default()),
            format!(
                "{}: policy w: wasm.module big.wasm: is {} bytes, over the cap of {MODULE_LIMIT} bytes for a module of a platform bundle; shrink the module (release build, opt-level \"s\", strip, wasm-opt)",
                platform.path().display(),
                MODULE_LIMIT + 1
            )
        );
        let tenant =
            dir_bundle("  policies:\n  - {name: w, hook: weight, wasm: {module: big.wasm}}\n");
        sparse(tenant.path(), TENANT_MODULE_LIMIT + 1);
        let e = dir_error(tenant.path(), &as_tenant("team-a"));
        assert!(
            e.starts_with(&format!(
                "{}: policy w: wasm.module big.wasm: is {} bytes, over the cap of {TENANT_MODULE_LIMIT} bytes for a module of a tenant bundle; ",
                tenant.path().display(),
                TENANT_MODULE_LIMIT + 1
            )),
            "{e}"
        );
    }

    #[test]
    fn an_oversized_configmap_file_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cm.yaml");
        fs::File::create(&file)
            .unwrap()
            .set_len(CONFIGMAP_FILE_LIMIT + 1)
            .unwrap();
        let e = load_path(&file, runtime(), &LoadOptions::default())
            .err()
            .expect("refused")
            .to_string();
        let shown = file.display();
        assert!(
            e.starts_with(&format!(
                "{shown}: {shown}: is {} bytes, over the cap of {CONFIGMAP_FILE_LIMIT} bytes for a ConfigMap manifest; ",
                CONFIGMAP_FILE_LIMIT + 1
            )),
            "{e}"
        );
    }

    #[test]
    fn a_pin_mismatch_is_reported_before_the_module_is_compiled() {
        let bytes = b"not wasm, never compiled".to_vec();
        let digest = sha256_hex(&bytes);
        let e = error_with(
            &yaml(
                "  policies:\n  - {name: w, hook: weight, wasm: {module: w.wasm, sha256: 00ff}}\n",
            ),
            &[("w.wasm", bytes)],
            &LoadOptions::default(),
        );
        assert_eq!(
            e,
            format!(
                "{SOURCE}: policy w: wasm.sha256 pins 00ff but w.wasm has sha256 {digest}; update the pin if the module changed on purpose"
            )
        );
    }
}
