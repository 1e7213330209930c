//! Bundles as a platform engineer meets them: what a broken bundle says,
//! ConfigMap bundles, tenant restrictions, and how `failurePolicy` and
//! `mode: DryRun` change what a scenario does.

use std::collections::BTreeSet;
use std::path::Path;

use arbiter_policy::bundle::{self, BundleError, Hook, LoadOptions, Mode};
use arbiter_policy::engine::Sources;
use arbiter_policy::reload::{ReloadOutcome, Reloadable};
use std::sync::Arc;

use arbiter_policy::engine::{Decision, Engine};
use arbiter_policy::hooks::{self, HookKind};
use arbiter_policy::view::{EstimateView, TenantView, WeightInput, WorkloadView};
use arbiter_policy::wasm::Runtime;
use arbiter_sim::report::Report;
use arbiter_sim::{policies, scenario};

fn write_bundle(dir: &Path, policies: &str, tests: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("bundle.yaml"),
        format!(
            "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: t, version: \"1\"}}\nspec:\n  policies:\n{policies}\n  tests:\n{tests}\n"
        ),
    )
    .unwrap();
}

fn load(dir: &Path) -> Result<bundle::Bundle, BundleError> {
    bundle::load_path(dir, &Runtime::new().unwrap(), &LoadOptions::default())
}

fn error(policies: &str, tests: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    write_bundle(dir.path(), policies, tests);
    match load(dir.path()) {
        Ok(_) => panic!("the bundle loaded but should not have"),
        Err(e) => e.to_string(),
    }
}

const WEIGHT_WAT: &str = r#"(module
  (memory (export "memory") 1)
  (data (i32.const 1024) "{\"scores\":[1]}")
  (func (export "arbiter_abi_version") (result i32) i32.const 1)
  (func (export "arbiter_alloc") (param i32) (result i32) i32.const 4096)
  (func (export "arbiter_weight") (param i32 i32) (result i64) i64.const 4398046511118))"#;

#[test]
fn cel_syntax_error_names_policy_line_and_column() {
    let e = error(
        "  - name: broken\n    hook: admission\n    cel:\n      expression: \"workload.gpus <=\\n  (8 +\"\n",
        "    []",
    );
    assert!(e.contains("policy broken"), "{e}");
    assert!(e.contains("cel.expression"), "{e}");
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn misspelt_field_is_an_error_not_a_default() {
    let e = error(
        "  - {name: p, hook: admission, failurPolicy: Ignore, cel: {expression: 'true'}}",
        "    []",
    );
    assert!(e.contains("failurPolicy"), "{e}");
    assert!(e.contains("failurePolicy"), "did-you-mean missing: {e}");
}

#[test]
fn wrong_sha256_pin_and_missing_module_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("w.wasm"),
        wat::parse_str(WEIGHT_WAT).unwrap(),
    )
    .unwrap();
    write_bundle(
        dir.path(),
        "  - {name: w, hook: weight, wasm: {module: w.wasm, sha256: \"00ff\"}}",
        "    []",
    );
    let e = load(dir.path()).err().unwrap().to_string();
    assert!(e.contains("policy w") && e.contains("sha256"), "{e}");
    write_bundle(
        dir.path(),
        "  - {name: w, hook: weight, wasm: {module: nope.wasm}}",
        "    []",
    );
    let e = load(dir.path()).err().unwrap().to_string();
    assert!(e.contains("nope.wasm"), "{e}");
}

#[test]
fn module_without_the_hook_export_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("w.wasm"),
        wat::parse_str(WEIGHT_WAT).unwrap(),
    )
    .unwrap();
    write_bundle(
        dir.path(),
        "  - {name: w, hook: admission, wasm: {module: w.wasm}}",
        "    []",
    );
    let e = load(dir.path()).err().unwrap().to_string();
    assert!(e.contains("arbiter_admission"), "{e}");
}

#[test]
fn failing_bundle_test_rejects_the_bundle() {
    let e = error(
        "  - {name: cap, hook: admission, cel: {expression: 'workload.gpus <= 8'}}",
        "  - {name: sixteen-denied, policy: cap, input: {workload: {gpus: 4}}, expect: {allowed: false}}",
    );
    assert!(e.contains("1 of 1 bundle tests failed"), "{e}");
    assert!(e.contains("sixteen-denied"), "{e}");
}

#[test]
fn tenant_bundle_may_not_hold_platform_hooks() {
    let dir = tempfile::tempdir().unwrap();
    write_bundle(
        dir.path(),
        "  - {name: fs, hook: fairShare, cel: {expression: '1.0'}}",
        "    []",
    );
    let options = LoadOptions {
        tenant: Some("team-a".into()),
        run_tests: true,
    };
    let e = bundle::load_path(dir.path(), &Runtime::new().unwrap(), &options)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not allowed in a tenant bundle"), "{e}");
}

fn configmap(wasm: &[u8], bundle_yaml: &str) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(wasm);
    let indented: String = bundle_yaml.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: team-weights\n  namespace: arbiter-system\n  labels: {{arbiter.dev/policy-bundle: \"true\"}}\ndata:\n  bundle.yaml: |\n{indented}binaryData:\n  w.wasm: {b64}\n"
    )
}

#[test]
fn configmap_bundle_loads_and_the_1mib_limit_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let bundle_yaml = "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {name: cm}\nspec:\n  policies:\n  - {name: w, hook: weight, wasm: {module: w.wasm}}\n  tests:\n  - {name: one, policy: w, input: {workloads: [{name: a}]}, expect: {scores: [1.0]}}\n";
    let wasm = wat::parse_str(WEIGHT_WAT).unwrap();
    let file = dir.path().join("cm.yaml");
    std::fs::write(&file, configmap(&wasm, bundle_yaml)).unwrap();
    let b = load(&file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.name, "cm");
    assert!(b.source.contains("ConfigMap arbiter-system/team-weights"));

    // Pad the module with a 1.1 MiB custom section: same behaviour, too big for a ConfigMap.
    let mut big = wasm.clone();
    let payload = vec![0u8; 1_100_000];
    big.push(0); // custom section id
    let name = b"pad";
    let mut size = Vec::new();
    let mut n = (1 + name.len() + payload.len()) as u32;
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            size.push(byte);
            break;
        }
        size.push(byte | 0x80);
    }
    big.extend(size);
    big.push(name.len() as u8);
    big.extend(name);
    big.extend(payload);
    std::fs::write(&file, configmap(&big, bundle_yaml)).unwrap();
    let e = load(&file).err().unwrap().to_string();
    assert!(e.contains("1 MiB"), "{e}");
}

const SCENARIO: &str = "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: gpu}\n---\n\
apiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: gpu\n      resources: [{name: nvidia.com/gpu, nominalQuota: \"8\"}]\n---\n\
apiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: q, namespace: team}\nspec: {clusterQueue: cq}\n---\n\
apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: job\n  namespace: team\n  labels: {arbiter.dev/queue-name: q}\n  annotations: {sim.arbiter.dev/runtime: 10m}\nspec:\n  template:\n    spec:\n      containers:\n      - name: main\n        resources: {requests: {nvidia.com/gpu: \"2\"}}\n";

/// Runs the one-job scenario with one admission policy; the report and the engine.
fn run_with(policy: &str) -> (Report, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, SCENARIO).unwrap();
    let bundle_dir = dir.path().join("b");
    write_bundle(&bundle_dir, policy, "    []");
    let scenario = scenario::build(arbiter_sim::files::load_paths(&[file]).unwrap()).unwrap();
    let b = load(&bundle_dir).unwrap_or_else(|e| panic!("{e}"));
    let mut engine = Engine::fixed(vec![b], Default::default());
    let (report, _) = policies::run(&scenario, Some(&mut engine), true, &mut |_| {});
    (report, engine)
}

#[test]
fn enforce_deny_rejects_dry_run_only_logs() {
    let deny = "  - {name: no, hook: admission, cel: {expression: 'false', messageExpression: \"'never'\", retryable: false}}";
    let (report, _) = run_with(deny);
    assert_eq!(report.workloads[0].state, "rejected");
    assert!(
        report.workloads[0].reason.contains("never"),
        "{}",
        report.workloads[0].reason
    );

    let dry = "  - {name: no, hook: admission, mode: DryRun, cel: {expression: 'false', retryable: false}}";
    let (report, _) = run_with(dry);
    assert_eq!(report.workloads[0].state, "finished");
    let decisions = &report.policies.as_ref().unwrap().decisions;
    assert!(decisions
        .iter()
        .any(|d| d.policy == "no" && d.mode == Mode::DryRun && d.result == "deny"));
}

#[test]
fn failure_policy_decides_what_an_error_means() {
    // A runtime error: the label does not exist.
    let broken = |fp: &str| {
        format!("  - {{name: label, hook: admission, failurePolicy: {fp}, cel: {{expression: \"workload.labels['missing'] == 'x'\"}}}}")
    };
    let (report, engine) = run_with(&broken("Ignore"));
    assert_eq!(report.workloads[0].state, "finished");
    assert!(engine.errors() >= 1);
    let (report, _) = run_with(&broken("Fail"));
    assert_eq!(report.workloads[0].state, "pending");
    assert!(
        report.workloads[0].reason.contains("policy failed"),
        "{}",
        report.workloads[0].reason
    );
    let decisions = &report.policies.as_ref().unwrap().decisions;
    assert!(decisions.iter().any(|d| d.error.as_deref() == Some("cel")));
}

/// A weight plugin that declares `fields`, logs the request it gets and
/// scores every (single) workload 1.
fn lean_weight_wat(fields: &str) -> Vec<u8> {
    let text = format!(
        r#"(module
  (import "arbiter" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "{{\"scores\":[1]}}")
  (data (i32.const 2048) "{}")
  (func (export "arbiter_abi_version") (result i32) i32.const 1)
  (func (export "arbiter_alloc") (param i32) (result i32) i32.const 4096)
  (func (export "arbiter_weight_fields") (result i64)
    (i64.or (i64.const 8796093022208) (i64.const {})))
  (func (export "arbiter_weight") (param $p i32) (param $n i32) (result i64)
    (call $log (i32.const 2) (local.get $p) (local.get $n))
    i64.const 4398046511118))"#,
        fields.replace('"', "\\\""),
        fields.len()
    );
    wat::parse_str(text).unwrap()
}

#[test]
fn a_plugin_that_declares_its_weight_fields_is_sent_only_those() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lean.wasm"),
        lean_weight_wat(r#"["workloads.gpus","workloads.estimate","tenants"]"#),
    )
    .unwrap();
    write_bundle(
        dir.path(),
        "  - {name: lean, hook: weight, wasm: {module: lean.wasm, config: {k: 1}}}",
        "    []",
    );
    let bundle = load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let input = WeightInput {
        workloads: vec![WorkloadView {
            name: "train".into(),
            namespace: "research".into(),
            gpus: 8,
            estimate: Some(EstimateView {
                runtime_seconds: 60.0,
                samples: 3,
            }),
            ..WorkloadView::default()
        }],
        tenants: [("research".to_string(), TenantView::default())].into(),
        now: 7.0,
        ..WeightInput::default()
    };
    let mut logs = Vec::new();
    let scores =
        hooks::Weight::evaluate(bundle.policy("lean").unwrap(), &input, &mut logs).unwrap();
    assert_eq!(scores, [1.0]);
    let sent: serde_json::Value = serde_json::from_str(&logs[0].1).unwrap();
    assert_eq!(
        sent,
        serde_json::json!({
            "workloads": [{"gpus": 8, "estimate": {"runtimeSeconds": 60.0, "samples": 3}}],
            "tenants": {"research": {"name": "", "labels": {}, "annotations": {}}},
            "now": 7.0,
            "params": {"k": 1}
        })
    );
}

#[test]
fn an_unknown_declared_weight_field_rejects_the_bundle_naming_policy_and_field() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lean.wasm"),
        lean_weight_wat(r#"["workloads.gpu"]"#),
    )
    .unwrap();
    write_bundle(
        dir.path(),
        "  - {name: lean, hook: weight, wasm: {module: lean.wasm}}",
        "    []",
    );
    let error = load(dir.path())
        .err()
        .expect("the bundle is refused")
        .to_string();
    for needle in [
        "lean",
        "lean.wasm",
        "workloads.gpu",
        "gpus",
        "arbiter_weight_fields",
    ] {
        assert!(error.contains(needle), "{needle} not in: {error}");
    }
}

/// An autoscale bundle whose one policy's expression is `expression`.
fn autoscale_bundle(dir: &Path, expression: &str) -> bundle::Bundle {
    write_bundle(
        dir,
        &format!("  - {{name: util, hook: autoscale, cel: {{expression: \"{expression}\"}}}}"),
        "    []",
    );
    load(dir).unwrap_or_else(|e| panic!("{e}"))
}

/// The autoscale decisions per subject, in order, an entry's repeats
/// counted as that many more of it: (result, reused).
type Answers = std::collections::BTreeMap<String, Vec<(serde_json::Value, bool)>>;
fn autoscale_answers(decisions: &[Decision]) -> Answers {
    let mut answers = Answers::new();
    for d in decisions.iter().filter(|d| d.hook == Hook::Autoscale) {
        let of_subject = answers.entry(d.subject.clone().unwrap()).or_default();
        for _ in 0..=d.repeats {
            of_subject.push((d.result.clone(), d.reused));
        }
    }
    answers
}

#[test]
fn unchanged_autoscale_inputs_reuse_the_answer_and_the_schedule_is_the_same() {
    // The seed: three autoscaled flavors, a pass every few minutes for 8 hours.
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/seed");
    let scenario = scenario::build(arbiter_sim::files::load_paths(&[seed]).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let utilization = "(flavor.utilization * double(flavor.nodes) + flavor.pendingNodes) / 0.5";
    let run = |expression: &str, name: &str| {
        let b = autoscale_bundle(&dir.path().join(name), expression);
        let mut engine = Engine::fixed(vec![b], Default::default());
        policies::run(&scenario, Some(&mut engine), true, &mut |_| {})
    };
    let (pure, pure_decisions) = run(utilization, "pure");
    // The same answers, but the expression names `now`: never reused.
    let (timed, timed_decisions) =
        run(&format!("{utilization} + (now < 0.0 ? 1.0 : 0.0)"), "timed");

    let json = |v: &Report| serde_json::to_value((&v.workloads, &v.by_flavor, &v.summary)).unwrap();
    assert_eq!(json(&pure), json(&timed), "reuse changed the schedule");
    let stats = |r: &Report| {
        let s = &r.policies.as_ref().unwrap().by_policy[0];
        (s.evaluations, s.reused)
    };
    let (evaluated, reused) = stats(&pure);
    assert!(
        reused > 0 && evaluated > 0,
        "{evaluated} evaluated, {reused} reused"
    );
    assert_eq!(stats(&timed), (evaluated + reused, 0));

    // Every pass is logged, and a reused answer is the one last evaluated for that flavor.
    // (Identical repeats are counted on one entry: fewer entries than passes.)
    let pure_answers = autoscale_answers(&pure_decisions);
    let timed_answers = autoscale_answers(&timed_decisions);
    let passes: usize = pure_answers.values().map(Vec::len).sum();
    assert_eq!(passes as u64, evaluated + reused);
    assert!(pure_decisions.len() < passes, "repeats were stored again");
    assert_eq!(
        pure_answers.keys().collect::<Vec<_>>(),
        timed_answers.keys().collect::<Vec<_>>()
    );
    for (subject, answers) in &pure_answers {
        let results =
            |a: &[(serde_json::Value, bool)]| a.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
        assert_eq!(
            results(answers),
            results(&timed_answers[subject]),
            "{subject}"
        );
        let mut last = None;
        for (result, reused) in answers {
            if *reused {
                assert_eq!(last, Some(result), "{subject}: reused a stale answer");
            } else {
                last = Some(result);
            }
        }
    }
}

#[test]
fn a_reloaded_bundle_never_reuses_the_answers_of_the_one_it_replaced() {
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/seed");
    let scenario = scenario::build(arbiter_sim::files::load_paths(&[seed]).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Constant answers, clamped to each pool's minNodes, then its maxNodes.
    let low = autoscale_bundle(&dir.path().join("low"), "0.0");
    let high_dir = dir.path().join("high");
    autoscale_bundle(&high_dir, "1000.0");
    let source = Arc::new(Reloadable::new(low));
    let mut engine = Engine::new(Sources {
        platform: vec![source.clone()],
        tenants: Default::default(),
    });
    let halfway = arbiter_core::model::Millis::from_secs(4 * 3600);
    // Progress is reported after a cycle: decisions at that instant came before the swap.
    let mut swapped_at = None;
    let (_, decisions) = policies::run(&scenario, Some(&mut engine), true, &mut |p| {
        if swapped_at.is_none() && p.now >= halfway {
            let outcome = source.reload_with(|| load(&high_dir));
            assert!(
                matches!(outcome, ReloadOutcome::Swapped { .. }),
                "{outcome:?}"
            );
            swapped_at = Some(p.now.as_secs_f64());
        }
    });
    let swapped_at = swapped_at.expect("the run reached the halfway mark");
    let mut before = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
    let mut after = before.clone();
    let mut reused_after = 0;
    for d in decisions.iter().filter(|d| d.hook == Hook::Autoscale) {
        let late = d.at_seconds > swapped_at;
        let side = if late { &mut after } else { &mut before };
        side.entry(d.subject.clone().unwrap())
            .or_default()
            .insert(d.result.to_string());
        reused_after += usize::from(late && d.reused);
    }
    assert!(
        reused_after > 0,
        "no answer was reused after the reload: the test proves nothing"
    );
    for (flavor, answers) in &after {
        assert_eq!(
            answers.len(),
            1,
            "{flavor}: answers of both bundles after the reload: {answers:?}"
        );
    }
    assert_ne!(before, after, "the reload changed no answer");
}

#[test]
fn a_fair_share_policy_that_reads_the_quota_maps_gets_them() {
    // Quota maps are built only for policies that read them: this one does.
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/seed");
    let scenario = scenario::build(arbiter_sim::files::load_paths(&[seed]).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_bundle(
        dir.path(),
        "  - {name: flavors, hook: fairShare, cel: {expression: \"double(clusterQueue.nominal.size() * 10 + clusterQueue.usage.size())\"}}",
        "    []",
    );
    let b = load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let mut engine = Engine::fixed(vec![b], Default::default());
    let (_, decisions) = policies::run(&scenario, Some(&mut engine), true, &mut |_| {});
    assert_eq!(engine.errors(), 0);
    let answers: BTreeSet<String> = decisions
        .iter()
        .filter(|d| d.hook == Hook::FairShare)
        .map(|d| format!("{}={}", d.subject.as_deref().unwrap_or("?"), d.result))
        .collect();
    // ai-cluster-queue has three flavors, finance-cluster-queue two.
    assert_eq!(
        answers.into_iter().collect::<Vec<_>>(),
        ["ai-cluster-queue=33.0", "finance-cluster-queue=22.0"]
    );
}

#[test]
fn a_tenant_cel_policy_too_costly_for_its_budget_is_refused_at_load_naming_it() {
    // 16 KiB and inside every size limit; it once took 3 s and 1 GB per
    // evaluation. The tenant's 20 ms budget is 200,000 cost units; the
    // platform's default 100 ms, 1,000,000 — and a platform policy may not
    // raise its timeout past 1 s (10,000,000 units) either.
    let list = format!("[{}]", vec!["1"; 250].join(", "));
    let text = "x".repeat(2_000);
    let expression =
        format!("double(size({list}.map(a, {list}.map(b, '{text}' + '{text}' + '{text}'))))");
    let dir = tempfile::tempdir().unwrap();
    write_bundle(
        dir.path(),
        &format!("  - {{name: heavy, hook: weight, cel: {{expression: \"{expression}\"}}}}"),
        "    []",
    );
    let options = LoadOptions {
        tenant: Some("team-a".into()),
        run_tests: true,
    };
    let e = bundle::load_path(dir.path(), &Runtime::new().unwrap(), &options)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("heavy"), "{e}");
    assert!(e.contains("over the budget of 200000"), "{e}");
    let e = error(
        &format!(
            "  - {{name: heavy, hook: weight, limits: {{timeoutMs: 1000}}, cel: {{expression: \"{expression}\"}}}}"
        ),
        "    []",
    );
    assert!(e.contains("over the budget of 10000000"), "{e}");
}

/// A weight module whose one extra function declares `locals` locals, and
/// whose `_initialize` (a reactor's) spins `spin` times (about 8 fuel each).
fn module_shaped(locals: usize, spin: u64) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
          (memory (export "memory") 1)
          (data (i32.const 1024) "{{\"scores\":[1]}}")
          (func (export "_initialize")
            (local $i i64)
            (local.set $i (i64.const {spin}))
            (block $done
              (loop $spin
                (br_if $done (i64.eqz (local.get $i)))
                (local.set $i (i64.sub (local.get $i) (i64.const 1)))
                (br $spin))))
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param i32) (result i32) i32.const 4096)
          (func (export "arbiter_weight") (param i32 i32) (result i64) i64.const 4398046511118)
          (func (local {}) nop))"#,
        "i32 ".repeat(locals)
    ))
    .unwrap()
}

/// Loads `wasm` as policy `w`'s module, as a platform bundle or as team-a's.
fn load_module(wasm: &[u8], tenant: bool) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("w.wasm"), wasm).unwrap();
    write_bundle(
        dir.path(),
        "  - {name: w, hook: weight, wasm: {module: w.wasm}}",
        "    []",
    );
    let options = LoadOptions {
        tenant: tenant.then(|| "team-a".into()),
        run_tests: true,
    };
    bundle::load_path(dir.path(), &Runtime::new().unwrap(), &options)
        .map(drop)
        .map_err(|e| e.to_string())
}

#[test]
fn a_tenant_module_is_held_to_the_tenant_shape_caps() {
    use arbiter_policy::wasm::{PLATFORM_COMPLEXITY_CAPS, TENANT_COMPLEXITY_CAPS};
    let locals = TENANT_COMPLEXITY_CAPS.locals_per_function + 1;
    assert!(locals <= PLATFORM_COMPLEXITY_CAPS.locals_per_function);
    let wasm = module_shaped(locals as usize, 0);
    load_module(&wasm, false).expect("within a platform bundle's caps");
    let e = load_module(&wasm, true).expect_err("over a tenant's caps");
    for part in [
        "policy w",
        "wasm.module w.wasm",
        "the locals of its function 4",
        &format!(
            "is {locals}, over the cap of {}",
            TENANT_COMPLEXITY_CAPS.locals_per_function
        ),
    ] {
        assert!(e.contains(part), "{part:?} missing: {e}");
    }
}

#[test]
fn a_tenant_module_is_probed_under_the_tenant_budget() {
    use arbiter_policy::bundle::Limits;
    // `_initialize` needs more than a tenant's fuel, less than a platform's.
    let spin = (Limits::TENANT.fuel() + Limits::PLATFORM.fuel()) / 2 / 8;
    let wasm = module_shaped(0, spin);
    load_module(&wasm, false).expect("fits a platform budget");
    let e = load_module(&wasm, true).expect_err("over a tenant's budget");
    for part in [
        "policy w",
        "w.wasm",
        "arbiter_abi_version",
        &format!(
            "ran out of fuel: it used its whole budget of {}",
            Limits::TENANT.fuel()
        ),
    ] {
        assert!(e.contains(part), "{part:?} missing: {e}");
    }
}
