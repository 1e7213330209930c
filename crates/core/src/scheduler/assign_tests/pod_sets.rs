//! Flavor assignment: pod sets and counts.

use super::*;

#[test]
fn counts_replace_the_pod_sets_counts() {
    let f = Fixture::kueue();
    let w = f.workload(
        "ml",
        vec![
            pods("workers", 4, &[(GPU, 4)]),
            pods("driver", 1, &[(GPU, 1)]),
        ],
    );
    let whole = f.assign(&w, None, None);
    assert_eq!(whole.counts, [4, 1]);
    // The workers take all 16 a100 GPUs the cohort has; the driver moves on.
    assert_eq!(f.chosen(&whole), [[(GPU, "a100")], [(GPU, "h100")]]);
    assert_eq!(
        f.usage(&whole),
        [("a100", GPU, units(16)), ("h100", GPU, units(1))]
    );
    // Two workers: 8 + 1. A pod set past the end of `counts` keeps its own count.
    let partial = f.assign(&w, None, Some(&[2]));
    assert_eq!(partial.counts, [2, 1]);
    assert_eq!(partial.mode, Mode::Fit);
    assert_eq!(f.usage(&partial), [("a100", GPU, units(9))]);
    assert!(partial.borrowing);
    let partial = f.assign(&w, None, Some(&[1, 0]));
    assert_eq!(partial.counts, [1, 0]);
    assert_eq!(f.usage(&partial), [("a100", GPU, units(4))]);
    assert!(!partial.borrowing);
}

#[test]
fn pod_sets_share_the_quota_they_are_charged() {
    let two = |f: &Fixture| {
        f.workload(
            "ml",
            vec![pods("a", 1, &[(GPU, 6)]), pods("b", 1, &[(GPU, 6)])],
        )
    };
    let f = Fixture::kueue();
    let a = f.assign(&two(&f), None, None);
    // The second pod set needs 6 on top of the first's 6: 12 > 8 borrows.
    assert_eq!(f.chosen(&a), [[(GPU, "a100")], [(GPU, "a100")]]);
    assert_eq!(f.usage(&a), [("a100", GPU, units(12))]);
    assert!(a.borrowing);
    let f = Fixture::new("{whenCanBorrow: TryNextFlavor}", &[]);
    let a = f.assign(&two(&f), None, None);
    assert_eq!(f.chosen(&a), [[(GPU, "a100")], [(GPU, "h100")]]);
    assert_eq!(
        f.usage(&a),
        [("a100", GPU, units(6)), ("h100", GPU, units(6))]
    );
    assert!(!a.borrowing);
}

#[test]
fn a_pod_set_with_no_flavor_explains_more_than_one_needing_preemption() {
    let mut f = Fixture::kueue();
    f.charge("lender", "a100", GPU, 8);
    f.charge("ml", "a100", GPU, 4);
    f.charge("ml", "h100", GPU, 4);
    let big = || pods("big", 1, &[(GPU, 8)]);
    let pinned = || selecting(pods("pinned", 1, &[(GPU, 1)]), "gpu", "b200");
    let excluded_everywhere = vec![
        Problem::Excluded {
            flavor: f.flavor("a100"),
        },
        Problem::Excluded {
            flavor: f.flavor("h100"),
        },
        Problem::Excluded {
            flavor: f.flavor("spot"),
        },
    ];
    let a = f.assign(&f.workload("ml", vec![big(), pinned()]), None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(f.chosen(&a), [vec![(GPU, "a100")], vec![]]);
    assert_eq!(f.usage(&a), [("a100", GPU, units(8))]);
    assert_eq!(a.not_fit, not_fit(1, excluded_everywhere.clone()));
    // The first pod set with no flavor keeps the explanation.
    let a = f.assign(&f.workload("ml", vec![pinned(), big()]), None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(a.not_fit, not_fit(0, excluded_everywhere));
}
