//! What the operator benchmarks read besides their Jobs, shared by
//! `operator-perf` and `operator-scale`: CPU and memory of each process
//! from /proc, the machine's busy time and load, Prometheus text from an
//! admin port, the API server's request counters; and how they start what
//! they measure (the operator's identity, server-side apply, the
//! `arbiter` binary as a child process).

// Each of the two examples uses a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use anyhow::Context as _;
use arbiter_testcluster::workspace_root;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

/// Clock ticks per second of /proc/PID/stat times (USER_HZ: 100 on Linux).
pub const USER_HZ: f64 = 100.0;
/// The token user the operator runs as, and its FlowSchema.
pub const OPERATOR_USER: &str = "alice";
pub const OPERATOR_FLOW_SCHEMA: &str = "arbiter-operator";

/// What /proc says of one process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Resources {
    /// utime + stime, in seconds.
    pub cpu: f64,
    /// Peak resident memory (`VmHWM`), MiB.
    pub hwm: f64,
    /// Resident memory now (`VmRSS`), MiB.
    pub rss: f64,
}

/// What /proc says of process `pid`.
pub fn process(pid: u32) -> Option<Resources> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |field: &str| {
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|k| k.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Some(Resources {
        cpu: ticks / USER_HZ,
        hwm: kib("VmHWM:") / 1024.0,
        rss: kib("VmRSS:") / 1024.0,
    })
}

/// Children of this process named `comm` (the test cluster's etcd and kube-apiserver).
pub fn child_named(comm: &str) -> Option<u32> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc").ok()?.find_map(|entry| {
        let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (head, rest) = stat.rsplit_once(')')?;
        let name = head.split_once('(')?.1;
        let parent = rest.split_whitespace().nth(1)?;
        (name == comm && parent == me).then_some(pid)
    })
}

/// Busy CPU seconds of the whole machine (all cores), from /proc/stat.
fn machine_busy() -> f64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: f64 =
        v.iter().take(8).sum::<f64>() - v.get(3).unwrap_or(&0.0) - v.get(4).unwrap_or(&0.0);
    busy / USER_HZ
}

/// The 1-minute load average.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// CPU seconds and memory per process, and the machine's busy time.
#[derive(Clone, Debug, Default)]
pub struct ProcessStat {
    pub by_process: BTreeMap<&'static str, Resources>,
    pub machine_busy: f64,
}

impl ProcessStat {
    pub fn snapshot(operator: u32) -> ProcessStat {
        let mut by_process = BTreeMap::new();
        let pids = [
            ("operator", Some(operator)),
            ("kube-apiserver", child_named("kube-apiserver")),
            ("etcd", child_named("etcd")),
            ("runner", Some(std::process::id())),
            // The full cluster's (`--pods`); /proc's command names stop at 15 bytes.
            ("kube-controller-manager", child_named("kube-controller")),
            ("kube-scheduler", child_named("kube-scheduler")),
            ("kwok", child_named("kwok")),
        ];
        for (name, pid) in pids {
            if let Some(figures) = pid.and_then(process) {
                by_process.insert(name, figures);
            }
        }
        ProcessStat {
            by_process,
            machine_busy: machine_busy(),
        }
    }

    pub fn cpu(&self, name: &str) -> f64 {
        self.by_process.get(name).map_or(0.0, |p| p.cpu)
    }

    pub fn hwm(&self, name: &str) -> f64 {
        self.by_process.get(name).map_or(0.0, |p| p.hwm)
    }

    pub fn rss(&self, name: &str) -> f64 {
        self.by_process.get(name).map_or(0.0, |p| p.rss)
    }
}

/// A plain HTTP/1.0 GET on loopback: the body ("" when nothing answers).
pub async fn http_get(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return String::new();
    };
    let request = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text).await;
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.contains(" 200 ") => body.to_string(),
        _ => String::new(),
    }
}

/// Waits until the operator's `/readyz` answers 200 (bounds a hang).
pub async fn wait_ready(port: u16) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    while http_get(port, "/readyz").await.is_empty() {
        if started.elapsed() > Duration::from_secs(120) {
            anyhow::bail!("the operator was not ready within 120 s; see its log");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Samples of one Prometheus family: (labels, value).
pub fn samples<'a>(text: &'a str, family: &str) -> Vec<(BTreeMap<&'a str, &'a str>, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(family) else {
            continue;
        };
        let (labels, value) = match rest.strip_prefix('{') {
            Some(r) => match r.rsplit_once("} ") {
                Some((l, v)) => (l, v),
                None => continue,
            },
            None if rest.starts_with(' ') => ("", rest),
            None => continue,
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let labels = labels
            .split("\",")
            .filter_map(|pair| {
                let (k, v) = pair.split_once("=\"")?;
                Some((k.trim(), v.trim_end_matches('"')))
            })
            .collect();
        out.push((labels, value));
    }
    out
}

/// The API server's request counters at one moment.
#[derive(Clone, Debug, Default)]
pub struct ApiCounts {
    /// `apiserver_request_total` by "VERB resource[/subresource]".
    pub by_request: BTreeMap<String, f64>,
    /// `apiserver_flowcontrol_dispatched_requests_total` of the operator's FlowSchema.
    pub operator: f64,
}

impl ApiCounts {
    pub async fn read(admin: &Client) -> anyhow::Result<ApiCounts> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = admin.request_text(request).await?;
        let mut by_request = BTreeMap::new();
        for (labels, value) in samples(&text, "apiserver_request_total") {
            let resource = match labels.get("subresource") {
                Some(sub) if !sub.is_empty() => {
                    format!("{}/{sub}", labels.get("resource").unwrap_or(&""))
                }
                _ => labels.get("resource").unwrap_or(&"").to_string(),
            };
            let key = format!("{} {resource}", labels.get("verb").unwrap_or(&""));
            *by_request.entry(key).or_default() += value;
        }
        let operator = samples(&text, "apiserver_flowcontrol_dispatched_requests_total")
            .iter()
            .filter(|(l, _)| l.get("flow_schema") == Some(&OPERATOR_FLOW_SCHEMA))
            .map(|(_, v)| v)
            .sum();
        Ok(ApiCounts {
            by_request,
            operator,
        })
    }

    pub fn total(&self) -> f64 {
        self.by_request.values().sum()
    }
}

/// Sum of one family's samples in Prometheus text (0 when absent).
pub fn metric_sum(text: &str, family: &str) -> f64 {
    samples(text, family).iter().map(|(_, v)| v).sum()
}

/// A process of the run (the system under test), killed when dropped.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free loopback port.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The `arbiter` binary: `explicit`, else $CARGO_TARGET_DIR's (or
/// target/'s) release build.
pub fn arbiter_binary(explicit: Option<&PathBuf>) -> PathBuf {
    explicit.cloned().unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target"))
            .join("release/arbiter")
    })
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> anyhow::Result<&'a str> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .with_context(|| format!("no string at {pointer} in {value}"))
}

/// Server-side apply of one object of any kind the API serves.
pub async fn apply(client: &Client, value: &Value) -> anyhow::Result<()> {
    let api_version = str_at(value, "/apiVersion")?;
    let kind = str_at(value, "/kind")?;
    let name = str_at(value, "/metadata/name")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("discovering {api_version} {kind}"))?;
    let api: Api<DynamicObject> = match value.pointer("/metadata/namespace").and_then(Value::as_str)
    {
        Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        _ => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply("operator-perf").force(),
        &Patch::Apply(value),
    )
    .await
    .with_context(|| format!("applying {kind} {name}"))?;
    Ok(())
}

/// The operator's namespaces and identity: `OPERATOR_USER` bound to
/// `cluster-admin`, exempt from priority and fairness as the runner's
/// system:masters requests are (so neither side is queued), under a
/// FlowSchema of its own so
/// `apiserver_flowcontrol_dispatched_requests_total` counts it apart.
pub fn operator_identity() -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "arbiter-system"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "arbiter-operator-perf"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OPERATOR_USER}]}),
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
               "metadata": {"name": OPERATOR_FLOW_SCHEMA},
               "spec": {"matchingPrecedence": 90, "priorityLevelConfiguration": {"name": "exempt"},
                        "rules": [{"subjects": [{"kind": "User", "user": {"name": OPERATOR_USER}}],
                                   "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                      "clusterScope": true, "namespaces": ["*"]}],
                                   "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}),
    ]
}

/// A batch/v1 Job's status as the Job controller writes it when its pod
/// succeeded now: Complete (a merge patch of the status subresource).
pub fn completed_status() -> Value {
    let stamp = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    json!({"status": {
        "startTime": stamp, "completionTime": stamp, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": stamp, "lastProbeTime": stamp},
            {"type": "Complete", "status": "True", "lastTransitionTime": stamp, "lastProbeTime": stamp}]}})
}
