//! Flavor assignment: order.

use super::*;

#[test]
fn first_listed_flavor_with_room_is_chosen() {
    let f = Fixture::kueue();
    let w = f.workload("ml", vec![pods("main", 2, &[(GPU, 2)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    assert_eq!(f.usage(&a), [("a100", GPU, units(4))]);
    assert!(!a.borrowing);
    assert_eq!(a.not_fit, None);
    assert_eq!(a.counts, [2]);
    assert!(a.placements.is_empty(), "no node pools: no placement");
}

#[test]
fn each_resource_group_gets_its_own_flavor() {
    let f = Fixture::kueue();
    let w = f.workload("ml", vec![pods("main", 3, &[("cpu", 2), (GPU, 1)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    // Groups in the ClusterQueue's order: GPUs first, then CPU.
    assert_eq!(f.chosen(&a), [[(GPU, "a100"), ("cpu", "cpu-nodes")]]);
    // Usage sorted by (flavor, resource): cpu-nodes is flavor 0.
    assert_eq!(
        f.usage(&a),
        [("cpu-nodes", "cpu", units(6)), ("a100", GPU, units(3))]
    );
}

#[test]
fn a_flavor_short_of_quota_gives_way_to_the_next_listed_one() {
    let mut f = Fixture::kueue();
    f.charge("lender", "a100", GPU, 8);
    f.charge("ml", "a100", GPU, 8);
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 4)])]);
    let a = f.assign(&w, None, None);
    // a100 would need preemption; whenCanPreempt defaults to TryNextFlavor.
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
    assert_eq!(f.usage(&a), [("h100", GPU, units(4))]);
    assert_eq!(a.not_fit, None);
}

#[test]
fn preferred_order_replaces_the_listed_order_and_drops_unlisted_flavors() {
    let f = Fixture::kueue();
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 2)])]);
    let a = f.assign(&w, Some(&["h100", "a100"]), None);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
    // Flavors of other groups (or none of the queue's) in the list are ignored.
    let a = f.assign(&w, Some(&["managed", "spot", "a100"]), None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    // A flavor left out of the preferred order is not tried at all.
    let a = f.assign(&w, Some(&["cpu-nodes"]), None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(f.chosen(&a), [Vec::<(&str, &str)>::new()]);
    assert!(a.usage.is_empty());
    assert_eq!(a.not_fit, not_fit(0, Vec::new()));
}
