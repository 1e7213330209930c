//! Flavor assignment: fungibility.

use super::*;

#[test]
fn borrowing_stops_the_search_by_default() {
    let f = Fixture::kueue();
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 12)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    assert_eq!(f.usage(&a), [("a100", GPU, units(12))]);
    assert!(a.borrowing, "12 is above a100's nominal 8");
    // Exactly the nominal quota is not borrowing.
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 8)])]);
    assert!(!f.assign(&w, None, None).borrowing);
}

#[test]
fn when_can_borrow_try_next_flavor_prefers_a_flavor_without_borrowing() {
    let mut f = Fixture::new("{whenCanBorrow: TryNextFlavor}", &[]);
    f.charge("ml", "a100", GPU, 4);
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 6)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
    assert!(!a.borrowing);
    // The same workload under Kueue's default stays on a100, borrowing.
    let mut kueue = Fixture::kueue();
    kueue.charge("ml", "a100", GPU, 4);
    let a = kueue.assign(&w, None, None);
    assert_eq!(kueue.chosen(&a), [[(GPU, "a100")]]);
    assert!(a.borrowing);
    // With no flavor that fits without borrowing, the first that borrows is kept.
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 10)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    assert!(a.borrowing);
    assert_eq!(a.not_fit, None);
}

#[test]
fn preemption_keeps_searching_for_a_fit_by_default() {
    let mut f = Fixture::kueue();
    f.charge("lender", "a100", GPU, 8);
    f.charge("ml", "a100", GPU, 4);
    // a100 has 4 left: 6 needs preemption, h100 fits.
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 6)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
    assert_eq!(a.not_fit, None);
    // With h100 half used too, 8 fits nowhere now; both could hold it after
    // preemption (it is within their nominal 8): the first is kept.
    f.charge("ml", "h100", GPU, 4);
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 8)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Preempt);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    assert_eq!(f.usage(&a), [("a100", GPU, units(8))]);
    assert!(
        !a.borrowing,
        "borrowing is only judged where the flavor fits"
    );
    assert_eq!(
        a.not_fit,
        not_fit(
            0,
            vec![
                f.gpu_quota("a100", 8, 4, 8, 0, Some(0), 16),
                f.gpu_quota("h100", 8, 4, 8, 0, Some(0), 8),
                Problem::Taint {
                    flavor: f.flavor("spot"),
                    taint: 1
                },
            ]
        )
    );
}

#[test]
fn preemption_is_tried_only_for_a_request_within_nominal_quota() {
    // Kueue: flavorassigner.go fitsResourceQuota — preemption is simulated
    // only when `nominal >= request`, a subtree smaller than the whole
    // cohort tree holds the request, or the queue may preempt while
    // borrowing; flavorassigner_test "when borrowing while preemption is
    // needed for flavor one, fair sharing enabled, reclaimWithinCohort=Never".
    let mut f = Fixture::kueue();
    f.charge("lender", "a100", GPU, 8);
    f.charge("ml", "a100", GPU, 4);
    // 12 is beyond a100's nominal 8 (a100 could hold it after preemption in
    // the cohort, 16) and beyond all h100 ever has: no flavor.
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 12)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(f.chosen(&a), [Vec::<(&str, &str)>::new()]);
    assert!(a.usage.is_empty());
}

#[test]
fn when_can_preempt_may_stop_search_stops_at_the_first_preemptible_flavor() {
    let mut f = Fixture::new("{whenCanPreempt: MayStopSearch}", &[]);
    f.charge("lender", "a100", GPU, 8);
    f.charge("ml", "a100", GPU, 4);
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 6)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Preempt);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")]]);
    assert_eq!(
        a.not_fit,
        not_fit(0, vec![f.gpu_quota("a100", 6, 4, 8, 0, Some(0), 16)])
    );
}
