//! `arbiter convert`: rewrites Kueue (`kueue.x-k8s.io/v1alpha1|v1beta1|v1beta2`)
//! and seed-article manifests as `arbiter.dev/v1alpha1`, so a platform team
//! can move a Kueue setup over file by file. Arbiter's own kinds are
//! re-emitted unchanged, Namespaces and jobs pass through as written (the
//! article's `kubeflow.org/v1 PipelineRun` with the JobIntegration that
//! reads it written before the first one).
//! Reading (and the warnings about ignored fields) is `model::load`'s job;
//! this module adds a warning wherever the converted object would behave
//! differently under Arbiter or was renamed, and never changes meaning
//! silently. Pure apart from reading the input files; the CLI prints the
//! result.

use std::path::PathBuf;

use arbiter_core::jobs;
use arbiter_core::model::api::{self, FungibilityPolicy};
use arbiter_core::model::load::{self, Document, LoadError, Manifest, Origin, Source, Warning};
use arbiter_sim::files::load_paths;
use serde::Serialize;

/// `arbiter.dev/v1alpha1 JobIntegration`: a job kind added by configuration.
const JOB_INTEGRATION: &str = "JobIntegration";

/// How a converted Topology is carried out, unlike Kueue.
const TOPOLOGY_NOTE: &str = "Topology written as arbiter.dev/v1alpha1 (the operator and `arbiter simulate` place pod sets by it); the operator keeps a pod set's pods inside the domain chosen by a node selector on its pod template, where Kueue gates each pod and sends it to a domain of the Topology's lowest level";

/// What becomes of a ClusterQueue's `spec.admissionChecks`.
const ADMISSION_CHECKS_NOTE: &str = "spec.admissionChecks kept: `arbiter run --multicluster` acts on an AdmissionCheck whose controllerName is kueue.x-k8s.io/multikueue (write it, its MultiKueueConfig and MultiKueueClusters as arbiter.dev/v1alpha1); no other check is run, and the simulator runs none";

/// Converts the manifests in `paths` (files or directories, as
/// [`load_paths`] reads them) into one multi-document `arbiter.dev` YAML
/// stream, with every warning from reading and converting.
pub fn convert(paths: &[PathBuf]) -> Result<(String, Vec<Warning>), LoadError> {
    let loaded = load_paths(paths)?;
    // The article's PipelineRun needs its JobIntegration, unless the input has one.
    let mut pipeline_integration = !loaded.documents.iter().any(|d| {
        matches!(&d.manifest, Manifest::Other { api_version, kind, object }
            if api_version == api::API_VERSION && kind == JOB_INTEGRATION
                && jobs::article::is_pipeline_run(
                    object.pointer("/spec/jobApiVersion").and_then(|v| v.as_str()).unwrap_or(""),
                    object.pointer("/spec/jobKind").and_then(|v| v.as_str()).unwrap_or("")))
    });
    // Reading warnings and conversion notes, document by document.
    let mut reading = loaded.warnings.into_iter().peekable();
    let mut warnings = Vec::new();
    let mut documents = Vec::new();
    for document in loaded.documents {
        while let Some(warning) = reading.next_if(|w| w.source == document.source) {
            warnings.push(warning);
        }
        let article_run = matches!(&document.manifest, Manifest::Other { api_version, kind, .. }
            if jobs::article::is_pipeline_run(api_version, kind));
        if article_run && pipeline_integration {
            pipeline_integration = false;
            warnings.push(Warning {
                source: document.source.clone(),
                message: jobs::article::note(),
            });
            documents.push(format!(
                "# added by arbiter convert for the PipelineRun of {}\n{}",
                document.source,
                jobs::article::JOB_INTEGRATION_YAML
            ));
        }
        if let Some(yaml) = convert_document(document, &mut warnings)? {
            documents.push(yaml);
        }
    }
    warnings.extend(reading);
    Ok((documents.join("---\n"), warnings))
}

fn convert_document(
    document: Document,
    warnings: &mut Vec<Warning>,
) -> Result<Option<String>, LoadError> {
    let Document {
        source,
        origin,
        manifest,
    } = document;
    let mut note = |message: String| {
        warnings.push(Warning {
            source: source.clone(),
            message,
        })
    };
    if origin == Origin::Article {
        note(
            "kind: Queue (the article's name) written as an arbiter.dev/v1alpha1 LocalQueue".into(),
        );
    }
    let kueue = matches!(
        origin,
        Origin::KueueV1alpha1 | Origin::KueueV1beta1 | Origin::KueueV1beta2
    );
    let mut decoding = Vec::new();
    if let Some(converted) = multikueue(&manifest, &source, &mut decoding) {
        warnings.extend(decoding);
        let (kind, body) = converted?;
        return render_as(&source, kind, body).map(Some);
    }
    if let Some(topology) = load::topology(&manifest, &source, &mut decoding) {
        warnings.extend(decoding);
        let mut topology = topology?;
        topology.api_version = api::API_VERSION.into();
        topology.kind = "Topology".into();
        warnings.push(Warning {
            source: source.clone(),
            message: TOPOLOGY_NOTE.into(),
        });
        return render_as(&source, "Topology", render(&topology)).map(Some);
    }
    let (kind, body) = match manifest {
        Manifest::ResourceFlavor(o) => ("ResourceFlavor", render(&o)),
        Manifest::Cohort(o) => ("Cohort", render(&o)),
        Manifest::ClusterQueue(mut o) => {
            if kueue && o.spec.namespace_selector.is_none() {
                note("Kueue admits no namespace when namespaceSelector is omitted; Arbiter admits all — add `namespaceSelector: {matchLabels: …}` to keep Kueue's behaviour".into());
            }
            if !o.spec.admission_checks.is_empty() {
                note(ADMISSION_CHECKS_NOTE.into());
            }
            if let Some(fungibility) = o.spec.flavor_fungibility.as_mut() {
                for (field, value) in [
                    ("whenCanBorrow", &mut fungibility.when_can_borrow),
                    ("whenCanPreempt", &mut fungibility.when_can_preempt),
                ] {
                    if let Some(old @ (FungibilityPolicy::Borrow | FungibilityPolicy::Preempt)) =
                        *value
                    {
                        note(format!("spec.flavorFungibility.{field}: {old:?} (Kueue v1beta1) written as MayStopSearch, its v1beta2 name; the behaviour is the same"));
                        *value = Some(FungibilityPolicy::MayStopSearch);
                    }
                }
            }
            ("ClusterQueue", render(&o))
        }
        Manifest::LocalQueue(o) => ("LocalQueue", render(&o)),
        Manifest::WorkloadPriorityClass(mut o) => {
            o.api_version = Some(api::API_VERSION.into());
            o.kind = Some("WorkloadPriorityClass".into());
            ("WorkloadPriorityClass", render(&o))
        }
        Manifest::Workload(o) => ("Workload", render(&o)),
        Manifest::Namespace(o) => ("Namespace", render(&o)),
        Manifest::Simulation(o) => ("Simulation", render(&o)),
        Manifest::WorkloadGenerator(o) => ("WorkloadGenerator", render(&o)),
        Manifest::Other {
            api_version, kind, ..
        } if kueue => {
            note(format!(
                "{api_version} {kind} has no Arbiter equivalent; left out of the output"
            ));
            return Ok(None);
        }
        Manifest::Other {
            api_version,
            kind,
            object,
        } => {
            let arbiter =
                api_version == api::API_VERSION || api_version.starts_with("sim.arbiter.dev/");
            if arbiter && kind != JOB_INTEGRATION {
                note(format!("{api_version} {kind} is not an Arbiter kind; passed through unchanged — check the kind's spelling"));
            }
            ("object", render(&object))
        }
    };
    render_as(&source, kind, body).map(Some)
}

/// Kueue's MultiKueue kinds (any version of `kueue.x-k8s.io`, or
/// `arbiter.dev/v1alpha1`) checked and written as `arbiter.dev/v1alpha1`
/// for `arbiter run --multicluster`; `None` for any other object.
#[allow(clippy::type_complexity)]
fn multikueue(
    manifest: &Manifest,
    source: &Source,
    warnings: &mut Vec<Warning>,
) -> Option<Result<(&'static str, Result<String, String>), LoadError>> {
    let Manifest::Other {
        api_version,
        kind,
        object,
    } = manifest
    else {
        return None;
    };
    let group = api_version.split_once('/').map_or("", |(group, _)| group);
    if !(group == "kueue.x-k8s.io" || api_version == api::API_VERSION) {
        return None;
    }
    Some(match kind.as_str() {
        "AdmissionCheck" => {
            load::decode::<api::AdmissionCheck>(object, source, warnings).map(|o| {
                if o.spec.controller_name != api::MULTIKUEUE_CONTROLLER {
                    warnings.push(Warning {
                        source: source.clone(),
                        message: format!(
                            "AdmissionCheck of controller {} kept, but Arbiter runs only {}'s checks: a ClusterQueue naming it admits without it",
                            o.spec.controller_name,
                            api::MULTIKUEUE_CONTROLLER
                        ),
                    });
                }
                ("AdmissionCheck", render(&o))
            })
        }
        "MultiKueueConfig" => load::decode::<api::MultiKueueConfig>(object, source, warnings)
            .map(|o| ("MultiKueueConfig", render(&o))),
        "MultiKueueCluster" => load::decode::<api::MultiKueueCluster>(object, source, warnings)
            .map(|o| ("MultiKueueCluster", render(&o))),
        _ => return None,
    })
}

/// A converted document with the comment naming where it came from, or
/// why it cannot be written.
fn render_as(
    source: &Source,
    kind: &str,
    body: Result<String, String>,
) -> Result<String, LoadError> {
    let body = body.map_err(|message| LoadError::Invalid {
        at: source.clone(),
        kind: kind.into(),
        path: String::new(),
        message: format!("cannot be written as YAML: {message}"),
    })?;
    Ok(format!("# from {source}\n{body}"))
}

fn render<T: Serialize>(object: &T) -> Result<String, String> {
    serde_yaml_ng::to_string(object).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert_text(text: &str) -> (String, Vec<String>) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("kueue.yaml");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        let (yaml, warnings) = convert(&[path]).unwrap_or_else(|e| panic!("{e}"));
        let warnings = warnings.into_iter().map(|w| w.message).collect();
        (yaml, warnings)
    }

    #[test]
    fn kueues_multikueue_objects_convert_to_arbiter_dev() {
        let (yaml, warnings) = convert_text(
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata: {name: mk}\n\
             spec:\n  controllerName: kueue.x-k8s.io/multikueue\n  retryDelayMinutes: 1\n\
             \x20 parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: workers}\n\
             ---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: workers}\n\
             spec: {clusters: [w1]}\n\
             ---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueCluster\nmetadata: {name: w1}\n\
             spec: {clusterSource: {kubeConfig: {location: w1-secret, locationType: Secret}}}\n",
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("spec.retryDelayMinutes"),
            "{warnings:?}"
        );
        let documents: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
            .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        let kinds: Vec<(&str, &str)> = documents
            .iter()
            .map(|d| {
                (
                    d["apiVersion"].as_str().unwrap_or_default(),
                    d["kind"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (api::API_VERSION, "AdmissionCheck"),
                (api::API_VERSION, "MultiKueueConfig"),
                (api::API_VERSION, "MultiKueueCluster")
            ]
        );
        assert_eq!(documents[0]["spec"]["parameters"]["name"], "workers");
        assert_eq!(
            documents[2]["spec"]["clusterSource"]["kubeConfig"]["location"],
            "w1-secret"
        );
    }

    #[test]
    fn a_kueue_topology_and_its_flavor_convert_with_a_note_on_how_pods_are_kept_to_the_domain() {
        let (yaml, warnings) = convert_text(
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Topology\nmetadata: {name: default}\n\
             spec:\n  levels: [{nodeLabel: cloud.com/rack}, {nodeLabel: kubernetes.io/hostname}]\n\
             ---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: tas}\n\
             spec: {topologyName: default}\n",
        );
        assert_eq!(warnings, vec![TOPOLOGY_NOTE]);
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("arbiter.yaml");
        std::fs::write(&path, &yaml).unwrap_or_else(|e| panic!("{e}"));
        let reread = load_paths(&[path]).unwrap_or_else(|e| panic!("{e}"));
        let mut sink = Vec::new();
        let topology = reread
            .documents
            .iter()
            .find_map(|d| load::topology(&d.manifest, &d.source, &mut sink))
            .expect("the Topology is in the output")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(topology.api_version, api::API_VERSION);
        assert_eq!(topology.spec.levels.len(), 2);
        assert!(reread.documents.iter().any(|d| matches!(&d.manifest,
            Manifest::ResourceFlavor(f) if f.spec.topology_name.as_deref() == Some("default"))));
    }

    #[test]
    fn kueue_cluster_queue_becomes_arbiter_with_notes() {
        let (yaml, warnings) = convert_text(
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\n\
             spec:\n  cohort: research\n  flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: TryNextFlavor}\n\
             ---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata: {name: prov}\n\
             spec: {controllerName: kueue.x-k8s.io/provisioning-request}\n\
             ---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: j, labels: {kueue.x-k8s.io/queue-name: lq}}\n",
        );
        assert_eq!(
            warnings,
            vec![
                "Kueue admits no namespace when namespaceSelector is omitted; Arbiter admits all — add `namespaceSelector: {matchLabels: …}` to keep Kueue's behaviour",
                "spec.flavorFungibility.whenCanBorrow: Borrow (Kueue v1beta1) written as MayStopSearch, its v1beta2 name; the behaviour is the same",
                "AdmissionCheck of controller kueue.x-k8s.io/provisioning-request kept, but Arbiter runs only kueue.x-k8s.io/multikueue's checks: a ClusterQueue naming it admits without it",
            ]
        );
        let reread = arbiter_core::model::load::load_str(&yaml, std::path::Path::new("out.yaml"))
            .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        assert!(reread.warnings.is_empty(), "{:?}", reread.warnings);
        assert_eq!(reread.documents.len(), 3);
        assert_eq!(reread.documents[0].origin, Origin::Arbiter);
        assert!(
            yaml.contains("apiVersion: arbiter.dev/v1alpha1\nkind: AdmissionCheck"),
            "{yaml}"
        );
        let Manifest::ClusterQueue(cq) = &reread.documents[0].manifest else {
            panic!("not a ClusterQueue:\n{yaml}");
        };
        assert_eq!(cq.spec.cohort.as_deref(), Some("research"));
        assert_eq!(
            cq.spec
                .flavor_fungibility
                .as_ref()
                .and_then(|f| f.when_can_borrow),
            Some(FungibilityPolicy::MayStopSearch)
        );
        assert!(
            yaml.contains("apiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue"),
            "{yaml}"
        );
        assert!(yaml.contains("kind: Job"), "{yaml}");
    }

    #[test]
    fn article_queue_and_priority_class_are_renamed() {
        let (yaml, warnings) = convert_text(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Queue\nmetadata: {name: q, namespace: ns}\nspec: {clusterQueue: cq, priority: 5}\n\
             ---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: 1000\n",
        );
        assert_eq!(
            warnings,
            vec!["kind: Queue (the article's name) written as an arbiter.dev/v1alpha1 LocalQueue"]
        );
        assert!(
            yaml.contains("apiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue"),
            "{yaml}"
        );
        assert!(
            yaml.contains("apiVersion: arbiter.dev/v1alpha1\nkind: WorkloadPriorityClass"),
            "{yaml}"
        );
        assert!(yaml.contains("value: 1000"), "{yaml}");
    }
    const PIPELINE_RUN: &str = "apiVersion: kubeflow.org/v1\nkind: PipelineRun\nmetadata: {name: RUN, labels: {kueue.x-k8s.io/queue-name: ai-queue}}\nspec: {runtimeConfig: {parameters: {gpu-count: \"2\"}}}\n";

    /// The article's PipelineRuns get the JobIntegration that reads them,
    /// once, before the first; not when the input brings its own.
    #[test]
    fn article_pipeline_runs_get_their_job_integration_once() {
        let runs = format!(
            "{}---\n{}",
            PIPELINE_RUN.replace("RUN", "a"),
            PIPELINE_RUN.replace("RUN", "b")
        );
        let (yaml, warnings) = convert_text(&runs);
        assert_eq!(yaml.matches("kind: JobIntegration").count(), 1, "{yaml}");
        let integration = yaml.find("kind: JobIntegration").unwrap_or(usize::MAX);
        let first_run = yaml.find("kind: PipelineRun").unwrap_or(0);
        assert!(integration < first_run, "{yaml}");
        assert_eq!(warnings, vec![jobs::article::note()]);

        let own = format!("{}---\n{runs}", jobs::article::JOB_INTEGRATION_YAML);
        let (yaml, warnings) = convert_text(&own);
        assert_eq!(yaml.matches("kind: JobIntegration").count(), 1, "{yaml}");
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
