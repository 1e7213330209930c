//! `deploy/helm/arbiter`, the Helm chart, with the helm v4 that
//! `scripts/test-cluster.sh` builds: `helm lint --strict` passes; rendered
//! with its default values in arbiter-system it makes exactly the objects
//! of deploy/'s kustomization, field for field, but the Namespace (Helm
//! makes it: `--create-namespace`), its CRDs and default bundle are
//! deploy/'s files byte for byte, and its ServiceMonitor is deploy/'s;
//! other values render what they say (image, replicas, resources, leader
//! election, log format, cert-manager's certificate wired to what
//! `arbiter run` reads, extra bundles that `arbiter_policy::bundle` loads,
//! integrations that `arbiter run --integrations` reads and the webhooks
//! cover); bad values are refused naming the value. Against a real
//! kube-apiserver, `helm install`, `helm upgrade` and `helm uninstall` make,
//! change and remove what the chart renders (CRDs kept, as Helm keeps them);
//! switched to cert-manager (cert-manager's own Certificate and Issuer CRDs,
//! rendered from its chart by `scripts/test-cluster.sh`, take the chart's
//! objects under Helm's strict field validation; cert-manager's controllers
//! do not run), `arbiter run` with the rendered arguments, under the
//! chart's ServiceAccount, leads, serves the certificate mounted where
//! cert-manager's Secret would be, and leaves caBundle alone.
//!
//! Each test runs helm with its own cache, configuration and data
//! directories and kubeconfig, never the user's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arbiter_policy::bundle::{self, LoadOptions, CONFIGMAP_LABEL};
use arbiter_policy::wasm::Runtime;
use serde_json::{json, Value};

mod support;
use support::{documents, items, read, root, strings};

/// The chart, from the repository root.
const CHART: &str = "deploy/helm/arbiter";
/// The namespace deploy/ installs into, and the chart's documented one.
const NAMESPACE: &str = "arbiter-system";
const RELEASE: &str = "arbiter";

/// What names an object: kind, namespace (empty when cluster-scoped), name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    kind: String,
    namespace: String,
    name: String,
}

impl Key {
    fn of(object: &Value) -> Key {
        let get = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
        Key {
            kind: get("/kind").into(),
            namespace: get("/metadata/namespace").into(),
            name: get("/metadata/name").into(),
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.namespace.as_str() {
            "" => write!(f, "{} {}", self.kind, self.name),
            ns => write!(f, "{} {ns}/{}", self.kind, self.name),
        }
    }
}

/// Objects by key, each with where it came from; two of one key fail.
fn by_key(objects: impl IntoIterator<Item = (String, Value)>) -> BTreeMap<Key, (String, Value)> {
    let mut map = BTreeMap::new();
    for (from, object) in objects {
        let key = Key::of(&object);
        if let Some((before, _)) = map.insert(key.clone(), (from.clone(), object)) {
            panic!("{key} is made twice: by {before} and by {from}");
        }
    }
    map
}

/// The objects of one kind.
fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The one object of `kind` named `name`.
fn one<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = of_kind(objects, kind)
        .into_iter()
        .filter(|o| o["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name} rendered");
    found[0]
}

/// A value in a message: its JSON, cut short.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(160) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// Where `chart` and `deploy` differ, one line per field:
/// `spec.replicas: the chart has 3, deploy/ has 2`.
fn differences(path: &str, chart: &Value, deploy: &Value, out: &mut Vec<String>) {
    let at = |field: &str| match path {
        "" => field.to_string(),
        _ => format!("{path}.{field}"),
    };
    match (chart, deploy) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => differences(&at(key), x, y, out),
                    (Some(x), None) => {
                        out.push(format!("{}: only the chart has it ({})", at(key), shown(x)))
                    }
                    (None, Some(y)) => {
                        out.push(format!("{}: only deploy/ has it ({})", at(key), shown(y)))
                    }
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(&format!("{path}[{i}]"), x, y, out);
            }
        }
        _ if chart != deploy => out.push(format!(
            "{path}: the chart has {}, deploy/ has {}",
            shown(chart),
            shown(deploy)
        )),
        _ => {}
    }
}

/// The objects of the files deploy/kustomization.yaml lists, with their file.
fn kustomization_objects() -> Vec<(String, Value)> {
    let path = root().join("deploy/kustomization.yaml");
    let kustomization = documents(&read(&path), "deploy/kustomization.yaml");
    let files = strings(&kustomization[0]["resources"]);
    assert!(
        !files.is_empty(),
        "deploy/kustomization.yaml lists no resources"
    );
    files
        .iter()
        .flat_map(|file| {
            let what = format!("deploy/{file}");
            documents(&read(&root().join("deploy").join(file)), &what)
                .into_iter()
                .map(move |o| (what.clone(), o))
        })
        .collect()
}

/// helm, with homes of its own in a temporary directory and the given
/// kubeconfig (by default one that does not exist: no cluster).
struct Helm {
    bin: PathBuf,
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Helm {
    fn new() -> Helm {
        let dir = arbiter_testcluster::binaries().unwrap_or_else(|e| panic!("{e}"));
        let bin = dir.join("helm");
        assert!(
            bin.is_file(),
            "{} holds no helm; run scripts/test-cluster.sh (it builds helm v4 from its Go module)",
            dir.display()
        );
        let home = tempfile::Builder::new()
            .prefix("arbiter-helm-")
            .tempdir()
            .unwrap_or_else(|e| panic!("a temporary directory for helm: {e}"));
        let kubeconfig = home.path().join("no-cluster.kubeconfig");
        Helm {
            bin,
            home,
            kubeconfig,
        }
    }

    fn with_kubeconfig(kubeconfig: PathBuf) -> Helm {
        Helm {
            kubeconfig,
            ..Helm::new()
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let home = self.home.path();
        Command::new(&self.bin)
            .current_dir(root())
            .args(args)
            .env_clear()
            .env("HOME", home)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .env("KUBECONFIG", &self.kubeconfig)
            .env("NO_COLOR", "1")
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", self.bin.display()))
    }

    /// stdout of `helm ARGS`, which must succeed.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "`helm {}` failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// stdout and stderr of `helm ARGS`, which must fail.
    fn refused(&self, args: &[&str]) -> String {
        let output = self.run(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            !output.status.success(),
            "`helm {}` succeeded:\n{text}",
            args.join(" ")
        );
        text
    }

    /// The objects `helm template` renders in `namespace` with `values` flags.
    fn template(&self, namespace: &str, values: &[&str]) -> Vec<Value> {
        let mut args = vec!["template", RELEASE, CHART, "--namespace", namespace];
        args.extend_from_slice(values);
        documents(&self.ok(&args), &format!("`helm {}`", args.join(" ")))
    }

    /// A file in helm's temporary directory.
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.home.path().join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }
}

#[test]
fn helm_lint_strict_passes() {
    let helm = Helm::new();
    let out = helm.ok(&["lint", "--strict", CHART]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
    let values = helm.file("custom.json", &custom_values().to_string());
    let path = values.to_string_lossy();
    let out = helm.ok(&["lint", "--strict", CHART, "-f", &path]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
}

#[test]
fn with_default_values_the_chart_makes_what_the_kustomization_makes() {
    let helm = Helm::new();
    let rendered = helm.template(NAMESPACE, &["--include-crds"]);
    let chart = by_key(rendered.into_iter().map(|o| ("the chart".to_string(), o)));
    let deploy = by_key(kustomization_objects());
    let mut problems = Vec::new();
    for (key, (file, object)) in &deploy {
        match chart.get(key) {
            // Helm makes the release namespace (`--create-namespace`);
            // a chart owning it would delete it, and all in it, on uninstall.
            None if key.kind == "Namespace" && key.name == NAMESPACE => {}
            None => problems.push(format!("{key} ({file}): the chart does not make it")),
            Some((_, made)) => {
                let mut found = Vec::new();
                differences("", made, object, &mut found);
                problems.extend(found.into_iter().map(|d| format!("{key} ({file}): {d}")));
            }
        }
    }
    for key in chart.keys().filter(|k| !deploy.contains_key(k)) {
        problems.push(format!("{key}: the chart makes it, deploy/ does not"));
    }
    assert!(
        problems.is_empty(),
        "`helm template {RELEASE} {CHART} -n {NAMESPACE} --include-crds` (default values) and \
         deploy/kustomization.yaml differ; change both alike:\n{}",
        problems.join("\n")
    );
    assert!(
        deploy.len() > 15,
        "only {} objects in deploy/",
        deploy.len()
    );
}

#[test]
fn the_charts_crds_and_default_bundle_are_deploys_files_byte_for_byte() {
    let chart = root().join(CHART);
    for (copy, source) in [
        ("crds/crds.yaml", "crds.yaml"),
        ("files/default-bundle.yaml", "default-bundle.yaml"),
    ] {
        let bytes = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(
            bytes(&chart.join(copy)) == bytes(&root().join("deploy").join(source)),
            "{CHART}/{copy} differs from deploy/{source} (generated: see its first lines); \
             copy it again: `cp deploy/{source} {CHART}/{copy}`"
        );
    }
    let in_crds: Vec<String> = std::fs::read_dir(chart.join("crds"))
        .unwrap_or_else(|e| panic!("{CHART}/crds: {e}"))
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{e}"))
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        in_crds,
        ["crds.yaml"],
        "{CHART}/crds holds deploy/crds.yaml alone"
    );
}

/// The ServiceMonitors of deploy/monitoring/servicemonitor.yaml.
fn deploy_service_monitors() -> Vec<(String, Value)> {
    let what = "deploy/monitoring/servicemonitor.yaml".to_string();
    documents(&read(&root().join(&what)), &what)
        .into_iter()
        .filter(|o| o["kind"] == "ServiceMonitor")
        .map(|o| (what.clone(), o))
        .collect()
}

#[test]
fn monitoring_renders_deploys_service_monitor_and_is_off_by_default() {
    let helm = Helm::new();
    assert!(of_kind(&helm.template(NAMESPACE, &[]), "ServiceMonitor").is_empty());
    let rendered = helm.template(NAMESPACE, &["--set", "monitoring.enabled=true"]);
    let made = one(&rendered, "ServiceMonitor", "arbiter");
    let deployed = deploy_service_monitors();
    assert_eq!(
        deployed.len(),
        1,
        "one ServiceMonitor in deploy/monitoring/servicemonitor.yaml: {deployed:?}"
    );
    let (file, object) = &deployed[0];
    let mut found = Vec::new();
    differences("", made, object, &mut found);
    assert!(
        found.is_empty(),
        "the chart's ServiceMonitor (monitoring.enabled) and {file}'s differ; change both alike:\n{}",
        found.join("\n")
    );

    // Its values: the labels a Prometheus selects by, the interval, the
    // release namespace; it still scrapes the Service's metrics port.
    let Custom { objects, .. } = custom();
    let monitor = one(&objects, "ServiceMonitor", "arbiter");
    let labels = &monitor["metadata"]["labels"];
    assert_eq!(labels["release"], "prometheus");
    assert_eq!(labels["app.kubernetes.io/name"], "arbiter");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["interval"], "15s");
    assert_eq!(
        strings(&monitor["spec"]["namespaceSelector"]["matchNames"]),
        [CUSTOM_NAMESPACE]
    );
    let service = one(&objects, "Service", "arbiter");
    for (key, value) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
    {
        assert_eq!(
            &service["metadata"]["labels"][key], value,
            "the ServiceMonitor selects the Service"
        );
    }
    assert!(
        items(&service["spec"]["ports"])
            .iter()
            .any(|p| p["name"] == endpoint["port"]),
        "the Service has the port {}",
        endpoint["port"]
    );
}

/// The platform bundle of [`custom_values`]: CEL, and the WebAssembly
/// module of the default bundle (binaryData), with a test the loader runs.
const PLATFORM_BUNDLE: &str = r#"apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {name: gpu-caps, version: "1"}
spec:
  policies:
  - {name: at-most-8-gpus, hook: admission, cel: {expression: "workload.gpus <= 8"}}
  - name: shortest-first
    hook: weight
    wasm:
      module: shortest-first.wasm
      config: {scale: 100.0, referenceSeconds: 3600.0, unknownScore: 0.0}
  tests:
  - name: nine-gpus-denied
    policy: at-most-8-gpus
    input:
      workload: {namespace: team-a, gpus: 9}
    expect: {allowed: false}
"#;

/// The tenant bundle of [`custom_values`], for team-a.
const TENANT_BUNDLE: &str = r#"apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {name: team-a, version: "1"}
spec:
  policies:
  - {name: small-jobs, hook: admission, cel: {expression: "workload.gpus <= 2"}}
"#;

/// The JobIntegration of examples/integrations/article-pipelinerun.yaml
/// as an `integrations` entry.
fn example_integration() -> Value {
    let path = root().join("examples/integrations/article-pipelinerun.yaml");
    let docs = documents(
        &read(&path),
        "examples/integrations/article-pipelinerun.yaml",
    );
    json!({
        "name": docs[0]["metadata"]["name"],
        "resource": "pipelineruns",
        "spec": docs[0]["spec"],
    })
}

/// Values changing everything the chart lets change.
fn custom_values() -> Value {
    let default_bundle = documents(
        &read(&root().join("deploy/default-bundle.yaml")),
        "deploy/default-bundle.yaml",
    );
    let wasm = &default_bundle[0]["binaryData"]["shortest-first.wasm"];
    assert!(
        wasm.is_string(),
        "deploy/default-bundle.yaml carries shortest-first.wasm"
    );
    json!({
        "image": {"repository": "registry.example/ml/arbiter", "tag": "0.2.0", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "regcred"}],
        "replicas": 3,
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "4Gi"}},
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
        "leaderElection": {"enabled": true, "leaseDurationSeconds": 30, "renewGraceSeconds": 10},
        "logFormat": "text",
        "dashboard": {"enabled": false},
        "extraArgs": ["--batch-window-ms", "50"],
        "webhook": {"certificates": "cert-manager"},
        "defaultBundle": {"enabled": false},
        "extraBundles": [
            {"name": "gpu-caps", "data": {"bundle.yaml": PLATFORM_BUNDLE},
             "binaryData": {"shortest-first.wasm": wasm}},
            {"name": "team-a-bundle", "namespace": "team-a", "data": {"bundle.yaml": TENANT_BUNDLE}},
        ],
        "integrations": [example_integration()],
        "monitoring": {"enabled": true, "interval": "15s", "labels": {"release": "prometheus"}},
    })
}

/// The operator container of the rendered Deployment arbiter.
fn container(objects: &[Value]) -> &Value {
    let deployment = one(objects, "Deployment", "arbiter");
    let containers = items(&deployment["spec"]["template"]["spec"]["containers"]);
    assert_eq!(containers.len(), 1, "one container");
    &containers[0]
}

/// The value after `flag` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).map(String::as_str)
}

/// `arbiter ARGS --help` parses: clap checks every flag and value first.
fn assert_parses(args: &[String]) {
    let output = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("running arbiter: {e}"));
    assert!(
        output.status.success(),
        "`arbiter {}` does not parse:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The mount path of the rendered Deployment's volume whose `source`
/// (`secret`, `configMap`) has `field` (`secretName`, `name`) equal to `name`.
fn mounted(objects: &[Value], source: &str, field: &str, name: &str) -> Option<String> {
    let pod = &one(objects, "Deployment", "arbiter")["spec"]["template"]["spec"];
    let volume = items(&pod["volumes"])
        .iter()
        .find(|v| v[source][field] == name)?;
    items(&container(objects)["volumeMounts"])
        .iter()
        .find(|m| m["name"] == volume["name"])
        .and_then(|m| m["mountPath"].as_str().map(str::to_string))
}

/// The namespace [`custom_values`] are rendered in.
const CUSTOM_NAMESPACE: &str = "ml-platform";

/// [`custom_values`] rendered in [`CUSTOM_NAMESPACE`], with the helm (and
/// its directory) that rendered them.
struct Custom {
    helm: Helm,
    values: Value,
    objects: Vec<Value>,
}

fn custom() -> Custom {
    let helm = Helm::new();
    let values = custom_values();
    let file = helm.file("custom.json", &values.to_string());
    let objects = helm.template(CUSTOM_NAMESPACE, &["-f", &file.to_string_lossy()]);
    Custom {
        helm,
        values,
        objects,
    }
}

#[test]
fn other_values_set_the_operators_pods() {
    let Custom {
        values, objects, ..
    } = custom();
    assert!(
        !serde_json::to_string(&objects)
            .unwrap_or_default()
            .contains(NAMESPACE),
        "every object is in the release namespace, and names no other"
    );
    let deployment = one(&objects, "Deployment", "arbiter");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["imagePullSecrets"], values["imagePullSecrets"]);
    assert_eq!(pod["nodeSelector"], values["nodeSelector"]);
    assert_eq!(pod["tolerations"], values["tolerations"]);
    let main = container(&objects);
    assert_eq!(main["image"], "registry.example/ml/arbiter:0.2.0");
    assert_eq!(main["imagePullPolicy"], "Always");
    assert_eq!(main["resources"], values["resources"]);
    let args = strings(&main["args"]);
    assert_eq!(flag(&args, "--log-format"), Some("text"));
    assert!(args.iter().any(|a| a == "--leader-election"));
    assert_eq!(flag(&args, "--lease-duration"), Some("30"));
    assert_eq!(flag(&args, "--lease-grace"), Some("10"));
    assert_eq!(flag(&args, "--batch-window-ms"), Some("50"));
    assert!(args.iter().any(|a| a == "--no-dashboard"), "{args:?}");
    assert_parses(&args);
    assert_eq!(
        one(&objects, "PodDisruptionBudget", "arbiter")["spec"]["minAvailable"],
        1
    );
}

/// Where the cert-manager wiring of `objects` (rendered in `namespace`)
/// breaks: the Certificate must name the hosts the webhooks are called at,
/// among those the operator would make its own certificate for; its Secret
/// must be mounted where `--webhook-cert-dir` points; the webhook
/// configurations must take their CA from it; the operator must leave
/// caBundle alone and have no access to what cert-manager keeps.
fn assert_cert_manager_wiring(objects: &[Value], namespace: &str) {
    let certificate = one(objects, "Certificate", "arbiter-webhook");
    let secret = certificate["spec"]["secretName"]
        .as_str()
        .unwrap_or_default();
    let args = strings(&container(objects)["args"]);
    let dir = mounted(objects, "secret", "secretName", secret);
    assert!(dir.is_some(), "the Secret {secret} is mounted");
    assert_eq!(flag(&args, "--webhook-cert-dir"), dir.as_deref());
    assert_eq!(
        flag(&args, "--webhook-configuration"),
        Some(""),
        "the operator leaves caBundle to cert-manager's CA injector"
    );
    assert_parses(&args);
    let dns_names = strings(&certificate["spec"]["dnsNames"]);
    let operator_names = arbiter_operator::webhook::certs::service_names("arbiter", namespace);
    assert!(
        dns_names.iter().all(|n| operator_names.contains(n)),
        "{dns_names:?} are names the operator's own certificate has ({operator_names:?})"
    );
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let configuration = one(objects, kind, "arbiter");
        assert_eq!(
            configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            format!("{namespace}/arbiter-webhook"),
            "{kind}"
        );
        for webhook in items(&configuration["webhooks"]) {
            let service = &webhook["clientConfig"]["service"];
            let host = format!(
                "{}.{}.svc",
                service["name"].as_str().unwrap_or_default(),
                service["namespace"].as_str().unwrap_or_default()
            );
            assert!(
                dns_names.contains(&host),
                "{kind} calls {host}, which the Certificate ({dns_names:?}) does not name"
            );
        }
    }
    let role = one(objects, "Role", "arbiter-operator");
    assert!(
        !role.to_string().contains("arbiter-webhook-tls"),
        "no access to the self-managed certificate's Secret: {role}"
    );
    let cluster_role = one(objects, "ClusterRole", "arbiter-operator");
    assert!(
        !cluster_role.to_string().contains("webhookconfigurations"),
        "no access to the webhook configurations: {cluster_role}"
    );
}

#[test]
fn under_cert_manager_the_certificate_is_where_the_operator_reads_it() {
    let Custom { objects, .. } = custom();
    assert_cert_manager_wiring(&objects, CUSTOM_NAMESPACE);
    // The chart's CA: a self-signed Issuer signs the CA Certificate, whose
    // Secret the CA Issuer signs the serving Certificate with.
    let certificate = one(&objects, "Certificate", "arbiter-webhook");
    let name = |o: &Value| {
        o["spec"]["issuerRef"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let ca_issuer = one(&objects, "Issuer", &name(certificate));
    let ca_secret = &ca_issuer["spec"]["ca"]["secretName"];
    let ca = of_kind(&objects, "Certificate")
        .into_iter()
        .find(|c| &c["spec"]["secretName"] == ca_secret)
        .unwrap_or_else(|| panic!("no Certificate makes the CA Secret {ca_secret}"));
    assert_eq!(ca["spec"]["isCA"], true);
    let root_issuer = one(&objects, "Issuer", &name(ca));
    assert!(root_issuer["spec"]["selfSigned"].is_object());
}

#[test]
fn extra_bundles_are_labelled_configmaps_the_operator_loads() {
    let Custom { helm, objects, .. } = custom();
    let configmaps = of_kind(&objects, "ConfigMap");
    assert!(
        configmaps
            .iter()
            .all(|c| c["metadata"]["name"] != "arbiter-default-bundle"),
        "defaultBundle.enabled: false"
    );
    let runtime = Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    for (name, namespace, tenant) in [
        ("gpu-caps", CUSTOM_NAMESPACE, None),
        ("team-a-bundle", "team-a", Some("team-a".to_string())),
    ] {
        let configmap = configmaps
            .iter()
            .find(|c| c["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no ConfigMap {name} rendered"));
        assert_eq!(configmap["metadata"]["namespace"], namespace);
        assert_eq!(configmap["metadata"]["labels"][CONFIGMAP_LABEL], "true");
        let path = helm.file(&format!("{name}.yaml"), &configmap.to_string());
        let options = LoadOptions {
            tenant,
            ..LoadOptions::default()
        };
        let loaded = bundle::load_path(&path, &runtime, &options)
            .unwrap_or_else(|e| panic!("the extra bundle {name} does not load: {e}"));
        assert!(!loaded.policies.is_empty(), "{name}");
    }
}

#[test]
fn integrations_are_read_by_the_operator_granted_and_held_by_the_webhooks() {
    let Custom { helm, objects, .. } = custom();
    let args = strings(&container(&objects)["args"]);
    let file = PathBuf::from(flag(&args, "--integrations").unwrap_or_default());
    let file_name = file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert_eq!(
        mounted(&objects, "configMap", "name", "arbiter-integrations").map(PathBuf::from),
        file.parent().map(Path::to_path_buf),
        "the ConfigMap arbiter-integrations is mounted where --integrations reads"
    );
    let configmap = one(&objects, "ConfigMap", "arbiter-integrations");
    let text = configmap["data"][file_name].as_str().unwrap_or_default();
    let (kinds, warnings) = arbiter_operator::integrations::read(&[helm.file(file_name, text)])
        .unwrap_or_else(|e| panic!("arbiter run --integrations refuses the rendered file: {e}"));
    assert!(warnings.is_empty(), "{warnings:?}");
    let builtin = arbiter_core::jobs::Integrations::builtin();
    assert!(builtin.find("kubeflow.org/v1", "PipelineRun").is_none());
    assert!(kinds.find("kubeflow.org/v1", "PipelineRun").is_some());

    let cluster_role = one(&objects, "ClusterRole", "arbiter-operator");
    let granted = items(&cluster_role["rules"]).iter().any(|r| {
        strings(&r["apiGroups"]) == ["kubeflow.org"]
            && strings(&r["resources"]) == ["pipelineruns"]
            && strings(&r["verbs"])
                == [
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ]
    });
    assert!(granted, "the operator may hold and release PipelineRuns");
    let mutating: k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration =
        serde_json::from_value(one(&objects, "MutatingWebhookConfiguration", "arbiter").clone())
            .unwrap_or_else(|e| panic!("{e}"));
    let pipeline_runs = kube::api::ApiResource {
        group: "kubeflow.org".into(),
        version: "v1".into(),
        api_version: "kubeflow.org/v1".into(),
        kind: "PipelineRun".into(),
        plural: "pipelineruns".into(),
    };
    let missing = arbiter_operator::webhook::rules::missing_rules(&mutating, &[pipeline_runs]);
    assert!(
        missing.is_empty(),
        "the job-hold webhooks hold new PipelineRuns (the operator would add {missing:?})"
    );
    let deployment = one(&objects, "Deployment", "arbiter");
    assert!(
        deployment["spec"]["template"]["metadata"]["annotations"]
            ["arbiter.dev/integrations-sha256"]
            .is_string(),
        "a change of the integrations rolls the Pods"
    );
}

#[test]
fn a_single_replica_without_leader_election_and_an_issuer_of_ones_own() {
    let helm = Helm::new();
    let objects = helm.template(
        NAMESPACE,
        &[
            "--set",
            "replicas=1",
            "--set",
            "leaderElection.enabled=false",
            "--set",
            "webhook.certificates=cert-manager",
            "--set",
            "webhook.certManager.issuerRef.kind=ClusterIssuer",
            "--set",
            "webhook.certManager.issuerRef.name=corp-ca",
        ],
    );
    assert_eq!(
        one(&objects, "Deployment", "arbiter")["spec"]["replicas"],
        1
    );
    assert!(
        of_kind(&objects, "PodDisruptionBudget").is_empty(),
        "no budget blocking every drain"
    );
    let args = strings(&container(&objects)["args"]);
    assert!(!args.iter().any(|a| a == "--leader-election"));
    assert_parses(&args);
    assert!(
        of_kind(&objects, "Issuer").is_empty(),
        "no CA of the chart's own"
    );
    let certificates = of_kind(&objects, "Certificate");
    assert_eq!(certificates.len(), 1);
    assert_eq!(
        certificates[0]["spec"]["issuerRef"],
        json!({"kind": "ClusterIssuer", "name": "corp-ca"})
    );
    assert_cert_manager_wiring(&objects, NAMESPACE);
}

/// Values the schema refuses: `helm lint` refuses them too.
const AGAINST_THE_SCHEMA: &[(&[&str], &str)] = &[
    (
        &["--set", "replicas=0"],
        "at '/replicas': minimum: got 0, want 1",
    ),
    (
        &["--set", "replica=3"],
        "additional properties 'replica' not allowed",
    ),
    (
        &["--set", "webhook.certificates=letsencrypt"],
        "at '/webhook/certificates': value must be one of 'self-managed', 'cert-manager'",
    ),
    (
        &["--set", "image.pullPolicy=Sometimes"],
        "at '/image/pullPolicy'",
    ),
    (
        &["--set", "logFormat=yaml"],
        "at '/logFormat': value must be one of 'json', 'text'",
    ),
    (
        &["--set", "monitoring.interval=soon"],
        "at '/monitoring/interval'",
    ),
    (
        &[
            "--set-json",
            r#"extraBundles=[{"name":"b","data":{"policy.yaml":"x"}}]"#,
        ],
        "at '/extraBundles/0/data': missing property 'bundle.yaml'",
    ),
    (
        &[
            "--set-json",
            r#"integrations=[{"name":"a","resource":"PipelineRuns","spec":{}}]"#,
        ],
        "at '/integrations/0/resource'",
    ),
];

/// Values that pass the schema but do not go together: the templates
/// refuse them (`fail`). `helm lint` only notes a template's `fail` (Helm's
/// lint mode); `helm template`, `install` and `upgrade` stop on it.
const NOT_TOGETHER: &[(&[&str], &str)] = &[
    (
        &["--set", "leaderElection.enabled=false"],
        "replicas: 2 needs leaderElection.enabled: true",
    ),
    (
        &["--set", "leaderElection.leaseDurationSeconds=10", "--set", "leaderElection.renewGraceSeconds=10"],
        "leaderElection.renewGraceSeconds (10) must be less than leaderElection.leaseDurationSeconds (10)",
    ),
    (
        &["--set-json", r#"extraBundles=[{"name":"arbiter-default-bundle","data":{"bundle.yaml":"x"}}]"#],
        "extraBundles[0]: the ConfigMap arbiter-system/arbiter-default-bundle is already made by defaultBundle",
    ),
    (
        &["--set-json", r#"integrations=[{"name":"a","resource":"as","spec":{"jobApiVersion":"x.io/v1","jobKind":"A","podSets":"[]","hold":{}}},{"name":"b","resource":"as","spec":{"jobApiVersion":"x.io/v1","jobKind":"A","podSets":"[]","hold":{}}}]"#],
        "integrations[1]: x.io/v1 A is already given by integrations[0]",
    ),
];

#[test]
fn bad_values_are_refused_naming_the_value() {
    let helm = Helm::new();
    let lint: &[&str] = &["lint", "--strict"];
    let template: &[&str] = &["template", RELEASE];
    let cases = AGAINST_THE_SCHEMA
        .iter()
        .flat_map(|case| [(lint, case), (template, case)])
        .chain(NOT_TOGETHER.iter().map(|case| (template, case)));
    for (command, (values, says)) in cases {
        let mut args = command.to_vec();
        args.extend_from_slice(&[CHART, "--namespace", NAMESPACE]);
        args.extend_from_slice(values);
        let told = helm.refused(&args);
        assert!(
            told.contains(says),
            "`helm {}` says:\n{told}\nnot: {says}",
            args.join(" ")
        );
    }
}

mod api_server {
    //! The chart against a real kube-apiserver (nothing runs pods there:
    //! the Deployment is an object; helm v4 waits for nothing by default).

    use super::*;
    use crate::support::{create_namespace, served, start_cluster};
    use arbiter_testcluster::crd_documents;
    use arbiter_testcluster::TestCluster;
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    use kube::discovery::Scope;
    use kube::Client;

    /// The object as the API server holds it now (`None`: not there).
    async fn live(client: &Client, object: &Value) -> Option<Value> {
        let key = Key::of(object);
        let (resource, caps) = served(client, object, &key).await;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(client.clone(), &key.namespace, &resource),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let found = api
            .get_opt(&key.name)
            .await
            .unwrap_or_else(|e| panic!("reading {key}: {e}"));
        found.map(|o| serde_json::to_value(o).unwrap_or_default())
    }

    /// Where `live` lacks what `rendered` says (the API server adds
    /// defaults, and Helm its labels: those are not differences).
    fn lacks(path: &str, rendered: &Value, live: &Value, out: &mut Vec<String>) {
        match (rendered, live) {
            (Value::Object(a), Value::Object(b)) => {
                for (key, value) in a {
                    let at = format!("{path}.{key}");
                    match b.get(key) {
                        Some(held) => lacks(&at, value, held, out),
                        None => out.push(format!("{at}: not there")),
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    lacks(&format!("{path}[{i}]"), x, y, out);
                }
            }
            _ if rendered != live => out.push(format!(
                "{path}: rendered {}, the API holds {}",
                shown(rendered),
                shown(live)
            )),
            _ => {}
        }
    }

    /// Every object of `rendered` is in the API as rendered, and marked as the release's.
    async fn assert_installed(client: &Client, rendered: &[Value]) {
        let mut problems = Vec::new();
        for object in rendered {
            let key = Key::of(object);
            match live(client, object).await {
                None => problems.push(format!("{key}: not in the API")),
                Some(held) => {
                    let mut found = Vec::new();
                    lacks("", object, &held, &mut found);
                    problems.extend(found.into_iter().map(|f| format!("{key}: {f}")));
                    let metadata = &held["metadata"];
                    if metadata["annotations"]["meta.helm.sh/release-name"] != RELEASE
                        || metadata["labels"]["app.kubernetes.io/managed-by"] != "Helm"
                    {
                        problems.push(format!("{key}: not marked as the release's: {metadata}"));
                    }
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// Helm on `cluster`, as its administrator (a kubeconfig of its own).
    fn helm_as_admin(cluster: &TestCluster) -> Helm {
        let token = cluster
            .token("admin")
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string();
        let kubeconfig = cluster
            .write_kubeconfig("helm", &token)
            .unwrap_or_else(|e| panic!("{e}"));
        Helm::with_kubeconfig(kubeconfig)
    }

    fn release_revision(helm: &Helm) -> Value {
        let status = helm.ok(&["status", RELEASE, "--namespace", NAMESPACE, "-o", "json"]);
        let status: Value =
            serde_json::from_str(&status).unwrap_or_else(|e| panic!("{e}: {status}"));
        status["version"].clone()
    }

    #[tokio::test]
    async fn helm_installs_upgrades_and_uninstalls_the_chart() {
        let (cluster, admin) = start_cluster().await;
        let helm = helm_as_admin(&cluster);
        create_namespace(&admin, "team-a").await;

        // Install: the namespace made, the CRDs and every object in place.
        let namespace = ["--namespace", NAMESPACE];
        let mut install = vec!["install", RELEASE, CHART, "--create-namespace"];
        install.extend_from_slice(&namespace);
        helm.ok(&install);
        let installed = helm.template(NAMESPACE, &[]);
        assert_installed(&admin, &installed).await;
        let crds = helm.template(NAMESPACE, &["--include-crds"]);
        for crd in of_kind(&crds, "CustomResourceDefinition") {
            assert!(live(&admin, crd).await.is_some(), "{}", Key::of(crd));
        }
        assert_eq!(release_revision(&helm), 1);
        // Helm keeps the release — the chart with its CRDs and default
        // bundle, and the rendered manifest — gzipped in one Secret, which
        // Kubernetes caps at 1 MiB; the 3/4 MiB here leaves room to grow.
        let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
        let release = secrets
            .get(&format!("sh.helm.release.v1.{RELEASE}.v1"))
            .await
            .unwrap_or_else(|e| panic!("the release's Secret: {e}"));
        let size: usize = release.data.iter().flatten().map(|(_, v)| v.0.len()).sum();
        assert!(
            size < 768 * 1024,
            "the release Secret holds {size} bytes, near the 1 MiB Kubernetes allows a Secret: \
             Helm stores the chart (crds/, files/) and the manifest in it; shrink them"
        );

        // A bad value: refused, nothing changed.
        let told = helm.refused(&[
            "upgrade",
            RELEASE,
            CHART,
            "--namespace",
            NAMESPACE,
            "--set",
            "replicas=0",
        ]);
        assert!(told.contains("at '/replicas'"), "{told}");
        let told = helm.refused(&[
            "upgrade",
            RELEASE,
            CHART,
            "--namespace",
            NAMESPACE,
            "--set",
            "leaderElection.enabled=false",
        ]);
        assert!(
            told.contains("needs leaderElection.enabled: true"),
            "{told}"
        );
        assert_eq!(release_revision(&helm), 1);

        // Upgrade: more replicas, another image and log format, the
        // default bundle off, a tenant bundle and an integration on.
        let upgrade_values = json!({
            "replicas": 3,
            "image": {"tag": "0.2.0"},
            "logFormat": "text",
            "defaultBundle": {"enabled": false},
            "extraBundles": [{"name": "team-a-bundle", "namespace": "team-a", "data": {"bundle.yaml": TENANT_BUNDLE}}],
            "integrations": [example_integration()],
        });
        let file = helm.file("upgrade.json", &upgrade_values.to_string());
        let file = file.to_string_lossy();
        helm.ok(&[
            "upgrade",
            RELEASE,
            CHART,
            "--namespace",
            NAMESPACE,
            "-f",
            &file,
        ]);
        assert_eq!(release_revision(&helm), 2);
        let upgraded = helm.template(NAMESPACE, &["-f", &file]);
        assert_installed(&admin, &upgraded).await;
        let deployment = live(&admin, one(&upgraded, "Deployment", "arbiter"))
            .await
            .unwrap_or_default();
        assert_eq!(deployment["spec"]["replicas"], 3);
        let main = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(main["image"], "ghcr.io/arbiter-dev/arbiter:0.2.0");
        assert_eq!(flag(&strings(&main["args"]), "--log-format"), Some("text"));
        let default_bundle = one(&installed, "ConfigMap", "arbiter-default-bundle");
        assert!(
            live(&admin, default_bundle).await.is_none(),
            "the default bundle is gone"
        );
        let extra = live(&admin, one(&upgraded, "ConfigMap", "team-a-bundle"))
            .await
            .unwrap_or_default();
        assert_eq!(extra["metadata"]["labels"][CONFIGMAP_LABEL], "true");

        // Uninstall: every object gone; the CRDs and the namespace stay.
        helm.ok(&["uninstall", RELEASE, "--namespace", NAMESPACE]);
        for object in &upgraded {
            assert!(
                live(&admin, object).await.is_none(),
                "{} is still there",
                Key::of(object)
            );
        }
        for crd in of_kind(&crds, "CustomResourceDefinition") {
            assert!(
                live(&admin, crd).await.is_some(),
                "{} kept, as Helm keeps CRDs",
                Key::of(crd)
            );
        }
        let namespaces: Api<Namespace> = Api::all(admin.clone());
        assert!(namespaces
            .get_opt(NAMESPACE)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_some());
        let releases = helm.ok(&["list", "--namespace", NAMESPACE, "-o", "json"]);
        assert_eq!(releases.trim(), "[]");
    }

    /// cert-manager's Certificate and Issuer CRDs as its chart installs
    /// them, by file name in the test cluster's bin directory, with the CRD
    /// each holds. `scripts/test-cluster.sh` renders them from the chart in
    /// cert-manager's Go module. cert-manager's controllers do not run:
    /// nothing issues or injects, and the test gives the operator what the
    /// kubelet would mount from the issued Secret.
    const CERT_MANAGER_CRDS: [(&str, &str); 2] = [
        (
            "cert-manager.io_certificates.yaml",
            "certificates.cert-manager.io",
        ),
        ("cert-manager.io_issuers.yaml", "issuers.cert-manager.io"),
    ];

    fn cert_manager_crds() -> Vec<CustomResourceDefinition> {
        let dir = arbiter_testcluster::binaries().unwrap_or_else(|e| panic!("{e}"));
        let mut crds = Vec::new();
        for (file, name) in CERT_MANAGER_CRDS {
            let path = dir.join(file);
            assert!(
                path.is_file(),
                "{} is missing; run scripts/test-cluster.sh (it renders cert-manager's CRDs \
                 from the chart in its Go module into that directory)",
                path.display()
            );
            let found = crd_documents(&path).unwrap_or_else(|e| panic!("{e}"));
            let names: Vec<&str> = found
                .iter()
                .map(|c| c.metadata.name.as_deref().unwrap_or_default())
                .collect();
            assert_eq!(names, [name], "{}", path.display());
            crds.extend(found);
        }
        crds
    }

    /// Server-side apply of `object` as a dry run, refusing any field its
    /// kind's schema does not declare (what Helm v4's server-side apply
    /// asks for too).
    async fn dry_run_strict(client: &Client, object: &Value) -> Result<(), kube::Error> {
        let key = Key::of(object);
        let (resource, _) = served(client, object, &key).await;
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &key.namespace, &resource);
        // Forced: the dry run may take fields Helm holds.
        let params = PatchParams::apply("helm-test")
            .force()
            .dry_run()
            .validation_strict();
        api.patch(&key.name, &params, &Patch::Apply(object))
            .await
            .map(drop)
    }

    /// A plain HTTP GET on loopback: the status code (0: nothing answers).
    fn http_status(port: u16, path: &str) -> u16 {
        http_get(port, path).0
    }

    /// GET `path` from the loopback `port`: the status (0 when nothing
    /// answers) and the body.
    fn http_get(port: u16, path: &str) -> (u16, String) {
        use std::io::{Read, Write};
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
            return (0, String::new());
        };
        let _ = write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        let code = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or_default();
        (code, body.to_string())
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("a free port: {e}"))
    }

    /// The operator process, killed when dropped.
    struct Operator(std::process::Child);

    impl Drop for Operator {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[tokio::test]
    async fn under_cert_manager_the_operator_runs_on_the_mounted_certificate_and_the_charts_roles()
    {
        let (cluster, admin) = start_cluster().await;
        let helm = helm_as_admin(&cluster);
        cluster
            .install_crds(&cert_manager_crds())
            .await
            .unwrap_or_else(|e| panic!("installing cert-manager's CRDs: {e}"));

        // Self-managed first, then switched to cert-manager by an upgrade:
        // the Certificate and Issuers made, the webhooks annotated, the
        // operator's roles without what it no longer needs.
        helm.ok(&[
            "install",
            RELEASE,
            CHART,
            "--namespace",
            NAMESPACE,
            "--create-namespace",
        ]);
        let cert_manager = ["--set", "webhook.certificates=cert-manager"];
        let mut upgrade = vec!["upgrade", RELEASE, CHART, "--namespace", NAMESPACE];
        upgrade.extend_from_slice(&cert_manager);
        helm.ok(&upgrade);
        let rendered = helm.template(NAMESPACE, &cert_manager);
        assert_installed(&admin, &rendered).await;
        // Helm applied them with strict field validation, and nothing was
        // pruned (assert_installed); the Certificate made for an issuer of
        // one's own is taken too, and a misspelled field is refused.
        let own_issuer = helm.template(
            NAMESPACE,
            &[
                "--set",
                "webhook.certificates=cert-manager",
                "--set",
                "webhook.certManager.issuerRef.kind=ClusterIssuer",
                "--set",
                "webhook.certManager.issuerRef.name=corp-ca",
                "--set",
                "webhook.certManager.issuerRef.group=cert-manager.io",
            ],
        );
        for object in of_kind(&own_issuer, "Certificate") {
            dry_run_strict(&admin, object)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", Key::of(object)));
        }
        let mut misspelled = one(&rendered, "Certificate", "arbiter-webhook").clone();
        misspelled["spec"]["dnsName"] = misspelled["spec"]["dnsNames"].take();
        if let Some(spec) = misspelled["spec"].as_object_mut() {
            spec.remove("dnsNames");
        }
        let refused = dry_run_strict(&admin, &misspelled).await;
        assert!(
            matches!(&refused, Err(e) if e.to_string().contains(".spec.dnsName")),
            "cert-manager's Certificate CRD refuses spec.dnsName (it has dnsNames): {refused:?}"
        );

        // The operator as the Deployment runs it: its arguments, its
        // ServiceAccount's token, the Certificate's Secret as the kubelet
        // mounts it (tls.crt, tls.key, ca.crt) in a directory of ours.
        let certificate = one(&rendered, "Certificate", "arbiter-webhook");
        let names = strings(&certificate["spec"]["dnsNames"]);
        let serving = arbiter_operator::webhook::certs::generate(&names)
            .unwrap_or_else(|e| panic!("a certificate for {names:?}: {e}"));
        let mounted = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for (file, pem) in [
            ("tls.crt", &serving.cert_pem),
            ("tls.key", &serving.key_pem),
            ("ca.crt", &serving.ca_pem),
        ] {
            std::fs::write(mounted.path().join(file), pem).unwrap_or_else(|e| panic!("{e}"));
        }
        let account = cluster
            .service_account_token(NAMESPACE, "arbiter")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let operator_kubeconfig = cluster
            .write_kubeconfig("operator", &account)
            .unwrap_or_else(|e| panic!("{e}"));
        let (admin_port, webhook_port, dashboard_port) = (free_port(), free_port(), free_port());
        let cert_dir = flag(
            &strings(&container(&rendered)["args"]),
            "--webhook-cert-dir",
        )
        .unwrap_or_default()
        .to_string();
        let mut args: Vec<String> = strings(&container(&rendered)["args"])
            .into_iter()
            .map(|a| match a.as_str() {
                "0.0.0.0:8080" => format!("127.0.0.1:{admin_port}"),
                "0.0.0.0:9443" => format!("127.0.0.1:{webhook_port}"),
                _ if a == cert_dir => mounted.path().display().to_string(),
                _ => a,
            })
            .collect();
        // In the pod the dashboard is on 127.0.0.1:8081 (the default, no
        // flag rendered); here, a free port beside other tests.
        assert!(
            !args.iter().any(|a| a.starts_with("--dashboard")),
            "{args:?}"
        );
        args.extend([
            "--dashboard-address".into(),
            format!("127.0.0.1:{dashboard_port}"),
        ]);
        let log_path = cluster.dir().join("operator.log");
        let log_file = std::fs::File::create(&log_path).unwrap_or_else(|e| panic!("{e}"));
        let mut operator = Operator(
            Command::new(env!("CARGO_BIN_EXE_arbiter"))
                .args(&args)
                .arg("--kubeconfig")
                .arg(&operator_kubeconfig)
                .env("POD_NAMESPACE", NAMESPACE)
                .env("POD_NAME", "arbiter-0")
                .stdout(std::process::Stdio::null())
                .stderr(log_file)
                .spawn()
                .unwrap_or_else(|e| panic!("starting arbiter run: {e}")),
        );
        let log = || std::fs::read_to_string(&log_path).unwrap_or_default();

        // It leads (the Role's Lease), is ready, and serves the webhooks
        // with the mounted certificate. Bounds a hang; measures nothing.
        let leases: Api<Lease> = Api::namespaced(admin.clone(), NAMESPACE);
        let started = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = operator.0.try_wait() {
                panic!("arbiter run exited ({status}):\n{}", log());
            }
            let holder = leases
                .get_opt("arbiter-leader")
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity);
            if holder.as_deref() == Some("arbiter-0") && http_status(admin_port, "/readyz") == 200 {
                break;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(120),
                "the operator did not lead and become ready; its log:\n{}",
                log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        // Its dashboard reads all it shows under the chart's roles.
        let (code, body) =
            tokio::task::spawn_blocking(move || http_get(dashboard_port, "/dashboard/api/state"))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code, 200, "{body}");
        let state: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(state["errors"], serde_json::json!([]), "{state:#}");
        assert!(
            items(&state["bundles"])
                .iter()
                .any(|b| b["name"] == "arbiter-default-bundle"),
            "{state:#}"
        );
        let log_text = log();
        assert!(
            log_text.contains("webhooks serving")
                && log_text.contains(&mounted.path().display().to_string()),
            "the webhooks serve the mounted certificate:\n{log_text}"
        );
        assert!(
            !log_text.to_lowercase().contains("forbidden"),
            "the chart's roles are enough under cert-manager:\n{log_text}"
        );
        // caBundle is cert-manager's CA injector's: the operator left it alone,
        // and made no certificate Secret of its own.
        for kind in [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ] {
            let held = live(&admin, one(&rendered, kind, "arbiter"))
                .await
                .unwrap_or_default();
            for webhook in items(&held["webhooks"]) {
                assert!(
                    webhook["clientConfig"]["caBundle"].is_null(),
                    "{kind}: the operator wrote caBundle: {webhook}"
                );
            }
        }
        let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
        assert!(secrets
            .get_opt("arbiter-webhook-tls")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none());
    }
}
