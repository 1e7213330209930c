//! `kubectl arbiter`: the `arbiter` binary linked as `kubectl-arbiter` into
//! a directory on `PATH`, run by the real kubectl (built with the test
//! cluster) against the real API server with the operator deciding. As a
//! platform engineer (admin) and as a tenant (alice, who holds only
//! `arbiter-queue-manager` in team-a): lists with positions the operator
//! wrote, `-o wide|json`, `describe`, `why` (quota by flavor, the head in
//! front, preemption candidates), stop and resume, and the tenant's
//! refusals told with the role to ask for.

#[path = "../crates/operator/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arbiter_core::model::api::LocalQueue;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::Value;
use support::*;

/// The roles deploy/ gives tenants, and alice's binding in team-a.
const ALICE: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-queue-manager, namespace: team-a}
subjects:
- {kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}
roleRef: {kind: ClusterRole, name: arbiter-queue-manager, apiGroup: rbac.authorization.k8s.io}
"#;

struct Kubectl {
    kubectl: PathBuf,
    plugins: tempfile::TempDir,
}

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    fn new() -> Kubectl {
        let bin = arbiter_testcluster::binaries().expect("the test cluster's binaries");
        let kubectl = bin.join("kubectl");
        assert!(
            kubectl.is_file(),
            "{} is missing: run scripts/test-cluster.sh (it builds kubectl with the API server)",
            kubectl.display()
        );
        let plugins = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_arbiter"),
            plugins.path().join("kubectl-arbiter"),
        )
        .unwrap();
        Kubectl { kubectl, plugins }
    }

    /// `kubectl ARGS…` with KUBECONFIG set, the plugin directory the only `PATH`.
    async fn run(&self, kubeconfig: &Path, args: &[&str]) -> Ran {
        let output = tokio::process::Command::new(&self.kubectl)
            .args(args)
            .env_clear()
            .env("PATH", self.plugins.path())
            .env("KUBECONFIG", kubeconfig)
            .env("HOME", self.plugins.path())
            .output()
            .await
            .unwrap();
        Ran {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs and requires success; returns stdout.
    async fn ok(&self, kubeconfig: &Path, args: &[&str]) -> String {
        let ran = self.run(kubeconfig, args).await;
        assert_eq!(
            ran.code, 0,
            "kubectl {args:?} failed:\n{}\n{}",
            ran.stdout, ran.stderr
        );
        ran.stdout
    }

    /// Runs until stdout contains `want` (the operator writes statuses
    /// asynchronously); returns that stdout.
    async fn until(&self, kubeconfig: &Path, args: &[&str], want: &[&str]) -> String {
        self.until_shows(kubeconfig, args, &format!("{want:?}"), |out| {
            want.iter().all(|w| out.contains(w))
        })
        .await
    }

    /// Runs until `shows` holds of stdout; returns that stdout.
    async fn until_shows(
        &self,
        kubeconfig: &Path,
        args: &[&str],
        what: &str,
        shows: impl Fn(&str) -> bool,
    ) -> String {
        let started = Instant::now();
        loop {
            let out = self.ok(kubeconfig, args).await;
            if shows(&out) {
                return out;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "kubectl {args:?} never showed {what}; last:\n{out}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// The row of the table whose first column is `name`, split into cells.
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{table}"))
        .split_whitespace()
        .collect()
}

async fn create_job(jobs: &Api<Job>, name: &str, gpus: u32) {
    jobs.create(&PostParams::default(), &job(name, gpus))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_runs_the_plugin_for_a_platform_engineer_and_for_a_tenant_within_its_role() {
    let (cluster, admin) = cluster_with_setup().await;
    let roles = std::fs::read_to_string(
        arbiter_testcluster::workspace_root().join("deploy/queue-manager.yaml"),
    )
    .unwrap();
    apply_yaml(&admin, &roles).await;
    apply_yaml(&admin, ALICE).await;
    let _operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    create_job(&jobs, "big", 8).await;
    wait_for(&jobs, "big", "released", released).await;
    create_job(&jobs, "second", 4).await;
    create_job(&jobs, "third", 2).await;

    let admin_config = cluster
        .write_kubeconfig("admin", cluster.token("admin").unwrap())
        .unwrap();
    let alice_config = cluster
        .write_kubeconfig("alice", cluster.token("alice").unwrap())
        .unwrap();
    let kubectl = Kubectl::new();

    // kubectl finds the plugin on PATH and hands it the arguments.
    let help = kubectl.ok(&admin_config, &["arbiter", "--help"]).await;
    assert!(help.contains("Usage: kubectl arbiter"), "{help}");

    // The platform engineer: positions in the LocalQueue and (wide) in the
    // ClusterQueue, as the operator wrote them, the admitted one's flavor.
    let list = kubectl
        .until(
            &admin_config,
            &["arbiter", "list", "workloads", "-n", "team-a", "-o", "wide"],
            &["job-third"],
        )
        .await;
    let header: Vec<&str> = list.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[0], "NAME", "{list}");
    let big = row(&list, "job-big");
    assert_eq!(
        &big[1..6],
        &["Job/big", "research", "research", "Admitted", "-"],
        "{list}"
    );
    assert!(big.contains(&"a100"), "{list}");
    let position = |list: &str, name: &str| {
        list.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(5))
            .map(str::to_string)
    };
    let list = kubectl
        .until_shows(
            &admin_config,
            &["arbiter", "list", "workloads", "-n", "team-a", "-o", "wide"],
            "the positions 1 and 2",
            |out| {
                position(out, "job-second").as_deref() == Some("1")
                    && position(out, "job-third").as_deref() == Some("2")
            },
        )
        .await;
    let second = row(&list, "job-second");
    assert_eq!(&second[4..6], &["Pending", "1"], "{list}");
    assert_eq!(second[7], "1", "the ClusterQueue position:\n{list}");
    let third = row(&list, "job-third");
    assert_eq!(&third[4..6], &["Pending", "2"], "{list}");

    let json = kubectl
        .ok(
            &admin_config,
            &[
                "arbiter", "list", "wl", "-A", "-o", "json", "--status", "pending",
            ],
        )
        .await;
    let json: Value = serde_json::from_str(&json).unwrap();
    let names: Vec<&str> = json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["job-second", "job-third"]);

    // why: its reason, the head in front, quota by flavor, preemption.
    let why = kubectl
        .ok(
            &admin_config,
            &["arbiter", "why", "job/third", "-n", "team-a"],
        )
        .await;
    for want in [
        "team-a/job-third (Job/third) is Pending",
        "Position: 2 in LocalQueue team-a/research; 2 in ClusterQueue research",
        "In front of it: team-a/job-second",
        "a100     nvidia.com/gpu",
        "short by 2",
        "Preemption (LowerPriority within ClusterQueue research): no admitted workload it may preempt.",
    ] {
        assert!(why.contains(want), "no {want:?} in:\n{why}");
    }
    // kubectl's KIND.GROUP/NAME names the job too.
    let why = kubectl
        .ok(
            &admin_config,
            &["arbiter", "why", "job.batch/second", "-n", "team-a"],
        )
        .await;
    assert!(
        why.starts_with("team-a/job-second (Job/second) is Pending"),
        "{why}"
    );
    let describe = kubectl
        .ok(
            &admin_config,
            &["arbiter", "describe", "workload", "second", "-n", "team-a"],
        )
        .await;
    for want in [
        "Job:            Job/second",
        "State:          Pending, position 1 in its LocalQueue, 1 in its ClusterQueue",
        "Pod sets:       main: 1 pod(s) × cpu 1, nvidia.com/gpu 4",
        "QuotaReserved   False",
    ] {
        assert!(describe.contains(want), "no {want:?} in:\n{describe}");
    }

    // The tenant: its namespace, positions in its LocalQueue; what its
    // role does not grant is told with the role to ask for.
    let list = kubectl
        .ok(
            &alice_config,
            &["arbiter", "list", "workloads", "-n", "team-a"],
        )
        .await;
    assert_eq!(&row(&list, "job-second")[4..6], &["Pending", "1"], "{list}");
    let refused = kubectl
        .run(&alice_config, &["arbiter", "list", "workloads", "-A"])
        .await;
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.contains("forbidden") && refused.stderr.contains("arbiter-queue-manager"),
        "{}",
        refused.stderr
    );
    let why = kubectl
        .ok(&alice_config, &["arbiter", "why", "second", "-n", "team-a"])
        .await;
    assert!(
        why.contains("Position: 1 in LocalQueue team-a/research")
            && why.contains("bind the ClusterRole arbiter-queue-viewer"),
        "{why}"
    );
    let refused = kubectl
        .run(
            &alice_config,
            &["arbiter", "stop", "clusterqueue", "research"],
        )
        .await;
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(refused.stderr.contains("forbidden"), "{}", refused.stderr);
    let missing = kubectl
        .run(
            &alice_config,
            &["arbiter", "why", "nothing", "-n", "team-a"],
        )
        .await;
    assert_eq!(missing.code, 1);
    assert!(
        missing
            .stderr
            .contains("no Workload nothing in namespace team-a"),
        "{}",
        missing.stderr
    );

    // The tenant stops its LocalQueue: its waiting workloads say so, and
    // `why` says how to resume it.
    let stopped = kubectl
        .ok(
            &alice_config,
            &["arbiter", "stop", "localqueue", "research", "-n", "team-a"],
        )
        .await;
    assert!(
        stopped.contains("stopped (stopPolicy HoldAndDrain)"),
        "{stopped}"
    );
    let queues: Api<LocalQueue> = Api::namespaced(admin.clone(), "team-a");
    let stop_policy = |lq: &LocalQueue| lq.spec.stop_policy.map(|p| format!("{p:?}"));
    assert_eq!(
        stop_policy(&queues.get("research").await.unwrap()).as_deref(),
        Some("HoldAndDrain")
    );
    let why = kubectl
        .until(
            &alice_config,
            &["arbiter", "why", "second", "-n", "team-a"],
            &["LocalQueueStopped"],
        )
        .await;
    assert!(
        why.contains("kubectl arbiter resume localqueue research -n team-a"),
        "{why}"
    );
    kubectl
        .ok(
            &alice_config,
            &["arbiter", "resume", "lq", "research", "-n", "team-a"],
        )
        .await;
    assert_eq!(
        stop_policy(&queues.get("research").await.unwrap()).as_deref(),
        Some("None")
    );

    // The platform engineer holds the ClusterQueue, keeping what runs.
    let held = kubectl
        .ok(
            &admin_config,
            &[
                "arbiter",
                "stop",
                "clusterqueue",
                "research",
                "--keep-already-running",
            ],
        )
        .await;
    assert!(held.contains("stopped (stopPolicy Hold)"), "{held}");
    let list = kubectl
        .until(
            &admin_config,
            &["arbiter", "list", "workloads", "-n", "team-a"],
            &["ClusterQueueStopped"],
        )
        .await;
    assert_eq!(row(&list, "job-big")[4], "Admitted", "{list}");
    let queues_table = kubectl
        .ok(&admin_config, &["arbiter", "list", "clusterqueues"])
        .await;
    assert_eq!(row(&queues_table, "research")[5], "Hold", "{queues_table}");
    kubectl
        .ok(&admin_config, &["arbiter", "resume", "cq", "research"])
        .await;

    // Quota frees: both waiting workloads are admitted, and the lists say so.
    jobs.delete("big", &DeleteParams::background())
        .await
        .unwrap();
    kubectl
        .until(
            &admin_config,
            &[
                "arbiter",
                "list",
                "workloads",
                "-n",
                "team-a",
                "--status",
                "admitted",
            ],
            &["job-second", "job-third"],
        )
        .await;
    let pending = kubectl
        .run(
            &admin_config,
            &[
                "arbiter",
                "list",
                "workloads",
                "-n",
                "team-a",
                "--status",
                "pending",
            ],
        )
        .await;
    assert_eq!(pending.stdout, "");
    assert!(
        pending
            .stderr
            .contains("No workloads found in namespace team-a"),
        "{}",
        pending.stderr
    );
}
