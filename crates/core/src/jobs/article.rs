//! The seed article's `kubeflow.org/v1 PipelineRun` (no Kubeflow or Kueue
//! release serves that kind): one pod set `pipeline` asking for the
//! `spec.runtimeConfig.parameters.gpu-count` GPUs of the run, held with
//! `spec.suspend` — the `JobIntegration` of
//! `examples/integrations/article-pipelinerun.yaml`, compiled into the core
//! so the article's manifests mean what the article says without it.
//!
//! It is *not* a built-in kind: the operator queues it only when given that
//! file (`arbiter run --integrations`). The simulator reads a scenario's
//! PipelineRuns with it when the scenario defines no JobIntegration of its
//! own for the kind, and `arbiter convert` writes the JobIntegration beside
//! them; both tell the user with [`note`]. Pure data, no I/O.

use super::{IntegrationSpec, JobError};

/// `apiVersion` of the article's PipelineRun.
pub const API_VERSION: &str = "kubeflow.org/v1";
/// `kind` of the article's PipelineRun.
pub const KIND: &str = "PipelineRun";

/// The `JobIntegration` manifest, as shipped in `examples/integrations/`.
pub const JOB_INTEGRATION_YAML: &str =
    include_str!("../../../../examples/integrations/article-pipelinerun.yaml");

/// Whether `api_version`/`kind` is the article's PipelineRun.
pub fn is_pipeline_run(api_version: &str, kind: &str) -> bool {
    api_version == API_VERSION && kind == KIND
}

/// The integration that reads the article's PipelineRun.
pub fn pipeline_run() -> Result<IntegrationSpec, JobError> {
    IntegrationSpec::from_manifest_yaml(JOB_INTEGRATION_YAML).map(|(spec, _)| spec)
}

/// What the user is told where an article PipelineRun is read or converted.
pub fn note() -> String {
    format!(
        "{API_VERSION} {KIND} is the article's kind (Kubeflow and Kueue serve none): read as one pod set `pipeline` asking for `spec.runtimeConfig.parameters.gpu-count` nvidia.com/gpu, held by `spec.suspend`, through the JobIntegration of examples/integrations/article-pipelinerun.yaml; `arbiter convert` writes that JobIntegration before the first PipelineRun (in a cluster, give it to `arbiter run --integrations`)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::Integrations;
    use crate::model::Amount;

    #[test]
    fn the_articles_pipeline_run_asks_for_its_gpu_count() {
        let spec = pipeline_run().unwrap_or_else(|e| panic!("{e}"));
        assert!(is_pipeline_run(&spec.api_version, &spec.kind));
        let integrations = Integrations::with_extra(vec![spec]).unwrap_or_else(|e| panic!("{e}"));
        let run = serde_json::json!({
            "apiVersion": "kubeflow.org/v1", "kind": "PipelineRun",
            "metadata": {"name": "ai-training-pipeline", "labels": {"kueue.x-k8s.io/queue-name": "ai-queue"}},
            "spec": {"pipelineRef": {"name": "ai-training-pipeline"},
                     "runtimeConfig": {"parameters": {"gpu-count": "2", "image": "tensorflow/tensorflow:2.13.0-gpu-jupyter"}}}
        });
        let info = integrations
            .extract(&run)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("PipelineRun not recognised"));
        assert_eq!(info.queue_name.as_deref(), Some("ai-queue"));
        assert_eq!(info.pod_sets.len(), 1);
        assert_eq!(info.pod_sets[0].name, "pipeline");
        assert_eq!(
            info.pod_sets[0].requests.get("nvidia.com/gpu"),
            Some(&Amount::from_milli(2000))
        );
    }
}
