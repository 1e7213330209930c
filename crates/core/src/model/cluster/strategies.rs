//! Kueue's `fairSharing.preemptionStrategies`, checked: which share rules
//! fair-sharing preemption applies, in order. Read from a Kueue
//! `Configuration` (`model::configuration`) or a `Simulation`
//! (`spec.fairSharing.preemptionStrategies`); the scheduler's
//! `fair_preemption` applies them. Kueue accepts exactly three lists, and
//! so does this type: anything else is an error naming the allowed ones.

use std::fmt;

/// One share rule of fair-sharing preemption (Kueue's `PreemptionStrategy`,
/// rules S2-a and S2-b of its KEP 1714).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreemptionStrategy {
    /// A workload of another ClusterQueue may go if the preemptor's share,
    /// with the preemptor admitted, is at most the target's share after
    /// that workload is gone (it may favour small victims).
    LessThanOrEqualToFinalShare,
    /// A workload of another ClusterQueue may go if the preemptor's share,
    /// with the preemptor admitted, is strictly below the target's share
    /// before (victims by priority and age, whatever their size).
    LessThanInitialShare,
}

impl PreemptionStrategy {
    /// Kueue's spelling.
    pub fn name(self) -> &'static str {
        match self {
            PreemptionStrategy::LessThanOrEqualToFinalShare => "LessThanOrEqualToFinalShare",
            PreemptionStrategy::LessThanInitialShare => "LessThanInitialShare",
        }
    }
}

/// The strategies in force: the lists Kueue's configuration validation
/// accepts, and no other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FairPreemptionStrategies {
    /// `[LessThanOrEqualToFinalShare, LessThanInitialShare]`: Kueue's
    /// default, and Arbiter's when nothing is configured.
    #[default]
    FinalThenInitialShare,
    /// `[LessThanOrEqualToFinalShare]`.
    FinalShareOnly,
    /// `[LessThanInitialShare]`.
    InitialShareOnly,
}

/// Every list accepted, in Kueue's order of its documentation.
const ACCEPTED: [FairPreemptionStrategies; 3] = [
    FairPreemptionStrategies::FinalShareOnly,
    FairPreemptionStrategies::InitialShareOnly,
    FairPreemptionStrategies::FinalThenInitialShare,
];

impl FairPreemptionStrategies {
    /// The rules, in the order they are tried.
    pub fn rules(self) -> &'static [PreemptionStrategy] {
        use PreemptionStrategy::*;
        match self {
            FairPreemptionStrategies::FinalThenInitialShare => {
                &[LessThanOrEqualToFinalShare, LessThanInitialShare]
            }
            FairPreemptionStrategies::FinalShareOnly => &[LessThanOrEqualToFinalShare],
            FairPreemptionStrategies::InitialShareOnly => &[LessThanInitialShare],
        }
    }

    /// The rule of the first pass over every candidate.
    pub fn first(self) -> PreemptionStrategy {
        self.rules()[0]
    }

    /// Whether a second pass over what the first passed over applies
    /// `LessThanInitialShare` (Kueue allows no other second rule).
    pub fn then_initial_share(self) -> bool {
        self.rules().len() > 1
    }

    /// The strategies `names` lists, or why not (the message names the
    /// lists allowed; the caller adds file and field).
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<FairPreemptionStrategies, String> {
        let allowed = || {
            ACCEPTED
                .iter()
                .map(|s| format!("[{s}]"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if names.is_empty() {
            return Err(format!(
                "is empty; give one of {} (or leave it out for Kueue's default [{}])",
                allowed(),
                FairPreemptionStrategies::default()
            ));
        }
        if let Some(unknown) = names
            .iter()
            .map(AsRef::as_ref)
            .find(|n| !matches!(*n, "LessThanOrEqualToFinalShare" | "LessThanInitialShare"))
        {
            return Err(format!(
                "`{unknown}` is not a strategy (LessThanOrEqualToFinalShare, LessThanInitialShare); give one of {}",
                allowed()
            ));
        }
        let given: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
        if let Some((_, twice)) = given
            .iter()
            .enumerate()
            .find(|(i, n)| given[..*i].contains(n))
        {
            return Err(format!("names {twice} twice; give one of {}", allowed()));
        }
        ACCEPTED
            .into_iter()
            .find(|s| s.rules().iter().map(|r| r.name()).eq(given.iter().copied()))
            .ok_or_else(|| {
                format!(
                    "[{}] is not a list Kueue accepts; give one of {}",
                    given.join(", "),
                    allowed()
                )
            })
    }
}

impl fmt::Display for FairPreemptionStrategies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.rules().iter().map(|r| r.name()).collect();
        f.write_str(&names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_lists_kueue_accepts() {
        use FairPreemptionStrategies::*;
        assert_eq!(
            FairPreemptionStrategies::parse(&[
                "LessThanOrEqualToFinalShare",
                "LessThanInitialShare"
            ]),
            Ok(FinalThenInitialShare)
        );
        assert_eq!(
            FairPreemptionStrategies::parse(&["LessThanOrEqualToFinalShare"]),
            Ok(FinalShareOnly)
        );
        assert_eq!(
            FairPreemptionStrategies::parse(&["LessThanInitialShare"]),
            Ok(InitialShareOnly)
        );
        assert_eq!(FairPreemptionStrategies::default(), FinalThenInitialShare);
        assert_eq!(
            InitialShareOnly.first(),
            PreemptionStrategy::LessThanInitialShare
        );
        assert!(!InitialShareOnly.then_initial_share());
        assert!(!FinalShareOnly.then_initial_share());
        assert!(FinalThenInitialShare.then_initial_share());
    }

    #[test]
    fn anything_else_is_refused_naming_the_allowed_lists() {
        let allowed = "[LessThanOrEqualToFinalShare], [LessThanInitialShare], [LessThanOrEqualToFinalShare, LessThanInitialShare]";
        let empty = FairPreemptionStrategies::parse::<&str>(&[]).unwrap_err();
        assert!(
            empty.contains("is empty") && empty.contains(allowed),
            "{empty}"
        );
        let unknown = FairPreemptionStrategies::parse(&["LessThanFinalShare"]).unwrap_err();
        assert!(
            unknown.contains("`LessThanFinalShare` is not a strategy") && unknown.contains(allowed),
            "{unknown}"
        );
        let reversed = FairPreemptionStrategies::parse(&[
            "LessThanInitialShare",
            "LessThanOrEqualToFinalShare",
        ])
        .unwrap_err();
        assert!(
            reversed.contains("is not a list Kueue accepts") && reversed.contains(allowed),
            "{reversed}"
        );
        let twice =
            FairPreemptionStrategies::parse(&["LessThanInitialShare", "LessThanInitialShare"])
                .unwrap_err();
        assert!(
            twice.contains("names LessThanInitialShare twice") && twice.contains(allowed),
            "{twice}"
        );
    }
}
