//! Reading manifest files: multi-document YAML in, typed [`Manifest`]s out.
//!
//! This is the input boundary for everything that reads scenarios or
//! manifests (`arbiter simulate`, `arbiter convert`, tests); the files
//! themselves are read by the simulator crate's `files`, so this module
//! parses text and never touches the file system. It
//! accepts Arbiter's own kinds, the simulator's kinds, Kueue's
//! `kueue.x-k8s.io/v1alpha1|v1beta1|v1beta2` kinds (decoded into Arbiter's
//! types), the seed article's `kind: Queue` (a LocalQueue) and its other
//! forms (rewritten by `model::article` before decoding), `v1 Namespace`,
//! and keeps any other object whole for the caller to judge. It must never
//! drop a field silently: every field the types do not know becomes a
//! [`Warning`] naming its path, and every error names the file, the document
//! and the field. It does not check meaning (quota arithmetic, references
//! between objects); `model::cluster` and `sim::scenario` do that on the
//! decoded types.

use std::fmt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use super::api;
use super::article::{self, ArticleKind};
use super::sim_api;

mod suggest;
use suggest::Suggester;

/// Where a document came from: a file and the 1-based position of the
/// document in it (empty documents count, so the number matches what an
/// editor shows between `---` separators).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Source {
    /// The file.
    pub file: PathBuf,
    /// 1-based position of the document in the file.
    pub document: usize,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (document {})", self.file.display(), self.document)
    }
}

/// Something in the input that was accepted but not used as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The document it is in.
    pub source: Source,
    /// What was not used, and why.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.source, self.message)
    }
}

/// One decoded object.
#[derive(Clone, Debug)]
pub enum Manifest {
    /// A ResourceFlavor.
    ResourceFlavor(api::ResourceFlavor),
    /// A Cohort.
    Cohort(api::Cohort),
    /// Boxed: by far the largest manifest.
    ClusterQueue(Box<api::ClusterQueue>),
    /// A LocalQueue.
    LocalQueue(api::LocalQueue),
    /// A WorkloadPriorityClass.
    WorkloadPriorityClass(api::WorkloadPriorityClass),
    /// A Workload.
    Workload(api::Workload),
    /// A Namespace.
    Namespace(Namespace),
    /// A Simulation.
    Simulation(sim_api::Simulation),
    /// A WorkloadGenerator.
    WorkloadGenerator(sim_api::WorkloadGenerator),
    /// Any other apiVersion/kind (jobs such as PyTorchJob, JobIntegration
    /// configs, …), kept whole as JSON; the caller decides whether it knows
    /// the kind.
    Other {
        /// The object's `apiVersion`.
        api_version: String,
        /// The object's `kind`.
        kind: String,
        /// The whole object.
        object: Value,
    },
}

impl Manifest {
    /// The object's `metadata.name`, if it has one.
    pub fn name(&self) -> Option<&str> {
        let meta = match self {
            Manifest::ResourceFlavor(o) => &o.metadata,
            Manifest::Cohort(o) => &o.metadata,
            Manifest::ClusterQueue(o) => &o.metadata,
            Manifest::LocalQueue(o) => &o.metadata,
            Manifest::WorkloadPriorityClass(o) => &o.metadata,
            Manifest::Workload(o) => &o.metadata,
            Manifest::Namespace(o) => &o.metadata,
            Manifest::Simulation(o) => &o.metadata,
            Manifest::WorkloadGenerator(o) => &o.metadata,
            Manifest::Other { object, .. } => {
                return object.pointer("/metadata/name").and_then(Value::as_str)
            }
        };
        meta.name.as_deref()
    }
}

/// Which API a document was written against. Arbiter's reading of the
/// manifest does not depend on it, but `arbiter convert` reports what the
/// translation changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// `arbiter.dev/v1alpha1` or `sim.arbiter.dev/v1alpha1`.
    Arbiter,
    /// `kueue.x-k8s.io/v1alpha1` (Cohort, or another Kueue kind kept as `Other`).
    KueueV1alpha1,
    /// `kueue.x-k8s.io/v1beta1`.
    KueueV1beta1,
    /// `kueue.x-k8s.io/v1beta2`.
    KueueV1beta2,
    /// The seed article's `kind: Queue`, read as a LocalQueue, under any of
    /// the apiVersions above.
    Article,
    /// Anything else (`v1 Namespace`, jobs, …), taken as written.
    Foreign,
}

/// One object from the input, with where it came from.
#[derive(Clone, Debug)]
pub struct Document {
    /// Where it came from.
    pub source: Source,
    /// Which API it was written against.
    pub origin: Origin,
    /// The object, decoded.
    pub manifest: Manifest,
}

/// Everything read from a set of files, in input order (file order, then
/// document order), plus what was ignored on the way.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// The objects read.
    pub documents: Vec<Document>,
    /// What was accepted but not used as written.
    pub warnings: Vec<Warning>,
    /// The files read ([`load_str`]'s `file`), in order, so input that holds
    /// nothing can be named.
    pub files: Vec<PathBuf>,
}

impl Loaded {
    /// Appends another stream's documents, warnings and files, in order.
    pub fn extend(&mut self, other: Loaded) {
        self.documents.extend(other.documents);
        self.warnings.extend(other.warnings);
        self.files.extend(other.files);
    }
}

/// Why input could not be read. Every message names the file (and the
/// document and field where there is one) and says what to change.
#[derive(thiserror::Error, Debug)]
pub enum LoadError {
    /// The I/O error is part of the message (not a `source`), so it is printed once.
    #[error("cannot read {}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A directory holding no `.yaml` or `.yml` file.
    #[error("{}: no .yaml or .yml files found in this directory; pass manifest files or a directory that holds some", path.display())]
    NoManifests {
        /// The directory.
        path: PathBuf,
    },
    /// A FIFO, a device, a socket (or a symlink to one): never read.
    #[error("{}: is {kind}, not a regular file; pass manifest files or directories of them", path.display())]
    NotRegularFile {
        /// The path.
        path: PathBuf,
        /// What it is instead (`a FIFO`, …).
        kind: &'static str,
    },
    /// A file over the size cap for a manifest file.
    #[error("{}: {}, over the cap of {cap} bytes for a manifest file; split it into several files in a directory", path.display(), size_text(*size))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// From the file's metadata; `None` if it grew past the cap while being read.
        size: Option<u64>,
        /// The cap, in bytes.
        cap: u64,
    },
    /// The file is not well-formed YAML.
    #[error("{}{}: malformed YAML: {message}; fix the YAML syntax there", file.display(), location(*document, *line, *column))]
    Yaml {
        /// The file.
        file: PathBuf,
        /// 1-based document number, when the parser got that far.
        document: Option<usize>,
        /// 1-based line, when known.
        line: Option<usize>,
        /// 1-based column, when known.
        column: Option<usize>,
        /// The YAML parser's message.
        message: String,
    },
    /// Well-formed YAML holding a value no manifest may have (a NaN or an infinity).
    #[error("{at}{}: {object}: {message}", location(None, *line, *column))]
    Value {
        /// The document.
        at: Source,
        /// 1-based line, when known.
        line: Option<usize>,
        /// 1-based column, when known.
        column: Option<usize>,
        /// `Kind name`.
        object: String,
        /// What is wrong with the value.
        message: String,
    },
    /// A document that is not a mapping.
    #[error(
        "{at}: expected a Kubernetes object (a mapping with apiVersion and kind), found {found}"
    )]
    NotAnObject {
        /// The document.
        at: Source,
        /// What it is instead (`a boolean`, …).
        found: &'static str,
    },
    /// A document without a string `apiVersion` or `kind`.
    #[error("{at}: `{field}` is missing or not a string; every document needs `apiVersion` and `kind` (for example `apiVersion: arbiter.dev/v1alpha1` and `kind: ClusterQueue`)")]
    MissingTypeField {
        /// The document.
        at: Source,
        /// `apiVersion` or `kind`.
        field: &'static str,
    },
    /// A document that does not decode as its kind.
    #[error("{at}: {}", invalid_message(path, message, kind))]
    Invalid {
        /// The document.
        at: Source,
        /// The object's `kind`.
        kind: String,
        /// Field path in YAML terms (`spec.podSets[0].count`); empty for the object itself.
        path: String,
        /// What is wrong, from the decoder.
        message: String,
    },
}

fn size_text(size: Option<u64>) -> String {
    match size {
        Some(size) => format!("is {size} bytes"),
        None => "grew while it was read".to_string(),
    }
}

fn location(document: Option<usize>, line: Option<usize>, column: Option<usize>) -> String {
    let mut out = String::new();
    if let Some(document) = document {
        out.push_str(&format!(" (document {document})"));
    }
    if let Some(line) = line {
        out.push_str(&format!(", line {line}"));
        if let Some(column) = column {
            out.push_str(&format!(" column {column}"));
        }
    }
    out
}

fn invalid_message(path: &str, message: &str, kind: &str) -> String {
    if path.is_empty() {
        format!("{message}; fix the {kind}")
    } else {
        format!("{path}: {message}; fix this field of the {kind}")
    }
}

// ---------------------------------------------------------------- documents

/// Reads the documents of one YAML stream; `file` names it in messages.
pub fn load_str(text: &str, file: &Path) -> Result<Loaded, LoadError> {
    let mut loaded = Loaded {
        files: vec![file.to_path_buf()],
        ..Loaded::default()
    };
    for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let source = Source {
            file: file.to_path_buf(),
            document: index + 1,
        };
        let object = super::yaml::UniqueKeys::deserialize(document)
            .map(|v| v.0)
            .map_err(|err| {
                let at = err.location();
                let (line, column) = (
                    at.as_ref().map(|l| l.line()),
                    at.as_ref().map(|l| l.column()),
                );
                let message = strip_location(&err.to_string());
                match parsed_object(text, index) {
                    Some(object) => LoadError::Value {
                        at: source.clone(),
                        line,
                        column,
                        object,
                        message,
                    },
                    None => LoadError::Yaml {
                        file: file.to_path_buf(),
                        document: Some(index + 1),
                        line,
                        column,
                        message,
                    },
                }
            })?;
        if object.is_null() {
            continue;
        }
        let (origin, manifest) = read_object(object, &source, &mut loaded.warnings)?;
        loaded.documents.push(Document {
            source,
            origin,
            manifest,
        });
    }
    Ok(loaded)
}

/// Reads one object that arrived already parsed (through the Kubernetes
/// API, say) exactly as a document of a file is read: same kinds, same
/// Kueue and article translations, same warnings. `source` names it in
/// messages.
pub fn load_value(object: Value, source: Source) -> Result<Loaded, LoadError> {
    let mut loaded = Loaded::default();
    let (origin, manifest) = read_object(object, &source, &mut loaded.warnings)?;
    loaded.documents.push(Document {
        source,
        origin,
        manifest,
    });
    Ok(loaded)
}

/// For a document that is well-formed YAML but was refused as a value (a
/// NaN or an infinity): its `kind` and `metadata.name`, to name it.
fn parsed_object(text: &str, index: usize) -> Option<String> {
    let document = serde_yaml_ng::Deserializer::from_str(text).nth(index)?;
    let value = serde_yaml_ng::Value::deserialize(document).ok()?;
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("object");
    Some(
        match value
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(|n| n.as_str())
        {
            Some(name) => format!("{kind} {name}"),
            None => format!("{kind} (no metadata.name)"),
        },
    )
}

/// serde_yaml's messages end in " at line L column C"; the error shows the
/// location itself, once.
fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message.to_string(),
    }
}

/// The kinds Arbiter decodes into its own types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    ResourceFlavor,
    Cohort,
    ClusterQueue,
    LocalQueue,
    WorkloadPriorityClass,
    Workload,
    Namespace,
    Simulation,
    WorkloadGenerator,
}

fn classify(api_version: &str, kind: &str) -> (Origin, Option<Kind>) {
    let queueing_kind = |kind: &str| match kind {
        "ResourceFlavor" => Some(Kind::ResourceFlavor),
        "Cohort" => Some(Kind::Cohort),
        "ClusterQueue" => Some(Kind::ClusterQueue),
        "LocalQueue" | "Queue" => Some(Kind::LocalQueue),
        "WorkloadPriorityClass" => Some(Kind::WorkloadPriorityClass),
        "Workload" => Some(Kind::Workload),
        _ => None,
    };
    let origin = match api_version {
        api::API_VERSION => Origin::Arbiter,
        "kueue.x-k8s.io/v1alpha1" => Origin::KueueV1alpha1,
        "kueue.x-k8s.io/v1beta1" => Origin::KueueV1beta1,
        "kueue.x-k8s.io/v1beta2" => Origin::KueueV1beta2,
        sim_api::SIM_API_VERSION => {
            let kind = match kind {
                "Simulation" => Some(Kind::Simulation),
                "WorkloadGenerator" => Some(Kind::WorkloadGenerator),
                _ => None,
            };
            return (Origin::Arbiter, kind);
        }
        "v1" if kind == "Namespace" => return (Origin::Foreign, Some(Kind::Namespace)),
        _ => return (Origin::Foreign, None),
    };
    let known = match (origin, kind) {
        // Kueue served only Cohort (and kinds Arbiter lacks) as v1alpha1.
        (Origin::KueueV1alpha1, "Cohort" | "Queue") => queueing_kind(kind),
        (Origin::KueueV1alpha1, _) => None,
        _ => queueing_kind(kind),
    };
    if kind == "Queue" {
        return (Origin::Article, known);
    }
    (origin, known)
}

fn type_field(object: &Value, field: &'static str, source: &Source) -> Result<String, LoadError> {
    object
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| LoadError::MissingTypeField {
            at: source.clone(),
            field,
        })
}

fn read_object(
    mut object: Value,
    source: &Source,
    warnings: &mut Vec<Warning>,
) -> Result<(Origin, Manifest), LoadError> {
    let found = match &object {
        Value::Object(_) => None,
        Value::Array(_) => Some("a list"),
        Value::String(_) => Some("a string"),
        Value::Number(_) => Some("a number"),
        Value::Bool(_) => Some("a boolean"),
        Value::Null => Some("nothing"),
    };
    if let Some(found) = found {
        return Err(LoadError::NotAnObject {
            at: source.clone(),
            found,
        });
    }
    let api_version = type_field(&object, "apiVersion", source)?;
    let kind = type_field(&object, "kind", source)?;
    let (origin, known) = classify(&api_version, &kind);
    // Kueue (and Arbiter) allow these kinds without a spec; every field of
    // theirs is optional.
    if matches!(
        known,
        Some(Kind::ResourceFlavor | Kind::Cohort | Kind::ClusterQueue)
    ) {
        if let Value::Object(fields) = &mut object {
            fields
                .entry("spec")
                .or_insert_with(|| Value::Object(Default::default()));
        }
    }
    if origin != Origin::Arbiter {
        let article_kind = match known {
            Some(Kind::ResourceFlavor) => Some(ArticleKind::ResourceFlavor),
            Some(Kind::Cohort) => Some(ArticleKind::Cohort),
            Some(Kind::ClusterQueue) => Some(ArticleKind::ClusterQueue),
            Some(Kind::LocalQueue) => Some(ArticleKind::LocalQueue),
            _ => None,
        };
        if let Some(article_kind) = article_kind {
            let told = article::rewrite(article_kind, &mut object).map_err(|conflict| {
                LoadError::Invalid {
                    at: source.clone(),
                    kind: kind.clone(),
                    path: conflict.path,
                    message: conflict.message,
                }
            })?;
            warnings.extend(told.into_iter().map(|message| Warning {
                source: source.clone(),
                message,
            }));
        }
    }
    let manifest = match known {
        None => Manifest::Other {
            api_version,
            kind,
            object,
        },
        Some(Kind::ResourceFlavor) => Manifest::ResourceFlavor(decode(&object, source, warnings)?),
        Some(Kind::Cohort) => Manifest::Cohort(decode(&object, source, warnings)?),
        Some(Kind::ClusterQueue) => {
            Manifest::ClusterQueue(Box::new(decode(&object, source, warnings)?))
        }
        Some(Kind::LocalQueue) => Manifest::LocalQueue(decode(&object, source, warnings)?),
        Some(Kind::WorkloadPriorityClass) => {
            let mut class: api::WorkloadPriorityClass = decode(&object, source, warnings)?;
            class.api_version = Some(api::API_VERSION.to_string());
            class.kind = Some("WorkloadPriorityClass".to_string());
            Manifest::WorkloadPriorityClass(class)
        }
        Some(Kind::Workload) => Manifest::Workload(decode(&object, source, warnings)?),
        Some(Kind::Namespace) => Manifest::Namespace(decode(&object, source, warnings)?),
        Some(Kind::Simulation) => Manifest::Simulation(decode(&object, source, warnings)?),
        Some(Kind::WorkloadGenerator) => {
            Manifest::WorkloadGenerator(decode(&object, source, warnings)?)
        }
    };
    Ok((origin, manifest))
}

// ---------------------------------------------------------------- decoding

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// A field path in YAML terms: `spec.resourceGroups[0].flavors[1].name`,
/// `spec.requests["nvidia.com/gpu"]`.
fn format_path(segments: &[Segment]) -> String {
    let mut out = String::new();
    for segment in segments {
        match segment {
            Segment::Index(index) => out.push_str(&format!("[{index}]")),
            Segment::Key(key)
                if !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
            {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Key(key) => out.push_str(&format!("[{key:?}]")),
        }
    }
    out
}

fn ignored_path(path: &serde_ignored::Path<'_>, out: &mut Vec<Segment>) {
    match path {
        serde_ignored::Path::Root => {}
        serde_ignored::Path::Seq { parent, index } => {
            ignored_path(parent, out);
            out.push(Segment::Index(*index));
        }
        serde_ignored::Path::Map { parent, key } => {
            ignored_path(parent, out);
            out.push(Segment::Key(key.clone()));
        }
        serde_ignored::Path::Some { parent }
        | serde_ignored::Path::NewtypeStruct { parent }
        | serde_ignored::Path::NewtypeVariant { parent } => ignored_path(parent, out),
    }
}

fn error_path(path: &serde_path_to_error::Path) -> Vec<Segment> {
    path.iter()
        .filter_map(|segment| match segment {
            serde_path_to_error::Segment::Seq { index } => Some(Segment::Index(*index)),
            serde_path_to_error::Segment::Map { key } => Some(Segment::Key(key.clone())),
            serde_path_to_error::Segment::Enum { variant } => Some(Segment::Key(variant.clone())),
            serde_path_to_error::Segment::Unknown => None,
        })
        .collect()
}

/// The Topology in `manifest`, decoded, if it is one: `load` keeps the
/// kind as [`Manifest::Other`] (it has no CRD and no variant yet); read
/// under Kueue's group (any version) or `arbiter.dev/v1alpha1`. `None` for
/// any other object.
pub fn topology(
    manifest: &Manifest,
    source: &Source,
    warnings: &mut Vec<Warning>,
) -> Option<Result<api::Topology, LoadError>> {
    let Manifest::Other {
        api_version,
        kind,
        object,
    } = manifest
    else {
        return None;
    };
    let group = api_version.split_once('/').map_or("", |(group, _)| group);
    if kind != "Topology" || !(group == "kueue.x-k8s.io" || api_version == api::API_VERSION) {
        return None;
    }
    Some(decode(object, source, warnings))
}

/// Kueue fields Arbiter does not implement (any apiVersion), as paths with
/// `[]` for any list index.
const KUEUE_ONLY_FIELDS: &[&str] = &[
    "spec.admissionChecksStrategy",
    "spec.admissionScope",
    "spec.maximumExecutionTimeSeconds",
    "spec.priorityClassSource",
    "spec.podSets[].topologyRequest",
    "spec.podSets[].schedulingGates",
];

/// Decodes one object into `T`, turning every field `T` does not know into
/// a [`Warning`] (with a suggestion when a known field is close) and a type
/// mismatch into a [`LoadError::Invalid`] naming the field. `apiVersion` and
/// `kind` at the top level are the caller's business and never reported.
///
/// `T: JsonSchema` lets the suggestions come from the same description of
/// the type that the CRDs are generated from.
pub fn decode<T: DeserializeOwned + JsonSchema>(
    object: &Value,
    source: &Source,
    warnings: &mut Vec<Warning>,
) -> Result<T, LoadError> {
    let mut ignored: Vec<Vec<Segment>> = Vec::new();
    let mut record = |path: serde_ignored::Path<'_>| {
        let mut segments = Vec::new();
        ignored_path(&path, &mut segments);
        ignored.push(segments);
    };
    let result: Result<T, _> =
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(object, &mut record));
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("object")
        .to_string();
    let value = result.map_err(|err| LoadError::Invalid {
        at: source.clone(),
        kind: kind.clone(),
        path: format_path(&error_path(err.path())),
        message: err.inner().to_string(),
    })?;
    ignored.retain(
        |path| !matches!(path.as_slice(), [Segment::Key(k)] if k == "apiVersion" || k == "kind"),
    );
    if ignored.is_empty() {
        return Ok(value);
    }
    let schema = Suggester::new::<T>();
    for path in ignored {
        let shown = format_path(&path);
        let message = if is_kueue_only(&path) {
            format!("field {shown} is a Kueue feature not supported by Arbiter, ignored")
        } else {
            match schema.suggest(&path) {
                Some(better) => format!("unknown field {shown} ignored (did you mean {better}?)"),
                None => format!("unknown field {shown} ignored; remove it or check its spelling and indentation"),
            }
        };
        warnings.push(Warning {
            source: source.clone(),
            message,
        });
    }
    Ok(value)
}

fn is_kueue_only(path: &[Segment]) -> bool {
    let mut pattern = String::new();
    for segment in path {
        match segment {
            Segment::Index(_) => pattern.push_str("[]"),
            Segment::Key(key) => {
                if !pattern.is_empty() {
                    pattern.push('.');
                }
                pattern.push_str(key);
            }
        }
    }
    // A LocalQueue's `spec.fairSharing` is Kueue's admission fair sharing;
    // a ClusterQueue's or Cohort's is Arbiter's and never ignored.
    KUEUE_ONLY_FIELDS.contains(&pattern.as_str()) || pattern == "spec.fairSharing"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Loaded {
        match load_str(text, Path::new("seed/cluster.yaml")) {
            Ok(loaded) => loaded,
            Err(err) => panic!("unexpected error: {err}"),
        }
    }

    fn load_err(text: &str) -> String {
        match load_str(text, Path::new("seed/cluster.yaml")) {
            Ok(loaded) => panic!("expected an error, got {loaded:?}"),
            Err(err) => err.to_string(),
        }
    }

    fn messages(loaded: &Loaded) -> Vec<String> {
        loaded.warnings.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn multi_document_stream_keeps_order_and_skips_empty_documents() {
        let loaded = load(
            "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: a100}\n\
             ---\n---\n\
             apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a, labels: {tier: gold}}\n\
             ---\n\
             apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: train}\nspec: {x: 1}\n",
        );
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let summary: Vec<(usize, Option<&str>, Origin)> = loaded
            .documents
            .iter()
            .map(|d| (d.source.document, d.manifest.name(), d.origin))
            .collect();
        assert_eq!(
            summary,
            vec![
                (1, Some("a100"), Origin::Arbiter),
                (3, Some("team-a"), Origin::Foreign),
                (4, Some("train"), Origin::Foreign),
            ]
        );
        assert!(matches!(
            &loaded.documents[2].manifest,
            Manifest::Other { api_version, kind, object }
                if api_version == "kubeflow.org/v1" && kind == "PyTorchJob" && object["spec"]["x"] == 1
        ));
        assert_eq!(
            loaded.documents[0].source.to_string(),
            "seed/cluster.yaml (document 1)"
        );
    }

    #[test]
    fn unknown_fields_become_warnings_with_yaml_paths_and_suggestions() {
        let loaded = load(
            r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq, lables: {a: b}}
spec:
  namespaceSelecter: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
    - name: h100
      nominalQuota: 4
      resources: []
  retryPolicy: {maxRetries: 2, colour: blue}
"#,
        );
        assert_eq!(
            messages(&loaded),
            vec![
                "seed/cluster.yaml (document 1): unknown field metadata.lables ignored (did you mean metadata.labels?)",
                "seed/cluster.yaml (document 1): unknown field spec.namespaceSelecter ignored (did you mean spec.namespaceSelector?)",
                "seed/cluster.yaml (document 1): unknown field spec.resourceGroups[0].flavors[1].nominalQuota ignored (did you mean spec.resourceGroups[0].flavors[1].resources[].nominalQuota?)",
                "seed/cluster.yaml (document 1): unknown field spec.retryPolicy.colour ignored; remove it or check its spelling and indentation",
            ]
        );
        let Manifest::ClusterQueue(cq) = &loaded.documents[0].manifest else {
            panic!("not a ClusterQueue");
        };
        assert_eq!(cq.spec.resource_groups[0].flavors.len(), 2);
    }

    #[test]
    fn map_keys_that_are_not_identifiers_are_quoted_in_paths() {
        let loaded = load(
            "apiVersion: sim.arbiter.dev/v1alpha1\nkind: Simulation\nmetadata: {name: s}\n\
             spec:\n  nodePools:\n  - {flavor: a100, nodes: 2, allocatable: {nvidia.com/gpu: 8}, gpuModel: A100}\n",
        );
        assert_eq!(
            messages(&loaded),
            vec!["seed/cluster.yaml (document 1): unknown field spec.nodePools[0].gpuModel ignored; remove it or check its spelling and indentation"]
        );
        assert_eq!(
            format_path(&[
                Segment::Key("spec".into()),
                Segment::Key("requests".into()),
                Segment::Key("nvidia.com/gpu".into()),
            ]),
            r#"spec.requests["nvidia.com/gpu"]"#
        );
    }

    #[test]
    fn type_errors_name_the_field_path() {
        let err = load_err(
            r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - name: cpu
        nominalQuota: [1, 2]
"#,
        );
        assert!(
            err.starts_with(
                "seed/cluster.yaml (document 1): spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: invalid type: sequence"
            ),
            "{err}"
        );
        assert!(err.ends_with("fix this field of the ClusterQueue"), "{err}");

        let err = load_err(
            "apiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: q}\nspec: {priority: high}\n",
        );
        assert!(
            err.contains(
                "(document 1): spec.priority: invalid type: string \"high\", expected i32"
            ),
            "{err}"
        );

        let err = load_err(
            "apiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: q}\nspec: {}\n",
        );
        assert!(
            err.contains("(document 1): spec: missing field `clusterQueue`"),
            "{err}"
        );

        let err =
            load_err("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w}\n");
        assert!(
            err.ends_with("(document 1): missing field `spec`; fix the Workload"),
            "{err}"
        );
    }

    #[test]
    fn a_nan_or_infinite_number_names_the_object_the_field_and_the_value() {
        let cq = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {name: team-a}\nspec:\n  fairSharing: {weight: .nan}\n";
        assert_eq!(
            load_err(cq),
            "seed/cluster.yaml (document 2), line 9 column 25: ClusterQueue team-a: \
             spec.fairSharing.weight: .nan is not a finite number; give a finite number (or quote it if a string is meant)"
        );
        let pc = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: 10\nweight: -.inf\n";
        let err = load_err(pc);
        assert!(
            err.contains("WorkloadPriorityClass high: weight: -.inf is not a finite number"),
            "{err}"
        );
        // A key named twice is still a YAML error.
        let err = load_err("kind: Namespace\nkind: Namespace\n");
        assert!(err.contains("malformed YAML"), "{err}");
    }

    #[test]
    fn malformed_yaml_names_file_document_and_line() {
        let err = load_err(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: [b\n",
        );
        assert!(
            err.starts_with("seed/cluster.yaml (document 2), line "),
            "{err}"
        );
        assert!(err.contains("malformed YAML"), "{err}");
        let line: usize = err["seed/cluster.yaml (document 2), line ".len()..]
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!((7..=8).contains(&line), "{err}");
    }

    #[test]
    fn documents_without_kind_or_mapping_are_errors() {
        let err = load_err("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: arbiter.dev/v1alpha1\nmetadata: {name: x}\n");
        assert!(
            err.starts_with("seed/cluster.yaml (document 2): `kind` is missing"),
            "{err}"
        );
        let err = load_err("kind: ClusterQueue\n");
        assert!(
            err.contains("(document 1): `apiVersion` is missing"),
            "{err}"
        );
        let err = load_err("- a\n- b\n");
        assert!(
            err.contains("(document 1): expected a Kubernetes object"),
            "{err}"
        );
        assert!(err.ends_with("found a list"), "{err}");
    }

    const KUEUE_V1BETA1: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default-flavor}
spec: {topologyName: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  cohort: research
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 9}
      - {name: memory, nominalQuota: 36Gi, borrowingLimit: 4Gi}
  admissionChecks: [prov]
  preemption:
    borrowWithinCohort: {policy: Never}
    withinClusterQueue: LowerPriority
  flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: Preempt}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: user-queue}
spec: {clusterQueue: cluster-queue}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 10000
description: "for urgent training"
---
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Cohort
metadata: {name: research}
spec: {parent: org}
"#;

    #[test]
    fn kueue_v1beta1_is_read_into_arbiter_types() {
        let loaded = load(KUEUE_V1BETA1);
        let origins: Vec<Origin> = loaded.documents.iter().map(|d| d.origin).collect();
        assert_eq!(
            origins,
            vec![
                Origin::KueueV1beta1,
                Origin::KueueV1beta1,
                Origin::KueueV1beta1,
                Origin::KueueV1beta1,
                Origin::KueueV1alpha1
            ]
        );
        // admissionChecks is read (the operator's multi-cluster dispatch
        // acts on a MultiKueue check; the simulator runs none).
        assert_eq!(messages(&loaded), Vec::<String>::new());
        let Manifest::ResourceFlavor(flavor) = &loaded.documents[0].manifest else {
            panic!("not a ResourceFlavor");
        };
        assert_eq!(flavor.spec.topology_name.as_deref(), Some("default"));
        let Manifest::ClusterQueue(cq) = &loaded.documents[1].manifest else {
            panic!("not a ClusterQueue");
        };
        assert_eq!(cq.spec.cohort.as_deref(), Some("research"));
        assert_eq!(cq.spec.admission_checks, ["prov"]);
        let quotas = &cq.spec.resource_groups[0].flavors[0].resources;
        assert_eq!(quotas[0].nominal_quota.0, "9");
        assert_eq!(
            quotas[1].borrowing_limit.as_ref().map(|q| q.0.as_str()),
            Some("4Gi")
        );
        assert_eq!(
            cq.spec
                .flavor_fungibility
                .as_ref()
                .and_then(|f| f.when_can_borrow),
            Some(api::FungibilityPolicy::Borrow)
        );
        let Manifest::WorkloadPriorityClass(class) = &loaded.documents[3].manifest else {
            panic!("not a WorkloadPriorityClass");
        };
        assert_eq!(class.value, 10000);
        assert_eq!(class.api_version.as_deref(), Some(api::API_VERSION));
        let Manifest::Cohort(cohort) = &loaded.documents[4].manifest else {
            panic!("not a Cohort");
        };
        assert_eq!(cohort.spec.parent.as_deref(), Some("org"));
    }

    #[test]
    fn kueue_v1beta2_and_the_article_queue_are_read() {
        let loaded = load(
            r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: research
  namespaceSelector: {matchLabels: {team: a}}
  flavorFungibility: {whenCanBorrow: MayStopSearch}
  resourceGroups: []
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: research}
spec: {parentName: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: cq, fairSharing: {weight: 2}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: w, namespace: team-a}
spec:
  queueName: lq
  maximumExecutionTimeSeconds: 60
  podSets:
  - name: main
    count: 2
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Queue
metadata: {name: research-queue, namespace: research}
spec:
  clusterQueue: cq
  priority: 100
  resourceQuotas: [{name: nvidia.com/gpu, min: 1, max: 8, default: 1}]
---
apiVersion: arbiter.dev/v1alpha1
kind: Queue
metadata: {name: q2, namespace: research}
spec: {clusterQueue: cq}
"#,
        );
        let origins: Vec<Origin> = loaded.documents.iter().map(|d| d.origin).collect();
        assert_eq!(
            origins,
            vec![
                Origin::KueueV1beta2,
                Origin::KueueV1beta2,
                Origin::KueueV1beta2,
                Origin::KueueV1beta2,
                Origin::Article,
                Origin::Article
            ]
        );
        assert_eq!(
            messages(&loaded),
            vec![
                "seed/cluster.yaml (document 3): field spec.fairSharing is a Kueue feature not supported by Arbiter, ignored",
                "seed/cluster.yaml (document 4): field spec.maximumExecutionTimeSeconds is a Kueue feature not supported by Arbiter, ignored",
            ]
        );
        let Manifest::ClusterQueue(cq) = &loaded.documents[0].manifest else {
            panic!("not a ClusterQueue");
        };
        assert_eq!(cq.spec.cohort.as_deref(), Some("research"));
        let Manifest::Cohort(cohort) = &loaded.documents[1].manifest else {
            panic!("not a Cohort");
        };
        assert_eq!(cohort.spec.parent.as_deref(), Some("org"));
        let Manifest::Workload(workload) = &loaded.documents[3].manifest else {
            panic!("not a Workload");
        };
        assert_eq!(workload.spec.pod_sets[0].count, 2);
        let Manifest::LocalQueue(queue) = &loaded.documents[4].manifest else {
            panic!("kind: Queue is not read as a LocalQueue");
        };
        assert_eq!(queue.spec.priority, Some(100));
        assert_eq!(
            queue.spec.resource_quotas[0]
                .max
                .as_ref()
                .map(|q| q.0.as_str()),
            Some("8")
        );
        assert!(matches!(
            loaded.documents[5].manifest,
            Manifest::LocalQueue(_)
        ));
    }

    #[test]
    fn kueue_kinds_arbiter_lacks_are_kept_whole() {
        let loaded = load("apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata: {name: prov}\nspec: {controllerName: x}\n");
        assert_eq!(loaded.documents[0].origin, Origin::KueueV1beta1);
        assert!(
            matches!(&loaded.documents[0].manifest, Manifest::Other { kind, .. } if kind == "AdmissionCheck")
        );
    }
}
