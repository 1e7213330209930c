//! The read-only web dashboard against the real API server with the
//! operator deciding: `arbiter dashboard --kubeconfig` (a process) and the
//! operator's own dashboard serve `/dashboard/api/state`, checked against
//! the objects (cohort tree, quota and usage, pending and admitted, a
//! pending workload's reason, a bundle's status; filtered and bounded),
//! and `/dashboard/api/workload` (a workload's conditions, its Events and
//! its job's, the policy decisions about it); then headless
//! Chromium (Debian's `chromium`) loads the page: the DOM shows the
//! ClusterQueue, the usage and the pending workload's reason, and a
//! screenshot is written for a person to look at.

#[path = "../crates/operator/tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use arbiter_core::model::api::Workload;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use serde_json::Value;
use support::*;

const EXTRA: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: org}
spec: {}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: inference}
spec:
  cohort: org
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 16}
      - {name: nvidia.com/gpu, nominalQuota: 4}
"#;

/// GET `path` from `address`: the status code and the body.
fn get(address: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP response from {address}{path}: {response}"));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head}"));
    (code, body.to_string())
}

/// GET `path` from `address` as JSON (a 200 answer).
fn json_at(address: SocketAddr, path: &str) -> Value {
    let (code, body) = get(address, path);
    assert_eq!(code, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn state(address: SocketAddr) -> Value {
    json_at(address, "/dashboard/api/state")
}

const BIG: &str = "/dashboard/api/workload?namespace=team-a&name=job-big";

/// Polls `path` until `shows` holds of it (the operator writes statuses
/// and annotations asynchronously); returns it.
async fn until_at(
    address: SocketAddr,
    path: &'static str,
    what: &str,
    shows: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let s = tokio::task::spawn_blocking(move || json_at(address, path))
            .await
            .unwrap();
        if shows(&s) {
            return s;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the dashboard never showed {what}; last:\n{s:#}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}

/// [`until_at`] the state.
async fn until(address: SocketAddr, what: &str, shows: impl Fn(&Value) -> bool) -> Value {
    until_at(address, "/dashboard/api/state", what, shows).await
}

fn find<'a>(list: &'a Value, key: &str, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|v| v[key] == name)
        .unwrap_or_else(|| panic!("no {key} {name} in {list:#}"))
}

/// `arbiter dashboard` as a process, killed when dropped.
struct Served {
    child: Child,
    address: SocketAddr,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(kubeconfig: &Path) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(["dashboard", "--address", "127.0.0.1:0", "--kubeconfig"])
        .arg(kubeconfig)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("`arbiter dashboard` did not say where it serves: {line:?}"));
    Served { child, address }
}

/// Debian's chromium; the test fails (never skips) without it.
fn chromium() -> PathBuf {
    let path = PathBuf::from("/usr/bin/chromium");
    assert!(
        path.is_file(),
        "{} is missing: apt-get install -y chromium (scripts/test.sh installs it)",
        path.display()
    );
    path
}

/// Headless Chromium on `url` with `args`; its stdout.
fn headless(url: &str, args: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(chromium())
        .args(["--headless", "--disable-gpu", "--no-sandbox"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        // Virtual time runs the page's first poll and render before the dump.
        .arg("--virtual-time-budget=5000")
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "chromium {args:?} {url} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_cluster_as_the_objects_say_in_json_and_in_chromium() {
    let chromium = chromium(); // fail before the cluster starts when missing
    let (cluster, admin) = cluster_with_setup().await;
    apply_yaml(&admin, EXTRA).await;
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = arbiter_policy::metrics::PolicyMetrics::register(&mut registry);
    let (_operator, recent) =
        start_operator_keeping_decisions(admin.clone(), Vec::new(), Some(metrics));
    put_bundle(
        &admin,
        "team-a",
        "weights",
        &[(
            "bundle.yaml",
            &tenant_bundle(
                "team-a-weights",
                "  - {name: bigger-first, hook: weight, cel: {expression: 'double(workload.gpus)'}}\n  \
                 - {name: gpu-cap, hook: admission, cel: {expression: 'workload.gpus <= 6'}}\n",
            ),
        )],
        &[],
    )
    .await;
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("big", 6))
        .await
        .unwrap();
    wait_for(&jobs, "big", "released", released).await;
    jobs.create(&PostParams::default(), &job("second", 4))
        .await
        .unwrap();

    let kubeconfig = cluster
        .write_kubeconfig("admin", cluster.token("admin").unwrap())
        .unwrap();
    let served = serve(&kubeconfig);
    let s = until(
        served.address,
        "job-second pending with a reason and the bundle loaded",
        |s| {
            let wl = s["workloads"].as_array().unwrap();
            wl.iter()
                .any(|w| w["name"] == "job-second" && w["state"] == "Pending" && w["message"] != "")
                && s["bundles"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|b| b["result"] == "loaded")
                && s["clusterQueues"][1]["admitted"] == 1
        },
    )
    .await;

    // The tree: cohort org over inference; research at the root.
    let tree = &s["tree"];
    let org = find(tree, "name", "org");
    assert_eq!(org["kind"], "Cohort");
    assert_eq!(org["children"][0]["name"], "inference", "{tree:#}");
    assert_eq!(find(tree, "name", "research")["kind"], "ClusterQueue");

    // Quota and usage as the ClusterQueue's status says.
    let research = find(&s["clusterQueues"], "name", "research");
    assert_eq!(
        (research["pending"].as_i64(), research["admitted"].as_i64()),
        (Some(1), Some(1))
    );
    let gpu = research["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "nvidia.com/gpu")
        .unwrap();
    assert_eq!(
        (gpu["flavor"].as_str(), gpu["nominal"].as_str()),
        (Some("a100"), Some("8"))
    );
    assert_eq!(gpu["usage"], "6", "{research:#}");
    assert_eq!(gpu["percent"], 75.0);
    assert_eq!(research["head"][0], "team-a/job-second");
    let lq = find(&s["localQueues"], "name", "research");
    assert_eq!(lq["clusterQueue"], "research");

    // The pending workload's reason is its QuotaReserved condition's.
    let second = find(&s["workloads"], "name", "job-second");
    let object = Api::<Workload>::namespaced(admin.clone(), "team-a")
        .get("job-second")
        .await
        .unwrap();
    let reserved = object
        .status
        .as_ref()
        .and_then(|st| st.conditions.iter().find(|c| c.type_ == "QuotaReserved"))
        .expect("the pending workload has a QuotaReserved condition");
    assert_eq!(second["reason"], reserved.reason.as_str());
    assert_eq!(second["message"], reserved.message.as_str());
    assert_eq!(second["position"], "1");
    assert_eq!(second["clusterQueue"], "research");
    let big = find(&s["workloads"], "name", "job-big");
    assert_eq!(big["state"], "Admitted");
    assert!(
        big["flavors"][0].as_str().unwrap().contains("a100"),
        "{big:#}"
    );
    let bundle = find(&s["bundles"], "name", "weights");
    assert!(
        bundle["status"]
            .as_str()
            .unwrap()
            .starts_with("loaded team-a-weights@1"),
        "{bundle:#}"
    );
    assert!(
        s["errors"].as_array().unwrap().is_empty(),
        "{:#}",
        s["errors"]
    );

    // Bounded and filtered: a limit, a state.
    let address = served.address;
    let (one, admitted) = tokio::task::spawn_blocking(move || {
        (
            json_at(address, "/dashboard/api/state?limit=1"),
            json_at(
                address,
                "/dashboard/api/state?state=Admitted&namespace=team-a",
            ),
        )
    })
    .await
    .unwrap();
    assert_eq!(
        (
            one["workloads"].as_array().unwrap().len(),
            one["workloadsMatching"].as_u64(),
            one["workloadsTotal"].as_u64()
        ),
        (1, Some(2), Some(2))
    );
    assert_eq!(one["workloads"][0]["name"], "job-second", "pending first");
    let names: Vec<&Value> = admitted["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| &w["name"])
        .collect();
    assert_eq!(names, ["job-big"]);

    // The operator's own dashboard serves the same state, with its
    // engine's bundles in force (from its metrics) and newest decisions;
    // `arbiter dashboard` has no engine to ask.
    let admin_state = arbiter_operator::admin::AdminState::new(registry);
    let feeds = arbiter_operator::dashboard::Feeds {
        engine: Some(admin_state.metrics_text()),
        recent: Some(recent),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bound = listener.local_addr().unwrap();
    let _dashboard = tokio::spawn(arbiter_operator::dashboard::serve(
        listener,
        admin.clone(),
        feeds,
    ));
    let from_operator = until(bound, "the admission decisions about job-big", |s| {
        s["decisions"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["workload"] == "team-a/big"))
    })
    .await;
    assert_eq!(from_operator["clusterQueues"], s["clusterQueues"]);
    let engine = find(
        &from_operator["engine"],
        "source",
        "ConfigMap team-a/weights",
    );
    assert_eq!(
        (engine["name"].as_str(), engine["version"].as_str()),
        (Some("team-a-weights"), Some("1"))
    );
    assert_eq!(engine["lastReloadOk"], true);
    assert!(
        bundle["status"]
            .as_str()
            .unwrap()
            .contains(engine["digest"].as_str().unwrap()),
        "the annotation and the engine name one digest: {bundle:#} {engine:#}"
    );
    let decision = find(&from_operator["decisions"], "workload", "team-a/big");
    assert_eq!(
        (
            decision["policy"].as_str(),
            decision["hook"].as_str(),
            decision["result"].as_str(),
            decision["tenant"].as_str()
        ),
        (
            Some("gpu-cap"),
            Some("admission"),
            Some("allow"),
            Some("team-a")
        )
    );
    assert_eq!(s["engine"], serde_json::json!([]));
    assert!(s.get("decisions").is_none(), "{s:#}");
    let (code, page) = tokio::task::spawn_blocking(move || get(bound, "/dashboard/"))
        .await
        .unwrap();
    assert_eq!(code, 200);
    assert!(page.contains("<script src=\"app.js\""), "{page}");

    // Read-only: nothing but GET.
    let address = served.address;
    let (code, _) = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(address).unwrap();
        write!(stream, "POST /dashboard/api/state HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        (response.split_whitespace().nth(1).unwrap_or_default().to_string(), ())
    })
    .await
    .unwrap();
    assert_eq!(code, "405");

    // A user the cluster grants nothing sees what was refused, named with
    // the role to ask for, not an error page.
    let nobody = cluster
        .write_kubeconfig("alice", cluster.token("alice").unwrap())
        .unwrap();
    let refused = serve(&nobody);
    let address = refused.address;
    let s = tokio::task::spawn_blocking(move || state(address))
        .await
        .unwrap();
    let errors: Vec<&str> = s["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("cannot list ClusterQueues: forbidden")
                && e.contains("arbiter-queue-viewer")),
        "{errors:#?}"
    );
    assert_eq!(s["clusterQueues"], serde_json::json!([]));
    let (code, body) = tokio::task::spawn_blocking(move || get(address, BIG))
        .await
        .unwrap();
    assert_eq!(code, 404, "a Workload it may not read is not shown: {body}");
    drop(refused);

    // The operator's page shows the engine's bundles and decisions too,
    // and a workload's decisions.
    let operator_page = format!("http://{bound}/dashboard/#team-a/job-big");
    let dom = tokio::task::spawn_blocking(move || headless(&operator_page, &["--dump-dom"]))
        .await
        .unwrap();
    let engine_section = dom
        .split("<section id=\"engine-section\">")
        .nth(1)
        .unwrap_or_else(|| {
            panic!("the engine's bundles are hidden on the operator's page:\n{dom}")
        });
    assert!(engine_section.contains("ConfigMap team-a/weights"), "{dom}");
    let decisions = dom
        .split("<section id=\"decisions-section\">")
        .nth(1)
        .unwrap_or_else(|| panic!("the decisions are hidden on the operator's page:\n{dom}"));
    assert!(decisions.contains("gpu-cap"), "{dom}");
    let of_big = dom
        .split("<div id=\"workload-decisions-section\">")
        .nth(1)
        .unwrap_or_else(|| panic!("job-big's decisions are hidden:\n{dom}"));
    assert!(
        of_big.contains("gpu-cap") && of_big.contains("team-a/big"),
        "{dom}"
    );

    // Headless Chromium renders the page from the API.
    let url = format!("http://{}/dashboard/", served.address);
    let dom = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || headless(&url, &["--dump-dom"]))
            .await
            .unwrap()
    };
    for want in [
        "research",
        "inference",
        "6 / 8 (75%)",
        "job-second",
        reserved.message.as_str(),
        "loaded team-a-weights@1",
    ] {
        assert!(dom.contains(want), "the page lacks {want:?}:\n{dom}");
    }
    assert!(!dom.contains("cannot refresh"), "{dom}");
    assert!(
        dom.contains("<section id=\"engine-section\" hidden")
            && dom.contains("<section id=\"decisions-section\" hidden"),
        "`arbiter dashboard` has no engine, its sections stay hidden:\n{dom}"
    );
    assert!(dom.contains("2 shown of 2 matching (2 in all)"), "{dom}");
    assert!(
        !dom.contains("Workload team-a/"),
        "no workload is selected yet"
    );

    // Text from the cluster is shown as text: an Event's message that is
    // markup stays characters on the page.
    let probe: k8s_openapi::api::core::v1::Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "big.probe", "namespace": "team-a"},
        "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "namespace": "team-a", "name": "big"},
        "reason": "Probe", "type": "Normal",
        "message": "<img src=x id=injected onerror=alert(1)>",
        "firstTimestamp": "2020-01-01T00:00:00Z", "lastTimestamp": "2020-01-01T00:00:00Z",
        "source": {"component": "dashboard-test"}
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(admin.clone(), "team-a")
        .create(&PostParams::default(), &probe)
        .await
        .unwrap();

    // A workload's history, listed when it is shown: the URL's fragment
    // selects it; its conditions and the Events about it and its Job (as
    // the API lists them: the operator tells the Job's admission) are shown.
    let big = until_at(served.address, BIG, "job-big's Events", |d| {
        d["events"].as_array().is_some_and(|e| e.len() >= 2)
    })
    .await;
    assert_eq!(big["workload"]["state"], "Admitted");
    assert_eq!(big["workload"]["job"], "Job/big");
    assert!(big.get("decisions").is_none(), "no engine: {big:#}");
    assert!(big["errors"].as_array().unwrap().is_empty(), "{big:#}");
    let events: Vec<k8s_openapi::api::core::v1::Event> =
        Api::<k8s_openapi::api::core::v1::Event>::namespaced(admin.clone(), "team-a")
            .list(&kube::api::ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                let o = &e.involved_object;
                matches!(
                    (o.kind.as_deref(), o.name.as_deref()),
                    (Some("Job"), Some("big")) | (Some("Workload"), Some("job-big"))
                )
            })
            .collect();
    let shown = big["events"].as_array().unwrap();
    assert!(
        shown.len() <= events.len().min(10),
        "{shown:#?} of {events:#?}"
    );
    for e in shown {
        assert!(
            events
                .iter()
                .any(|a| a.reason.as_deref() == e["reason"].as_str()
                    && a.message.as_deref() == e["message"].as_str()),
            "{e:#} is no Event of job-big: {events:#?}"
        );
    }
    let selected = format!("{url}#team-a/job-big");
    let dom = {
        let selected = selected.clone();
        tokio::task::spawn_blocking(move || headless(&selected, &["--dump-dom"]))
            .await
            .unwrap()
    };
    assert!(dom.contains("Workload team-a/job-big: Admitted"), "{dom}");
    let operators = shown
        .iter()
        .find(|e| e["reason"] != "Probe")
        .expect("the operator's Event about job-big");
    let detail = dom
        .split("id=\"workload-conditions\"")
        .nth(1)
        .unwrap_or_default();
    for want in [
        "QuotaReserved",
        "Admitted",
        operators["message"].as_str().unwrap(),
    ] {
        assert!(
            detail.contains(want),
            "the workload's detail lacks {want:?}:\n{dom}"
        );
    }

    assert!(
        dom.contains("&lt;img src=x id=injected onerror=alert(1)&gt;"),
        "the probe Event's message is not shown as text:\n{dom}"
    );
    assert!(
        !dom.contains("id=\"injected\""),
        "markup from an Event became an element:\n{dom}"
    );

    // Screenshots a person can look at: the operator's overview and one
    // workload (with the engine's decisions).
    let (url, selected) = (
        format!("http://{bound}/dashboard/"),
        format!("http://{bound}/dashboard/#team-a/job-big"),
    );
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&shots).unwrap();
    for (page, file) in [(url, "dashboard.png"), (selected, "workload.png")] {
        let png = shots.join(file);
        let _ = std::fs::remove_file(&png);
        let arg = format!("--screenshot={}", png.display());
        tokio::task::spawn_blocking(move || headless(&page, &[&arg, "--window-size=1400,1000"]))
            .await
            .unwrap();
        let bytes =
            std::fs::read(&png).unwrap_or_else(|e| panic!("no screenshot {}: {e}", png.display()));
        assert!(
            bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
            "{} is no screenshot",
            png.display()
        );
        eprintln!("screenshot: {} (by {})", png.display(), chromium.display());
    }
}

#[test]
fn a_missing_kubeconfig_is_named_and_nothing_is_served() {
    let output = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args([
            "dashboard",
            "--address",
            "127.0.0.1:0",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("reading the kubeconfig /nonexistent/kubeconfig"),
        "{stderr}"
    );
    assert!(
        output.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}
