//! Job integrations: from a job object (a `batch/v1 Job`, a Kubeflow
//! training job, a pipeline run, any kind added by configuration) to the
//! pod sets the scheduler queues, and the field that holds the job until
//! admission (docs/design.md §2, §3 "Pod-set names").
//!
//! One mechanism serves every kind: an [`IntegrationSpec`] (GVK, a CEL
//! expression yielding the pod sets, a hold path and values) is compiled
//! once into an [`Integration`]; built-in kinds are rows of
//! [`builtin_integrations`], user kinds come from `JobIntegration`
//! manifests. No kind has a Rust code path of its own, and nothing here
//! does I/O, reads a clock, or makes a scheduling decision. Called by the
//! simulator's scenario loader and the operator's job controllers, which
//! turn a [`JobInfo`] into a Workload and use [`Integration::set_held`] to
//! hold and release the job.

pub mod article;
mod error;
mod hold;
mod pod_sets;
mod requests;
mod spec;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use cel::parser::Expression;
use cel::{Context, Env};
use k8s_openapi::api::core::v1::{NodeSelector, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::model::api::TopologyRequest;

pub use error::JobError;
pub(crate) use requests::pod_requests;
pub use spec::{builtin_integrations, FinishedSpec, HoldSpec, IntegrationSpec, JobIntegrationSpec};

use crate::cel_bounds::{self, CelLimits};
use crate::model::api::{Workload, API_VERSION};
use crate::model::Amount;
use hold::HoldPath;

/// Label naming the LocalQueue a job goes to (Kueue's label is also read).
pub const QUEUE_NAME_LABELS: [&str; 2] = ["arbiter.dev/queue-name", "kueue.x-k8s.io/queue-name"];
/// Label naming the job's WorkloadPriorityClass (Kueue's label is also read).
pub const PRIORITY_CLASS_LABELS: [&str; 2] = [
    "arbiter.dev/priority-class",
    "kueue.x-k8s.io/priority-class",
];

/// What the scheduler needs to know about one job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobInfo {
    /// The job object's `apiVersion`.
    pub api_version: String,
    /// The job object's `kind`.
    pub kind: String,
    /// `default` when the object names none.
    pub namespace: String,
    /// The job object's `metadata.name`.
    pub name: String,
    /// The job object's labels.
    pub labels: BTreeMap<String, String>,
    /// The job object's annotations.
    pub annotations: BTreeMap<String, String>,
    /// From [`QUEUE_NAME_LABELS`], first found wins.
    pub queue_name: Option<String>,
    /// From [`PRIORITY_CLASS_LABELS`], first found wins.
    pub priority_class: Option<String>,
    /// In the order the integration yields them (never empty).
    pub pod_sets: Vec<PodSetInfo>,
}

/// One group of identical pods of a job.
#[derive(Clone, Debug, PartialEq)]
pub struct PodSetInfo {
    /// The pod set's name, unique in its job.
    pub name: String,
    /// Pods in the set.
    pub count: u32,
    /// Fewest pods the job can run with (partial admission).
    pub min_count: Option<u32>,
    /// Requests of ONE pod, computed as Kubernetes does ([`pod_requests`]).
    pub requests: BTreeMap<String, Amount>,
    /// The pod template's `nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// The pod template's required node affinity, if any.
    pub required_node_affinity: Option<NodeSelector>,
    /// The pod template's tolerations.
    pub tolerations: Vec<Toleration>,
    /// Dot-separated path of the pod set's `PodTemplateSpec` in the job
    /// object (the expression's optional `templatePath`), where a driver
    /// injects the admitted flavor's node labels and tolerations. `None`:
    /// the job has no template to inject into; it is only released.
    pub template_path: Option<String>,
    /// The pod template's topology request (Kueue's
    /// `podset-required-topology` / `podset-preferred-topology`), if any.
    pub topology: Option<TopologyRequest>,
}

impl PodSetInfo {
    fn named(name: &str) -> PodSetInfo {
        PodSetInfo {
            name: name.to_string(),
            count: 1,
            min_count: None,
            requests: BTreeMap::new(),
            node_selector: BTreeMap::new(),
            required_node_affinity: None,
            tolerations: Vec::new(),
            template_path: None,
            topology: None,
        }
    }
}

/// How a job ended, as its integration reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Succeeded.
    Succeeded,
    /// Failed; `message` says why (the job's own words where it has any).
    Failed {
        /// Why it failed.
        message: String,
    },
}

/// An integration compiled and ready to run.
pub struct Integration {
    /// What it was compiled from.
    pub spec: IntegrationSpec,
    /// The pod-set expression, parsed, checked and instrumented for the
    /// run-time meter (`cel_bounds`).
    expression: Expression,
    /// `finished`'s expressions (or the common ones), compiled the same way.
    succeeded: Expression,
    failed: Expression,
    failure_message: Option<Expression>,
    /// `podsReady`, compiled the same way (absent: the kind cannot say).
    pods_ready: Option<Expression>,
    hold_path: HoldPath,
    env: Arc<Env>,
}

impl fmt::Debug for Integration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Integration")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Integration {
    fn compile(spec: IntegrationSpec, env: &Arc<Env>) -> Result<Integration, JobError> {
        let invalid = |problem: String| JobError::InvalidIntegration {
            integration: spec.gvk(),
            problem,
        };
        if spec.api_version.is_empty() || spec.kind.is_empty() {
            return Err(invalid("`apiVersion` and `kind` must both be set".into()));
        }
        let Some(hold_path) = HoldPath::parse(&spec.hold.path) else {
            return Err(invalid(format!(
                "hold path `{}` is not a dot-separated field path like `spec.suspend`",
                spec.hold.path
            )));
        };
        if let Some(bad) = spec
            .hold
            .clear_status
            .iter()
            .find(|p| !p.starts_with("/status/"))
        {
            return Err(invalid(format!(
                "`hold.clearStatus` entry `{bad}` is not a JSON pointer into the status; write it like `/status/startTime`"
            )));
        }
        if let Some(bad) = spec.generated.iter().find(|p| !p.starts_with('/')) {
            return Err(invalid(format!(
                "`generated` entry `{bad}` is not a JSON pointer; write it like `/spec/selector` (a `/` before each field, `~1` for a `/` inside a key)"
            )));
        }
        if spec.hold.held.is_null() || spec.hold.held == spec.hold.released {
            return Err(invalid(
                "`hold.held` must be a value other than null and other than `hold.released`".into(),
            ));
        }
        let compile = |field: &'static str, text: &str| {
            let limits = CelLimits::default();
            let compile_error = |e: cel_bounds::LimitError| JobError::Compile {
                integration: spec.gvk(),
                field,
                message: e.to_string(),
            };
            let mut expression = cel_bounds::parse(env, text, &limits).map_err(compile_error)?;
            // `object` is the only variable, and nothing bounds its
            // collections up front: the estimate assumes UNKNOWN_LEN
            // entries of each, and the run-time meter stops whatever goes
            // past the budget.
            cel_bounds::bound(&mut expression, &limits, &|_| None, UNKNOWN_LEN)
                .map_err(compile_error)?;
            Ok::<_, JobError>(expression)
        };
        let expression = compile("spec.podSets", &spec.pod_sets)?;
        let finished = spec.finished.clone().unwrap_or_else(FinishedSpec::common);
        let succeeded = compile("spec.finished.succeeded", &finished.succeeded)?;
        let failed = compile("spec.finished.failed", &finished.failed)?;
        let failure_message = match &finished.message {
            Some(text) => Some(compile("spec.finished.message", text)?),
            None => None,
        };
        let pods_ready = match &spec.pods_ready {
            Some(text) => Some(compile("spec.podsReady", text)?),
            None => None,
        };
        Ok(Integration {
            spec,
            expression,
            succeeded,
            failed,
            failure_message,
            pods_ready,
            hold_path,
            env: Arc::clone(env),
        })
    }

    /// Whether every pod of the job is ready or done (`spec.podsReady`);
    /// `None` when the kind cannot say. An expression that fails on the
    /// job is an error; the pods are then best taken as not ready.
    pub fn pods_ready(&self, object: &Value) -> Result<Option<bool>, JobError> {
        let job = describe_job(&self.spec.kind, object);
        self.pods_ready_in(&job, &self.context(object))
    }

    fn pods_ready_in(&self, job: &str, context: &Context) -> Result<Option<bool>, JobError> {
        let Some(expression) = &self.pods_ready else {
            return Ok(None);
        };
        let problem = match self.run(job, expression, context) {
            Ok(Value::Bool(ready)) => return Ok(Some(ready)),
            Ok(other) => format!("it yielded {other}, not a bool"),
            Err(JobError::Evaluate { message, .. }) => message,
            Err(other) => other.to_string(),
        };
        Err(JobError::Finished {
            job: job.to_string(),
            integration: self.spec.gvk(),
            field: "spec.podsReady",
            message: problem,
        })
    }

    /// Whether and how the job ended (`spec.finished`). An expression that
    /// fails on the job is an error; the job is then best taken as running.
    pub fn ended(&self, object: &Value) -> Result<Option<Ended>, JobError> {
        let job = describe_job(&self.spec.kind, object);
        self.ended_in(&job, &self.context(object))
    }

    /// [`Integration::ended`] and [`Integration::pods_ready`] of one
    /// version of a job, which is made a CEL value once for both.
    pub fn progress(&self, object: &Value) -> Progress {
        let job = describe_job(&self.spec.kind, object);
        let context = self.context(object);
        Progress {
            ended: self.ended_in(&job, &context),
            pods_ready: self.pods_ready_in(&job, &context),
        }
    }

    fn ended_in(&self, job: &str, context: &Context) -> Result<Option<Ended>, JobError> {
        let truth = |field: &'static str, expression: &Expression| {
            let problem = match self.run(job, expression, context) {
                Ok(Value::Bool(b)) => return Ok(b),
                Ok(other) => format!("it yielded {other}, not a bool"),
                Err(JobError::Evaluate { message, .. }) => message,
                Err(other) => other.to_string(),
            };
            Err(JobError::Finished {
                job: job.to_string(),
                integration: self.spec.gvk(),
                field,
                message: problem,
            })
        };
        if truth("spec.finished.failed", &self.failed)? {
            let said = self
                .failure_message
                .as_ref()
                .and_then(|e| self.run(job, e, context).ok());
            let message = match said {
                Some(Value::String(m)) if !m.is_empty() => m,
                _ => "the job failed".to_string(),
            };
            return Ok(Some(Ended::Failed { message }));
        }
        if truth("spec.finished.succeeded", &self.succeeded)? {
            return Ok(Some(Ended::Succeeded));
        }
        Ok(None)
    }

    /// Whether the job's hold field has the `held` value.
    pub fn is_held(&self, object: &Value) -> bool {
        self.hold_path.get(object) == Some(&self.spec.hold.held)
    }

    /// Holds (`held = true`) or releases the job by writing its hold field.
    /// Releasing writes the `released` value (removing the field when it is
    /// `null`) only if the job is held, so a value set by someone else — a
    /// cancelled Tekton run's `spec.status` — is left alone. Errors when a
    /// field on the path is not an object; the object is then unchanged.
    pub fn set_held(&self, object: &mut Value, held: bool) -> Result<(), JobError> {
        let value = if held {
            self.spec.hold.held.clone()
        } else if self.is_held(object) {
            self.spec.hold.released.clone()
        } else {
            return Ok(());
        };
        self.hold_path
            .set(object, value)
            .map_err(|problem| JobError::Job {
                job: describe_job(&self.spec.kind, object),
                problem,
            })
    }

    /// The job's metadata and pod sets. The object must be of this
    /// integration's kind.
    pub fn extract(&self, object: &Value) -> Result<JobInfo, JobError> {
        let job = describe_job(&self.spec.kind, object);
        let job_error = |problem: String| JobError::Job {
            job: job.clone(),
            problem,
        };
        let api_version = object.get("apiVersion").and_then(Value::as_str);
        let kind = object.get("kind").and_then(Value::as_str);
        if api_version != Some(&self.spec.api_version) || kind != Some(&self.spec.kind) {
            return Err(job_error(format!(
                "is not a `{}` (apiVersion {api_version:?}, kind {kind:?})",
                self.spec.gvk()
            )));
        }
        let metadata = match object.get("metadata") {
            None => return Err(job_error("has no `metadata`".into())),
            Some(metadata) => {
                serde_path_to_error::deserialize::<_, ObjectMeta>(metadata).map_err(|e| {
                    job_error(format!("`metadata.{}` is invalid: {}", e.path(), e.inner()))
                })?
            }
        };
        let name = match metadata.name {
            Some(name) if !name.is_empty() => name,
            _ => return Err(job_error("has no `metadata.name`".into())),
        };
        let output = self.run(&job, &self.expression, &self.context(object))?;
        let pod_sets = pod_sets::from_output(&job, &self.spec.gvk(), output)?;
        let annotations = metadata.annotations.unwrap_or_default();
        Ok(JobInfo::new(
            self.spec.api_version.clone(),
            self.spec.kind.clone(),
            metadata.namespace,
            name,
            metadata.labels.unwrap_or_default(),
            annotations,
            pod_sets,
        ))
    }

    /// The job as the expressions' `object`: made a CEL value once, its
    /// strings borrowed, for as many expressions as read it.
    fn context<'a>(&self, object: &'a Value) -> Context<'a, 'a> {
        let mut context = Context::with_env(Arc::clone(&self.env));
        context.add_variable_as_val("object", crate::cel_json::borrowed(object));
        context
    }

    /// One of the integration's expressions on the job, metered.
    fn run(
        &self,
        job: &str,
        expression: &Expression,
        context: &Context,
    ) -> Result<Value, JobError> {
        let failed = |message: String| JobError::Evaluate {
            job: job.to_string(),
            integration: self.spec.gvk(),
            message,
        };
        let (output, overrun) = cel_bounds::metered(cel_bounds::DEFAULT_BUDGET, || {
            cel::Value::resolve(expression, context)
        });
        if let Some(overrun) = overrun {
            return Err(failed(overrun.to_string()));
        }
        let output = output.map_err(|e| failed(e.to_string()))?;
        output.json().map_err(|e| failed(e.to_string()))
    }
}

/// How far a job has got, as its integration reads one version of it.
#[derive(Debug)]
pub struct Progress {
    /// [`Integration::ended`].
    pub ended: Result<Option<Ended>, JobError>,
    /// [`Integration::pods_ready`].
    pub pods_ready: Result<Option<bool>, JobError>,
}

/// Every known job kind, compiled, by (apiVersion, kind). Cloning shares the compiled kinds.
#[derive(Clone)]
pub struct Integrations {
    /// Shared, not copied: the built-in kinds are compiled once per process.
    by_gvk: BTreeMap<(String, String), Arc<Integration>>,
}

impl fmt::Debug for Integrations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.by_gvk.keys()).finish()
    }
}

impl Integrations {
    /// The built-in kinds of [`builtin_integrations`].
    /// The built-ins are compiled once per process (every scenario load
    /// and every `with_extra` starts from them) and shared.
    pub fn builtin() -> Integrations {
        type Compiled = BTreeMap<(String, String), Arc<Integration>>;
        static BUILTIN: OnceLock<Compiled> = OnceLock::new();
        let by_gvk = BUILTIN
            .get_or_init(|| {
                let env = cel_env();
                builtin_integrations()
                    .into_iter()
                    .map(|spec| {
                        let key = (spec.api_version.clone(), spec.kind.clone());
                        // Built-ins are constants of this crate, proven to compile by a unit test.
                        let integration = Integration::compile(spec, &env)
                            .unwrap_or_else(|e| panic!("built-in job integration: {e}"));
                        (key, Arc::new(integration))
                    })
                    .collect()
            })
            .clone();
        Integrations { by_gvk }
    }

    /// The built-in kinds plus `specs`. A user-defined kind with the GVK of a
    /// built-in one replaces it; two user-defined kinds with one GVK are an error.
    pub fn with_extra(specs: Vec<IntegrationSpec>) -> Result<Integrations, JobError> {
        let mut integrations = Integrations::builtin();
        let env = cel_env();
        let mut added = Vec::new();
        for spec in specs {
            let key = (spec.api_version.clone(), spec.kind.clone());
            if added.contains(&key) {
                return Err(JobError::InvalidIntegration {
                    integration: spec.gvk(),
                    problem: "is defined twice; keep one JobIntegration per apiVersion and kind"
                        .into(),
                });
            }
            let integration = Integration::compile(spec, &env)?;
            integrations
                .by_gvk
                .insert(key.clone(), Arc::new(integration));
            added.push(key);
        }
        Ok(integrations)
    }

    /// The integration for jobs of this `apiVersion` and `kind`, if any.
    pub fn find(&self, api_version: &str, kind: &str) -> Option<&Integration> {
        self.by_gvk
            .get(&(api_version.to_string(), kind.to_string()))
            .map(Arc::as_ref)
    }

    /// The job's info; `None` when the object is not of a known job kind.
    pub fn extract(&self, object: &Value) -> Result<Option<JobInfo>, JobError> {
        let api_version = object.get("apiVersion").and_then(Value::as_str);
        let kind = object.get("kind").and_then(Value::as_str);
        match (api_version, kind) {
            (Some(api_version), Some(kind)) => match self.find(api_version, kind) {
                Some(integration) => integration.extract(object).map(Some),
                None => Ok(None),
            },
            _ => Ok(None),
        }
    }

    /// The known kinds, as (apiVersion, kind), sorted.
    pub fn kinds(&self) -> impl Iterator<Item = (&str, &str)> {
        self.by_gvk.keys().map(|(a, k)| (a.as_str(), k.as_str()))
    }
}

/// The CEL environment pod-set expressions run in: the standard library
/// and what `cel_bounds::register` adds (`lowerAscii()`, `upperAscii()`,
/// `trim()` and the meter's function) — what policies have, no more.
fn cel_env() -> Arc<Env> {
    let mut env = Env::stdlib();
    // Declaring these on a fresh stdlib cannot conflict.
    if let Err(e) = cel_bounds::register(&mut env) {
        unreachable!("declaring the bounded CEL functions on a fresh stdlib: {e}");
    }
    Arc::new(env)
}

/// The entries (or bytes) the cost estimate assumes of each collection of
/// a job object.
const UNKNOWN_LEN: u64 = 100;

/// The job info of a `Workload` given directly (kind `Workload`): pod sets
/// from each `template`, or from the `requests` shorthand.
pub fn job_info_from_workload(wl: &Workload) -> Result<JobInfo, JobError> {
    let namespace = wl.metadata.namespace.clone();
    let name = wl.metadata.name.clone().unwrap_or_default();
    let job = format!(
        "Workload {}/{name}",
        namespace.as_deref().unwrap_or("default")
    );
    if name.is_empty() {
        return Err(JobError::Job {
            job,
            problem: "has no `metadata.name`".into(),
        });
    }
    if wl.spec.pod_sets.is_empty() {
        return Err(JobError::Job {
            job,
            problem: "has no `spec.podSets`; give at least one {name, count, template|requests}"
                .into(),
        });
    }
    let mut pod_sets: Vec<PodSetInfo> = Vec::with_capacity(wl.spec.pod_sets.len());
    let annotations = wl.metadata.annotations.clone().unwrap_or_default();
    for pod_set in &wl.spec.pod_sets {
        let template_annotations = pod_set
            .template
            .as_ref()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref());
        let topology = TopologyRequest::from_annotations(|key| {
            template_annotations?.get(key).map(String::as_str)
        });
        if pod_sets.iter().any(|p| p.name == pod_set.name) || pod_set.name.is_empty() {
            return Err(JobError::PodSet {
                job,
                pod_set: pod_set.name.clone(),
                field: "name".into(),
                problem: "must be non-empty and unique within the workload".into(),
            });
        }
        let mut info = match (&pod_set.template, &pod_set.requests) {
            (Some(_), Some(_)) => {
                return Err(JobError::PodSet {
                    job,
                    pod_set: pod_set.name.clone(),
                    field: "requests".into(),
                    problem: "is given together with `template`; give one or the other".into(),
                })
            }
            (Some(template), None) => pod_sets::from_pod_spec(
                &job,
                &pod_set.name,
                &template.spec.clone().unwrap_or_default(),
            )?,
            (None, Some(requests)) => PodSetInfo {
                requests: pod_sets::quantity_map(&job, &pod_set.name, requests)?,
                ..PodSetInfo::named(&pod_set.name)
            },
            (None, None) => PodSetInfo::named(&pod_set.name),
        };
        info.count = pod_set.count;
        info.min_count = pod_set.min_count;
        info.topology = topology;
        pod_sets::check_min_count(&job, &info)?;
        pod_sets.push(info);
    }
    let labels = wl.metadata.labels.clone().unwrap_or_default();
    let mut info = JobInfo::new(
        API_VERSION.to_string(),
        "Workload".to_string(),
        namespace,
        name,
        labels,
        annotations,
        pod_sets,
    );
    if let Some(queue_name) = &wl.spec.queue_name {
        info.queue_name = Some(queue_name.clone());
    }
    if let Some(priority_class) = &wl.spec.priority_class_name {
        info.priority_class = Some(priority_class.clone());
    }
    Ok(info)
}

impl JobInfo {
    fn new(
        api_version: String,
        kind: String,
        namespace: Option<String>,
        name: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
        pod_sets: Vec<PodSetInfo>,
    ) -> JobInfo {
        let first_label = |keys: [&str; 2]| keys.iter().find_map(|k| labels.get(*k).cloned());
        JobInfo {
            queue_name: first_label(QUEUE_NAME_LABELS),
            priority_class: first_label(PRIORITY_CLASS_LABELS),
            api_version,
            kind,
            namespace: namespace
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".to_string()),
            name,
            labels,
            annotations,
            pod_sets,
        }
    }
}

/// `Kind namespace/name`, how messages name a job (best effort on bad input).
fn describe_job(kind: &str, object: &Value) -> String {
    let metadata = object.get("metadata");
    let field = |key: &str| metadata.and_then(|m| m.get(key)).and_then(Value::as_str);
    let namespace = field("namespace")
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    let name = field("name")
        .filter(|n| !n.is_empty())
        .unwrap_or("<unnamed>");
    format!("{kind} {namespace}/{name}")
}

/// A JSON value in words, for error messages (`the string "abc"`, `a map`).
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a map".into(),
    }
}
