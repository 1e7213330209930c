//! A scenario: the loaded manifests turned into what the simulator runs —
//! the checked cluster, node pools, horizon and the stream of jobs with
//! their arrival and runtime. Expands `WorkloadGenerator`s (fixed interval,
//! or a seeded Poisson stream). Pure: takes loaded documents, no I/O.

mod pools;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use arbiter_core::jobs::{self, Integrations, JobInfo};
use arbiter_core::model::cluster::{
    Cluster, ClusterBuilder, FairPreemptionStrategies, Namespace, PodsReadyPolicy,
};
use arbiter_core::model::load::{self, Document, Loaded, Manifest, Source};
use arbiter_core::model::sim_api::{
    self, WorkloadGenerator, ARRIVAL_ANNOTATION, RUNTIME_ANNOTATION, STARTUP_ANNOTATION,
};
use arbiter_core::model::Millis;
use arbiter_core::model::{api, limits};
use arbiter_core::scheduler::capacity::PoolSpec;
use arbiter_core::scheduler::Carried;

/// A node pool with its provisioning delay.
#[derive(Clone, Debug)]
pub struct SimPool {
    pub spec: PoolSpec,
    pub provisioning_delay: Millis,
    /// Every node's labels: its flavor's `nodeLabels` and the pool's `labels`.
    pub labels: BTreeMap<String, String>,
}

/// One job as the simulator replays it.
#[derive(Clone, Debug)]
pub struct SimJob {
    pub info: JobInfo,
    pub explicit_priority: Option<i32>,
    pub arrival: Millis,
    /// `None`: runs until the end of the simulation.
    pub runtime: Option<Millis>,
    /// From admission to every pod ready (`sim.arbiter.dev/startup`);
    /// `None`: they never start.
    pub startup: Option<Millis>,
    pub source: String,
    /// Where it stood before the run began (a run from a live cluster);
    /// `None`: it arrives at `arrival` as new.
    pub prior: Option<Prior>,
}

/// What a job brings into a run that starts from a live cluster
/// (`arbiter simulate --from-cluster`): it was queued before the run
/// began, with its counters, and may be running already. Times are
/// relative to the run's start (time 0), so they are at most 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prior {
    /// When it was queued: its place in its queue (Kueue's order).
    pub queue_time: Millis,
    /// Its retry and requeue counts and a backoff under way.
    pub carried: Carried,
    /// Admitted before the run began: it starts the run admitted on these
    /// flavors, holding their quota (`Scheduler::restore`, no policy
    /// asked), and its runtime counts from its admission.
    pub admission: Option<PriorAdmission>,
}

/// An admission made before the run began.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PriorAdmission {
    /// Per pod set (the job's order): resource name → flavor name.
    pub flavors: Vec<BTreeMap<String, String>>,
    /// Pods admitted per pod set.
    pub counts: Vec<u32>,
    /// When it was admitted.
    pub at: Millis,
}

pub struct Scenario {
    pub cluster: Arc<Cluster>,
    pub pools: Vec<SimPool>,
    pub until: Option<Millis>,
    /// In input order (the final tie-break).
    pub jobs: Vec<SimJob>,
    pub warnings: Vec<String>,
    /// Policy bundles the Simulation names (`spec.policies`), resolved against its file.
    pub policies: Vec<PathBuf>,
}

/// `a/b/../c` → `a/c`, without touching the file system (`..` that climbs
/// above the start is kept).
fn normalize(path: &std::path::Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Everything wrong with a scenario, each naming where and what to do, and
/// the warnings found on the way (so a failed build still tells them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .errors.join("\n"))]
pub struct ScenarioError {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

const JOB_INTEGRATION_KIND: &str = "JobIntegration";

/// Builds a scenario from loaded documents, strictly: any problem in a
/// queue object refuses it (`arbiter simulate --strict`, and every caller
/// that wants its input exactly as written).
pub fn build(loaded: Loaded) -> Result<Scenario, ScenarioError> {
    build_with(loaded, false)
}

/// Builds a scenario as the operator builds its configuration: a queue
/// object with a problem, and what depends on it, is left out with a
/// warning naming it, the reason and the fix (`Scenario::inactive`), and
/// the rest is simulated. Other errors (jobs, the Simulation) still refuse
/// it.
pub fn build_lenient(loaded: Loaded) -> Result<Scenario, ScenarioError> {
    build_with(loaded, true)
}

/// The scenario's phases: job integrations, the documents sorted, the
/// Simulation's settings, resource ids, the cluster built (strictly, or
/// leaving out what is invalid when `lenient`), node pools, warnings about
/// queues and runtimes, policy paths.
fn build_with(loaded: Loaded, lenient: bool) -> Result<Scenario, ScenarioError> {
    let mut errors: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
    let integrations = job_integrations(&loaded.documents, &mut errors, &mut warnings);
    let files = loaded.files;
    let documents = loaded.documents.len();
    let mut sorted = sort_documents(loaded.documents, &integrations, &mut errors, &mut warnings);
    // (An error already found, an unknown kind say, says enough.)
    if sorted.scenario_objects == 0 && errors.is_empty() {
        errors.push(nothing_to_simulate(&files, documents));
    }
    let until = match &sorted.simulation {
        Some((source, sim)) => apply_simulation(&mut sorted.builder, source, sim, &mut errors),
        None => None,
    };
    name_resources(&mut sorted);
    let cluster = if lenient {
        let (cluster, inactive) = sorted.builder.build_lenient();
        warnings.extend(inactive.iter().map(describe_inactive));
        cluster
    } else {
        match sorted.builder.build() {
            Ok(c) => c,
            Err(e) => {
                errors.extend(e.0.iter().map(|e| e.to_string()));
                return Err(ScenarioError { errors, warnings });
            }
        }
    };
    let pools = match &sorted.simulation {
        Some((source, sim)) => pools::node_pools(&cluster, source, sim, &mut errors),
        None => Vec::new(),
    };
    warn_of_generators_without_queue(&cluster, &sorted.generator_queues, &mut warnings);
    let no_runtime = sorted.jobs.iter().filter(|j| j.runtime.is_none()).count();
    if no_runtime > 0 {
        warnings.push(format!(
            "{no_runtime} job(s) have no {RUNTIME_ANNOTATION} annotation; they run until the end of the simulation"
        ));
    }
    if !errors.is_empty() {
        return Err(ScenarioError { errors, warnings });
    }
    let policies = match &sorted.simulation {
        Some((source, sim)) => {
            let base = source.file.parent().unwrap_or(std::path::Path::new("."));
            sim.spec
                .policies
                .iter()
                .map(|p| normalize(&base.join(p)))
                .collect()
        }
        None => Vec::new(),
    };
    Ok(Scenario {
        cluster: Arc::new(cluster),
        pools,
        until,
        jobs: sorted.jobs,
        warnings,
        policies,
    })
}

/// The job kinds this scenario knows: the built-in ones, its
/// `JobIntegration`s (read first, so jobs of those kinds are recognised),
/// and the article's PipelineRun when the scenario has one and does not
/// say how to read it.
fn job_integrations(
    documents: &[Document],
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Integrations {
    let mut extra = Vec::new();
    for doc in documents {
        if let Manifest::Other {
            api_version,
            kind,
            object,
        } = &doc.manifest
        {
            if api_version == api::API_VERSION && kind == JOB_INTEGRATION_KIND {
                // JSON is YAML: hand the object to the integration's own reader.
                let text = object.to_string();
                match jobs::IntegrationSpec::from_manifest_yaml(&text) {
                    Ok((spec, unknown)) => {
                        warnings
                            .extend(unknown.into_iter().map(|w| format!("{}: {w}", doc.source)));
                        extra.push(spec);
                    }
                    Err(e) => errors.push(format!("{}: {e}", doc.source)),
                }
            }
        }
    }
    // The article's PipelineRun, unless the scenario says how to read it.
    let defined = |spec: &jobs::IntegrationSpec| {
        jobs::article::is_pipeline_run(&spec.api_version, &spec.kind)
    };
    let article_run = documents.iter().find(|doc| {
        matches!(&doc.manifest, Manifest::Other { api_version, kind, .. }
            if jobs::article::is_pipeline_run(api_version, kind))
    });
    if let (Some(doc), false) = (article_run, extra.iter().any(defined)) {
        match jobs::article::pipeline_run() {
            Ok(spec) => {
                warnings.push(format!("{}: {}", doc.source, jobs::article::note()));
                extra.push(spec);
            }
            Err(e) => errors.push(format!("{}: {e}", doc.source)),
        }
    }
    match Integrations::with_extra(extra) {
        Ok(i) => i,
        Err(e) => {
            errors.push(e.to_string());
            Integrations::builtin()
        }
    }
}

/// The documents sorted by what they are: queue objects and Namespaces in
/// the cluster builder, the Simulation, the jobs.
struct Sorted {
    builder: ClusterBuilder,
    simulation: Option<(Source, sim_api::Simulation)>,
    jobs: Vec<SimJob>,
    /// (source, generator, namespace, queueName) of each generator, checked once the queues are known.
    generator_queues: Vec<(String, String, String, String)>,
    /// Documents that are scenario objects (queueing kinds, jobs, the
    /// simulator's kinds); Namespaces and JobIntegrations only support them.
    scenario_objects: usize,
}

/// Sorts every document into [`Sorted`], expanding generators and reading
/// jobs through `integrations`.
fn sort_documents(
    documents: Vec<Document>,
    integrations: &Integrations,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Sorted {
    let mut builder = ClusterBuilder::new();
    // Topology objects are read (by the operator too).
    builder.topology_aware(true);
    let mut sorted = Sorted {
        builder,
        simulation: None,
        jobs: Vec::new(),
        generator_queues: Vec::new(),
        scenario_objects: 0,
    };
    for doc in documents {
        let source = doc.source.to_string();
        if !matches!(
            doc.manifest,
            Manifest::Namespace(_) | Manifest::Other { .. }
        ) {
            sorted.scenario_objects += 1;
        }
        let mut told = Vec::new();
        match load::topology(&doc.manifest, &doc.source, &mut told) {
            Some(Ok(topology)) => {
                sorted.scenario_objects += 1;
                sorted.builder.topology(source, topology);
                warnings.extend(told.iter().map(ToString::to_string));
                continue;
            }
            Some(Err(e)) => {
                errors.push(e.to_string());
                continue;
            }
            None => {}
        }
        let Some(manifest) = sorted.builder.add(source.clone(), doc.manifest) else {
            continue;
        };
        match manifest {
            // Taken by the builder above.
            Manifest::ResourceFlavor(_)
            | Manifest::Cohort(_)
            | Manifest::ClusterQueue(_)
            | Manifest::LocalQueue(_)
            | Manifest::WorkloadPriorityClass(_) => {}
            Manifest::Namespace(ns) => {
                let name = ns.metadata.name.clone().unwrap_or_default();
                sorted.builder.namespace(
                    source,
                    name,
                    Namespace {
                        labels: ns.metadata.labels.clone().unwrap_or_default(),
                        annotations: ns.metadata.annotations.clone().unwrap_or_default(),
                    },
                );
            }
            Manifest::Simulation(sim) => {
                if let Some((first, _)) = &sorted.simulation {
                    errors.push(format!("{source}: a second Simulation; a scenario has at most one (the first is in {first})"));
                } else {
                    sorted.simulation = Some((doc.source, sim));
                }
            }
            Manifest::WorkloadGenerator(generator) => match expand_generator(&generator, &source) {
                Ok(mut generated) => {
                    sorted.generator_queues.push((
                        source.clone(),
                        generator.metadata.name.clone().unwrap_or_default(),
                        generator.spec.namespace.clone(),
                        generator.spec.queue_name.clone(),
                    ));
                    sorted.jobs.append(&mut generated);
                }
                Err(e) => errors.push(e),
            },
            Manifest::Workload(workload) => {
                let explicit = workload.spec.priority;
                match jobs::job_info_from_workload(&workload) {
                    Ok(info) => push_job(&mut sorted.jobs, errors, info, explicit, &source),
                    Err(e) => errors.push(format!("{source}: {e}")),
                }
            }
            other @ Manifest::Other { .. } => {
                sort_other(&source, &other, integrations, &mut sorted, errors, warnings)
            }
        }
    }
    sorted
}

/// A document of a kind neither Kueue's, Arbiter's nor the simulator's
/// (a JobIntegration was read before): a job if an integration reads it;
/// else a warning if it is a kind the simulator knows it need not run, or
/// an error naming the kinds it does know.
fn sort_other(
    source: &str,
    manifest: &Manifest,
    integrations: &Integrations,
    sorted: &mut Sorted,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    let Manifest::Other {
        api_version,
        kind,
        object,
    } = manifest
    else {
        return;
    };
    if api_version == api::API_VERSION && kind == JOB_INTEGRATION_KIND {
        return;
    }
    match integrations.extract(object) {
        Ok(Some(info)) => {
            sorted.scenario_objects += 1;
            push_job(&mut sorted.jobs, errors, info, None, source)
        }
        Ok(None) => {
            let text = |pointer: &str| object.pointer(pointer).and_then(|v| v.as_str());
            let named = match (text("/metadata/namespace"), text("/metadata/name")) {
                (Some(ns), Some(name)) => format!("{ns}/{name}"),
                (None, Some(name)) => name.to_string(),
                _ => "(no metadata.name)".to_string(),
            };
            let labels = object.pointer("/metadata/labels");
            let queued = jobs::QUEUE_NAME_LABELS
                .iter()
                .any(|label| labels.and_then(|l| l.get(*label)).is_some());
            match not_simulated(api_version, kind, &named, queued) {
                Some(why) => warnings.push(format!("{source}: {why}; ignored")),
                None => errors.push(format!(
                    "{source}: unknown kind {kind} (apiVersion {api_version}); expected an arbiter.dev or kueue.x-k8s.io kind, a Namespace, a sim.arbiter.dev kind, or a job kind ({}) — or add a JobIntegration for it",
                    integrations.kinds().map(|(_, k)| k).collect::<Vec<_>>().join(", ")
                )),
            }
        }
        Err(e) => {
            sorted.scenario_objects += 1;
            errors.push(format!("{source}: {e}"))
        }
    }
}

/// Applies the Simulation's cluster-wide settings (fair sharing and its
/// preemption strategies, `waitForPodsReady`) to `builder`; returns its
/// end (`spec.until`).
fn apply_simulation(
    builder: &mut ClusterBuilder,
    source: &Source,
    sim: &sim_api::Simulation,
    errors: &mut Vec<String>,
) -> Option<Millis> {
    builder.fair_sharing_everywhere(sim.spec.fair_sharing.as_ref().is_some_and(|f| f.enabled));
    if let Some(names) = sim
        .spec
        .fair_sharing
        .as_ref()
        .and_then(|f| f.preemption_strategies.as_ref())
    {
        match FairPreemptionStrategies::parse(names) {
            Ok(strategies) => builder.preemption_strategies(strategies),
            Err(e) => errors.push(format!(
                "{source}: Simulation {}: spec.fairSharing.preemptionStrategies: {e}",
                sim.metadata.name.as_deref().unwrap_or("")
            )),
        }
    }
    if let Some(spec) = &sim.spec.wait_for_pods_ready {
        match PodsReadyPolicy::from_spec(spec) {
            Ok(policy) => builder.pods_ready(policy),
            Err(e) => errors.push(format!(
                "{source}: Simulation {}: spec.{e}",
                sim.metadata.name.as_deref().unwrap_or("")
            )),
        }
    }
    let text = sim.spec.until.as_ref()?;
    match Millis::parse(text) {
        Ok(d) => Some(d),
        Err(e) => {
            errors.push(format!(
                "{source}: Simulation {}: spec.until: {e}",
                sim.metadata.name.as_deref().unwrap_or("")
            ));
            None
        }
    }
}

/// Every resource a job or pool names gets an id, so "not covered" is a
/// pending reason, not a crash.
fn name_resources(sorted: &mut Sorted) {
    for job in &sorted.jobs {
        for ps in &job.info.pod_sets {
            for name in ps.requests.keys() {
                sorted.builder.resource(name);
            }
        }
    }
    if let Some((_, sim)) = &sorted.simulation {
        for pool in &sim.spec.node_pools {
            for name in pool.allocatable.keys() {
                sorted.builder.resource(name);
            }
        }
    }
}

/// A warning for each generator whose LocalQueue does not exist: none of
/// its workloads can be queued.
fn warn_of_generators_without_queue(
    cluster: &Cluster,
    generator_queues: &[(String, String, String, String)],
    warnings: &mut Vec<String>,
) {
    for (source, generator, namespace, queue) in generator_queues {
        if cluster.local_queue_id(namespace, queue).is_none() {
            warnings.push(format!(
                "{source}: WorkloadGenerator {generator}: spec.queueName: LocalQueue {namespace}/{queue} does not exist, so none of its workloads can be queued; create it or fix spec.namespace/spec.queueName"
            ));
        }
    }
}

/// The warning for a queue object left out: where it is, why, and what
/// its own errors say.
fn describe_inactive(inactive: &arbiter_core::model::cluster::Inactive) -> String {
    let source = inactive
        .errors
        .first()
        .map(|e| format!("{}: ", e.source))
        .unwrap_or_default();
    let own: Vec<String> = inactive
        .errors
        .iter()
        .filter(|e| !e.field.is_empty())
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect();
    let detail = if own.is_empty() {
        inactive.message.clone()
    } else {
        own.join("; ")
    };
    format!(
        "{source}{} is inactive ({}): {detail}; it is left out and the rest is simulated (--strict refuses it)",
        inactive.object(),
        inactive.reason
    )
}

/// Kueue's kinds that Arbiter has no counterpart for (any apiVersion).
const KUEUE_KINDS_NOT_SUPPORTED: &[&str] = &["ProvisioningRequestConfig"];

/// Admission-check kinds (Kueue's, or Arbiter's spelling of them): the
/// operator acts on MultiKueue's (`arbiter run --multicluster`); the
/// simulator runs no admission check.
const ADMISSION_CHECK_KINDS: &[&str] = &["AdmissionCheck", "MultiKueueCluster", "MultiKueueConfig"];

/// Why an object of a kind no integration reads is no part of a scenario
/// and can be skipped (`None`: it is an error — a kind of Arbiter's or the
/// simulator's API, a kind of Kueue's API that Kueue does not have, an
/// object carrying a queue-name label, so meant to be queued: a misspelt
/// kind). Kueue kinds Arbiter lacks are told as such; other APIs' objects
/// (the article's ServiceMonitor and Role, say) hold no queue, quota or job.
fn not_simulated(api_version: &str, kind: &str, named: &str, queued: bool) -> Option<String> {
    let group = api_version.split_once('/').map_or("", |(group, _)| group);
    match group {
        _ if queued => None,
        "arbiter.dev" | "kueue.x-k8s.io" if ADMISSION_CHECK_KINDS.contains(&kind) => Some(format!(
            "{api_version} {kind} {named}: the simulator runs no admission checks (the operator runs MultiKueue's, `arbiter run --multicluster`)"
        )),
        "arbiter.dev" | "sim.arbiter.dev" => None,
        "kueue.x-k8s.io" if KUEUE_KINDS_NOT_SUPPORTED.contains(&kind) => Some(format!(
            "{api_version} {kind} {named} is a Kueue kind Arbiter does not support"
        )),
        "kueue.x-k8s.io" => None,
        _ => Some(format!(
            "{api_version} {kind} {named} is not a scenario object (no queue, quota or job kind Arbiter knows, and no queue-name label)"
        )),
    }
}

/// The error for input that holds nothing to simulate.
fn nothing_to_simulate(files: &[PathBuf], documents: usize) -> String {
    let files = if files.is_empty() {
        "the input".to_string()
    } else {
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let what = match documents {
        0 => "holds no documents (nothing but comments or whitespace)".to_string(),
        n => format!("holds no object Arbiter simulates ({n} document(s), none of them a queueing kind, a job or a sim.arbiter.dev kind; see the warnings for what was ignored)"),
    };
    format!(
        "{files}: {what}; nothing to simulate — a scenario needs ResourceFlavors, ClusterQueues and LocalQueues (arbiter.dev or kueue.x-k8s.io) and jobs or WorkloadGenerators, as in examples/seed/"
    )
}

fn annotation_duration(
    info: &JobInfo,
    key: &str,
    source: &str,
    errors: &mut Vec<String>,
) -> Option<Millis> {
    let text = info.annotations.get(key)?;
    match Millis::parse(text) {
        Ok(d) => Some(d),
        Err(e) => {
            errors.push(format!(
                "{source}: {} {}/{}: annotation {key}: {e}",
                info.kind, info.namespace, info.name
            ));
            None
        }
    }
}

fn push_job(
    jobs: &mut Vec<SimJob>,
    errors: &mut Vec<String>,
    info: JobInfo,
    explicit: Option<i32>,
    source: &str,
) {
    let arrival =
        annotation_duration(&info, ARRIVAL_ANNOTATION, source, errors).unwrap_or(Millis::ZERO);
    let runtime = annotation_duration(&info, RUNTIME_ANNOTATION, source, errors);
    let startup = match info.annotations.get(STARTUP_ANNOTATION).map(String::as_str) {
        Some("never") => None,
        _ => Some(
            annotation_duration(&info, STARTUP_ANNOTATION, source, errors).unwrap_or(Millis::ZERO),
        ),
    };
    jobs.push(SimJob {
        info,
        explicit_priority: explicit,
        arrival,
        runtime,
        startup,
        source: source.to_string(),
        prior: None,
    });
}

/// Expands a generator into `count` workloads.
fn expand_generator(generator: &WorkloadGenerator, source: &str) -> Result<Vec<SimJob>, String> {
    let name = generator
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| "generated".into());
    let spec = &generator.spec;
    let field = |f: &str, e: &dyn std::fmt::Display| {
        format!("{source}: WorkloadGenerator {name}: spec.{f}: {e}")
    };
    let parse = |text: &Option<String>, f: &str| -> Result<Millis, String> {
        text.as_deref().map_or(Ok(Millis::ZERO), |t| {
            Millis::parse(t).map_err(|e| field(f, &e))
        })
    };
    let start = parse(&spec.start_at, "startAt")?;
    let interval = parse(&spec.interval, "interval")?;
    let runtime = match &spec.runtime {
        None => None,
        Some(t) => Some(Millis::parse(t).map_err(|e| field("runtime", &e))?),
    };
    if spec.pod_sets.is_empty() {
        return Err(field("podSets", &"needs at least one pod set"));
    }
    if spec.count > limits::MAX_GENERATED_WORKLOADS {
        return Err(field(
            "count",
            &format!(
                "is {}, more than the {} workloads a generator may make; use several generators or a smaller count",
                spec.count,
                limits::MAX_GENERATED_WORKLOADS
            ),
        ));
    }
    let mut labels = BTreeMap::new();
    labels.insert(
        jobs::QUEUE_NAME_LABELS[0].to_string(),
        spec.queue_name.clone(),
    );
    if let Some(pc) = &spec.priority_class {
        labels.insert(jobs::PRIORITY_CLASS_LABELS[0].to_string(), pc.clone());
    }
    let template = api::Workload {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(spec.namespace.clone()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: api::WorkloadSpec {
            queue_name: Some(spec.queue_name.clone()),
            pod_sets: spec.pod_sets.clone(),
            priority_class_name: spec.priority_class.clone(),
            priority: spec.priority,
            active: None,
        },
        status: None,
    };
    let base = jobs::job_info_from_workload(&template)
        .map_err(|e| format!("{source}: WorkloadGenerator {name}: {e}"))?;
    let mut rng = spec.seed.map(ChaCha8Rng::seed_from_u64);
    let width = spec.count.max(1).to_string().len();
    let mut at = start;
    let mut out = Vec::with_capacity(spec.count as usize);
    for i in 0..spec.count {
        let mut info = base.clone();
        info.name = format!("{name}-{i:0width$}");
        out.push(SimJob {
            info,
            explicit_priority: spec.priority,
            arrival: at,
            runtime,
            startup: Some(Millis::ZERO),
            source: source.to_string(),
            prior: None,
        });
        let gap = match rng.as_mut() {
            // Exponential gaps with mean `interval`: a Poisson stream.
            Some(rng) => {
                let u: f64 = rng.random();
                Millis((-(1.0 - u).ln() * interval.0 as f64).round() as i64)
            }
            None => interval,
        };
        at = at.saturating_add(gap);
    }
    Ok(out)
}
