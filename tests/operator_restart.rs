//! `arbiter run` as the process it is in a cluster, killed with SIGKILL in
//! the middle of a stream of jobs and started again, against a real
//! kube-apiserver: it never has more admitted than quota and Nodes hold (no
//! double admission across the restart), every job is admitted and
//! finishes in the end (none lost), and the ClusterQueue's status agrees
//! with what the jobs in the API say. On the full cluster: the Job
//! controller runs the released jobs' pods, and the test ends one running
//! job per round (its pod told to succeed), so several run at a time.

#[path = "../crates/operator/tests/support/mod.rs"]
mod support;

#[path = "process/mod.rs"]
mod process;

use std::time::{Duration, Instant};

use arbiter_core::model::api::ClusterQueue;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams, PostParams};
use process::*;
use support::*;

const JOBS: usize = 24;
const GPUS_PER_JOB: u32 = 2;

fn start_operator(kubeconfig: &std::path::Path, log: &std::path::Path, admin: u16) -> Operator {
    start(
        kubeconfig,
        log,
        admin,
        &["--webhook-address=127.0.0.1:0"],
        &[],
    )
}

/// GPUs held by jobs released and not finished, as the API shows them.
async fn running_gpus(jobs: &Api<Job>) -> (u32, usize) {
    let (running, finished) = running_and_finished(jobs).await;
    (running.len() as u32 * GPUS_PER_JOB, finished)
}

#[tokio::test]
async fn a_killed_operator_restarts_without_double_admission_or_lost_jobs() {
    let (cluster, admin) = full_cluster_with_setup().await;
    let token = cluster.token("admin").unwrap().to_string();
    let kubeconfig = cluster.write_kubeconfig("operator", &token).unwrap();
    let log = cluster.dir().join("operator.log");
    let restarted_log = cluster.dir().join("operator-restarted.log");
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");

    let admin_port = free_port();
    let mut operator = start_operator(&kubeconfig, &log, admin_port);
    let started = Instant::now();
    let mut created = 0;
    let mut killed = false;
    loop {
        // The stream: a job every round until all are created.
        if created < JOBS {
            jobs.create(
                &PostParams::default(),
                &job(&format!("j{created:02}"), GPUS_PER_JOB),
            )
            .await
            .unwrap();
            created += 1;
        }
        let (gpus, finished) = running_gpus(&jobs).await;
        assert!(
            gpus <= 8,
            "{gpus} GPUs admitted at once; the quota and the Node hold 8 (operator log: {})",
            log.display()
        );
        // Kill it in the middle of the stream, with work admitted.
        if !killed && finished >= 4 && gpus >= 2 * GPUS_PER_JOB {
            operator.kill();
            killed = true;
            // While it is down, one admitted job finishes and another job
            // arrives; the rest stay admitted across the restart.
            let running: Vec<Job> = jobs
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|j| released(j) && !is_finished(j))
                .collect();
            assert!(
                running.len() >= 2,
                "too little admitted at the kill: {}",
                running.len()
            );
            finish(&jobs, running[0].metadata.name.as_deref().unwrap()).await;
            operator = start_operator(&kubeconfig, &restarted_log, admin_port);
            // Reading back must come first: nothing else is released until
            // the restarted operator has restored what is admitted.
            let started = Instant::now();
            while !std::fs::read_to_string(&restarted_log)
                .unwrap_or_default()
                .contains("admissions read back")
            {
                assert!(
                    started.elapsed() < PATIENCE,
                    "the restarted operator never read admissions back"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let text = std::fs::read_to_string(&restarted_log).unwrap();
            let restored = logged_number(&text, "admissions read back", "restored");
            assert_eq!(restored, Some(running.len() - 1), "{text}");
            continue;
        }
        // Play the job controller: one released job finishes per round,
        // so several run at a time.
        if let Some(j) = jobs
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|j| released(j) && !is_finished(j))
        {
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
    assert!(killed, "the operator was never killed mid-stream");

    // Quiet now: the ClusterQueue's status agrees with the jobs (all done).
    let queues: Api<ClusterQueue> = Api::all(admin.clone());
    let started = Instant::now();
    loop {
        let status = queues
            .get("research")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        let gpu = status
            .flavors_usage
            .iter()
            .flat_map(|f| &f.resources)
            .find(|r| r.name == "nvidia.com/gpu")
            .map(|r| r.total.0.clone());
        if status.admitted_workloads == 0
            && status.pending_workloads == 0
            && gpu.as_deref() == Some("0")
        {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "ClusterQueue status after the stream: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The admin port: alive, ready, and the metrics count what happened
    // since the restart (the restored admissions are not counted again).
    assert_eq!(http_get(admin_port, "/healthz").0, 200);
    assert_eq!(http_get(admin_port, "/readyz").0, 200);
    let (code, metrics) = http_get(admin_port, "/metrics");
    assert_eq!(code, 200);
    let admitted = metric(
        &metrics,
        "arbiter_admitted_workloads_total{cluster_queue=\"research\"}",
    );
    assert!(
        admitted >= 1.0 && admitted <= JOBS as f64,
        "{admitted}\n{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "arbiter_admitted_active_workloads{cluster_queue=\"research\"}"
        ),
        0.0
    );
    assert!(
        metrics.contains("arbiter_admission_wait_time_seconds_bucket"),
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "arbiter_cluster_queue_nominal_quota{cluster_queue=\"research\",flavor=\"a100\",resource=\"nvidia.com/gpu\"}"
        ),
        8.0
    );
    drop(operator);
}
