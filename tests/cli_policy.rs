//! `arbiter policy` and the policy flags of `arbiter simulate`, as a user
//! runs them: the default bundle checks, tests, evaluates and benchmarks; a
//! broken bundle gets exit code 1 and a message naming the file, the policy
//! and the field (never a panic or a backtrace); usage errors get 2; the
//! schemas the command writes are the ones shipped in `plugin-sdk/schema/`;
//! `check --watch` follows a kubelet-mounted ConfigMap through good and bad
//! updates, keeping the last good bundle; the `--metrics` textfiles of
//! `check --watch` and `simulate` count what the output and the report count.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

/// The default bundle's policies, in `bundle.yaml` order.
const DEFAULT_POLICIES: [&str; 7] = [
    "multifactor",
    "shortest-first",
    "adaptive-fair-share",
    "premium-flavor-order",
    "a100-80gb-production-only",
    "dev-gpu-cap",
    "target-utilization",
];

/// The default bundle's tests.
const DEFAULT_TESTS: [&str; 11] = [
    "critical-class-outranks-batch",
    "age-is-capped",
    "shorter-estimate-scores-higher",
    "heavy-user-gets-lower-weight",
    "production-gets-premium-first",
    "research-skips-premium",
    "research-denied-on-a100-80gb",
    "production-allowed-on-a100-80gb",
    "big-dev-job-denied",
    "small-dev-job-allowed",
    "scale-to-target",
];

fn arbiter() -> Command {
    let mut cmd = Command::cargo_bin("arbiter").unwrap_or_else(|e| panic!("arbiter binary: {e}"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

/// `bundle.yaml` of bundle `name` at `version` with `spec` (YAML, indented two spaces).
fn bundle_yaml(name: &str, version: &str, spec: &str) -> String {
    format!(
        "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: {name}, version: \"{version}\"}}\nspec:\n{spec}"
    )
}

/// A small CEL-only bundle: one admission policy capping GPUs at `max`, and its test.
fn gpu_cap_bundle(version: &str, max: u32) -> String {
    bundle_yaml(
        "watched",
        version,
        &format!(
            "  policies:\n  - name: gpu-cap\n    hook: admission\n    cel: {{expression: \"workload.gpus <= {max}\"}}\n  tests:\n  - {{name: small-allowed, policy: gpu-cap, input: {{workload: {{gpus: 1}}}}, expect: {{allowed: true}}}}\n"
        ),
    )
}

/// A bundle whose only policy has a CEL syntax error on the expression's line 2.
fn cel_syntax_error_bundle(version: &str) -> String {
    bundle_yaml(
        "watched",
        version,
        "  policies:\n  - name: broken\n    hook: admission\n    cel:\n      expression: \"workload.gpus <=\\n  (8 +\"\n",
    )
}

/// The stderr of a run that must fail with exit code `code`, checked for
/// the `error: ` prefix (exit 1) and the absence of anything panic-like.
fn failure(cmd: &mut Command, code: i32) -> String {
    let output = cmd
        .assert()
        .code(code)
        .stderr(predicate::str::contains("panicked").not())
        .stderr(predicate::str::contains("RUST_BACKTRACE").not())
        .stderr(predicate::str::contains("stack backtrace").not())
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if code == 1 {
        assert!(stderr.starts_with("error: "), "{stderr}");
    }
    stderr
}

fn assert_contains(text: &str, fragments: &[&str]) {
    for fragment in fragments {
        assert!(text.contains(fragment), "lacks {fragment:?}:\n{text}");
    }
}

/// `policy check` on a directory holding `bundle.yaml` = `text` (and `files`)
/// fails with exit 1; returns stderr, which names the directory.
fn check_fails(text: &str, files: &[(&str, &[u8])]) -> String {
    let dir = tempdir();
    write(dir.path(), "bundle.yaml", text);
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap_or_else(|e| panic!("{e}"));
    }
    let stderr = failure(arbiter().args(["policy", "check"]).arg(dir.path()), 1);
    assert_contains(&stderr, &[&dir.path().display().to_string()]);
    stderr
}

/// One sample of a Prometheus text file.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a Prometheus text file (comments skipped, label values unescaped).
fn samples(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let bad = |why: &str| -> ! { panic!("{why} in the sample line {line:?}") };
        let name_end = line.find(['{', ' ']).unwrap_or_else(|| bad("no value"));
        let mut labels = BTreeMap::new();
        let mut rest = &line[name_end..];
        if let Some(mut inner) = rest.strip_prefix('{') {
            while let Some((key, after)) = inner.split_once("=\"") {
                let mut value = String::new();
                let mut chars = after.char_indices();
                let end = loop {
                    match chars.next() {
                        Some((_, '\\')) => match chars.next() {
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, c)) => value.push(c),
                            None => bad("a dangling escape"),
                        },
                        Some((at, '"')) => break at,
                        Some((_, c)) => value.push(c),
                        None => bad("an unterminated label value"),
                    }
                };
                labels.insert(key.to_string(), value);
                inner = &after[end + 1..];
                match inner.strip_prefix(',') {
                    Some(next) => inner = next,
                    None => break,
                }
            }
            rest = inner
                .strip_prefix('}')
                .unwrap_or_else(|| bad("no closing brace"));
        }
        let value = rest
            .trim()
            .parse()
            .unwrap_or_else(|_| bad("an unparsable value"));
        out.push(Sample {
            name: line[..name_end].to_string(),
            labels,
            value,
        });
    }
    out
}

/// The value of the one sample `name` whose labels include `labels`; `None` if there is none.
fn sample_value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert!(
        found.len() <= 1,
        "several {name} samples with {labels:?}: {found:#?}"
    );
    found.first().map(|s| s.value)
}

#[test]
fn check_default_bundle() {
    arbiter()
        .args(["policy", "check", "policies/"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "ok: bundle platform-default version 2026.11.30 digest ",
        ))
        .stdout(predicate::str::contains(
            "7 policies (6 cel, 1 wasm), 11 tests passed",
        ));
}

#[test]
fn check_cel_syntax_error_names_policy_field_and_line() {
    let stderr = check_fails(&cel_syntax_error_bundle("1"), &[]);
    assert_contains(&stderr, &["policy broken", "cel.expression", "line 2"]);
}

#[test]
fn check_misspelt_field_names_file_and_field() {
    let stderr = check_fails(
        &bundle_yaml(
            "t",
            "1",
            "  policies:\n  - {name: p, hook: admission, failurPolicy: Ignore, cel: {expression: 'true'}}\n",
        ),
        &[],
    );
    assert_contains(&stderr, &["bundle.yaml", "failurPolicy"]);
}

#[test]
fn check_missing_wasm_module_names_the_file() {
    let stderr = check_fails(
        &bundle_yaml(
            "t",
            "1",
            "  policies:\n  - {name: p, hook: weight, wasm: {module: missing.wasm}}\n",
        ),
        &[],
    );
    assert_contains(&stderr, &["missing.wasm", "cannot read"]);
}

const WEIGHT_WAT: &str = r#"(module
  (memory (export "memory") 1)
  (data (i32.const 1024) "{\"scores\":[1]}")
  (func (export "arbiter_abi_version") (result i32) i32.const 1)
  (func (export "arbiter_alloc") (param i32) (result i32) i32.const 4096)
  (func (export "arbiter_weight") (param i32 i32) (result i64) i64.const 4398046511118))"#;

#[test]
fn check_module_without_the_hook_export_names_policy_and_export() {
    let wasm = wat::parse_str(WEIGHT_WAT).unwrap_or_else(|e| panic!("{e}"));
    let stderr = check_fails(
        &bundle_yaml(
            "t",
            "1",
            "  policies:\n  - {name: p, hook: admission, wasm: {module: p.wasm}}\n",
        ),
        &[("p.wasm", &wasm)],
    );
    assert_contains(&stderr, &["policy p", "p.wasm", "arbiter_admission"]);
}

#[test]
fn check_failing_bundle_test_names_the_test() {
    let stderr = check_fails(
        &bundle_yaml(
            "t",
            "1",
            "  policies:\n  - {name: cap, hook: admission, cel: {expression: 'workload.gpus <= 8'}}\n  tests:\n  - {name: big-job-allowed, policy: cap, input: {workload: {gpus: 16}}, expect: {allowed: true}}\n",
        ),
        &[],
    );
    assert_contains(&stderr, &["1 of 1 bundle tests failed", "big-job-allowed"]);
}

#[test]
fn check_missing_directory() {
    let dir = tempdir();
    let missing = dir.path().join("no-such-bundle");
    let stderr = failure(arbiter().args(["policy", "check"]).arg(&missing), 1);
    assert_contains(
        &stderr,
        &[
            &missing.display().to_string(),
            "neither a bundle directory nor a ConfigMap file",
        ],
    );
}

#[test]
fn unknown_hook_is_a_usage_error() {
    let stderr = failure(
        arbiter().args([
            "policy",
            "eval",
            "policies/",
            "--hook",
            "nope",
            "--input",
            "-",
        ]),
        2,
    );
    assert_contains(&stderr, &["unknown hook \"nope\"", "admission"]);
}

#[test]
fn test_default_bundle_passes() {
    let output = arbiter()
        .args(["policy", "test", "policies/"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&output.stdout);
    for name in DEFAULT_TESTS {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("PASS {name} ("))),
            "no PASS line for {name}:\n{stdout}"
        );
    }
    assert!(!stdout.contains("FAIL"), "{stdout}");
    assert_contains(&stdout, &["11 passed, 0 failed, bundle platform-default"]);
}

#[test]
fn test_with_a_failing_test() {
    let dir = tempdir();
    write(
        dir.path(),
        "bundle.yaml",
        &bundle_yaml(
            "t",
            "1",
            "  policies:\n  - {name: cap, hook: admission, cel: {expression: 'workload.gpus <= 8'}}\n  tests:\n  - {name: small-allowed, policy: cap, input: {workload: {gpus: 1}}, expect: {allowed: true}}\n  - {name: big-allowed, policy: cap, input: {workload: {gpus: 16}}, expect: {allowed: true}}\n",
        ),
    );
    let output = arbiter()
        .args(["policy", "test"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains("1 of 2 tests failed"))
        .stderr(predicate::str::contains("panicked").not())
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("PASS small-allowed (cap)")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("FAIL big-allowed (cap)")),
        "{stdout}"
    );
    assert_contains(&stdout, &["1 passed, 1 failed, bundle t"]);
}

/// An admission request for a development Job asking 16 GPUs (2 pods × 8).
const BIG_DEV_JOB: &str = r#"{
  "workload": {
    "name": "train-big",
    "namespace": "development",
    "kind": "Job",
    "queueName": "dev-queue",
    "podSets": [{"name": "main", "count": 2, "requests": {"nvidia.com/gpu": 8}}],
    "requests": {"nvidia.com/gpu": 16},
    "gpus": 16
  }
}"#;

#[test]
fn eval_admission_from_a_file() {
    let dir = tempdir();
    let input = write(dir.path(), "request.json", BIG_DEV_JOB);
    let output = arbiter()
        .args([
            "policy",
            "eval",
            "policies/",
            "--hook",
            "admission",
            "--input",
        ])
        .arg(&input)
        .assert()
        .success()
        .get_output()
        .clone();
    let out = json(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(out["dev-gpu-cap"]["allowed"], Value::Bool(false), "{out:#}");
    assert!(
        out["dev-gpu-cap"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("at most 4 GPUs, got 16")),
        "{out:#}"
    );
    // Every admission policy of the bundle, and no other.
    let names: Vec<&str> = out
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        names,
        ["a100-80gb-production-only", "dev-gpu-cap"],
        "{out:#}"
    );
    assert_eq!(
        out["a100-80gb-production-only"]["allowed"],
        Value::Bool(true),
        "{out:#}"
    );
}

#[test]
fn eval_one_policy_from_stdin() {
    let output = arbiter()
        .args([
            "policy",
            "eval",
            "policies/",
            "--hook",
            "admission",
            "--policy",
            "dev-gpu-cap",
            "--input",
            "-",
        ])
        .write_stdin(BIG_DEV_JOB)
        .assert()
        .success()
        .get_output()
        .clone();
    let out = json(&String::from_utf8_lossy(&output.stdout));
    let names: Vec<&str> = out
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(names, ["dev-gpu-cap"], "{out:#}");
    assert_eq!(out["dev-gpu-cap"]["allowed"], Value::Bool(false), "{out:#}");
}

#[test]
fn eval_a_policy_the_bundle_lacks() {
    let stderr = failure(
        arbiter()
            .args([
                "policy",
                "eval",
                "policies/",
                "--hook",
                "admission",
                "--policy",
                "multifactor",
                "--input",
                "-",
            ])
            .write_stdin(BIG_DEV_JOB),
        1,
    );
    assert_contains(&stderr, &["no admission policy named multifactor"]);
}

#[test]
fn bench_lists_every_policy() {
    let output = arbiter()
        .args(["policy", "bench", "policies/", "--iterations", "50"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&output.stdout);
    for name in DEFAULT_POLICIES {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "no line for {name}:\n{stdout}"
        );
    }
    assert!(!stdout.contains("no tests to take inputs from"), "{stdout}");
}

#[test]
fn schema_writes_the_shipped_schemas() {
    let dir = tempdir();
    let out = dir.path().join("schema");
    arbiter()
        .args(["policy", "schema"])
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::starts_with("wrote 13 schemas to "));
    let names = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| {
                entry
                    .unwrap_or_else(|e| panic!("{e}"))
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    };
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin-sdk/schema");
    let written = names(&out);
    assert_eq!(written.len(), 13, "{written:?}");
    assert_eq!(written, names(&shipped));
    for name in &written {
        let bytes =
            |dir: &Path| std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            bytes(&out) == bytes(&shipped),
            "{name} differs from plugin-sdk/schema/{name}; regenerate with `arbiter policy schema`"
        );
    }
}

#[test]
fn simulate_seed_writes_decisions_and_the_policies_report() {
    let dir = tempdir();
    let decisions = dir.path().join("decisions.jsonl");
    let report = dir.path().join("report.json");
    arbiter()
        .args(["simulate", "examples/seed/", "--decisions"])
        .arg(&decisions)
        .arg("--report")
        .arg(&report)
        .assert()
        .success();
    let log = read(&decisions);
    assert!(
        log.ends_with('\n'),
        "the decision log lacks a final newline"
    );
    let mut hooks = std::collections::BTreeSet::new();
    for (n, line) in log.lines().enumerate() {
        let d: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("decision log line {}: {e}:\n{line}", n + 1));
        for field in ["policy", "hook", "result"] {
            assert!(
                d.get(field).is_some(),
                "line {} lacks {field}: {line}",
                n + 1
            );
        }
        let policy = d["policy"].as_str().unwrap_or_default();
        assert!(DEFAULT_POLICIES.contains(&policy), "line {}: {line}", n + 1);
        hooks.insert(d["hook"].as_str().unwrap_or_default().to_string());
    }
    assert!(!hooks.is_empty(), "the decision log is empty");
    let report = json(&read(&report));
    assert_eq!(
        report["policies"]["bundles"][0]["name"], "platform-default",
        "{:#}",
        report["policies"]
    );
}

#[test]
fn simulate_without_policies() {
    let dir = tempdir();
    let report = dir.path().join("report.json");
    arbiter()
        .args(["simulate", "examples/seed/", "--no-policies", "--report"])
        .arg(&report)
        .assert()
        .success();
    let report = json(&read(&report));
    assert!(
        report.get("policies").is_none_or(Value::is_null),
        "{:#}",
        report["policies"]
    );
}

#[test]
fn simulate_decisions_without_policies() {
    let dir = tempdir();
    let decisions = dir.path().join("decisions.jsonl");
    let stderr = failure(
        arbiter()
            .args(["simulate", "examples/seed/", "--no-policies", "--decisions"])
            .arg(&decisions),
        1,
    );
    assert_contains(&stderr, &["--decisions needs policies"]);
    assert!(!decisions.exists(), "a decision log was written");
}

#[test]
fn simulate_tenant_policies_without_a_namespace() {
    let stderr = failure(
        arbiter().args(["simulate", "examples/seed/", "--tenant-policies", "bad"]),
        2,
    );
    assert_contains(&stderr, &["\"bad\" is not NAMESPACE=DIR"]);
}

#[test]
fn simulate_tenant_bundle_with_a_platform_hook() {
    let dir = tempdir();
    write(
        dir.path(),
        "bundle.yaml",
        &bundle_yaml(
            "greedy",
            "1",
            "  policies:\n  - {name: more-for-me, hook: fairShare, cel: {expression: '100.0'}}\n",
        ),
    );
    let stderr = failure(
        arbiter()
            .args(["simulate", "examples/seed/", "--tenant-policies"])
            .arg(format!("development={}", dir.path().display())),
        1,
    );
    assert_contains(
        &stderr,
        &[
            &dir.path().display().to_string(),
            "policy more-for-me",
            "not allowed in a tenant bundle",
        ],
    );
}

#[test]
fn simulate_tenant_bundle_given_as_platform_policies() {
    let dir = tempdir();
    write(
        dir.path(),
        "bundle.yaml",
        &bundle_yaml(
            "dev",
            "1",
            "  tenant: development\n  policies:\n  - {name: small, hook: admission, cel: {expression: 'workload.gpus <= 2'}}\n",
        ),
    );
    let stderr = failure(
        arbiter()
            .args(["simulate", "examples/seed/", "--policies"])
            .arg(dir.path()),
        1,
    );
    assert_contains(
        &stderr,
        &[
            "tenant bundle of development",
            &format!("--tenant-policies development={}", dir.path().display()),
        ],
    );
}

#[test]
fn simulate_tells_apart_tenant_bundles_that_share_a_name() {
    let dir = tempdir();
    let mut args = vec!["simulate".to_string(), "examples/seed/".to_string()];
    for tenant in ["development", "ai-research"] {
        let bundle = dir.path().join(tenant);
        std::fs::create_dir(&bundle).unwrap_or_else(|e| panic!("{e}"));
        let body = format!(
            "  tenant: {tenant}\n  policies:\n  - {{name: any-size, hook: admission, cel: {{expression: 'workload.gpus >= 0'}}}}\n"
        );
        write(&bundle, "bundle.yaml", &bundle_yaml("team", "1", &body));
        args.push("--tenant-policies".into());
        args.push(format!("{tenant}={}", bundle.display()));
    }
    let report = dir.path().join("report.json");
    arbiter()
        .args(&args)
        .arg("--report")
        .arg(&report)
        .assert()
        .success();
    let report = json(&read(&report));
    let sources: Vec<String> = report["policies"]["byPolicy"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|s| s["bundle"] == "team")
        .map(|s| s["source"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(sources.len(), 2, "{:#}", report["policies"]["byPolicy"]);
    assert_ne!(sources[0], sources[1], "the two entries look identical");
    assert!(
        sources.iter().any(|s| s.ends_with("development"))
            && sources.iter().any(|s| s.ends_with("ai-research")),
        "{sources:?}"
    );
}

/// A tenant bundle calling itself `platform-default` that denies its own
/// workloads on every retry with a long reason full of terminal controls:
/// each denial is one decision-log entry per workload with its repeats
/// counted, naming the tenant and the source, and nothing raw reaches the
/// terminal.
#[test]
fn simulate_counts_a_tenant_denial_retried_all_run_once_and_names_its_source() {
    let dir = tempdir();
    let bundle = dir.path().join("impostor");
    std::fs::create_dir(&bundle).unwrap_or_else(|e| panic!("{e}"));
    let body = format!(
        "  tenant: development\n  policies:\n  - name: nope\n    hook: admission\n    cel:\n      expression: \"false\"\n      messageExpression: \"'\\\\u001b[2J\\\\rforged ' + workload.name + ' {}'\"\n",
        "x".repeat(3000)
    );
    write(
        &bundle,
        "bundle.yaml",
        &bundle_yaml("platform-default", "1", &body),
    );
    let decisions = dir.path().join("decisions.jsonl");
    let report = dir.path().join("report.json");
    let output = arbiter()
        .args(["simulate", "examples/seed/", "--tenant-policies"])
        .arg(format!("development={}", bundle.display()))
        .arg("--decisions")
        .arg(&decisions)
        .arg("--report")
        .arg(&report)
        .assert()
        .success()
        .get_output()
        .clone();
    for (what, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        assert!(
            !bytes.iter().any(|&b| b == 0x1b || b == b'\r'),
            "a raw control character reached {what}"
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_contains(
        &stdout,
        &["\\u{1b}[2J\\rforged ", "tenant development from"],
    );
    let mut seen = std::collections::BTreeSet::new();
    let mut repeats = 0;
    for line in read(&decisions).lines() {
        let d = json(line);
        if d["tenant"].is_null() {
            assert_eq!(d["source"], "policies", "{line}");
            continue;
        }
        assert_eq!(
            (&d["tenant"], &d["source"], &d["bundle"], &d["result"]),
            (
                &Value::from("development"),
                &Value::from(bundle.display().to_string()),
                &Value::from("platform-default"),
                &Value::from("deny")
            ),
            "{line}"
        );
        let workload = d["workload"].as_str().unwrap_or_default().to_string();
        assert!(seen.insert(workload.clone()), "{workload} was logged twice");
        let reason = d["reason"].as_str().unwrap_or_default();
        assert!(
            reason.len() <= 1100,
            "a {}-byte reason was kept",
            reason.len()
        );
        repeats += d["repeats"].as_u64().unwrap_or(0);
    }
    assert!(
        seen.len() >= 2 && repeats >= 10,
        "{seen:?}, {repeats} repeats"
    );
    let report = json(&read(&report));
    assert_eq!(report["policies"]["decisionsDropped"], 0);
}

/// A bundle whose two admission policies fail on every workload (ignored, so
/// the schedule is the default bundle's).
fn failing_admission_bundle() -> String {
    bundle_yaml(
        "flaky",
        "1",
        "  policies:\n  - {name: not-a-verdict, hook: admission, failurePolicy: Ignore, cel: {expression: \"'yes'\"}}\n  - {name: missing-label, hook: admission, failurePolicy: Ignore, cel: {expression: \"workload.labels['no-such-label'] == 'x'\"}}\n",
    )
}

#[test]
fn simulate_metrics_count_what_the_report_counts() {
    let dir = tempdir();
    let flaky = dir.path().join("flaky");
    std::fs::create_dir(&flaky).unwrap_or_else(|e| panic!("{e}"));
    write(&flaky, "bundle.yaml", &failing_admission_bundle());
    let metrics = dir.path().join("policy.prom");
    let report = dir.path().join("report.json");
    arbiter()
        .args([
            "simulate",
            "examples/seed/",
            "--policies",
            "policies",
            "--policies",
        ])
        .arg(&flaky)
        .arg("--metrics")
        .arg(&metrics)
        .arg("--report")
        .arg(&report)
        .assert()
        .success();
    let text = read(&metrics);
    let samples = samples(&text);
    let report = json(&read(&report));
    let policies = &report["policies"];
    let bundles = policies["bundles"].as_array().cloned().unwrap_or_default();
    assert_eq!(bundles.len(), 2, "{policies:#}");
    let mut source_of = BTreeMap::new();
    for b in &bundles {
        let field = |f: &str| b[f].as_str().unwrap_or_default().to_string();
        let labels = [
            ("bundle", field("source")),
            ("name", field("name")),
            ("version", field("version")),
            ("digest", field("digest")),
        ];
        let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(
            sample_value(&samples, "arbiter_policy_bundle_info", &labels),
            Some(1.0),
            "{text}"
        );
        source_of.insert(field("name"), field("source"));
    }
    let by_policy = policies["byPolicy"].as_array().cloned().unwrap_or_default();
    assert_eq!(by_policy.len(), DEFAULT_POLICIES.len() + 2, "{policies:#}");
    let mut errors_seen = 0.0;
    let mut reused_seen = 0.0;
    for stats in &by_policy {
        let field = |f: &str| stats[f].as_str().unwrap_or_default();
        let labels = [
            ("bundle", source_of[field("bundle")].as_str()),
            ("policy", field("policy")),
            ("hook", field("hook")),
        ];
        let evaluations = stats["evaluations"].as_f64();
        assert!(evaluations > Some(0.0), "{stats:#}");
        for name in [
            "arbiter_policy_evaluations_total",
            "arbiter_policy_evaluation_duration_seconds_count",
        ] {
            assert_eq!(
                sample_value(&samples, name, &labels),
                evaluations,
                "{name} {labels:?}:\n{text}"
            );
        }
        assert_eq!(
            sample_value(&samples, "arbiter_policy_reused_total", &labels),
            stats["reused"].as_f64(),
            "{labels:?}:\n{text}"
        );
        reused_seen += stats["reused"].as_f64().unwrap_or_default();
        let errors = stats["errors"].as_object().cloned().unwrap_or_default();
        for (kind, count) in &errors {
            let mut with_kind = labels.to_vec();
            with_kind.push(("kind", kind));
            assert_eq!(
                sample_value(&samples, "arbiter_policy_errors_total", &with_kind),
                count.as_f64(),
                "{with_kind:?}:\n{text}"
            );
            errors_seen += count.as_f64().unwrap_or_default();
        }
        let error_series = samples
            .iter()
            .filter(|s| {
                s.name == "arbiter_policy_errors_total"
                    && labels.iter().all(|(k, v)| s.labels[*k] == *v)
            })
            .count();
        assert_eq!(error_series, errors.len(), "{labels:?}:\n{text}");
    }
    assert_eq!(
        Some(errors_seen),
        policies["errors"].as_f64(),
        "{policies:#}"
    );
    assert!(
        errors_seen > 0.0,
        "the flaky bundle never failed: {policies:#}"
    );
    assert!(
        reused_seen > 0.0,
        "target-utilization never reused an answer: {policies:#}"
    );
    let evaluation_series = samples
        .iter()
        .filter(|s| s.name == "arbiter_policy_evaluations_total")
        .count();
    assert_eq!(evaluation_series, by_policy.len(), "{text}");
}

#[test]
fn simulate_metrics_to_an_unwritable_path_names_the_file() {
    let dir = tempdir();
    let metrics = dir.path().join("no-such-dir").join("policy.prom");
    let stderr = failure(
        arbiter()
            .args(["simulate", "examples/seed/", "--metrics"])
            .arg(&metrics),
        1,
    );
    assert_contains(
        &stderr,
        &[
            "cannot write the metrics file",
            &metrics.display().to_string(),
        ],
    );
}

#[test]
fn simulate_metrics_without_policies() {
    let dir = tempdir();
    let metrics = dir.path().join("policy.prom");
    let stderr = failure(
        arbiter()
            .args(["simulate", "examples/seed/", "--no-policies", "--metrics"])
            .arg(&metrics),
        1,
    );
    assert_contains(&stderr, &["--metrics needs policies"]);
    assert!(!metrics.exists(), "a metrics file was written");
}

#[test]
fn check_metrics_without_watch_is_a_usage_error() {
    let dir = tempdir();
    let stderr = failure(
        arbiter()
            .args(["policy", "check", "policies", "--metrics"])
            .arg(dir.path().join("policy.prom")),
        2,
    );
    assert_contains(&stderr, &["--watch"]);
}

#[test]
fn check_debounce_without_watch_is_a_usage_error() {
    let stderr = failure(
        arbiter().args(["policy", "check", "policies", "--debounce", "200ms"]),
        2,
    );
    assert_contains(&stderr, &["--debounce", "--watch"]);
}

#[test]
fn check_watch_metrics_to_an_unwritable_path_names_the_file() {
    let dir = tempdir();
    let metrics = dir.path().join("no-such-dir").join("policy.prom");
    let stderr = failure(
        arbiter()
            .args(["policy", "check", "policies", "--watch", "--metrics"])
            .arg(&metrics),
        1,
    );
    assert_contains(
        &stderr,
        &[
            "cannot write the metrics file",
            &metrics.display().to_string(),
        ],
    );
}

#[test]
fn check_watch_metrics_in_the_watched_directory_is_refused() {
    let dir = tempdir();
    write(dir.path(), "bundle.yaml", &gpu_cap_bundle("1", 8));
    let stderr = failure(
        arbiter()
            .args(["policy", "check", "--watch", "--metrics"])
            .arg(dir.path().join("policy.prom"))
            .arg(dir.path()),
        1,
    );
    assert_contains(&stderr, &["is in the watched directory"]);
}

/// `policy check --watch` on a directory laid out as the kubelet mounts a
/// ConfigMap: `..<timestamp>/` holding the files, `..data` pointing to it,
/// and every key a symlink through `..data`.
#[cfg(unix)]
mod watch {
    use std::io::{BufRead, BufReader};
    use std::os::unix::fs::symlink;
    use std::path::Path;
    use std::process::{Child, Stdio};
    use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
    use std::time::{Duration, Instant};

    use super::{cel_syntax_error_bundle, gpu_cap_bundle, sample_value, samples};

    /// A safety net against a hung child; waits return as soon as a line arrives.
    const PATIENCE: Duration = Duration::from_secs(20);

    /// The running `arbiter policy check --watch`, killed when dropped (also
    /// when an assertion fails), and the lines of its stdout.
    struct Watching {
        child: Child,
        lines: Receiver<String>,
        seen: Vec<String>,
    }

    impl Watching {
        fn start(dir: &Path, metrics: &Path) -> Watching {
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_arbiter"));
            command
                .args(["policy", "check", "--watch"])
                .arg(dir)
                .arg("--metrics")
                .arg(metrics);
            Watching::spawn(command)
        }

        /// Watching `dir` as given (a relative path, from `cwd`), without metrics.
        fn start_in(cwd: &Path, dir: &str) -> Watching {
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_arbiter"));
            command
                .args(["policy", "check", "--watch", dir])
                .current_dir(cwd);
            Watching::spawn(command)
        }

        fn spawn(mut command: std::process::Command) -> Watching {
            let mut child = command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap_or_else(|e| panic!("starting arbiter: {e}"));
            let stdout = child.stdout.take().expect("stdout is piped");
            let (tx, lines) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            Watching {
                child,
                lines,
                seen: Vec::new(),
            }
        }

        /// The next line that is not an `unchanged` reload (a reload may run
        /// mid-update, before `..data` moves, or after, when the old
        /// directory goes); it must contain every fragment.
        fn next(&mut self, fragments: &[&str]) -> String {
            let deadline = Instant::now() + PATIENCE;
            loop {
                let wait = deadline.saturating_duration_since(Instant::now());
                let line = match self.lines.recv_timeout(wait) {
                    Ok(line) => line,
                    Err(RecvTimeoutError::Timeout) => panic!(
                        "no line with {fragments:?} within {PATIENCE:?}; output so far:\n{}",
                        self.seen.join("\n")
                    ),
                    Err(RecvTimeoutError::Disconnected) => panic!(
                        "arbiter exited ({:?}) before printing {fragments:?}; output:\n{}",
                        self.child.try_wait(),
                        self.seen.join("\n")
                    ),
                };
                self.seen.push(line.clone());
                if line.contains(" unchanged: ") {
                    continue;
                }
                for fragment in fragments {
                    assert!(
                        line.contains(fragment),
                        "expected a line with {fragments:?}, got:\n{line}\noutput so far:\n{}",
                        self.seen.join("\n")
                    );
                }
                return line;
            }
        }

        /// Skips lines until one contains every fragment (lines printed
        /// while a directory is half written may say anything).
        fn until(&mut self, fragments: &[&str]) -> String {
            let deadline = Instant::now() + PATIENCE;
            loop {
                let wait = deadline.saturating_duration_since(Instant::now());
                match self.lines.recv_timeout(wait) {
                    Ok(line) => {
                        self.seen.push(line.clone());
                        if fragments.iter().all(|f| line.contains(f)) {
                            return line;
                        }
                    }
                    Err(e) => panic!(
                        "no line with {fragments:?} within {PATIENCE:?} ({e}); output so far:\n{}",
                        self.seen.join("\n")
                    ),
                }
            }
        }
    }

    impl Drop for Watching {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn write_generation(dir: &Path, generation: &str, bundle: &str) {
        let data = dir.join(generation);
        std::fs::create_dir(&data).unwrap_or_else(|e| panic!("{}: {e}", data.display()));
        std::fs::write(data.join("bundle.yaml"), bundle).unwrap_or_else(|e| panic!("{e}"));
    }

    /// The first mount.
    fn mount(dir: &Path, generation: &str, bundle: &str) {
        write_generation(dir, generation, bundle);
        symlink(generation, dir.join("..data")).unwrap_or_else(|e| panic!("{e}"));
        symlink("..data/bundle.yaml", dir.join("bundle.yaml")).unwrap_or_else(|e| panic!("{e}"));
    }

    /// A ConfigMap update as the kubelet's atomic writer does it: the new
    /// generation beside the old, `..data_tmp` pointing to it, renamed over
    /// `..data`, the old generation removed.
    fn update(dir: &Path, generation: &str, bundle: &str) {
        let old = std::fs::read_link(dir.join("..data")).unwrap_or_else(|e| panic!("{e}"));
        write_generation(dir, generation, bundle);
        symlink(generation, dir.join("..data_tmp")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::rename(dir.join("..data_tmp"), dir.join("..data"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_dir_all(dir.join(old)).unwrap_or_else(|e| panic!("{e}"));
    }

    /// What the metrics file says after a reload result, which `check
    /// --watch` writes before it prints the result's line.
    struct Metrics {
        loaded: f64,
        rejected: f64,
        last_success: f64,
        /// `arbiter_policy_bundle_info` as (version, digest) for every series.
        info: Vec<(String, String)>,
        text: String,
    }

    fn metrics(file: &Path, dir: &Path) -> Metrics {
        let text = super::read(file);
        let samples = samples(&text);
        let bundle = dir.display().to_string();
        let reloads = |result| {
            sample_value(
                &samples,
                "arbiter_policy_bundle_reloads_total",
                &[("bundle", &bundle), ("result", result)],
            )
            .unwrap_or_else(|| panic!("no {result} count:\n{text}"))
        };
        Metrics {
            loaded: reloads("loaded"),
            rejected: reloads("rejected"),
            last_success: sample_value(
                &samples,
                "arbiter_policy_bundle_last_reload_success",
                &[("bundle", &bundle)],
            )
            .unwrap_or_else(|| panic!("no last_reload_success:\n{text}")),
            info: samples
                .iter()
                .filter(|s| s.name == "arbiter_policy_bundle_info" && s.labels["bundle"] == bundle)
                .map(|s| (s.labels["version"].clone(), s.labels["digest"].clone()))
                .collect(),
            text,
        }
    }

    /// The short digest a `loaded:`/`reloaded in` line shows.
    fn shown_digest(line: &str) -> &str {
        line.split_once(" digest ")
            .and_then(|(_, rest)| rest.split_once(':'))
            .map(|(digest, _)| digest)
            .unwrap_or_else(|| panic!("no digest in {line:?}"))
    }

    fn assert_in_force(m: &Metrics, version: &str, line: &str) {
        assert_eq!(m.info.len(), 1, "one bundle in force:\n{}", m.text);
        let (shown_version, digest) = &m.info[0];
        assert_eq!(shown_version, version, "{}", m.text);
        assert!(
            digest.len() == 64 && digest.starts_with(shown_digest(line)),
            "digest {digest} is not the one of {line:?}"
        );
    }

    #[test]
    fn follows_kubelet_configmap_updates_and_keeps_the_last_good_bundle() {
        let dir = super::tempdir();
        let dir = dir.path().join("bundle");
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
        let metrics_dir = super::tempdir();
        let file = metrics_dir.path().join("policy.prom");
        mount(
            &dir,
            "..2026_11_30_00_00_00.000000001",
            &gpu_cap_bundle("1", 8),
        );
        let mut watching = Watching::start(&dir, &file);
        let line = watching.next(&[" loaded: bundle watched version 1 ", "1 tests passed"]);
        let m = metrics(&file, &dir);
        assert_eq!(
            (m.loaded, m.rejected, m.last_success),
            (1.0, 0.0, 1.0),
            "{}",
            m.text
        );
        assert_in_force(&m, "1", &line);
        watching.next(&[" watching "]);

        update(
            &dir,
            "..2026_11_30_00_01_00.000000002",
            &gpu_cap_bundle("2", 4),
        );
        let line = watching.next(&[" reloaded in ", "bundle watched version 2 "]);
        let m = metrics(&file, &dir);
        assert_eq!(
            (m.loaded, m.rejected, m.last_success),
            (2.0, 0.0, 1.0),
            "{}",
            m.text
        );
        assert_in_force(&m, "2", &line);

        update(
            &dir,
            "..2026_11_30_00_02_00.000000003",
            &cel_syntax_error_bundle("3"),
        );
        watching.next(&[
            " rejected, keeping watched version 2 ",
            "policy broken",
            "cel.expression",
        ]);
        let m = metrics(&file, &dir);
        assert_eq!(
            (m.loaded, m.rejected, m.last_success),
            (2.0, 1.0, 0.0),
            "{}",
            m.text
        );
        assert_in_force(&m, "2", &line);

        update(
            &dir,
            "..2026_11_30_00_03_00.000000004",
            &gpu_cap_bundle("4", 2),
        );
        let line = watching.next(&[" reloaded in ", "bundle watched version 4 "]);
        let m = metrics(&file, &dir);
        assert_eq!(
            (m.loaded, m.rejected, m.last_success),
            (3.0, 1.0, 1.0),
            "{}",
            m.text
        );
        assert_in_force(&m, "4", &line);
        let leftovers: Vec<_> = std::fs::read_dir(metrics_dir.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
            .map(|e| e.file_name())
            .filter(|name| name != "policy.prom")
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }

    fn bundle_dir(dir: &Path, version: &str) {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        super::write(dir, "bundle.yaml", &gpu_cap_bundle(version, 8));
    }

    /// Started on a relative path, as people type it: the watcher used to
    /// compare that path with notify's absolute ones, never saw the
    /// directory go, and stopped reloading for good.
    #[test]
    fn survives_its_directory_being_deleted_and_recreated() {
        let tmp = super::tempdir();
        let dir = tmp.path().join("bundle");
        bundle_dir(&dir, "1");
        let mut watching = Watching::start_in(tmp.path(), "bundle");
        watching.next(&[" loaded: bundle watched version 1 "]);
        watching.next(&[" watching bundle "]);
        std::fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        watching.until(&[
            " missing: bundle does not exist",
            "keeping watched version 1 ",
            "until it is back",
        ]);
        bundle_dir(&dir, "2");
        watching.until(&[" reloaded in ", "bundle watched version 2 "]);
        // The new directory is the one watched now.
        super::write(&dir, "bundle.yaml", &gpu_cap_bundle("3", 8));
        watching.until(&[" reloaded in ", "bundle watched version 3 "]);
    }

    /// A new version prepared beside the old and renamed into its place.
    #[test]
    fn survives_a_rename_swap_of_its_directory() {
        let tmp = super::tempdir();
        let dir = tmp.path().join("bundle");
        bundle_dir(&dir, "1");
        let mut watching = Watching::start_in(tmp.path(), "bundle");
        watching.next(&[" loaded: bundle watched version 1 "]);
        watching.next(&[" watching bundle "]);
        bundle_dir(&tmp.path().join("bundle.new"), "2");
        std::fs::rename(&dir, tmp.path().join("bundle.old")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::rename(tmp.path().join("bundle.new"), &dir).unwrap_or_else(|e| panic!("{e}"));
        watching.until(&[" reloaded in ", "bundle watched version 2 "]);
        super::write(&dir, "bundle.yaml", &gpu_cap_bundle("3", 8));
        watching.until(&[" reloaded in ", "bundle watched version 3 "]);
    }

    /// `bundle -> v1` swapped to `bundle -> v2` by renaming a new symlink
    /// over it: nothing changes inside v1, only the parent sees it.
    #[test]
    fn follows_a_symlink_swapped_to_another_directory() {
        let tmp = super::tempdir();
        bundle_dir(&tmp.path().join("v1"), "1");
        bundle_dir(&tmp.path().join("v2"), "2");
        symlink("v1", tmp.path().join("bundle")).unwrap_or_else(|e| panic!("{e}"));
        let mut watching = Watching::start_in(tmp.path(), "bundle");
        watching.next(&[" loaded: bundle watched version 1 "]);
        watching.next(&[" watching bundle "]);
        symlink("v2", tmp.path().join("bundle.tmp")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::rename(tmp.path().join("bundle.tmp"), tmp.path().join("bundle"))
            .unwrap_or_else(|e| panic!("{e}"));
        watching.until(&[" reloaded in ", "bundle watched version 2 "]);
        super::write(
            &tmp.path().join("v2"),
            "bundle.yaml",
            &gpu_cap_bundle("3", 8),
        );
        watching.until(&[" reloaded in ", "bundle watched version 3 "]);
    }
}

#[test]
fn eval_refuses_a_device_or_an_oversized_request_without_reading_it() {
    let eval = |input: &str| {
        let mut cmd = arbiter();
        cmd.args([
            "policy",
            "eval",
            "policies/",
            "--hook",
            "admission",
            "--input",
            input,
        ]);
        failure(&mut cmd, 1)
    };
    // /dev/zero never ends: it used to be read until memory ran out.
    assert_contains(
        &eval("/dev/zero"),
        &["/dev/zero is a character device, not a regular file"],
    );
    let dir = tempdir();
    let big = dir.path().join("big.json");
    let file = std::fs::File::create(&big).unwrap_or_else(|e| panic!("{e}"));
    file.set_len((16 << 20) + 1)
        .unwrap_or_else(|e| panic!("{e}"));
    let shown = big.display().to_string();
    assert_contains(
        &eval(&shown),
        &[&shown, "the request is over 16777216 bytes"],
    );
}

/// A bundle directory for `policy configmap`: a weight module at each of
/// `modules` (paths inside the directory), one policy per module, and a
/// CEL policy with a test.
fn configmap_bundle(name: &str, modules: &[&str]) -> tempfile::TempDir {
    let dir = tempdir();
    let wasm = wat::parse_str(WEIGHT_WAT).unwrap_or_else(|e| panic!("{e}"));
    let mut policies = String::new();
    for (i, module) in modules.iter().enumerate() {
        let path = dir.path().join(module);
        std::fs::create_dir_all(path.parent().unwrap_or(dir.path()))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, &wasm).unwrap_or_else(|e| panic!("{e}"));
        // Block and flow style, plain and quoted: each is renamed.
        if i % 2 == 0 {
            policies.push_str(&format!(
                "  - name: w{i}\n    hook: weight\n    wasm:\n      module: {module}  # built elsewhere\n"
            ));
        } else {
            policies.push_str(&format!(
                "  - {{name: w{i}, hook: weight, wasm: {{module: \"{module}\", config: {{}}}}}}\n"
            ));
        }
    }
    let spec = format!(
        "  policies:\n{policies}  - {{name: cap, hook: admission, cel: {{expression: 'workload.gpus <= 8'}}}}\n  tests:\n  - {{name: small, policy: cap, input: {{workload: {{gpus: 1}}}}, expect: {{allowed: true}}}}\n"
    );
    write(dir.path(), "bundle.yaml", &bundle_yaml(name, "3", &spec));
    dir
}

#[test]
fn configmap_keys_modules_by_file_name_and_loads_as_printed() {
    let dir = configmap_bundle("team-rules", &["plugins/a.wasm", "./b.wasm", "c.wasm"]);
    let output = arbiter()
        .args(["policy", "configmap"])
        .arg(dir.path())
        .assert()
        .success()
        .get_output()
        .clone();
    let yaml = String::from_utf8_lossy(&output.stdout).into_owned();
    let configmap: Value = serde_yaml_ng::from_str(&yaml).unwrap_or_else(|e| panic!("{e}"));
    // Default name: the bundle's; no namespace unless given.
    assert_eq!(configmap["metadata"]["name"], "team-rules");
    assert!(configmap["metadata"].get("namespace").is_none());
    assert_eq!(
        configmap["metadata"]["labels"]["arbiter.dev/policy-bundle"],
        "true"
    );
    let keys: Vec<&String> = configmap["binaryData"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys, ["a.wasm", "b.wasm", "c.wasm"]);
    let inner = configmap["data"]["bundle.yaml"]
        .as_str()
        .unwrap_or_default();
    assert_contains(
        inner,
        &[
            "module: a.wasm  # built elsewhere",
            "module: \"b.wasm\"",
            "module: c.wasm",
        ],
    );
    assert!(!inner.contains("plugins/"), "{inner}");
    let file = write(dir.path(), "configmap.yaml", &yaml);
    let test = arbiter()
        .args(["policy", "test"])
        .arg(&file)
        .assert()
        .success()
        .get_output()
        .clone();
    assert_contains(
        &String::from_utf8_lossy(&test.stdout),
        &["PASS small (cap)", "1 passed, 0 failed, bundle team-rules"],
    );

    let named = arbiter()
        .args([
            "policy",
            "configmap",
            "--name",
            "rules",
            "--namespace",
            "team-a",
        ])
        .arg(dir.path())
        .assert()
        .success()
        .get_output()
        .clone();
    let named: Value = serde_yaml_ng::from_slice(&named.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(named["metadata"]["name"], "rules");
    assert_eq!(named["metadata"]["namespace"], "team-a");
}

#[test]
fn configmap_refuses_what_cannot_be_a_configmap() {
    // Two modules that would share a key.
    let dir = configmap_bundle("t", &["x/w.wasm", "y/w.wasm"]);
    let stderr = failure(arbiter().args(["policy", "configmap"]).arg(dir.path()), 1);
    assert_contains(
        &stderr,
        &[
            "x/w.wasm and y/w.wasm",
            "ConfigMap key w.wasm",
            "rename one",
        ],
    );
    // A bundle name that is no object name, without --name.
    let dir = configmap_bundle("Team_Rules", &[]);
    let stderr = failure(arbiter().args(["policy", "configmap"]).arg(dir.path()), 1);
    assert_contains(
        &stderr,
        &["\"Team_Rules\" cannot name a ConfigMap", "pass --name"],
    );
    arbiter()
        .args(["policy", "configmap", "--name", "team-rules"])
        .arg(dir.path())
        .assert()
        .success();
    // A bundle the loader refuses: the loader's message.
    let dir = tempdir();
    write(
        dir.path(),
        "bundle.yaml",
        &bundle_yaml(
            "t",
            "1",
            "  policies:\n  - {name: p, hook: weight, wasm: {module: missing.wasm}}\n",
        ),
    );
    let stderr = failure(arbiter().args(["policy", "configmap"]).arg(dir.path()), 1);
    assert_contains(&stderr, &["missing.wasm", "cannot read"]);
    // Not a directory.
    let missing = dir.path().join("nope");
    let stderr = failure(arbiter().args(["policy", "configmap"]).arg(&missing), 1);
    assert_contains(&stderr, &["nope is not a bundle directory"]);
    // Usage: names Kubernetes would refuse.
    let stderr = failure(
        arbiter()
            .args(["policy", "configmap", "--namespace", "Team.A"])
            .arg(dir.path()),
        2,
    );
    assert_contains(&stderr, &["--namespace", "not a namespace name"]);
    let stderr = failure(
        arbiter()
            .args(["policy", "configmap", "--name", "rules-"])
            .arg(dir.path()),
        2,
    );
    assert_contains(&stderr, &["--name", "not a ConfigMap name"]);
}
