//! The writes that tell what the scheduler decided — each job's `Workload`
//! object and its status, ClusterQueue, LocalQueue, Cohort and
//! ResourceFlavor status, Events on the
//! jobs — made by a task of their own, so admission never waits for them.
//!
//! The driver hands over what each object should say ([`Publisher`]); the
//! task keeps only the latest wish per object (a status that changed three
//! times before it was written is written once), writes an object's
//! wishes once the first of them is [`SETTLE`] old (so a job admitted and
//! finished within it has one status write, not three, and the API server
//! spends itself on the jobs' own writes), up to [`CONCURRENCY`] objects
//! at a time (each write started as one ends; Workloads and the other
//! objects taken in turn), never two writes of one
//! object at once (one wished again while it is written settles anew),
//! and tries a failed write again after a backoff (`retry::WRITES`: 0.5 s
//! doubling to 30 s). When the API cannot keep up, the wishes wait (at
//! most one per object) and the decisions go on; a job that goes before
//! its Workload was ever written takes its wish with it (nothing to
//! create, nothing to delete), so what waits is bounded by the jobs there
//! are, not by every job that passed. `arbiter_publish_backlog` shows how
//! many wait, and Events beyond [`MAX_EVENTS`] are dropped, oldest first
//! (the `Recorder` renewed every [`RECORDER_SPAN`]). A write the API refuses for good
//! (invalid, forbidden) is logged and dropped. The task stops with its
//! handle, so a replica that lost the lease writes nothing more.
//!
//! Arbiter owns a Workload's content: it says what was decided, and
//! nothing is decided from it. The task compares what the API holds with
//! what it last wrote — the answer to each of its writes, and each
//! version the Workload watch shows after its last write
//! ([`Publisher::observer`]; later by `resourceVersion`, which Kubernetes
//! makes comparable) — and writes one someone else changed back to what
//! was decided (`workloads::write_back`), told in a Warning
//! `WorkloadEdited` Event on the Workload naming the fields changed
//! (`workload`: the Workloads' writes and that comparison).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use arbiter_core::model::api::{self, ActiveStatus, ClusterQueueStatus, LocalQueueStatus};
use futures::stream::{FuturesUnordered, StreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::Api;
use kube::runtime::events::Recorder;
use kube::Client;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::workloads::{self, apply_status, record_event, workload_name, Desired, Owner};

mod workload;
use workload::{write_workload, WorkloadWish, Written};

/// Objects written at once, and Events told at once: each write starts as
/// one ends.
pub const CONCURRENCY: usize = 8;

/// Events waiting beyond this many are dropped, oldest first (Kubernetes
/// treats Events as best effort too; the Workloads' conditions say the same).
pub const MAX_EVENTS: usize = 10_000;

/// Events told with one `Recorder` before a fresh one takes over.
/// kube-runtime's `Recorder` keeps every Event it sent for six minutes (to
/// count a repeat into a series) and sweeps them all on each Event: at
/// hundreds of Events a second, tens of thousands held. A fresh one every
/// 4,096 bounds that, as client-go bounds its correlator's cache to 4,096
/// (a repeat across the change is a new Event instead of a count).
pub const RECORDER_SPAN: u64 = 4096;

/// How long an object's wishes gather before they are written (Events are
/// told at once).
pub const SETTLE: Duration = Duration::from_secs(2);

/// An object the task writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Target {
    Workload { namespace: String, name: String },
    ClusterQueue(String),
    LocalQueue { namespace: String, name: String },
    Cohort(String),
    ResourceFlavor(String),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Workload { namespace, name } => write!(f, "Workload {namespace}/{name}"),
            Target::ClusterQueue(name) => write!(f, "ClusterQueue {name}"),
            Target::LocalQueue { namespace, name } => write!(f, "LocalQueue {namespace}/{name}"),
            Target::Cohort(name) => write!(f, "Cohort {name}"),
            Target::ResourceFlavor(name) => write!(f, "ResourceFlavor {name}"),
        }
    }
}

/// What an object should be brought to.
#[derive(Clone, Debug)]
enum Wish {
    Workload {
        /// The spec, when the driver first tracks the job (created if absent).
        spec: Option<Box<api::Workload>>,
        status: Option<Desired>,
        /// An earlier job of the same name went: its Workload is deleted first.
        replace: bool,
        /// Someone else changed it (the object as last seen): written back
        /// first to what was last written, exactly.
        restore: Option<Box<api::Workload>>,
    },
    Delete,
    ClusterQueue(Box<ClusterQueueStatus>),
    LocalQueue(Box<LocalQueueStatus>),
    /// A Cohort's or ResourceFlavor's status.
    Active(Box<ActiveStatus>),
}

impl Wish {
    /// `self` followed by `next`, as one wish.
    fn then(self, next: Wish) -> Wish {
        match (self, next) {
            (
                Wish::Workload {
                    spec,
                    status,
                    replace,
                    restore,
                },
                Wish::Workload {
                    spec: spec2,
                    status: status2,
                    replace: replace2,
                    restore: restore2,
                },
            ) => Wish::Workload {
                spec: spec2.or(spec),
                status: status2.or(status),
                replace: replace || replace2,
                restore: restore2.or(restore),
            },
            (
                Wish::Delete,
                Wish::Workload {
                    spec,
                    status,
                    replace: _,
                    restore: _,
                },
            ) => Wish::Workload {
                spec,
                status,
                replace: true,
                restore: None,
            },
            (_, next) => next,
        }
    }
}

enum Message {
    Wish(Target, Wish),
    /// Where to report the backlog from now on.
    Backlog(Gauge),
    /// Write everything at once, settled or not, and say when nothing is
    /// left (a graceful stop).
    Flush(tokio::sync::oneshot::Sender<()>),
    /// A Workload's conditions as the API holds them.
    Seed {
        namespace: String,
        name: String,
        conditions: Vec<Condition>,
    },
    Event {
        regarding: ObjectReference,
        warning: bool,
        reason: String,
        note: String,
    },
    /// What the Workload watch saw.
    Observed(Box<WorkloadWatchEvent>),
}

/// What the Workload watch hands the publisher.
pub enum WorkloadWatchEvent {
    /// A Workload as the API holds it now.
    Applied(api::Workload),
    /// A Workload deleted.
    Deleted(api::Workload),
    /// A relist begins: until [`WorkloadWatchEvent::Relisted`], the watch shows every
    /// Workload the API holds (after a watch broke or expired).
    Relisting,
    /// The relist is over: a Workload it did not show was deleted while
    /// the watch was not looking.
    Relisted,
}

/// The driver's handle on the task; dropping it stops the task.
pub struct Publisher {
    tx: mpsc::UnboundedSender<Message>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Publisher {
    /// Starts the task (on the current Tokio runtime).
    pub fn start(client: Client) -> Publisher {
        let (tx, rx) = mpsc::unbounded_channel();
        let worker = Worker::new(client);
        Publisher {
            tx,
            task: tokio::spawn(worker.run(rx)),
        }
    }

    fn send(&self, message: Message) {
        // The task ends only with this handle; a send cannot fail before.
        let _ = self.tx.send(message);
    }

    /// The job's Workload should exist (`spec`, on first tracking) and say `status`.
    pub fn workload(&self, owner: &Owner, spec: Option<api::Workload>, status: Option<Desired>) {
        self.send(Message::Wish(
            workload_target(owner),
            Wish::Workload {
                spec: spec.map(Box::new),
                status,
                replace: false,
                restore: None,
            },
        ));
    }

    /// What the Workload watch hands over: each Workload as the API holds
    /// it, compared with what was last written; one changed by someone
    /// else is written back and told (a Warning `WorkloadEdited` Event on
    /// it). Arbiter owns a Workload's content: it says what was decided,
    /// and nothing is decided from it. A Workload deleted is handed over
    /// too, and so is a relist.
    pub fn observer(&self) -> impl Fn(WorkloadWatchEvent) + Send + Sync + 'static {
        let tx = self.tx.clone();
        move |seen| {
            let _ = tx.send(Message::Observed(Box::new(seen)));
        }
    }

    /// The job went: its Workload is deleted.
    pub fn forget(&self, owner: &Owner) {
        self.send(Message::Wish(workload_target(owner), Wish::Delete));
    }

    pub fn cluster_queue(&self, name: &str, status: ClusterQueueStatus) {
        self.send(Message::Wish(
            Target::ClusterQueue(name.to_string()),
            Wish::ClusterQueue(Box::new(status)),
        ));
    }

    /// The status of Cohort or ResourceFlavor (`kind`) `name`.
    pub fn active(&self, kind: &str, name: &str, status: ActiveStatus) {
        let target = match kind {
            "Cohort" => Target::Cohort(name.to_string()),
            "ResourceFlavor" => Target::ResourceFlavor(name.to_string()),
            _ => return,
        };
        self.send(Message::Wish(target, Wish::Active(Box::new(status))));
    }

    pub fn local_queue(&self, namespace: &str, name: &str, status: LocalQueueStatus) {
        self.send(Message::Wish(
            Target::LocalQueue {
                namespace: namespace.to_string(),
                name: name.to_string(),
            },
            Wish::LocalQueue(Box::new(status)),
        ));
    }

    /// The conditions the Workload `namespace/name` has in the API (read
    /// back after a start): a condition written again with the same status
    /// keeps its `lastTransitionTime`.
    pub fn seed_conditions(&self, namespace: &str, name: &str, conditions: Vec<Condition>) {
        self.send(Message::Seed {
            namespace: namespace.to_string(),
            name: name.to_string(),
            conditions,
        });
    }

    /// Writes what is owed now (wishes not settled yet included) and waits
    /// until nothing is left, at most `patience`: a graceful stop hands the
    /// API what it decided, Events included, instead of dropping it.
    /// Whether everything was written.
    pub async fn flush(&self, patience: Duration) -> bool {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Message::Flush(tx));
        matches!(tokio::time::timeout(patience, rx).await, Ok(Ok(())))
    }

    /// Reports the number of objects and Events waiting to be written in `gauge`.
    pub fn report_backlog(&self, gauge: Gauge) {
        self.send(Message::Backlog(gauge));
    }

    /// A Kubernetes Event on the job.
    pub fn event(&self, owner: &Owner, warning: bool, reason: &str, note: String) {
        self.send(Message::Event {
            regarding: ObjectReference {
                api_version: Some(owner.api_version.clone()),
                kind: Some(owner.kind.clone()),
                name: Some(owner.name.clone()),
                // A cluster-scoped object (a Node) has none: its Events go
                // to `default`, where kubectl looks for them.
                namespace: (!owner.namespace.is_empty()).then(|| owner.namespace.clone()),
                uid: Some(owner.uid.clone()),
                ..ObjectReference::default()
            },
            warning,
            reason: reason.to_string(),
            note,
        });
    }
}

fn workload_target(owner: &Owner) -> Target {
    Target::Workload {
        namespace: owner.namespace.clone(),
        name: workload_name(&owner.kind, &owner.name),
    }
}

/// Targets with a wish, by when their first wish came, oldest first (each
/// once; delayed ones and ones being written are not here): Workloads in
/// one line, queue and other statuses in the other, settled ones taken
/// from each in turn, so neither waits behind the other (a thousand
/// queues' statuses at start-up do not hold back every Workload).
#[derive(Default)]
struct Order {
    workloads: VecDeque<(Instant, Target)>,
    others: VecDeque<(Instant, Target)>,
    /// Whether a Workload is taken next when both lines have a settled one.
    workload_next: bool,
    /// Flushing: every wish is settled at once.
    flushing: bool,
}

impl Order {
    fn push(&mut self, since: Instant, target: Target) {
        match target {
            Target::Workload { .. } => self.workloads.push_back((since, target)),
            _ => self.others.push_back((since, target)),
        }
    }

    /// When the first wish settles.
    fn first_settling(&self) -> Option<Instant> {
        let first = |line: &VecDeque<(Instant, Target)>| line.front().map(|(since, _)| *since);
        match (first(&self.workloads), first(&self.others)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|since| since + self.settle())
    }

    /// How long a wish gathers: [`SETTLE`], or nothing while flushing.
    fn settle(&self) -> Duration {
        if self.flushing {
            Duration::ZERO
        } else {
            SETTLE
        }
    }

    /// The next target whose first wish is settled.
    fn next_settled(&mut self) -> Option<Target> {
        let settle = self.settle();
        let settled = |line: &VecDeque<(Instant, Target)>| {
            line.front()
                .is_some_and(|(since, _)| since.elapsed() >= settle)
        };
        let take_workload = match (settled(&self.workloads), settled(&self.others)) {
            (true, true) => self.workload_next,
            (true, false) => true,
            (false, true) => false,
            (false, false) => return None,
        };
        self.workload_next = !take_workload;
        let line = if take_workload {
            &mut self.workloads
        } else {
            &mut self.others
        };
        line.pop_front().map(|(_, target)| target)
    }
}

struct Worker {
    client: Client,
    recorder: Recorder,
    wishes: HashMap<Target, Wish>,
    order: Order,
    /// Targets whose last write failed, by when they are tried again.
    delayed: BTreeSet<(Instant, Target)>,
    /// The targets in `delayed`.
    delayed_targets: HashSet<Target>,
    attempts: HashMap<Target, u32>,
    events: VecDeque<Message>,
    written: HashMap<(String, String), Written>,
    backlog: Option<Gauge>,
    /// Events dropped so far (see [`MAX_EVENTS`]).
    dropped_events: u64,
    /// Objects whose write is under way.
    in_flight: HashSet<Target>,
    /// Told when a flush has nothing left to write.
    flushed: Option<tokio::sync::oneshot::Sender<()>>,
    /// Per Workload being written, the newest version the watch showed
    /// meanwhile: looked at once the write is over.
    seen_meanwhile: HashMap<Target, Box<api::Workload>>,
    /// Workloads the watch showed that this process has not written
    /// (someone else's, or from before a restart): deleted when their job
    /// goes, even if no write of them came first.
    seen_unwritten: HashSet<Target>,
    /// While the watch relists, the Workloads it has shown so far.
    relisted: Option<HashSet<Target>>,
    /// Events told so far.
    told: u64,
}

/// How one write ended.
enum WriteOutcome {
    Done,
    /// Done, and the answer shows someone else's changes (these fields):
    /// the object as it is, to write back.
    Edited(Box<api::Workload>, Vec<String>),
    /// Worth trying again.
    Failed(String),
    /// Refused for good.
    Refused(String),
}

fn outcome(result: Result<(), kube::Error>) -> WriteOutcome {
    match result {
        Ok(()) => WriteOutcome::Done,
        Err(kube::Error::Api(s)) if matches!(s.code, 400 | 403 | 422) => {
            WriteOutcome::Refused(s.message.clone())
        }
        Err(e) => WriteOutcome::Failed(e.to_string()),
    }
}

/// An object's write under way: what it ends with.
type Writing = futures::future::BoxFuture<'static, (Target, Wish, Written, WriteOutcome)>;

impl Worker {
    fn new(client: Client) -> Worker {
        Worker {
            recorder: workloads::recorder(client.clone()),
            client,
            wishes: HashMap::new(),
            order: Order::default(),
            delayed: BTreeSet::new(),
            delayed_targets: HashSet::new(),
            attempts: HashMap::new(),
            events: VecDeque::new(),
            written: HashMap::new(),
            backlog: None,
            dropped_events: 0,
            in_flight: HashSet::new(),
            flushed: None,
            seen_meanwhile: HashMap::new(),
            seen_unwritten: HashSet::new(),
            relisted: None,
            told: 0,
        }
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Message>) {
        let mut writing: FuturesUnordered<Writing> = FuturesUnordered::new();
        let mut telling: FuturesUnordered<futures::future::BoxFuture<'static, ()>> =
            FuturesUnordered::new();
        loop {
            self.promote_due();
            self.start(&mut writing, &mut telling);
            if let Some(gauge) = &self.backlog {
                gauge.set((self.wishes.len() + self.events.len()) as i64);
            }
            let owed = self.wishes.len() + self.events.len() + writing.len() + telling.len();
            if owed == 0 {
                if let Some(done) = self.flushed.take() {
                    let _ = done.send(());
                }
            }
            // A settled wish waits for a write to end, not for time.
            let settling = (writing.len() < CONCURRENCY)
                .then(|| self.order.first_settling())
                .flatten();
            let retry = self.delayed.first().map(|(at, _)| *at);
            let due = match (settling, retry) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                message = rx.recv() => match message {
                    Some(m) => self.absorb(m),
                    // The handle is gone: so is the lease, or the process.
                    None => return,
                },
                Some(done) = writing.next(), if !writing.is_empty() => self.written_one(done),
                Some(()) = telling.next(), if !telling.is_empty() => {}
                _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {}
            }
            while let Ok(m) = rx.try_recv() {
                self.absorb(m);
            }
        }
    }

    /// Starts the settled wishes' writes and the waiting Events, up to
    /// [`CONCURRENCY`] of each under way; an object's next write waits
    /// for the one under way.
    fn start(
        &mut self,
        writing: &mut FuturesUnordered<Writing>,
        telling: &mut FuturesUnordered<futures::future::BoxFuture<'static, ()>>,
    ) {
        while writing.len() < CONCURRENCY {
            let Some(target) = self.order.next_settled() else {
                break;
            };
            let Some(wish) = self.wishes.remove(&target) else {
                continue;
            };
            let written = match &target {
                Target::Workload { namespace, name } => self
                    .written
                    .remove(&(namespace.clone(), name.clone()))
                    .unwrap_or_default(),
                _ => Written::default(),
            };
            self.in_flight.insert(target.clone());
            let client = self.client.clone();
            writing.push(Box::pin(async move {
                write(&client, target, wish, written).await
            }));
        }
        while telling.len() < CONCURRENCY {
            let Some(Message::Event {
                regarding,
                warning,
                reason,
                note,
            }) = self.events.pop_front()
            else {
                break;
            };
            self.told += 1;
            if self.told.is_multiple_of(RECORDER_SPAN) {
                self.recorder = workloads::recorder(self.client.clone());
            }
            let recorder = self.recorder.clone();
            telling.push(Box::pin(async move {
                record_event(&recorder, &regarding, warning, &reason, "Schedule", &note).await;
            }));
        }
    }

    fn absorb(&mut self, message: Message) {
        match message {
            Message::Wish(target, wish) => {
                if matches!(wish, Wish::Delete) && self.never_written(&target) {
                    // Nothing to create, nothing to delete.
                    self.wishes.remove(&target);
                    return;
                }
                // One waiting out a failure, or being written, is queued
                // again once that is over.
                let later =
                    self.delayed_targets.contains(&target) || self.in_flight.contains(&target);
                match self.wishes.remove(&target) {
                    Some(before) => {
                        self.wishes.insert(target, before.then(wish));
                    }
                    None => {
                        if !later {
                            self.order.push(Instant::now(), target.clone());
                        }
                        self.wishes.insert(target, wish);
                    }
                }
            }
            event @ Message::Event { .. } => self.queue_event(event),
            Message::Observed(seen) => self.observed(*seen),
            Message::Backlog(gauge) => self.backlog = Some(gauge),
            Message::Flush(done) => {
                self.order.flushing = true;
                self.flushed = Some(done);
            }
            Message::Seed {
                namespace,
                name,
                conditions,
            } => {
                let written = self.written.entry((namespace, name)).or_default();
                if written.conditions.is_empty() {
                    written.conditions = conditions
                        .into_iter()
                        .map(|c| (c.type_.clone(), c))
                        .collect();
                }
            }
        }
    }

    fn queue_event(&mut self, event: Message) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
            self.dropped_events += 1;
            if self.dropped_events.is_power_of_two() {
                tracing::warn!(dropped = self.dropped_events, "the API is not taking Events as fast as they come; the oldest waiting are dropped");
            }
        }
        self.events.push_back(event)
    }

    fn promote_due(&mut self) {
        let now = Instant::now();
        while let Some((at, _)) = self.delayed.first() {
            if *at > now {
                break;
            }
            let (_, target) = self.delayed.pop_first().expect("looked at");
            self.delayed_targets.remove(&target);
            if self.wishes.contains_key(&target) {
                // Tried again at once: it settled before it failed.
                self.order
                    .push(now.checked_sub(SETTLE).unwrap_or(now), target);
            }
        }
    }

    /// One write ended.
    fn written_one(
        &mut self,
        (target, wish, written, outcome): (Target, Wish, Written, WriteOutcome),
    ) {
        self.in_flight.remove(&target);
        if matches!(outcome, WriteOutcome::Done | WriteOutcome::Edited(..)) {
            self.seen_unwritten.remove(&target);
        }
        if let Target::Workload { namespace, name } = &target {
            if !matches!(wish, Wish::Delete) || !matches!(outcome, WriteOutcome::Done) {
                self.written
                    .insert((namespace.clone(), name.clone()), written);
            }
        }
        // Written, but the API's answer showed someone else's changes:
        // written back (unless this was that, which is then a bug).
        if let WriteOutcome::Edited(now, fields) = &outcome {
            if matches!(
                wish,
                Wish::Workload {
                    restore: Some(_),
                    ..
                }
            ) {
                tracing::error!(object = %target, fields = %fields.join(", "), "written back, the Workload still differs from what was decided (a bug); left as it is until it changes again");
            } else {
                self.write_back(target.clone(), now.clone(), fields.clone());
            }
        }
        match outcome {
            WriteOutcome::Done | WriteOutcome::Refused(_) | WriteOutcome::Edited(..) => {
                self.attempts.remove(&target);
                if let WriteOutcome::Refused(error) = &outcome {
                    tracing::error!(object = %target, %error, "the API refused the write; not tried again until it changes");
                }
                if self.wishes.contains_key(&target) {
                    // Wished again while it was written: settles anew.
                    self.order.push(Instant::now(), target);
                } else if let Some(seen) = self.seen_meanwhile.remove(&target) {
                    // A version from before a delete is nothing to compare.
                    if !matches!(wish, Wish::Delete) {
                        self.compare(target, seen);
                    }
                }
            }
            WriteOutcome::Failed(error) => {
                let attempts = self.attempts.entry(target.clone()).or_insert(0);
                *attempts += 1;
                let wait = crate::retry::WRITES.delay(*attempts);
                tracing::warn!(object = %target, %error, retry_in = ?wait, "could not write; trying again");
                // Tried again as it is, with what was wished since on top.
                let wish = match self.wishes.remove(&target) {
                    Some(newer) => wish.then(newer),
                    None => wish,
                };
                let at = Instant::now() + wait;
                self.wishes.insert(target.clone(), wish);
                self.delayed_targets.insert(target.clone());
                self.delayed.insert((at, target));
            }
        }
    }
}

/// One object's write. Returns what is needed to go on: the wish left to
/// do on failure (the whole wish) and the Workload's written record.
async fn write(
    client: &Client,
    target: Target,
    wish: Wish,
    mut written: Written,
) -> (Target, Wish, Written, WriteOutcome) {
    let result = match (&target, &wish) {
        (Target::ClusterQueue(name), Wish::ClusterQueue(status)) => {
            let api: Api<api::ClusterQueue> = Api::all(client.clone());
            match apply_status(&api, name, status.as_ref()).await.map(|_| ()) {
                // A Kueue ClusterQueue has no arbiter.dev object to write to.
                Err(kube::Error::Api(s)) if s.is_not_found() => WriteOutcome::Done,
                other => outcome(other),
            }
        }
        (Target::LocalQueue { namespace, name }, Wish::LocalQueue(status)) => {
            let api: Api<api::LocalQueue> = Api::namespaced(client.clone(), namespace);
            match apply_status(&api, name, status.as_ref()).await.map(|_| ()) {
                Err(kube::Error::Api(s)) if s.is_not_found() => WriteOutcome::Done,
                other => outcome(other),
            }
        }
        (Target::Cohort(name), Wish::Active(status)) => {
            let api: Api<api::Cohort> = Api::all(client.clone());
            match apply_status(&api, name, status.as_ref()).await.map(|_| ()) {
                // A Kueue Cohort has no arbiter.dev object to write to.
                Err(kube::Error::Api(s)) if s.is_not_found() => WriteOutcome::Done,
                other => outcome(other),
            }
        }
        (Target::ResourceFlavor(name), Wish::Active(status)) => {
            let api: Api<api::ResourceFlavor> = Api::all(client.clone());
            match apply_status(&api, name, status.as_ref()).await.map(|_| ()) {
                Err(kube::Error::Api(s)) if s.is_not_found() => WriteOutcome::Done,
                other => outcome(other),
            }
        }
        (Target::Workload { namespace, name }, Wish::Delete) => {
            outcome(workloads::delete(client, namespace, name).await)
        }
        (
            Target::Workload { namespace, name },
            Wish::Workload {
                spec,
                status,
                replace,
                restore,
            },
        ) => {
            let wish = WorkloadWish {
                spec: spec.as_deref(),
                status: status.as_ref(),
                replace: *replace,
                restore: restore.as_deref(),
            };
            write_workload(client, namespace, name, wish, &mut written).await
        }
        (target, _) => WriteOutcome::Refused(format!("{target}: a wish of another kind (a bug)")),
    };
    (target, wish, written, result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settled_workloads_and_queue_statuses_are_taken_in_turn() {
        let settled = Instant::now() - SETTLE - Duration::from_millis(1);
        let workload = |n: u32| Target::Workload {
            namespace: "ns".into(),
            name: format!("w{n}"),
        };
        let mut order = Order::default();
        for n in 0..3 {
            order.push(settled, Target::ClusterQueue(format!("cq{n}")));
        }
        for n in 0..2 {
            order.push(settled, workload(n));
        }
        // Not settled yet: never taken, whatever its line.
        order.push(Instant::now(), workload(9));
        let taken: Vec<Target> = std::iter::from_fn(|| order.next_settled()).collect();
        assert_eq!(
            taken,
            vec![
                Target::ClusterQueue("cq0".into()),
                workload(0),
                Target::ClusterQueue("cq1".into()),
                workload(1),
                Target::ClusterQueue("cq2".into()),
            ]
        );
        assert!(order.first_settling().is_some_and(|at| at > Instant::now()));
    }

    fn status(n: u32) -> Option<Desired> {
        Some(Desired {
            evictions: n,
            ..Desired::default()
        })
    }

    #[test]
    fn later_wishes_replace_earlier_ones_and_keep_what_they_do_not_say() {
        let spec = Box::new(api::Workload {
            metadata: Default::default(),
            spec: Default::default(),
            status: None,
        });
        let first = Wish::Workload {
            spec: Some(spec.clone()),
            status: status(1),
            replace: false,
            restore: None,
        };
        let second = Wish::Workload {
            spec: None,
            status: status(2),
            replace: false,
            restore: Some(spec.clone()),
        };
        let Wish::Workload {
            spec: s,
            status: st,
            replace,
            restore,
        } = first.then(second)
        else {
            panic!("a workload wish");
        };
        assert!(s.is_some() && st == status(2) && !replace && restore.is_some());
        let again = Wish::Delete.then(Wish::Workload {
            spec: Some(spec),
            status: None,
            replace: false,
            restore: None,
        });
        assert!(matches!(again, Wish::Workload { replace: true, .. }));
        let gone = Wish::Workload {
            spec: None,
            status: status(3),
            replace: false,
            restore: None,
        }
        .then(Wish::Delete);
        assert!(matches!(gone, Wish::Delete));
    }

    fn a_workload(n: u32) -> (Target, Box<api::Workload>) {
        let target = Target::Workload {
            namespace: "ns".into(),
            name: format!("job-j{n}"),
        };
        let mut workload = api::Workload {
            metadata: Default::default(),
            spec: Default::default(),
            status: None,
        };
        workload.metadata.namespace = Some("ns".into());
        workload.metadata.name = Some(format!("job-j{n}"));
        workload.metadata.resource_version = Some("7".into());
        (target, Box::new(workload))
    }

    #[tokio::test]
    async fn a_job_gone_before_its_workload_was_written_leaves_nothing_to_write() {
        // Never asked: every case below is decided before a write starts.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let mut worker = Worker::new(Client::try_from(config).unwrap());
        let first = |workload: &api::Workload| Wish::Workload {
            spec: Some(Box::new(workload.clone())),
            status: status(1),
            replace: false,
            restore: None,
        };

        // Created and gone before its first write: nothing left.
        let (gone, workload) = a_workload(1);
        worker.absorb(Message::Wish(gone.clone(), first(&workload)));
        worker.absorb(Message::Wish(gone.clone(), Wish::Delete));
        assert!(worker.wishes.is_empty());

        // Written once: its deletion is owed.
        let (written, workload) = a_workload(2);
        worker
            .written
            .insert(("ns".into(), "job-j2".into()), Written::default());
        worker.absorb(Message::Wish(written.clone(), first(&workload)));
        worker.absorb(Message::Wish(written.clone(), Wish::Delete));
        assert!(matches!(worker.wishes.get(&written), Some(Wish::Delete)));

        // In the API but not written by this process (the watch showed
        // it, before or after the wish): deleted too.
        let (before, workload) = a_workload(3);
        let observed = |workload: &api::Workload, gone| {
            let workload = workload.clone();
            Message::Observed(Box::new(if gone {
                WorkloadWatchEvent::Deleted(workload)
            } else {
                WorkloadWatchEvent::Applied(workload)
            }))
        };
        worker.absorb(observed(&workload, false));
        worker.absorb(Message::Wish(before.clone(), first(&workload)));
        worker.absorb(Message::Wish(before.clone(), Wish::Delete));
        assert!(matches!(worker.wishes.get(&before), Some(Wish::Delete)));
        let (after, workload) = a_workload(4);
        worker.absorb(Message::Wish(after.clone(), first(&workload)));
        worker.absorb(observed(&workload, false));
        worker.absorb(Message::Wish(after.clone(), Wish::Delete));
        assert!(matches!(worker.wishes.get(&after), Some(Wish::Delete)));

        // Seen, then deleted by someone else before its job went: nothing
        // in the API to delete any more.
        let (deleted, workload) = a_workload(6);
        worker.absorb(observed(&workload, false));
        worker.absorb(observed(&workload, true));
        worker.absorb(Message::Wish(deleted.clone(), first(&workload)));
        worker.absorb(Message::Wish(deleted.clone(), Wish::Delete));
        assert!(!worker.wishes.contains_key(&deleted));
        assert_eq!(worker.seen_unwritten.iter().collect::<Vec<_>>(), [&before]);

        // Being written when the job went: its deletion follows the write.
        let (writing, workload) = a_workload(5);
        worker.in_flight.insert(writing.clone());
        worker.absorb(Message::Wish(writing.clone(), first(&workload)));
        worker.absorb(Message::Wish(writing.clone(), Wish::Delete));
        assert!(matches!(worker.wishes.get(&writing), Some(Wish::Delete)));
        assert_eq!(worker.wishes.len(), 4);
    }

    #[tokio::test]
    async fn a_workload_a_relist_does_not_show_is_no_longer_counted_as_in_the_api() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let mut worker = Worker::new(Client::try_from(config).unwrap());
        let seen = |seen| Message::Observed(Box::new(seen));
        let (kept, kept_workload) = a_workload(1);
        let (_, deleted_workload) = a_workload(2);
        worker.absorb(seen(WorkloadWatchEvent::Applied(*kept_workload.clone())));
        worker.absorb(seen(WorkloadWatchEvent::Applied(*deleted_workload)));
        assert_eq!(worker.seen_unwritten.len(), 2);

        // The watch broke; the second was deleted meanwhile.
        worker.absorb(seen(WorkloadWatchEvent::Relisting));
        worker.absorb(seen(WorkloadWatchEvent::Applied(*kept_workload)));
        assert_eq!(worker.seen_unwritten.len(), 2, "pruned only at the end");
        worker.absorb(seen(WorkloadWatchEvent::Relisted));
        assert_eq!(worker.seen_unwritten.iter().collect::<Vec<_>>(), [&kept]);
        assert!(worker.relisted.is_none());

        // Shown after the relist: counted again.
        let (later, later_workload) = a_workload(3);
        worker.absorb(seen(WorkloadWatchEvent::Applied(*later_workload)));
        assert!(worker.seen_unwritten.contains(&later));
    }
}
