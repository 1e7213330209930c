//! The builder's errors: one [`ConfigError`] per problem, naming the source
//! (file and document), the object, the field and the fix, and
//! [`ConfigErrors`], all of them in input order. Only formatting lives
//! here; it never decides what is wrong. Made by `builder` and
//! `resource_groups`; printed by the simulator and the CLI.

use std::fmt;

/// One problem in the configuration, for a person to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Where the object came from (`cluster.yaml (document 3)`).
    pub source: String,
    /// `ClusterQueue ml`.
    pub object: String,
    /// `spec.resourceGroups[0].flavors[1].name`, or empty.
    pub field: String,
    /// What is wrong, and how to fix it.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.source.is_empty() {
            write!(f, "{}: ", self.source)?;
        }
        write!(f, "{}", self.object)?;
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// All problems found, in input order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, err) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{err}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
