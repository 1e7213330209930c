//! What a reload reports, as plain data: the [`Identity`] of the bundle in
//! force, the [`ReloadOutcome`] of one attempt, the [`BundleStatus`] history
//! a status page shows, and the [`Loaded`] trait a reloadable value
//! implements to say who it is. It sits below both `reload`, which produces
//! these, and `metrics`, which records them, so neither depends on the
//! other's insides. It never does anything: no clock, no I/O, no locking.

use std::fmt;
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;

/// What a reload produced, for status and metrics: the identity of the thing
/// in force.
pub trait Loaded: Send + Sync + 'static {
    fn identity(&self) -> Identity;
}

/// Which bundle is in force: `metadata.name`, `metadata.version` and a digest
/// of its whole content. Two builds with the same digest are the same bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Identity {
    pub name: String,
    pub version: String,
    pub digest: String,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ({})", self.name, self.version, self.digest)
    }
}

/// The reload history a status page or metrics endpoint shows.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleStatus {
    /// The bundle in force.
    pub identity: Identity,
    /// When the bundle in force was swapped in (or created, before any swap).
    pub loaded_at: Timestamp,
    /// Successful swaps since start.
    pub generation: u64,
    /// Reloads attempted since start, whatever their outcome.
    pub attempts: u64,
    /// Why the latest attempt was rejected; `None` once an attempt succeeds
    /// or finds the bundle in force unchanged.
    pub last_error: Option<String>,
    pub last_attempt_at: Option<Timestamp>,
}

/// What one `Reloadable::reload_with` (`reload`) did.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The new value is in force.
    Swapped { identity: Identity, took: Duration },
    /// The build has the digest of the value in force: nothing was swapped.
    Unchanged { identity: Identity },
    /// The build failed; `kept` stays in force.
    Rejected {
        error: String,
        kept: Identity,
        took: Duration,
    },
}
