//! The one way jobs are written: level-triggered. The driver says what
//! each job must be ([`JobWriter::want`], a [`Want`] from the core's
//! decision) and which jobs the reflector saw change
//! ([`JobWriter::touch`]); per job kind, kube-runtime's `applier` (over
//! the kind's reflector store) calls [`reconcile`] for each, at most one
//! call per job at a time, requests for one job merged, [`CONCURRENCY`]
//! jobs at once. A call compares the store's copy with the want
//! (`converge::next`) and makes the writes that bring it there, each from
//! the answer to the one before, so a decision is carried out however many
//! decisions came in between and whatever else changed the job.
//!
//! Writes are typed (`jobs::WriteError`):
//! - a conflict means the copy was stale: nothing is read; the watch brings
//!   the newer version, and with it the next call;
//! - a refusal (400, 403, 422) is told to the driver (an Event and a
//!   Workload condition, once per message) and tried again when the job or
//!   its want changes — and, since what refused it (an admission policy,
//!   RBAC) can change unseen, after [`REFUSED`] (5 s doubling to a minute);
//!   a refused template write (restore, admit) is told only from the
//!   [`TOLD_AFTER`]th refusal in a row, since a started Job's template may
//!   change only once its pods are gone, which the job's next version shows;
//! - anything else is tried again after `retry::WRITES` (0.5 s doubling to
//!   30 s), through the applier's `error_policy`.
//!
//! A copy that is still the version a write replaced is not looked at
//! (the write would conflict); the watch brings the new one. A failed job
//! to create anew whose old object is gone already is not in the store,
//! so the applier cannot call for it: its creation is made off the
//! applier, with the same backoff. Dropping the writer stops its tasks (a
//! replica that lost the lease writes nothing more); [`JobWriter::finish`]
//! lets the calls under way end first.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arbiter_core::jobs::{Integration, Integrations};
use futures::channel::mpsc as channel;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::ObjectRef;
use kube::Client;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinSet;

use super::converge::{self, Observed, Step, Want};
use super::JobKey;
use crate::inject;
use crate::jobs::{self, WriteError};
use crate::watch::JobWatch;

/// Jobs written at once, per job kind.
pub const CONCURRENCY: u16 = 256;

/// How long a call that found a stale copy waits before looking again if
/// the watch brings nothing sooner (it normally does, within milliseconds).
const STALE: Duration = Duration::from_secs(5);

/// How often a job whose write was refused, and that did not change since,
/// is tried again.
const REFUSED: crate::retry::WriteBackoff = crate::retry::WriteBackoff {
    first: Duration::from_secs(5),
    max: Duration::from_secs(60),
};

/// Refusals in a row of a template write (restore, admit) before they are
/// told: one refused just after a hold is usually the Job's pods still
/// going, and goes through once the job changes.
const TOLD_AFTER: u32 = 3;

/// Writes one call makes at most (a running job evicted: hold, clear its
/// status, restore).
const MAX_STEPS: usize = 4;

/// What the driver hears back.
#[derive(Debug, PartialEq)]
pub(super) enum Done {
    /// The job's admission is written: it is released.
    Admitted(JobKey),
    /// The API refused a write of the job.
    Refused {
        key: JobKey,
        step: Step,
        message: String,
    },
    /// A job whose write was refused is as it must be now.
    Cleared(JobKey),
}

/// Per job: the uid of the object the want is for, and the want.
type Wants = Arc<Mutex<HashMap<JobKey, (String, Want)>>>;

type ApplierError = controller::Error<WriteError, std::convert::Infallible>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a job kind's calls share.
struct Ctx {
    client: Client,
    /// Seals admission records (`seal`); `None`: records go unsealed.
    sealer: Option<crate::seal::Sealer>,
    watch: usize,
    resource: ApiResource,
    integrations: Integrations,
    /// Index into the integrations' kinds.
    integration: usize,
    wants: Wants,
    /// Per job: the version of the copy its last writes started from, until
    /// a newer one is seen.
    written_over: Mutex<HashMap<JobKey, String>>,
    /// Per job whose writes failed: failures in a row, and not before when
    /// it is tried again.
    failures: Mutex<HashMap<JobKey, (u32, Instant)>>,
    /// Per job whose last write was refused: refusals in a row.
    refused: Mutex<HashMap<JobKey, u32>>,
    done: mpsc::UnboundedSender<Done>,
    wake: Arc<Notify>,
}

impl Ctx {
    fn integration(&self) -> Option<&Integration> {
        let (api_version, kind) = self.integrations.kinds().nth(self.integration)?;
        self.integrations.find(api_version, kind)
    }

    fn key(&self, namespace: Option<&str>, name: &str) -> JobKey {
        JobKey {
            watch: self.watch,
            namespace: namespace.unwrap_or_default().to_string(),
            name: name.to_string(),
        }
    }

    fn want(&self, key: &JobKey) -> Option<(String, Want)> {
        lock(&self.wants).get(key).cloned()
    }

    fn api(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &self.resource)
    }

    /// A failure of `key`'s writes: how long until it is tried again.
    fn failed(&self, key: &JobKey) -> Duration {
        let mut failures = lock(&self.failures);
        let count = failures.get(key).map_or(1, |(n, _)| n + 1);
        let wait = crate::retry::WRITES.delay(count);
        failures.insert(key.clone(), (count, Instant::now() + wait));
        wait
    }

    /// How long `key` still waits out its backoff.
    fn backing_off(&self, key: &JobKey) -> Option<Duration> {
        let failures = lock(&self.failures);
        let (_, at) = failures.get(key)?;
        Some(at.saturating_duration_since(Instant::now())).filter(|d| !d.is_zero())
    }

    fn tell(&self, done: Done) {
        let refused = matches!(done, Done::Refused { .. });
        // The driver reads these at its next tick; it ends only with the writer.
        let _ = self.done.send(done);
        if refused {
            self.wake.notify_one();
        }
    }
}

/// The driver's handle on the writes.
pub(super) struct JobWriter {
    client: Client,
    sealer: Option<crate::seal::Sealer>,
    integrations: Integrations,
    wake: Arc<Notify>,
    wants: Wants,
    /// Per job watch (in the driver's order): its applier's queue and the kind.
    queues: Vec<(
        channel::UnboundedSender<ObjectRef<DynamicObject>>,
        ApiResource,
    )>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    done_tx: mpsc::UnboundedSender<Done>,
    done: mpsc::UnboundedReceiver<Done>,
}

impl Drop for JobWriter {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl JobWriter {
    pub fn new(
        client: Client,
        integrations: Integrations,
        wake: Arc<Notify>,
        sealer: Option<crate::seal::Sealer>,
    ) -> JobWriter {
        let (done_tx, done) = mpsc::unbounded_channel();
        JobWriter {
            client,
            sealer,
            integrations,
            wake,
            wants: Arc::default(),
            queues: Vec::new(),
            tasks: Vec::new(),
            done_tx,
            done,
        }
    }

    /// Writes the jobs of `watch`, the next of the driver's job watches
    /// (they are added in the driver's order). Starts its applier on the
    /// current Tokio runtime.
    pub fn add(&mut self, watch: &JobWatch) {
        let (queue, requests) = channel::unbounded();
        let ctx = Arc::new(Ctx {
            client: self.client.clone(),
            sealer: self.sealer.clone(),
            watch: self.queues.len(),
            resource: watch.resource.clone(),
            integrations: self.integrations.clone(),
            integration: watch.integration,
            wants: self.wants.clone(),
            written_over: Mutex::default(),
            failures: Mutex::default(),
            refused: Mutex::default(),
            done: self.done_tx.clone(),
            wake: self.wake.clone(),
        });
        let calls = controller::applier(
            |job, ctx| Box::pin(reconcile(job, ctx)),
            error_policy,
            ctx.clone(),
            watch.watched.store.clone(),
            requests.map(Ok::<_, std::convert::Infallible>),
            controller::Config::default().concurrency(CONCURRENCY),
        );
        self.tasks.push(tokio::spawn(drive(calls, ctx)));
        self.queues.push((queue, watch.resource.clone()));
    }

    fn trigger(&self, key: &JobKey) {
        let Some((queue, resource)) = self.queues.get(key.watch) else {
            return;
        };
        let mut reference = ObjectRef::new_with(&key.name, resource.clone());
        if !key.namespace.is_empty() {
            reference = reference.within(&key.namespace);
        }
        // Closed only by `finish`, after which nothing more is written.
        let _ = queue.unbounded_send(reference);
    }

    /// Job `key`, the object of uid `uid`, must be `want`: its writes are
    /// made if it is not. Another object under the name (the job deleted
    /// and created again) is not written to until it has a want of its own.
    pub fn want(&self, key: &JobKey, uid: &str, want: Want) {
        let changed = {
            let mut wants = lock(&self.wants);
            match wants.get(key) {
                Some((now_uid, now)) if now_uid == uid && *now == want => false,
                _ => {
                    wants.insert(key.clone(), (uid.to_string(), want));
                    true
                }
            }
        };
        if changed {
            self.trigger(key);
        }
    }

    /// Job `key` is left as it is from now on (gone, ended, or not Arbiter's).
    pub fn forget(&self, key: &JobKey) {
        lock(&self.wants).remove(key);
    }

    /// The reflector holds a new version of job `key`: it is compared
    /// with its want again, if it has one.
    pub fn touch(&self, key: &JobKey) {
        if lock(&self.wants).contains_key(key) {
            self.trigger(key);
        }
    }

    /// What came back since last asked.
    pub fn results(&mut self) -> Vec<Done> {
        let mut out = Vec::new();
        while let Ok(done) = self.done.try_recv() {
            out.push(done);
        }
        out
    }

    /// Takes no more requests and waits, at most `patience`, for the calls
    /// under way to end. Returns whether they all did.
    pub async fn finish(&mut self, patience: Duration) -> bool {
        self.queues.clear();
        let tasks = std::mem::take(&mut self.tasks);
        let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
        let ended = tokio::time::timeout(patience, futures::future::join_all(tasks))
            .await
            .is_ok();
        for abort in aborts {
            abort.abort();
        }
        ended
    }
}

/// Runs a job kind's applier; a job to create anew whose old object is
/// already gone (the applier reports it not found) is created here.
async fn drive(
    calls: impl futures::Stream<Item = Result<(ObjectRef<DynamicObject>, Action), ApplierError>>,
    ctx: Arc<Ctx>,
) {
    let mut calls = std::pin::pin!(calls);
    let mut absent: JoinSet<JobKey> = JoinSet::new();
    let mut creating: HashSet<JobKey> = HashSet::new();
    loop {
        tokio::select! {
            call = calls.next() => match call {
                None => break,
                Some(Ok(_)) => {}
                Some(Err(controller::Error::ObjectNotFound(reference))) => {
                    let key = ctx.key(reference.namespace.as_deref(), &reference.name);
                    if matches!(ctx.want(&key), Some((_, Want::Replaced { .. }))) && creating.insert(key.clone()) {
                        absent.spawn(create_absent(ctx.clone(), key));
                    }
                }
                // Failed calls are told by `error_policy`.
                Some(Err(_)) => {}
            },
            Some(Ok(key)) = absent.join_next(), if !absent.is_empty() => {
                creating.remove(&key);
            }
        }
    }
    while absent.join_next().await.is_some() {}
}

/// Creates failed job `key` anew while it is wanted so and not there,
/// after the backoff between failures.
async fn create_absent(ctx: Arc<Ctx>, key: JobKey) -> JobKey {
    loop {
        if let Some(wait) = ctx.backing_off(&key) {
            tokio::time::sleep(wait).await;
        }
        let Some((_, want @ Want::Replaced { .. })) = ctx.want(&key) else {
            break;
        };
        if converge::next(&want, None).is_none() {
            break;
        }
        match write(
            &ctx.api(&key.namespace),
            &key.name,
            None,
            &want,
            Step::Recreate,
            None,
        )
        .await
        {
            Ok(_) | Err(WriteError::Conflict(_)) => {
                lock(&ctx.failures).remove(&key);
                break;
            }
            Err(WriteError::Refused(message)) => {
                ctx.tell(Done::Refused {
                    key: key.clone(),
                    step: Step::Recreate,
                    message,
                });
                break;
            }
            Err(error @ WriteError::Transient(_)) => {
                let wait = ctx.failed(&key);
                tracing::warn!(job = %key, %error, retry_in = ?wait, "could not create the failed job anew; trying again");
            }
        }
    }
    key
}

/// One job's call: the writes that bring it to its want (see the module's note).
async fn reconcile(job: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, WriteError> {
    let key = ctx.key(
        job.metadata.namespace.as_deref(),
        job.metadata.name.as_deref().unwrap_or_default(),
    );
    let version = job.metadata.resource_version.clone();
    {
        let mut written_over = lock(&ctx.written_over);
        match (written_over.get(&key), &version) {
            // The copy is the version the last writes replaced.
            (Some(over), Some(now)) if over == now => {
                tracing::debug!(job = %key, "the copy is older than the last write; waiting for the watch");
                return Ok(Action::requeue(STALE));
            }
            (Some(_), _) => {
                written_over.remove(&key);
            }
            _ => {}
        }
    }
    if let Some(wait) = ctx.backing_off(&key) {
        return Ok(Action::requeue(wait));
    }
    let Some(integration) = ctx.integration() else {
        return Ok(Action::await_change());
    };
    let api = ctx.api(&key.namespace);
    let mut current = (*job).clone();
    let mut wrote = false;
    let mut outcome = Ok(Action::await_change());
    for _ in 0..MAX_STEPS {
        let Some((uid, want)) = ctx.want(&key) else {
            break;
        };
        // Wanted of another object under the name (a failed job's
        // replacement is the converge function's to tell apart).
        let other = current.metadata.uid.as_deref() != Some(uid.as_str());
        if other && !matches!(want, Want::Replaced { .. }) {
            break;
        }
        let observed = match serde_json::to_value(&current) {
            Ok(value) => Observed::of(&value, integration),
            Err(_) => break,
        };
        let Some(step) = converge::next(&want, Some(&observed)) else {
            if lock(&ctx.refused).remove(&key).is_some() {
                ctx.tell(Done::Cleared(key.clone()));
            }
            break;
        };
        match write(
            &api,
            &key.name,
            Some((&current, integration)),
            &want,
            step,
            ctx.sealer.as_ref(),
        )
        .await
        {
            Ok(Some(now)) => {
                // For a release: how long after the decision it is written.
                let decided_ms_ago = match &want {
                    Want::Released { record, .. } => super::now_millis() - record.admitted_at,
                    _ => 0,
                };
                tracing::debug!(job = %key, %step, decided_ms_ago, "written");
                wrote = true;
                if step == Step::Admit {
                    ctx.tell(Done::Admitted(key.clone()));
                }
                current = now;
            }
            // Gone: its withdrawal follows.
            Ok(None) => break,
            Err(WriteError::Conflict(message)) => {
                tracing::debug!(job = %key, %step, %message, "the copy was stale; written from the watch's newer one");
                outcome = Ok(Action::requeue(STALE));
                break;
            }
            Err(WriteError::Refused(message)) => {
                let refusals = {
                    let mut refused = lock(&ctx.refused);
                    let count = refused.entry(key.clone()).or_insert(0);
                    *count += 1;
                    *count
                };
                // Kubernetes lets a started Job's template change only
                // once its pods are gone: a template write refused just
                // after a hold is told only if it stays refused.
                let template = matches!(step, Step::Restore | Step::Admit);
                if !template || refusals >= TOLD_AFTER {
                    ctx.tell(Done::Refused {
                        key: key.clone(),
                        step,
                        message,
                    });
                } else {
                    tracing::debug!(job = %key, %step, %message, "refused for now; tried again when the job changes");
                }
                outcome = Ok(Action::requeue(REFUSED.delay(refusals)));
                break;
            }
            Err(error) => {
                outcome = Err(error);
                break;
            }
        }
    }
    if wrote {
        if let Some(version) = version {
            lock(&ctx.written_over).insert(key.clone(), version);
        }
    }
    if outcome.is_ok() {
        lock(&ctx.failures).remove(&key);
    }
    outcome
}

/// A write that failed for a reason worth trying again: after the backoff.
fn error_policy(job: Arc<DynamicObject>, error: &WriteError, ctx: Arc<Ctx>) -> Action {
    let key = ctx.key(
        job.metadata.namespace.as_deref(),
        job.metadata.name.as_deref().unwrap_or_default(),
    );
    let wait = ctx.failed(&key);
    tracing::warn!(job = %key, %error, retry_in = ?wait, "could not write the job; trying again");
    Action::requeue(wait)
}

/// One step's write, from `current` (the copy, or the API's last answer;
/// `None` for a job to create whose old object is gone). Returns the job
/// as it then is (`None`: gone, or created without an answer).
async fn write(
    api: &Api<DynamicObject>,
    name: &str,
    current: Option<(&DynamicObject, &Integration)>,
    want: &Want,
    step: Step,
    sealer: Option<&crate::seal::Sealer>,
) -> Result<Option<DynamicObject>, WriteError> {
    if let (Step::Recreate, Want::Replaced { fresh, replaces }) = (step, want) {
        return jobs::recreate(api, name, fresh, replaces).await;
    }
    let Some((current, integration)) = current else {
        return Ok(None);
    };
    match (step, want) {
        (Step::Hold, _) => jobs::replace(api, current, integration, inject::hold).await,
        (Step::ClearStatus, _) => jobs::clear_status(api, current, integration).await,
        (Step::Restore, _) => jobs::replace(api, current, integration, inject::restore).await,
        (Step::Admit, Want::Released { pod_sets, record }) => {
            jobs::replace(api, current, integration, |o, i| {
                inject::admit(o, i, pod_sets, record.clone(), sealer)
            })
            .await
        }
        (step, _) => Err(WriteError::Refused(format!(
            "{step} does not lead to what the job must be (a bug)"
        ))),
    }
}
