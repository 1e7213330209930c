//! Flavor assignment: physical capacity.

use super::*;

#[test]
fn pods_are_placed_best_fit_on_the_flavors_nodes() {
    let f = Fixture::new("{}", &[("a100", 2, &[(GPU, 8)])]);
    let w = f.workload("ml", vec![pods("main", 2, &[(GPU, 4)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    // Both on node 0: the second pod goes to the fuller node.
    assert_eq!(
        a.placements,
        [Placement {
            pod_set: 0,
            flavor: f.flavor("a100"),
            node: 0,
            per_pod: vec![(resource_id(&f.cluster, GPU), units(4))],
            pods: 2,
            cards: Vec::new(),
        }]
    );
}

#[test]
fn quota_without_room_on_nodes_moves_on_or_reports_capacity() {
    let f = Fixture::new("{}", &[("a100", 1, &[(GPU, 6)])]);
    // Quota allows 2 × 4 on a100, but its one node holds one such pod.
    let w = f.workload("ml", vec![pods("main", 2, &[(GPU, 4)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(
        f.chosen(&a),
        [[(GPU, "h100")]],
        "h100 has no pools: unlimited"
    );
    assert!(a.placements.is_empty());
    let a = f.assign(&w, Some(&["a100"]), None);
    assert_eq!(a.mode, Mode::NoFit);
    assert!(a.usage.is_empty());
    assert_eq!(
        a.not_fit,
        not_fit(
            0,
            vec![Problem::Capacity {
                flavor: f.flavor("a100"),
                pods: 2,
                nodes: 1,
            }]
        )
    );
}

#[test]
fn later_pod_sets_see_the_nodes_earlier_ones_took() {
    let f = Fixture::new("{}", &[("a100", 1, &[(GPU, 8)])]);
    let w = f.workload(
        "ml",
        vec![pods("a", 1, &[(GPU, 6)]), pods("b", 1, &[(GPU, 6)])],
    );
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    // Quota would let b borrow on a100, but a left 2 GPUs on its only node.
    assert_eq!(f.chosen(&a), [[(GPU, "a100")], [(GPU, "h100")]]);
    assert_eq!(a.placements.len(), 1);
    assert_eq!((a.placements[0].node, a.placements[0].pods), (0, 1));
    assert!(!a.borrowing);
}

/// Kueue's `TestIsPreferred` (pkg/scheduler/flavorassigner/flavorassigner_test.go),
/// case by case.
#[test]
fn flavor_preference_ranks_modes_and_borrowing_levels_as_kueue() {
    use FlavorPreference::{BorrowingOverPreemption as BoP, PreemptionOverBorrowing as PoB};
    let r = |kind, level| Rank { kind, level };
    let cases = [
        // "feature gate disabled prioritises preemption"
        (r(Kind::Fit, 0), r(Kind::Preempt, 0), BoP, true),
        // "explicit BorrowingOverPreemption prioritises borrowing distance"
        (r(Kind::Preempt, 1), r(Kind::Fit, 2), BoP, false),
        // "explicit PreemptionOverBorrowing prioritises lower preemption"
        (r(Kind::Preempt, 1), r(Kind::Fit, 2), PoB, true),
        // "explicit PreemptionOverBorrowing breaks borrowing ties with preemption"
        (r(Kind::Preempt, 1), r(Kind::Fit, 1), PoB, false),
        // "… rejects no-candidate flavor before borrowing comparison"
        (r(Kind::NoCandidates, 1), r(Kind::Fit, 2), PoB, false),
        // "… prefers fit over shallower-borrowing no-candidate flavor"
        (r(Kind::Fit, 2), r(Kind::NoCandidates, 1), PoB, true),
        // "no-candidate flavor remains preferable to no-fit flavor"
        (r(Kind::NoCandidates, 1), r(Kind::NoFit, 0), BoP, true),
        // "no-fit flavor remains worse than no-candidate flavor"
        (r(Kind::NoFit, 0), r(Kind::NoCandidates, 1), BoP, false),
        // "no-candidate flavors retain borrowing preference" (and in reverse)
        (
            r(Kind::NoCandidates, 1),
            r(Kind::NoCandidates, 2),
            PoB,
            true,
        ),
        (
            r(Kind::NoCandidates, 2),
            r(Kind::NoCandidates, 1),
            PoB,
            false,
        ),
        // Reclaim ranks above preemption within the queue.
        (r(Kind::Reclaim, 0), r(Kind::Preempt, 0), BoP, true),
    ];
    for (a, b, preference, want) in cases {
        assert_eq!(
            is_preferred(a, b, preference),
            want,
            "{a:?} vs {b:?} under {preference:?}"
        );
    }
}
