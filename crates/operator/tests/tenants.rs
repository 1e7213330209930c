//! Two tenants sharing a cohort on a cluster that runs pods: team-b borrows all of
//! team-a's idle GPUs, team-a's own job reclaims them (team-b's job is
//! preempted across tenants: held again, template restored, told why), and
//! when team-a's job finishes team-b's runs again. Throughout, the jobs the
//! operator has released never ask for more GPUs than the one 8-GPU Node
//! has — no tenant's admission goes beyond what exists. And a tenant who
//! copies an admitted job's admission record onto another job gains
//! nothing from an operator restart: the copy is refused. A job whose
//! annotations leave no room for the admission record is told why it
//! cannot be released while others go on, and a storm of namespaces
//! created and deleted leaves admission going; a Workload someone deletes
//! is written again.

mod support;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams, PostParams};
use support::*;

const TENANTS: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: Cohort
metadata: {name: shared}
spec: {}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohort: shared
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-a}}
  preemption: {reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: arbiter.dev/v1alpha1
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohort: shared
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-b}}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 0}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: team-a, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: arbiter.dev/v1alpha1
kind: LocalQueue
metadata: {name: team-b, namespace: team-b}
spec: {clusterQueue: team-b}
"#;

fn tenant_job(namespace: &str, name: &str, gpus: u32) -> Job {
    let mut job = job(name, gpus);
    job.metadata.namespace = Some(namespace.into());
    job.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("arbiter.dev/queue-name".into(), namespace.into());
    job
}

fn gpus(job: &Job) -> u64 {
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| {
            s.containers
                .iter()
                .filter_map(|c| {
                    c.resources
                        .as_ref()?
                        .requests
                        .as_ref()?
                        .get("nvidia.com/gpu")
                })
                .filter_map(|q| q.0.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

/// GPUs asked for by the released, unfinished jobs of both tenants.
async fn released_gpus(client: &kube::Client) -> u64 {
    let mut total = 0;
    for namespace in ["team-a", "team-b"] {
        let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
        for job in jobs.list(&ListParams::default()).await.unwrap() {
            let finished = job
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Complete"));
            if released(&job) && !finished {
                total += gpus(&job);
            }
        }
    }
    total
}

/// Waits for `check` on job `name` in `jobs`, checking on every look that
/// the released jobs fit the Node.
async fn wait_within_capacity(
    client: &kube::Client,
    jobs: &Api<Job>,
    name: &str,
    what: &str,
    check: impl Fn(&Job) -> bool,
) -> Job {
    let started = std::time::Instant::now();
    loop {
        let in_use = released_gpus(client).await;
        assert!(
            in_use <= 8,
            "released jobs ask for {in_use} GPUs; the cluster has 8"
        );
        let job = jobs.get(name).await.unwrap();
        if check(&job) {
            return job;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "job {name}: {what} did not happen within {} s",
            PATIENCE.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_tenant_reclaims_its_quota_from_a_borrowing_tenant_and_lends_it_back() {
    let (_cluster, admin) = full_cluster_with_setup().await;
    create_namespace(&admin, "team-b").await;
    apply_yaml(&admin, TENANTS).await;
    let operator = start_operator(admin.clone());
    let team_a: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    let team_b: Api<Job> = Api::namespaced(admin.clone(), "team-b");

    // team-b has no GPUs of its own: both its jobs borrow team-a's idle 8.
    for name in ["b-1", "b-2"] {
        team_b
            .create(&PostParams::default(), &tenant_job("team-b", name, 4))
            .await
            .unwrap();
    }
    for name in ["b-1", "b-2"] {
        wait_within_capacity(&admin, &team_b, name, "admission by borrowing", released).await;
    }

    // team-a wants 4 of its own GPUs back: one of team-b's jobs is reclaimed.
    team_a
        .create(&PostParams::default(), &tenant_job("team-a", "a-1", 4))
        .await
        .unwrap();
    wait_within_capacity(&admin, &team_a, "a-1", "admission by reclaiming", released).await;
    let mut held = Vec::new();
    for name in ["b-1", "b-2"] {
        if suspended(&team_b.get(name).await.unwrap()) {
            held.push(name);
        }
    }
    assert_eq!(
        held.len(),
        1,
        "exactly one of team-b's jobs is reclaimed: {held:?}"
    );
    let victim = held[0];
    // The template is restored once the Job controller has let go of the
    // run (a template the job started with is immutable until then: the
    // first restore may be refused and made again).
    wait_for(&team_b, victim, "its template restored", |j| {
        j.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .is_some_and(|s| s.node_selector.is_none())
    })
    .await;
    let note = wait_event_in(&admin, "team-b", victim, "Preempted", |_| true).await;
    assert!(
        note.contains("team-a/a-1") && note.contains("reclaimed"),
        "the victim is told who reclaimed it: {note}"
    );
    stays_held(&team_b, victim).await;

    // team-a's job ends: the GPUs are lent again and the victim runs.
    finish(&team_a, "a-1").await;
    wait_within_capacity(
        &admin,
        &team_b,
        victim,
        "admission again after the reclaim ended",
        released,
    )
    .await;
    assert!(released_gpus(&admin).await <= 8);
    operator.abort();
}

/// An annotation of `job`.
fn annotation(job: &Job, name: &str) -> Option<String> {
    job.metadata.annotations.as_ref()?.get(name).cloned()
}

#[tokio::test]
async fn an_admission_record_copied_onto_another_job_is_not_trusted_after_a_restart() {
    let (_cluster, admin) = cluster_with_setup().await;
    let operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("honest", 2))
        .await
        .unwrap();
    let honest = wait_for(&jobs, "honest", "admitted", released).await;
    let record = annotation(&honest, "arbiter.dev/admission").expect("a record");
    let seal = annotation(&honest, "arbiter.dev/admission-seal").expect("a seal");
    // Too big to fit beside it: waits, held.
    jobs.create(&PostParams::default(), &job("waiting", 8))
        .await
        .unwrap();
    wait_condition(&admin, "job-waiting", "QuotaReserved", "False").await;

    // While the operator is down, a tenant who may edit its jobs copies the
    // admitted job's record and seal onto the waiting one and releases it.
    operator.abort();
    let _ = operator.await;
    let forged = serde_json::json!({
        "metadata": {"annotations": {
            "arbiter.dev/admission": record,
            "arbiter.dev/admission-seal": seal,
        }},
        "spec": {"suspend": false},
    });
    jobs.patch(
        "waiting",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&forged),
    )
    .await
    .unwrap();

    // Started again, the operator reads back only what it wrote for each
    // job: the copy is refused and told, the job held again; the honest
    // admission stands, and only it is charged.
    let _operator = start_operator(admin.clone());
    let note = wait_event(&admin, "waiting", "AdmissionRecordRejected").await;
    assert!(note.contains("held again"), "{note}");
    wait_for(&jobs, "waiting", "held again", suspended).await;
    let honest = jobs.get("honest").await.unwrap();
    assert!(released(&honest));
    assert_eq!(annotation(&honest, "arbiter.dev/admission"), Some(record));
    wait_queue_usage(&admin, "research", 1, "2").await;
    stays_held(&jobs, "waiting").await;
}

#[tokio::test]
async fn a_job_at_the_annotation_size_limit_is_told_and_others_go_on() {
    let (_cluster, admin) = cluster_with_setup().await;
    let _operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    // Annotations just under Kubernetes' 256 KiB: the API takes the job,
    // but not the admission record the release adds.
    let mut huge = job("huge-notes", 2);
    let note = "n".repeat(262_144 - "note".len() - 64);
    huge.metadata.annotations = Some([("note".to_string(), note)].into());
    jobs.create(&PostParams::default(), &huge).await.unwrap();
    // A label value at its 63-character limit is no trouble.
    let mut labelled = job("labelled", 2);
    labelled
        .metadata
        .labels
        .get_or_insert_default()
        .insert("team".to_string(), "t".repeat(63));
    jobs.create(&PostParams::default(), &labelled)
        .await
        .unwrap();
    wait_for(&jobs, "labelled", "admitted", released).await;
    // The release the API refuses is told on the job and its Workload, the
    // job stays held, and the operator goes on admitting.
    let told = wait_event(&admin, "huge-notes", "WriteRefused").await;
    assert!(told.contains("Too long"), "{told}");
    let (reason, _) = wait_condition(&admin, "job-huge-notes", "JobWriteRefused", "True").await;
    assert_eq!(reason, "WriteRefused");
    stays_held(&jobs, "huge-notes").await;
    jobs.create(&PostParams::default(), &job("after", 2))
        .await
        .unwrap();
    wait_for(&jobs, "after", "admitted", released).await;
}

#[tokio::test]
async fn namespaces_created_and_deleted_in_a_storm_leave_admission_going() {
    let (_cluster, admin) = cluster_with_setup().await;
    let _operator = start_operator(admin.clone());
    let storm = {
        let admin = admin.clone();
        tokio::spawn(async move {
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
            for round in 0..10 {
                for i in 0..20 {
                    create_namespace(&admin, &format!("storm-{round}-{i}")).await;
                }
                for i in 0..20 {
                    let _ = namespaces
                        .delete(&format!("storm-{round}-{i}"), &Default::default())
                        .await;
                }
            }
        })
    };
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    admit_one_by_one(&jobs, "during", 4, 2).await;
    storm.await.unwrap();
    wait_queue_usage(&admin, "research", 4, "8").await;
}

#[tokio::test]
async fn a_deleted_workload_is_written_again() {
    let (_cluster, admin) = cluster_with_setup().await;
    let _operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("running", 6))
        .await
        .unwrap();
    jobs.create(&PostParams::default(), &job("waiting", 6))
        .await
        .unwrap();
    wait_condition(&admin, "job-running", "Admitted", "True").await;
    wait_condition(&admin, "job-waiting", "QuotaReserved", "False").await;
    // Someone deletes both Workloads (`kubectl delete workloads --all`).
    let workloads: Api<arbiter_core::model::api::Workload> =
        Api::namespaced(admin.clone(), "team-a");
    let mut before = Vec::new();
    for name in ["job-running", "job-waiting"] {
        before.push(workloads.get(name).await.unwrap().metadata.uid);
        workloads.delete(name, &Default::default()).await.unwrap();
    }
    // Each comes back as a new object saying what was decided.
    let started = std::time::Instant::now();
    for (name, old) in ["job-running", "job-waiting"].into_iter().zip(before) {
        loop {
            let now = workloads.get_opt(name).await.unwrap();
            if now.as_ref().is_some_and(|w| w.metadata.uid != old) {
                break;
            }
            assert!(started.elapsed() < PATIENCE, "{name} was not written again");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    wait_condition(&admin, "job-running", "Admitted", "True").await;
    wait_condition(&admin, "job-waiting", "QuotaReserved", "False").await;
    // Nothing else changed: the running job is not admitted again.
    assert!(released(&jobs.get("running").await.unwrap()));
    stays_held(&jobs, "waiting").await;
}
