//! The workloads store: one slot per workload ever submitted, the slots of
//! withdrawn ones free for reuse, and the input order of submissions.
//! Knows nothing of queues, quota or timers; the scheduler's rooms read
//! and change entries through it by [`WorkloadId`].

use std::collections::BTreeSet;
use std::ops::{Index, IndexMut};

use super::entry::Entry;
use super::workload::{Seq, Status, WorkloadId};

/// Where the next workload added goes: its slot, the epoch it starts with
/// and its place in input order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Vacancy {
    /// The lowest free slot, or a new one after the last.
    pub id: WorkloadId,
    /// A reused slot continues its epochs (one past the withdrawn
    /// workload's), so timers and finish events of the workload that held
    /// it never match the new one; a new slot starts at 0.
    pub epoch: u32,
    /// Its place in input order.
    pub seq: Seq,
}

/// Every workload's [`Entry`], by slot.
///
/// What it guarantees: a free slot holds a `Withdrawn` entry, and the next
/// workload added takes the lowest free slot (a new one only when none is
/// free); the input order ([`Vacancy::seq`]) strictly increases with every
/// workload added, across reconfigurations ([`Workloads::reopen`]); a
/// slot's id never changes. What it never does: shrink, or check what a
/// caller writes through `IndexMut` (only [`Workloads::add`] may write a
/// free slot, and [`Workloads::free`] takes only a `Withdrawn` one).
#[derive(Debug, Default)]
pub(super) struct Workloads {
    entries: Vec<Entry>,
    /// Slots of withdrawn workloads, reused (lowest first) by later submissions.
    free: BTreeSet<WorkloadId>,
    /// The next submission's place in input order.
    next_seq: Seq,
}

impl Workloads {
    /// Every slot, withdrawn ones included.
    #[inline]
    pub fn all(&self) -> &[Entry] {
        &self.entries
    }

    /// The workload in slot `id`, unless the slot is free (withdrawn) or out of range.
    #[inline]
    pub fn get(&self, id: WorkloadId) -> Option<&Entry> {
        self.entries
            .get(id.index())
            .filter(|e| e.status != Status::Withdrawn)
    }

    /// Workloads known now (withdrawn slots left out).
    pub fn live(&self) -> impl Iterator<Item = (WorkloadId, &Entry)> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.status != Status::Withdrawn)
            .map(|(i, e)| (WorkloadId(i as u32), e))
    }

    /// Free slots.
    #[cfg(test)]
    pub fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Where the next workload added goes.
    pub fn vacancy(&self) -> Vacancy {
        match self.free.first() {
            Some(&id) => Vacancy {
                id,
                epoch: self.entries[id.index()].epoch.wrapping_add(1),
                seq: self.next_seq,
            },
            None => Vacancy {
                id: WorkloadId(self.entries.len() as u32),
                epoch: 0,
                seq: self.next_seq,
            },
        }
    }

    /// Adds `entry` (made for [`Workloads::vacancy`]) in the vacancy: the
    /// lowest free slot, or a new one. The input order moves on.
    pub fn add(&mut self, entry: Entry) -> WorkloadId {
        debug_assert_eq!(entry.seq, self.next_seq);
        self.next_seq = Seq(self.next_seq.0 + 1);
        match self.free.pop_first() {
            Some(id) => {
                self.entries[id.index()] = entry;
                id
            }
            None => {
                self.entries.push(entry);
                WorkloadId(self.entries.len() as u32 - 1)
            }
        }
    }

    /// Frees slot `id`, whose workload was withdrawn, for a later submission.
    pub fn free(&mut self, id: WorkloadId) {
        debug_assert_eq!(self.entries[id.index()].status, Status::Withdrawn);
        self.free.insert(id);
    }

    /// For a new configuration: a store with `old`'s free slots and input
    /// order but no entries yet, and `old`'s entries, in slot order, to
    /// put back with [`Workloads::keep`].
    pub fn reopen(old: Workloads) -> (Workloads, Vec<Entry>) {
        let next = Workloads {
            entries: Vec::with_capacity(old.entries.len()),
            free: old.free,
            next_seq: old.next_seq,
        };
        (next, old.entries)
    }

    /// Puts back an entry taken out by [`Workloads::reopen`], in the next
    /// slot: in slot order, each keeps its id.
    #[inline]
    pub fn keep(&mut self, entry: Entry) {
        self.entries.push(entry);
    }
}

impl Index<WorkloadId> for Workloads {
    type Output = Entry;

    /// The workload in slot `id` (panics if out of range).
    #[inline]
    fn index(&self, id: WorkloadId) -> &Entry {
        &self.entries[id.index()]
    }
}

impl IndexMut<WorkloadId> for Workloads {
    #[inline]
    fn index_mut(&mut self, id: WorkloadId) -> &mut Entry {
        &mut self.entries[id.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cluster::{ClusterQueueId, LocalQueueId};
    use crate::model::Millis;
    use crate::scheduler::reason::Reason;
    use crate::scheduler::workload::{Slot, Workload};

    /// A queued entry named `name`, made for `at`.
    fn entry(name: &str, at: Vacancy) -> Entry {
        Entry {
            workload: Workload {
                kind: "Job".into(),
                namespace: "ns".into(),
                name: name.into(),
                labels: Default::default(),
                annotations: Default::default(),
                queue_name: "q".into(),
                local_queue: LocalQueueId(0),
                cluster_queue: ClusterQueueId(0),
                priority: 0,
                priority_class: None,
                priority_weight: 1.0,
                pod_sets: Vec::new(),
            },
            status: Status::Queued,
            queue_time: Millis::ZERO,
            seq: at.seq,
            score: 0.0,
            tenant_score: None,
            slot: Slot {
                score: 0.0,
                queue_time: Millis::ZERO,
                seq: at.seq,
            },
            reason: Reason::None,
            retries: 0,
            pods_ready_requeues: 0,
            evictions: 0,
            admission: None,
            epoch: at.epoch,
            held_by_tenant: false,
            preempted_at: None,
        }
    }

    fn add(store: &mut Workloads, name: &str) -> WorkloadId {
        let at = store.vacancy();
        let id = store.add(entry(name, at));
        assert_eq!(id, at.id);
        id
    }

    fn withdraw(store: &mut Workloads, id: WorkloadId) {
        store[id].status = Status::Withdrawn;
        store.free(id);
    }

    #[test]
    fn the_lowest_free_slot_is_reused_and_continues_its_epochs() {
        let mut store = Workloads::default();
        let ids: Vec<WorkloadId> = ["a", "b", "c"].iter().map(|n| add(&mut store, n)).collect();
        assert_eq!(ids, vec![WorkloadId(0), WorkloadId(1), WorkloadId(2)]);
        store[WorkloadId(2)].epoch = 7;
        withdraw(&mut store, WorkloadId(2));
        withdraw(&mut store, WorkloadId(1));
        assert_eq!(store.free_slots(), 2);
        // A free slot holds a withdrawn entry: neither got nor live.
        assert!(store.get(WorkloadId(1)).is_none());
        assert_eq!(
            store.live().map(|(id, _)| id).collect::<Vec<_>>(),
            vec![WorkloadId(0)]
        );
        assert_eq!(store.all().len(), 3);
        let next = store.vacancy();
        assert_eq!((next.id, next.epoch), (WorkloadId(1), 1));
        assert_eq!(add(&mut store, "d"), WorkloadId(1));
        let next = store.vacancy();
        assert_eq!((next.id, next.epoch), (WorkloadId(2), 8));
        assert_eq!(add(&mut store, "e"), WorkloadId(2));
        // None free: a new slot, starting at epoch 0.
        let next = store.vacancy();
        assert_eq!((next.id, next.epoch), (WorkloadId(3), 0));
        assert_eq!(store.free_slots(), 0);
        assert_eq!(store[WorkloadId(2)].workload.name, "e");
    }

    #[test]
    fn input_order_strictly_increases_also_across_a_reopen() {
        let mut store = Workloads::default();
        let mut seqs = Vec::new();
        for name in ["a", "b"] {
            seqs.push(store.vacancy().seq);
            add(&mut store, name);
        }
        withdraw(&mut store, WorkloadId(0));
        seqs.push(store.vacancy().seq);
        add(&mut store, "c");
        withdraw(&mut store, WorkloadId(1));
        let (mut next, entries) = Workloads::reopen(store);
        assert_eq!(entries.len(), 2);
        for entry in entries {
            next.keep(entry);
        }
        // The free slot and the input order carry over.
        assert_eq!(next.free_slots(), 1);
        seqs.push(next.vacancy().seq);
        assert_eq!(add(&mut next, "d"), WorkloadId(1));
        assert_eq!(next[WorkloadId(0)].workload.name, "c");
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    }
}
