//! The operator when the API misbehaves, against a real kube-apiserver:
//! the API server killed and started again under it (every watch and
//! connection broken) — the watches come back and the next job is
//! admitted, nothing admitted twice; etcd killed and started again under
//! the API server — the same; and writes refused for a while (a
//! ValidatingAdmissionPolicy denies releasing jobs) — the refusal is told
//! once (a `WriteRefused` Event, a `JobWriteRefused` Workload condition),
//! and the admission is written once the API accepts it, never lost; and
//! the API answering 429 (on writes) and 500 (on everything, watches cut)
//! for a while, through the test cluster's fault proxy — the jobs created
//! meanwhile are released once it answers again, nothing is told as
//! refused, nothing is admitted twice and the ClusterQueue's usage is what
//! the API holds; and a leader cut off from the API (its requests and
//! watches hanging) stops on its own before a follower takes its lease;
//! and watches expired (cut off while a job is deleted and another
//! created, etcd compacted past what they saw): each is told 410 Gone and
//! lists again, the deleted job's quota is given back and the new job
//! admitted; and the job-hold webhook slow (jobs created late, held),
//! slower than its timeout or down (failing closed: the API refuses the
//! job, naming the webhook) or failing open (the job escapes the hold:
//! the operator holds it on sight, its pods go, it is admitted in turn);
//! and a graceful stop writes the Workloads and Events it owes before it
//! goes.

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use arbiter_core::model::api::Workload;
use arbiter_operator::admin::{AdminState, OperatorMetrics};
use arbiter_operator::leader::{Ended, LeaseOptions};
use arbiter_operator::Operator;
use arbiter_testcluster::proxy::{Fault, FaultProxy, Requests};
use arbiter_testcluster::tcp::{Reach, TcpProxy};
use arbiter_testcluster::Options;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;

fn admission_record(job: &Job) -> Option<String> {
    job.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("arbiter.dev/admission"))
        .cloned()
}

#[tokio::test]
async fn the_operator_survives_an_api_server_restart() {
    let (mut cluster, admin) = full_cluster_with_setup().await;
    let _operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("before", 2))
        .await
        .unwrap();
    let before = wait_for(&jobs, "before", "admitted", released).await;
    let record = admission_record(&before).expect("an admission record");

    // Down for 2 s: every watch and connection of the operator breaks.
    cluster
        .restart_apiserver(Duration::from_secs(2))
        .await
        .unwrap();

    jobs.create(&PostParams::default(), &job("after", 2))
        .await
        .unwrap();
    wait_for(&jobs, "after", "admitted after the restart", released).await;
    // The job admitted before is as it was: not admitted again.
    let before = jobs.get("before").await.unwrap();
    assert!(released(&before));
    assert_eq!(admission_record(&before).as_deref(), Some(record.as_str()));
    // And the loop still frees and reuses quota.
    finish(&jobs, "before").await;
    jobs.create(&PostParams::default(), &job("big", 6))
        .await
        .unwrap();
    wait_for(&jobs, "big", "admitted once `before` finished", released).await;
}

const BLOCK_RELEASES: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: block-releases}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [batch], apiVersions: [v1], operations: [UPDATE], resources: [jobs]}
  validations:
  - expression: "!has(object.spec.suspend) || object.spec.suspend"
    message: "releasing jobs is blocked for this test"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: block-releases}
spec:
  policyName: block-releases
  validationActions: [Deny]
"#;

#[tokio::test]
async fn the_operator_survives_an_etcd_restart() {
    let (mut cluster, admin) = full_cluster_with_setup().await;
    let operator = start_operator(admin.clone());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("before", 2))
        .await
        .unwrap();
    let before = wait_for(&jobs, "before", "admitted", released).await;
    let record = admission_record(&before).expect("an admission record");

    // A job created just before etcd goes: its release may meet the
    // outage (the API server up, answering errors, its watches quiet).
    jobs.create(&PostParams::default(), &job("during", 2))
        .await
        .unwrap();
    cluster.restart_etcd(Duration::from_secs(3)).await.unwrap();
    let back = Instant::now();
    wait_for(&jobs, "during", "admitted after etcd came back", released).await;
    jobs.create(&PostParams::default(), &job("after", 2))
        .await
        .unwrap();
    wait_for(&jobs, "after", "admitted after etcd came back", released).await;
    eprintln!(
        "etcd back (API server ready) to both jobs released: {:?}",
        back.elapsed()
    );
    // Nothing admitted twice, nothing lost, the usage as the API holds.
    let before = jobs.get("before").await.unwrap();
    assert_eq!(admission_record(&before).as_deref(), Some(record.as_str()));
    for name in ["during", "after"] {
        assert!(admission_record(&jobs.get(name).await.unwrap()).is_some());
    }
    wait_queue_usage(&admin, "research", 3, "6").await;
    finish(&jobs, "before").await;
    jobs.create(&PostParams::default(), &job("big", 4))
        .await
        .unwrap();
    wait_for(&jobs, "big", "admitted once `before` finished", released).await;
    wait_queue_usage(&admin, "research", 3, "8").await;
    assert!(!operator.is_finished(), "the operator stopped");
}

#[tokio::test]
async fn an_admission_refused_by_the_api_is_written_again_once_accepted() {
    let (_cluster, admin) = cluster_with_setup().await;
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    apply_yaml(&admin, BLOCK_RELEASES).await;
    // The policy is in force once releasing a job is refused.
    let mut probe = job("probe", 1);
    probe.metadata.labels = None;
    jobs.create(&PostParams::default(), &probe).await.unwrap();
    let started = Instant::now();
    loop {
        let release = jobs
            .patch(
                "probe",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"suspend": false}})),
            )
            .await;
        match release {
            Err(kube::Error::Api(status)) if status.message.contains("blocked") => break,
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => {
                jobs.patch(
                    "probe",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"suspend": true}})),
                )
                .await
                .unwrap();
                assert!(started.elapsed() < PATIENCE, "the policy never took effect");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    let _operator = start_operator(admin.clone());
    jobs.create(&PostParams::default(), &job("train", 2))
        .await
        .unwrap();
    // The scheduler admits it (its Workload says so) but the API refuses
    // the release: the job stays held, the operator keeps running.
    wait_condition(&admin, "job-train", "QuotaReserved", "True").await;
    stays_held(&jobs, "train").await;
    // The refusal is told once, on the job and in its Workload.
    let note = wait_event(&admin, "train", "WriteRefused").await;
    assert!(note.contains("releasing jobs is blocked"), "{note}");
    let (reason, message) = wait_condition(&admin, "job-train", "JobWriteRefused", "True").await;
    assert_eq!(reason, "WriteRefused");
    assert!(message.contains("could not admit"), "{message}");
    stays_held(&jobs, "train").await;
    let events: Api<Event> = Api::namespaced(admin.clone(), "team-a");
    let told: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("WriteRefused"))
        .collect();
    assert_eq!(told.len(), 1, "{told:#?}");
    assert!(told[0].series.is_none(), "told again: {told:#?}");

    // The API accepts releases again: the admission is written, once.
    let bindings = kube::discovery::pinned_kind(
        &admin,
        &kube::api::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
        ),
    )
    .await
    .unwrap()
    .0;
    let bindings: Api<DynamicObject> = Api::all_with(admin.clone(), &bindings);
    bindings
        .delete("block-releases", &DeleteParams::default())
        .await
        .unwrap();
    let train = wait_for(&jobs, "train", "released once the API accepts it", released).await;
    let selector = train
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.node_selector.clone())
        .unwrap_or_default();
    assert_eq!(
        selector.get("nvidia.com/gpu.product").map(String::as_str),
        Some("NVIDIA-A100-SXM4-40GB"),
        "{train:?}"
    );
    let tolerations = train
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    assert_eq!(tolerations.len(), 1, "injected once: {tolerations:?}");
    // Its Workload no longer says the write is refused.
    let workloads: Api<Workload> = Api::namespaced(admin.clone(), "team-a");
    let started = Instant::now();
    loop {
        let workload = workloads.get("job-train").await.unwrap();
        let conditions = workload.status.map(|s| s.conditions).unwrap_or_default();
        if !conditions.iter().any(|c| c.type_ == "JobWriteRefused") {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "JobWriteRefused stayed: {conditions:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates job `name` (2 GPUs) while the proxy answers with `fault` for
/// 5 s (every open connection cut first when `cut`): the operator must
/// meet the fault, and the job must stay held. Heals the proxy and returns
/// how long the job then took to be released.
async fn job_through_fault(
    proxy: &FaultProxy,
    jobs: &Api<Job>,
    name: &str,
    fault: Fault,
    cut: bool,
) -> Duration {
    proxy.inject(fault.clone());
    if cut {
        proxy.reset_connections();
    }
    let before = proxy.counts();
    jobs.create(&PostParams::default(), &job(name, 2))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        proxy.counts().injected > before.injected,
        "the operator never met {fault:?}: {:?}",
        proxy.counts()
    );
    assert!(suspended(&jobs.get(name).await.unwrap()), "{name}");
    let healed = Instant::now();
    proxy.heal();
    wait_for(jobs, name, "released once the API answers again", released).await;
    healed.elapsed()
}

#[tokio::test]
async fn the_operator_rides_out_the_api_answering_429_and_500_for_a_while() {
    let (cluster, admin) = full_cluster_with_setup().await;
    // The operator talks to the API through the fault proxy; the test
    // (creating jobs, reading what happened) talks to it directly.
    let proxy = cluster.fault_proxy().await.unwrap();
    let operator = start_operator(proxy.client_for("admin").await.unwrap());
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("first", 2))
        .await
        .unwrap();
    wait_for(&jobs, "first", "admitted", released).await;

    // API Priority and Fairness shedding load: every write answered 429
    // (with Retry-After) for 5 s. The job created meanwhile is admitted
    // but cannot be released; it stays held, and the 429s are transient,
    // not a refusal to tell.
    let writes_429 = Fault::Status {
        code: 429,
        requests: Requests::Writes,
    };
    let after_429 = job_through_fault(&proxy, &jobs, "during-429", writes_429, false).await;
    // The API failing outright: every request, reads and watches
    // included, answered 500 for 5 s, and every open connection (the
    // watches) cut so they must come back through the failures.
    let all_500 = Fault::Status {
        code: 500,
        requests: Requests::All,
    };
    let after_500 = job_through_fault(&proxy, &jobs, "during-500", all_500, true).await;
    eprintln!(
        "recovery (fault healed to the waiting job released): 429 on writes {after_429:?}, \
         500 on everything with connections cut {after_500:?}; proxy {:?}",
        proxy.counts()
    );

    // Nothing lost, nothing admitted twice: three jobs, each released
    // once with one admission record, and the ClusterQueue's usage is
    // what the API holds.
    for name in ["first", "during-429", "during-500"] {
        let job = jobs.get(name).await.unwrap();
        assert!(released(&job), "{name}");
        assert!(admission_record(&job).is_some(), "{name}");
        wait_condition(&admin, &format!("job-{name}"), "Admitted", "True").await;
    }
    wait_queue_usage(&admin, "research", 3, "6").await;
    // A transient error is retried, never told as a refusal.
    let events: Api<Event> = Api::namespaced(admin.clone(), "team-a");
    let refused: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("WriteRefused"))
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
    // And the loop still frees and reuses quota.
    finish(&jobs, "first").await;
    jobs.create(&PostParams::default(), &job("last", 4))
        .await
        .unwrap();
    wait_for(&jobs, "last", "admitted once `first` finished", released).await;
    wait_queue_usage(&admin, "research", 3, "8").await;
    assert!(!operator.is_finished(), "the operator stopped");
}

/// The leader Lease's holder and when it was acquired.
async fn lease_holder(admin: &kube::Client) -> (Option<String>, Option<std::time::SystemTime>) {
    let lease = Api::<Lease>::namespaced(admin.clone(), "arbiter-system")
        .get_opt("arbiter-leader")
        .await
        .unwrap();
    let spec = lease.and_then(|l| l.spec).unwrap_or_default();
    (
        spec.holder_identity,
        spec.acquire_time.map(|t| std::time::SystemTime::from(t.0)),
    )
}

async fn wait_holder(admin: &kube::Client, identity: &str) -> std::time::SystemTime {
    let started = Instant::now();
    loop {
        if let (Some(holder), Some(acquired)) = lease_holder(admin).await {
            if holder == identity {
                return acquired;
            }
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{identity} never held the lease: {:?}",
            lease_holder(admin).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_leader_cut_off_from_the_api_stops_before_another_takes_its_lease() {
    let (cluster, admin) = cluster_with_setup().await;
    let proxy = cluster.fault_proxy().await.unwrap();
    let lease = |identity: &str| LeaseOptions {
        namespace: "arbiter-system".into(),
        name: "arbiter-leader".into(),
        identity: identity.into(),
        duration_seconds: 4,
        grace_seconds: 1,
    };
    // Each replica's admin state says when it follows (its driver stopped).
    let replica = |client: kube::Client, identity: &'static str| {
        let options = lease(identity);
        let mut registry = Default::default();
        let metrics = OperatorMetrics::register(&mut registry);
        let state = AdminState::new(registry);
        let builder = Operator::builder(client)
            .driver_options(test_driver_options())
            .metrics(state.clone(), metrics)
            .leader_election(options);
        let task = tokio::spawn(async move {
            let operator = builder.start().await.unwrap();
            operator.run_until(std::future::pending()).await.unwrap()
        });
        (task, state)
    };
    // Replica a talks to the API through the proxy, and leads.
    let (a, a_state) = replica(proxy.client_for("admin").await.unwrap(), "a");
    wait_holder(&admin, "a").await;
    // When a's driver stops (it follows again, having led).
    let a_stopped = tokio::spawn(async move {
        while a_state.following.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        while !a_state.following.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        std::time::SystemTime::now()
    });
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("first", 2))
        .await
        .unwrap();
    let first = wait_for(&jobs, "first", "admitted by a", released).await;
    let record = admission_record(&first).expect("an admission record");
    // Replica b talks to it directly, and follows.
    let (b, _) = replica(admin.clone(), "b");

    // a cut off: its requests and watches hang; it cannot renew the lease
    // nor learn that it expired.
    proxy.inject(Fault::Partition);
    jobs.create(&PostParams::default(), &job("second", 2))
        .await
        .unwrap();
    // It stops on its own, still cut off…
    let a_stopped = tokio::time::timeout(PATIENCE, a_stopped)
        .await
        .expect("the leader cut off from the API never stopped")
        .unwrap();
    let ended = tokio::time::timeout(PATIENCE, a).await.unwrap().unwrap();
    assert_eq!(ended, Ended::LostLease);
    // …before b takes the lease, which then admits what waits.
    let b_acquired = wait_holder(&admin, "b").await;
    assert!(
        a_stopped < b_acquired,
        "a stopped at {a_stopped:?}, after b took the lease at {b_acquired:?}"
    );
    wait_for(&jobs, "second", "admitted by b", released).await;
    let first = jobs.get("first").await.unwrap();
    assert_eq!(admission_record(&first).as_deref(), Some(record.as_str()));
    wait_queue_usage(&admin, "research", 2, "4").await;
    // What a's requests held goes nowhere once the network is back: a is gone.
    proxy.heal();
    let first = jobs.get("first").await.unwrap();
    assert_eq!(admission_record(&first).as_deref(), Some(record.as_str()));
    assert!(!b.is_finished(), "b stopped");
    b.abort();
}

/// How many lists the operator's watch `watch` has made, as its
/// `arbiter_watch_lists_total` says.
fn watch_lists(state: &AdminState, watch: &str) -> u64 {
    let registry = state.registry.lock().unwrap();
    let series = format!("arbiter_watch_lists_total{{watch=\"{watch}\"}}");
    sample(&registry, &series).unwrap_or(0.0) as u64
}

async fn wait_watch_lists(state: &AdminState, watch: &str, at_least: u64) {
    let started = Instant::now();
    while watch_lists(state, watch) < at_least {
        if started.elapsed() >= PATIENCE {
            let text = arbiter_policy::metrics::encode(&state.registry.lock().unwrap());
            panic!(
                "the {watch} watch made {} lists, not {at_least}; the metrics say:\n{}",
                watch_lists(state, watch),
                text.lines()
                    .filter(|l| l.contains("watch_lists"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn watches_expired_by_etcd_compaction_are_listed_again_and_nothing_is_missed() {
    // Every watch and list reads etcd directly, so a watch resuming from a
    // compacted resourceVersion is answered 410 Gone.
    let options = Options {
        apiserver_args: vec!["--watch-cache=false".into()],
    };
    let (cluster, admin) = cluster_with_setup_using(&options).await;
    init_tracing();
    let proxy = cluster.fault_proxy().await.unwrap();
    let mut registry = Default::default();
    let metrics = OperatorMetrics::register(&mut registry);
    let state = AdminState::new(registry);
    let operator = Operator::builder(proxy.client_for("admin").await.unwrap())
        .driver_options(test_driver_options())
        .metrics(state.clone(), metrics)
        .start()
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    for name in ["kept", "deleted"] {
        jobs.create(&PostParams::default(), &job(name, 2))
            .await
            .unwrap();
    }
    let kept = wait_for(&jobs, "kept", "admitted", released).await;
    let record = admission_record(&kept).expect("an admission record");
    wait_for(&jobs, "deleted", "admitted", released).await;
    const JOBS: &str = "batch/v1 Job";
    wait_watch_lists(&state, JOBS, 1).await;
    let lists = watch_lists(&state, JOBS);

    // The operator cut off while a job is deleted and another created,
    // then etcd compacted past everything it saw.
    proxy.inject(Fault::Partition);
    jobs.delete("deleted", &DeleteParams::default())
        .await
        .unwrap();
    jobs.create(&PostParams::default(), &job("created", 2))
        .await
        .unwrap();
    let revision = cluster.compact_etcd().await.unwrap();
    eprintln!("etcd compacted at revision {revision}");
    // Back, every connection new: each watch resumes from a compacted
    // resourceVersion, is told 410 Gone, and lists again.
    proxy.reset_connections();
    proxy.heal();
    let back = Instant::now();
    wait_watch_lists(&state, JOBS, lists + 1).await;
    wait_for(&jobs, "created", "admitted after the relist", released).await;
    eprintln!(
        "reconnected to the job created meanwhile released: {:?}",
        back.elapsed()
    );
    // The job deleted unseen gave its quota back: 2 + 2 + 4 of 8 GPUs.
    wait_queue_usage(&admin, "research", 2, "4").await;
    jobs.create(&PostParams::default(), &job("big", 4))
        .await
        .unwrap();
    wait_for(
        &jobs,
        "big",
        "admitted in the deleted job's quota",
        released,
    )
    .await;
    wait_queue_usage(&admin, "research", 3, "8").await;
    // Nothing admitted twice.
    let kept = jobs.get("kept").await.unwrap();
    assert_eq!(admission_record(&kept).as_deref(), Some(record.as_str()));
    assert!(!operator.is_finished(), "the operator stopped");
}

/// A job as a user writes it: not suspended (the webhook holds it).
fn unsuspended(name: &str, gpus: u32) -> Job {
    let mut job = job(name, gpus);
    job.spec.as_mut().unwrap().suspend = Some(false);
    job
}

async fn pods_of(admin: &kube::Client, job: &str) -> usize {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");
    let selector = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    pods.list(&selector).await.unwrap().items.len()
}

#[tokio::test]
async fn webhooks_slow_or_down_let_no_job_run_unadmitted() {
    let (_cluster, admin) = full_cluster_with_setup().await;
    let operator = Operator::builder(admin.clone())
        .driver_options(test_driver_options())
        .webhooks(LOOPBACK, webhook_options(Default::default(), None))
        .start()
        .await
        .unwrap();
    let served = operator.webhook().expect("the webhooks served");
    // The API server calls the webhook through a forwarder that can slow
    // it down or cut it off; it waits 8 s for an answer. The forwarder
    // delays every read, so a new TLS connection pays the delay several
    // times: the slow case (0.5 s a read) stays well within the timeout
    // even on a loaded machine, the too-slow one (10 s) does not.
    let proxy = TcpProxy::start(served.address).await.unwrap();
    let (mut mutating, validating) =
        webhook_configurations(proxy.address.port(), Some(&served.ca_pem()));
    for hook in mutating["webhooks"].as_array_mut().unwrap() {
        hook["timeoutSeconds"] = json!(8);
    }
    apply_webhooks(&admin, &mutating, &validating).await;
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");

    // Healthy: held at creation, admitted, running; it fills the quota.
    let started = Instant::now();
    let first = loop {
        match jobs
            .create(&PostParams::default(), &unsuspended("first", 8))
            .await
        {
            Ok(created) => break created,
            Err(e) => {
                assert!(
                    started.elapsed() < PATIENCE,
                    "the webhook never answered: {e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert!(suspended(&first), "not held at creation: {:?}", first.spec);
    wait_for(&jobs, "first", "admitted", released).await;

    // Slow, within the API server's timeout: created late, and held.
    let slow = Duration::from_millis(500);
    proxy.set(Reach::Delay(slow));
    let asked = Instant::now();
    let created = jobs
        .create(&PostParams::default(), &unsuspended("slow", 2))
        .await
        .unwrap();
    assert!(asked.elapsed() >= slow, "the webhook was not slowed");
    assert!(
        suspended(&created),
        "not held at creation: {:?}",
        created.spec
    );

    // Slower than the timeout, or down: failing closed, the API refuses
    // the job, naming the webhook; nothing is created.
    for (name, reach) in [
        ("too-slow", Reach::Delay(Duration::from_secs(10))),
        ("refused", Reach::Down),
    ] {
        proxy.set(reach);
        let tried = proxy.accepted();
        let error = jobs
            .create(&PostParams::default(), &unsuspended(name, 2))
            .await
            .expect_err("created while the webhook could not answer");
        assert!(error.to_string().contains("jobs.arbiter.dev"), "{error}");
        if reach == Reach::Down {
            assert!(proxy.accepted() > tried, "the API server never called");
        }
        assert!(jobs.get_opt(name).await.unwrap().is_none());
    }

    // An administrator who chose to fail open: a job created while the
    // webhook is down escapes the hold and the Job controller starts its
    // pods; the operator holds it on sight and its pods go.
    for hook in mutating["webhooks"].as_array_mut().unwrap() {
        hook["failurePolicy"] = json!("Ignore");
    }
    apply_webhooks(&admin, &mutating, &validating).await;
    let created = jobs
        .create(&PostParams::default(), &unsuspended("escaped", 2))
        .await
        .unwrap();
    assert!(
        released(&created),
        "the webhook held it: {:?}",
        created.spec
    );
    wait_for(&jobs, "escaped", "held by the operator", suspended).await;
    let started = Instant::now();
    while pods_of(&admin, "escaped").await > 0 {
        assert!(
            started.elapsed() < PATIENCE,
            "the escaped job's pods stayed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_queue_usage(&admin, "research", 1, "8").await;

    // Back: once `first` ends, both waiting jobs are admitted, nothing else.
    proxy.set(Reach::Forward);
    finish(&jobs, "first").await;
    for name in ["slow", "escaped"] {
        wait_for(&jobs, name, "admitted once `first` finished", released).await;
    }
    wait_queue_usage(&admin, "research", 2, "4").await;
    assert!(!operator.is_finished(), "the operator stopped");
}

#[tokio::test]
async fn a_graceful_stop_writes_what_it_decided_before_it_goes() {
    let (_cluster, admin) = cluster_with_setup().await;
    init_tracing();
    let operator = Operator::builder(admin.clone())
        .driver_options(test_driver_options())
        .start()
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("last", 2))
        .await
        .unwrap();
    wait_for(&jobs, "last", "admitted", released).await;
    // Stopped (SIGTERM) at once: its Workload and Event would be written
    // only once settled, seconds later.
    operator.stop().await.unwrap();
    // Nothing runs now; what it decided is in the API all the same.
    let workloads: Api<Workload> = Api::namespaced(admin.clone(), "team-a");
    let workload = workloads
        .get_opt("job-last")
        .await
        .unwrap()
        .expect("the Workload was not written before the stop");
    let admitted = workload
        .status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .any(|c| c.type_ == "Admitted" && c.status == "True");
    assert!(admitted, "{:?}", workload.status);
    let events: Api<Event> = Api::namespaced(admin.clone(), "team-a");
    let told = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|e| {
            e.reason.as_deref() == Some("Admitted")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("last")
        });
    assert!(told, "the Admitted Event was dropped");
}
