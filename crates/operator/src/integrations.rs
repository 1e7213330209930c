//! User-defined job kinds for the operator: `JobIntegration` manifests
//! from files (`arbiter run --integrations FILE`, e.g. a mounted
//! ConfigMap), read exactly as the simulator reads them from a scenario,
//! added to the built-in kinds. The driver watches and holds their jobs,
//! and the mutating webhook holds them, like any built-in kind.

use std::path::{Path, PathBuf};

use arbiter_core::jobs::{IntegrationSpec, Integrations};
use arbiter_core::model::api::API_VERSION;
use arbiter_core::model::load::{load_str, Manifest};

/// Why the integrations could not be read; each message names the file
/// (and document) and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct IntegrationsError(pub Vec<String>);

/// The built-in kinds and those of the `JobIntegration`s in `files`, with
/// the warnings (unknown fields) to log.
pub fn read(files: &[PathBuf]) -> Result<(Integrations, Vec<String>), IntegrationsError> {
    let mut specs = Vec::new();
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        match read_file(file) {
            Ok((mut found, mut unknown)) => {
                if found.is_empty() {
                    errors.push(format!(
                        "{}: holds no JobIntegration; give files of `apiVersion: {API_VERSION}`, `kind: JobIntegration` documents",
                        file.display()
                    ));
                }
                specs.append(&mut found);
                warnings.append(&mut unknown);
            }
            Err(mut e) => errors.append(&mut e),
        }
    }
    if !errors.is_empty() {
        return Err(IntegrationsError(errors));
    }
    Integrations::with_extra(specs)
        .map(|i| (i, warnings))
        .map_err(|e| IntegrationsError(vec![e.to_string()]))
}

fn read_file(file: &Path) -> Result<(Vec<IntegrationSpec>, Vec<String>), Vec<String>> {
    let shown = file.display();
    let text =
        std::fs::read_to_string(file).map_err(|e| vec![format!("{shown}: cannot be read: {e}")])?;
    let loaded = load_str(&text, file).map_err(|e| vec![e.to_string()])?;
    let mut specs = Vec::new();
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    for document in loaded.documents {
        let source = &document.source;
        match &document.manifest {
            Manifest::Other {
                api_version,
                kind,
                object,
            } if api_version == API_VERSION && kind == "JobIntegration" => {
                // JSON is YAML: the integration's own reader takes it.
                match IntegrationSpec::from_manifest_yaml(&object.to_string()) {
                    Ok((spec, unknown)) => {
                        warnings.extend(unknown.into_iter().map(|w| format!("{source}: {w}")));
                        specs.push(spec);
                    }
                    Err(e) => errors.push(format!("{source}: {e}")),
                }
            }
            _ => errors.push(format!(
                "{source}: not a JobIntegration; an --integrations file holds only `apiVersion: {API_VERSION}`, `kind: JobIntegration` documents"
            )),
        }
    }
    if errors.is_empty() {
        Ok((specs, warnings))
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    const PIPELINE_RUN: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: JobIntegration
metadata: {name: article-pipelinerun}
spec:
  jobApiVersion: kubeflow.org/v1
  jobKind: PipelineRun
  podSets: "[{'name': 'pipeline', 'count': 1, 'requests': {'nvidia.com/gpu': object.spec.runtimeConfig.parameters['gpu-count']}}]"
  hold: {path: spec.suspend, held: true, released: false}
"#;

    #[test]
    fn a_file_of_integrations_adds_its_kinds() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "kinds.yaml", PIPELINE_RUN);
        let (integrations, warnings) = read(&[file]).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(integrations
            .find("kubeflow.org/v1", "PipelineRun")
            .is_some());
        assert!(integrations.find("batch/v1", "Job").is_some());
    }

    #[test]
    fn what_is_not_an_integration_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let other = write(
            dir.path(),
            "other.yaml",
            "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: a}\n",
        );
        let empty = write(dir.path(), "empty.yaml", "");
        let error = read(&[other, empty, dir.path().join("missing.yaml")])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("other.yaml") && error.contains("not a JobIntegration"),
            "{error}"
        );
        assert!(
            error.contains("empty.yaml: holds no JobIntegration"),
            "{error}"
        );
        assert!(error.contains("missing.yaml: cannot be read"), "{error}");
    }

    #[test]
    fn a_bad_integration_names_the_file_and_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(
            dir.path(),
            "bad.yaml",
            &PIPELINE_RUN.replace("'count': 1", "'count': ["),
        );
        let error = read(&[file]).unwrap_err().to_string();
        assert!(error.contains("PipelineRun"), "{error}");
    }
}
