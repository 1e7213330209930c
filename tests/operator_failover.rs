//! Two `arbiter run` replicas with leader election on a real
//! kube-apiserver: only the Lease holder admits; the follower answers the
//! webhooks (the API server is pointed at it alone, and new jobs come back
//! held); the leader is killed with SIGKILL in the middle of a stream of
//! jobs and the follower takes over, reads back what is admitted and goes
//! on — never more admitted than the quota and the Node hold (no double
//! admission across the failover), every job finished in the end.

#[path = "../crates/operator/tests/support/mod.rs"]
mod support;

#[path = "process/mod.rs"]
mod process;

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use process::*;
use serde_json::json;
use support::*;

const JOBS: usize = 16;
const GPUS_PER_JOB: u32 = 2;

struct Replica {
    name: &'static str,
    admin: u16,
    webhook: u16,
    log: std::path::PathBuf,
    process: Operator,
}

fn replica(name: &'static str, kubeconfig: &std::path::Path, dir: &std::path::Path) -> Replica {
    let (admin, webhook) = (free_port(), free_port());
    let log = dir.join(format!("{name}.log"));
    let webhook_address = format!("--webhook-address=127.0.0.1:{webhook}");
    let process = start(
        kubeconfig,
        &log,
        admin,
        &[
            "--leader-election",
            "--lease-duration=4",
            "--lease-grace=1",
            "--namespace=arbiter-system",
            &webhook_address,
        ],
        &[("POD_NAME", name)],
    );
    Replica {
        name,
        admin,
        webhook,
        log,
        process,
    }
}

/// When the job's recorded admission was made (ms since the epoch).
fn admitted_at(job: &Job) -> Option<i64> {
    let record = job
        .metadata
        .annotations
        .as_ref()?
        .get("arbiter.dev/admission")?;
    serde_json::from_str::<serde_json::Value>(record)
        .ok()?
        .get("admittedAt")?
        .as_i64()
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("arbiter-leader")
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Waits until `name` holds the Lease and says so on its admin port.
async fn wait_leading(leases: &Api<Lease>, replica: &Replica) {
    let started = Instant::now();
    loop {
        let (_, metrics) = http_get(replica.admin, "/metrics");
        if holder(leases).await.as_deref() == Some(replica.name)
            && metrics.contains("arbiter_leader 1")
        {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{} never led (log: {})",
            replica.name,
            replica.log.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_follower_takes_over_from_a_killed_leader_without_double_admission() {
    let (cluster, admin) = full_cluster_with_setup().await;
    let token = cluster.token("admin").unwrap().to_string();
    let kubeconfig = cluster.write_kubeconfig("operator", &token).unwrap();
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "arbiter-system");
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");

    // a starts first and leads; b follows.
    let a = replica("arbiter-a", &kubeconfig, cluster.dir());
    wait_leading(&leases, &a).await;
    let mut replicas = [a, replica("arbiter-b", &kubeconfig, cluster.dir())];
    let follower_ready = Instant::now();
    while http_get(replicas[1].admin, "/readyz").0 != 200 {
        assert!(
            follower_ready.elapsed() < PATIENCE,
            "the follower never became ready to serve webhooks"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, metrics) = http_get(replicas[1].admin, "/metrics");
    assert!(metrics.contains("arbiter_leader 0"), "{metrics}");
    let (_, metrics) = http_get(replicas[0].admin, "/metrics");
    let passes = metrics
        .lines()
        .find_map(|l| l.strip_prefix("arbiter_tick_duration_seconds_count "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(
        passes.is_some_and(|n| n > 0.0),
        "the leader counts its passes in arbiter_tick_duration_seconds: {metrics}"
    );

    // The API server calls the follower's webhook only: jobs written
    // running come back held, so the follower answers webhooks.
    let mutating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "arbiter"},
        "webhooks": [{
            "name": "jobs.arbiter.dev",
            "clientConfig": {"url": format!("https://127.0.0.1:{}/mutate-job", replicas[1].webhook)},
            "objectSelector": {"matchExpressions": [{"key": "arbiter.dev/queue-name", "operator": "Exists"}]},
            "rules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]}],
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 10
        }]
    });
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    configurations
        .patch(
            "arbiter",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&mutating),
        )
        .await
        .unwrap();
    let running_job = |name: &str| {
        let mut job = serde_json::to_value(job(name, GPUS_PER_JOB)).unwrap();
        job["spec"]["suspend"] = json!(false);
        serde_json::from_value::<Job>(job).unwrap()
    };

    let started = Instant::now();
    let mut created = 0;
    let mut killed = false;
    loop {
        // Two jobs arrive per round and one finishes, so work queues up.
        for _ in 0..2 {
            if created >= JOBS {
                break;
            }
            // Until the replicas patched the caBundle in, the API server
            // cannot call the webhook and refuses the job; try again.
            match jobs
                .create(
                    &PostParams::default(),
                    &running_job(&format!("j{created:02}")),
                )
                .await
            {
                Ok(job) => {
                    assert!(suspended(&job), "created running: {job:?}");
                    created += 1;
                }
                Err(e) => assert!(
                    started.elapsed() < PATIENCE,
                    "the webhook never answered: {e}"
                ),
            }
        }
        let (running, finished) = running_and_finished(&jobs).await;
        let gpus = running.len() as u32 * GPUS_PER_JOB;
        assert!(
            gpus <= 8,
            "{gpus} GPUs admitted at once; the quota and the Node hold 8"
        );
        if !killed && finished >= 3 && running.len() >= 2 {
            replicas[0].process.kill();
            killed = true;
            let killed_at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64;
            wait_leading(&leases, &replicas[1]).await;
            let read_back = Instant::now();
            let text = loop {
                let text = std::fs::read_to_string(&replicas[1].log).unwrap();
                if text.contains("admissions read back") {
                    break text;
                }
                assert!(
                    read_back.elapsed() < PATIENCE,
                    "the new leader never read admissions back:\n{text}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            // What the dead leader admitted (recorded before the kill, an
            // in-flight write included) is exactly what the new one read back.
            let by_old_leader = running_and_finished(&jobs)
                .await
                .0
                .iter()
                .filter(|j| admitted_at(j).is_some_and(|at| at < killed_at))
                .count();
            assert_eq!(
                logged_number(&text, "admissions read back", "restored"),
                Some(by_old_leader),
                "the new leader must read back exactly what was admitted:\n{text}"
            );
            continue;
        }
        if let Some(j) = running.first() {
            finish(&jobs, j.metadata.name.as_deref().unwrap()).await;
        }
        if finished == JOBS {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE * 3,
            "{finished} of {JOBS} jobs finished; the rest were lost or stuck (logs in {})",
            cluster.dir().display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(killed, "the leader was never killed mid-stream");
    // Only the leader ever wrote: the follower logged no admission before it led.
    let b_log = std::fs::read_to_string(&replicas[1].log).unwrap();
    let led_at = b_log.find("leading:").expect("b led");
    assert!(
        !b_log[..led_at].contains("admissions read back"),
        "the follower ran the loop before it led:\n{b_log}"
    );
}
