//! Policy bundles from ConfigMaps, against a real kube-apiserver: the
//! operator (as `arbiter run` starts it, platform namespace
//! `arbiter-system`) loads a labelled ConfigMap's bundle before its first
//! decision, uses a new version from its next decision, keeps the last good
//! version when a new one is broken — saying so in a Warning Event on the
//! ConfigMap, its `arbiter.dev/bundle-status` annotation and the metrics —
//! loads tenant ConfigMaps under the tenant rules (one per namespace), and
//! lifts a bundle whose ConfigMap is deleted; a `--policies` directory
//! hot-reloads in the operator the same way; and a replica that follows
//! loads silently, then tells what is in force once it leads; and a
//! bundle ConfigMap changing every second never holds admission back.

mod support;

use std::time::Duration;

use arbiter_policy::metrics::{encode, PolicyMetrics};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;
use prometheus_client::registry::Registry;
use support::*;

fn metrics() -> (Registry, PolicyMetrics) {
    let mut registry = Registry::default();
    let metrics = PolicyMetrics::register(&mut registry);
    (registry, metrics)
}

/// Puts version 1 of the platform bundle `gpu-cap` (at most `max` GPUs
/// per job) into the platform namespace of the cluster `admin` talks to.
async fn platform_cap(admin: &Client, max: u32) {
    create_namespace(admin, PLATFORM_NAMESPACE).await;
    put_bundle(
        admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        &[("bundle.yaml", &gpu_cap("platform", 1, max))],
        &[],
    )
    .await;
}

const PLATFORM_SOURCE: &str = r#"bundle="ConfigMap arbiter-system/gpu-cap""#;

#[tokio::test]
async fn a_platform_configmap_decides_a_new_version_decides_next_and_deleting_it_lifts_it() {
    let (_cluster, admin) = full_cluster_with_setup().await;
    platform_cap(&admin, 4).await;
    let (registry, metrics) = metrics();
    let operator = start_operator_with_bundles(admin.clone(), Vec::new(), Some(metrics));

    let note = wait_event_in(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        "BundleLoaded",
        |_| true,
    )
    .await;
    assert!(
        note.starts_with("loaded platform@1 sha256:") && note.ends_with("as a platform bundle"),
        "{note}"
    );
    let status = wait_bundle_status(&admin, PLATFORM_NAMESPACE, "gpu-cap", |_| true).await;
    assert!(status.starts_with("loaded platform@1 sha256:"), "{status}");
    assert!(status.contains(" at 20"), "{status}");

    // Platform policy v1 denies a job over 4 GPUs, from the first decision.
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("greedy", 6))
        .await
        .unwrap();
    jobs.create(&PostParams::default(), &job("modest", 2))
        .await
        .unwrap();
    wait_for(&jobs, "modest", "admission", released).await;
    let (reason, message) = wait_condition(&admin, "job-greedy", "QuotaReserved", "False").await;
    assert_eq!(reason, "Denied", "{message}");
    assert!(message.contains("at-most-4-gpus"), "{message}");
    let note = wait_event(&admin, "greedy", "Denied").await;
    assert!(note.contains("at most 4 GPUs, got 6"), "{note}");
    stays_held(&jobs, "greedy").await;

    // Version 2 allows 6: the next decision admits the job v1 denied.
    let cap6 = gpu_cap("platform", 2, 6);
    put_bundle(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        &[("bundle.yaml", &cap6)],
        &[],
    )
    .await;
    wait_for(&jobs, "greedy", "admission under version 2", released).await;
    let note = wait_event_in(&admin, PLATFORM_NAMESPACE, "gpu-cap", "BundleLoaded", |n| {
        n.contains("platform@2")
    })
    .await;
    assert!(note.ends_with("; it replaces platform@1"), "{note}");
    wait_bundle_status(&admin, PLATFORM_NAMESPACE, "gpu-cap", |s| {
        s.starts_with("loaded platform@2 sha256:")
    })
    .await;
    // Its own status annotation never made it build again: one swap, no
    // other reload result.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reloads = |result: &str| {
        sample(
            &registry,
            &format!(
                r#"arbiter_policy_bundle_reloads_total{{{PLATFORM_SOURCE},result="{result}"}}"#
            ),
        )
    };
    assert_eq!(reloads("loaded"), Some(1.0), "{}", encode(&registry));
    assert_eq!(reloads("unchanged"), Some(0.0), "{}", encode(&registry));
    assert_eq!(reloads("rejected"), Some(0.0), "{}", encode(&registry));

    // Version 2 denies a 7-GPU job that fits; deleting the ConfigMap lifts the policy.
    finish(&jobs, "greedy").await;
    finish(&jobs, "modest").await;
    jobs.create(&PostParams::default(), &job("seven", 7))
        .await
        .unwrap();
    let (reason, message) = wait_condition(&admin, "job-seven", "QuotaReserved", "False").await;
    assert_eq!(reason, "Denied", "{message}");
    assert!(message.contains("at-most-6-gpus"), "{message}");
    Api::<ConfigMap>::namespaced(admin.clone(), PLATFORM_NAMESPACE)
        .delete("gpu-cap", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &jobs,
        "seven",
        "admission once the bundle is gone",
        released,
    )
    .await;
    let text = encode(&registry);
    assert!(
        !text.contains(&format!("arbiter_policy_bundle_info{{{PLATFORM_SOURCE}")),
        "a deleted bundle still shows in force:\n{text}"
    );
    operator.abort();
}

#[tokio::test]
async fn a_broken_version_is_rejected_and_told_and_the_last_good_one_keeps_deciding() {
    let (_cluster, admin) = cluster_with_setup().await;
    platform_cap(&admin, 4).await;
    let (registry, metrics) = metrics();
    let operator = start_operator_with_bundles(admin.clone(), Vec::new(), Some(metrics));
    wait_bundle_status(&admin, PLATFORM_NAMESPACE, "gpu-cap", |s| {
        s.starts_with("loaded platform@1")
    })
    .await;

    // Bad YAML: a Warning naming the loader's error and the version kept.
    put_bundle(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        &[(
            "bundle.yaml",
            "metadata: {name: platform, version: \"2\"\nspec: [",
        )],
        &[],
    )
    .await;
    let note = wait_event_in(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        "BundleRejected",
        |_| true,
    )
    .await;
    assert!(
        note.starts_with(
            "rejected the bundle (ConfigMap arbiter-system/gpu-cap: bundle.yaml is not valid YAML: "
        ),
        "{note}"
    );
    assert!(note.ends_with("); platform@1 stays in force"), "{note}");
    let status = wait_bundle_status(&admin, PLATFORM_NAMESPACE, "gpu-cap", |s| {
        s.starts_with("rejected ")
    })
    .await;
    assert!(
        status.contains("; in force: platform@1 sha256:"),
        "{status}"
    );

    // The operator goes on, and version 1 still decides.
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("greedy", 6))
        .await
        .unwrap();
    jobs.create(&PostParams::default(), &job("modest", 2))
        .await
        .unwrap();
    wait_for(&jobs, "modest", "admission", released).await;
    let (reason, message) = wait_condition(&admin, "job-greedy", "QuotaReserved", "False").await;
    assert_eq!(reason, "Denied", "{message}");
    assert!(message.contains("at-most-4-gpus"), "{message}");

    // /metrics after the rejection: counted, the latest attempt failed,
    // version 1 in force.
    let series = |name: &str, labels: &str| {
        sample(&registry, &format!("{name}{{{PLATFORM_SOURCE}{labels}}}"))
    };
    assert_eq!(
        series(
            "arbiter_policy_bundle_reloads_total",
            r#",result="rejected""#
        ),
        Some(1.0),
        "{}",
        encode(&registry)
    );
    assert_eq!(
        series("arbiter_policy_bundle_last_reload_success", ""),
        Some(0.0),
        "{}",
        encode(&registry)
    );
    let text = encode(&registry);
    assert!(
        text.contains(&format!(
            r#"arbiter_policy_bundle_info{{{PLATFORM_SOURCE},name="platform",version="1","#
        )),
        "{text}"
    );

    // No bundle.yaml at all, then a module whose bytes are not the pinned ones.
    put_bundle(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        &[("README", "see bundle.yaml")],
        &[],
    )
    .await;
    let note = wait_event_in(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        "BundleRejected",
        |n| {
            n.contains("bundle.yaml")
                && n.contains("has no key \"bundle.yaml\" in data or binaryData")
        },
    )
    .await;
    assert!(note.ends_with("; platform@1 stays in force"), "{note}");
    let pinned = format!(
        r#"apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {{name: platform, version: "3"}}
spec:
  policies:
  - name: scores
    hook: weight
    wasm: {{module: scores.wasm, sha256: "{}"}}
"#,
        "0".repeat(64)
    );
    put_bundle(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        &[("bundle.yaml", &pinned)],
        &[("scores.wasm", b"\0asm\x01\0\0\0")],
    )
    .await;
    let note = wait_event_in(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        "BundleRejected",
        |n| n.starts_with("rejected platform@3 ("),
    )
    .await;
    assert!(note.contains("wasm.sha256 pins 0000"), "{note}");
    assert!(note.ends_with("; platform@1 stays in force"), "{note}");

    // Fixed: loaded again, and it decides.
    let cap8 = gpu_cap("platform", 4, 8);
    put_bundle(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        &[("bundle.yaml", &cap8)],
        &[],
    )
    .await;
    wait_for(&jobs, "greedy", "admission under version 4", released).await;
    wait_bundle_status(&admin, PLATFORM_NAMESPACE, "gpu-cap", |s| {
        s.starts_with("loaded platform@4 sha256:")
    })
    .await;
    assert_eq!(
        series("arbiter_policy_bundle_last_reload_success", ""),
        Some(1.0),
        "{}",
        encode(&registry)
    );
    operator.abort();
}

#[tokio::test]
async fn tenant_configmaps_load_under_the_tenant_rules_one_per_namespace() {
    let (_cluster, admin) = cluster_with_setup().await;
    for ns in [PLATFORM_NAMESPACE, "team-b", "team-c"] {
        create_namespace(&admin, ns).await;
    }
    let weights = tenant_bundle(
        "team-a-weights",
        "  - {name: bigger-first, hook: weight, cel: {expression: 'double(workload.gpus)'}}\n",
    );
    put_bundle(
        &admin,
        "team-a",
        "weights",
        &[("bundle.yaml", &weights)],
        &[],
    )
    .await;
    let (registry, metrics) = metrics();
    let operator = start_operator_with_bundles(admin.clone(), Vec::new(), Some(metrics));

    let note = wait_event_in(&admin, "team-a", "weights", "BundleLoaded", |_| true).await;
    assert!(
        note.starts_with("loaded team-a-weights@1 sha256:")
            && note.ends_with("as the tenant bundle of team-a"),
        "{note}"
    );
    // The engine uses it for team-a's workloads.
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("scored", 2))
        .await
        .unwrap();
    wait_for(&jobs, "scored", "admission", released).await;
    let evaluations = sample(
        &registry,
        r#"arbiter_policy_evaluations_total{bundle="ConfigMap team-a/weights",policy="bigger-first",hook="weight"}"#,
    );
    assert!(evaluations >= Some(1.0), "{}", encode(&registry));

    // What only a platform bundle may do is refused in a tenant's.
    let fair_share = tenant_bundle(
        "sneaky",
        "  - {name: more-for-me, hook: fairShare, cel: {expression: '100.0'}}\n",
    );
    put_bundle(
        &admin,
        "team-b",
        "rules",
        &[("bundle.yaml", &fair_share)],
        &[],
    )
    .await;
    let note = wait_event_in(&admin, "team-b", "rules", "BundleRejected", |_| true).await;
    assert_eq!(
        note,
        "rejected sneaky@1 (ConfigMap team-b/rules: policy more-for-me: hook fairShare is not allowed in a tenant bundle (spec.tenant: team-b); tenant bundles hold only weight and admission policies); team-b has no tenant bundle in force"
    );
    let status = wait_bundle_status(&admin, "team-b", "rules", |_| true).await;
    assert!(status.starts_with("rejected sneaky@1: "), "{status}");
    assert!(status.contains("; in force: none at "), "{status}");
    let others = tenant_bundle(
        "nosy",
        "  - {name: deny-team-a, hook: admission, match: {namespaces: [team-a]}, cel: {expression: 'false'}}\n",
    );
    put_bundle(&admin, "team-c", "rules", &[("bundle.yaml", &others)], &[]).await;
    let note = wait_event_in(&admin, "team-c", "rules", "BundleRejected", |_| true).await;
    assert!(
        note.contains(
            "policy deny-team-a: match.namespaces names another namespace; a tenant bundle applies only to team-c"
        ),
        "{note}"
    );
    // Nothing of it applies: team-a's jobs are still admitted.
    jobs.create(&PostParams::default(), &job("unbothered", 2))
        .await
        .unwrap();
    wait_for(&jobs, "unbothered", "admission", released).await;

    // A second labelled ConfigMap in team-a is not used, and says which is
    // (named after the first, so it is the younger one even when both were
    // created within the same second of creationTimestamp).
    put_bundle(
        &admin,
        "team-a",
        "weights-2",
        &[("bundle.yaml", &weights)],
        &[],
    )
    .await;
    let note = wait_event_in(&admin, "team-a", "weights-2", "BundleIgnored", |_| true).await;
    assert!(
        note.contains("team-a/weights, which is older and is its tenant bundle"),
        "{note}"
    );
    let status = wait_bundle_status(&admin, "team-a", "weights-2", |_| true).await;
    assert!(
        status.starts_with("ignored: ConfigMap team-a/weights is the tenant bundle of team-a at "),
        "{status}"
    );
    // The one in force deleted, the other one becomes team-a's tenant bundle.
    Api::<ConfigMap>::namespaced(admin.clone(), "team-a")
        .delete("weights", &DeleteParams::default())
        .await
        .unwrap();
    let note = wait_event_in(&admin, "team-a", "weights-2", "BundleLoaded", |_| true).await;
    assert!(note.ends_with("as the tenant bundle of team-a"), "{note}");
    wait_bundle_status(&admin, "team-a", "weights-2", |s| s.starts_with("loaded ")).await;
    operator.abort();
}

#[tokio::test]
async fn a_platform_bundle_directory_hot_reloads_in_the_operator() {
    let (_cluster, admin) = cluster_with_setup().await;
    create_namespace(&admin, PLATFORM_NAMESPACE).await;
    let dir = tempfile::tempdir().unwrap();
    let write = |text: &str| {
        // As an editor saves: a new file renamed over the old one.
        let staged = dir.path().join(".bundle.yaml.new");
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, dir.path().join("bundle.yaml")).unwrap();
    };
    write(&gpu_cap("dir", 1, 4));
    let (registry, metrics) = metrics();
    let operator =
        start_operator_with_bundles(admin.clone(), vec![dir.path().to_path_buf()], Some(metrics));
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("greedy", 6))
        .await
        .unwrap();
    let note = wait_event(&admin, "greedy", "Denied").await;
    assert!(note.contains("at-most-4-gpus"), "{note}");

    // A broken save is rejected; version 1 stays and the operator goes on.
    write("spec: [");
    let source = format!(r#"bundle="{}""#, dir.path().display());
    let started = std::time::Instant::now();
    while sample(
        &registry,
        &format!("arbiter_policy_bundle_last_reload_success{{{source}}}"),
    ) != Some(0.0)
    {
        assert!(started.elapsed() < PATIENCE, "{}", encode(&registry));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    jobs.create(&PostParams::default(), &job("modest", 2))
        .await
        .unwrap();
    wait_for(&jobs, "modest", "admission", released).await;
    stays_held(&jobs, "greedy").await;

    // Version 2 allows 6: the next decision admits the job version 1 denied.
    write(&gpu_cap("dir", 2, 6));
    wait_for(&jobs, "greedy", "admission under version 2", released).await;
    let text = encode(&registry);
    assert!(
        text.contains(&format!(
            r#"arbiter_policy_bundle_info{{{source},name="dir",version="2","#
        )),
        "{text}"
    );
    operator.abort();
}

#[tokio::test]
async fn a_new_leader_announces_what_it_loaded_while_following() {
    let (_cluster, admin) = cluster_with_setup().await;
    platform_cap(&admin, 4).await;
    // A replica that follows: it loads every bundle (to take over warm)
    // and tells nothing.
    let leading = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let speaks = {
        let leading = leading.clone();
        std::sync::Arc::new(move || leading.load(std::sync::atomic::Ordering::Relaxed))
    };
    let options = arbiter_operator::policy_sources::BundleOptions {
        platform_namespace: PLATFORM_NAMESPACE.to_string(),
        dirs: Vec::new(),
    };
    let bundles = arbiter_operator::policy_sources::Bundles::load(options, None).unwrap();
    let _watching = bundles
        .watch(
            admin.clone(),
            std::sync::Arc::new(tokio::sync::Notify::new()),
            speaks,
        )
        .await
        .unwrap();
    // A broken version arrives while it follows (the leader gone, say).
    put_bundle(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        &[("bundle.yaml", "spec: [")],
        &[],
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), PLATFORM_NAMESPACE);
    let cm = configmaps.get("gpu-cap").await.unwrap();
    assert!(
        !cm.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("arbiter.dev/bundle-status"),
        "a follower wrote the status"
    );
    // It leads: what is in force, and the rejection, are told.
    leading.store(true, std::sync::atomic::Ordering::Relaxed);
    let status = wait_bundle_status(&admin, PLATFORM_NAMESPACE, "gpu-cap", |s| {
        s.starts_with("rejected ")
    })
    .await;
    assert!(
        status.contains("; in force: platform@1 sha256:"),
        "{status}"
    );
    let note = wait_event_in(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        "BundleRejected",
        |_| true,
    )
    .await;
    assert!(note.ends_with("platform@1 stays in force"), "{note}");
}

#[tokio::test]
async fn a_bundle_configmap_flapping_every_second_never_stops_admission() {
    let (_cluster, admin) = cluster_with_setup().await;
    platform_cap(&admin, 8).await;
    let _operator = start_operator_with_bundles(admin.clone(), Vec::new(), None);
    wait_bundle_status(&admin, PLATFORM_NAMESPACE, "gpu-cap", |s| {
        s.starts_with("loaded platform@1")
    })
    .await;
    // A GitOps loop gone wrong: a new version every second, every other
    // one broken, for 16 s.
    let flapper = {
        let admin = admin.clone();
        tokio::spawn(async move {
            for version in 2..18u32 {
                let text = if version % 2 == 0 {
                    gpu_cap("platform", version, 8)
                } else {
                    "spec: [".to_string()
                };
                put_bundle(
                    &admin,
                    PLATFORM_NAMESPACE,
                    "gpu-cap",
                    &[("bundle.yaml", &text)],
                    &[],
                )
                .await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    // Meanwhile jobs are admitted as ever.
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    admit_one_by_one(&jobs, "during", 4, 2).await;
    flapper.await.unwrap();
    // Its last version (17, broken) is told, with 16 in force.
    let status = wait_bundle_status(&admin, PLATFORM_NAMESPACE, "gpu-cap", |s| {
        s.contains("in force: platform@16 ")
    })
    .await;
    assert!(status.starts_with("rejected "), "{status}");
    wait_queue_usage(&admin, "research", 4, "8").await;
}
