//! What one workload's two stories say side by side: Kueue's (read from
//! its `Workload`) and Arbiter's (its shadow scheduler's decisions), each a
//! [`Side`], compared into an [`Outcome`]. Pure: the shadow loop hands it
//! the sides, the time and the tolerance; it reads no clock and keeps
//! nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

/// One system's story of one workload (times in milliseconds since the
/// Unix epoch, the wall clock both systems ran on).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// When it first got its quota (Kueue: `QuotaReserved`; Arbiter: admitted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admitted_at: Option<i64>,
    /// The flavors of that first admission: per pod set, resource → flavor.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flavors: Vec<BTreeMap<String, String>>,
    /// The jobs (`namespace/name`) it preempted, over all its admissions.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub victims: BTreeSet<String>,
    /// Why it will not be admitted at all (Arbiter: rejected by a policy,
    /// deactivated, or a job it cannot queue; Kueue: deactivated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Why it waits, while it does (Arbiter's reason).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
}

/// How Arbiter's decision about one workload differs from Kueue's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Difference {
    /// Arbiter admits it earlier than Kueue did (or Kueue has not yet).
    Sooner,
    /// Arbiter admits it later than Kueue did (or has not yet).
    Later,
    /// Kueue admitted it and Arbiter never did: it refused it, or the job
    /// ran to its end (under Kueue) before Arbiter would have admitted it.
    Never,
    /// Both admitted it, on other flavors.
    Flavor,
    /// Its admissions preempted other jobs in one system than in the other.
    Victims,
}

impl Difference {
    /// Every kind, in order.
    pub const ALL: [Difference; 5] = [
        Difference::Sooner,
        Difference::Later,
        Difference::Never,
        Difference::Flavor,
        Difference::Victims,
    ];

    /// Its name in metrics, logs and the report.
    pub fn name(self) -> &'static str {
        match self {
            Difference::Sooner => "sooner",
            Difference::Later => "later",
            Difference::Never => "never",
            Difference::Flavor => "flavor",
            Difference::Victims => "victims",
        }
    }
}

/// What the comparison of one workload comes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Both admitted it, within the tolerance, on the same flavors, with the
    /// same victims.
    Agree,
    /// Neither has admitted it, or one did less than the tolerance ago.
    Waiting,
    /// Arbiter would decide otherwise.
    Differs(BTreeSet<Difference>),
}

impl Outcome {
    /// Its name in metrics and the report.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Agree => "agree",
            Outcome::Waiting => "waiting",
            Outcome::Differs(_) => "differs",
        }
    }

    /// The differences (none unless it differs).
    pub fn differences(&self) -> BTreeSet<Difference> {
        match self {
            Outcome::Differs(kinds) => kinds.clone(),
            _ => BTreeSet::new(),
        }
    }
}

/// What the comparison is given besides the two sides.
#[derive(Clone, Copy, Debug)]
pub struct Moment {
    /// Now.
    pub now: i64,
    /// Admissions this close are the same time (both systems react to the
    /// same arrival a little apart; Kueue's times have whole seconds).
    pub tolerance_ms: i64,
    /// When the job ended (it ran under Kueue), if it did.
    pub ended_at: Option<i64>,
    /// Whether Arbiter saw the workload arrive: one queued before the
    /// shadow started is compared on flavors and victims only, since
    /// Arbiter could not have admitted it before it was watching.
    pub timed: bool,
}

/// Compares the two sides of one workload.
pub fn compare(arbiter: &Side, kueue: &Side, at: Moment) -> Outcome {
    let mut kinds = BTreeSet::new();
    let mut undecided = false;
    match (arbiter.admitted_at, kueue.admitted_at) {
        (Some(a), Some(k)) => {
            if at.timed && a + at.tolerance_ms < k {
                kinds.insert(Difference::Sooner);
            } else if at.timed && a > k + at.tolerance_ms {
                kinds.insert(Difference::Later);
            }
            if arbiter.flavors != kueue.flavors {
                kinds.insert(Difference::Flavor);
            }
        }
        (None, Some(k)) => {
            if arbiter.refused.is_some() || at.ended_at.is_some() {
                kinds.insert(Difference::Never);
            } else if at.timed && at.now > k + at.tolerance_ms {
                kinds.insert(Difference::Later);
            } else {
                undecided = true;
            }
        }
        (Some(a), None) => {
            if kueue.refused.is_some() || (at.timed && at.now > a + at.tolerance_ms) {
                kinds.insert(Difference::Sooner);
            } else {
                undecided = true;
            }
        }
        (None, None) => undecided = true,
    }
    if arbiter.victims != kueue.victims {
        kinds.insert(Difference::Victims);
    }
    if !kinds.is_empty() {
        Outcome::Differs(kinds)
    } else if undecided {
        Outcome::Waiting
    } else {
        Outcome::Agree
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_000_000;

    fn at(now: i64) -> Moment {
        Moment {
            now,
            tolerance_ms: 5_000,
            ended_at: None,
            timed: true,
        }
    }

    fn admitted(at: i64, flavor: &str) -> Side {
        Side {
            admitted_at: Some(at),
            flavors: vec![BTreeMap::from([("cpu".to_string(), flavor.to_string())])],
            ..Side::default()
        }
    }

    fn kinds(outcome: Outcome) -> Vec<&'static str> {
        outcome.differences().iter().map(|d| d.name()).collect()
    }

    #[test]
    fn the_same_admission_within_the_tolerance_agrees() {
        let outcome = compare(
            &admitted(T + 900, "on-demand"),
            &admitted(T, "on-demand"),
            at(T + 60_000),
        );
        assert_eq!(outcome, Outcome::Agree);
        assert!(outcome.differences().is_empty());
    }

    #[test]
    fn admission_times_apart_by_more_than_the_tolerance_are_sooner_or_later() {
        let now = at(T + 600_000);
        let early = admitted(T, "a");
        let late = admitted(T + 60_000, "a");
        assert_eq!(kinds(compare(&early, &late, now)), ["sooner"]);
        assert_eq!(kinds(compare(&late, &early, now)), ["later"]);
        // A workload Arbiter saw queued before it watched: time not judged.
        let untimed = Moment {
            timed: false,
            ..now
        };
        assert_eq!(compare(&late, &early, untimed), Outcome::Agree);
    }

    #[test]
    fn one_side_admitting_is_undecided_until_the_tolerance_has_passed() {
        let kueue = admitted(T, "a");
        let waiting = Side::default();
        assert_eq!(compare(&waiting, &kueue, at(T + 1_000)), Outcome::Waiting);
        assert_eq!(kinds(compare(&waiting, &kueue, at(T + 6_000))), ["later"]);
        assert_eq!(compare(&kueue, &waiting, at(T + 1_000)), Outcome::Waiting);
        assert_eq!(kinds(compare(&kueue, &waiting, at(T + 6_000))), ["sooner"]);
        assert_eq!(compare(&waiting, &waiting, at(T + 6_000)), Outcome::Waiting);
    }

    #[test]
    fn refused_or_ended_before_arbiter_admitted_is_never() {
        let kueue = admitted(T, "a");
        let refused = Side {
            refused: Some("rejected by policy deny: no".into()),
            ..Side::default()
        };
        assert_eq!(kinds(compare(&refused, &kueue, at(T + 1_000))), ["never"]);
        let ended = Moment {
            ended_at: Some(T + 2_000),
            ..at(T + 2_000)
        };
        assert_eq!(kinds(compare(&Side::default(), &kueue, ended)), ["never"]);
        // Refused by both, neither admitted: they agree it waits.
        assert_eq!(
            compare(&refused, &Side::default(), at(T + 60_000)),
            Outcome::Waiting
        );
    }

    #[test]
    fn other_flavors_and_other_victims_are_differences_of_their_own() {
        let now = at(T + 60_000);
        assert_eq!(
            kinds(compare(
                &admitted(T, "spot"),
                &admitted(T, "on-demand"),
                now
            )),
            ["flavor"]
        );
        let mut arbiter = admitted(T, "a");
        arbiter.victims.insert("team-a/low-1".into());
        let mut kueue = admitted(T + 30_000, "b");
        kueue.victims.insert("team-a/low-2".into());
        let outcome = compare(&arbiter, &kueue, now);
        assert_eq!(outcome.name(), "differs");
        assert_eq!(kinds(outcome), ["sooner", "flavor", "victims"]);
        kueue.victims = arbiter.victims.clone();
        kueue.admitted_at = Some(T);
        kueue.flavors = arbiter.flavors.clone();
        assert_eq!(compare(&arbiter, &kueue, now), Outcome::Agree);
    }
}
