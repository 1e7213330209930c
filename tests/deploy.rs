//! `deploy/` installs Arbiter (`kubectl apply --server-side -k deploy/`):
//! the kustomization lists every manifest but the optional monitoring ones
//! (deploy/monitoring/: a ServiceMonitor and a PrometheusRule);
//! every namespaced object is in arbiter-system; the Deployment runs two
//! replicas under the ServiceAccount rbac.yaml makes, with arguments
//! `arbiter run` accepts; the Service, the webhook configurations and the
//! ServiceMonitor point at ports that exist; the webhooks cover every
//! built-in job kind and every configuration kind; the default bundle's
//! ConfigMap is `arbiter policy configmap policies/` and loads. Against a
//! real kube-apiserver, everything in the kustomization applies under strict
//! field validation, the API server routes queued jobs and configuration
//! objects to the webhooks (failing closed while nothing serves them), and
//! the roles grant what their comments say and no more
//! (SubjectAccessReview).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use arbiter_core::jobs::{builtin_integrations, QUEUE_NAME_LABELS};
use arbiter_policy::bundle::{self, LoadOptions, CONFIGMAP_LABEL, CONFIGMAP_LIMIT};
use arbiter_policy::wasm::Runtime;
use serde_json::{json, Value};

mod support;
use support::{items, read, root, strings};

/// What kustomization.yaml installs, in its order.
const INSTALLED: [&str; 7] = [
    "crds.yaml",
    "rbac.yaml",
    "queue-manager.yaml",
    "what-if.yaml",
    "operator.yaml",
    "webhooks.yaml",
    "default-bundle.yaml",
];

/// In deploy/monitoring/, applied separately (`kubectl apply -k
/// deploy/monitoring/`): they need the Prometheus Operator's CRDs.
const OPTIONAL: [&str; 2] = [
    "monitoring/servicemonitor.yaml",
    "monitoring/prometheusrule.yaml",
];

const NAMESPACE: &str = "arbiter-system";

/// The kinds deploy/ holds that are not namespaced.
const CLUSTER_SCOPED: [&str; 6] = [
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

fn deploy(file: &str) -> PathBuf {
    root().join("deploy").join(file)
}

/// The YAML documents of deploy/FILE (empty ones left out).
fn documents(file: &str) -> Vec<Value> {
    support::documents(&read(&deploy(file)), &format!("deploy/{file}"))
}

/// Every document of the given files, with the file it is in.
fn objects(files: &[&str]) -> Vec<(String, Value)> {
    files
        .iter()
        .flat_map(|file| {
            documents(file)
                .into_iter()
                .map(|doc| (file.to_string(), doc))
        })
        .collect()
}

fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// The one object of `kind` named `name` in `files`.
fn find(files: &[&str], kind_: &str, name_: &str) -> Value {
    let found: Vec<Value> = objects(files)
        .into_iter()
        .map(|(_, o)| o)
        .filter(|o| kind(o) == kind_ && name(o) == name_)
        .collect();
    assert_eq!(found.len(), 1, "{kind_} {name_} in {files:?}");
    found.into_iter().next().unwrap_or_default()
}

/// Whether every `matchLabels` entry of `selector` is among `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let wanted = selector.as_object().cloned().unwrap_or_default();
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn operator_container() -> Value {
    let deployment = find(&["operator.yaml"], "Deployment", "arbiter");
    let containers = items(&deployment["spec"]["template"]["spec"]["containers"]);
    assert_eq!(containers.len(), 1, "one container");
    containers[0].clone()
}

#[test]
fn kustomization_lists_every_manifest_but_the_optional_monitoring() {
    let kustomization = documents("kustomization.yaml");
    assert_eq!(kustomization.len(), 1);
    let k = &kustomization[0];
    assert_eq!(k["apiVersion"], "kustomize.config.k8s.io/v1beta1");
    assert_eq!(k["kind"], "Kustomization");
    assert_eq!(strings(&k["resources"]), INSTALLED);
    let mut on_disk = BTreeSet::new();
    for dir in ["", "monitoring/"] {
        let entries = std::fs::read_dir(root().join("deploy").join(dir));
        for entry in entries.unwrap_or_else(|e| panic!("deploy/{dir}: {e}")) {
            let file = entry
                .unwrap_or_else(|e| panic!("{e}"))
                .file_name()
                .to_string_lossy()
                .into_owned();
            let file = format!("{dir}{file}");
            // deploy/monitoring/ also holds promtool's unit tests of the alerts, not a manifest.
            let manifest =
                || dir.is_empty() || documents(&file).iter().all(|d| d["kind"].is_string());
            if file.ends_with(".yaml") && !file.ends_with("kustomization.yaml") && manifest() {
                on_disk.insert(file);
            }
        }
    }
    let listed: BTreeSet<String> = INSTALLED
        .iter()
        .chain(&OPTIONAL)
        .map(|f| f.to_string())
        .collect();
    assert_eq!(
        on_disk, listed,
        "every manifest in deploy/ is installed by kustomization.yaml or listed as optional here"
    );
    for (file, object) in objects(&INSTALLED) {
        assert!(
            object["apiVersion"].is_string()
                && !kind(&object).is_empty()
                && !name(&object).is_empty(),
            "deploy/{file}: a document without apiVersion, kind or metadata.name: {object}"
        );
    }
    assert!(objects(&OPTIONAL)
        .iter()
        .all(|(_, o)| matches!(kind(o), "ServiceMonitor" | "PrometheusRule")));
}

#[test]
fn namespaced_objects_are_in_arbiter_system() {
    let all: Vec<&str> = INSTALLED.iter().chain(&OPTIONAL).copied().collect();
    let mut namespaced = 0;
    for (file, object) in objects(&all) {
        let namespace = object["metadata"]["namespace"].as_str();
        if CLUSTER_SCOPED.contains(&kind(&object)) {
            assert_eq!(
                namespace,
                None,
                "deploy/{file}: {} {}",
                kind(&object),
                name(&object)
            );
        } else {
            namespaced += 1;
            assert_eq!(
                namespace,
                Some(NAMESPACE),
                "deploy/{file}: {} {}",
                kind(&object),
                name(&object)
            );
        }
    }
    assert!(namespaced >= 8, "only {namespaced} namespaced objects");
    find(&["rbac.yaml"], "Namespace", NAMESPACE);
}

#[test]
fn the_deployment_runs_two_replicas_under_the_installed_service_account() {
    let deployment = find(&["operator.yaml"], "Deployment", "arbiter");
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 2);
    let pod = &spec["template"]["spec"];
    let labels = &spec["template"]["metadata"]["labels"];
    assert_eq!(labels["app.kubernetes.io/name"], "arbiter");
    assert!(selects(&spec["selector"]["matchLabels"], labels));

    let account = pod["serviceAccountName"].as_str().unwrap_or_default();
    let service_account = find(&["rbac.yaml"], "ServiceAccount", account);
    assert_eq!(service_account["metadata"]["namespace"], NAMESPACE);
    let subject = json!({"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE});
    for binding in ["ClusterRoleBinding", "RoleBinding"] {
        let binding = find(&["rbac.yaml"], binding, "arbiter-operator");
        assert_eq!(binding["subjects"], json!([subject]), "{binding}");
    }

    let budget = find(&["operator.yaml"], "PodDisruptionBudget", "arbiter");
    assert_eq!(budget["spec"]["minAvailable"], 1);
    assert!(selects(&budget["spec"]["selector"]["matchLabels"], labels));
    let spread = items(&pod["topologySpreadConstraints"]);
    assert!(
        spread
            .iter()
            .any(|c| c["topologyKey"] == "kubernetes.io/hostname"
                && selects(&c["labelSelector"]["matchLabels"], labels)),
        "replicas spread across nodes"
    );

    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = operator_container();
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"]);
    for limit in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                container["resources"][limit][resource].is_string(),
                "{limit}.{resource}"
            );
        }
    }
    let env: BTreeMap<&str, &Value> = items(&container["env"])
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap_or_default(),
                &e["valueFrom"]["fieldRef"]["fieldPath"],
            )
        })
        .collect();
    assert_eq!(
        env.get("POD_NAMESPACE"),
        Some(&&json!("metadata.namespace"))
    );
    assert_eq!(env.get("POD_NAME"), Some(&&json!("metadata.name")));
    let ports: BTreeMap<&str, &Value> = items(&container["ports"])
        .iter()
        .map(|p| (p["name"].as_str().unwrap_or_default(), &p["containerPort"]))
        .collect();
    assert_eq!(ports.get("metrics"), Some(&&json!(8080)));
    assert_eq!(ports.get("webhook"), Some(&&json!(9443)));
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(get["port"], "metrics", "{probe} on the admin port");
    }
}

/// Whether `arbiter ARGS --help` parses: clap checks each flag and value
/// it meets (exit 2 on an unknown flag or a bad value) before `--help`.
fn parses(args: &[String]) -> Result<(), String> {
    let output = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("running arbiter: {e}"));
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

#[test]
fn the_operator_args_parse_with_arbiter_run() {
    let container = operator_container();
    assert!(
        container["command"].is_null(),
        "the image's entrypoint is /arbiter"
    );
    let args = strings(&container["args"]);
    assert_eq!(args.first().map(String::as_str), Some("run"));
    for flag in ["--webhook-address", "--leader-election"] {
        assert!(
            args.iter().any(|a| a == flag),
            "{flag} is in the Deployment's args"
        );
    }
    // The admin address is the port the probes and the Service use.
    let admin = args
        .iter()
        .position(|a| a == "--admin-address")
        .and_then(|at| args.get(at + 1));
    assert_eq!(admin.map(String::as_str), Some("0.0.0.0:8080"));
    if let Err(error) = parses(&args) {
        panic!("`arbiter {}` does not parse:\n{error}", args.join(" "));
    }
    // The check itself refuses what is wrong.
    assert!(parses(&["run".into(), "--log-format".into(), "yaml".into()]).is_err());
    assert!(parses(&["run".into(), "--no-such-flag".into()]).is_err());
}

#[test]
fn the_service_webhooks_and_service_monitor_point_at_ports_that_exist() {
    let service = find(&["operator.yaml"], "Service", "arbiter");
    let deployment = find(&["operator.yaml"], "Deployment", "arbiter");
    assert!(selects(
        &service["spec"]["selector"],
        &deployment["spec"]["template"]["metadata"]["labels"]
    ));
    let container = operator_container();
    let container_ports: BTreeMap<String, Value> = items(&container["ports"])
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                p["containerPort"].clone(),
            )
        })
        .collect();
    let mut service_ports = BTreeMap::new();
    for port in items(&service["spec"]["ports"]) {
        let target = port["targetPort"].as_str().unwrap_or_default();
        assert!(
            container_ports.contains_key(target),
            "Service port {port} targets {target:?}, not a named container port ({:?})",
            container_ports.keys()
        );
        service_ports.insert(
            port["name"].as_str().unwrap_or_default().to_string(),
            port["port"].clone(),
        );
    }
    assert_eq!(service_ports.get("webhook"), Some(&json!(443)));
    assert_eq!(service_ports.get("metrics"), Some(&json!(8080)));

    let mut webhooks = 0;
    for (kind_, path) in [
        ("MutatingWebhookConfiguration", "/mutate-job"),
        ("ValidatingWebhookConfiguration", "/validate-config"),
    ] {
        let configuration = find(&["webhooks.yaml"], kind_, "arbiter");
        for webhook in items(&configuration["webhooks"]) {
            webhooks += 1;
            let client = &webhook["clientConfig"];
            assert!(
                client["caBundle"].is_null(),
                "the operator patches caBundle in: {webhook}"
            );
            assert!(client["url"].is_null());
            let target = &client["service"];
            assert_eq!(
                target["namespace"], service["metadata"]["namespace"],
                "{webhook}"
            );
            assert_eq!(target["name"], service["metadata"]["name"], "{webhook}");
            assert!(
                service_ports.values().any(|p| *p == target["port"]),
                "{webhook} calls port {}, which the Service does not expose",
                target["port"]
            );
            assert_eq!(target["path"], path);
            assert_eq!(webhook["failurePolicy"], "Fail");
            assert_eq!(webhook["sideEffects"], "None");
            assert_eq!(strings(&webhook["admissionReviewVersions"]), ["v1"]);
        }
    }
    assert_eq!(webhooks, 3);

    let monitor = find(&OPTIONAL, "ServiceMonitor", "arbiter");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert!(selects(
        &monitor["spec"]["selector"]["matchLabels"],
        &service["metadata"]["labels"]
    ));
    assert_eq!(
        strings(&monitor["spec"]["namespaceSelector"]["matchNames"]),
        [NAMESPACE]
    );
    let endpoints = items(&monitor["spec"]["endpoints"]);
    assert_eq!(endpoints.len(), 1);
    let port = endpoints[0]["port"].as_str().unwrap_or_default();
    assert!(
        service_ports.contains_key(port),
        "the ServiceMonitor scrapes port {port:?}"
    );
    assert_eq!(endpoints[0]["path"], "/metrics");
}

/// (group, version, resource) triples a list of RBAC or webhook rules names.
fn triples(rules: &[Value], versions: bool) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for rule in rules {
        let rule_versions = if versions {
            strings(&rule["apiVersions"])
        } else {
            vec![String::new()]
        };
        for group in strings(&rule["apiGroups"]) {
            for version in &rule_versions {
                for resource in strings(&rule["resources"]) {
                    out.insert((group.clone(), version.clone(), resource));
                }
            }
        }
    }
    out
}

#[test]
fn the_webhooks_cover_every_builtin_job_kind_and_every_configuration_kind() {
    // Each built-in kind's resource is its kind in lower case with an "s":
    // true of all of them (the ClusterRole in rbac.yaml names the same).
    let jobs: BTreeSet<(String, String, String)> = builtin_integrations()
        .iter()
        .map(|spec| {
            let (group, version) = spec
                .api_version
                .split_once('/')
                .unwrap_or(("", &spec.api_version));
            (
                group.to_string(),
                version.to_string(),
                format!("{}s", spec.kind.to_lowercase()),
            )
        })
        .collect();
    assert!(jobs.len() >= 11);
    let mutating = find(
        &["webhooks.yaml"],
        "MutatingWebhookConfiguration",
        "arbiter",
    );
    let mut labels = Vec::new();
    for webhook in items(&mutating["webhooks"]) {
        let rules = items(&webhook["rules"]);
        assert!(
            rules
                .iter()
                .all(|r| strings(&r["operations"]) == ["CREATE"]),
            "{webhook}"
        );
        assert_eq!(triples(rules, true), jobs, "{}", webhook["name"]);
        let selector = items(&webhook["objectSelector"]["matchExpressions"]);
        assert_eq!(selector.len(), 1);
        assert_eq!(selector[0]["operator"], "Exists");
        labels.push(selector[0]["key"].as_str().unwrap_or_default().to_string());
        assert_eq!(webhook["timeoutSeconds"], 10);
        assert_eq!(webhook["matchPolicy"], "Equivalent");
        assert_eq!(webhook["reinvocationPolicy"], "Never");
    }
    assert_eq!(labels, QUEUE_NAME_LABELS, "one webhook per queue label");
    let operator_role = find(&["rbac.yaml"], "ClusterRole", "arbiter-operator");
    let granted = triples(items(&operator_role["rules"]), false);
    for (group, _, resource) in &jobs {
        assert!(
            granted.contains(&(group.clone(), String::new(), resource.clone())),
            "rbac.yaml grants nothing on {group} {resource}"
        );
    }
    // Multi-cluster dispatch copies a worker's status back to the
    // manager's batch/v1 Job or Kubeflow v1 job.
    for (group, _, resource) in jobs.iter().filter(|(group, version, _)| {
        group == "batch" || (group == "kubeflow.org" && version == "v1")
    }) {
        assert!(
            granted.contains(&(group.clone(), String::new(), format!("{resource}/status"))),
            "rbac.yaml grants nothing on {group} {resource}/status"
        );
    }

    // The configuration kinds: every arbiter.dev CRD but Workload (the
    // operator's own) and MultiKueue's (read only by multi-cluster
    // dispatch, which names a broken one when it uses it).
    let multikueue = ["AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster"];
    let configuration: BTreeSet<(String, String, String)> = documents("crds.yaml")
        .iter()
        .filter(|crd| crd["spec"]["names"]["kind"] != "Workload")
        .filter(|crd| {
            !multikueue
                .iter()
                .any(|kind| crd["spec"]["names"]["kind"] == *kind)
        })
        .flat_map(|crd| {
            items(&crd["spec"]["versions"]).iter().map(|v| {
                (
                    crd["spec"]["group"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    v["name"].as_str().unwrap_or_default().to_string(),
                    crd["spec"]["names"]["plural"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
        })
        .collect();
    assert_eq!(configuration.len(), 6);
    let validating = find(
        &["webhooks.yaml"],
        "ValidatingWebhookConfiguration",
        "arbiter",
    );
    let webhooks = items(&validating["webhooks"]);
    assert_eq!(webhooks.len(), 1);
    assert_eq!(webhooks[0]["name"], "config.arbiter.dev");
    let rules = items(&webhooks[0]["rules"]);
    assert!(rules
        .iter()
        .all(|r| strings(&r["operations"]) == ["CREATE", "UPDATE"]));
    assert_eq!(triples(rules, true), configuration);
}

#[test]
fn no_cluster_role_grants_secrets() {
    let all: Vec<&str> = INSTALLED.iter().chain(&OPTIONAL).copied().collect();
    for (file, object) in objects(&all) {
        if !kind(&object).ends_with("Role") {
            continue;
        }
        for rule in items(&object["rules"]) {
            let resources = strings(&rule["resources"]);
            let everything = [&rule["apiGroups"], &rule["resources"], &rule["verbs"]]
                .iter()
                .any(|field| strings(field).iter().any(|s| s == "*"));
            assert!(
                !everything,
                "deploy/{file}: {} {}: a wildcard: {rule}",
                kind(&object),
                name(&object)
            );
            if resources.iter().any(|r| r == "secrets") {
                assert_eq!(
                    (kind(&object), object["metadata"]["namespace"].as_str()),
                    ("Role", Some(NAMESPACE)),
                    "deploy/{file}: Secrets only in the operator's namespace"
                );
                let verbs = strings(&rule["verbs"]);
                let own = strings(&rule["resourceNames"]) == ["arbiter-webhook-tls"];
                // The sealing key: read, by name, never changed.
                let key =
                    strings(&rule["resourceNames"]) == ["arbiter-record-key"] && verbs == ["get"];
                assert!(verbs == ["create"] || own || key, "deploy/{file}: {rule}");
                // List and watch only of the certificate's own Secret, by name.
                assert!(
                    own || !verbs.iter().any(|v| v == "list" || v == "watch"),
                    "{rule}"
                );
            }
        }
    }
}

const REGENERATE: &str =
    "arbiter policy configmap policies --name arbiter-default-bundle --namespace arbiter-system";

#[test]
fn the_default_bundle_configmap_is_generated_from_policies() {
    let args: Vec<&str> = REGENERATE.split(' ').skip(1).collect();
    let output = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .current_dir(root())
        .args(&args)
        .output()
        .unwrap_or_else(|e| panic!("running arbiter: {e}"));
    assert!(
        output.status.success(),
        "`{REGENERATE}` failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let generated = String::from_utf8(output.stdout).unwrap_or_default();
    assert!(
        read(&deploy("default-bundle.yaml")) == generated,
        "deploy/default-bundle.yaml differs from `{REGENERATE}`; regenerate it with \
         `cargo run -q -- {} > deploy/default-bundle.yaml`",
        args.join(" ")
    );
}

#[test]
fn the_default_bundle_configmap_loads_and_its_tests_pass() {
    let file = deploy("default-bundle.yaml");
    let configmap = bundle::read_configmap(&file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        configmap.metadata.name.as_deref(),
        Some("arbiter-default-bundle")
    );
    assert_eq!(configmap.metadata.namespace.as_deref(), Some(NAMESPACE));
    assert_eq!(
        configmap
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(CONFIGMAP_LABEL))
            .map(String::as_str),
        Some("true")
    );
    let size = bundle::configmap_size(&configmap);
    assert!(
        size <= CONFIGMAP_LIMIT,
        "{size} bytes, over the 1 MiB a ConfigMap may hold"
    );
    let binary: Vec<&String> = configmap
        .binary_data
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(binary, ["shortest-first.wasm"], "keys hold no '/'");

    let runtime = Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let from_configmap = bundle::load_path(&file, &runtime, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("deploy/default-bundle.yaml does not load: {e}"));
    let from_dir = bundle::load_path(&root().join("policies"), &runtime, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("policies/ does not load: {e}"));
    let names = |b: &bundle::Bundle| {
        b.policies
            .iter()
            .map(|p| p.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&from_configmap), names(&from_dir));
    assert_eq!(from_configmap.tests.len(), from_dir.tests.len());
    assert_eq!(from_configmap.name, from_dir.name);
    assert_eq!(from_configmap.version, from_dir.version);

    let output = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(["policy", "test"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("running arbiter: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(&format!("{} passed, 0 failed", from_dir.tests.len())),
        "{stdout}"
    );
}

mod api_server {
    //! deploy/ against a real kube-apiserver.

    use super::*;
    use crate::support::{create_namespace, served, start_cluster};
    use arbiter_testcluster::crd_documents;
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    use k8s_openapi::api::batch::v1::Job;
    use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
    use kube::discovery::Scope;
    use kube::Client;

    /// Server-side apply, refusing unknown or duplicate fields.
    async fn apply(client: &Client, object: &Value, file: &str) {
        let (resource, caps) = served(client, object, format!("deploy/{file}")).await;
        let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
            Some(ns) if caps.scope == Scope::Namespaced => {
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
        let params = PatchParams::apply("deploy-test")
            .force()
            .validation_strict();
        api.patch(name(object), &params, &Patch::Apply(object))
            .await
            .unwrap_or_else(|e| panic!("deploy/{file}: {} {}: {e}", kind(object), name(object)));
    }

    /// What RBAC says to `user` (in `groups`) doing `verb` on the resource.
    async fn allowed(
        client: &Client,
        (user, groups): (&str, &[&str]),
        verb: &str,
        (group, resource): (&str, &str),
        namespace: Option<&str>,
        object: Option<&str>,
    ) -> bool {
        let review: SubjectAccessReview = serde_json::from_value(json!({
            "spec": {
                "user": user,
                "groups": groups,
                "resourceAttributes": {
                    "verb": verb, "group": group, "resource": resource,
                    "namespace": namespace, "name": object,
                }
            }
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let answer = Api::<SubjectAccessReview>::all(client.clone())
            .create(&PostParams::default(), &review)
            .await
            .unwrap_or_else(|e| panic!("SubjectAccessReview: {e}"));
        answer.status.is_some_and(|s| s.allowed)
    }

    /// [`allowed`], waiting for a binding just applied to reach the API
    /// server's RBAC authorizer: it reads roles and bindings from informer
    /// caches, so a grant shows up a moment after the write returns. Asks
    /// up to 100 times, 100 ms apart.
    async fn granted(
        client: &Client,
        subject: (&str, &[&str]),
        verb: &str,
        resource: (&str, &str),
        namespace: Option<&str>,
        object: Option<&str>,
    ) -> bool {
        for _ in 0..100 {
            if allowed(client, subject, verb, resource, namespace, object).await {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        false
    }

    /// The example bindings commented in deploy/`file` (`#   ` blocks).
    fn commented_examples(file: &str) -> Vec<Value> {
        let mut blocks = vec![String::new()];
        for line in read(&deploy(file)).lines() {
            match line.strip_prefix("#   ") {
                Some(yaml) => {
                    let block = blocks.last_mut().expect("one block at least");
                    block.push_str(yaml);
                    block.push('\n');
                }
                None if blocks.last().is_some_and(|b| !b.is_empty()) => blocks.push(String::new()),
                None => {}
            }
        }
        blocks
            .iter()
            .filter(|b| !b.is_empty())
            .map(|b| serde_yaml_ng::from_str(b).unwrap_or_else(|e| panic!("{e}:\n{b}")))
            .collect()
    }

    fn job(name: &str, labels: Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "team-a", "labels": labels},
            "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}]}}}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test]
    async fn deploy_applies_routes_to_the_webhooks_and_grants_what_it_says() {
        let (cluster, admin) = start_cluster().await;
        let crds = crd_documents(&deploy("crds.yaml")).unwrap_or_else(|e| panic!("{e}"));
        cluster
            .install_crds(&crds)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        for namespace in ["team-a", "team-b"] {
            create_namespace(&admin, namespace).await;
        }
        for (file, object) in objects(&INSTALLED) {
            if kind(&object) != "CustomResourceDefinition" {
                apply(&admin, &object, &file).await;
            }
        }

        // The operator's ServiceAccount.
        let groups = [
            "system:serviceaccounts",
            "system:serviceaccounts:arbiter-system",
            "system:authenticated",
        ];
        let operator = ("system:serviceaccount:arbiter-system:arbiter", &groups[..]);
        let lease = ("coordination.k8s.io", "leases");
        let secret = ("", "secrets");
        let configmap = ("", "configmaps");
        let mutating = (
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
        );
        let validating = (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
        );
        let ns = Some(NAMESPACE);
        let may = [
            ("get", lease, ns, Some("arbiter-leader")),
            ("update", lease, ns, Some("arbiter-leader")),
            ("create", lease, ns, None),
            ("get", secret, ns, Some("arbiter-webhook-tls")),
            ("patch", secret, ns, Some("arbiter-webhook-tls")),
            ("update", secret, ns, Some("arbiter-webhook-tls")),
            // Its certificate's Secret watched by name (a field selector on
            // metadata.name, authorized as that name).
            ("list", secret, ns, Some("arbiter-webhook-tls")),
            ("watch", secret, ns, Some("arbiter-webhook-tls")),
            ("create", secret, ns, None),
            // The admission records' sealing key, read by name.
            ("get", secret, ns, Some("arbiter-record-key")),
            ("patch", mutating, None, Some("arbiter")),
            ("get", validating, None, Some("arbiter")),
            ("patch", validating, None, Some("arbiter")),
            ("list", validating, None, None),
            ("list", configmap, None, None),
            ("watch", configmap, Some("team-a"), None),
            ("watch", ("", "pods"), None, None),
            ("patch", ("", "pods"), Some("team-a"), Some("train-0")),
            (
                "get",
                ("arbiter.dev", "clusterqueues"),
                None,
                Some("research"),
            ),
            // Topologies, Arbiter's and Kueue's, watched.
            ("watch", ("arbiter.dev", "topologies"), None, None),
            ("list", ("kueue.x-k8s.io", "topologies"), None, None),
            // The in-use finalizer.
            (
                "patch",
                ("arbiter.dev", "clusterqueues"),
                None,
                Some("research"),
            ),
            (
                "patch",
                ("arbiter.dev", "resourceflavors"),
                None,
                Some("a100"),
            ),
            (
                "patch",
                ("kubeflow.org", "pytorchjobs"),
                Some("team-a"),
                Some("train"),
            ),
            // A failed job run again: deleted and created anew.
            ("delete", ("batch", "jobs"), Some("team-a"), Some("train")),
            ("create", ("batch", "jobs"), Some("team-a"), None),
        ];
        for (verb, resource, namespace, object) in may {
            assert!(
                granted(&admin, operator, verb, resource, namespace, object).await,
                "the operator may {verb} {resource:?} {object:?} in {namespace:?}"
            );
        }
        let may_not = [
            ("get", secret, ns, Some("other")),
            ("list", secret, ns, None),
            ("watch", secret, ns, None),
            ("watch", secret, ns, Some("other")),
            ("update", secret, ns, Some("arbiter-record-key")),
            ("get", secret, Some("team-a"), Some("arbiter-webhook-tls")),
            ("create", secret, Some("team-a"), None),
            ("update", lease, ns, Some("other")),
            ("get", lease, Some("kube-system"), Some("arbiter-leader")),
            ("patch", mutating, None, Some("other")),
            ("delete", mutating, None, Some("arbiter")),
            ("create", validating, None, None),
            ("create", configmap, Some("team-a"), None),
            ("update", configmap, ns, Some("arbiter-default-bundle")),
            ("delete", ("", "pods"), Some("team-a"), Some("train-0")),
            ("create", ("", "pods"), Some("team-a"), None),
            (
                "update",
                ("arbiter.dev", "clusterqueues"),
                None,
                Some("research"),
            ),
            ("patch", ("arbiter.dev", "topologies"), None, Some("dc")),
        ];
        for (verb, resource, namespace, object) in may_not {
            assert!(
                !allowed(&admin, operator, verb, resource, namespace, object).await,
                "the operator may not {verb} {resource:?} {object:?} in {namespace:?}"
            );
        }

        // A tenant, bound as queue-manager.yaml's comments show.
        let examples = commented_examples("queue-manager.yaml");
        assert_eq!(
            examples
                .iter()
                .map(|e| kind(e).to_string())
                .collect::<Vec<_>>(),
            ["RoleBinding", "ClusterRoleBinding"]
        );
        let tenant = ("alice", &["team-a-admins", "system:authenticated"][..]);
        let localqueue = ("arbiter.dev", "localqueues");
        let team_a = Some("team-a");
        assert!(!allowed(&admin, tenant, "create", localqueue, team_a, None).await);
        apply(
            &admin,
            &examples[0],
            "queue-manager.yaml (example RoleBinding)",
        )
        .await;
        let may = [
            ("create", localqueue, team_a, None),
            ("delete", localqueue, team_a, Some("research")),
            ("list", ("arbiter.dev", "workloads"), team_a, None),
            ("create", configmap, team_a, None),
            ("update", configmap, team_a, Some("my-bundle")),
        ];
        for (verb, resource, namespace, object) in may {
            assert!(
                granted(&admin, tenant, verb, resource, namespace, object).await,
                "the tenant may {verb} {resource:?} {object:?} in {namespace:?}"
            );
        }
        let clusterqueue = ("arbiter.dev", "clusterqueues");
        let may_not = [
            ("create", localqueue, Some("team-b"), None),
            ("create", configmap, Some("team-b"), None),
            ("update", configmap, ns, Some("arbiter-default-bundle")),
            ("get", secret, team_a, Some("token")),
            (
                "update",
                ("arbiter.dev", "workloads"),
                team_a,
                Some("job-a"),
            ),
            ("list", clusterqueue, None, None),
        ];
        for (verb, resource, namespace, object) in may_not {
            assert!(
                !allowed(&admin, tenant, verb, resource, namespace, object).await,
                "the tenant may not {verb} {resource:?} {object:?} in {namespace:?}"
            );
        }
        apply(
            &admin,
            &examples[1],
            "queue-manager.yaml (example ClusterRoleBinding)",
        )
        .await;
        assert!(granted(&admin, tenant, "list", clusterqueue, None, None).await);
        assert!(!allowed(&admin, tenant, "create", clusterqueue, None, None).await);

        // Whoever runs the what-if, bound as what-if.yaml's comment shows:
        // get and list what the snapshot reads, nothing else.
        let examples = commented_examples("what-if.yaml");
        assert_eq!(
            examples
                .iter()
                .map(|e| kind(e).to_string())
                .collect::<Vec<_>>(),
            ["ClusterRoleBinding"]
        );
        let reader = ("carol", &["platform-team", "system:authenticated"][..]);
        let nodes = ("", "nodes");
        assert!(!allowed(&admin, reader, "list", nodes, None, None).await);
        apply(
            &admin,
            &examples[0],
            "what-if.yaml (example ClusterRoleBinding)",
        )
        .await;
        let workloads = ("arbiter.dev", "workloads");
        let may = [
            ("list", nodes, None, None),
            ("list", ("", "namespaces"), None, None),
            ("list", configmap, None, None),
            ("list", workloads, None, None),
            ("list", clusterqueue, None, None),
            (
                "get",
                ("arbiter.dev", "localqueues"),
                team_a,
                Some("research"),
            ),
            ("list", ("kueue.x-k8s.io", "clusterqueues"), None, None),
            ("list", ("batch", "jobs"), None, None),
            ("list", ("kubeflow.org", "pytorchjobs"), None, None),
        ];
        for (verb, resource, namespace, object) in may {
            assert!(
                granted(&admin, reader, verb, resource, namespace, object).await,
                "the what-if may {verb} {resource:?} {object:?} in {namespace:?}"
            );
        }
        let may_not = [
            ("watch", nodes, None, None),
            ("get", secret, team_a, Some("token")),
            ("list", secret, None, None),
            ("create", configmap, team_a, None),
            ("update", workloads, team_a, Some("job-a")),
            ("patch", clusterqueue, None, Some("research")),
            ("delete", ("batch", "jobs"), team_a, Some("train")),
            ("list", ("", "pods"), None, None),
        ];
        for (verb, resource, namespace, object) in may_not {
            assert!(
                !allowed(&admin, reader, verb, resource, namespace, object).await,
                "the what-if may not {verb} {resource:?} {object:?} in {namespace:?}"
            );
        }

        // The API server sends queued jobs and configuration objects to the
        // webhooks; with no operator serving them (and no caBundle yet)
        // they fail closed. A job with no queue label is not sent.
        let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
        jobs.create(&PostParams::default(), &job("unqueued", json!({})))
            .await
            .unwrap_or_else(|e| panic!("a job without a queue label is not held up: {e}"));
        for (webhook, label) in ["jobs.arbiter.dev", "kueue-jobs.arbiter.dev"]
            .iter()
            .zip(QUEUE_NAME_LABELS)
        {
            let error = jobs
                .create(
                    &PostParams::default(),
                    &job("queued", json!({label: "research"})),
                )
                .await
                .expect_err("refused while no webhook answers");
            assert!(
                error
                    .to_string()
                    .contains(&format!("failed calling webhook \"{webhook}\"")),
                "{label}: {error}"
            );
        }
        let queues: Api<DynamicObject> = Api::all_with(
            admin.clone(),
            &kube::api::ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("arbiter.dev", "v1alpha1", "ClusterQueue"),
                "clusterqueues",
            ),
        );
        let queue: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "arbiter.dev/v1alpha1", "kind": "ClusterQueue",
            "metadata": {"name": "research"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
                "flavors": [{"name": "a100", "resources": [{"name": "cpu", "nominalQuota": 64}]}]}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let error = queues
            .create(&PostParams::default(), &queue)
            .await
            .expect_err("refused while no webhook answers");
        assert!(
            error
                .to_string()
                .contains("failed calling webhook \"config.arbiter.dev\""),
            "{error}"
        );
    }
}
