//! `arbiter run --shadow` as a command: its flags parse and refuse what
//! makes no sense with it, and started where no Kueue is installed it
//! exits with an error that says so (the shadow compares with Kueue's
//! Workloads; the comparison itself is `crates/operator/tests/shadow.rs`).

use std::process::Command;

use arbiter_testcluster::TestCluster;

/// `arbiter ARGS`: whether it succeeded, and its stderr.
fn arbiter(args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(args)
        .env("ARBITER_LOG", "warn")
        .output()
        .unwrap_or_else(|e| panic!("running arbiter: {e}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_shadow_flags_parse_and_refuse_what_shadow_mode_cannot_do() {
    let (ok, _) = arbiter(&[
        "run",
        "--shadow",
        "--shadow-report",
        "/tmp/report.json",
        "--shadow-tolerance",
        "10",
        "--help",
    ]);
    assert!(ok, "the shadow flags parse");
    let (ok, error) = arbiter(&["run", "--shadow-report", "/tmp/report.json"]);
    assert!(!ok);
    assert!(error.contains("--shadow"), "{error}");
    let (ok, error) = arbiter(&["run", "--shadow", "--leader-election"]);
    assert!(!ok);
    assert!(error.contains("cannot be used with"), "{error}");
}

#[tokio::test]
async fn shadow_mode_without_kueue_says_kueue_is_missing() {
    let cluster = TestCluster::start()
        .await
        .unwrap_or_else(|e| panic!("the test cluster did not start: {e}"));
    let token = cluster.token("admin").unwrap().to_string();
    let kubeconfig = cluster.write_kubeconfig("shadow", &token).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap().to_string();
    let (ok, error) = tokio::task::spawn_blocking(move || {
        arbiter(&[
            "run",
            "--shadow",
            "--kubeconfig",
            &kubeconfig,
            "--admin-address",
            "127.0.0.1:0",
            "--no-dashboard",
        ])
    })
    .await
    .unwrap();
    assert!(!ok, "it must not run without Kueue");
    assert!(
        error.contains("starting the shadow mode (--shadow)")
            && error.contains(
                "Kueue's Workload kind (kueue.x-k8s.io v1beta2 or v1beta1) is not served"
            ),
        "{error}"
    );
}
