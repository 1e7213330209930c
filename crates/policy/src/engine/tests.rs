//! The engine on a small cluster, hook by hook: what `match`, `mode`,
//! `failurePolicy` and tenant confinement do to the answers, what the
//! statistics count and the decision log records, and when a time-free
//! answer is reused instead of evaluated.

mod flavors;
mod placement;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;

use super::*;
use crate::bundle::{self, BundleError, Files, LoadOptions};
use crate::spec::Mode;
use crate::wasm::Runtime;
use arbiter_core::model::cluster::{ClusterBuilder, FlavorId, Namespace};
use arbiter_core::model::load::{self, Manifest};
use arbiter_core::model::Amount;
use arbiter_core::scheduler::hooks::{
    AdmissionRequest, AdmissionVerdict, AutoscaleRequest, FairShareRequest, FlavorLoad,
    FlavorRequest, Hooks, Weight, WeightRequest,
};
use arbiter_core::scheduler::{Input, PodSetRequest, Scheduler, Workload, WorkloadId};

/// Two flavors; ClusterQueue `research` (fair-sharing weight `{weight}`)
/// and `product`; a LocalQueue `q` in each of the namespaces `research`,
/// `product` and `dev` (the last one into `research`).
fn cluster_yaml(weight: &str) -> String {
    let cq = |name: &str, fair: &str| {
        format!(
            "---\napiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\n\
             metadata: {{name: {name}}}\nspec:\n  {fair}resourceGroups:\n  \
             - coveredResources: [nvidia.com/gpu]\n    flavors:\n    \
             - name: a100\n      resources: [{{name: nvidia.com/gpu, nominalQuota: \"8\"}}]\n    \
             - name: v100\n      resources: [{{name: nvidia.com/gpu, nominalQuota: \"8\"}}]\n"
        )
    };
    let lq = |namespace: &str, cq: &str| {
        format!(
            "---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {{name: q, namespace: {namespace}}}\nspec: {{clusterQueue: {cq}}}\n"
        )
    };
    [
        "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: a100}\n"
            .to_string(),
        "---\napiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: v100}\n"
            .to_string(),
        cq(
            "research",
            &format!("fairSharing: {{weight: \"{weight}\"}}\n  "),
        ),
        cq("product", ""),
        lq("research", "research"),
        lq("product", "product"),
        lq("dev", "research"),
    ]
    .concat()
}

/// The flavors, ClusterQueues and LocalQueues of `yaml`, with namespace
/// `research`.
fn cluster_from(yaml: &str) -> arbiter_core::model::cluster::Cluster {
    let loaded = load::load_str(yaml, Path::new("cluster.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let mut builder = ClusterBuilder::new();
    for doc in loaded.documents {
        let source = doc.source.to_string();
        match doc.manifest {
            Manifest::ResourceFlavor(x) => builder.flavor(source, x),
            Manifest::ClusterQueue(x) => builder.cluster_queue(source, *x),
            Manifest::LocalQueue(x) => builder.local_queue(source, x),
            other => panic!("unexpected manifest {:?}", other.name()),
        }
    }
    builder.namespace("cluster.yaml", "research".into(), Namespace::default());
    let cluster = builder.build().unwrap_or_else(|e| panic!("{e}"));
    cluster
}

fn scheduler_with(weight: &str) -> Scheduler {
    Scheduler::new(Arc::new(cluster_from(&cluster_yaml(weight))), &[])
}

fn scheduler() -> Scheduler {
    scheduler_with("1")
}

/// Submits a one-pod `Job` asking for `gpus` GPUs to LocalQueue `q` of `namespace`.
fn submit(
    state: &mut Scheduler,
    namespace: &str,
    name: &str,
    gpus: u32,
    priority: i32,
) -> WorkloadId {
    let cluster = state.cluster();
    let local_queue = cluster
        .local_queue_id(namespace, "q")
        .unwrap_or_else(|| panic!("no LocalQueue q in {namespace}"));
    let cluster_queue = cluster.local_queues[local_queue.index()].cluster_queue;
    let gpu = cluster
        .resource_id("nvidia.com/gpu")
        .expect("GPUs are covered");
    let amount = Amount::parse(&gpus.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let workload = Workload {
        kind: "Job".into(),
        namespace: namespace.into(),
        name: name.into(),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        queue_name: "q".into(),
        local_queue,
        cluster_queue,
        priority,
        priority_class: None,
        priority_weight: 1.0,
        pod_sets: vec![PodSetRequest {
            name: "main".into(),
            count: 1,
            min_count: None,
            per_pod: vec![(gpu, amount)],
            node_selector: BTreeMap::new(),
            required_affinity: None,
            tolerations: Vec::new(),
            topology: None,
        }],
    };
    let step = state.step(Millis::ZERO, vec![Input::Submit(workload)], &mut Hold);
    step.submitted[0]
}

/// Kueue's hooks, except that nothing is admitted: submitted workloads stay
/// pending, so the tests see the scheduler as they built it.
struct Hold;

impl Hooks for Hold {
    fn admission(&mut self, _: &AdmissionRequest<'_>) -> AdmissionVerdict {
        AdmissionVerdict::Deny {
            policy: "hold".into(),
            reason: "the test holds every workload".into(),
            retryable: true,
            tenant: None,
        }
    }
}

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| Runtime::new().expect("the WebAssembly runtime starts"))
}

/// The bundle `name` (from ConfigMap `platform/<name>`) with these
/// policies, loaded as the tenant bundle of `tenant` if given.
fn load_bundle(name: &str, tenant: Option<&str>, policies: &str) -> Result<Bundle, BundleError> {
    load_configmap("platform", name, tenant, policies, &[])
}

/// The bundle `name` from ConfigMap `<namespace>/<name>` with these
/// policies and binary files.
fn load_configmap(
    namespace: &str,
    name: &str,
    tenant: Option<&str>,
    policies: &str,
    binary: &[(&str, Vec<u8>)],
) -> Result<Bundle, BundleError> {
    let text = format!(
        "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: {name}, version: \"1\"}}\nspec:\n  policies:\n{policies}"
    );
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("bundle.yaml".into(), text)])),
        binary_data: Some(
            binary
                .iter()
                .map(|(file, bytes)| (file.to_string(), ByteString(bytes.clone())))
                .collect(),
        ),
        ..ConfigMap::default()
    };
    let options = LoadOptions {
        tenant: tenant.map(str::to_string),
        run_tests: true,
    };
    bundle::load(Files::ConfigMap(&cm), runtime(), &options)
}

fn platform(name: &str, policies: &str) -> Bundle {
    load_bundle(name, None, policies).unwrap_or_else(|e| panic!("{e}"))
}

fn tenant(namespace: &str, policies: &str) -> Bundle {
    load_bundle(&format!("{namespace}-rules"), Some(namespace), policies)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn engine(bundles: Vec<Bundle>) -> Engine {
    Engine::fixed(bundles, BTreeMap::new())
}

fn seconds(s: i64) -> Millis {
    Millis::from_secs(s)
}

fn admit(engine: &mut Engine, state: &Scheduler, id: WorkloadId, now: Millis) -> AdmissionVerdict {
    engine.begin(now);
    engine.admission(&AdmissionRequest {
        state: state.hook_state(),
        entry: state.entry(id),
        flavors: &[],
        borrowing: false,
        now,
    })
}

fn weigh(engine: &mut Engine, state: &Scheduler, ids: &[WorkloadId], now: Millis) -> Vec<Weight> {
    engine.begin(now);
    let batch: Vec<WeightRequest<'_>> = ids
        .iter()
        .map(|&id| WeightRequest {
            state: state.hook_state(),
            entry: state.entry(id),
            now,
        })
        .collect();
    engine.weight(&batch)
}

fn fair_share(engine: &mut Engine, state: &Scheduler, now: Millis) -> Vec<f64> {
    engine.begin(now);
    let shares = vec![0.0; state.cluster().cluster_queues.len()];
    engine.fair_share(&FairShareRequest {
        state: state.hook_state(),
        shares: &shares,
        now,
    })
}

/// One flavor (`a100`) with 2 nodes, between 1 and 4.
fn a100_load() -> FlavorLoad {
    FlavorLoad {
        flavor: FlavorId(0),
        nodes: 2,
        min_nodes: 1,
        max_nodes: 4,
        utilization: 0.5,
        pending_nodes: 0.0,
        target_utilization: 100.0,
    }
}

fn autoscale(engine: &mut Engine, state: &Scheduler, load: &FlavorLoad, now: Millis) -> Vec<u32> {
    engine.begin(now);
    engine.autoscale(&AutoscaleRequest {
        state: state.hook_state(),
        flavors: std::slice::from_ref(load),
        now,
    })
}

fn flavor(engine: &mut Engine, state: &Scheduler, id: WorkloadId) -> Option<Vec<FlavorId>> {
    engine.begin(seconds(1));
    let entry = state.entry(id);
    let candidates = [FlavorId(0), FlavorId(1)];
    engine
        .flavor(&FlavorRequest {
            state: state.hook_state(),
            entry,
            cluster_queue: entry.workload.cluster_queue,
            candidates: &candidates,
        })
        .map(|order| order.flavors)
}

/// A platform policy's denial.
fn deny(policy: &str, reason: &str, retryable: bool) -> AdmissionVerdict {
    AdmissionVerdict::Deny {
        policy: policy.into(),
        reason: reason.into(),
        retryable,
        tenant: None,
    }
}

fn stats_of<'e>(engine: &'e Engine, policy: &str) -> &'e PolicyStats {
    engine
        .stats()
        .find(|s| s.policy == policy)
        .unwrap_or_else(|| panic!("no statistics for {policy}"))
}

/// (policy, workload or subject, result, reused) of every logged decision.
fn log(engine: &Engine) -> Vec<(String, String, serde_json::Value, bool)> {
    engine
        .decisions()
        .iter()
        .map(|d| {
            let who = d.workload.clone().or(d.subject.clone()).unwrap_or_default();
            (d.policy.clone(), who, d.result.clone(), d.reused)
        })
        .collect()
}

#[test]
fn without_policies_every_hook_gives_the_built_in_answer() {
    let mut state = scheduler_with("3");
    let a = submit(&mut state, "research", "a", 2, 5);
    let mut engine = engine(vec![Bundle::empty("none")]);
    assert_eq!(
        admit(&mut engine, &state, a, seconds(1)),
        AdmissionVerdict::Allow
    );
    assert_eq!(
        weigh(&mut engine, &state, &[a], seconds(1)),
        [Weight::default()]
    );
    assert_eq!(fair_share(&mut engine, &state, seconds(1)), [3.0, 1.0]);
    // 50 % of 2 nodes busy at a 100 % target: 1 node.
    assert_eq!(
        autoscale(&mut engine, &state, &a100_load(), seconds(1)),
        [1]
    );
    assert_eq!(flavor(&mut engine, &state, a), None);
    assert!(engine.decisions().is_empty());
    assert_eq!(engine.stats().count(), 0);
}

#[test]
fn match_picks_workloads_by_namespace_kind_and_cluster_queue() {
    let mut state = scheduler();
    let research = submit(&mut state, "research", "a", 2, 0);
    let product = submit(&mut state, "product", "b", 2, 0);
    let dev = submit(&mut state, "dev", "c", 2, 0);
    let mut engine = engine(vec![platform(
        "base",
        "  - {name: no-research, hook: admission, match: {namespaces: [research]}, cel: {expression: 'false'}}\n  \
         - {name: no-pytorch, hook: admission, match: {kinds: [PyTorchJob]}, cel: {expression: 'false'}}\n  \
         - {name: no-research-cq, hook: admission, match: {clusterQueues: [research]}, cel: {expression: 'false'}}\n",
    )]);
    assert_eq!(
        admit(&mut engine, &state, research, seconds(1)),
        deny("no-research", "denied by no-research", true)
    );
    assert_eq!(
        admit(&mut engine, &state, product, seconds(1)),
        AdmissionVerdict::Allow
    );
    // dev's LocalQueue feeds ClusterQueue research.
    assert_eq!(
        admit(&mut engine, &state, dev, seconds(1)),
        deny("no-research-cq", "denied by no-research-cq", true)
    );
    assert_eq!(stats_of(&engine, "no-research").evaluations, 1);
    assert_eq!(stats_of(&engine, "no-research-cq").evaluations, 1);
    // No Job is a PyTorchJob: that policy never ran.
    assert!(engine.stats().all(|s| s.policy != "no-pytorch"));
}

#[test]
fn the_first_enforcing_denial_decides_with_its_own_reason_and_retryability() {
    let mut state = scheduler();
    let big = submit(&mut state, "research", "big", 16, 0);
    let small = submit(&mut state, "research", "small", 2, 0);
    let mut engine = engine(vec![platform(
        "base",
        "  - name: cap\n    hook: admission\n    \
         cel: {expression: 'workload.gpus <= 8', messageExpression: \"'asks for ' + string(workload.gpus) + ' GPUs'\", retryable: false}\n  \
         - {name: never, hook: admission, cel: {expression: 'false'}}\n",
    )]);
    assert_eq!(
        admit(&mut engine, &state, big, seconds(1)),
        deny("cap", "asks for 16 GPUs", false)
    );
    // The first denial decides: `never` was not asked about `big`.
    assert!(engine.stats().all(|s| s.policy != "never"));
    assert_eq!(
        admit(&mut engine, &state, small, seconds(1)),
        deny("never", "denied by never", true)
    );
    assert_eq!(stats_of(&engine, "cap").evaluations, 2);
    assert_eq!(stats_of(&engine, "never").evaluations, 1);
}

#[test]
fn a_failing_message_never_turns_a_denial_into_an_admission() {
    let mut state = scheduler();
    let big = submit(&mut state, "research", "big", 16, 0);
    let mut engine = engine(vec![platform(
        "base",
        "  - name: cap\n    hook: admission\n    failurePolicy: Ignore\n    \
         cel: {expression: 'workload.gpus <= 8', messageExpression: \"workload.labels['missing']\", retryable: false}\n",
    )]);
    let verdict = admit(&mut engine, &state, big, seconds(1));
    let AdmissionVerdict::Deny {
        policy,
        reason,
        retryable,
        ..
    } = verdict
    else {
        panic!("the denial was lost: {verdict:?}")
    };
    assert_eq!((policy.as_str(), retryable), ("cap", false));
    assert!(
        reason.starts_with("denied by cap (its messageExpression failed: ")
            && reason.contains("missing"),
        "{reason}"
    );
    assert!(stats_of(&engine, "cap").errors.is_empty());
}

#[test]
fn a_denial_reason_reaches_nobody_with_control_characters() {
    let mut state = scheduler();
    let big = submit(&mut state, "research", "big", 16, 0);
    let mut engine = engine(vec![platform(
        "base",
        r#"  - {name: forge, hook: admission, cel: {expression: 'false', messageExpression: "'ok\\u001b[2J\\rINFO admitted'"}}
"#,
    )]);
    let verdict = admit(&mut engine, &state, big, seconds(1));
    assert_eq!(verdict, deny("forge", r"ok\u{1b}[2J\rINFO admitted", true));
}

#[test]
fn a_dry_run_policy_is_evaluated_and_logged_but_never_acts() {
    let mut state = scheduler();
    let a = submit(&mut state, "research", "a", 2, 7);
    let mut engine = engine(vec![platform(
        "base",
        "  - {name: deny-all, hook: admission, mode: DryRun, cel: {expression: 'false'}}\n  \
         - {name: score, hook: weight, mode: DryRun, cel: {expression: 'double(workload.priority)'}}\n  \
         - {name: weights, hook: fairShare, mode: DryRun, cel: {expression: '5.0'}}\n  \
         - {name: nodes, hook: autoscale, mode: DryRun, cel: {expression: '4'}}\n  \
         - {name: order, hook: flavor, mode: DryRun, cel: {expression: \"['v100']\"}}\n",
    )]);
    assert_eq!(
        admit(&mut engine, &state, a, seconds(1)),
        AdmissionVerdict::Allow
    );
    assert_eq!(
        weigh(&mut engine, &state, &[a], seconds(1)),
        [Weight::default()]
    );
    assert_eq!(fair_share(&mut engine, &state, seconds(1)), [1.0, 1.0]);
    assert_eq!(
        autoscale(&mut engine, &state, &a100_load(), seconds(1)),
        [1]
    );
    assert_eq!(flavor(&mut engine, &state, a), None);
    let results: Vec<(String, serde_json::Value)> = engine
        .decisions()
        .iter()
        .map(|d| {
            assert_eq!(d.mode, Mode::DryRun, "{d:?}");
            (d.policy.clone(), d.result.clone())
        })
        .collect();
    assert_eq!(
        results,
        [
            ("deny-all".to_string(), serde_json::json!("deny")),
            ("score".to_string(), serde_json::json!(7.0)),
            ("weights".to_string(), serde_json::json!(5.0)),
            ("weights".to_string(), serde_json::json!(5.0)),
            ("nodes".to_string(), serde_json::json!(4)),
            ("order".to_string(), serde_json::json!(["v100"])),
        ]
    );
}

#[test]
fn failure_policy_fail_holds_the_workload_and_ignore_lets_it_through() {
    let mut state = scheduler();
    let a = submit(&mut state, "research", "a", 2, 0);
    let failing = "cel: {expression: \"workload.labels['team'] == 'nlp'\"}";
    let mut fail = engine(vec![platform(
        "strict",
        &format!("  - {{name: team, hook: admission, {failing}}}\n"),
    )]);
    assert_eq!(
        admit(&mut fail, &state, a, seconds(1)),
        deny(
            "team",
            "policy failed (cel error: no such key: team); failurePolicy Fail holds the workload until it succeeds",
            true
        )
    );
    let mut ignore = engine(vec![platform(
        "lenient",
        &format!("  - {{name: team, hook: admission, failurePolicy: Ignore, {failing}}}\n  - {{name: after, hook: admission, cel: {{expression: 'true'}}}}\n"),
    )]);
    assert_eq!(
        admit(&mut ignore, &state, a, seconds(1)),
        AdmissionVerdict::Allow
    );
    // The policies after a failed one that is ignored are still asked.
    assert_eq!(stats_of(&ignore, "after").evaluations, 1);
    for engine in [&fail, &ignore] {
        let stats = stats_of(engine, "team");
        assert_eq!(stats.evaluations, 1);
        assert_eq!(stats.errors, BTreeMap::from([("cel".to_string(), 1)]));
        let d = &engine.decisions()[0];
        assert_eq!(d.result, serde_json::json!("error"));
        assert_eq!(d.error.as_deref(), Some("cel"));
        assert_eq!(d.reason.as_deref(), Some("no such key: team"));
        assert_eq!(engine.errors(), 1);
    }
}

#[test]
fn a_failing_weight_fairshare_autoscale_or_flavor_policy_falls_back_whatever_its_failure_policy() {
    let mut state = scheduler_with("3");
    let a = submit(&mut state, "research", "a", 2, 0);
    let mut engine = engine(vec![platform(
        "base",
        "  - {name: score, hook: weight, cel: {expression: '1.0 / 0.0'}}\n  \
         - {name: weights, hook: fairShare, cel: {expression: '-1.0'}}\n  \
         - {name: nodes, hook: autoscale, cel: {expression: \"'many'\"}}\n  \
         - {name: order, hook: flavor, cel: {expression: \"['h100']\"}}\n",
    )]);
    assert_eq!(
        weigh(&mut engine, &state, &[a], seconds(1)),
        [Weight::default()]
    );
    assert_eq!(fair_share(&mut engine, &state, seconds(1)), [3.0, 1.0]);
    assert_eq!(
        autoscale(&mut engine, &state, &a100_load(), seconds(1)),
        [1]
    );
    assert_eq!(flavor(&mut engine, &state, a), None);
    let kinds: Vec<(String, Option<String>)> = engine
        .decisions()
        .iter()
        .map(|d| (d.policy.clone(), d.error.clone()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("score".to_string(), Some("not_finite".to_string())),
            ("weights".to_string(), Some("bad_output".to_string())),
            ("nodes".to_string(), Some("wrong_type".to_string())),
            ("order".to_string(), Some("bad_output".to_string())),
        ]
    );
    assert_eq!(engine.errors(), 4);
}

#[test]
fn enforcing_policies_decide_weights_fair_shares_nodes_and_flavor_order() {
    let mut state = scheduler();
    let a = submit(&mut state, "research", "a", 2, 3);
    let b = submit(&mut state, "product", "b", 2, 1);
    let mut engine = engine(vec![platform(
        "base",
        "  - {name: by-priority, hook: weight, cel: {expression: 'double(workload.priority) * 10.0'}}\n  \
         - {name: research-first, hook: weight, match: {namespaces: [research]}, cel: {expression: '1.0'}}\n  \
         - {name: research-weight, hook: fairShare, match: {clusterQueues: [research]}, cel: {expression: '4.0'}}\n  \
         - {name: all-weights, hook: fairShare, cel: {expression: '2.0'}}\n  \
         - {name: many-nodes, hook: autoscale, cel: {expression: '100'}}\n  \
         - {name: v100-first, hook: flavor, cel: {expression: \"['v100', 'a100']\"}}\n",
    )]);
    // Platform scores add up.
    assert_eq!(
        weigh(&mut engine, &state, &[a, b], seconds(1)),
        [
            Weight {
                score: 31.0,
                tenant: None
            },
            Weight {
                score: 10.0,
                tenant: None
            }
        ]
    );
    // The first enforcing policy to answer for a ClusterQueue decides it.
    assert_eq!(fair_share(&mut engine, &state, seconds(1)), [4.0, 2.0]);
    assert_eq!(stats_of(&engine, "all-weights").evaluations, 1);
    // Clamped to the pool's bounds.
    assert_eq!(
        autoscale(&mut engine, &state, &a100_load(), seconds(1)),
        [4]
    );
    assert_eq!(
        flavor(&mut engine, &state, a),
        Some(vec![FlavorId(1), FlavorId(0)])
    );
}

#[test]
fn tenant_bundles_score_only_their_own_namespace_and_only_into_the_tenant_score() {
    let mut state = scheduler();
    let a = submit(&mut state, "research", "a", 2, 1);
    let b = submit(&mut state, "product", "b", 2, 2);
    let c = submit(&mut state, "research", "c", 2, 3);
    let d = submit(&mut state, "dev", "d", 2, 4);
    let mut tenants = BTreeMap::new();
    tenants.insert(
        "research".to_string(),
        tenant(
            "research",
            "  - {name: mine, hook: weight, cel: {expression: 'double(workload.gpus) * 50.0'}}\n  \
             - {name: keep-out, hook: admission, cel: {expression: 'false'}}\n",
        ),
    );
    // A tenant bundle without weight policies leaves its tenant's scores alone.
    tenants.insert(
        "product".to_string(),
        tenant(
            "product",
            "  - {name: fine, hook: admission, cel: {expression: 'true'}}\n",
        ),
    );
    let mut engine = Engine::fixed(
        vec![platform(
            "base",
            "  - {name: by-priority, hook: weight, cel: {expression: 'double(workload.priority)'}}\n",
        )],
        tenants,
    );
    let weights = weigh(&mut engine, &state, &[a, b, c, d], seconds(1));
    let tenant_scores = |score: f64, tenant: Option<f64>| Weight { score, tenant };
    assert_eq!(
        weights,
        [
            tenant_scores(1.0, Some(100.0)),
            tenant_scores(2.0, None),
            tenant_scores(3.0, Some(100.0)),
            tenant_scores(4.0, None),
        ]
    );
    assert_eq!(stats_of(&engine, "mine").evaluations, 2);
    // Tenant admission policies see only their own namespace's workloads.
    // A tenant's denial says whose it is, so the core never lets it block a queue.
    assert_eq!(
        admit(&mut engine, &state, a, seconds(1)),
        AdmissionVerdict::Deny {
            policy: "keep-out".into(),
            reason: "denied by keep-out".into(),
            retryable: true,
            tenant: Some("research".into()),
        }
    );
    assert_eq!(
        admit(&mut engine, &state, b, seconds(1)),
        AdmissionVerdict::Allow
    );
    assert_eq!(
        admit(&mut engine, &state, d, seconds(1)),
        AdmissionVerdict::Allow
    );
    assert_eq!(stats_of(&engine, "keep-out").evaluations, 1);
}

#[test]
fn statistics_count_every_evaluation_and_error_per_policy() {
    let mut state = scheduler();
    let ids: Vec<WorkloadId> = (0..3)
        .map(|i| submit(&mut state, "research", &format!("w{i}"), 2, i))
        .collect();
    let mut engine = engine(vec![platform(
        "base",
        "  - {name: odd-fails, hook: weight, cel: {expression: 'workload.priority == 1 ? 1.0 / 0.0 : 1.0'}}\n  \
         - {name: one, hook: weight, cel: {expression: '1.0'}}\n",
    )]);
    weigh(&mut engine, &state, &ids, seconds(1));
    weigh(&mut engine, &state, &ids[..2], seconds(2));
    let one = stats_of(&engine, "one");
    assert_eq!(
        (
            one.bundle.as_str(),
            one.source.as_str(),
            one.hook.as_str(),
            one.language.as_str()
        ),
        ("base", "ConfigMap platform/base", "weight", "cel")
    );
    // A batch counts one evaluation per workload.
    assert_eq!(one.evaluations, 5);
    assert!(one.errors.is_empty());
    assert_eq!(one.latency_micros.values().sum::<u64>(), 5);
    assert!(one.total_micros >= one.max_micros);
    // A failed batch counts once, as one failed evaluation.
    let odd = stats_of(&engine, "odd-fails");
    assert_eq!(odd.evaluations, 2);
    assert_eq!(odd.errors, BTreeMap::from([("not_finite".to_string(), 2)]));
    assert_eq!((engine.evaluations(), engine.errors()), (7, 2));
}

#[test]
fn the_decision_log_records_who_what_when_and_can_leave_out_weights() {
    let mut state = scheduler();
    let a = submit(&mut state, "research", "a", 2, 0);
    let mut engine = engine(vec![platform(
        "base",
        "  - {name: cap, hook: admission, cel: {expression: 'workload.gpus <= 8'}}\n  \
         - {name: one, hook: weight, cel: {expression: '1.0'}}\n  \
         - {name: broken, hook: weight, match: {kinds: [Job]}, cel: {expression: \"workload.labels['x'] == 'y' ? 1.0 : 0.0\"}}\n  \
         - {name: weights, hook: fairShare, cel: {expression: '2.0'}}\n",
    )]);
    admit(&mut engine, &state, a, seconds(30));
    let d = &engine.decisions()[0];
    assert_eq!(
        (
            d.at_seconds,
            d.bundle.as_str(),
            d.policy.as_str(),
            d.hook,
            d.mode
        ),
        (30.0, "base", "cap", Hook::Admission, Mode::Enforce)
    );
    assert_eq!(
        (d.workload.as_deref(), d.subject.as_deref()),
        (Some("research/a"), None)
    );
    assert_eq!(
        (
            d.result.clone(),
            d.reason.clone(),
            d.error.clone(),
            d.reused
        ),
        (serde_json::json!("allow"), None, None, false)
    );
    engine.log_weights = false;
    weigh(&mut engine, &state, &[a], seconds(31));
    fair_share(&mut engine, &state, seconds(32));
    // Successful weights are left out; the failed one stays, with no workload named.
    assert_eq!(
        log(&engine),
        [
            (
                "cap".into(),
                "research/a".into(),
                serde_json::json!("allow"),
                false
            ),
            (
                "broken".into(),
                String::new(),
                serde_json::json!("error"),
                false
            ),
            (
                "weights".into(),
                "research".into(),
                serde_json::json!(2.0),
                false
            ),
            (
                "weights".into(),
                "product".into(),
                serde_json::json!(2.0),
                false
            ),
        ]
    );
    // Left out of the log, still counted.
    assert_eq!(stats_of(&engine, "one").evaluations, 1);
    assert_eq!(engine.take_decisions().len(), 4);
    assert!(engine.decisions().is_empty());
}

#[test]
fn an_engine_keeping_recent_decisions_records_them_there_and_not_in_the_log() {
    let mut state = scheduler();
    let a = submit(&mut state, "research", "a", 2, 0);
    let recent = RecentDecisions::new(10);
    let mut engine = engine(vec![platform(
        "base",
        "  - {name: cap, hook: admission, cel: {expression: 'workload.gpus <= 8'}}\n",
    )])
    .keep_recent(recent.clone());
    admit(&mut engine, &state, a, seconds(30));
    admit(&mut engine, &state, a, seconds(31));
    assert!(engine.decisions().is_empty(), "the log stays empty");
    let kept = recent.about("research/a");
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        (
            kept[0].policy.as_str(),
            kept[0].result.clone(),
            kept[0].repeats
        ),
        ("cap", serde_json::json!("allow"), 1)
    );
    // Still counted in the statistics.
    assert_eq!(
        stats_of(&engine, "cap").evaluations + stats_of(&engine, "cap").reused,
        2
    );
}

#[test]
fn a_time_free_answer_is_reused_until_its_view_or_bundle_changes() {
    let state = scheduler();
    let source = Arc::new(Reloadable::new(platform(
        "base",
        "  - {name: static, hook: fairShare, match: {clusterQueues: [research]}, cel: {expression: 'clusterQueue.weight * 2.0'}}\n  \
         - {name: clock, hook: fairShare, match: {clusterQueues: [product]}, cel: {expression: 'now'}}\n",
    )));
    let mut engine = Engine::new(Sources {
        platform: vec![source.clone()],
        tenants: BTreeMap::new(),
    });
    assert_eq!(fair_share(&mut engine, &state, seconds(10)), [2.0, 10.0]);
    assert_eq!(fair_share(&mut engine, &state, seconds(20)), [2.0, 20.0]);
    let reused = stats_of(&engine, "static");
    assert_eq!((reused.evaluations, reused.reused), (1, 1));
    // A policy that reads `now` is evaluated every time.
    let clock = stats_of(&engine, "clock");
    assert_eq!((clock.evaluations, clock.reused), (2, 0));
    let second = engine
        .decisions()
        .iter()
        .filter(|d| d.policy == "static")
        .nth(1)
        .expect("two static decisions");
    assert!(second.reused);
    assert_eq!(second.duration_micros, 0.0);
    assert_eq!(second.result, serde_json::json!(2.0));

    // Another view (the weight in force changed): evaluated again.
    let heavier = scheduler_with("3");
    assert_eq!(fair_share(&mut engine, &heavier, seconds(30)), [6.0, 30.0]);
    assert_eq!(stats_of(&engine, "static").evaluations, 2);

    // Another bundle in force, even one deciding the same: evaluated again.
    let outcome = source.reload_with(|| {
        load_bundle(
            "base",
            None,
            "  - {name: static, hook: fairShare, match: {clusterQueues: [research]}, cel: {expression: '2.0 * clusterQueue.weight'}}\n",
        )
    });
    assert!(
        matches!(outcome, crate::reload::ReloadOutcome::Swapped { .. }),
        "{outcome:?}"
    );
    assert_eq!(fair_share(&mut engine, &heavier, seconds(40)), [6.0, 1.0]);
    let after = stats_of(&engine, "static");
    assert_eq!((after.evaluations, after.reused), (3, 1));
}

#[test]
fn autoscale_answers_are_clamped_and_reused_for_the_same_load() {
    let state = scheduler();
    let mut engine = engine(vec![platform(
        "base",
        "  - {name: none, hook: autoscale, cel: {expression: '-3'}}\n",
    )]);
    let load = a100_load();
    assert_eq!(autoscale(&mut engine, &state, &load, seconds(1)), [1]);
    assert_eq!(autoscale(&mut engine, &state, &load, seconds(2)), [1]);
    let busier = FlavorLoad {
        pending_nodes: 1.0,
        ..load
    };
    assert_eq!(autoscale(&mut engine, &state, &busier, seconds(3)), [1]);
    let stats = stats_of(&engine, "none");
    assert_eq!((stats.evaluations, stats.reused), (2, 1));
    // Logged as clamped, by flavor.
    assert_eq!(
        log(&engine),
        [
            ("none".into(), "a100".into(), serde_json::json!(1), false),
            ("none".into(), "a100".into(), serde_json::json!(1), true),
            ("none".into(), "a100".into(), serde_json::json!(1), false),
        ]
    );
}

/// A tenant bundle named like the platform's, denying on every retry: one
/// entry per (policy, workload, decision, reason), each naming its source
/// and tenant, so the two are never confused and nothing is stored twice.
#[test]
fn a_decision_repeated_every_cycle_is_one_entry_naming_its_source_and_tenant() {
    let mut state = scheduler();
    let a = submit(&mut state, "research", "a", 2, 0);
    let platform_bundle = platform(
        "platform-default",
        "  - {name: gate, hook: admission, cel: {expression: 'true'}}\n",
    );
    let impostor = load_configmap(
        "research",
        "platform-default",
        Some("research"),
        "  - {name: gate, hook: admission, cel: {expression: 'false', messageExpression: \"'no, ' + string(workload.gpus) + ' GPUs'\"}}\n",
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut engine = Engine::fixed(
        vec![platform_bundle],
        BTreeMap::from([("research".to_string(), impostor)]),
    );
    for t in 1..=50 {
        admit(&mut engine, &state, a, seconds(t));
    }
    let logged: Vec<_> = engine
        .decisions()
        .iter()
        .map(|d| {
            (
                d.source.as_str(),
                d.tenant.as_deref(),
                d.bundle.as_str(),
                d.result.clone(),
                d.reason.as_deref(),
                d.at_seconds,
                d.repeats,
                d.last_at_seconds,
            )
        })
        .collect();
    assert_eq!(
        logged,
        [
            (
                "ConfigMap platform/platform-default",
                None,
                "platform-default",
                serde_json::json!("allow"),
                None,
                1.0,
                49,
                Some(50.0)
            ),
            (
                "ConfigMap research/platform-default",
                Some("research"),
                "platform-default",
                serde_json::json!("deny"),
                Some("no, 2 GPUs"),
                1.0,
                49,
                Some(50.0)
            ),
        ]
    );
    let json = serde_json::to_value(&engine.decisions()[0]).unwrap_or_default();
    assert_eq!(json["tenant"], serde_json::Value::Null, "{json}");
    assert_eq!(json["repeats"], 49, "{json}");
    // A changed answer is a new entry; the same one again counts on it.
    let b = submit(&mut state, "research", "b", 3, 0);
    admit(&mut engine, &state, b, seconds(60));
    admit(&mut engine, &state, b, seconds(61));
    let last = engine.decisions().last().cloned();
    assert_eq!(
        last.map(|d| (d.workload, d.reason, d.repeats)),
        Some((Some("research/b".into()), Some("no, 3 GPUs".into()), 1))
    );
    assert_eq!(stats_of(&engine, "gate").decisions_dropped, 0);
}

/// Each policy keeps at most its cap of entries; the rest are counted.
#[test]
fn a_policy_keeps_at_most_its_cap_of_decisions_and_counts_what_it_dropped() {
    let mut state = scheduler();
    let a = submit(&mut state, "research", "a", 1, 0);
    let policies = "  - {name: clock, hook: weight, cel: {expression: 'now'}}\n";
    // A tenant's policy and a platform one, each at its own cap.
    let engines = [
        (
            Engine::fixed(
                Vec::new(),
                BTreeMap::from([("research".to_string(), tenant("research", policies))]),
            ),
            MAX_TENANT_DECISIONS_PER_POLICY,
        ),
        (
            engine(vec![platform("platform", policies)]),
            MAX_DECISIONS_PER_POLICY,
        ),
    ];
    for (mut engine, cap) in engines {
        let calls = cap + 50;
        for t in 1..=calls {
            weigh(&mut engine, &state, &[a], seconds(t as i64));
        }
        assert_eq!(engine.decisions().len(), cap);
        let stats = stats_of(&engine, "clock");
        assert_eq!(
            (stats.evaluations, stats.decisions_dropped),
            (calls as u64, 50)
        );
        // Taken away, the log starts again; the dropped count stays.
        assert_eq!(engine.take_decisions().len(), cap);
        weigh(&mut engine, &state, &[a], seconds(calls as i64 + 1));
        assert_eq!(engine.decisions().len(), 1);
        assert_eq!(stats_of(&engine, "clock").decisions_dropped, 50);
    }
}

/// A weight plugin that logs, on every call, one fixed line (with a
/// terminal escape) and the last 40 bytes of its request (where `now` is).
fn chatty_weight_wasm() -> Vec<u8> {
    wat::parse_str(
        r#"(module
  (import "arbiter" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "{\"scores\":[1]}")
  (data (i32.const 2048) "same\1b[2J")
  (func (export "arbiter_abi_version") (result i32) i32.const 1)
  (func (export "arbiter_alloc") (param i32) (result i32) i32.const 4096)
  (func (export "arbiter_weight") (param $p i32) (param $n i32) (result i64)
    (call $log (i32.const 2) (i32.const 2048) (i32.const 8))
    (call $log (i32.const 2)
      (i32.sub (i32.add (local.get $p) (local.get $n)) (i32.const 40))
      (i32.const 40))
    i64.const 4398046511118))"#,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn plugin_lines_are_kept_per_policy_with_repeats_counted_and_a_cap() {
    let mut state = scheduler();
    let a = submit(&mut state, "research", "a", 1, 0);
    // A tenant's plugin and a platform one, each at its own cap.
    for (tenant, cap) in [
        (Some("research"), MAX_TENANT_LOG_LINES_PER_POLICY),
        (None, MAX_LOG_LINES_PER_POLICY),
    ] {
        let chatty = load_configmap(
            "research",
            "chatty",
            tenant,
            "  - {name: chatty, hook: weight, wasm: {module: chatty.wasm}}\n",
            &[("chatty.wasm", chatty_weight_wasm())],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut engine = match tenant {
            Some(t) => Engine::fixed(Vec::new(), BTreeMap::from([(t.to_string(), chatty)])),
            None => engine(vec![chatty]),
        };
        let calls = cap as i64 + 50;
        for t in 1..=calls {
            weigh(&mut engine, &state, &[a], seconds(t));
        }
        let lines = engine.take_plugin_logs();
        assert_eq!(lines.len(), cap);
        assert_eq!(
            (
                lines[0].line.as_str(),
                lines[0].repeats,
                lines[0].source.as_str(),
                lines[0].tenant.as_deref()
            ),
            (
                "same\\u{1b}[2J",
                calls as u64 - 1,
                "ConfigMap research/chatty",
                tenant
            )
        );
        assert!(lines[1..]
            .iter()
            .all(|l| l.repeats == 0 && l.policy == "chatty"));
        // `calls` distinct request tails: cap - 1 kept beside the fixed
        // line, 51 dropped.
        assert_eq!(stats_of(&engine, "chatty").log_lines_dropped, 51);
        assert!(engine.take_plugin_logs().is_empty());
    }
}

/// An evaluation error may quote what the policy chose (here a CEL map key
/// with a terminal escape): the reason and the log get it escaped.
#[test]
fn an_error_message_is_made_safe_before_it_is_logged_or_shown() {
    let mut state = scheduler();
    let a = submit(&mut state, "research", "a", 1, 0);
    let mut engine = engine(vec![platform(
        "base",
        "  - {name: lookup, hook: admission, cel: {expression: \"workload.labels['\\\\u001b[2J'] == 'x'\"}}\n",
    )]);
    let AdmissionVerdict::Deny { reason, .. } = admit(&mut engine, &state, a, seconds(1)) else {
        panic!("failurePolicy Fail denies on an error");
    };
    let logged = engine.decisions()[0].reason.clone().unwrap_or_default();
    for text in [&reason, &logged] {
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(text.contains("\\u{1b}[2J"), "{text:?}");
    }
}

/// The admission answer for `id` from the bundles the engine pinned last
/// (no `begin`: what a cycle already running sees).
fn admit_pinned(engine: &mut Engine, state: &Scheduler, id: WorkloadId) -> AdmissionVerdict {
    engine.admission(&AdmissionRequest {
        state: state.hook_state(),
        entry: state.entry(id),
        flavors: &[],
        borrowing: false,
        now: seconds(1),
    })
}

fn source(bundle: Bundle) -> Arc<Reloadable<Bundle>> {
    Arc::new(Reloadable::new(bundle))
}

#[test]
fn sources_added_replaced_and_removed_while_a_cycle_runs_apply_from_the_next_pin() {
    let mut state = scheduler();
    let big = submit(&mut state, "research", "big", 12, 0);
    let shared = SharedSources::new(Sources::default());
    let mut engine = Engine::shared(shared.clone());
    assert_eq!(
        admit(&mut engine, &state, big, seconds(1)),
        AdmissionVerdict::Allow
    );
    assert!(
        !engine.policies_changed(),
        "nothing changed since it was built"
    );

    // Added while a cycle is pinned: that cycle does not see it, the next does.
    engine.begin(seconds(1));
    let cap = |max: u32| {
        source(platform(
            "cap",
            &format!("  - {{name: at-most-{max}, hook: admission, cel: {{expression: 'workload.gpus <= {max}'}}}}\n"),
        ))
    };
    shared.update(|s| s.platform.push(cap(8)));
    assert_eq!(
        admit_pinned(&mut engine, &state, big),
        AdmissionVerdict::Allow
    );
    assert!(!engine.policies_changed());
    assert_eq!(
        admit(&mut engine, &state, big, seconds(2)),
        deny("at-most-8", "denied by at-most-8", true)
    );
    assert!(
        engine.policies_changed(),
        "the scheduler hears of the new source"
    );
    assert!(!engine.policies_changed(), "once");

    // Replaced (another source for the same place): the pinned cycle keeps the old one whole.
    engine.begin(seconds(3));
    shared.update(|s| s.platform = vec![cap(4)]);
    assert_eq!(
        admit_pinned(&mut engine, &state, big),
        deny("at-most-8", "denied by at-most-8", true)
    );
    assert_eq!(
        admit(&mut engine, &state, big, seconds(4)),
        deny("at-most-4", "denied by at-most-4", true)
    );
    assert!(engine.policies_changed());

    // Removed, and every other handle on it dropped: the pinned cycle still
    // holds the bundle; the next has none.
    engine.begin(seconds(5));
    shared.update(|s| s.platform.clear());
    assert!(shared.snapshot().platform.is_empty());
    assert_eq!(
        admit_pinned(&mut engine, &state, big),
        deny("at-most-4", "denied by at-most-4", true)
    );
    assert_eq!(engine.bundles().len(), 1);
    assert_eq!(
        admit(&mut engine, &state, big, seconds(6)),
        AdmissionVerdict::Allow
    );
    assert!(engine.bundles().is_empty());
    assert!(engine.policies_changed());
    // Pinning the same set again is no change.
    engine.begin(seconds(7));
    assert!(!engine.policies_changed());
}

#[test]
fn a_tenant_appears_and_disappears_while_the_engine_runs() {
    let mut state = scheduler();
    let mine = submit(&mut state, "research", "mine", 2, 0);
    let other = submit(&mut state, "product", "other", 2, 0);
    let shared = SharedSources::new(Sources::default());
    let mut engine = Engine::shared(shared.clone());
    let scored = |tenant| Weight { score: 0.0, tenant };
    assert_eq!(
        weigh(&mut engine, &state, &[mine, other], seconds(1)),
        [scored(None), scored(None)]
    );
    shared.update(|s| {
        s.tenants.insert(
            "research".into(),
            source(tenant(
                "research",
                "  - {name: mine, hook: weight, cel: {expression: '7.0'}}\n",
            )),
        )
    });
    assert_eq!(
        weigh(&mut engine, &state, &[mine, other], seconds(2)),
        [scored(Some(7.0)), scored(None)]
    );
    assert!(engine.policies_changed());
    shared.update(|s| s.tenants.remove("research"));
    assert_eq!(
        weigh(&mut engine, &state, &[mine, other], seconds(3)),
        [scored(None), scored(None)],
        "without its bundle the tenant falls back to no tenant score"
    );
    assert!(engine.policies_changed());
}

#[test]
fn a_source_added_before_a_memoized_one_is_never_answered_from_the_old_memo() {
    let state = scheduler();
    let weights = |times: &str| {
        format!("  - {{name: times-{times}, hook: fairShare, match: {{clusterQueues: [research]}}, cel: {{expression: 'clusterQueue.weight * {times}'}}}}\n")
    };
    let doubling = source(platform("doubling", &weights("2.0")));
    let shared = SharedSources::new(Sources {
        platform: vec![doubling.clone()],
        tenants: BTreeMap::new(),
    });
    let mut engine = Engine::shared(shared.clone());
    assert_eq!(fair_share(&mut engine, &state, seconds(1)), [2.0, 1.0]);
    assert_eq!(fair_share(&mut engine, &state, seconds(2)), [2.0, 1.0]);
    assert_eq!(stats_of(&engine, "times-2.0").reused, 1);
    // The new source takes index 0, where the memo holds times-2.0's answer
    // for the same view; the first enforcing answer is now times-5.0's.
    shared.update(|s| {
        s.platform
            .insert(0, source(platform("quintupling", &weights("5.0"))))
    });
    assert_eq!(fair_share(&mut engine, &state, seconds(3)), [5.0, 1.0]);
    assert_eq!(stats_of(&engine, "times-5.0").evaluations, 1);
    // Removed again: times-2.0 answers, evaluated afresh at its old index.
    shared.update(|s| s.platform = vec![doubling.clone()]);
    assert_eq!(fair_share(&mut engine, &state, seconds(4)), [2.0, 1.0]);
    assert_eq!(stats_of(&engine, "times-2.0").evaluations, 2);
}
