//! `arbiter policy configmap DIR`: a bundle directory as the ConfigMap the
//! operator takes bundles from (labelled `arbiter.dev/policy-bundle:
//! "true"`): `bundle.yaml` under `data`, each WebAssembly module it names
//! under `binaryData`, printed as YAML. `deploy/default-bundle.yaml` is this
//! output for `policies/`, checked by `tests/deploy.rs`.
//!
//! A ConfigMap key cannot hold a `/`, so a module in a subdirectory
//! (`plugins/shortest-first.wasm`) is stored under its file name, as
//! `kubectl create configmap --from-file` would, and the copy of
//! `bundle.yaml` in the ConfigMap names it so: only those `wasm.module`
//! values are rewritten, in the text (comments and layout kept), and both
//! texts are parsed to check that nothing else changed. The directory is
//! loaded first (its errors are the loader's), and the ConfigMap printed
//! is read back and loaded through the same loader (`Files::ConfigMap`),
//! its tests run, so what this prints loads. It never reads a file the
//! bundle does not name.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context as _};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use serde::Serialize;

use arbiter_policy::bounded::{self, Refusal};
use arbiter_policy::bundle::{
    self, Files, LoadOptions, Program, BUNDLE_YAML_LIMIT, CONFIGMAP_LABEL, MODULE_LIMIT,
};
use arbiter_policy::wasm::Runtime;

/// Kubernetes caps all of an object's annotations together at this many
/// bytes; client-side `kubectl apply` copies the whole object into one.
const ANNOTATIONS_LIMIT: usize = 256 * 1024;

/// What `policy configmap` prints, and what it warns about on stderr.
pub struct Rendered {
    pub yaml: String,
    pub warnings: Vec<String>,
}

/// The ConfigMap manifest of the bundle in `dir`. `command` is the command
/// line that made it, written into the manifest's header.
pub fn render(
    dir: &Path,
    name: Option<&str>,
    namespace: Option<&str>,
    command: &str,
    runtime: &Runtime,
) -> anyhow::Result<Rendered> {
    if !dir.is_dir() {
        bail!(
            "{} is not a bundle directory; give the directory holding bundle.yaml",
            dir.display()
        );
    }
    let loaded = bundle::load(Files::Dir(dir), runtime, &LoadOptions::default())?;
    let name = match name {
        Some(name) => name.to_string(),
        None => {
            check_object_name(&loaded.name).map_err(|problem| {
                anyhow::anyhow!(
                    "the bundle's name {:?} cannot name a ConfigMap ({problem}); pass --name",
                    loaded.name
                )
            })?;
            loaded.name.clone()
        }
    };
    let keys = module_keys(&loaded.policies)?;
    let original = read_text(&dir.join("bundle.yaml"))?;
    let text = rename_modules(&original, &keys)?;
    let mut binary = BTreeMap::new();
    for (path, key) in &keys {
        binary.insert(key.clone(), ByteString(read_module(&dir.join(path))?));
    }
    let configmap = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: namespace.map(str::to_string),
            labels: Some(BTreeMap::from([(
                CONFIGMAP_LABEL.to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("bundle.yaml".to_string(), text)])),
        binary_data: (!binary.is_empty()).then_some(binary),
        ..ConfigMap::default()
    };
    let mut yaml = header(dir, &loaded, &keys, command);
    yaml.push_str(&manifest_yaml(&configmap)?);

    // What is printed is what loads: read back, loaded, tested.
    let read_back: ConfigMap =
        serde_yaml_ng::from_str(&yaml).context("the generated ConfigMap does not read back")?;
    if read_back != configmap {
        bail!("the generated ConfigMap reads back differently; this is a bug in `arbiter policy configmap`");
    }
    let again = bundle::load(
        Files::ConfigMap(&read_back),
        runtime,
        &LoadOptions::default(),
    )
    .context("the generated ConfigMap does not load as a bundle")?;
    if again.policies.len() != loaded.policies.len() || again.tests.len() != loaded.tests.len() {
        bail!("the generated ConfigMap loads as a different bundle; this is a bug in `arbiter policy configmap`");
    }
    let mut warnings = Vec::new();
    let applied = serde_json::to_string(&configmap)?.len();
    if applied > ANNOTATIONS_LIMIT {
        warnings.push(format!(
            "the ConfigMap is {applied} bytes as JSON, over the {ANNOTATIONS_LIMIT} bytes Kubernetes allows an object's annotations: \
             client-side `kubectl apply` (which copies it into last-applied-configuration) will fail; use `kubectl apply --server-side` or `kubectl create`"
        ));
    }
    Ok(Rendered { yaml, warnings })
}

/// Each module path the bundle names → its ConfigMap key (its file name).
fn module_keys(policies: &[bundle::Policy]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut keys: BTreeMap<String, String> = BTreeMap::new();
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    for policy in policies {
        let Program::Wasm { module, .. } = &policy.program else {
            continue;
        };
        if keys.contains_key(module) {
            continue;
        }
        let key = Path::new(module)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(module)
            .to_string();
        check_key(&key).map_err(|problem| {
            anyhow::anyhow!(
                "policy {}: wasm.module {module}: {key:?} cannot be a ConfigMap key ({problem}); rename the file",
                policy.name
            )
        })?;
        if key == "bundle.yaml" {
            bail!(
                "policy {}: wasm.module {module} would be the ConfigMap key bundle.yaml, which holds the bundle; rename the module",
                policy.name
            );
        }
        if let Some(other) = taken.insert(key.clone(), module.clone()) {
            bail!(
                "wasm modules {other} and {module} would both be the ConfigMap key {key} (keys are file names; a key cannot hold '/'); rename one of them"
            );
        }
        keys.insert(module.clone(), key);
    }
    Ok(keys)
}

/// A ConfigMap key as Kubernetes validates it.
fn check_key(key: &str) -> Result<(), &'static str> {
    if key.is_empty() || key.len() > 253 {
        return Err("a key is 1 to 253 characters");
    }
    if !key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err("a key holds only letters, digits, '-', '_' and '.'");
    }
    if key == "." || key.starts_with("..") {
        return Err("a key is not '.' and does not start with '..'");
    }
    Ok(())
}

/// An object name (a DNS-1123 subdomain), as Kubernetes validates it.
pub fn check_object_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 253 {
        return Err("a name is 1 to 253 characters");
    }
    if name.split('.').all(is_label) {
        Ok(())
    } else {
        Err("lower-case letters, digits, '-' and '.', starting and ending with a letter or digit")
    }
}

/// A namespace name (a DNS-1123 label), as Kubernetes validates it.
pub fn check_namespace(name: &str) -> Result<(), &'static str> {
    if !name.is_empty() && name.len() <= 63 && is_label(name) {
        Ok(())
    } else {
        Err("1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit")
    }
}

fn is_label(part: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = part.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|&b| alnum(b) || b == b'-')
        }
        _ => false,
    }
}

/// `bundle.yaml` with each `module:` value in `keys` replaced by its key.
/// Refused, rather than guessed, when the parsed result differs from the
/// original in anything but those values.
fn rename_modules(original: &str, keys: &BTreeMap<String, String>) -> anyhow::Result<String> {
    let mut text = original.to_string();
    for (path, key) in keys.iter().filter(|(path, key)| path != key) {
        text = replace_module_value(&text, path, key);
    }
    let parse = |text: &str| serde_yaml_ng::from_str::<serde_json::Value>(text);
    let mut expected = parse(original).context("bundle.yaml does not parse")?;
    if let Some(policies) = expected
        .pointer_mut("/spec/policies")
        .and_then(|p| p.as_array_mut())
    {
        for module in policies
            .iter_mut()
            .filter_map(|p| p.pointer_mut("/wasm/module"))
        {
            if let Some(key) = module.as_str().and_then(|m| keys.get(m)) {
                *module = serde_json::Value::String(key.clone());
            }
        }
    }
    match parse(&text) {
        Ok(renamed) if renamed == expected => Ok(text),
        _ => {
            let renames: Vec<String> = keys
                .iter()
                .filter(|(path, key)| path != key)
                .map(|(path, key)| format!("{path} → {key}"))
                .collect();
            bail!(
                "cannot rename the modules in bundle.yaml to ConfigMap keys ({}): a `module:` value is written in a form this command does not rewrite; \
                 write each as a plain `module: PATH`, or keep the modules beside bundle.yaml",
                renames.join(", ")
            )
        }
    }
}

/// Replaces `path` where it is the whole value of a `module:` key (plain,
/// single- or double-quoted, block or flow style).
fn replace_module_value(text: &str, path: &str, key: &str) -> String {
    const FIELD: &str = "module:";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(FIELD) {
        let (before, after) = rest.split_at(at + FIELD.len());
        out.push_str(before);
        let value = after.trim_start_matches([' ', '\t']);
        out.push_str(&after[..after.len() - value.len()]);
        let quote = value
            .chars()
            .next()
            .filter(|c| *c == '"' || *c == '\'')
            .map(String::from)
            .unwrap_or_default();
        let starts_field = before[..at]
            .chars()
            .next_back()
            .is_none_or(|c| matches!(c, ' ' | '\t' | '\n' | '{' | ','));
        let whole = value
            .strip_prefix(quote.as_str())
            .and_then(|v| v.strip_prefix(path))
            .and_then(|v| v.strip_prefix(quote.as_str()));
        match whole {
            Some(tail)
                if starts_field
                    && tail.chars().next().is_none_or(|c| {
                        matches!(c, ' ' | '\t' | '\r' | '\n' | ',' | '}' | '#')
                    }) =>
            {
                out.push_str(&quote);
                out.push_str(key);
                out.push_str(&quote);
                rest = tail;
            }
            _ => rest = value,
        }
    }
    out.push_str(rest);
    out
}

fn header(
    dir: &Path,
    loaded: &bundle::Bundle,
    keys: &BTreeMap<String, String>,
    command: &str,
) -> String {
    let mut header = format!(
        "# Generated by `{command}`;\n\
         # regenerate it, do not edit it.\n\
         # Bundle {name} version {version} from {dir}: bundle.yaml under data,\n\
         # its WebAssembly modules under binaryData, keyed by file name.\n",
        dir = dir.display(),
        name = loaded.name,
        version = if loaded.version.is_empty() {
            "-"
        } else {
            &loaded.version
        },
    );
    for (path, key) in keys.iter().filter(|(path, key)| path != key) {
        header.push_str(&format!(
            "# Module {path} is the key {key} (a key cannot hold '/'), as bundle.yaml here names it.\n"
        ));
    }
    header
}

/// The manifest in the order people read one: apiVersion, kind, metadata, data, binaryData.
fn manifest_yaml(configmap: &ConfigMap) -> anyhow::Result<String> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Metadata<'a> {
        name: &'a Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace: &'a Option<String>,
        labels: &'a Option<BTreeMap<String, String>>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Manifest<'a> {
        api_version: &'static str,
        kind: &'static str,
        metadata: Metadata<'a>,
        data: &'a Option<BTreeMap<String, String>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        binary_data: &'a Option<BTreeMap<String, ByteString>>,
    }
    let manifest = Manifest {
        api_version: "v1",
        kind: "ConfigMap",
        metadata: Metadata {
            name: &configmap.metadata.name,
            namespace: &configmap.metadata.namespace,
            labels: &configmap.metadata.labels,
        },
        data: &configmap.data,
        binary_data: &configmap.binary_data,
    };
    Ok(serde_yaml_ng::to_string(&manifest)?)
}

fn read_text(path: &Path) -> anyhow::Result<String> {
    let bytes = read(path, BUNDLE_YAML_LIMIT)?;
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))
}

fn read_module(path: &Path) -> anyhow::Result<Vec<u8>> {
    read(path, MODULE_LIMIT)
}

/// The loader has just read the same files; this reports what changed since.
fn read(path: &Path, cap: u64) -> anyhow::Result<Vec<u8>> {
    bounded::read(path, cap).map_err(|refusal| match refusal {
        Refusal::Io(e) => anyhow::anyhow!("reading {}: {e}", path.display()),
        Refusal::NotRegular(kind) => {
            anyhow::anyhow!("{} is {kind}, not a regular file", path.display())
        }
        Refusal::TooLarge { .. } => {
            anyhow::anyhow!("{} is over the cap of {cap} bytes", path.display())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_values_are_renamed_only_where_they_are_the_whole_value() {
        let text = "\
# plugins/a.wasm is built by the script; module: plugins/a.wasm.bak is not it
spec:
  policies:
  - wasm:
      module: plugins/a.wasm
  - wasm: {module: \"plugins/a.wasm\", config: {}}
  - wasm: {module: 'plugins/a.wasm'}
  - wasm:
      module: plugins/a.wasm.old
  - name: submodule: plugins/a.wasm
";
        assert_eq!(
            replace_module_value(text, "plugins/a.wasm", "a.wasm"),
            "\
# plugins/a.wasm is built by the script; module: plugins/a.wasm.bak is not it
spec:
  policies:
  - wasm:
      module: a.wasm
  - wasm: {module: \"a.wasm\", config: {}}
  - wasm: {module: 'a.wasm'}
  - wasm:
      module: plugins/a.wasm.old
  - name: submodule: plugins/a.wasm
"
        );
    }

    #[test]
    fn a_module_written_in_a_form_not_rewritten_is_refused() {
        let keys = BTreeMap::from([("plugins/a.wasm".to_string(), "a.wasm".to_string())]);
        // A folded scalar: the text rewrite does not look inside one.
        let text = "spec:\n  policies:\n  - wasm:\n      module: >-\n        plugins/a.wasm\n";
        let error = rename_modules(text, &keys).unwrap_err().to_string();
        assert!(
            error.contains("plugins/a.wasm → a.wasm") && error.contains("plain `module: PATH`"),
            "{error}"
        );
    }

    #[test]
    fn keys_and_names_are_checked_as_kubernetes_does() {
        assert!(check_key("shortest-first.wasm").is_ok());
        assert!(check_key("a b.wasm").is_err());
        assert!(check_key("..x").is_err());
        assert!(check_key(&"k".repeat(254)).is_err());
        assert!(check_object_name("arbiter-default-bundle").is_ok());
        assert!(check_object_name("platform.bundle").is_ok());
        assert!(check_object_name("Platform").is_err());
        assert!(check_object_name("-x").is_err());
        assert!(check_object_name("a..b").is_err());
        assert!(check_namespace("arbiter-system").is_ok());
        assert!(check_namespace("a.b").is_err());
        assert!(check_namespace(&"n".repeat(64)).is_err());
    }
}
