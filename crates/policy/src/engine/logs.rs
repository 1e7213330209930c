//! The `arbiter.log` lines plugins wrote, kept per policy until a driver
//! takes them ([`Engine::take_plugin_logs`]). Each line is already cleaned
//! and capped per call (`policy::text`, the `arbiter.log` import); here a
//! line identical to one its policy already holds is counted on it
//! (`repeats`) instead of stored again, and a policy holds at most
//! [`MAX_LOG_LINES_PER_POLICY`] lines ([`MAX_TENANT_LOG_LINES_PER_POLICY`]
//! for a tenant bundle's); later new lines are dropped and counted in its
//! statistics (`logLinesDropped`). Called by `hooks` after every
//! evaluation ([`Engine::settle`], which also cleans an error's message);
//! it never judges or changes what a line says.

use std::collections::HashMap;

use super::Engine;
use crate::compiled::{Bundle, Policy};
use crate::eval::{Logs, PolicyError};
use crate::text;
use crate::wasm::LogLevel;

/// Most distinct `arbiter.log` lines a platform bundle's policy keeps.
pub const MAX_LOG_LINES_PER_POLICY: usize = 1_000;
/// Most distinct `arbiter.log` lines a tenant bundle's policy keeps.
pub const MAX_TENANT_LOG_LINES_PER_POLICY: usize = 100;

/// One line a plugin wrote, with the policy that wrote it.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginLine {
    /// The bundle's source (directory or `ConfigMap ns/name`).
    pub source: String,
    /// The namespace of a tenant bundle.
    pub tenant: Option<String>,
    pub policy: String,
    pub level: LogLevel,
    /// Cleaned of control characters, at most 1 KiB.
    pub line: String,
    /// Identical lines the policy wrote after this one, not stored again.
    pub repeats: u64,
}

/// The lines, and per policy (by its statistics slot) which it holds.
#[derive(Default)]
pub(super) struct PluginLines {
    lines: Vec<PluginLine>,
    policies: Vec<HashMap<(u8, String), usize>>,
}

fn level_key(level: LogLevel) -> u8 {
    match level {
        LogLevel::Error => 0,
        LogLevel::Warn => 1,
        LogLevel::Info => 2,
        LogLevel::Debug => 3,
    }
}

impl PluginLines {
    /// Keeps `written` for the policy in `slot`; returns how many were dropped.
    fn keep(
        &mut self,
        slot: usize,
        cap: usize,
        bundle: &Bundle,
        policy: &Policy,
        written: Logs,
    ) -> u64 {
        if self.policies.len() <= slot {
            self.policies.resize_with(slot + 1, HashMap::new);
        }
        let held = &mut self.policies[slot];
        let mut dropped = 0;
        for (level, line) in written {
            let key = (level_key(level), line);
            if let Some(&at) = held.get(&key) {
                self.lines[at].repeats += 1;
            } else if held.len() >= cap {
                dropped += 1;
            } else {
                self.lines.push(PluginLine {
                    source: bundle.source.clone(),
                    tenant: bundle.tenant.clone(),
                    policy: policy.name.clone(),
                    level,
                    line: key.1.clone(),
                    repeats: 0,
                });
                held.insert(key, self.lines.len() - 1);
            }
        }
        dropped
    }

    /// The lines so far, in the order first written; every policy starts again.
    pub(super) fn take(&mut self) -> Vec<PluginLine> {
        self.policies.clear();
        std::mem::take(&mut self.lines)
    }
}

impl Engine {
    /// After an evaluation of `policy`: moves the lines it wrote
    /// (`self.written`) to the policy's kept lines, and makes an error's
    /// message safe to show (`text`), before anything logs or renders it.
    pub(super) fn settle<T>(
        &mut self,
        bundle: &Bundle,
        policy: &Policy,
        result: Result<T, PolicyError>,
    ) -> Result<T, PolicyError> {
        self.keep_logs(bundle, policy);
        result.map_err(|e| PolicyError {
            kind: e.kind,
            message: text::clean(&e.message, text::MAX_ERROR_BYTES),
        })
    }

    fn keep_logs(&mut self, bundle: &Bundle, policy: &Policy) {
        if self.written.is_empty() {
            return;
        }
        let written = std::mem::take(&mut self.written);
        let cap = if bundle.tenant.is_some() {
            MAX_TENANT_LOG_LINES_PER_POLICY
        } else {
            MAX_LOG_LINES_PER_POLICY
        };
        let tally = self.stats.tally(self.metrics.as_ref(), bundle, policy);
        let slot = tally.slot;
        let dropped = self.logs.keep(slot, cap, bundle, policy, written);
        if dropped > 0 {
            self.stats
                .tally(self.metrics.as_ref(), bundle, policy)
                .log_lines_dropped(dropped);
        }
    }
}
