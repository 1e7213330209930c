//! `arbiter simulate` as a user runs it: bad input gets exit code 1 and a
//! message naming the file and the field (never a panic or a backtrace),
//! usage errors get 2, and the happy path prints the docs/design.md §6 report, the
//! plot and runs unmodified Kueue manifests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn arbiter() -> Command {
    let mut cmd = Command::cargo_bin("arbiter").unwrap_or_else(|e| panic!("arbiter binary: {e}"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// A valid cluster: one flavor, one ClusterQueue, one LocalQueue.
const CLUSTER: &str = r#"apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
spec:
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: "32"}
      - {name: nvidia.com/gpu, nominalQuota: "8"}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: team, namespace: ml}
spec: {clusterQueue: ml}
"#;

fn job(name: &str, annotations: &str, requests: &str) -> String {
    format!(
        r#"---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: ml
  labels: {{arbiter.dev/queue-name: team}}
  annotations: {{{annotations}}}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {{requests: {{{requests}}}}}
"#
    )
}

/// Runs `simulate` on `files` (name, text) in a fresh directory and checks
/// the failure: exit 1, the file and every `expected` fragment on stderr,
/// nothing that looks like a panic. Returns stderr.
fn fails_with(files: &[(&str, &str)], expected: &[&str]) -> String {
    fails_with_args(&[], files, expected)
}

/// [`fails_with`] with `args` after `simulate` (`--strict`).
fn fails_with_args(args: &[&str], files: &[(&str, &str)], expected: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for (name, text) in files {
        write(dir.path(), name, text);
    }
    let output = arbiter()
        .arg("simulate")
        .args(args)
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains("panicked").not())
        .stderr(predicate::str::contains("RUST_BACKTRACE").not())
        .stderr(predicate::str::contains("stack backtrace").not())
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    // The warnings found on the way, then the error (nothing else first).
    let error_line = stderr.lines().position(|l| l.starts_with("error: "));
    assert!(error_line.is_some(), "no `error: ` line:\n{stderr}");
    assert!(
        stderr
            .lines()
            .take(error_line.unwrap_or(0))
            .all(|l| l.starts_with("warning: ")),
        "only warnings may come before the error:\n{stderr}"
    );
    let named = files
        .iter()
        .any(|(name, _)| stderr.contains(&dir.path().join(name).display().to_string()));
    assert!(named, "stderr does not name the file:\n{stderr}");
    for fragment in expected {
        assert!(
            stderr.contains(fragment),
            "stderr lacks {fragment:?}:\n{stderr}"
        );
    }
    stderr
}

#[test]
fn malformed_yaml() {
    fails_with(
        &[(
            "cluster.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: [a\n",
        )],
        &["(document 1), line ", "malformed YAML"],
    );
}

/// `.nan` used to read as "no weight" and the default 1 was used, silently.
#[test]
fn a_nan_or_infinite_weight_names_the_object_the_field_and_the_value() {
    for (value, shown) in [(".nan", ".nan"), (".inf", ".inf"), ("-.INF", "-.inf")] {
        let text = CLUSTER.replace(
            "metadata: {name: ml}\nspec:\n",
            &format!("metadata: {{name: ml}}\nspec:\n  fairSharing: {{weight: {value}}}\n"),
        );
        fails_with(
            &[("cluster.yaml", &text)],
            &[
                "(document 2), line 9 column 25: ClusterQueue ml: ",
                &format!("spec.fairSharing.weight: {shown} is not a finite number"),
            ],
        );
    }
    let class = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: 100\nweight: .nan\n";
    fails_with(
        &[("cluster.yaml", CLUSTER), ("classes.yaml", class)],
        &["WorkloadPriorityClass high: weight: .nan is not a finite number"],
    );
}

/// A kind no integration reads, carrying a queue-name label (so meant to be
/// queued: a misspelt job kind, a kind without its JobIntegration), or in
/// Arbiter's or Kueue's API, is an error.
#[test]
fn unknown_kind() {
    for (api_version, kind, labels) in [
        (
            "example.com/v1",
            "Gizmo",
            "labels: {arbiter.dev/queue-name: team}",
        ),
        (
            "kubeflow.org/v1",
            "PytorchJob",
            "labels: {kueue.x-k8s.io/queue-name: team}",
        ),
        ("arbiter.dev/v1alpha1", "LocalQeue", "namespace: ml"),
        ("kueue.x-k8s.io/v1beta1", "ClusterQeue", "labels: {}"),
    ] {
        let text = format!(
            "{CLUSTER}---\napiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: g, {labels}}}\n"
        );
        fails_with(
            &[("cluster.yaml", &text)],
            &[
                "(document 4)",
                &format!("unknown kind {kind} (apiVersion {api_version})"),
            ],
        );
    }
}

/// Another API's object that nothing queues (the article's ServiceMonitor,
/// a Role) is no part of a scenario: skipped, with a warning (an error with
/// `--strict`). So is an admission check, which the simulator does not run.
#[test]
fn an_object_of_another_api_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let text = format!(
        "{CLUSTER}---\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {{name: kueue-monitor, namespace: kueue-system}}\n\
         ---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata: {{name: prov}}\n"
    );
    write(dir.path(), "cluster.yaml", &text);
    let monitor = "(document 4): monitoring.coreos.com/v1 ServiceMonitor kueue-system/kueue-monitor is not a scenario object (no queue, quota or job kind Arbiter knows, and no queue-name label); ignored";
    let check = "(document 5): kueue.x-k8s.io/v1beta1 AdmissionCheck prov: the simulator runs no admission checks (the operator runs MultiKueue's, `arbiter run --multicluster`); ignored";
    arbiter()
        .arg("simulate")
        .arg(dir.path())
        .assert()
        .success()
        .stderr(predicate::str::contains(monitor))
        .stderr(predicate::str::contains(check));
    arbiter()
        .args(["simulate", "--strict"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains(monitor))
        .stderr(predicate::str::contains(
            "error: 2 warning(s) and --strict is set",
        ));
}

/// An empty scenario used to run, exit 0 and report nothing.
#[test]
fn an_empty_scenario_is_refused_saying_so() {
    for text in ["", "# nothing here yet\n---\n"] {
        let stderr = fails_with(
            &[("scenario.yaml", text)],
            &["scenario.yaml: holds no documents", "nothing to simulate"],
        );
        assert!(!stderr.contains("warning: "), "{stderr}");
    }
}

/// A scenario of objects Arbiter does not simulate (the article's
/// ServiceMonitor, Role and RoleBinding) used to run, exit 0 and report nothing.
#[test]
fn a_scenario_of_only_objects_arbiter_does_not_simulate_is_refused_saying_so() {
    let text = "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: kueue-monitor, namespace: kueue-system}\n\
                ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: queue-manager, namespace: kubeflow}\n\
                ---\napiVersion: v1\nkind: Namespace\nmetadata: {name: kubeflow}\n";
    let stderr = fails_with(
        &[("monitoring.yaml", text)],
        &[
            "monitoring.yaml: holds no object Arbiter simulates (3 document(s)",
            "nothing to simulate",
            "warning: ",
            "(document 1): monitoring.coreos.com/v1 ServiceMonitor kueue-system/kueue-monitor is not a scenario object",
            "(document 2): rbac.authorization.k8s.io/v1 Role kubeflow/queue-manager is not a scenario object",
        ],
    );
    assert_eq!(stderr.matches("error: ").count(), 1, "{stderr}");
}

/// The warnings about the input (an unknown field, here a typo for
/// `nominalQuota`) may be why it does not build: they are printed with the
/// error. They used to be dropped.
#[test]
fn warnings_are_printed_when_the_scenario_does_not_build() {
    let text = CLUSTER
        .replace(
            r#"{name: nvidia.com/gpu, nominalQuota: "8"}"#,
            r#"{name: nvidia.com/gpu, nominalQuota: "8", borowingLimit: "4"}"#,
        )
        .replace("spec: {clusterQueue: ml}", "spec: {clusterQueue: mll}");
    let stderr = fails_with_args(
        &["--strict"],
        &[("cluster.yaml", &text)],
        &[
            "ClusterQueue `mll` is not defined",
            "warning: ",
            "(document 2)",
            "borowingLimit",
        ],
    );
    let warning = stderr
        .lines()
        .find(|l| l.contains("borowingLimit"))
        .unwrap_or_default();
    assert!(warning.starts_with("warning: "), "{stderr}");
}

/// The report's JSON for `files`, run with `simulate --format json`.
fn report_of(files: &[(&str, &str)]) -> Value {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for (name, text) in files {
        write(dir.path(), name, text);
    }
    let output = arbiter()
        .args(["simulate", "--format", "json"])
        .arg(dir.path())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&output).unwrap_or_else(|e| panic!("stdout is not JSON: {e}"))
}

/// Three 8-GPU jobs of 10 minutes on 8 GPUs, one after the other, and the
/// run stopped at 25 minutes: three were admitted at some point, two
/// finished, one runs at the end. `admitted` used to count only those
/// running at the end (1 here; 0 after a run where every job finished).
#[test]
fn the_report_tells_ever_admitted_from_running_at_the_end() {
    let mut jobs = String::new();
    for name in ["a", "b", "c"] {
        jobs.push_str(&job(
            name,
            "sim.arbiter.dev/runtime: 10m",
            "nvidia.com/gpu: \"8\"",
        ));
    }
    let until = "apiVersion: sim.arbiter.dev/v1alpha1\nkind: Simulation\nmetadata: {name: s}\nspec: {until: 25m}\n";
    let report = report_of(&[
        ("cluster.yaml", CLUSTER),
        ("jobs.yaml", &jobs),
        ("sim.yaml", until),
    ]);
    let summary = &report["summary"];
    let counts = |names: &[&str]| -> Vec<u64> {
        names
            .iter()
            .map(|n| summary[n].as_u64().unwrap_or(u64::MAX))
            .collect()
    };
    assert_eq!(
        counts(&[
            "workloads",
            "admitted",
            "runningAtEnd",
            "finished",
            "pendingAtEnd"
        ]),
        [3, 3, 1, 2, 0],
        "{summary}"
    );
    assert_eq!(report["byClusterQueue"]["ml"]["admitted"], 3);

    // Without `until` all three finish: every one was admitted, none runs.
    let report = report_of(&[("cluster.yaml", CLUSTER), ("jobs.yaml", &jobs)]);
    let summary = &report["summary"];
    assert_eq!(
        (
            summary["admitted"].as_u64(),
            summary["runningAtEnd"].as_u64(),
            summary["finished"].as_u64()
        ),
        (Some(3), Some(0), Some(3)),
        "{summary}"
    );
}

/// A job asking for more GPUs than its ClusterQueue could ever give and one
/// naming a LocalQueue that does not exist wait until the end of the run:
/// they used to count in the wait statistics (max 1200 s here). They are
/// counted apart, as `inadmissible`; the waits are those of the two that ran.
#[test]
fn workloads_that_can_never_be_admitted_are_counted_apart_from_the_waits() {
    let mut jobs = String::new();
    for name in ["first", "second"] {
        jobs.push_str(&job(
            name,
            "sim.arbiter.dev/runtime: 10m",
            "nvidia.com/gpu: \"8\"",
        ));
    }
    jobs.push_str(&job(
        "huge",
        "sim.arbiter.dev/runtime: 10m",
        "nvidia.com/gpu: \"16\"",
    ));
    jobs.push_str(
        &job(
            "lost",
            "sim.arbiter.dev/runtime: 10m",
            "nvidia.com/gpu: \"1\"",
        )
        .replace(
            "arbiter.dev/queue-name: team",
            "arbiter.dev/queue-name: teem",
        ),
    );
    let report = report_of(&[("cluster.yaml", CLUSTER), ("jobs.yaml", &jobs)]);
    let summary = &report["summary"];
    assert_eq!(summary["endSeconds"], 1200.0, "{summary}");
    assert_eq!(
        (
            summary["pendingAtEnd"].as_u64(),
            summary["inadmissible"].as_u64()
        ),
        (Some(2), Some(2)),
        "{summary}"
    );
    for (field, seconds) in [
        ("meanWaitSeconds", 300.0),
        ("p50WaitSeconds", 0.0),
        ("maxWaitSeconds", 600.0),
    ] {
        assert_eq!(summary[field], seconds, "{field}: {summary}");
    }
    let ml = &report["byClusterQueue"]["ml"];
    assert_eq!(
        (ml["pendingAtEnd"].as_u64(), ml["inadmissible"].as_u64()),
        (Some(1), Some(1)),
        "{ml}"
    );
    assert_eq!(ml["meanWaitSeconds"], 300.0, "{ml}");
    // Each workload still says how long it waited.
    let huge = report["workloads"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == "huge"))
        .unwrap_or_else(|| panic!("no workload huge"));
    assert_eq!(huge["waitSeconds"], 1200.0);
}

#[test]
fn negative_quota() {
    let text = CLUSTER.replace(r#"nominalQuota: "8""#, r#"nominalQuota: "-8""#);
    fails_with_args(
        &["--strict"],
        &[("cluster.yaml", &text)],
        &[
            "(document 2)",
            "ClusterQueue ml",
            "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota",
            "negative",
        ],
    );
}

#[test]
fn unknown_flavor() {
    let text = CLUSTER.replace("    - name: a100\n", "    - name: h100\n");
    fails_with_args(
        &["--strict"],
        &[("cluster.yaml", &text)],
        &[
            "(document 2)",
            "spec.resourceGroups[0].flavors[0].name",
            "ResourceFlavor `h100` is not defined",
        ],
    );
}

#[test]
fn cohort_cycle() {
    let text = format!(
        "{CLUSTER}---\napiVersion: arbiter.dev/v1alpha1\nkind: Cohort\nmetadata: {{name: a}}\nspec: {{parent: b}}\n---\napiVersion: arbiter.dev/v1alpha1\nkind: Cohort\nmetadata: {{name: b}}\nspec: {{parent: a}}\n"
    );
    fails_with_args(
        &["--strict"],
        &[("cluster.yaml", &text)],
        &["(document 4)", "Cohort a", "spec.parent", "cycle"],
    );
}

#[test]
fn local_queue_pointing_at_a_missing_cluster_queue() {
    let text = CLUSTER.replace("spec: {clusterQueue: ml}", "spec: {clusterQueue: mll}");
    fails_with_args(
        &["--strict"],
        &[("cluster.yaml", &text)],
        &[
            "(document 3)",
            "LocalQueue ml/team",
            "spec.clusterQueue",
            "ClusterQueue `mll` is not defined",
        ],
    );
}

#[test]
fn bad_duration_annotation() {
    let jobs = job(
        "train",
        "sim.arbiter.dev/arrival: 0s, sim.arbiter.dev/runtime: ten minutes",
        "nvidia.com/gpu: \"1\"",
    );
    fails_with(
        &[("cluster.yaml", CLUSTER), ("jobs.yaml", &jobs)],
        &[
            "jobs.yaml (document 1)",
            "Job ml/train",
            "annotation sim.arbiter.dev/runtime",
        ],
    );
}

#[test]
fn a_resource_no_flavor_covers_is_a_warning_and_an_error_with_strict() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(dir.path(), "cluster.yaml", CLUSTER);
    write(
        dir.path(),
        "jobs.yaml",
        &job(
            "fpga-job",
            "sim.arbiter.dev/runtime: 10m",
            "example.com/fpga: \"1\"",
        ),
    );
    let warning = "warning: Job ml/fpga-job can never be admitted: pod set main requests example.com/fpga, which ClusterQueue ml does not cover";
    arbiter()
        .arg("simulate")
        .arg(dir.path())
        .assert()
        .code(0)
        .stderr(predicate::str::contains(warning))
        .stderr(predicate::str::contains("panicked").not());
    arbiter()
        .args(["simulate", "--strict"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains(warning))
        .stderr(predicate::str::contains(
            "error: 1 warning(s) and --strict is set",
        ))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn missing_file() {
    arbiter()
        .args(["simulate", "no/such/scenario.yaml"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "error: cannot read no/such/scenario.yaml",
        ))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn no_arguments_is_a_usage_error() {
    arbiter()
        .arg("simulate")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("FILE_OR_DIR"));
    arbiter().assert().code(2);
    arbiter()
        .args(["simulate", "examples/seed", "--format", "yaml"])
        .assert()
        .code(2);
}

fn fields(value: &Value, names: &[&str], at: &str) {
    for name in names {
        assert!(value.get(name).is_some(), "{at} lacks `{name}`: {value}");
    }
}

#[test]
fn seed_as_json_has_the_report_fields() {
    let output = arbiter()
        .args(["simulate", "examples/seed/", "--format", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let report: Value =
        serde_json::from_slice(&output).unwrap_or_else(|e| panic!("stdout is not JSON: {e}"));
    fields(
        &report,
        &[
            "summary",
            "byClusterQueue",
            "byFlavor",
            "workloads",
            "scheduler",
        ],
        "report",
    );
    fields(
        &report["summary"],
        &[
            "workloads",
            "admitted",
            "runningAtEnd",
            "finished",
            "pendingAtEnd",
            "inadmissible",
            "rejected",
            "preemptions",
            "makespanSeconds",
            "meanWaitSeconds",
            "p50WaitSeconds",
            "p95WaitSeconds",
            "maxWaitSeconds",
            "jainFairnessIndex",
        ],
        "summary",
    );
    let by_cq = report["byClusterQueue"]
        .as_object()
        .unwrap_or_else(|| panic!("byClusterQueue is not an object"));
    assert_eq!(
        by_cq.keys().collect::<Vec<_>>(),
        ["ai-cluster-queue", "finance-cluster-queue"]
    );
    for (name, cq) in by_cq {
        fields(
            cq,
            &["admitted", "meanWaitSeconds", "meanUsage", "inadmissible"],
            name,
        );
    }
    let by_flavor = report["byFlavor"]
        .as_object()
        .unwrap_or_else(|| panic!("byFlavor is not an object"));
    assert_eq!(
        by_flavor.keys().collect::<Vec<_>>(),
        ["a100", "a100-80gb", "v100"]
    );
    for (name, flavor) in by_flavor {
        fields(flavor, &["utilization", "peakNodes"], name);
    }
    let workloads = report["workloads"]
        .as_array()
        .unwrap_or_else(|| panic!("workloads is not a list"));
    assert_eq!(
        Some(workloads.len() as u64),
        report["summary"]["workloads"].as_u64()
    );
    for w in workloads {
        fields(
            w,
            &[
                "kind",
                "namespace",
                "name",
                "clusterQueue",
                "priority",
                "arrivalSeconds",
                "admittedSeconds",
                "finishedSeconds",
                "waitSeconds",
                "flavors",
                "evictions",
                "state",
                "reason",
                "history",
            ],
            "workload",
        );
        let state = w["state"].as_str().unwrap_or_default();
        assert!(
            ["pending", "admitted", "finished", "rejected"].contains(&state),
            "state {state}"
        );
        for h in w["history"].as_array().into_iter().flatten() {
            fields(h, &["atSeconds", "event", "reason"], "history entry");
        }
    }
    assert_eq!(workloads[0]["name"], "llm-finetune");
    assert_eq!(workloads[0]["kind"], "PyTorchJob");
    fields(&report["scheduler"], &["cycles", "cpuSeconds"], "scheduler");
}

#[test]
fn plot_and_report_files_are_written() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let svg = dir.path().join("out.svg");
    let json = dir.path().join("report.json");
    arbiter()
        .args(["simulate", "examples/seed/", "--reproducible", "--plot"])
        .arg(&svg)
        .arg("--report")
        .arg(&json)
        .assert()
        .success();
    let svg = std::fs::read_to_string(&svg).unwrap_or_else(|e| panic!("no plot: {e}"));
    assert!(
        svg.contains("<svg"),
        "not an SVG: {}",
        &svg[..svg.len().min(200)]
    );
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("no report: {e}")),
    )
    .unwrap_or_else(|e| panic!("report is not JSON: {e}"));
    assert_eq!(report["scheduler"]["cpuSeconds"], 0.0);
}

/// Warnings for the Kueue example may only be about Kueue features Arbiter does not support.
fn only_unsupported_kueue_warnings(stderr: &str) {
    for line in stderr.lines() {
        assert!(
            line.starts_with("warning: ")
                && line.contains("a Kueue feature not supported by Arbiter"),
            "unexpected stderr line: {line}"
        );
    }
}

#[test]
fn kueue_v1beta1_example_simulates() {
    let output = arbiter()
        .args([
            "simulate",
            "examples/kueue-v1beta1/",
            "--format",
            "json",
            "--reproducible",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    only_unsupported_kueue_warnings(&String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON: {e}"));
    let summary = &report["summary"];
    assert!(summary["workloads"].as_u64() >= Some(6), "{summary}");
    assert!(summary["finished"].as_u64() >= Some(1), "{summary}");
    assert_eq!(summary["rejected"], 0, "{summary}");
    assert!(
        report["byClusterQueue"].get("team-a-cq").is_some()
            && report["byClusterQueue"].get("team-b-cq").is_some(),
        "{}",
        report["byClusterQueue"]
    );
    // Priority comes from the kueue.x-k8s.io/priority-class label.
    let workloads = report["workloads"].as_array().cloned().unwrap_or_default();
    assert!(
        workloads.iter().any(|w| w["priority"] == 10000),
        "no workload has the high-priority class's value"
    );
    // Borrowing across the cohort happens: some admission says so.
    assert!(
        workloads.iter().any(|w| w["history"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|h| h["reason"]
                .as_str()
                .is_some_and(|r| r.contains("borrowing")))),
        "no workload borrowed from the cohort"
    );
}

#[test]
fn kueue_v1beta1_example_converts() {
    let output = arbiter()
        .args(["convert", "examples/kueue-v1beta1/"])
        .assert()
        .success()
        .get_output()
        .clone();
    let yaml = String::from_utf8(output.stdout).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let converted = write(dir.path(), "converted.yaml", &yaml);
    let loaded = arbiter_sim::files::load_paths(&[converted])
        .unwrap_or_else(|e| panic!("converted output does not load: {e}\n{yaml}"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert!(
        yaml.contains("apiVersion: arbiter.dev/v1alpha1")
            && !yaml.contains("kueue.x-k8s.io/v1beta1"),
        "{yaml}"
    );
}

/// `simulate` on `path`: exit 1 and `expected` on stderr, nothing that looks like a panic.
fn refuses(path: &Path, expected: &str) {
    arbiter()
        .arg("simulate")
        .arg(path)
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with("error: "))
        .stderr(predicate::str::contains(expected))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn a_device_as_the_scenario_is_refused_without_reading_it() {
    refuses(
        Path::new("/dev/zero"),
        "/dev/zero: is a character device, not a regular file; pass manifest files or directories of them",
    );
}

#[test]
fn a_scenario_file_over_64_mib_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("big.yaml");
    std::fs::File::create(&file)
        .and_then(|f| f.set_len((64 << 20) + 1))
        .unwrap_or_else(|e| panic!("{e}"));
    refuses(
        &file,
        &format!(
            "{}: is 67108865 bytes, over the cap of 67108864 bytes for a manifest file; split it into several files in a directory",
            file.display()
        ),
    );
}

/// `examples/shared-gpu`: pools hold `example.com/gpu-milli` per card. The
/// report names each workload's node and cards (a share one card, two
/// GPUs two), and byFlavor gives the device's allocation and
/// fragmentation; a placement policy (FGD, in WebAssembly) places every
/// pod through the hook.
#[test]
fn shared_gpus_report_nodes_cards_allocation_and_fragmentation() {
    for policies in [None, Some("policies/placement-fgd")] {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report.json");
        let mut cmd = arbiter();
        cmd.args(["simulate", "examples/shared-gpu", "--report"])
            .arg(&report);
        if let Some(p) = policies {
            cmd.args(["--policies", p]);
        }
        cmd.assert().success();
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let device = &r["byFlavor"]["t4"]["device"];
        assert_eq!(device["resource"], "example.com/gpu-milli", "{policies:?}");
        let allocation = device["allocation"].as_f64().unwrap();
        let fragmentation = device["fragmentation"].as_f64().unwrap();
        assert!(allocation > 0.3 && allocation < 1.0, "{allocation}");
        assert!(
            fragmentation > 0.0 && fragmentation + allocation <= 1.0,
            "{fragmentation}"
        );
        let workloads = r["workloads"].as_array().unwrap();
        let mut checked = 0;
        for w in workloads.iter().filter(|w| !w["admittedSeconds"].is_null()) {
            let placement = w["placement"].as_array().unwrap();
            assert_eq!(placement.len(), 1, "{w}");
            let cards = placement[0]["cards"]["example.com/gpu-milli"]
                .as_array()
                .unwrap();
            let name = w["name"].as_str().unwrap();
            let expected = if name.starts_with("two-gpu") { 2 } else { 1 };
            assert_eq!(cards.len(), expected, "{name}: {cards:?}");
            assert!(placement[0]["node"].as_str().unwrap().starts_with("t4-"));
            checked += 1;
        }
        assert_eq!(checked, 210, "{policies:?}");
        if policies.is_some() {
            assert_eq!(
                r["policies"]["evaluations"], 210,
                "one placement call per pod"
            );
        }
    }
}

/// Two GPU models as a user models them: one ResourceFlavor per model,
/// node pools declaring their cards, one ClusterQueue listing `t4` first.
/// Without a policy a pod goes to the first listed flavor with room;
/// with a placement bundle and no flavor policy, to the flavor whose node
/// placement prefers (BestFit: the fuller `a10` node), not the first listed.
#[test]
fn a_placement_bundle_chooses_the_gpu_model_with_no_flavor_policy() {
    let scenario = r#"apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: t4}
spec: {nodeLabels: {gpu.model: t4}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: a10}
spec: {nodeLabels: {gpu.model: a10}}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: ml}
spec:
  resourceGroups:
  - coveredResources: [cpu, example.com/gpu-milli]
    flavors:
    - name: t4
      resources:
      - {name: cpu, nominalQuota: "128"}
      - {name: example.com/gpu-milli, nominalQuota: "8000"}
    - name: a10
      resources:
      - {name: cpu, nominalQuota: "16"}
      - {name: example.com/gpu-milli, nominalQuota: "1000"}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: team, namespace: ml}
spec: {clusterQueue: ml}
---
apiVersion: sim.arbiter.dev/v1alpha1
kind: Simulation
metadata: {name: two-models}
spec:
  until: 1h
  nodePools:
  - flavor: t4
    nodes: 1
    allocatable: {cpu: "128", example.com/gpu-milli: "8000"}
    devices:
      example.com/gpu-milli: {cards: 8}
  - flavor: a10
    nodes: 1
    allocatable: {cpu: "16", example.com/gpu-milli: "1000"}
    devices:
      example.com/gpu-milli: {cards: 1}
"#;
    let jobs = job(
        "half",
        "sim.arbiter.dev/runtime: 10m",
        "cpu: \"4\", example.com/gpu-milli: \"500\"",
    );
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "cluster.yaml", scenario);
    write(dir.path(), "jobs.yaml", &jobs);
    let node_of = |policies: Option<&str>| {
        let mut cmd = arbiter();
        cmd.args(["simulate", "--format", "json"]).arg(dir.path());
        if let Some(p) = policies {
            cmd.args(["--policies", p]);
        }
        let output = cmd.assert().success().get_output().stdout.clone();
        let report: Value = serde_json::from_slice(&output).unwrap();
        let half = &report["workloads"][0];
        assert_eq!(half["name"], "half", "{report:#}");
        half["placement"][0]["node"]
            .as_str()
            .unwrap_or_else(|| panic!("half is placed: {report:#}"))
            .to_string()
    };
    assert!(node_of(None).starts_with("t4-"));
    let placed = node_of(Some("policies/placement-bestfit"));
    assert!(placed.starts_with("a10-"), "{placed}");
}

/// Without `--strict` a broken queue object is left out, as the operator
/// leaves it out, and the rest is simulated: a ClusterQueue naming a flavor
/// that does not exist (and its LocalQueue) beside the valid `ml`; `ml`'s
/// job is admitted, the broken queue's job waits, told why, and both
/// objects are named in the warnings. `--strict` refuses the same files
/// (`unknown_flavor`).
#[test]
fn a_broken_queue_object_is_left_out_and_the_rest_is_simulated() {
    let broken = r#"---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: h100s}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: "8"}]
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: h100s, namespace: ml}
spec: {clusterQueue: h100s}
"#;
    let mut jobs = job(
        "good",
        "sim.arbiter.dev/runtime: 10m",
        "nvidia.com/gpu: \"8\"",
    );
    jobs.push_str(
        &job(
            "stranded",
            "sim.arbiter.dev/runtime: 10m",
            "nvidia.com/gpu: \"8\"",
        )
        .replace(
            "arbiter.dev/queue-name: team",
            "arbiter.dev/queue-name: h100s",
        ),
    );
    let cluster = format!("{CLUSTER}{broken}");
    let report = report_of(&[("cluster.yaml", &cluster), ("jobs.yaml", &jobs)]);
    let workloads = report["workloads"].as_array().unwrap();
    let of = |name: &str| {
        workloads
            .iter()
            .find(|w| w["name"] == name)
            .unwrap_or_else(|| panic!("no workload {name}: {report:#}"))
    };
    assert!(of("good")["admittedSeconds"].is_number(), "{report:#}");
    assert!(of("stranded")["admittedSeconds"].is_null(), "{report:#}");
    let reason = of("stranded")["reason"].as_str().unwrap();
    assert!(
        reason.contains("LocalQueue ml/h100s is inactive (ClusterQueueIsInactive)"),
        "{reason}"
    );
    let warnings: Vec<&str> = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains("(document 4): ClusterQueue h100s is inactive (FlavorNotFound): spec.resourceGroups[0].flavors[0].name: ResourceFlavor `h100` is not defined")),
        "{warnings:#?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("LocalQueue ml/h100s is inactive (ClusterQueueIsInactive)")),
        "{warnings:#?}"
    );
}

/// A placement policy ranks topology domains through the nodes' topology
/// labels: on Kueue's TAS fixture (`tests/scenarios/tas-required`), a
/// policy preferring host x4 (tas-5), then block b2, moves the one-pod
/// rack and block requests there from BestFit's domains, and cannot move
/// a pod set into a domain that does not hold it (three pods still go to
/// the only rack holding three).
#[test]
fn a_placement_policy_ranks_topology_domains_by_node_labels() {
    let placed = |policies: Option<&str>| -> BTreeMap<String, Vec<String>> {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report.json");
        let mut cmd = arbiter();
        cmd.args(["simulate", "tests/scenarios/tas-required", "--report"])
            .arg(&report);
        if let Some(p) = policies {
            cmd.args(["--policies", p]);
        }
        cmd.assert().success();
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        r["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                let mut nodes: Vec<String> = w["placement"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|p| {
                        let pods = p["pods"].as_u64().unwrap() as usize;
                        std::iter::repeat_n(p["node"].as_str().unwrap().to_string(), pods)
                    })
                    .collect();
                nodes.sort();
                (w["name"].as_str().unwrap().to_string(), nodes)
            })
            .collect()
    };
    let best_fit = placed(None);
    let ranked = placed(Some("tests/data/policies/prefer-host-x4"));
    assert_eq!(best_fit["rack-1"], ["tas-0"]);
    assert_eq!(ranked["rack-1"], ["tas-5"]);
    assert_eq!(best_fit["block-1"], ["tas-4"]);
    assert_eq!(ranked["block-1"], ["tas-5"]);
    for same in ["rack-3", "rack-2", "block-4"] {
        assert_eq!(best_fit[same], ranked[same], "{same}");
    }
    assert_eq!(ranked["rack-3"], ["tas-1", "tas-2", "tas-3"]);
}
