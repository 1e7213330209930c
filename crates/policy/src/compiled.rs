//! A bundle once checked and compiled: [`Bundle`], its [`Policy`]s and
//! each one's [`Program`] (a compiled CEL expression, or a loaded plugin and
//! the weight fields it declared). The loader (`bundle`) builds these;
//! `eval`, `test`, the engine and `reload` read them. Nothing here reads a
//! file, parses YAML or evaluates a policy: it only says what a policy is —
//! its language, the context views it reads, whether its answers may be
//! reused, which workloads it matches.

use std::sync::Arc;

use super::cel::{CelProgram, Params};
use super::spec::{FailurePolicy, Match, Mode, TestSpec};
use super::status::{Identity, Loaded};
use super::view::{Reads, WeightFields};
use super::wasm::{Hook, Limits, Plugin};

/// How a policy decides.
pub enum Program {
    Cel {
        expression: CelProgram,
        message: Option<Box<CelProgram>>,
        retryable: bool,
    },
    Wasm {
        plugin: Arc<Plugin>,
        module: String,
        /// What a `weight` request sends it (all unless the module declares less).
        weight_fields: WeightFields,
    },
}

/// One checked, compiled policy.
pub struct Policy {
    pub name: String,
    pub hook: Hook,
    pub matches: Match,
    pub program: Program,
    pub params: serde_json::Value,
    pub cel_params: Params,
    pub failure_policy: FailurePolicy,
    pub mode: Mode,
    pub limits: Limits,
    /// A flavor policy whose answer placement orders (`orderByPlacement`).
    pub order_by_placement: bool,
}

impl Policy {
    pub fn language(&self) -> &'static str {
        match self.program {
            Program::Cel { .. } => "cel",
            Program::Wasm { .. } => "wasm",
        }
    }
    /// Can an answer be reused for an identical input later? True for a CEL
    /// policy that does not name `now`: CEL is a pure function of its
    /// variables, and `params` are fixed for the bundle's life. A WASM
    /// plugin's request always carries `now`, so its answers are never reused.
    pub fn reusable(&self) -> bool {
        match &self.program {
            Program::Cel {
                expression,
                message,
                ..
            } => !expression.names("now") && !message.as_ref().is_some_and(|m| m.names("now")),
            Program::Wasm { .. } => false,
        }
    }
    /// The context views an evaluation reads: for CEL, those its
    /// expressions name; for WASM, every one, but for a `weight` plugin
    /// only the maps it declares (`arbiter_weight_fields`).
    pub fn reads(&self) -> Reads {
        match &self.program {
            Program::Cel {
                expression,
                message,
                ..
            } => {
                let names =
                    |v: &str| expression.names(v) || message.as_ref().is_some_and(|m| m.names(v));
                let reads_field = |v: &str, f: &str| {
                    expression.reads_field(v, f)
                        || message.as_ref().is_some_and(|m| m.reads_field(v, f))
                };
                Reads {
                    queue: names("queue"),
                    cluster_queue: names("clusterQueue"),
                    tenant: names("tenant"),
                    cohort: names("cohort"),
                    quotas: reads_field("clusterQueue", "nominal")
                        || reads_field("clusterQueue", "usage"),
                }
            }
            Program::Wasm { weight_fields, .. } if self.hook == Hook::Weight => {
                weight_fields.reads()
            }
            Program::Wasm { .. } => Reads::ALL,
        }
    }

    /// Does it apply to a workload of `namespace`/`kind` in `cluster_queue`?
    pub fn applies_to(&self, namespace: &str, kind: &str, cluster_queue: &str) -> bool {
        let m = &self.matches;
        (m.namespaces.is_empty() || m.namespaces.iter().any(|n| n == namespace))
            && (m.kinds.is_empty() || m.kinds.iter().any(|k| k == kind))
            && (m.cluster_queues.is_empty() || m.cluster_queues.iter().any(|c| c == cluster_queue))
    }
}

/// A loaded bundle: checked, compiled and tested.
pub struct Bundle {
    pub name: String,
    pub version: String,
    /// sha256 over `bundle.yaml` and every module, in name order.
    pub digest: String,
    pub tenant: Option<String>,
    pub policies: Vec<Policy>,
    pub tests: Vec<TestSpec>,
    /// Where it came from (a directory, a ConfigMap).
    pub source: String,
}

impl Bundle {
    pub fn policy(&self, name: &str) -> Option<&Policy> {
        self.policies.iter().find(|p| p.name == name)
    }
    /// An empty bundle: Kueue's behaviour.
    pub fn empty(name: &str) -> Bundle {
        Bundle {
            name: name.into(),
            version: String::new(),
            digest: String::new(),
            tenant: None,
            policies: Vec::new(),
            tests: Vec::new(),
            source: String::new(),
        }
    }
}

impl Loaded for Bundle {
    fn identity(&self) -> Identity {
        Identity {
            name: self.name.clone(),
            version: self.version.clone(),
            digest: self.digest.clone(),
        }
    }
}
