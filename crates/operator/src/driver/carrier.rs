//! The task that writes the jobs, so a tick never waits on the API server:
//! the driver hands it each job's writes ([`Carrier::send`]) and reads the
//! results at its next tick ([`Carrier::results`]).
//!
//! [`CONCURRENCY`] jobs are written at once, in the order they were handed
//! over; one job's writes never overlap and keep their order (an eviction
//! handed over while the job's admission is still being written waits for
//! it, and starts from the API's answer to it). A write starts from the
//! reflector's copy; the job is read only on a conflict (`jobs::write`).
//! A failed write wakes the driver, which writes the job again after a
//! backoff of its own (see `carry`). Dropping the handle stops the task
//! (a replica that lost the lease writes nothing more); [`Carrier::finish`]
//! lets what was handed over be written first.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::jobs::Integrations;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;
use serde_json::Value;
use tokio::sync::{mpsc, Notify};

use super::JobKey;
use crate::inject::{self, PodSetAdmission, Recorded};
use crate::jobs;

/// Jobs written at once.
pub const CONCURRENCY: usize = 32;

/// One write of one job.
#[derive(Clone, Debug)]
pub(super) enum JobWrite {
    /// Inject, record and release.
    Admit(Vec<PodSetAdmission>, Recorded),
    Hold,
    /// Take out what admission injected (after a hold), the integration's
    /// `hold.clearStatus` fields cleared first.
    Restore,
    /// Run a failed job again: delete it (only while its uid is
    /// `replaces`) and create `fresh` in its place (`jobs::recreate`).
    Recreate {
        fresh: Box<Value>,
        replaces: String,
    },
}

/// Where a job lives: enough to read and write it off the driver's task.
#[derive(Clone)]
pub(super) struct Place {
    pub resource: ApiResource,
    pub store: Store<DynamicObject>,
    /// Index into the integrations' kinds.
    pub integration: usize,
}

/// One job's writes, in order, and what to tell once they are made.
pub(super) struct Order<T> {
    pub key: JobKey,
    pub place: Place,
    pub writes: Vec<JobWrite>,
    pub then: T,
}

/// What became of an [`Order`].
pub(super) struct Done<T> {
    pub key: JobKey,
    pub result: Result<(), String>,
    /// The version of the reflector's copy the writes replaced, when
    /// anything was written.
    pub over: Option<String>,
    pub then: T,
}

/// The driver's handle on the task.
pub(super) struct Carrier<T> {
    orders: Option<mpsc::UnboundedSender<Order<T>>>,
    done: mpsc::UnboundedReceiver<Done<T>>,
    task: tokio::task::JoinHandle<()>,
    /// Orders handed over whose result was not read yet, per job.
    in_flight: HashMap<JobKey, usize>,
}

impl<T> Drop for Carrier<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<T: Send + Sync + 'static> Carrier<T> {
    /// Starts the task (on the current Tokio runtime); a failed write
    /// notifies `wake`.
    pub fn start(client: Client, integrations: Integrations, wake: Arc<Notify>) -> Carrier<T> {
        let (orders, rx) = mpsc::unbounded_channel();
        let (tx, done) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(client, integrations, wake, rx, tx));
        Carrier {
            orders: Some(orders),
            done,
            task,
            in_flight: HashMap::new(),
        }
    }

    pub fn send(&mut self, order: Order<T>) {
        let Some(orders) = &self.orders else {
            return;
        };
        *self.in_flight.entry(order.key.clone()).or_default() += 1;
        // The task ends only with this handle (or `finish`); a send cannot fail before.
        let _ = orders.send(order);
    }

    /// Whether writes of `key` were handed over and their result not read yet.
    pub fn busy(&self, key: &JobKey) -> bool {
        self.in_flight.contains_key(key)
    }

    /// The results that came in since last asked.
    pub fn results(&mut self) -> Vec<Done<T>> {
        let mut out = Vec::new();
        while let Ok(done) = self.done.try_recv() {
            if let Some(count) = self.in_flight.get_mut(&done.key) {
                *count -= 1;
                if *count == 0 {
                    self.in_flight.remove(&done.key);
                }
            }
            out.push(done);
        }
        out
    }

    /// Takes no more orders and waits, at most `patience`, for those handed
    /// over to be written. Returns how many were still unwritten.
    pub async fn finish(&mut self, patience: Duration) -> usize {
        self.orders = None;
        let _ = tokio::time::timeout(patience, &mut self.task).await;
        self.task.abort();
        self.results();
        self.in_flight.values().sum()
    }
}

/// The task: orders queue per job; a job's next order starts when its
/// last one ended, jobs in the order they came.
async fn run<T: Send + Sync + 'static>(
    client: Client,
    integrations: Integrations,
    wake: Arc<Notify>,
    mut orders: mpsc::UnboundedReceiver<Order<T>>,
    done: mpsc::UnboundedSender<Done<T>>,
) {
    let integrations = Arc::new(integrations);
    // Jobs with an order that can start, in the order they came.
    let mut ready: VecDeque<JobKey> = VecDeque::new();
    let mut queued: HashMap<JobKey, VecDeque<Order<T>>> = HashMap::new();
    // Jobs being written.
    let mut writing: HashSet<JobKey> = HashSet::new();
    // The API's last answer for a job with another order queued: that
    // order starts from it.
    let mut answers: HashMap<JobKey, DynamicObject> = HashMap::new();
    let mut running = FuturesUnordered::new();
    let mut open = true;
    loop {
        while running.len() < CONCURRENCY {
            let Some(key) = ready.pop_front() else {
                break;
            };
            let Some(list) = queued.get_mut(&key) else {
                continue;
            };
            let Some(order) = list.pop_front() else {
                continue;
            };
            if list.is_empty() {
                queued.remove(&key);
            }
            let answer = answers.remove(&key);
            writing.insert(key);
            let client = client.clone();
            let integrations = integrations.clone();
            running.push(async move {
                let (result, over, answer) =
                    write_job(&client, &integrations, &order, answer).await;
                (order, result, over, answer)
            });
        }
        if !open && running.is_empty() && ready.is_empty() {
            return;
        }
        tokio::select! {
            order = orders.recv(), if open => match order {
                Some(order) => {
                    let key = order.key.clone();
                    let list = queued.entry(key.clone()).or_default();
                    list.push_back(order);
                    if list.len() == 1 && !writing.contains(&key) {
                        ready.push_back(key);
                    }
                }
                None => open = false,
            },
            Some((order, result, over, answer)) = running.next(), if !running.is_empty() => {
                let key = order.key.clone();
                writing.remove(&key);
                if queued.contains_key(&key) {
                    if let Some(answer) = answer {
                        answers.insert(key.clone(), answer);
                    }
                    ready.push_back(key.clone());
                }
                if result.is_err() {
                    wake.notify_one();
                }
                let _ = done.send(Done {
                    key,
                    result,
                    over,
                    then: order.then,
                });
            }
        }
    }
}

/// One job's writes, in order, starting from the API's last answer or the
/// reflector's copy. Returns the result, the version of the reflector's
/// copy when anything was written, and the API's last answer.
async fn write_job<T>(
    client: &Client,
    integrations: &Integrations,
    order: &Order<T>,
    answer: Option<DynamicObject>,
) -> (Result<(), String>, Option<String>, Option<DynamicObject>) {
    let key = &order.key;
    let place = &order.place;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &place.resource);
    let Some(integration) = integrations
        .kinds()
        .nth(place.integration)
        .and_then(|(api_version, kind)| integrations.find(api_version, kind))
    else {
        return (Err("the job's kind has no integration".into()), None, None);
    };
    let reference = ObjectRef::<DynamicObject>::new_with(&key.name, place.resource.clone())
        .within(&key.namespace);
    let copy = place.store.get(&reference).map(|o| o.as_ref().clone());
    let copied = copy
        .as_ref()
        .and_then(|o| o.metadata.resource_version.clone());
    let mut known = match answer {
        Some(answer) => Some((answer, true)),
        None => copy.map(|o| (o, false)),
    };
    let mut wrote = false;
    for write in &order.writes {
        let result = match write {
            JobWrite::Admit(pod_sets, record) => {
                jobs::write(&api, &key.name, integration, known.take(), |o, i| {
                    inject::admit(o, i, pod_sets, record.clone())
                })
                .await
            }
            JobWrite::Hold => {
                jobs::write(&api, &key.name, integration, known.take(), inject::hold).await
            }
            JobWrite::Restore => {
                match jobs::clear_status(&api, &key.name, integration, known.take()).await {
                    Ok(cleared) => {
                        jobs::write(&api, &key.name, integration, cleared, inject::restore).await
                    }
                    Err(e) => Err(e),
                }
            }
            JobWrite::Recreate { fresh, replaces } => {
                jobs::recreate(&api, &key.name, fresh, replaces).await
            }
        };
        match result {
            Ok(done) => {
                wrote |= done.replaced.is_some();
                known = done.object.map(|o| (o, true));
            }
            Err(e) => return (Err(e), copied.filter(|_| wrote), None),
        }
    }
    (Ok(()), copied.filter(|_| wrote), known.map(|(o, _)| o))
}
