//! The scheduler's record of one workload: the workload, where it is in
//! its life, its queue slot and scores, why it waits, its admission and
//! counters. Only the scheduler changes it; drivers and policies read it.

use crate::model::Millis;

use super::reason::Reason;
use super::workload::{Admission, Seq, Slot, Status, Workload};

/// What a workload brings from before a driver restarted, read back from
/// the API: its counters and, if it was backing off, until when and why.
/// A new workload carries nothing (`Carried::default()`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    /// Retries after failed runs so far (`retryPolicy`).
    pub retries: u32,
    /// Requeues after its pods were not all ready in time (`waitForPodsReady`).
    pub pods_ready_requeues: u32,
    /// Evictions so far.
    pub evictions: u32,
    /// The backoff it was waiting out: when it ends, and why.
    pub backoff: Option<(Millis, Backoff)>,
}

/// Why a workload backs off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    /// Before running again after a failed run (`retryPolicy`).
    Retry,
    /// Before being queued again after its pods' timeout (`waitForPodsReady`).
    PodsReady,
}

/// The scheduler's record of one workload.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The workload as submitted.
    pub workload: Workload,
    /// Where it is in its life.
    pub status: Status,
    /// When it was queued; orders it in its queue.
    pub queue_time: Millis,
    /// Its own place in input order (its slot's `seq` unless a tenant permuted it).
    pub seq: Seq,
    /// The platform's policy score.
    pub score: f64,
    /// The tenant's own score, if a tenant bundle scored it.
    pub(crate) tenant_score: Option<f64>,
    /// Where it sits in its queue (see [`Slot`]).
    pub slot: Slot,
    /// Why it is not admitted (`Reason::None` when admitted or never examined).
    pub reason: Reason,
    /// Retries after failed runs so far (`retryPolicy`).
    pub retries: u32,
    /// Requeues after its pods were not all ready in time (`waitForPodsReady`).
    pub pods_ready_requeues: u32,
    /// Evictions so far.
    pub evictions: u32,
    /// Its admission while admitted.
    pub admission: Option<Admission>,
    /// Bumped on each admission so stale timers and finish events are ignored.
    pub epoch: u32,
    /// Its own tenant's admission policy denied (or failed on) it at its
    /// last try: until it is admitted it is set aside whatever the queueing
    /// strategy, also when it does not fit, so it never holds a queue.
    pub(crate) held_by_tenant: bool,
    /// When it was last preempted: a victim does not preempt in turn at the same
    /// instant, so chains of preemptions cannot cycle without time passing.
    pub(crate) preempted_at: Option<Millis>,
}
