//! What a job integration *is*, as data: the job's GVK, a CEL expression
//! that yields its pod sets, and the field that holds/releases it (docs/design.md §2).
//!
//! Built-in kinds are rows of [`builtin_integrations`]; a platform team adds
//! a kind with a `JobIntegration` manifest, read by
//! [`IntegrationSpec::from_manifest_yaml`]. Nothing here compiles or runs
//! CEL (that is `jobs::Integrations`), and no kind gets Rust code of its own.
//!
//! The pod-set expression sees the job as the variable `object` (JSON
//! integers are CEL `int`; besides the standard library it has
//! `lowerAscii()`, `upperAscii()` and `trim()`, and it runs under the
//! limits and budget of `crate::cel_bounds`, as policies do) and yields a
//! list of maps `{name: string, count?: int (default 1), minCount?: int,
//! template?: PodTemplateSpec | requests?: {resource: quantity},
//! templatePath?: string}`; `templatePath` names where the template sits in
//! the job (e.g. `spec.template`), so the operator can inject the admitted
//! flavor's node labels and tolerations there. Pod sets come out in list order, so iterate over a fixed list
//! of keys rather than over a map (CEL map order is unspecified).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::JobError;
use crate::model::api::API_VERSION;

/// How a job kind becomes pod sets and how it is held until admission.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationSpec {
    /// The job's `apiVersion`, e.g. `kubeflow.org/v1`.
    pub api_version: String,
    /// The job's `kind`, e.g. `PyTorchJob`.
    pub kind: String,
    /// CEL over `object` (the job as JSON) yielding the list of pod sets.
    pub pod_sets: String,
    /// The field that keeps the job from starting pods.
    pub hold: HoldSpec,
    /// How the job says it ended; absent, the common reading of
    /// conditions and phase ([`FinishedSpec::common`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<FinishedSpec>,
    /// Fields the API server or the job's controller fills in when the job
    /// is created (JSON pointers, e.g. `/spec/selector/matchLabels/controller-uid`):
    /// left out when Arbiter creates a failed job anew to run it again
    /// (`retryPolicy`), objects they leave empty with them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generated: Vec<String>,
    /// CEL over `object`: `true` once every pod of the admitted job is
    /// ready or done (`waitForPodsReady`); absent, the kind cannot say, and
    /// its pods count as ready at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_ready: Option<String>,
}

/// How a job kind says it ran to its end: CEL over `object` (the job as
/// JSON, under the same limits as `podSets`). A job is finished once
/// `succeeded` or `failed` yields `true`; `failed` wins when both do.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinishedSpec {
    /// `true` once the job ran to a successful end.
    pub succeeded: String,
    /// `true` once the job failed (its controller gave up on it).
    pub failed: String,
    /// Why it failed, a string, shown on its Workload and in Events
    /// (absent: the job's kind says only that it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A condition of type in `types` with `status`, in `object.status.conditions`.
fn any_condition(types: &str, status: &str) -> String {
    format!("c, has(c.type) && has(c.status) && c.type in [{types}] && c.status == '{status}'")
}

impl FinishedSpec {
    /// What most job kinds say: a `Complete` or `Succeeded` condition
    /// `True` (batch Job, Kubeflow's kinds, TrainJob, Tekton) or phase
    /// `Succeeded` (Argo) for success; a `Failed` condition `True`, a
    /// `Succeeded` condition `False` (Tekton) or phase `Failed`/`Error`
    /// (Argo) for failure, its message the failed condition's reason and
    /// message.
    pub fn common() -> FinishedSpec {
        let conditions = "has(object.status) && has(object.status.conditions)";
        let phase = "has(object.status) && has(object.status.phase)";
        let failed = "c, has(c.type) && has(c.status) \
            && ((c.type == 'Failed' && c.status == 'True') || (c.type == 'Succeeded' && c.status == 'False'))";
        FinishedSpec {
            succeeded: format!(
                "({conditions} && object.status.conditions.exists({})) || ({phase} && object.status.phase == 'Succeeded')",
                any_condition("'Complete', 'Succeeded'", "True")
            ),
            failed: format!(
                "({conditions} && object.status.conditions.exists({failed})) || ({phase} && object.status.phase in ['Failed', 'Error'])"
            ),
            message: Some(format!(
                "{conditions} && object.status.conditions.exists({failed}) \
                 ? object.status.conditions.filter({failed}).map(c, \
                     (has(c.reason) ? c.reason : 'Failed') + (has(c.message) ? ': ' + c.message : ''))[0] \
                 : ({phase} ? 'phase ' + object.status.phase : 'failed')"
            )),
        }
    }
}

/// The field that holds a job (e.g. `spec.suspend`) and the values meaning
/// held and released. A `released` of `null` means "remove the field".
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HoldSpec {
    /// Dot-separated path from the object's root, e.g. `spec.runPolicy.suspend`.
    pub path: String,
    /// Value written to hold the job (must not be `null`).
    pub held: serde_json::Value,
    /// Value written to release it; `null` or absent removes the field.
    #[serde(default)]
    pub released: serde_json::Value,
    /// Status fields (JSON pointers) cleared through the status
    /// subresource once an admitted job is held again, before what
    /// admission injected is taken out of its template: `batch/v1 Job`'s
    /// `/status/startTime`, without which Kubernetes keeps a suspended
    /// Job's template immutable (as Kueue does).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clear_status: Vec<String>,
}

/// `arbiter.dev/v1alpha1 JobIntegration`: a job kind added by configuration.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobIntegrationManifest {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: JobIntegrationSpec,
}

/// The `spec` of a `JobIntegration` manifest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobIntegrationSpec {
    pub(crate) job_api_version: String,
    /// The `kind` of the jobs it describes.
    pub job_kind: String,
    /// CEL over `object` yielding the pod sets (see the module docs).
    pub pod_sets: String,
    /// How a job of this kind is held and released.
    pub hold: HoldSpec,
    /// How the job says it ended (absent: [`FinishedSpec::common`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<FinishedSpec>,
    /// See [`IntegrationSpec::generated`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generated: Vec<String>,
    /// See [`IntegrationSpec::pods_ready`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_ready: Option<String>,
}

impl From<JobIntegrationSpec> for IntegrationSpec {
    fn from(spec: JobIntegrationSpec) -> IntegrationSpec {
        IntegrationSpec {
            api_version: spec.job_api_version,
            kind: spec.job_kind,
            pod_sets: spec.pod_sets,
            hold: spec.hold,
            finished: spec.finished,
            generated: spec.generated,
            pods_ready: spec.pods_ready,
        }
    }
}

impl IntegrationSpec {
    /// `apiVersion Kind`, how messages name an integration.
    pub fn gvk(&self) -> String {
        format!("{} {}", self.api_version, self.kind)
    }

    /// Reads one `JobIntegration` manifest. Returns the spec and warnings for
    /// fields it does not know (reported with their path, never dropped silently).
    pub fn from_manifest_yaml(text: &str) -> Result<(IntegrationSpec, Vec<String>), JobError> {
        let manifest_error = |message: String| JobError::Manifest { message };
        let document = serde_yaml_ng::Deserializer::from_str(text);
        let mut unknown = Vec::new();
        let manifest: JobIntegrationManifest = serde_ignored::deserialize(document, |path| {
            unknown.push(format!("unknown field `{path}` ignored"))
        })
        .map_err(|e| manifest_error(e.to_string()))?;
        let name = manifest.metadata.name.unwrap_or_default();
        if manifest.api_version != API_VERSION || manifest.kind != "JobIntegration" {
            return Err(manifest_error(format!(
                "`{name}` is `{} {}`; expected `apiVersion: {API_VERSION}` and `kind: JobIntegration`",
                manifest.api_version, manifest.kind
            )));
        }
        Ok((manifest.spec.into(), unknown))
    }
}

/// `object.spec.<field>` replica types `types`, each a pod set named by the
/// replica type in lower case, `replicas` pods (default 1) of its `template`.
/// Expands to, for `pytorchReplicaSpecs` and `[Master, Worker]`:
/// `['Master', 'Worker'].filter(t, t in object.spec.pytorchReplicaSpecs).map(t,
/// {'name': t.lowerAscii(), 'count': 'replicas' in object.spec.pytorchReplicaSpecs[t]
/// ? object.spec.pytorchReplicaSpecs[t].replicas : 1, 'template': …})`.
fn replica_specs(field: &str, types: &[&str]) -> String {
    let types = types
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let replica = format!("object.spec.{field}[t]");
    format!(
        "[{types}].filter(t, t in object.spec.{field}).map(t, {{\
         'name': t.lowerAscii(), \
         'count': 'replicas' in {replica} ? {replica}.replicas : 1, \
         'template': 'template' in {replica} ? {replica}.template : {{}}, \
         'templatePath': 'spec.{field}.' + t + '.template'}})"
    )
}

fn hold(path: &str, held: serde_json::Value, released: serde_json::Value) -> HoldSpec {
    HoldSpec {
        path: path.to_string(),
        held,
        released,
        clear_status: Vec::new(),
    }
}

fn suspend(path: &str) -> HoldSpec {
    hold(
        path,
        serde_json::Value::Bool(true),
        serde_json::Value::Bool(false),
    )
}

fn integration(api_version: &str, kind: &str, pod_sets: String, hold: HoldSpec) -> IntegrationSpec {
    IntegrationSpec {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        pod_sets,
        hold,
        finished: None,
        generated: Vec::new(),
        pods_ready: None,
    }
}

/// `batch/v1 Job`: one pod set `main`; as Kueue, `parallelism` pods (default
/// 1), or `completions` when fewer.
const BATCH_JOB: &str = "[{'name': 'main', \
  'count': has(object.spec.parallelism) && has(object.spec.completions) \
      && object.spec.completions < object.spec.parallelism \
    ? object.spec.completions \
    : (has(object.spec.parallelism) ? object.spec.parallelism : 1), \
  'template': object.spec.template, 'templatePath': 'spec.template'}]";

/// What the API server adds to a `batch/v1 Job` it creates (without
/// `manualSelector`): the selector on the job's uid and its labels on the
/// template.
const BATCH_JOB_GENERATED: &[&str] = &[
    "/spec/selector/matchLabels/controller-uid",
    "/spec/selector/matchLabels/batch.kubernetes.io~1controller-uid",
    "/spec/template/metadata/labels/controller-uid",
    "/spec/template/metadata/labels/batch.kubernetes.io~1controller-uid",
    "/spec/template/metadata/labels/job-name",
    "/spec/template/metadata/labels/batch.kubernetes.io~1job-name",
];

/// A `batch/v1 Job`'s pods are ready, as Kueue reads it: ready and
/// succeeded pods at least as many as run at once (`parallelism`, or
/// `completions` when fewer; 1 by default).
const BATCH_JOB_PODS_READY: &str = "has(object.status) && \
  (has(object.status.ready) ? object.status.ready : 0) \
  + (has(object.status.succeeded) ? object.status.succeeded : 0) \
  >= (has(object.spec.parallelism) && has(object.spec.completions) \
      && object.spec.completions < object.spec.parallelism \
    ? object.spec.completions \
    : (has(object.spec.parallelism) ? object.spec.parallelism : 1))";

/// Kubeflow's training jobs and MPIJob: a `Running` (or `Succeeded`)
/// condition `True`, as Kueue reads them.
const RUNNING_CONDITION: &str = "has(object.status) && has(object.status.conditions) \
  && object.status.conditions.exists(c, has(c.type) && has(c.status) \
    && c.type in ['Running', 'Succeeded'] && c.status == 'True')";

/// `TrainJob`: `numNodes` pods (default 1) of `resourcesPerNode`. The
/// runtime's own pod template is not resolved here.
const TRAIN_JOB: &str = "[{'name': 'node', \
  'count': has(object.spec.trainer) && has(object.spec.trainer.numNodes) \
    ? object.spec.trainer.numNodes : 1, \
  'template': {'spec': {'containers': [{'name': 'node', \
    'resources': has(object.spec.trainer) && has(object.spec.trainer.resourcesPerNode) \
      ? object.spec.trainer.resourcesPerNode : {}}]}}}]";

/// Argo `Workflow` (Kubeflow Pipelines v2): one pod set per template that
/// runs a pod (`container`, `script` or `containerSet`), one pod each; user
/// sidecars run beside the main container. Template-level `nodeSelector`,
/// `tolerations` and `affinity` override the workflow's.
const ARGO_WORKFLOW: &str = "object.spec.templates\
  .filter(t, has(t.container) || has(t.script) || has(t.containerSet))\
  .map(t, {'name': t.name, 'count': 1, 'template': {'spec': {\
    'containers': (has(t.containerSet) ? t.containerSet.containers \
        : [has(t.container) ? t.container : t.script]) \
      + (has(t.sidecars) ? t.sidecars : []), \
    'initContainers': has(t.initContainers) ? t.initContainers : [], \
    'nodeSelector': has(t.nodeSelector) ? t.nodeSelector \
      : (has(object.spec.nodeSelector) ? object.spec.nodeSelector : {}), \
    'tolerations': has(t.tolerations) ? t.tolerations \
      : (has(object.spec.tolerations) ? object.spec.tolerations : []), \
    'affinity': has(t.affinity) ? t.affinity \
      : (has(object.spec.affinity) ? object.spec.affinity : {})}}})";

/// Tekton `PipelineRun`: one pod set per inline task (`tasks` and
/// `finally`), one pod each, whose containers are the task's steps and
/// sidecars (`computeResources`). The run's `taskRunTemplate.podTemplate`
/// gives node selector and tolerations.
const TEKTON_PIPELINE_RUN: &str = "(object.spec.pipelineSpec.tasks \
    + (has(object.spec.pipelineSpec.finally) ? object.spec.pipelineSpec.finally : []))\
  .filter(t, has(t.taskSpec))\
  .map(t, {'name': t.name, 'count': 1, 'template': {'spec': {\
    'containers': t.taskSpec.steps.map(s, {'name': has(s.name) ? s.name : '', \
        'resources': has(s.computeResources) ? s.computeResources : {}}) \
      + (has(t.taskSpec.sidecars) ? t.taskSpec.sidecars.map(s, {'name': has(s.name) ? s.name : '', \
        'resources': has(s.computeResources) ? s.computeResources : {}}) : []), \
    'nodeSelector': has(object.spec.taskRunTemplate) \
        && has(object.spec.taskRunTemplate.podTemplate) \
        && has(object.spec.taskRunTemplate.podTemplate.nodeSelector) \
      ? object.spec.taskRunTemplate.podTemplate.nodeSelector : {}, \
    'tolerations': has(object.spec.taskRunTemplate) \
        && has(object.spec.taskRunTemplate.podTemplate) \
        && has(object.spec.taskRunTemplate.podTemplate.tolerations) \
      ? object.spec.taskRunTemplate.podTemplate.tolerations : []}}})";

/// The job kinds Arbiter knows out of the box (docs/design.md §2), as data.
pub fn builtin_integrations() -> Vec<IntegrationSpec> {
    let run_policy = || suspend("spec.runPolicy.suspend");
    let kubeflow = |kind: &str, field: &str, types: &[&str]| IntegrationSpec {
        pods_ready: Some(RUNNING_CONDITION.to_string()),
        ..integration(
            "kubeflow.org/v1",
            kind,
            replica_specs(field, types),
            run_policy(),
        )
    };
    let mpi = |api_version: &str| IntegrationSpec {
        pods_ready: Some(RUNNING_CONDITION.to_string()),
        ..integration(
            api_version,
            "MPIJob",
            replica_specs("mpiReplicaSpecs", &["Launcher", "Worker"]),
            run_policy(),
        )
    };
    let batch_job = IntegrationSpec {
        generated: BATCH_JOB_GENERATED.iter().map(|p| p.to_string()).collect(),
        pods_ready: Some(BATCH_JOB_PODS_READY.to_string()),
        ..integration(
            "batch/v1",
            "Job",
            BATCH_JOB.to_string(),
            HoldSpec {
                clear_status: vec!["/status/startTime".to_string()],
                ..suspend("spec.suspend")
            },
        )
    };
    vec![
        batch_job,
        kubeflow("PyTorchJob", "pytorchReplicaSpecs", &["Master", "Worker"]),
        kubeflow(
            "TFJob",
            "tfReplicaSpecs",
            &["Chief", "Master", "PS", "Worker", "Evaluator"],
        ),
        kubeflow("XGBoostJob", "xgbReplicaSpecs", &["Master", "Worker"]),
        kubeflow("PaddleJob", "paddleReplicaSpecs", &["Master", "Worker"]),
        kubeflow("JAXJob", "jaxReplicaSpecs", &["Worker"]),
        mpi("kubeflow.org/v2beta1"),
        // The training operator's MPIJob (the CRD Kubeflow ships as kubeflow.org/v1).
        mpi("kubeflow.org/v1"),
        integration(
            "trainer.kubeflow.org/v1alpha1",
            "TrainJob",
            TRAIN_JOB.to_string(),
            suspend("spec.suspend"),
        ),
        integration(
            "argoproj.io/v1alpha1",
            "Workflow",
            ARGO_WORKFLOW.to_string(),
            suspend("spec.suspend"),
        ),
        integration(
            "tekton.dev/v1",
            "PipelineRun",
            TEKTON_PIPELINE_RUN.to_string(),
            hold(
                "spec.status",
                serde_json::Value::String("PipelineRunPending".to_string()),
                serde_json::Value::Null,
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_into_a_spec_and_reports_unknown_fields() {
        let (spec, warnings) = IntegrationSpec::from_manifest_yaml(
            r#"
apiVersion: arbiter.dev/v1alpha1
kind: JobIntegration
metadata: {name: kfp-v1-pipelinerun}
spec:
  jobApiVersion: kubeflow.org/v1
  jobKind: PipelineRun
  podSets: "[]"
  hold: {path: spec.suspend, held: true, released: false, colour: blue}
"#,
        )
        .unwrap();
        assert_eq!(spec.gvk(), "kubeflow.org/v1 PipelineRun");
        assert_eq!(spec.hold.held, serde_json::json!(true));
        assert_eq!(warnings, ["unknown field `spec.hold.colour` ignored"]);
    }

    #[test]
    fn a_manifest_of_another_group_is_refused() {
        let error = IntegrationSpec::from_manifest_yaml(
            "apiVersion: example.com/v1\nkind: JobIntegration\nmetadata: {name: x}\n\
             spec: {jobApiVersion: a/v1, jobKind: B, podSets: '[]', hold: {path: spec.x, held: true}}",
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("arbiter.dev/v1alpha1"),
            "{error}"
        );
    }
}
