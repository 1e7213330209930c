//! Hostile objects arriving through the API (issue 28, item 4), each
//! refused or contained and told, the other tenants unaffected. A tenant
//! allowed to write the Workloads of its namespace (which
//! `deploy/queue-manager.yaml` does not grant, but a cluster's own roles
//! may) edits them: their spec and their status, an admission claimed or
//! cleared — the operator's decisions stand (quota is charged from the
//! jobs), each edited Workload is written back to what was decided and
//! told in a Warning `WorkloadEdited` Event, and an admission forged on a
//! Workload, with an admission record beside it on the job, does not make
//! the job run across an operator restart. A tenant escalating through
//! the operator gets nothing: a LocalQueue pointing at a ClusterQueue
//! whose namespaceSelector leaves its namespace out admits nothing (told
//! on the job and its Workload, as Kueue tells it), a job naming a queue
//! that exists only in another namespace is held and told, and a tenant
//! bundle claiming what only the platform may is refused while the
//! platform's bundle and the other tenants' go on deciding. And 10,000
//! labelled ConfigMaps — a tenant's thousands in one namespace, and bundles
//! good and broken over a thousand namespaces — are each told (Events
//! bounded), while the jobs of everyone else are admitted.

mod support;

use std::time::Duration;

use arbiter_core::model::api::Workload;
use arbiter_operator::policy_sources::{EVENT_BURST, EVENT_REFILL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use support::*;

/// Gives the static user `user` what a tenant with a broad role in
/// `namespace` has: its jobs, its Workloads and their status, its
/// LocalQueues and ConfigMaps.
async fn tenant_with_workload_writes(
    cluster: &arbiter_testcluster::TestCluster,
    admin: &Client,
    namespace: &str,
    user: &str,
) -> Client {
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "broad-tenant", "namespace": namespace},
        "rules": [
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]},
            {"apiGroups": ["arbiter.dev"], "resources": ["workloads", "workloads/status", "localqueues"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
        ]
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "broad-tenant", "namespace": namespace},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": "broad-tenant", "apiGroup": "rbac.authorization.k8s.io"}
    });
    apply_yaml(admin, &serde_json::to_string(&role).unwrap()).await;
    apply_yaml(admin, &serde_json::to_string(&binding).unwrap()).await;
    let client = cluster.client_for(user).await.unwrap();
    // RBAC takes effect within a moment: wait until the tenant may write.
    let workloads: Api<Workload> = Api::namespaced(client.clone(), namespace);
    let started = std::time::Instant::now();
    while let Err(e) = workloads.list(&ListParams::default()).await {
        assert!(started.elapsed() < PATIENCE, "the tenant's role: {e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client
}

/// The Workload `name` of team-a, as JSON (null while there is none).
async fn workload(client: &Client, name: &str) -> Value {
    workload_in(client, "team-a", name).await
}

/// Waits until the Workload `name` of team-a satisfies `check`; returns it.
async fn wait_workload(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    wait_workload_in(client, "team-a", name, what, check).await
}

fn merge(value: Value) -> Patch<Value> {
    Patch::Merge(value)
}

#[tokio::test]
async fn workloads_edited_by_a_tenant_are_written_back_and_decide_nothing() {
    let (cluster, admin) = cluster_with_setup().await;
    let tenant = tenant_with_workload_writes(&cluster, &admin, "team-a", "alice").await;
    let _operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("running", 6))
        .await
        .unwrap();
    wait_for(&jobs, "running", "admitted", released).await;
    jobs.create(&PostParams::default(), &job("waiting", 6))
        .await
        .unwrap();
    wait_condition(&admin, "job-waiting", "QuotaReserved", "False").await;
    let running_before = wait_workload(&admin, "job-running", "admitted", |w| {
        condition_status(w, "Admitted").as_deref() == Some("True")
    })
    .await;
    let waiting_before = workload(&admin, "job-waiting").await;

    // The tenant edits both Workloads: the running one's spec says 100
    // pods of one GPU in another queue at a huge priority, and its status
    // drops the admission; the waiting one's status claims an admission.
    let workloads: Api<Workload> = Api::namespaced(tenant.clone(), "team-a");
    let params = PatchParams::default();
    workloads
        .patch(
            "job-running",
            &params,
            &merge(json!({"spec": {
                "queueName": "elsewhere", "priority": 1_000_000, "active": false,
                "podSets": [{"name": "main", "count": 100, "requests": {"nvidia.com/gpu": "1"}}],
            }})),
        )
        .await
        .unwrap();
    let now = "2026-01-01T00:00:00Z";
    workloads
        .patch_status(
            "job-running",
            &params,
            &merge(json!({"status": {
                "admission": null,
                "conditions": [{"type": "Admitted", "status": "False", "reason": "Edited",
                                "message": "cleared by the tenant", "lastTransitionTime": now}],
            }})),
        )
        .await
        .unwrap();
    let claimed = running_before["status"]["admission"].clone();
    assert!(claimed.is_object(), "{running_before}");
    workloads
        .patch_status(
            "job-waiting",
            &params,
            &merge(json!({"status": {
                "admission": claimed,
                "retries": 0,
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                     "message": "claimed by the tenant", "lastTransitionTime": now},
                    {"type": "Admitted", "status": "True", "reason": "Admitted",
                     "message": "claimed by the tenant", "lastTransitionTime": now},
                ],
            }})),
        )
        .await
        .unwrap();

    // Each is written back to what the operator decided, and told.
    let same = |w: &Value, before: &Value| {
        w["spec"] == before["spec"]
            && w["status"]["admission"] == before["status"]["admission"]
            && condition_status(w, "Admitted") == condition_status(before, "Admitted")
            && condition_status(w, "QuotaReserved") == condition_status(before, "QuotaReserved")
    };
    wait_workload(&admin, "job-running", "written back", |w| {
        same(w, &running_before)
    })
    .await;
    wait_workload(&admin, "job-waiting", "written back", |w| {
        same(w, &waiting_before)
    })
    .await;
    for (name, field) in [
        ("job-running", "spec.podSets"),
        ("job-waiting", "status.admission"),
    ] {
        let note = wait_event_in(&admin, "team-a", name, "WorkloadEdited", |_| true).await;
        assert!(
            note.starts_with(&format!(
                "Workload team-a/{name} was changed by someone other than Arbiter ("
            )) && note.contains(field)
                && note.contains("written back to what Arbiter decided"),
            "{note}"
        );
    }

    // Nothing was decided from the edits: the running job runs, the
    // waiting one waits, the quota is charged from the jobs.
    assert!(released(&jobs.get("running").await.unwrap()));
    stays_held(&jobs, "waiting").await;
    wait_queue_usage(&admin, "research", 1, "6").await;
    jobs.create(&PostParams::default(), &job("small", 2))
        .await
        .unwrap();
    wait_for(
        &jobs,
        "small",
        "admitted on the quota the jobs leave",
        released,
    )
    .await;
    wait_queue_usage(&admin, "research", 2, "8").await;
    assert!(same(
        &workload(&admin, "job-running").await,
        &running_before
    ));
    assert!(same(
        &workload(&admin, "job-waiting").await,
        &waiting_before
    ));

    // Written back, each Workload is Arbiter's again: when the running job
    // goes and the waiting one is admitted, its Workload says so, and no
    // Workload is told as edited again, nor any Arbiter alone wrote.
    jobs.delete("running", &Default::default()).await.unwrap();
    wait_for(
        &jobs,
        "waiting",
        "admitted once the quota is free",
        released,
    )
    .await;
    wait_workload(&admin, "job-waiting", "admitted", |w| {
        condition_status(w, "Admitted").as_deref() == Some("True")
            && w["status"]["admission"].is_object()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let events: Api<Event> = Api::namespaced(admin.clone(), "team-a");
    let mut edited: Vec<(String, bool)> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("WorkloadEdited"))
        .map(|e| {
            let name = e.regarding.and_then(|r| r.name).unwrap_or_default();
            (name, e.series.is_some())
        })
        .collect();
    edited.sort();
    assert_eq!(
        edited,
        [
            ("job-running".to_string(), false),
            ("job-waiting".to_string(), false)
        ],
        "one WorkloadEdited Event each, none repeated"
    );
}

/// A ClusterQueue taking its queue strictly in order: a small job waits
/// behind a big one that does not fit, though it would.
const STRICT: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: strict}
spec:
  namespaceSelector: {}
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: strict, namespace: team-a}
spec: {clusterQueue: strict}
"#;

fn strict_job(name: &str, gpus: u32) -> Job {
    let mut job = job(name, gpus);
    job.metadata
        .labels
        .get_or_insert_default()
        .insert("arbiter.dev/queue-name".into(), "strict".into());
    job
}

#[tokio::test]
async fn an_admission_forged_on_a_workload_does_not_make_a_job_run_across_a_restart() {
    let (cluster, admin) = cluster_with_setup().await;
    apply_yaml(&admin, STRICT).await;
    let tenant = tenant_with_workload_writes(&cluster, &admin, "team-a", "alice").await;
    let operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &strict_job("honest", 4))
        .await
        .unwrap();
    let honest = wait_for(&jobs, "honest", "admitted", released).await;
    // The head of the queue does not fit; the small job behind it would,
    // but StrictFIFO keeps it waiting.
    jobs.create(&PostParams::default(), &strict_job("head", 8))
        .await
        .unwrap();
    wait_condition(&admin, "job-head", "QuotaReserved", "False").await;
    jobs.create(&PostParams::default(), &strict_job("small", 4))
        .await
        .unwrap();
    wait_condition(&admin, "job-small", "QuotaReserved", "False").await;
    let honest_workload = wait_workload(&admin, "job-honest", "admitted", |w| {
        w["status"]["admission"].is_object()
    })
    .await;

    // While the operator is down, the tenant gives the small job the
    // honest one's admission: the record on the job (its seal cannot be
    // made for another job, so it goes without), released, and the same
    // admission in its Workload's status — which it may write here.
    operator.abort();
    let _ = operator.await;
    let record = honest.metadata.annotations.as_ref().unwrap()["arbiter.dev/admission"].clone();
    let tenant_jobs: Api<Job> = Api::namespaced(tenant.clone(), "team-a");
    tenant_jobs
        .patch(
            "small",
            &PatchParams::default(),
            &merge(json!({
                "metadata": {"annotations": {"arbiter.dev/admission": record}},
                "spec": {"suspend": false},
            })),
        )
        .await
        .unwrap();
    let workloads: Api<Workload> = Api::namespaced(tenant.clone(), "team-a");
    workloads
        .patch_status(
            "job-small",
            &PatchParams::default(),
            &merge(json!({"status": {"admission": honest_workload["status"]["admission"]}})),
        )
        .await
        .unwrap();

    // Started again, the operator trusts only the seal: the record is
    // refused and told, the job held again and left behind the head; its
    // Workload is written back; the honest admission alone is charged.
    let _operator = start_operator(admin.clone());
    let note = wait_event(&admin, "small", "AdmissionRecordRejected").await;
    assert!(note.contains("held again"), "{note}");
    wait_for(&jobs, "small", "held again", suspended).await;
    wait_workload(&admin, "job-small", "written back", |w| {
        w["status"]["admission"].is_null()
            && condition_status(w, "QuotaReserved").as_deref() == Some("False")
    })
    .await;
    wait_queue_usage(&admin, "strict", 1, "4").await;
    stays_held(&jobs, "small").await;
    assert!(released(&jobs.get("honest").await.unwrap()));
}

/// Waits a while (several of the operator's ticks) and checks `name` is
/// still released.
async fn stays_released(jobs: &Api<Job>, name: &str) {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let job = jobs.get(name).await.unwrap();
    assert!(released(&job), "{name} was held again: {:?}", job.spec);
}

/// Counts the Events of `reason` in team-a.
async fn events_of(client: &Client, reason: &str) -> usize {
    let events: Api<Event> = Api::namespaced(client.clone(), "team-a");
    let list = events.list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .count()
}

/// The other side of trusting only seals: a new sealing key (its Secret
/// deleted) costs no running job its admission. At the start that makes
/// the key no seal can hold, so each record is checked against its
/// Workload, whose admission is then sealed with the new key; at the
/// start after, that seal vouches for the record.
#[tokio::test]
async fn a_new_sealing_key_costs_no_running_job_its_admission() {
    let (_cluster, admin) = cluster_with_setup().await;
    let mut operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("long", 4))
        .await
        .unwrap();
    wait_for(&jobs, "long", "admitted", released).await;
    let sealed = wait_workload(&admin, "job-long", "its admission sealed", |w| {
        w["status"]["admissionSeal"].is_string()
    })
    .await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(admin.clone(), PLATFORM_NAMESPACE);
    for round in 0..2 {
        operator.abort();
        let _ = operator.await;
        if round == 0 {
            secrets
                .delete("arbiter-record-key", &Default::default())
                .await
                .unwrap();
        }
        operator = start_operator(admin.clone());
        // Once a job created now is admitted, the admissions were read back.
        let probe = format!("probe-{round}");
        jobs.create(&PostParams::default(), &job(&probe, 1))
            .await
            .unwrap();
        wait_for(&jobs, &probe, "admitted", released).await;
        wait_workload(&admin, "job-long", "its admission sealed anew", |w| {
            w["status"]["admissionSeal"].is_string()
                && w["status"]["admissionSeal"] != sealed["status"]["admissionSeal"]
        })
        .await;
        stays_released(&jobs, "long").await;
        assert_eq!(events_of(&admin, "AdmissionRecordRejected").await, 0);
        wait_queue_usage(&admin, "research", 2 + round, &(5 + round).to_string()).await;
    }
    operator.abort();
}

/// Its condition `type_` of the Workload: (status, reason, message).
fn condition_said(workload: &Value, type_: &str) -> Option<(String, String, String)> {
    let found = workload["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    let field = |name: &str| found[name].as_str().unwrap_or_default().to_string();
    Some((field("status"), field("reason"), field("message")))
}

/// team-a's own ClusterQueue (its namespace alone selected) and LocalQueue.
const OWN_QUEUE: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: team-a-only}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-a}}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: own, namespace: team-a}
spec: {clusterQueue: team-a-only}
"#;

/// A job of `gpus` GPUs in `namespace` naming the LocalQueue `queue`.
fn queued_job(namespace: &str, queue: &str, name: &str, gpus: u32) -> Job {
    let mut job = job(name, gpus);
    job.metadata.namespace = Some(namespace.into());
    job.metadata
        .labels
        .get_or_insert_default()
        .insert("arbiter.dev/queue-name".into(), queue.into());
    job
}

/// Kueue's rule (`workload namespace doesn't match ClusterQueue selector`):
/// a tenant whose LocalQueue points at another's ClusterQueue gets nothing
/// of it — its job is held and told why, quota free or not — and a job
/// naming a LocalQueue of another namespace finds none; the ClusterQueue's
/// own tenant goes on as if they were not there.
#[tokio::test]
async fn a_tenant_gets_nothing_through_a_queue_that_is_not_its_own() {
    let (cluster, admin) = cluster_with_setup().await;
    create_namespace(&admin, "team-b").await;
    apply_yaml(&admin, OWN_QUEUE).await;
    let _operator = start_operator(admin.clone());
    // team-b may make LocalQueues in its namespace (deploy's
    // queue-manager role does the same): it points one at team-a's.
    let bob = tenant_with_workload_writes(&cluster, &admin, "team-b", "bob").await;
    let local_queue = json!({
        "apiVersion": "arbiter.dev/v1alpha1", "kind": "LocalQueue",
        "metadata": {"name": "borrowed", "namespace": "team-b"},
        "spec": {"clusterQueue": "team-a-only"},
    });
    Api::<arbiter_core::model::api::LocalQueue>::namespaced(bob.clone(), "team-b")
        .create(
            &PostParams::default(),
            &serde_json::from_value(local_queue).unwrap(),
        )
        .await
        .unwrap();
    let b_jobs: Api<Job> = Api::namespaced(bob.clone(), "team-b");
    b_jobs
        .create(
            &PostParams::default(),
            &queued_job("team-b", "borrowed", "sneaky", 2),
        )
        .await
        .unwrap();
    // And a job naming team-a's LocalQueue `own`, from team-b.
    b_jobs
        .create(
            &PostParams::default(),
            &queued_job("team-b", "own", "stray", 2),
        )
        .await
        .unwrap();

    let selector =
        "namespace team-b is not selected by ClusterQueue team-a-only's namespaceSelector";
    let note = wait_event_in(&admin, "team-b", "sneaky", "NamespaceNotSelected", |_| true).await;
    assert_eq!(note, selector);
    let sneaky = wait_workload_in(&admin, "team-b", "job-sneaky", "told", |w| {
        condition_said(w, "QuotaReserved").is_some()
    })
    .await;
    assert_eq!(
        condition_said(&sneaky, "QuotaReserved"),
        Some((
            "False".into(),
            "NamespaceNotSelected".into(),
            selector.into()
        ))
    );
    let note = wait_event_in(&admin, "team-b", "stray", "LocalQueueDoesNotExist", |_| {
        true
    })
    .await;
    assert_eq!(
        note,
        "LocalQueue team-b/own does not exist; create it or fix the queue-name label"
    );
    let stray = wait_workload_in(&admin, "team-b", "job-stray", "told", |w| {
        condition_said(w, "QuotaReserved").is_some()
    })
    .await;
    assert_eq!(
        condition_said(&stray, "QuotaReserved"),
        Some((
            "False".into(),
            "LocalQueueDoesNotExist".into(),
            note.clone()
        ))
    );

    // team-a takes its whole quota at once, as if team-b's jobs were not there.
    let a_jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    a_jobs
        .create(
            &PostParams::default(),
            &queued_job("team-a", "own", "all-of-it", 8),
        )
        .await
        .unwrap();
    wait_for(&a_jobs, "all-of-it", "admitted", released).await;
    wait_queue_usage(&admin, "team-a-only", 1, "8").await;
    // Its job gone and the quota free, team-b's jobs are still held.
    a_jobs
        .delete("all-of-it", &Default::default())
        .await
        .unwrap();
    wait_queue_usage(&admin, "team-a-only", 0, "0").await;
    let held = Api::<Job>::namespaced(admin.clone(), "team-b");
    stays_held(&held, "sneaky").await;
    stays_held(&held, "stray").await;
    let note = wait_event_in(&admin, "team-b", "sneaky", "NamespaceNotSelected", |_| true).await;
    assert_eq!(note, selector);
}

/// What a tenant bundle may not do, each tried from its own namespace
/// (one tenant bundle per namespace): pass for another tenant
/// (`spec.tenant`), use a hook kept for the platform, ask for more time
/// than the tenant limits give. Each is refused, told on its ConfigMap
/// with what to do; the platform's bundle and another tenant's go on
/// deciding. (A hook kept for the platform in a ConfigMap, and a policy
/// matching another namespace: `bundles.rs`
/// `tenant_configmaps_load_under_the_tenant_rules_one_per_namespace`.)
#[tokio::test]
async fn a_tenant_bundle_reaching_beyond_its_namespace_is_refused_and_the_rest_decide() {
    let (_cluster, admin) = cluster_with_setup().await;
    for ns in [PLATFORM_NAMESPACE, "team-b", "team-c", "team-d", "team-e"] {
        create_namespace(&admin, ns).await;
    }
    put_bundle(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        &[("bundle.yaml", &gpu_cap("platform", 1, 4))],
        &[],
    )
    .await;
    // team-a's own bundle: a weight, for its own jobs.
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
    let _operator = start_operator_with_bundles(admin.clone(), Vec::new(), None);

    let deny_all = "  - {name: deny-all, hook: admission, cel: {expression: 'false'}}\n";
    let claims_team_a = format!(
        "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: as-team-a, version: \"1\"}}\nspec:\n  tenant: team-a\n  policies:\n{deny_all}"
    );
    let autoscale = tenant_bundle(
        "grow",
        "  - {name: more-nodes, hook: autoscale, cel: {expression: '100'}}\n",
    );
    let slow = tenant_bundle(
        "slow",
        "  - {name: take-my-time, hook: admission, cel: {expression: 'true'}, limits: {timeoutMs: 1000}}\n",
    );
    let flavor = tenant_bundle(
        "mine",
        "  - {name: best-flavor, hook: flavor, cel: {expression: \"['a100']\"}}\n",
    );
    let attempts = [
        ("team-b", claims_team_a.as_str(), "bundle.yaml says spec.tenant: team-a, but it is loaded as the tenant bundle of team-b; make them agree"),
        ("team-c", autoscale.as_str(), "hook autoscale is not allowed in a tenant bundle (spec.tenant: team-c); tenant bundles hold only weight and admission policies"),
        ("team-d", slow.as_str(), "policy take-my-time: limits.timeoutMs 1000 must be between 1 and 50"),
        ("team-e", flavor.as_str(), "hook flavor is not allowed in a tenant bundle (spec.tenant: team-e); tenant bundles hold only weight and admission policies"),
    ];
    for (ns, text, _) in &attempts {
        put_bundle(&admin, ns, "rules", &[("bundle.yaml", text)], &[]).await;
    }
    for (ns, _, error) in &attempts {
        let note = wait_event_in(&admin, ns, "rules", "BundleRejected", |_| true).await;
        assert!(
            note.contains(&format!("ConfigMap {ns}/rules")) && note.contains(error),
            "{note}"
        );
        assert!(
            note.ends_with(&format!("{ns} has no tenant bundle in force")),
            "{note}"
        );
        let status = wait_bundle_status(&admin, ns, "rules", |_| true).await;
        assert!(status.starts_with("rejected "), "{status}");
    }
    wait_bundle_status(&admin, "team-a", "weights", |s| s.starts_with("loaded ")).await;

    // The platform still decides: team-a's 6-GPU job is denied, its 2-GPU
    // job admitted (nothing denies all of team-a), and so is team-b's.
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("greedy", 6))
        .await
        .unwrap();
    jobs.create(&PostParams::default(), &job("modest", 2))
        .await
        .unwrap();
    wait_for(&jobs, "modest", "admitted", released).await;
    let note = wait_event(&admin, "greedy", "Denied").await;
    assert!(note.contains("at most 4 GPUs, got 6"), "{note}");
    apply_yaml(
        &admin,
        "apiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: research, namespace: team-b}\nspec: {clusterQueue: research}\n",
    )
    .await;
    let b_jobs: Api<Job> = Api::namespaced(admin.clone(), "team-b");
    b_jobs
        .create(
            &PostParams::default(),
            &queued_job("team-b", "research", "b-job", 2),
        )
        .await
        .unwrap();
    wait_for(&b_jobs, "b-job", "admitted", released).await;
    stays_held(&jobs, "greedy").await;
}

/// Labelled ConfigMaps one tenant makes in its own namespace.
const FLOOD: usize = 5_000;
/// Namespaces with labelled ConfigMaps, and how many in each.
const NAMESPACES: usize = 1_000;
const PER_NAMESPACE: usize = 5;
/// Requests under way at once while they are made.
const IN_FLIGHT: usize = 64;

fn spread_namespace(i: usize) -> String {
    format!("spread-{i:04}")
}

/// This process's resident memory (the operator runs in it), in MiB.
fn resident_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

/// A labelled ConfigMap holding `bundle`.
fn bundle_configmap(
    namespace: &str,
    name: &str,
    bundle: &str,
) -> k8s_openapi::api::core::v1::ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"arbiter.dev/policy-bundle": "true"}},
        "data": {"bundle.yaml": bundle},
    }))
    .unwrap()
}

/// The labelled ConfigMaps whose status annotation does not say (yet)
/// what becomes of them: in each namespace the oldest (creation time,
/// then name) is its tenant bundle — loaded in `flood` and the even
/// `spread-` namespaces, rejected in the odd ones —, every other one
/// ignored, naming it. Each is listed with what it says.
async fn wrongly_told(all: &Api<k8s_openapi::api::core::v1::ConfigMap>) -> Vec<String> {
    let mut listed = Vec::new();
    let mut params = ListParams::default()
        .labels("arbiter.dev/policy-bundle")
        .limit(1000);
    loop {
        let page = all.list(&params).await.unwrap();
        listed.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(listed.len(), FLOOD + NAMESPACES * PER_NAMESPACE + 1);
    let mut by_namespace: std::collections::BTreeMap<String, Vec<_>> = Default::default();
    for cm in &listed {
        let ns = cm.metadata.namespace.clone().unwrap_or_default();
        if ns != PLATFORM_NAMESPACE {
            by_namespace.entry(ns).or_default().push(cm);
        }
    }
    let mut wrong = Vec::new();
    for (ns, mut cms) in by_namespace {
        cms.sort_by_key(|cm| {
            let created = cm.metadata.creation_timestamp.clone().map(|t| t.0);
            (created, cm.metadata.name.clone())
        });
        let winner = cms[0].metadata.name.clone().unwrap_or_default();
        let valid =
            ns == "flood" || ns.trim_start_matches("spread-").parse::<usize>().unwrap() % 2 == 0;
        let ignored = format!("ignored: ConfigMap {ns}/{winner} is the tenant bundle of {ns} at ");
        for (i, cm) in cms.iter().enumerate() {
            let said = cm
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("arbiter.dev/bundle-status"))
                .cloned()
                .unwrap_or_default();
            let right = match (i, valid) {
                (0, true) => said.starts_with("loaded weights@1 sha256:"),
                (0, false) => {
                    said.starts_with("rejected greedy@1: ")
                        && said.contains("hook fairShare is not allowed in a tenant bundle")
                }
                _ => said.starts_with(&ignored),
            };
            if !right {
                let name = cm.metadata.name.as_deref().unwrap_or_default();
                wrong.push(format!("{ns}/{name}: {said:?}"));
            }
        }
    }
    wrong
}

#[tokio::test]
async fn ten_thousand_bundle_configmaps_are_each_told_while_admission_goes_on() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    let (_cluster, admin) = cluster_with_setup().await;
    for ns in [PLATFORM_NAMESPACE, "flood"] {
        create_namespace(&admin, ns).await;
    }
    futures::stream::iter(0..NAMESPACES)
        .map(|i| {
            let admin = admin.clone();
            async move { create_namespace(&admin, &spread_namespace(i)).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    put_bundle(
        &admin,
        PLATFORM_NAMESPACE,
        "gpu-cap",
        &[("bundle.yaml", &gpu_cap("platform", 1, 4))],
        &[],
    )
    .await;
    let _operator = start_operator_with_bundles(admin.clone(), Vec::new(), None);
    wait_bundle_status(&admin, PLATFORM_NAMESPACE, "gpu-cap", |s| {
        s.starts_with("loaded ")
    })
    .await;
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    admit_one_by_one(&jobs, "before", 1, 1).await;
    let before = resident_mib();
    let flooded_at = std::time::Instant::now();

    // One tenant makes 5,000 labelled ConfigMaps in its namespace (one
    // tenant bundle is allowed there), and 1,000 namespaces get five each,
    // in every other one bundles that may not load (a hook kept for the
    // platform).
    let good = tenant_bundle(
        "weights",
        "  - {name: bigger-first, hook: weight, cel: {expression: 'double(workload.gpus)'}}\n",
    );
    let bad = tenant_bundle(
        "greedy",
        "  - {name: more-for-me, hook: fairShare, cel: {expression: '100.0'}}\n",
    );
    let mut wanted: Vec<(String, String, bool)> = (0..FLOOD)
        .map(|i| ("flood".to_string(), format!("cm-{i:05}"), true))
        .collect();
    for i in 0..NAMESPACES {
        for j in 0..PER_NAMESPACE {
            wanted.push((spread_namespace(i), format!("cm-{j}"), i % 2 == 0));
        }
    }
    let making = {
        let (admin, wanted) = (admin.clone(), wanted.clone());
        let (good, bad) = (good.clone(), bad.clone());
        tokio::spawn(async move {
            futures::stream::iter(wanted)
                .map(|(ns, name, valid)| {
                    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
                    let cm = bundle_configmap(&ns, &name, if valid { &good } else { &bad });
                    async move {
                        api.create(&PostParams::default(), &cm)
                            .await
                            .unwrap_or_else(|e| panic!("creating ConfigMap {ns}/{name}: {e}"));
                    }
                })
                .buffer_unordered(IN_FLIGHT)
                .collect::<Vec<()>>()
                .await
        })
    };
    // Meanwhile the platform's bundle decides and jobs are admitted.
    jobs.create(&PostParams::default(), &job("greedy", 6))
        .await
        .unwrap();
    let note = wait_event(&admin, "greedy", "Denied").await;
    assert!(note.contains("at most 4 GPUs, got 6"), "{note}");
    admit_one_by_one(&jobs, "during", 3, 2).await;
    making.await.unwrap();
    admit_one_by_one(&jobs, "after", 1, 1).await;

    // Each ConfigMap is told, in its status annotation: in each namespace
    // the oldest is its tenant bundle (loaded, or rejected), every other
    // one ignored, naming it. Bounded wait: the operator writes each.
    let all: Api<ConfigMap> = Api::all(admin.clone());
    let started = std::time::Instant::now();
    loop {
        let wrong = wrongly_told(&all).await;
        if wrong.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "after 600 s, {} labelled ConfigMaps are not told what became of them, such as {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(5)]
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }

    // Told in Events too, but boundedly: a namespace's few at once; every
    // spread namespace (five ConfigMaps) hears of its bundle, the flooded
    // one a handful of its 5,000.
    let events: Api<Event> = Api::all(admin.clone());
    let mut params = ListParams::default().limit(1000);
    let mut told: std::collections::BTreeMap<String, Vec<(String, String)>> = Default::default();
    loop {
        let page = events.list(&params).await.unwrap();
        for e in page.items {
            let reason = e.reason.clone().unwrap_or_default();
            if reason.starts_with("Bundle") {
                let about = e.regarding.and_then(|r| r.name).unwrap_or_default();
                told.entry(e.metadata.namespace.unwrap_or_default())
                    .or_default()
                    .push((reason, about));
            }
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    // Per namespace, of each kind (its bundle's results; ConfigMaps
    // ignored), a burst and then one per refill period.
    let periods = flooded_at.elapsed().as_secs() / EVENT_REFILL.as_secs() + 1;
    let bound = 2 * (EVENT_BURST as usize + periods as usize);
    let total: usize = told.values().map(Vec::len).sum();
    let most = told
        .iter()
        .map(|(ns, e)| (e.len(), ns.clone()))
        .max()
        .unwrap_or_default();
    println!(
        "bundle Events: {total} in {} namespaces, at most {} in {}; resident memory {before} MiB before, {} MiB after",
        told.len(),
        most.0,
        most.1,
        resident_mib()
    );
    assert!(
        most.0 <= bound,
        "{} Events in {}; at most {bound}",
        most.0,
        most.1
    );
    for i in 0..NAMESPACES {
        let ns = spread_namespace(i);
        let reason = if i % 2 == 0 {
            "BundleLoaded"
        } else {
            "BundleRejected"
        };
        let said = told.get(&ns).map(Vec::as_slice).unwrap_or_default();
        assert!(
            said.iter().any(|(r, _)| r == reason),
            "{ns}: no {reason} Event; {said:?}"
        );
    }
    // Memory stays in proportion: the ConfigMaps are kept (their data,
    // no managed fields), the ignored ones never built.
    let grown = resident_mib().saturating_sub(before);
    assert!(grown < 512, "resident memory grew by {grown} MiB");
}
