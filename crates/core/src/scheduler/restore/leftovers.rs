//! What a reconfiguration leaves over: workloads whose queue (or flavors)
//! went away, kept by name to resolve against the next configuration, and
//! of those the detached ones, still running on nodes outside any quota.
//! Built by `reconfigure`; `lifecycle` forgets and releases from it as
//! such workloads finish, fail or are withdrawn.

use std::collections::BTreeMap;

use crate::scheduler::workload::{Placement, WorkloadId};

use super::Portable;

/// The orphaned and detached workloads and what they hold.
///
/// What it guarantees: every detached workload is an orphan too (its
/// requests by name are kept to resolve it later) — it is built so
/// ([`Leftovers::new`]), and an orphan still holding nodes is never
/// forgotten before they are released ([`Leftovers::release`] first); a
/// detached workload's nodes are handed back at most once. What it never
/// does: give nodes back to `Capacity` or change a workload's status —
/// the scheduler does, with what this hands it.
#[derive(Debug, Default)]
pub(in crate::scheduler) struct Leftovers {
    /// `Status::Detached` workloads and the nodes they hold.
    detached: BTreeMap<WorkloadId, Vec<Placement>>,
    /// `Status::Orphaned` and `Status::Detached` workloads by name, to resolve
    /// against the next configuration.
    orphans: BTreeMap<WorkloadId, Portable>,
}

impl Leftovers {
    /// The orphans and, of them, the detached ones with their nodes.
    pub fn new(
        detached: BTreeMap<WorkloadId, Vec<Placement>>,
        orphans: BTreeMap<WorkloadId, Portable>,
    ) -> Leftovers {
        debug_assert!(detached.keys().all(|id| orphans.contains_key(id)));
        Leftovers { detached, orphans }
    }

    /// Taken apart for the next configuration: the orphans, and the
    /// detached workloads' nodes.
    pub fn into_parts(
        self,
    ) -> (
        BTreeMap<WorkloadId, Portable>,
        BTreeMap<WorkloadId, Vec<Placement>>,
    ) {
        (self.orphans, self.detached)
    }

    /// The orphan `id`'s requests by name, to change.
    #[inline]
    pub fn orphan_mut(&mut self, id: WorkloadId) -> Option<&mut Portable> {
        self.orphans.get_mut(&id)
    }

    /// Hands back the nodes detached workload `id` holds; `None` if it
    /// holds none (not detached, or released before). It stays an orphan.
    #[inline]
    pub fn release(&mut self, id: WorkloadId) -> Option<Vec<Placement>> {
        self.detached.remove(&id)
    }

    /// Forgets orphan `id`, whose nodes (if it was detached) were released.
    #[inline]
    pub fn forget(&mut self, id: WorkloadId) {
        debug_assert!(!self.detached.contains_key(&id), "release before forget");
        self.orphans.remove(&id);
    }

    /// How many are detached, and how many are orphans.
    #[cfg(test)]
    pub fn counts(&self) -> (usize, usize) {
        (self.detached.len(), self.orphans.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn portable(cluster_queue: &str) -> Portable {
        Portable {
            requests: Vec::new(),
            flavors: None,
            admitted: None,
            placements: Vec::new(),
            cluster_queue: cluster_queue.into(),
            scored: false,
        }
    }

    #[test]
    fn a_detached_workload_stays_an_orphan_and_its_nodes_come_back_once() {
        let (a, b) = (WorkloadId(1), WorkloadId(2));
        let orphans = BTreeMap::from([(a, portable("gone")), (b, portable("gone"))]);
        let mut left = Leftovers::new(BTreeMap::from([(a, Vec::new())]), orphans);
        assert_eq!(left.counts(), (1, 2));
        assert_eq!(left.release(a), Some(Vec::new()));
        assert_eq!(left.release(a), None);
        // Released, still an orphan, to resolve as a pending workload.
        assert_eq!(left.counts(), (0, 2));
        left.orphan_mut(a).expect("an orphan").forget_admission();
        assert!(left.orphan_mut(a).is_some_and(|p| p.scored));
        left.forget(a);
        left.forget(b);
        assert_eq!(left.counts(), (0, 0));
        assert!(left.orphan_mut(b).is_none());
    }

    #[test]
    #[should_panic(expected = "release before forget")]
    #[cfg(debug_assertions)]
    fn an_orphan_holding_nodes_is_not_forgotten() {
        let a = WorkloadId(0);
        let mut left = Leftovers::new(
            BTreeMap::from([(a, Vec::new())]),
            BTreeMap::from([(a, portable("gone"))]),
        );
        left.forget(a);
    }

    #[test]
    fn the_parts_come_apart_for_the_next_configuration() {
        let a = WorkloadId(3);
        let left = Leftovers::new(
            BTreeMap::from([(a, Vec::new())]),
            BTreeMap::from([(a, portable("gone"))]),
        );
        let (orphans, detached) = left.into_parts();
        assert_eq!(orphans[&a].cluster_queue, "gone");
        assert!(detached.contains_key(&a));
    }
}
