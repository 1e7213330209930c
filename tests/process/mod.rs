//! What the tests that run `arbiter run` as a process share: the child
//! (killed when dropped, also when a check fails), free loopback ports,
//! the admin port read over plain HTTP, and the jobs' state as the API
//! shows it.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams};

use crate::support::released;

/// The operator process, killed when dropped.
pub struct Operator(pub Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Operator {
    /// SIGKILL, as a node failure or an OOM kill ends it.
    pub fn kill(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

/// Starts `arbiter run --kubeconfig KUBECONFIG --admin-address 127.0.0.1:ADMIN
/// --dashboard-address 127.0.0.1:0 ARGS…` (the dashboard on a free port, so
/// several replicas run on one machine), its log (stderr) in `log`.
pub fn start(
    kubeconfig: &Path,
    log: &Path,
    admin: u16,
    args: &[&str],
    env: &[(&str, &str)],
) -> Operator {
    let log = std::fs::File::create(log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(["run", "--kubeconfig"])
        .arg(kubeconfig)
        .arg(format!("--admin-address=127.0.0.1:{admin}"))
        .arg("--dashboard-address=127.0.0.1:0")
        .args(args)
        .envs(env.iter().copied())
        .env("ARBITER_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("arbiter run starts");
    Operator(child)
}

pub fn is_finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

/// Jobs released and not finished, and jobs finished, as the API shows them.
pub async fn running_and_finished(jobs: &Api<Job>) -> (Vec<Job>, usize) {
    let list = jobs.list(&ListParams::default()).await.unwrap();
    let finished = list.items.iter().filter(|j| is_finished(j)).count();
    let running = list
        .items
        .into_iter()
        .filter(|j| released(j) && !is_finished(j))
        .collect();
    (running, finished)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP/1.0 GET on loopback: (status code, body); (0, "") when
/// nothing listens.
pub fn http_get(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// The value of the sample named exactly `series` (name and labels).
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
}

/// The number after `key=` in the first log line containing `marker`.
pub fn logged_number(log: &str, marker: &str, key: &str) -> Option<usize> {
    let line = log.lines().find(|l| l.contains(marker))?;
    line.split(&format!("{key}="))
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}
