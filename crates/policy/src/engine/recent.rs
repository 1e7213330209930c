//! [`RecentDecisions`]: the latest policy decisions, in a ring of fixed
//! size, for a process that runs for ever (the operator) and shows them
//! (its dashboard) instead of draining a log after a run as the simulator
//! does. An engine given one ([`Engine::keep_recent`]) records there
//! instead of in its decision log, so its memory stays bounded whatever
//! the uptime. As in the log, a decision identical to its policy's latest
//! for the same workload or subject is counted on that entry (`repeats`)
//! while the entry is still in the ring.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use super::Decision;
#[cfg(doc)]
use super::Engine;

/// How many decisions the operator keeps (the newest).
pub const RECENT_DECISIONS: usize = 5_000;

/// A shared handle on the ring: the engine writes, readers copy out.
#[derive(Clone)]
pub struct RecentDecisions {
    ring: Arc<Mutex<Ring>>,
}

struct Ring {
    cap: usize,
    /// The entries, oldest first; `entries[i]` has sequence number `first + i`.
    entries: VecDeque<Decision>,
    first: u64,
    /// The sequence number of each policy's latest entry per workload or
    /// subject, while it is in the ring.
    latest: HashMap<(String, String, String), u64>,
}

/// Which entry a decision may repeat: its policy (by bundle source and
/// name) and its workload or subject.
fn key(d: &Decision) -> (String, String, String) {
    let about = d.workload.as_deref().or(d.subject.as_deref()).unwrap_or("");
    (d.source.clone(), d.policy.clone(), about.to_string())
}

impl Default for RecentDecisions {
    fn default() -> Self {
        RecentDecisions::new(RECENT_DECISIONS)
    }
}

impl RecentDecisions {
    /// A ring keeping the newest `cap` decisions (at least one).
    pub fn new(cap: usize) -> RecentDecisions {
        RecentDecisions {
            ring: Arc::new(Mutex::new(Ring {
                cap: cap.max(1),
                entries: VecDeque::new(),
                first: 0,
                latest: HashMap::new(),
            })),
        }
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `decision`: counted on its policy's latest entry for the same
    /// workload or subject when identical, else added, the oldest going.
    pub fn push(&self, decision: Decision) {
        let mut ring = self.ring();
        let key = key(&decision);
        if let Some(&seq) = ring.latest.get(&key) {
            let at = (seq - ring.first) as usize;
            let latest = &mut ring.entries[at];
            if latest.same_as(&decision) {
                latest.repeats += 1;
                latest.last_at_seconds = Some(decision.at_seconds);
                return;
            }
        }
        if ring.entries.len() == ring.cap {
            if let Some(oldest) = ring.entries.pop_front() {
                let first = ring.first;
                let gone = self::key(&oldest);
                if ring.latest.get(&gone) == Some(&first) {
                    ring.latest.remove(&gone);
                }
                ring.first += 1;
            }
        }
        let seq = ring.first + ring.entries.len() as u64;
        ring.latest.insert(key, seq);
        ring.entries.push_back(decision);
    }

    /// The newest `n` decisions, newest first.
    pub fn latest(&self, n: usize) -> Vec<Decision> {
        self.ring().entries.iter().rev().take(n).cloned().collect()
    }

    /// The decisions about the workload `namespace/name` still kept, newest first.
    pub fn about(&self, workload: &str) -> Vec<Decision> {
        self.ring()
            .entries
            .iter()
            .rev()
            .filter(|d| d.workload.as_deref() == Some(workload))
            .cloned()
            .collect()
    }

    /// How many decisions are kept now.
    pub fn len(&self) -> usize {
        self.ring().entries.len()
    }

    /// No decision kept yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Mode;
    use crate::wasm::Hook;

    fn decision(policy: &str, workload: &str, result: &str, at: f64) -> Decision {
        Decision {
            at_seconds: at,
            bundle: "platform".into(),
            source: "ConfigMap arbiter-system/platform".into(),
            tenant: None,
            policy: policy.into(),
            hook: Hook::Admission,
            mode: Mode::Enforce,
            workload: Some(workload.into()),
            subject: None,
            result: result.into(),
            reason: None,
            error: None,
            duration_micros: 1.0,
            reused: false,
            repeats: 0,
            last_at_seconds: None,
        }
    }

    #[test]
    fn keeps_the_newest_up_to_its_size_and_counts_repeats() {
        let recent = RecentDecisions::new(3);
        assert!(recent.is_empty());
        recent.push(decision("quota", "a/one", "deny", 1.0));
        recent.push(decision("quota", "a/one", "deny", 2.0));
        recent.push(decision("quota", "a/one", "deny", 3.0));
        assert_eq!(recent.len(), 1, "identical decisions are one entry");
        let kept = recent.latest(10);
        assert_eq!(kept[0].repeats, 2);
        assert_eq!(kept[0].last_at_seconds, Some(3.0));

        recent.push(decision("quota", "a/one", "allow", 4.0));
        recent.push(decision("quota", "a/two", "deny", 5.0));
        recent.push(decision("quota", "a/three", "deny", 6.0));
        assert_eq!(recent.len(), 3, "bounded");
        let names: Vec<_> = recent
            .latest(10)
            .iter()
            .map(|d| (d.workload.clone().unwrap(), d.result.clone()))
            .collect();
        assert_eq!(
            names,
            [
                ("a/three".to_string(), "deny".into()),
                ("a/two".to_string(), "deny".into()),
                ("a/one".to_string(), "allow".into()),
            ],
            "newest first, the oldest gone"
        );
        assert_eq!(recent.latest(1).len(), 1);
    }

    #[test]
    fn a_repeat_of_an_entry_gone_from_the_ring_is_a_new_entry() {
        let recent = RecentDecisions::new(2);
        recent.push(decision("quota", "a/one", "deny", 1.0));
        recent.push(decision("quota", "a/two", "deny", 2.0));
        recent.push(decision("quota", "a/three", "deny", 3.0));
        // a/one's entry went; the same decision again is stored anew.
        recent.push(decision("quota", "a/one", "deny", 4.0));
        let about = recent.about("a/one");
        assert_eq!(about.len(), 1);
        assert_eq!(about[0].at_seconds, 4.0);
        assert_eq!(about[0].repeats, 0);
        // And its repeats are counted on the new entry.
        recent.push(decision("quota", "a/one", "deny", 5.0));
        assert_eq!(recent.about("a/one")[0].repeats, 1);
        assert_eq!(recent.len(), 2);
    }

    #[test]
    fn policies_and_workloads_are_told_apart() {
        let recent = RecentDecisions::new(10);
        recent.push(decision("quota", "a/one", "deny", 1.0));
        recent.push(decision("gpus", "a/one", "deny", 2.0));
        recent.push(decision("quota", "a/two", "deny", 3.0));
        assert_eq!(recent.len(), 3);
        let about: Vec<_> = recent
            .about("a/one")
            .into_iter()
            .map(|d| d.policy)
            .collect();
        assert_eq!(about, ["gpus", "quota"]);
        assert!(recent.about("a/none").is_empty());
    }
}
