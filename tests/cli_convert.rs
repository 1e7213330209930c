//! `arbiter convert` and `arbiter crds` as a user runs them: exit codes,
//! stdout, stderr.

use std::path::Path;

use arbiter_core::model::load::{Document, Manifest, Origin};
use assert_cmd::Command;
use predicates::prelude::*;

fn arbiter() -> Command {
    Command::cargo_bin("arbiter").unwrap_or_else(|e| panic!("arbiter binary: {e}"))
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

const KUEUE_V1BETA1: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: cluster-queue
spec:
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: 9
      - name: memory
        nominalQuota: 36Gi
      - name: nvidia.com/gpu
        nominalQuota: 8
  admissionChecks: [prov]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: default
  name: user-queue
spec:
  clusterQueue: cluster-queue
"#;

#[test]
fn convert_kueue_v1beta1_prints_arbiter_manifests_and_warns_on_stderr() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = write(dir.path(), "kueue.yaml", KUEUE_V1BETA1);
    let output = arbiter()
        .arg("convert")
        .arg(&file)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "(document 2): Kueue admits no namespace when namespaceSelector is omitted",
        ))
        .stderr(predicate::str::contains(
            "warning: ",
        ))
        .stderr(predicate::str::contains(
            "(document 2): spec.admissionChecks kept: `arbiter run --multicluster` acts on an AdmissionCheck whose controllerName is kueue.x-k8s.io/multikueue",
        ))
        .get_output()
        .stdout
        .clone();
    let yaml = String::from_utf8(output).unwrap_or_else(|e| panic!("{e}"));
    let converted = write(dir.path(), "arbiter.yaml", &yaml);
    let loaded = arbiter_sim::files::load_paths(&[converted])
        .unwrap_or_else(|e| panic!("converted output does not load: {e}\n{yaml}"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    for document in &loaded.documents {
        assert_eq!(document.origin, Origin::Arbiter, "{yaml}");
    }
    assert!(
        matches!(
            loaded.documents.as_slice(),
            [
                Document {
                    manifest: Manifest::ResourceFlavor(_),
                    ..
                },
                Document {
                    manifest: Manifest::ClusterQueue(_),
                    ..
                },
                Document {
                    manifest: Manifest::LocalQueue(_),
                    ..
                },
            ]
        ),
        "{yaml}"
    );
}

#[test]
fn convert_of_malformed_yaml_exits_1_naming_the_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = write(
        dir.path(),
        "broken.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: [a\n",
    );
    arbiter()
        .arg("convert")
        .arg(&file)
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::starts_with("error: "))
        .stderr(predicate::str::contains("broken.yaml (document 1), line "))
        .stderr(predicate::str::contains("malformed YAML"))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn convert_of_a_missing_file_exits_1() {
    arbiter()
        .args(["convert", "no/such/file.yaml"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "error: cannot read no/such/file.yaml",
        ));
}

#[test]
fn convert_without_files_is_a_usage_error() {
    arbiter().arg("convert").assert().code(2);
    arbiter().arg("no-such-command").assert().code(2);
}

#[test]
fn crds_prints_the_arbiter_crds() {
    let output = arbiter()
        .arg("crds")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let yaml = String::from_utf8(output).unwrap_or_else(|e| panic!("{e}"));
    let mut kinds = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(&yaml) {
        let crd: serde_json::Value =
            serde::Deserialize::deserialize(document).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(crd["kind"], "CustomResourceDefinition");
        assert_eq!(crd["spec"]["group"], "arbiter.dev");
        kinds.push(
            crd["spec"]["names"]["kind"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    assert_eq!(
        kinds,
        vec![
            "ResourceFlavor",
            "Cohort",
            "ClusterQueue",
            "LocalQueue",
            "WorkloadPriorityClass",
            "Workload",
            "Topology",
            "AdmissionCheck",
            "MultiKueueConfig",
            "MultiKueueCluster"
        ]
    );
}

// ------------------------------------------------ the seed article's manifests

/// The article's file (its copy in `tests/data/article/`, which
/// `tests/article.rs` checks against the shared test data), split into its
/// documents as written.
fn article_documents() -> Option<Vec<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/article/manifests.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut documents = vec![String::new()];
    for line in text.lines() {
        if line == "---" {
            documents.push(String::new());
        } else if let Some(last) = documents.last_mut() {
            last.push_str(line);
            last.push('\n');
        }
    }
    Some(documents)
}

/// One step of a path into a converted object.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
    /// The element of a list whose `name` is this.
    Named(String),
}

fn at<'v>(value: &'v serde_json::Value, path: &[Step]) -> Option<&'v serde_json::Value> {
    path.iter().try_fold(value, |v, step| match step {
        Step::Key(k) => v.get(k),
        Step::Index(i) => v.get(i),
        Step::Named(name) => v
            .as_array()?
            .iter()
            .find(|item| item.get("name").and_then(|n| n.as_str()) == Some(name)),
    })
}

/// Where `arbiter convert` writes the article's leaf at `path` (keys and
/// indexes of the original), and as what.
fn converted_leaf(
    kind: &str,
    path: &[Step],
    value: &serde_json::Value,
) -> (Vec<Step>, serde_json::Value) {
    let key = |i: usize| match path.get(i) {
        Some(Step::Key(k)) => k.as_str(),
        _ => "",
    };
    let mut target = path.to_vec();
    let mut value = value.clone();
    match (kind, key(0), key(1)) {
        (_, "apiVersion", _)
            if value
                .as_str()
                .is_some_and(|v| v.starts_with("kueue.x-k8s.io/")) =>
        {
            value = "arbiter.dev/v1alpha1".into();
        }
        ("Queue", "kind", _) => value = "LocalQueue".into(),
        ("ResourceFlavor", "spec", "nodeSelector") => target[1] = Step::Key("nodeLabels".into()),
        ("ResourceFlavor", "spec", "taints") => target[1] = Step::Key("nodeTaints".into()),
        ("ClusterQueue", "spec", "resourceGroups") if key(5) == "resources" && path.len() == 7 => {
            // The map form: `resources: {nvidia.com/gpu: "2"}` → `[{name: nvidia.com/gpu, nominalQuota: "2"}]`.
            if let Some(Step::Key(resource)) = path.get(6) {
                target = path[..6].to_vec();
                target.push(Step::Named(resource.clone()));
                target.push(Step::Key("nominalQuota".into()));
            }
        }
        ("ClusterQueue", "spec", "autoscaling") if key(2) == "targetCPUUtilization" => {
            target[2] = Step::Key("targetUtilization".into());
        }
        ("ClusterQueue", "spec", "scheduling")
            if key(2) == "algorithm" && value == "fair-scheduling" =>
        {
            value = "fair-sharing".into();
        }
        ("Queue", "spec", "resourceEstimation") if key(2) == "historyWindow" && value == "7d" => {
            value = "168h".into();
        }
        _ => {}
    }
    (target, value)
}

/// Same value, numbers compared as numbers (`70` and `70.0`).
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Every leaf (scalar) of `original` is in `converted`, where and as `arbiter
/// convert` writes it; returns the leaves missing or changed.
fn lost_fields(
    kind: &str,
    original: &serde_json::Value,
    converted: &serde_json::Value,
) -> Vec<String> {
    fn walk(
        kind: &str,
        value: &serde_json::Value,
        path: &mut Vec<Step>,
        converted: &serde_json::Value,
        lost: &mut Vec<String>,
    ) {
        match value {
            serde_json::Value::Object(fields) => {
                for (k, v) in fields {
                    path.push(Step::Key(k.clone()));
                    walk(kind, v, path, converted, lost);
                    path.pop();
                }
            }
            serde_json::Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    path.push(Step::Index(i));
                    walk(kind, v, path, converted, lost);
                    path.pop();
                }
            }
            leaf => {
                let (target, expected) = converted_leaf(kind, path, leaf);
                match at(converted, &target) {
                    Some(found) if same(found, &expected) => {}
                    found => lost.push(format!(
                        "{path:?} = {leaf} → {target:?}: expected {expected}, found {found:?}"
                    )),
                }
            }
        }
    }
    let mut lost = Vec::new();
    walk(kind, original, &mut Vec::new(), converted, &mut lost);
    lost
}

/// `arbiter convert` on each of the article's documents, alone: every field
/// the article writes is in the output (under the name and in the form
/// Arbiter reads), the output reads back without a warning as the same
/// objects, and every article form is told on stderr with the form written.
#[test]
fn convert_keeps_every_field_of_each_article_example() {
    let Some(documents) = article_documents() else {
        return;
    };
    assert_eq!(documents.len(), 20);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for (i, text) in documents.iter().enumerate() {
        let n = i + 1;
        let file = write(dir.path(), &format!("article-{n}.yaml"), text);
        let output = arbiter()
            .arg("convert")
            .arg(&file)
            .assert()
            .success()
            .get_output()
            .clone();
        let yaml = String::from_utf8(output.stdout).unwrap_or_else(|e| panic!("{e}"));
        let stderr = String::from_utf8(output.stderr).unwrap_or_else(|e| panic!("{e}"));
        for line in stderr.lines() {
            assert!(line.starts_with("warning: "), "document {n}: {line}");
        }

        let original: serde_json::Value =
            serde_yaml_ng::from_str(text).unwrap_or_else(|e| panic!("document {n}: {e}"));
        let kind = original["kind"].as_str().unwrap_or_default().to_string();
        let mut converted: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
            .map(|d| {
                serde::Deserialize::deserialize(d)
                    .unwrap_or_else(|e| panic!("document {n}: {e}\n{yaml}"))
            })
            .collect();
        if kind == "PipelineRun" {
            // The JobIntegration that reads it comes first.
            assert_eq!(converted.len(), 2, "document {n}:\n{yaml}");
            let integration = converted.remove(0);
            assert_eq!(integration["kind"], "JobIntegration", "{yaml}");
            assert_eq!(
                (
                    &integration["spec"]["jobApiVersion"],
                    &integration["spec"]["jobKind"]
                ),
                (&"kubeflow.org/v1".into(), &"PipelineRun".into()),
                "{yaml}"
            );
            assert!(
                stderr.contains("kubeflow.org/v1 PipelineRun is the article's kind")
                    && stderr.contains(
                        "`arbiter convert` writes that JobIntegration before the first PipelineRun"
                    ),
                "{stderr}"
            );
        }
        assert_eq!(converted.len(), 1, "document {n}:\n{yaml}");
        let lost = lost_fields(&kind, &original, &converted[0]);
        assert!(
            lost.is_empty(),
            "document {n} ({kind}) lost fields:\n{}\n{yaml}",
            lost.join("\n")
        );

        // Read back: no warning, and the same objects as the article's document read directly.
        let reread = arbiter_core::model::load::load_str(&yaml, Path::new("converted.yaml"))
            .unwrap_or_else(|e| panic!("document {n}: the output does not load: {e}\n{yaml}"));
        assert!(
            reread.warnings.is_empty(),
            "document {n}: {:?}",
            reread.warnings
        );
        let direct = arbiter_core::model::load::load_str(text, Path::new("article.yaml"))
            .unwrap_or_else(|e| panic!("document {n}: {e}"));
        let last = reread
            .documents
            .last()
            .unwrap_or_else(|| panic!("document {n}: no output"));
        assert_eq!(
            format!("{:?}", last.manifest),
            format!("{:?}", direct.documents[0].manifest),
            "document {n}"
        );
        // Each article form read is told, naming what was written.
        for warning in &direct.warnings {
            assert!(
                stderr.contains(&warning.message),
                "document {n}: {:?} not told:\n{stderr}",
                warning.message
            );
            assert!(
                warning.message.contains("`arbiter convert` writes"),
                "{}",
                warning.message
            );
        }
    }
}
