//! Flavor assignment: quota.

use super::*;

#[test]
fn more_than_any_flavor_could_ever_give_is_nofit_with_every_reason() {
    let f = Fixture::kueue();
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 20)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert!(a.usage.is_empty());
    assert!(!a.borrowing);
    // a100: 8 own + 8 the lender lends; h100: 8 own, nothing to borrow.
    assert_eq!(
        a.not_fit,
        not_fit(
            0,
            vec![
                f.gpu_quota("a100", 20, 16, 8, 0, Some(8), 16),
                f.gpu_quota("h100", 20, 8, 8, 0, Some(0), 8),
                Problem::Taint {
                    flavor: f.flavor("spot"),
                    taint: 1
                },
            ]
        )
    );
}

#[test]
fn quota_problem_counts_what_is_borrowed_and_what_the_cohort_can_lend() {
    let mut f = Fixture::new("{whenCanPreempt: MayStopSearch}", &[]);
    f.charge("ml", "a100", GPU, 12);
    let w = f.workload("ml", vec![pods("main", 1, &[(GPU, 6)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Preempt);
    assert_eq!(
        a.not_fit,
        not_fit(0, vec![f.gpu_quota("a100", 6, 4, 8, 4, Some(4), 16)])
    );
    // Without a cohort there is nothing to lend.
    let w = f.workload("solo", vec![pods("main", 1, &[(GPU, 6)])]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(
        a.not_fit,
        not_fit(0, vec![f.gpu_quota("managed", 6, 4, 4, 0, None, 4)])
    );
}
