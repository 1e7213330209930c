//! `deploy/monitoring/`: the alerts (a PrometheusRule), the Grafana
//! dashboard and their kustomization. promtool (built by
//! `scripts/test-cluster.sh`) checks the PrometheusRule's `spec` as the rule
//! file it is and runs `alerts-test.yaml`, which fires and clears every
//! alert from written series; every alert is tested both ways and says
//! what to do. Every panel has the data source variable and a target, and
//! every dashboard query parses in promtool too. On a real API server
//! serving the Prometheus Operator's own ServiceMonitor and PrometheusRule
//! CRDs (as its Go module publishes them), `kubectl apply --server-side
//! --validate=strict -k deploy/monitoring/` stores every field the
//! kustomization sets, and a misspelled field or a bad duration is refused
//! naming it. And every metric the rules
//! and the dashboard read is one `arbiter run` really serves on its admin
//! port, scraped after a scenario against the full test cluster that makes
//! every family report (an admission, a preemption, a finished job, a
//! failing policy, a rejected bundle), with the labels the queries name;
//! `rate` is never taken of a gauge; and every `arbiter_*` family is on the
//! dashboard. Prometheus can parse the page `/metrics` serves as what its
//! Content-Type says it is.

#[path = "../crates/operator/tests/support/mod.rs"]
mod support;

#[path = "process/mod.rs"]
mod process;

#[path = "monitoring/promql.rs"]
mod promql;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use process::{free_port, http_get, start};
use promql::{reads, Exposition, Reads};
use serde_json::{json, Value};
use support::*;

/// What the rules file extracted from the PrometheusRule is called;
/// `alerts-test.yaml` names it in `rule_files`.
const RULES_FILE: &str = "arbiter-rules.yaml";

/// Labels Prometheus gives every series it scrapes.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

/// Functions that take a counter (or a histogram's series), never a gauge.
const COUNTER_FUNCTIONS: [&str; 4] = ["rate", "irate", "increase", "resets"];

fn monitoring(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/monitoring")
        .join(file)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn yaml(file: &str) -> Value {
    serde_yaml_ng::from_str(&read(&monitoring(file)))
        .unwrap_or_else(|e| panic!("deploy/monitoring/{file} is not YAML: {e}"))
}

fn items(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// A client built, or a CRD file fetched, by `scripts/test-cluster.sh` into
/// the test cluster's bin directory.
fn tool(name: &str) -> PathBuf {
    let dir = arbiter_testcluster::binaries().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing; run scripts/test-cluster.sh (it puts {name} into that directory)",
        path.display()
    );
    path
}

/// Runs `command`, failing with its output unless it succeeds; returns its stdout.
fn succeed(command: &mut Command, what: &str) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: starting {command:?}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The PrometheusRule's `spec`: a Prometheus rule file.
fn rule_file() -> Value {
    let rule = yaml("prometheusrule.yaml");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["kind"], "PrometheusRule");
    assert_eq!(rule["metadata"]["namespace"], "arbiter-system");
    rule["spec"].clone()
}

fn alerts() -> Vec<Value> {
    let spec = rule_file();
    let alerts: Vec<Value> = items(&spec["groups"])
        .iter()
        .flat_map(|g| items(&g["rules"]).iter().cloned())
        .collect();
    assert!(!alerts.is_empty(), "no rules in {spec}");
    alerts
}

fn dashboard() -> Value {
    serde_json::from_str(&read(&monitoring("grafana-dashboard.json")))
        .unwrap_or_else(|e| panic!("deploy/monitoring/grafana-dashboard.json is not JSON: {e}"))
}

/// Every panel, those inside (collapsed) rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in items(&dashboard["panels"]) {
        out.push(panel);
        out.extend(items(&panel["panels"]));
    }
    out
}

/// What every panel and every target names as its data source.
fn datasource() -> Value {
    json!({"type": "prometheus", "uid": "${datasource}"})
}

/// A Grafana expression as Prometheus gets it: the dashboard's variables
/// replaced by what Grafana puts there.
fn as_promql(expr: &str, place: &str) -> String {
    let promql = expr
        .replace("$__rate_interval", "2m")
        .replace("${cluster_queue}", ".*")
        .replace("$cluster_queue", ".*");
    assert!(
        !promql.contains('$'),
        "{place}: a variable this test does not know (add it to as_promql): {expr}"
    );
    promql
}

/// One PromQL query of the rules or the dashboard, where it is, and the
/// labels its text shows (an alert's `$labels.x`, a legend's `{{x}}`).
struct Query {
    place: String,
    expr: String,
    shows: BTreeSet<String>,
}

/// The `NAME` of every `{{ … $labels.NAME … }}` or `{{NAME}}` in `text`.
fn shown_labels(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for part in text.split("{{").skip(1) {
        let inside = part.split("}}").next().unwrap_or_default().trim();
        let name = inside
            .split_whitespace()
            .find_map(|w| w.strip_prefix("$labels."))
            .unwrap_or(inside);
        if !name.starts_with('$') && !name.contains(' ') {
            out.insert(name.to_string());
        }
    }
    out
}

fn queries() -> Vec<Query> {
    let mut out = Vec::new();
    for alert in alerts() {
        let name = text(&alert["alert"]);
        let annotations = alert["annotations"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        out.push(Query {
            place: format!("prometheusrule.yaml: alert {name}"),
            expr: text(&alert["expr"]).to_string(),
            shows: annotations
                .values()
                .flat_map(|a| shown_labels(text(a)))
                .collect(),
        });
    }
    let dashboard = dashboard();
    for panel in panels(&dashboard) {
        for target in items(&panel["targets"]) {
            let place = format!(
                "grafana-dashboard.json: panel {} {:?}, target {}",
                panel["id"],
                text(&panel["title"]),
                text(&target["refId"])
            );
            out.push(Query {
                expr: as_promql(text(&target["expr"]), &place),
                shows: shown_labels(text(&target["legendFormat"])),
                place,
            });
        }
    }
    for variable in items(&dashboard["templating"]["list"]) {
        if variable["type"] != "query" {
            continue;
        }
        let place = format!(
            "grafana-dashboard.json: variable {}",
            text(&variable["name"])
        );
        let query = text(&variable["query"]["query"]);
        let (metric, label) = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .and_then(|q| q.rsplit_once(','))
            .unwrap_or_else(|| panic!("{place}: not label_values(METRIC, LABEL): {query}"));
        out.push(Query {
            expr: metric.trim().to_string(),
            shows: BTreeSet::from([label.trim().to_string()]),
            place,
        });
    }
    out
}

#[test]
fn the_alerts_pass_promtool_and_fire_and_clear_in_its_unit_tests() {
    let dir = tempfile::tempdir().unwrap();
    let rules = serde_yaml_ng::to_string(&rule_file()).unwrap();
    std::fs::write(dir.path().join(RULES_FILE), rules).unwrap();
    std::fs::copy(
        monitoring("alerts-test.yaml"),
        dir.path().join("alerts-test.yaml"),
    )
    .unwrap();
    let promtool = tool("promtool");
    succeed(
        Command::new(&promtool).current_dir(dir.path()).args([
            "check",
            "rules",
            "--lint=all",
            "--lint-fatal",
            RULES_FILE,
        ]),
        "promtool check rules on prometheusrule.yaml's spec",
    );
    let out = succeed(
        Command::new(&promtool)
            .current_dir(dir.path())
            .args(["test", "rules", "alerts-test.yaml"]),
        "promtool test rules deploy/monitoring/alerts-test.yaml",
    );
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn every_alert_is_tested_firing_and_quiet_and_says_what_to_do() {
    let tests = yaml("alerts-test.yaml");
    assert_eq!(tests["rule_files"], json!([RULES_FILE]));
    // (fires somewhere, stays quiet somewhere) per alert name the tests use.
    let mut tested: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for case in items(&tests["tests"]) {
        for check in items(&case["alert_rule_test"]) {
            let entry = tested
                .entry(text(&check["alertname"]).to_string())
                .or_default();
            if items(&check["exp_alerts"]).is_empty() {
                entry.1 = true;
            } else {
                entry.0 = true;
            }
        }
    }
    let mut names = BTreeSet::new();
    for alert in alerts() {
        let name = text(&alert["alert"]).to_string();
        assert!(!name.is_empty(), "a rule that is not an alert: {alert}");
        assert!(
            matches!(text(&alert["labels"]["severity"]), "critical" | "warning"),
            "{name}: severity critical or warning"
        );
        for annotation in ["summary", "description"] {
            assert!(
                text(&alert["annotations"][annotation]).len() > 20,
                "{name}: no {annotation} an on-call person can act on"
            );
        }
        assert!(alert["for"].is_string(), "{name}: no `for`");
        assert_eq!(
            tested.get(&name),
            Some(&(true, true)),
            "{name}: alerts-test.yaml must fire it in one check and expect it quiet in another"
        );
        names.insert(name);
    }
    // promtool passes a check of an alert no rule has (nothing fires).
    let unknown: Vec<&String> = tested.keys().filter(|n| !names.contains(*n)).collect();
    assert!(
        unknown.is_empty(),
        "alerts-test.yaml checks alerts no rule defines: {unknown:?}"
    );
}

#[test]
fn every_panel_has_the_data_source_and_a_target_and_every_query_parses() {
    let dashboard = dashboard();
    assert!(!text(&dashboard["uid"]).is_empty() && !text(&dashboard["title"]).is_empty());
    assert!(
        dashboard["schemaVersion"].as_u64().unwrap_or_default() >= 39,
        "schemaVersion {}",
        dashboard["schemaVersion"]
    );
    let variables: BTreeMap<&str, &Value> = items(&dashboard["templating"]["list"])
        .iter()
        .map(|v| (text(&v["name"]), v))
        .collect();
    let source = variables.get("datasource").expect("a datasource variable");
    assert_eq!(source["type"], "datasource");
    assert_eq!(source["query"], "prometheus");
    let queue = variables
        .get("cluster_queue")
        .expect("a cluster_queue variable");
    assert_eq!(queue["type"], "query");
    assert_eq!(queue["datasource"], datasource());

    let mut ids = BTreeSet::new();
    let mut recording = Vec::new();
    for panel in panels(&dashboard) {
        let title = text(&panel["title"]);
        assert!(
            ids.insert(panel["id"].to_string()),
            "panel id {}",
            panel["id"]
        );
        let grid = &panel["gridPos"];
        assert!(
            grid["w"].as_u64().is_some_and(|w| (1..=24).contains(&w))
                && grid["h"].as_u64().is_some(),
            "panel {title:?}: gridPos {grid}"
        );
        if panel["type"] == "row" {
            assert!(items(&panel["targets"]).is_empty(), "row {title:?}");
            continue;
        }
        assert!(!title.is_empty(), "panel {} has no title", panel["id"]);
        assert_eq!(panel["datasource"], datasource(), "panel {title:?}");
        let targets = items(&panel["targets"]);
        assert!(!targets.is_empty(), "panel {title:?} has no target");
        let mut refs = BTreeSet::new();
        for target in targets {
            let reference = text(&target["refId"]);
            assert!(refs.insert(reference), "panel {title:?}: refId {reference}");
            assert_eq!(target["datasource"], datasource(), "panel {title:?}");
            let place = format!("panel {title:?}, target {reference}");
            let expr = as_promql(text(&target["expr"]), &place);
            assert!(!expr.trim().is_empty(), "{place}: no expr");
            recording.push(json!({
                "record": format!("arbiter_dashboard:panel_{}_{reference}", panel["id"]),
                "expr": expr,
            }));
        }
    }
    // promtool parses every query (as a recording rule named after its panel).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dashboard-queries.yaml");
    let rules = json!({"groups": [{"name": "grafana-dashboard.json", "rules": recording}]});
    let rules = serde_yaml_ng::to_string(&rules).unwrap();
    std::fs::write(&file, &rules).unwrap();
    succeed(
        Command::new(tool("promtool"))
            .args(["check", "rules"])
            .arg(&file),
        &format!("promtool check rules on the dashboard's queries:\n{rules}"),
    );
}

/// The objects `kubectl kustomize deploy/monitoring` makes.
fn kustomized() -> Vec<Value> {
    let out = succeed(
        Command::new(tool("kubectl"))
            .arg("kustomize")
            .arg(monitoring("")),
        "kubectl kustomize deploy/monitoring",
    );
    serde_yaml_ng::Deserializer::from_str(&out)
        .map(|doc| {
            serde::Deserialize::deserialize(doc)
                .unwrap_or_else(|e| panic!("`kubectl kustomize deploy/monitoring`: not YAML: {e}"))
        })
        .collect()
}

#[test]
fn the_kustomization_installs_the_monitor_the_rules_and_the_dashboard() {
    let objects = kustomized();
    let kinds: BTreeSet<String> = objects
        .iter()
        .map(|o| format!("{} {}", text(&o["kind"]), text(&o["metadata"]["name"])))
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "ConfigMap arbiter-grafana-dashboard".to_string(),
            "PrometheusRule arbiter".to_string(),
            "ServiceMonitor arbiter".to_string(),
        ])
    );
    for object in &objects {
        assert_eq!(
            object["metadata"]["namespace"], "arbiter-system",
            "{object}"
        );
        match text(&object["kind"]) {
            "ConfigMap" => {
                assert_eq!(object["metadata"]["labels"]["grafana_dashboard"], "1");
                assert_eq!(
                    text(&object["data"]["arbiter.json"]),
                    read(&monitoring("grafana-dashboard.json")),
                    "the ConfigMap holds the dashboard as it is"
                );
            }
            "PrometheusRule" => assert_eq!(object["spec"], rule_file()),
            _ => {}
        }
    }
}

/// A platform bundle whose one admission policy fails on every workload;
/// `Ignore` lets the workloads through.
const FAILING_BUNDLE: &str = r#"apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {name: monitoring-e2e, version: "1"}
spec:
  policies:
  - name: divides-by-zero
    hook: admission
    failurePolicy: Ignore
    cel:
      expression: "workload.gpus / (workload.gpus - workload.gpus) >= 0"
"#;

/// `arbiter run` on the full test cluster, after a scenario that makes
/// every family report: a `--policies` bundle whose policy fails and a
/// platform bundle ConfigMap that does not load; a job admitted, preempted
/// by a more urgent one, which then finishes. Returns its `/metrics` once
/// `done` holds, or as it is when the patience runs out (the caller's
/// checks then say what is missing).
async fn scrape_after_the_scenario(done: impl Fn(&Exposition) -> bool) -> Exposition {
    let (cluster, admin) = full_cluster_with_setup().await;
    let token = cluster.token("admin").unwrap().to_string();
    let kubeconfig = cluster.write_kubeconfig("operator", &token).unwrap();
    let policies = cluster.dir().join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(policies.join("bundle.yaml"), FAILING_BUNDLE).unwrap();
    put_bundle(
        &admin,
        PLATFORM_NAMESPACE,
        "broken",
        &[("bundle.yaml", "kind: NotABundle\n")],
        &[],
    )
    .await;
    let port = free_port();
    let log = cluster.dir().join("operator.log");
    let policies_arg = format!("--policies={}", policies.display());
    let _operator = start(
        &kubeconfig,
        &log,
        port,
        &["--webhook-address=127.0.0.1:0", &policies_arg],
        &[],
    );

    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("low", 8))
        .await
        .unwrap();
    wait_for(&jobs, "low", "admission", released).await;
    let mut urgent = job("urgent", 8);
    if let Some(labels) = urgent.metadata.labels.as_mut() {
        labels.insert("arbiter.dev/priority-class".into(), "high".into());
    }
    jobs.create(&PostParams::default(), &urgent).await.unwrap();
    wait_for(&jobs, "urgent", "admission after preempting low", released).await;
    finish(&jobs, "urgent").await;

    let started = Instant::now();
    loop {
        let (code, page) = http_get(port, "/metrics");
        let exposition = Exposition::parse(&page);
        if (code == 200 && done(&exposition)) || started.elapsed() > PATIENCE {
            assert_eq!(code, 200, "/metrics (operator log: {})", log.display());
            return exposition;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn the_rules_and_the_dashboard_read_only_what_the_operator_serves() {
    let queries = queries();
    let read: Vec<(&Query, Reads)> = queries.iter().map(|q| (q, reads(&q.expr))).collect();
    let wanted: BTreeSet<String> = read
        .iter()
        .flat_map(|(_, r)| r.metrics.iter().map(|(m, _)| m.clone()))
        .collect();
    let exposition =
        scrape_after_the_scenario(|e| wanted.iter().all(|m| e.series.contains_key(m))).await;

    let mut problems = Vec::new();
    for (query, reads) in &read {
        let place = &query.place;
        if reads.metrics.is_empty() {
            problems.push(format!("{place}: reads no metric: {}", query.expr));
        }
        let mut labels: BTreeSet<&str> = TARGET_LABELS.into_iter().collect();
        for (metric, call) in &reads.metrics {
            match exposition.series.get(metric) {
                Some(carried) => labels.extend(carried.iter().map(String::as_str)),
                None => problems.push(format!(
                    "{place}: {metric} is not in what the operator serves: {}",
                    query.expr
                )),
            }
            if COUNTER_FUNCTIONS.contains(&call.as_str())
                && exposition.type_of(metric) == Some("gauge")
            {
                problems.push(format!("{place}: {call}() of the gauge {metric}"));
            }
        }
        let known = reads
            .metrics
            .iter()
            .all(|(m, _)| exposition.series.contains_key(m));
        let named: BTreeSet<&String> = reads.labels.iter().chain(&query.shows).collect();
        for label in named.into_iter().filter(|_| known) {
            if !labels.contains(label.as_str()) {
                problems.push(format!(
                    "{place}: label {label} is on none of the series it reads ({:?})",
                    reads.metrics
                ));
            }
        }
    }
    // Every arbiter_* family is on the dashboard.
    let dashboard: BTreeSet<&str> = read
        .iter()
        .filter(|(q, _)| q.place.starts_with("grafana-dashboard.json"))
        .flat_map(|(_, r)| r.metrics.iter().map(|(m, _)| m.as_str()))
        .collect();
    for family in exposition.types.keys() {
        let shown = [
            family.clone(),
            format!("{family}_bucket"),
            format!("{family}_sum"),
            format!("{family}_count"),
        ]
        .iter()
        .any(|name| dashboard.contains(name.as_str()));
        if family.starts_with("arbiter_") && !shown {
            problems.push(format!(
                "the operator serves {family}, which no dashboard panel shows"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n\nthe operator's families: {:?}",
        problems.join("\n"),
        exposition.types
    );
}

/// A plain HTTP/1.0 GET on loopback: (the response's head, its body).
fn get(port: u16, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("connecting to the admin port {port}: {e}"));
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.to_string(), body.to_string())
}

/// The value of the header `name` in an HTTP response head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// Prometheus picks its parser by the Content-Type a target answers with:
/// OpenMetrics for `application/openmetrics-text` (which refuses a page
/// that does not end with `# EOF`), the classic text format for
/// `text/plain`. What `arbiter run` serves must parse as what it says it is,
/// or every scrape fails and no alert or panel here sees anything.
#[tokio::test]
async fn prometheus_can_parse_what_the_operator_serves() {
    let (cluster, admin) = cluster_with_setup().await;
    let token = cluster.token("admin").unwrap().to_string();
    let kubeconfig = cluster.write_kubeconfig("operator", &token).unwrap();
    let port = free_port();
    let log = cluster.dir().join("operator.log");
    let _operator = start(
        &kubeconfig,
        &log,
        port,
        &["--webhook-address=127.0.0.1:0"],
        &[],
    );
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("admitted", 2))
        .await
        .unwrap();
    wait_for(&jobs, "admitted", "admission", released).await;
    let (head, body) = get(port, "/metrics");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    let content_type = header(&head, "content-type").unwrap_or_default();
    assert!(body.contains("arbiter_admitted_workloads_total{"), "{body}");
    if content_type.starts_with("application/openmetrics-text") {
        assert!(
            body.ends_with("# EOF\n"),
            "/metrics says it is OpenMetrics ({content_type}), but its page does not end with \
             `# EOF`: Prometheus refuses every scrape of it (\"data does not end with # EOF\"). \
             Serve the text it encodes (prometheus_client's prometheus_text) as \
             {:?}, or encode OpenMetrics (prometheus_client::encoding::text).\n{body}",
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE
        );
    } else {
        assert!(
            content_type.starts_with("text/plain"),
            "/metrics answers with Content-Type {content_type:?}"
        );
        let page = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(page.path(), &body).unwrap();
        succeed(
            Command::new(tool("promtool"))
                .args(["check", "metrics"])
                .stdin(std::fs::File::open(page.path()).unwrap()),
            &format!("promtool check metrics on /metrics:\n{body}"),
        );
    }
}

mod api_server {
    //! deploy/monitoring/ against a real kube-apiserver serving the
    //! Prometheus Operator's own CRDs, as its Go module publishes them
    //! (`scripts/test-cluster.sh` caches them beside the binaries). No
    //! Prometheus Operator runs: the API server's schema checks are the
    //! point.

    use super::*;
    use arbiter_testcluster::{crd_documents, TestCluster};
    use kube::api::{DynamicObject, GroupVersionKind};
    use kube::discovery::{pinned_kind, Scope};
    use kube::Client;

    /// The CRDs of the kinds deploy/monitoring/ makes, by file name in the
    /// test cluster's bin directory, with the CRD each holds.
    const OPERATOR_CRDS: [(&str, &str); 2] = [
        (
            "monitoring.coreos.com_servicemonitors.yaml",
            "servicemonitors.monitoring.coreos.com",
        ),
        (
            "monitoring.coreos.com_prometheusrules.yaml",
            "prometheusrules.monitoring.coreos.com",
        ),
    ];

    /// `kubectl --kubeconfig KUBECONFIG ARGS` with its home (discovery
    /// cache) in `home`: (succeeded, stdout and stderr).
    fn kubectl(kubeconfig: &Path, home: &Path, args: &[&str]) -> (bool, String) {
        let output = Command::new(tool("kubectl"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .env("HOME", home)
            .output()
            .unwrap_or_else(|e| panic!("running kubectl {args:?}: {e}"));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    /// The object as the API server holds it now (`None`: not there).
    async fn live(client: &Client, object: &Value) -> Option<Value> {
        let api_version = text(&object["apiVersion"]);
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = text(&object["kind"]);
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, caps) = pinned_kind(client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("{kind}: {gvk:?} is not served: {e}"));
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                text(&object["metadata"]["namespace"]),
                &resource,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let name = text(&object["metadata"]["name"]);
        api.get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading {kind} {name}: {e}"))
            .map(|o| serde_json::to_value(o).unwrap_or_default())
    }

    /// Where `held` lacks or changed what `set` says (what the API server
    /// adds — defaults, metadata — is not a difference).
    fn lacks(path: &str, set: &Value, held: &Value, out: &mut Vec<String>) {
        match (set, held) {
            (Value::Object(a), Value::Object(b)) => {
                for (key, value) in a {
                    let at = format!("{path}.{key}");
                    match b.get(key) {
                        Some(there) => lacks(&at, value, there, out),
                        None => out.push(format!(
                            "{at}: not there (pruned: not in the CRD's schema?)"
                        )),
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    lacks(&format!("{path}[{i}]"), x, y, out);
                }
            }
            _ if set != held => out.push(format!("{path}: set {set}, the API holds {held}")),
            _ => {}
        }
    }

    /// `object` (a copy of one in deploy/monitoring/, changed) as a file to apply.
    fn write(dir: &Path, object: &Value) -> PathBuf {
        let path = dir.join(format!("{}.yaml", text(&object["metadata"]["name"])));
        let yaml = serde_yaml_ng::to_string(object).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }

    #[tokio::test]
    async fn the_prometheus_operators_crds_take_the_monitor_and_the_rules_under_strict_validation()
    {
        let cluster = TestCluster::start()
            .await
            .unwrap_or_else(|e| panic!("the test cluster did not start: {e}"));
        let mut crds = Vec::new();
        for (file, name) in OPERATOR_CRDS {
            let found = crd_documents(&tool(file)).unwrap_or_else(|e| panic!("{e}"));
            let names: Vec<&str> = found
                .iter()
                .map(|c| c.metadata.name.as_deref().unwrap_or_default())
                .collect();
            assert_eq!(names, [name], "{file}");
            crds.extend(found);
        }
        cluster
            .install_crds(&crds)
            .await
            .unwrap_or_else(|e| panic!("installing the Prometheus Operator's CRDs: {e}"));
        let admin = cluster
            .admin_client()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        create_namespace(&admin, "arbiter-system").await;
        let token = cluster
            .token("admin")
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string();
        let kubeconfig = cluster
            .write_kubeconfig("kubectl", &token)
            .unwrap_or_else(|e| panic!("{e}"));
        let home = cluster.dir().join("kubectl-home");
        let strict = ["apply", "--server-side", "--validate=strict"];

        // What deploy/monitoring/README.md says to run, refusing any field
        // the CRDs do not declare.
        let directory = monitoring("");
        let directory = directory.to_string_lossy();
        let mut args = strict.to_vec();
        args.extend(["-k", &directory]);
        let (applied, out) = kubectl(&kubeconfig, &home, &args);
        assert!(applied, "`kubectl {}` failed:\n{out}", args.join(" "));
        let mut problems = Vec::new();
        for object in kustomized() {
            let key = format!(
                "{} {}",
                text(&object["kind"]),
                text(&object["metadata"]["name"])
            );
            match live(&admin, &object).await {
                None => problems.push(format!("{key}: not in the API after the apply")),
                Some(held) => {
                    let mut found = Vec::new();
                    lacks("", &object, &held, &mut found);
                    problems.extend(found.into_iter().map(|f| format!("{key}: {f}")));
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));

        // The validation bites: a misspelled field is refused, naming it…
        let dir = cluster.dir().join("changed");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let mut monitor = yaml("servicemonitor.yaml");
        monitor["metadata"]["name"] = json!("arbiter-misspelled");
        let endpoint = &mut monitor["spec"]["endpoints"][0];
        let interval = endpoint["interval"].take();
        endpoint["scrapeInterval"] = interval;
        if let Some(fields) = endpoint.as_object_mut() {
            fields.remove("interval");
        }
        let file = write(&dir, &monitor);
        let file = file.to_string_lossy();
        let mut args = strict.to_vec();
        args.extend(["-f", &file]);
        let (applied, out) = kubectl(&kubeconfig, &home, &args);
        assert!(
            !applied && out.contains(".spec.endpoints[0].scrapeInterval"),
            "a ServiceMonitor with spec.endpoints[0].scrapeInterval (the CRD says interval) \
             must be refused naming the field; `kubectl {}` said:\n{out}",
            args.join(" ")
        );
        assert!(live(&admin, &monitor).await.is_none(), "nothing stored");
        // …and by a client-side `kubectl apply -f` (README.md's one at a
        // time; kubectl validates strictly unless told not to).
        let (applied, out) = kubectl(&kubeconfig, &home, &["apply", "-f", &file]);
        assert!(
            !applied && out.contains("spec.endpoints[0].scrapeInterval"),
            "`kubectl apply -f` of the ServiceMonitor with scrapeInterval must be refused \
             naming the field; it said:\n{out}"
        );
        assert!(live(&admin, &monitor).await.is_none(), "nothing stored");

        // A `for` that is no Prometheus duration: the CRD's pattern refuses it.
        let mut rule = yaml("prometheusrule.yaml");
        rule["metadata"]["name"] = json!("arbiter-bad-duration");
        rule["spec"]["groups"][0]["rules"][0]["for"] = json!("30 minutes");
        let file = write(&dir, &rule);
        let file = file.to_string_lossy();
        let mut args = strict.to_vec();
        args.extend(["-f", &file]);
        let (applied, out) = kubectl(&kubeconfig, &home, &args);
        assert!(
            !applied && out.contains("spec.groups[0].rules[0].for"),
            "a PrometheusRule whose first rule has `for: 30 minutes` must be refused naming \
             the field; `kubectl {}` said:\n{out}",
            args.join(" ")
        );
    }
}
