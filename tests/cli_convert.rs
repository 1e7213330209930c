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
            "(document 2): field spec.admissionChecks is a Kueue feature not supported by Arbiter, ignored",
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
fn crds_prints_six_crds() {
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
            "Workload"
        ]
    );
}
