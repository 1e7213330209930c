//! Scenario tests: YAML in (`tests/scenarios/<name>/`), asserted decisions
//! out. Each scenario goes through the library path `arbiter simulate` uses
//! (load → scenario → driver with the default hooks) and the test checks the
//! report: who was admitted when, on which flavor, who was evicted by whom,
//! and the reason given for everything still waiting. One test per promise
//! of docs/design.md §3; the test names say the promise.

use std::path::PathBuf;

use arbiter_core::model::Millis;
use arbiter_core::scheduler::hooks::DefaultHooks;
use arbiter_sim::files::load_paths;
use arbiter_sim::report::{Report, WorkloadReport};
use arbiter_sim::{driver, scenario};

/// Runs the scenario made of these paths (relative to `tests/scenarios/`).
fn run_paths(paths: &[&str]) -> Report {
    run_until(paths, None)
}

/// Runs the scenario made of these paths, to `until` if given.
fn run_until(paths: &[&str], until: Option<Millis>) -> Report {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let paths: Vec<PathBuf> = paths.iter().map(|p| root.join(p)).collect();
    let loaded = load_paths(&paths).unwrap_or_else(|e| panic!("loading {paths:?}: {e}"));
    let mut scenario =
        scenario::build(loaded).unwrap_or_else(|e| panic!("building {paths:?}: {e}"));
    scenario.until = until.or(scenario.until);
    let report = driver::run(&scenario, &mut DefaultHooks, &mut |_| {});
    let ignored: Vec<&String> = report
        .warnings
        .iter()
        .filter(|w| w.contains("ignored"))
        .collect();
    assert!(ignored.is_empty(), "the scenario has typos: {ignored:?}");
    report
}

/// Runs `tests/scenarios/<dir>/`.
fn run(dir: &str) -> Report {
    run_paths(&[dir])
}

fn workload<'r>(report: &'r Report, name: &str) -> &'r WorkloadReport {
    report
        .workloads
        .iter()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("no workload {name} in the report"))
}

fn admitted_at(report: &Report, name: &str) -> Option<f64> {
    workload(report, name).admitted_seconds
}

/// The single flavor of pod set `main` for `nvidia.com/gpu`.
fn gpu_flavor<'r>(report: &'r Report, name: &str) -> &'r str {
    workload(report, name)
        .flavors
        .get("main")
        .and_then(|m| m.get("nvidia.com/gpu"))
        .map(String::as_str)
        .unwrap_or_else(|| panic!("{name} has no GPU flavor: {:?}", workload(report, name)))
}

/// (event, atSeconds) of every history entry.
fn events(report: &Report, name: &str) -> Vec<(&'static str, f64)> {
    workload(report, name)
        .history
        .iter()
        .map(|h| (h.event.as_str(), h.at_seconds))
        .collect()
}

fn assert_pending_because(report: &Report, name: &str, needle: &str) {
    let w = workload(report, name);
    assert_eq!(w.state, "pending", "{name}: {w:?}");
    assert!(
        w.reason.contains(needle),
        "{name}'s reason should mention {needle:?}, got {:?}",
        w.reason
    );
}

// ------------------------------------------------------------ 1. queueing strategies

#[test]
fn strict_fifo_head_blocks_smaller_later_workloads_best_effort_lets_them_pass() {
    let r = run("queueing-strategy");
    // StrictFIFO: the 8-GPU head waits for the running job; the 4-GPU job that
    // would fit at once waits behind it.
    assert_eq!(admitted_at(&r, "strict-running"), Some(0.0));
    assert_eq!(admitted_at(&r, "strict-big"), Some(600.0));
    assert_eq!(admitted_at(&r, "strict-small"), Some(1200.0));
    // BestEffortFIFO: the small one goes first; the big one gets the queue
    // once both 4-GPU jobs are done.
    assert_eq!(admitted_at(&r, "best-effort-running"), Some(0.0));
    assert_eq!(admitted_at(&r, "best-effort-small"), Some(2.0));
    assert_eq!(admitted_at(&r, "best-effort-big"), Some(602.0));
    assert_eq!(r.summary.finished, 6);
    assert_eq!(r.summary.preemptions, 0);
}

// ------------------------------------------------------------ 2. flavors and fungibility

#[test]
fn flavors_are_tried_in_listed_order_and_fungibility_decides_borrow_or_next_flavor() {
    let r = run("flavor-fungibility");
    // Fits the first listed flavor without borrowing: taken.
    assert_eq!(gpu_flavor(&r, "try-next-small"), "on-demand");
    // whenCanBorrow TryNextFlavor: on-demand would need borrowing, spot fits without.
    assert_eq!(gpu_flavor(&r, "try-next-big"), "spot");
    assert!(!workload(&r, "try-next-big").history[0]
        .reason
        .contains("borrowing"));
    // whenCanBorrow MayStopSearch (v1beta2) and Borrow (v1beta1): borrow in the first flavor.
    for name in ["may-stop-big", "borrow-v1beta1-big"] {
        assert_eq!(gpu_flavor(&r, name), "on-demand", "{name}");
        assert_eq!(admitted_at(&r, name), Some(1.0), "{name}");
        assert!(
            workload(&r, name).history[0]
                .reason
                .contains("borrowing from its cohort"),
            "{name}: {:?}",
            workload(&r, name).history
        );
    }
}

#[test]
fn when_can_preempt_try_next_flavor_avoids_preemption_may_stop_search_preempts() {
    let r = run("flavor-fungibility");
    // TryNextFlavor: spot fits, nobody is preempted.
    assert_eq!(gpu_flavor(&r, "preempt-try-next-low"), "on-demand");
    assert_eq!(gpu_flavor(&r, "preempt-try-next-high"), "spot");
    assert_eq!(admitted_at(&r, "preempt-try-next-high"), Some(1.0));
    assert_eq!(workload(&r, "preempt-try-next-low").evictions, 0);
    // MayStopSearch: the high-priority job preempts in the first flavor...
    let high = workload(&r, "preempt-may-stop-high");
    assert_eq!(gpu_flavor(&r, "preempt-may-stop-high"), "on-demand");
    assert_eq!(high.admitted_seconds, Some(1.0));
    let low = workload(&r, "preempt-may-stop-low");
    assert_eq!(low.evictions, 1);
    assert_eq!(low.history[1].event, "evicted");
    assert_eq!(
        low.history[1].by.as_deref(),
        Some("ml/preempt-may-stop-high")
    );
    // ...and the victim, which can preempt nobody in on-demand, moves on to
    // the free spot quota at once (Kueue: a flavor without preemption
    // candidates ranks below any viable one).
    assert_eq!(low.admitted_seconds, Some(1.0));
    assert_eq!(gpu_flavor(&r, "preempt-may-stop-low"), "spot");
    assert_eq!(r.summary.preemptions, 1);
}

// ------------------------------------------------------------ 3. quota limits

#[test]
fn borrowing_limit_caps_borrowing_and_lending_limit_keeps_quota_back() {
    let r = run("quota-limits");
    // capped: nominal 4 + borrowingLimit 2 = three 2-GPU jobs, though the lender has 8 idle.
    for name in ["capped-0", "capped-1", "capped-2"] {
        assert_eq!(admitted_at(&r, name), Some(0.0), "{name}");
    }
    assert_eq!(admitted_at(&r, "capped-3"), Some(3600.0));
    // taker: nominal 2 + keeper's lendingLimit 2 = two jobs, though keeper has 8 idle.
    assert_eq!(admitted_at(&r, "taker-0"), Some(0.0));
    assert_eq!(admitted_at(&r, "taker-1"), Some(0.0));
    assert_eq!(admitted_at(&r, "taker-2"), Some(3600.0));
    // keeper's 6 kept back are there when it needs them, without preempting anyone.
    assert_eq!(admitted_at(&r, "keeper-own"), Some(10.0));
    assert_eq!(r.summary.preemptions, 0);
}

#[test]
fn quota_shortfall_reasons_give_exact_numbers() {
    let r = run_paths(&["quota-limits", "until-10m.yaml"]);
    assert_pending_because(
        &r,
        "capped-3",
        "needs 2 nvidia.com/gpu in a100; ClusterQueue capped has 0 free (nominal 4, borrowed 2)",
    );
    assert_pending_because(
        &r,
        "taker-2",
        "needs 2 nvidia.com/gpu in a100; ClusterQueue taker has 0 free (nominal 2, borrowed 2); cohort lend has 0 to lend",
    );
    assert_eq!(workload(&r, "keeper-own").state, "admitted");
}

// ------------------------------------------------------------ 4. hierarchical cohorts

#[test]
fn hierarchical_cohorts_lend_their_own_quota_to_members() {
    let r = run("hierarchical-cohorts");
    // 4 own + 2 from team + 8 from org: 10 then 4 fit, the 15th GPU does not.
    assert_eq!(admitted_at(&r, "ten"), Some(0.0));
    assert!(workload(&r, "ten").history[0]
        .reason
        .contains("borrowing from its cohort"));
    assert_eq!(admitted_at(&r, "four"), Some(1.0));
    assert_eq!(admitted_at(&r, "one-more"), Some(3600.0));
    let r = run_paths(&["hierarchical-cohorts", "until-10m.yaml"]);
    assert_pending_because(
        &r,
        "one-more",
        "ClusterQueue ml has 0 free (nominal 4, borrowed 10)",
    );
}

#[test]
fn heads_borrowing_closer_to_their_queue_go_first() {
    // Kueue: pkg/scheduler/scheduler.go, makeClassicalIterator — entries
    // ordered by `assignment.Borrows()` (the borrowing level,
    // flavorassigner's FindHeightOfLowestSubtreeThatFits) before priority
    // and FIFO.
    let r = run("borrowing-level");
    assert_eq!(admitted_at(&r, "blocker"), Some(0.0));
    assert_eq!(admitted_at(&r, "a-new"), Some(10.0));
    assert_eq!(admitted_at(&r, "b-old"), Some(20.0));
}

#[test]
fn preemption_is_tried_only_for_a_request_within_nominal_quota() {
    // Kueue: pkg/scheduler/flavorassigner/flavorassigner.go fitsResourceQuota
    // (`rQuota.Nominal >= val || mayReclaimInHierarchy ||
    // canPreemptWhileBorrowing`), as flavorassigner_test.go "when borrowing
    // while preemption is needed for flavor one, fair sharing enabled,
    // reclaimWithinCohort=Never" shows: flavor one is NoFit, two fits.
    let r = run("preempt-within-nominal");
    assert_eq!(admitted_at(&r, "high"), Some(1.0));
    let flavor = workload(&r, "high")
        .flavors
        .get("main")
        .and_then(|m| m.get("cpu"))
        .cloned();
    assert_eq!(flavor.as_deref(), Some("two"));
    assert_eq!(workload(&r, "low").evictions, 0);
}

// ------------------------------------------------------------ 5. preemption

#[test]
fn within_cluster_queue_lower_priority_evicts_lowest_priority_most_recent_first() {
    let r = run("preemption-within-cq");
    // Full at 20s (low-a 2, low-b 2, mid 4). high needs 4: both priority-1
    // jobs go, newest first; mid (priority 5) is spared though it alone would do.
    assert_eq!(admitted_at(&r, "high"), Some(30.0));
    assert_eq!(workload(&r, "mid").evictions, 0);
    for name in ["low-a", "low-b"] {
        let w = workload(&r, name);
        assert_eq!(w.evictions, 1, "{name}");
        let evicted = &w.history[1];
        assert_eq!(
            (evicted.event.as_str(), evicted.at_seconds),
            ("evicted", 30.0)
        );
        assert_eq!(evicted.by.as_deref(), Some("ml/high"));
        assert!(
            evicted.reason.contains("within ClusterQueue"),
            "{:?}",
            evicted.reason
        );
        // Requeued at once, re-admitted when high is done.
        assert_eq!(
            events(&r, name),
            vec![
                ("admitted", w.arrival_seconds),
                ("evicted", 30.0),
                ("requeued", 30.0),
                ("admitted", 630.0),
                ("finished", 4230.0),
            ]
        );
    }
    assert_eq!(r.summary.preemptions, 3);
}

#[test]
fn preemption_evicts_a_minimal_victim_set() {
    let r = run("preemption-within-cq");
    // Candidates in order: small-new (2), big-old (4). Removing both fits, but
    // big-old alone is enough, so small-new is put back.
    assert_eq!(admitted_at(&r, "urgent"), Some(30.0));
    assert_eq!(workload(&r, "small-new").evictions, 0);
    assert_eq!(workload(&r, "other").evictions, 0);
    let big = workload(&r, "big-old");
    assert_eq!(big.evictions, 1);
    assert_eq!(big.history[1].by.as_deref(), Some("ml/urgent"));
    assert_eq!(big.admitted_seconds, Some(630.0));
}

#[test]
fn lower_or_newer_equal_priority_preempts_newer_workloads_of_equal_priority() {
    let r = run("preemption-newer-equal");
    // old (queued at 10s) preempts new (queued at 20s, same priority) once
    // the blocker is gone; new gets back in with its original queue time.
    assert_eq!(admitted_at(&r, "newer-equal-old"), Some(100.0));
    let new = workload(&r, "newer-equal-new");
    assert_eq!(new.evictions, 1);
    assert_eq!(new.history[1].by.as_deref(), Some("ml/newer-equal-old"));
    assert_eq!(new.admitted_seconds, Some(700.0));
    // LowerPriority: equal priority is never preempted, old waits for new to finish.
    assert_eq!(admitted_at(&r, "lower-only-old"), Some(3620.0));
    assert_eq!(workload(&r, "lower-only-new").evictions, 0);
}

#[test]
fn reclaim_within_cohort_any_takes_back_lent_quota_from_borrowers_first() {
    let r = run("reclaim-within-cohort");
    // urgent-any needs 4 of owner-any's nominal 8; 4 are lent. The borrowing
    // queue's job goes (priority 10, above own-low's 0: Any ignores priority,
    // and borrowing queues come first); borrower-any-1 (within its nominal)
    // and own-low are spared.
    assert_eq!(admitted_at(&r, "urgent-any"), Some(30.0));
    let victim = workload(&r, "borrower-any-2");
    assert_eq!(victim.evictions, 1);
    assert_eq!(victim.history[1].by.as_deref(), Some("ml/urgent-any"));
    assert!(
        victim.history[1]
            .reason
            .contains("reclaimed by ClusterQueue owner-any"),
        "{:?}",
        victim.history[1].reason
    );
    assert_eq!(workload(&r, "borrower-any-1").evictions, 0);
    assert_eq!(workload(&r, "own-low").evictions, 0);
    // Requeued with its original queue time, re-admitted when urgent-any is done.
    assert_eq!(victim.admitted_seconds, Some(630.0));
}

#[test]
fn reclaim_within_cohort_lower_priority_spares_higher_priority_borrowers() {
    let r = run("reclaim-within-cohort");
    // owner-mid (priority 5) reclaims from borrowed-low (0), not borrowed-high (10).
    assert_eq!(admitted_at(&r, "owner-mid"), Some(30.0));
    assert_eq!(workload(&r, "borrowed-high").evictions, 0);
    let low = workload(&r, "borrowed-low");
    assert_eq!(low.evictions, 1);
    assert_eq!(low.history[1].by.as_deref(), Some("ml/owner-mid"));
    // owner-mid-2 cannot reclaim from borrowed-high: it waits for owner-mid.
    // Then it goes before the borrowing borrowed-low (no borrowing first).
    assert_eq!(admitted_at(&r, "owner-mid-2"), Some(630.0));
    assert_eq!(low.admitted_seconds, Some(1230.0));
    let r = run_paths(&["reclaim-within-cohort", "until-10m.yaml"]);
    assert_pending_because(
        &r,
        "owner-mid-2",
        "preemption cannot free enough (0 candidate(s) allowed by the preemption policy)",
    );
}

#[test]
fn borrow_within_cohort_reclaims_lower_priority_below_its_threshold_while_borrowing() {
    // Kueue: pkg/scheduler/preemption/preemption_test.go, TestPreemption,
    // the "use BorrowWithinCohort; …" cases (see the scenario's header).
    let r = run("borrow-within-cohort");
    // one: be-big goes though in-one then borrows 9; be-small is not needed.
    assert_eq!(admitted_at(&r, "in-one"), Some(1.0));
    let big = workload(&r, "be-big");
    assert_eq!(big.evictions, 1);
    assert_eq!(big.history[1].by.as_deref(), Some("team/in-one"));
    assert_eq!(workload(&r, "be-small").evictions, 0);
    // two: std-two is above the threshold and in-two would borrow: no
    // preemption, in-two waits for std-two to finish.
    assert_eq!(workload(&r, "std-two").evictions, 0);
    assert_eq!(admitted_at(&r, "in-two"), Some(600.0));
    // three: in-three ends within its nominal quota, the threshold does not apply.
    assert_eq!(admitted_at(&r, "in-three"), Some(1.0));
    assert_eq!(workload(&r, "std-three").evictions, 1);
}

#[test]
fn hierarchical_reclaim_prefers_the_subtree_that_holds_the_request() {
    // Kueue: pkg/scheduler/preemption/preemption_hierarchical_test.go,
    // TestHierarchicalPreemptions, "prefer to preempt hierarchical
    // candidate" and "forced to preempt priority candidate".
    let r = run("hierarchical-reclaim");
    // first: lent (priority 1) goes by hierarchical reclaim, not the
    // lower-priority own-low of in-first's own queue.
    assert_eq!(admitted_at(&r, "in-first"), Some(1.0));
    let lent = workload(&r, "lent");
    assert_eq!(lent.evictions, 1);
    assert_eq!(lent.history[1].by.as_deref(), Some("team/in-first"));
    assert_eq!(workload(&r, "own-low").evictions, 0);
    // second: q-nominal-2 is within its quota (nominal-low, priority -10,
    // is spared); same-cohort is preempted while in-second borrows.
    assert_eq!(admitted_at(&r, "in-second"), Some(1.0));
    assert_eq!(workload(&r, "nominal-low").evictions, 0);
    let same = workload(&r, "same-cohort");
    assert_eq!(same.evictions, 1);
    assert_eq!(same.history[1].by.as_deref(), Some("team/in-second"));
}

// ------------------------------------------------------------ 6. fair sharing

#[test]
fn fair_sharing_alternates_admissions_between_equal_weight_borrowers() {
    // One GPU frees up a minute; a and b (nominal 0) borrow them in turn.
    let r = run_paths(&["fair-sharing/base.yaml", "fair-sharing/even.yaml"]);
    assert_eq!(admitted_at(&r, "a-0"), Some(60.0));
    assert_eq!(admitted_at(&r, "b-0"), Some(120.0));
    assert_eq!(admitted_at(&r, "a-1"), Some(180.0));
    assert_eq!(admitted_at(&r, "b-1"), Some(240.0));
    assert_eq!(admitted_at(&r, "a-2"), Some(300.0));
    assert_eq!(admitted_at(&r, "b-2"), Some(360.0));
    assert_eq!(r.by_cluster_queue["a"].admitted, 3);
    assert_eq!(r.by_cluster_queue["b"].admitted, 3);
}

#[test]
fn fair_sharing_weight_changes_the_split() {
    // a weighs 2: the share after admitting (borrowed × 1000 ÷ the cohort's
    // 6 GPUs, ÷ weight, unrounded as Kueue compares it) decides each slot:
    // a 83.3 < b 166.7; a 166.7 = b 166.7 (a is older in input order);
    // b 166.7 < a 250; a 250 < b 333.3; a 333.3 = b 333.3 (a again);
    // b 333.3 < a 416.7.
    let r = run_paths(&["fair-sharing/base.yaml", "fair-sharing/weighted.yaml"]);
    assert_eq!(admitted_at(&r, "a-0"), Some(60.0));
    assert_eq!(admitted_at(&r, "a-1"), Some(120.0));
    assert_eq!(admitted_at(&r, "b-0"), Some(180.0));
    assert_eq!(admitted_at(&r, "a-2"), Some(240.0));
    assert_eq!(admitted_at(&r, "a-3"), Some(300.0));
    assert_eq!(admitted_at(&r, "b-1"), Some(360.0));
    assert_eq!(r.by_cluster_queue["a"].admitted, 4);
    assert_eq!(r.by_cluster_queue["b"].admitted, 2);
    assert_eq!(r.summary.preemptions, 0);
}

// ------------------------------------------------------------ 6b. hierarchical fair sharing (Kueue)

/// `by` of each eviction in the workload's history, in order.
fn evicted_by<'r>(report: &'r Report, name: &str) -> Vec<&'r str> {
    workload(report, name)
        .history
        .iter()
        .filter(|h| h.event == "evicted")
        .map(|h| h.by.as_deref().unwrap_or("(nobody)"))
        .collect()
}

/// Asserts that exactly `victims` were preempted in the run, each once and
/// by `preemptor` (namespace/name), and that nobody else was evicted.
fn assert_preempted_exactly(report: &Report, preemptor: &str, victims: &[&str]) {
    for victim in victims {
        assert_eq!(evicted_by(report, victim), [preemptor], "{victim}");
    }
    for w in &report.workloads {
        if !victims.contains(&w.name.as_str()) {
            assert_eq!(w.evictions, 0, "{} should not be evicted: {w:?}", w.name);
        }
    }
}

#[test]
fn fair_sharing_tournament_picks_the_winner_of_each_cohort_level() {
    // Kueue: pkg/scheduler/scheduler_fs_test.go, TestScheduleForFairSharing,
    // "hierarchical fair sharing schedule workload which wins tournament".
    let r = run("fair-tournament");
    for name in ["d0", "e0", "g0"] {
        assert_eq!(admitted_at(&r, name), Some(0.0), "{name}");
        assert_eq!(workload(&r, name).evictions, 0, "{name}");
    }
    // d1 wins in B (d 400 < e 405) and at A (B 500 < C 505), though e1
    // would have left B lower; it takes the last 70 cpu.
    assert_eq!(admitted_at(&r, "d1"), Some(1.0));
    assert_pending_because(&r, "e1", "needs 61 cpu");
    assert_pending_because(&r, "f1", "needs 1 cpu");
    assert_pending_because(&r, "g1", "needs 1 cpu");
    assert_eq!(r.summary.preemptions, 0);
}

#[test]
fn fair_sharing_compares_zero_weight_borrowers_by_unweighted_share() {
    // Kueue: pkg/scheduler/scheduler_fs_test.go, TestScheduleForFairSharing,
    // "fair sharing two queues with weight 0 schedules workload which
    // borrows less".
    let r = run("fair-zero-weight-admission");
    assert_eq!(admitted_at(&r, "b0"), Some(0.0));
    // Both +Inf; c after c1 (500) < b after b1 (1000): c1 goes first
    // despite b1's priority 9001.
    assert_eq!(admitted_at(&r, "c1"), Some(1.0));
    assert_pending_because(&r, "b1", "needs 4 cpu");
    assert_eq!(r.summary.preemptions, 0);
}

#[test]
fn fair_sharing_prefers_the_head_whose_subtree_does_not_borrow() {
    // Kueue: pkg/scheduler/scheduler_fs_test.go, TestScheduleForFairSharing,
    // "with fair sharing: hierarchical nominal-first prefers non-borrowing
    // subtree" (FairSharingPrioritizeNonBorrowing).
    let r = run("fair-nominal-first-subtree");
    assert_eq!(admitted_at(&r, "c0"), Some(0.0));
    // wl-b stays within cq-b's nominal quota, but cohort-b would borrow
    // at root; cohort-a would not.
    assert_eq!(admitted_at(&r, "wl-a"), Some(1.0));
    assert_pending_because(&r, "wl-b", "needs 5 cpu");
    assert_eq!(r.summary.preemptions, 0);
}

#[test]
fn fair_sharing_preemption_walks_the_cohort_tree() {
    // Kueue: pkg/scheduler/preemption/preemption_fair_test.go,
    // TestFairPreemptions, "hierarchical preemption".
    let r = run("fair-hierarchical-preemption");
    assert_eq!(admitted_at(&r, "incoming"), Some(1.0));
    assert_preempted_exactly(&r, "team/incoming", &["b1", "b2", "c1", "c2", "e1"]);
    assert_eq!(r.summary.preemptions, 5);
}

#[test]
fn fair_sharing_preemption_compares_the_subtrees_under_the_common_ancestor() {
    // Kueue: pkg/scheduler/preemption/preemption_fair_test.go,
    // TestFairPreemptions, "deep preemption".
    let r = run("fair-deep-preemption");
    // A after a1 990 (weight 1.01) < B before 1010 (weight 0.99).
    assert_eq!(admitted_at(&r, "a1"), Some(1.0));
    assert_preempted_exactly(&r, "team/a1", &["b1"]);
    assert_eq!(r.summary.preemptions, 1);
}

#[test]
fn fair_sharing_preemption_a_heavier_queue_takes_more() {
    // Kueue: pkg/scheduler/preemption/preemption_fair_test.go,
    // TestFairPreemptions, "CQ with higher weight can preempt more".
    let r = run("fair-weight-preemption");
    // a (weight 2) after a-incoming: 111; b: 333, 222 after one, 111
    // after two — both pass LessThanOrEqualToFinalShare.
    assert_eq!(admitted_at(&r, "a-incoming"), Some(1.0));
    assert_preempted_exactly(&r, "team/a-incoming", &["b1", "b2"]);
    assert_eq!(r.summary.preemptions, 2);
}

#[test]
fn fair_sharing_preemption_with_zero_weights() {
    // Kueue: pkg/scheduler/preemption/preemption_fair_test.go,
    // TestFairPreemptions, "cohort with zero weight can reclaim nominal
    // quota", "can't preempt nominal from Cohort with 0 weight", "zero
    // weight borrowing preemptor cannot preempt from a borrowing CQ with a
    // non-zero weight" and "zero weight borrowing preemptor can preempt
    // from a borrowing CQ which also has zero weight".
    let r = run("fair-zero-weight-preemption");
    // first: zero-first stays within its quota after a1-first (share 0).
    assert_eq!(admitted_at(&r, "a1-first"), Some(1.0));
    assert_eq!(evicted_by(&r, "b1-first"), ["team/a1-first"]);
    // second: right-cohort-second does not borrow; nothing to take.
    assert_pending_because(&r, "left-1-second", "needs 1 cpu");
    assert_eq!(workload(&r, "right-1-second").evictions, 0);
    // third: a-third would borrow on weight 0 (+Inf) against a finite share.
    assert_pending_because(&r, "a-incoming-third", "needs 1 cpu");
    for name in ["a1-third", "b1-third", "b2-third"] {
        assert_eq!(workload(&r, name).evictions, 0, "{name}");
    }
    // fourth: both +Inf, unweighted 250 <= 500 after b1-fourth goes.
    assert_eq!(admitted_at(&r, "a-incoming-fourth"), Some(1.0));
    assert_eq!(evicted_by(&r, "b1-fourth"), ["team/a-incoming-fourth"]);
    // Nobody else in any tree.
    let evicted: Vec<&str> = r
        .workloads
        .iter()
        .filter(|w| w.evictions > 0)
        .map(|w| w.name.as_str())
        .collect();
    assert_eq!(evicted, ["b1-first", "b1-fourth"]);
    assert_eq!(r.summary.preemptions, 2);
}

#[test]
fn fair_sharing_preemptor_within_nominal_reclaims_despite_its_share() {
    // Kueue: pkg/scheduler/preemption/preemption_fair_test.go,
    // TestFairPreemptions, "nominal first: workload fitting within nominal
    // can preempt despite high aggregate DRS"
    // (FairSharingPreemptWithinNominal).
    let r = run("fair-nominal-first-preemption");
    assert_eq!(flavor_of(&r, "a-cheap1").as_deref(), Some("cheap"));
    assert_eq!(flavor_of(&r, "b-prem1").as_deref(), Some("premium"));
    // a after a-incoming: premium 3 of 3, but DRS 555 (5 cheap borrowed)
    // against b's 111.
    assert_eq!(admitted_at(&r, "a-incoming"), Some(1.0));
    assert_eq!(flavor_of(&r, "a-incoming").as_deref(), Some("premium"));
    assert_preempted_exactly(&r, "team/a-incoming", &["b-prem1"]);
    assert_eq!(r.summary.preemptions, 1);
}

#[test]
fn fair_sharing_preemption_strategies_choose_between_priority_and_final_share() {
    // Kueue: pkg/scheduler/preemption/preemption_fair_test.go,
    // TestFairPreemptions, "preempt lower priority first, even if big"
    // ([LessThanInitialShare]): a after a-incoming 111 < b's 333, so b's
    // first candidate, the lower priority, goes.
    let r = run_paths(&[
        "fair-strategies-priority/base.yaml",
        "fair-strategies-priority/initial-share.yaml",
    ]);
    assert_eq!(admitted_at(&r, "a-incoming"), Some(1.0));
    assert_preempted_exactly(&r, "team/a-incoming", &["b-low"]);
    assert_eq!(r.summary.preemptions, 1);
    // "preempt workload that doesn't transfer the imbalance, even if high
    // priority" ([LessThanOrEqualToFinalShare]): b without b-low would be
    // at 0 < 111; without b-high at 222 >= 111.
    let r = run_paths(&[
        "fair-strategies-priority/base.yaml",
        "fair-strategies-priority/final-share.yaml",
    ]);
    assert_eq!(admitted_at(&r, "a-incoming"), Some(1.0));
    assert_preempted_exactly(&r, "team/a-incoming", &["b-high"]);
    assert_eq!(r.summary.preemptions, 1);
    // Kueue's default pair, absent or written out: the first rule decides.
    for default in ["default.yaml", "both.yaml"] {
        let r = run_paths(&[
            "fair-strategies-priority/base.yaml",
            &format!("fair-strategies-priority/{default}"),
        ]);
        assert_eq!(admitted_at(&r, "a-incoming"), Some(1.0), "{default}");
        assert_preempted_exactly(&r, "team/a-incoming", &["b-high"]);
        assert_eq!(r.summary.preemptions, 1, "{default}");
    }
}

#[test]
fn fair_sharing_preemption_second_strategy_only_with_the_default_pair() {
    // Kueue: test/integration/singlecluster/scheduler/fairsharing/
    // fair_sharing_test.go, "workload of size 5 preempts using
    // LessThanInitialShare policy and admits" (Kueue's default
    // strategies): one p1 workload by LessThanOrEqualToFinalShare
    // (555 <= 666), the second by LessThanInitialShare (555 < 666).
    let evicted = |r: &Report| -> Vec<String> {
        r.workloads
            .iter()
            .filter(|w| w.evictions > 0)
            .map(|w| {
                assert_eq!(evicted_by(r, &w.name), ["core/p2-big"], "{}", w.name);
                w.name.clone()
            })
            .collect()
    };
    for strategies in ["default.yaml", "initial-share.yaml"] {
        let r = run_paths(&[
            "fair-strategies-second-pass/base.yaml",
            &format!("fair-strategies-second-pass/{strategies}"),
        ]);
        assert_eq!(admitted_at(&r, "p2-big"), Some(1.0), "{strategies}");
        // The most recently admitted go first: p1-4 and p1-3.
        assert_eq!(evicted(&r), ["p1-3", "p1-4"], "{strategies}");
        assert_eq!(r.summary.preemptions, 2, "{strategies}");
        // Neither can come back: cq-p1 after either (666) is above cq-p2
        // both before (555) and after losing p2-big (0).
        assert_pending_because(&r, "p1-4", "needs 2 cpu");
    }
    // [LessThanOrEqualToFinalShare] alone: one victim is not enough and
    // there is no second pass, so nobody is preempted.
    let r = run_paths(&[
        "fair-strategies-second-pass/base.yaml",
        "fair-strategies-second-pass/final-share.yaml",
    ]);
    assert_pending_because(&r, "p2-big", "needs 5 cpu");
    assert!(evicted(&r).is_empty());
    assert_eq!(r.summary.preemptions, 0);
}

#[test]
fn fair_sharing_preemption_strategies_kueue_does_not_accept_are_refused() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let paths = [
        root.join("fair-strategies-second-pass/base.yaml"),
        root.join("fair-strategies-second-pass/reversed.yaml"),
    ];
    let loaded = load_paths(&paths).unwrap_or_else(|e| panic!("{e}"));
    let errors = match scenario::build(loaded) {
        Ok(_) => panic!("expected the scenario to be refused"),
        Err(e) => e.errors,
    };
    assert!(
        errors.iter().any(|e| e.contains("reversed.yaml")
            && e.contains("Simulation reversed: spec.fairSharing.preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare] is not a list Kueue accepts; give one of [LessThanOrEqualToFinalShare], [LessThanInitialShare], [LessThanOrEqualToFinalShare, LessThanInitialShare]")),
        "{errors:?}"
    );
}

// ------------------------------------------------------------ 7–8. retry and reclaim

#[test]
fn retry_policy_backs_off_exponentially_after_reclaim_then_deactivates() {
    let r = run("retry-backoff");
    let w = workload(&r, "long");
    // Reclaimed every 10m of running; backoff 1m, then 2m; the third
    // eviction exceeds maxRetries 2.
    assert_eq!(
        events(&r, "long"),
        vec![
            ("admitted", 0.0),
            ("evicted", 600.0),
            ("requeued", 660.0),
            ("admitted", 660.0),
            ("evicted", 1260.0),
            ("requeued", 1380.0),
            ("admitted", 1380.0),
            ("evicted", 1980.0),
        ]
    );
    assert!(w.history[1].reason.contains("reclaimTimeout 10m"));
    assert!(
        w.history[7]
            .reason
            .contains("reclaimTimeout 10m; deactivated after 2 retries"),
        "{:?}",
        w.history[7]
    );
    assert_eq!(w.evictions, 3);
    assert_eq!(w.state, "pending");
    assert!(w.reason.contains("deactivated"), "{:?}", w.reason);
    assert!(w.reason.contains("maxRetries 2"), "{:?}", w.reason);
    assert_eq!(r.summary.pending_at_end, 1);
}

#[test]
fn reclaim_timeout_evicts_a_long_running_workload_and_lets_the_queue_move() {
    let r = run("reclaim-timeout");
    let long = workload(&r, "long");
    assert_eq!(long.history[1].event, "evicted");
    assert_eq!(long.history[1].at_seconds, 600.0);
    assert!(
        long.history[1]
            .reason
            .contains("admitted longer than ClusterQueue rr's reclaimTimeout 10m"),
        "{:?}",
        long.history[1].reason
    );
    assert_eq!(long.history[1].by, None);
    // Requeued at once, but behind the job that waited meanwhile.
    assert_eq!(long.history[2].event, "requeued");
    assert_eq!(
        events(&r, "waiting"),
        vec![("admitted", 600.0), ("finished", 900.0)]
    );
    assert_eq!(long.history[3].event, "admitted");
    assert_eq!(long.history[3].at_seconds, 900.0);
}

// ------------------------------------------------------------ 9. stop policies

#[test]
fn stop_policy_hold_admits_nothing_and_says_why() {
    let r = run("stop-policy");
    for name in ["held-1", "held-2"] {
        assert_pending_because(&r, name, "ClusterQueue held is stopped (stopPolicy Hold)");
    }
    assert_pending_because(
        &r,
        "via-stopped",
        "LocalQueue ml/stopped is stopped (stopPolicy Hold)",
    );
    // The stopped LocalQueue's workload does not block its StrictFIFO ClusterQueue.
    assert_eq!(admitted_at(&r, "via-open"), Some(10.0));
}

// ------------------------------------------------------------ 10. physical capacity

#[test]
fn fragmented_nodes_keep_a_pod_out_though_quota_allows_it() {
    let r = run("capacity-fragmentation");
    assert_eq!(admitted_at(&r, "half-1"), Some(0.0));
    assert_eq!(admitted_at(&r, "half-2"), Some(0.0));
    // 4 + 4 GPUs free on two nodes; one 8-GPU pod fits neither.
    assert_pending_because(
        &r,
        "whole",
        "a100: quota allows it but no a100 node has room for 1 pod(s) of nvidia.com/gpu 8 (2 nodes ready)",
    );
    assert_eq!(r.by_flavor["a100"].peak_nodes, 2);
    assert_eq!(r.summary.end_seconds, 1800.0);
}

#[test]
fn node_pool_autoscaling_adds_a_node_and_admits_after_the_provisioning_delay() {
    let r = run("capacity-autoscaling");
    // whole arrives at 10s; a third node is asked for then and is ready 3m later.
    assert_eq!(admitted_at(&r, "whole"), Some(190.0));
    assert_eq!(workload(&r, "whole").wait_seconds, 180.0);
    assert_eq!(r.by_flavor["a100"].peak_nodes, 3);
    assert_eq!(r.summary.finished, 3);
}

#[test]
fn a_pod_set_more_nodes_than_the_pool_can_ever_have_stays_pending_and_blocks_nobody() {
    let r = run("capacity-node-count");
    // Three 2-GPU pods, two fixed 2-GPU nodes: quota allows it, the pool never will.
    assert_pending_because(
        &r,
        "three-workers",
        "needs 6 nvidia.com/gpu (3 pod(s)), more than any flavor of ClusterQueue ml could ever give (quota, node size and count,",
    );
    // StrictFIFO, yet the job behind it is admitted on arrival.
    assert_eq!(admitted_at(&r, "two-workers"), Some(1.0));
    // With minCount 2 the same shape can run: it waits for the nodes instead.
    assert_eq!(admitted_at(&r, "elastic"), Some(1.0 + 600.0));
}

// ------------------------------------------------------------ 11. node constraints

#[test]
fn node_selectors_affinity_and_taints_restrict_flavors() {
    let r = run("node-constraints");
    // Listed h100, v100, a100. h100's taint is not tolerated; v100's is, by the flavor.
    assert_eq!(gpu_flavor(&r, "plain"), "v100");
    assert_eq!(gpu_flavor(&r, "wants-a100"), "a100");
    // The pod's own toleration opens h100, the first listed.
    assert_eq!(gpu_flavor(&r, "tolerates-h100"), "h100");
    assert_eq!(gpu_flavor(&r, "affinity-h100"), "h100");
    // Selecting h100 without tolerating its taint leaves no flavor at all.
    assert_pending_because(
        &r,
        "h100-intolerant",
        "more than any flavor of ClusterQueue ml could ever give (quota, node size and count, selectors and taints considered)",
    );
}

// ------------------------------------------------------------ 12. priority and LocalQueue bounds

#[test]
fn priority_comes_from_class_then_local_queue_then_namespace_then_zero() {
    let r = run("priority-and-bounds");
    assert_eq!(workload(&r, "by-class").priority, Some(1000));
    assert_eq!(workload(&r, "by-queue").priority, Some(200));
    assert_eq!(workload(&r, "by-namespace").priority, Some(120));
    assert_eq!(workload(&r, "by-default").priority, Some(0));
}

#[test]
fn local_queue_resource_quotas_default_fills_requests_and_bounds_reject() {
    let r = run("priority-and-bounds");
    // The default of 2 GPUs fills the absent request: a GPU flavor is assigned,
    // and the second defaulted job must wait (3 GPUs of quota).
    assert_eq!(gpu_flavor(&r, "defaulted-1"), "a100");
    assert_eq!(admitted_at(&r, "defaulted-1"), Some(1.0));
    assert_eq!(admitted_at(&r, "defaulted-2"), Some(601.0));
    let r = run_paths(&["priority-and-bounds", "until-10m.yaml"]);
    assert_pending_because(
        &r,
        "defaulted-2",
        "needs 2 nvidia.com/gpu in a100; ClusterQueue ml has 1 free",
    );
    let big = workload(&r, "too-big");
    assert_eq!(big.state, "rejected");
    assert!(
        big.reason
            .contains("LocalQueue plain/bounded allows between 1 and 4"),
        "{:?}",
        big.reason
    );
    assert_eq!(events(&r, "too-big"), vec![("rejected", 3.0)]);
    assert_eq!(r.summary.rejected, 1);
}

// ------------------------------------------------------------ 13–14. inadmissible workloads block nobody

#[test]
fn workload_from_unselected_namespace_stays_pending_and_blocks_nobody() {
    let r = run("namespace-selector");
    assert_pending_because(
        &r,
        "intruder-job",
        "namespace intruder is not selected by ClusterQueue finance's namespaceSelector",
    );
    // StrictFIFO, yet the finance job behind it is admitted on arrival.
    assert_eq!(admitted_at(&r, "finance-job"), Some(10.0));
}

#[test]
fn uncovered_or_oversized_requests_stay_pending_and_block_nobody() {
    let r = run("never-fits");
    assert_pending_because(
        &r,
        "wants-tpu",
        "requests google.com/tpu, which ClusterQueue gpu-only does not cover",
    );
    assert_pending_because(
        &r,
        "too-big",
        "needs 16 nvidia.com/gpu (1 pod(s)), more than any flavor of ClusterQueue gpu-only could ever give",
    );
    assert_eq!(admitted_at(&r, "fits"), Some(2.0));
    assert_eq!(r.summary.pending_at_end, 2);
}

// ------------------------------------------------------------ 15. until

#[test]
fn until_stops_the_run_and_reports_that_moment() {
    let r = run("until");
    assert_eq!(r.summary.end_seconds, 3600.0);
    assert_eq!(workload(&r, "short").state, "finished");
    assert_eq!(workload(&r, "short").finished_seconds, Some(300.0));
    let long = workload(&r, "long");
    assert_eq!(long.state, "admitted");
    assert_eq!(long.finished_seconds, None);
    assert_pending_because(
        &r,
        "waiting",
        "needs 8 nvidia.com/gpu in a100; ClusterQueue ml has 4 free",
    );
    assert_eq!(workload(&r, "waiting").wait_seconds, 3540.0);
    assert_pending_because(
        &r,
        "late",
        "arrives at 10800s, after the end of the simulation",
    );
    assert_eq!(
        (
            r.summary.workloads,
            r.summary.admitted,
            r.summary.running_at_end,
            r.summary.finished,
            r.summary.pending_at_end
        ),
        // Admitted at some point: `short` (finished) and `long` (running).
        (4, 2, 1, 1, 2)
    );
}

// ------------------------------------------------------------ 16. Kubeflow jobs

#[test]
fn kubeflow_jobs_get_replica_type_pod_set_names() {
    let r = run("kubeflow-jobs");
    let flavors = |name: &str| -> Vec<(String, Vec<String>)> {
        workload(&r, name)
            .flavors
            .iter()
            .map(|(ps, m)| (ps.clone(), m.keys().cloned().collect()))
            .collect()
    };
    let both = vec!["cpu".to_string(), "nvidia.com/gpu".to_string()];
    let bert = workload(&r, "bert");
    assert_eq!(bert.kind, "PyTorchJob");
    assert_eq!(bert.admitted_seconds, Some(0.0));
    assert_eq!(
        flavors("bert"),
        vec![
            ("master".to_string(), both.clone()),
            ("worker".to_string(), both.clone())
        ]
    );
    assert_eq!(bert.flavors["worker"]["nvidia.com/gpu"], "a100");
    let mpi = workload(&r, "allreduce");
    assert_eq!(mpi.kind, "MPIJob");
    assert_eq!(mpi.admitted_seconds, Some(10.0));
    assert_eq!(
        flavors("allreduce"),
        vec![
            ("launcher".to_string(), vec!["cpu".to_string()]),
            ("worker".to_string(), both)
        ]
    );
}

// ------------------------------------------------------------ reasons and run ends

#[test]
fn workloads_behind_a_blocked_strict_fifo_head_say_whom_they_wait_for() {
    let r = run_paths(&["queueing-strategy", "until-1m.yaml"]);
    assert_eq!(workload(&r, "strict-small").state, "pending");
    assert_eq!(
        workload(&r, "strict-small").reason,
        "waiting behind ml/strict-big, the head of StrictFIFO ClusterQueue strict"
    );
    assert!(workload(&r, "strict-big")
        .reason
        .starts_with("pod set main: needs 8 nvidia.com/gpu in a100"));
}

#[test]
fn adaptive_weights_do_not_keep_a_finished_run_alive() {
    let r = run("adaptive-weights");
    assert_eq!(r.summary.finished, 2);
    assert_eq!(admitted_at(&r, "second"), Some(600.0));
    assert_eq!(r.summary.end_seconds, 1200.0);
}

#[test]
fn fair_sharing_preemption_stops_when_shares_are_even() {
    let r = run("fair-sharing-preemption");
    let running = |prefix: &str| {
        r.workloads
            .iter()
            .filter(|w| w.name.starts_with(prefix) && w.state == "admitted")
            .count()
    };
    assert_eq!(running("a-"), 6, "a keeps 6 of its 12");
    assert_eq!(running("b-"), 6, "b gets its own 4 and 2 borrowed");
    assert_eq!(r.summary.preemptions, 6);
    let waiting: Vec<&str> = r
        .workloads
        .iter()
        .filter(|w| w.name.starts_with("b-") && w.state == "pending")
        .map(|w| w.reason.as_str())
        .collect();
    assert_eq!(waiting.len(), 2);
    assert!(
        waiting
            .iter()
            .all(|reason| reason.contains("preemption cannot free enough")),
        "{waiting:?}"
    );
    // The most recently admitted of a's workloads go first (all admitted at 0s: the last ones).
    assert_eq!(workload(&r, "a-11").evictions, 1);
    assert_eq!(workload(&r, "a-00").evictions, 0);
}

#[test]
fn partial_admission_runs_with_the_most_pods_that_fit_down_to_min_count() {
    let r = run("partial-admission");
    let elastic = workload(&r, "elastic");
    assert_eq!(elastic.admitted_seconds, Some(10.0));
    assert_eq!(
        elastic.history[0].reason,
        "ClusterQueue ml, partially admitted (minCount): worker 3 of 6 pods"
    );
    // The 3 GPUs it took are gone: the rigid 2-GPU job waits for a finish.
    assert_eq!(admitted_at(&r, "rigid"), Some(10.0 + 1800.0));
}

#[test]
fn partial_admission_tries_the_whole_workload_with_preemption_first() {
    // Kueue: pkg/scheduler/scheduler_test.go, TestSchedule, "partial
    // admission single variable pod set, preempt first" and "…, preempt
    // with partial admission".
    let r = run("partial-admission-preemption");
    let first = workload(&r, "new-first");
    assert_eq!(first.admitted_seconds, Some(1.0));
    assert!(
        !first.history[0].reason.contains("partially"),
        "{:?}",
        first.history[0].reason
    );
    assert_eq!(workload(&r, "old-first").evictions, 1);
    let second = workload(&r, "new-second");
    assert_eq!(second.admitted_seconds, Some(1.0));
    assert!(
        second.history[0]
            .reason
            .ends_with("partially admitted (minCount): one 20 of 30 pods"),
        "{:?}",
        second.history[0].reason
    );
    assert_eq!(workload(&r, "old-second").evictions, 1);
}

#[test]
fn a_head_with_nothing_to_preempt_holds_the_quota_it_could_use_unless_its_queue_can_always_reclaim()
{
    // Kueue: pkg/scheduler/scheduler_test.go, TestSchedule, "capacity
    // blocked when lending clusterqueue not guaranteed to reclaim
    // (ReclaimWithinCohort=LowerPriority)" and "capacity not blocked when
    // lending clusterqueue can reclaim (ReclaimWithinCohort=Any)".
    let r = run("unreclaimable-reservation");
    // blocked: b1 cannot borrow the GPU a2 waits for; a2 goes when a1 is
    // done, b1 after a2.
    assert_eq!(admitted_at(&r, "a2-blocked"), Some(600.0));
    assert_eq!(admitted_at(&r, "b1-blocked"), Some(4200.0));
    assert_eq!(workload(&r, "b1-blocked").evictions, 0);
    // open: b1 borrows at once and is reclaimed when a1 is done.
    let b1 = workload(&r, "b1-open");
    assert_eq!(b1.history[0].at_seconds, 2.0);
    assert_eq!(b1.evictions, 1);
    assert_eq!(admitted_at(&r, "a2-open"), Some(600.0));
}

fn flavor_of(r: &Report, name: &str) -> Option<String> {
    workload(r, name)
        .flavors
        .get("main")
        .and_then(|m| m.get("cpu"))
        .cloned()
}

#[test]
fn flavor_preference_chooses_between_preempting_and_borrowing_as_kueue() {
    // Kueue: flavorassigner_test.go, TestIsPreferred and TestHierarchical
    // (see the scenario's header).
    let r = run("flavor-preference");
    assert_eq!(admitted_at(&r, "high-pob"), Some(1.0));
    assert_eq!(flavor_of(&r, "high-pob").as_deref(), Some("one"));
    assert_eq!(workload(&r, "low-pob").evictions, 1);
    assert_eq!(admitted_at(&r, "high-bop"), Some(1.0));
    assert_eq!(flavor_of(&r, "high-bop").as_deref(), Some("two"));
    assert_eq!(workload(&r, "low-bop").evictions, 0);
    assert_eq!(admitted_at(&r, "newcomer-none"), Some(1.0));
    assert_eq!(flavor_of(&r, "newcomer-none").as_deref(), Some("two"));
    assert_eq!(workload(&r, "keep-none").evictions, 0);
}

#[test]
fn a_flavor_preference_needs_both_policies_try_next_flavor() {
    let yaml = CAPS_QUEUES.replace(
        "spec:\n  resourceGroups:",
        "spec:\n  flavorFungibility: {preference: PreemptionOverBorrowing}\n  resourceGroups:",
    );
    let errors = build_errors(&yaml);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("spec.flavorFungibility.preference")
                && e.contains("whenCanBorrow and whenCanPreempt are both TryNextFlavor")),
        "{errors:?}"
    );
}

// ------------------------------------------------------------ numbers with limits

/// The scenario's build errors (it must not build).
fn build_errors(yaml: &str) -> Vec<String> {
    let loaded = arbiter_core::model::load::load_str(yaml, std::path::Path::new("caps.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    match scenario::build(loaded) {
        Ok(_) => panic!("expected the scenario to be refused"),
        Err(e) => e.errors,
    }
}

const CAPS_QUEUES: &str = "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: f}\n---\napiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: \"8\"}]}]\n---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns}\nspec: {clusterQueue: cq}\n";

#[test]
fn a_generator_over_the_workload_cap_is_refused_before_it_generates() {
    // `count: 100000000` took 10 GB.
    let errors = build_errors(&format!(
        "{CAPS_QUEUES}---\napiVersion: sim.arbiter.dev/v1alpha1\nkind: WorkloadGenerator\nmetadata: {{name: flood}}\nspec: {{count: 100000000, namespace: ns, queueName: lq, podSets: [{{name: main, count: 1, requests: {{cpu: \"1\"}}}}]}}\n"
    ));
    assert!(
        errors.iter().any(|e| e.contains("WorkloadGenerator flood: spec.count: is 100000000, more than the 1000000 workloads a generator may make")),
        "{errors:?}"
    );
}

#[test]
fn a_node_pool_over_the_node_cap_is_refused() {
    // 200,000 nodes took 38 s to build.
    let errors = build_errors(&format!(
        "{CAPS_QUEUES}---\napiVersion: sim.arbiter.dev/v1alpha1\nkind: Simulation\nmetadata: {{name: s}}\nspec:\n  nodePools: [{{flavor: f, nodes: 200000, allocatable: {{cpu: \"8\"}}}}]\n"
    ));
    assert!(
        errors.iter().any(|e| e.contains("spec.nodePools[0]: nodes 200000, maxNodes 200000: more than the 10000 nodes a pool may have")),
        "{errors:?}"
    );
}

#[test]
fn a_generator_naming_a_missing_local_queue_is_a_warning_strict_counts() {
    let loaded = arbiter_core::model::load::load_str(
        &format!(
            "{CAPS_QUEUES}---\napiVersion: sim.arbiter.dev/v1alpha1\nkind: WorkloadGenerator\nmetadata: {{name: lost}}\nspec: {{count: 3, namespace: ns, queueName: nope, runtime: 1s, podSets: [{{name: main, count: 1, requests: {{cpu: \"1\"}}}}]}}\n"
        ),
        std::path::Path::new("caps.yaml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let built = scenario::build(loaded).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(
        built.warnings.iter().any(|w| w
            .contains("WorkloadGenerator lost: spec.queueName: LocalQueue ns/nope does not exist")),
        "{:?}",
        built.warnings
    );
}

// ------------------------------------------------------------ the article's PipelineRun

/// The seed article's `kubeflow.org/v1 PipelineRun` is read through the
/// JobIntegration of `examples/integrations/article-pipelinerun.yaml`
/// (told once), unless the scenario defines its own for the kind.
#[test]
fn the_articles_pipeline_run_is_read_by_its_integration_unless_the_scenario_has_one() {
    let queues = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: a100}\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors: [{name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}]\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: ai-queue, namespace: default}\nspec: {clusterQueue: cq}\n";
    let run = |name: &str, gpus: &str| {
        format!("---\napiVersion: kubeflow.org/v1\nkind: PipelineRun\nmetadata: {{name: {name}, labels: {{kueue.x-k8s.io/queue-name: ai-queue}}}}\nspec: {{runtimeConfig: {{parameters: {{gpu-count: \"{gpus}\"}}}}}}\n")
    };
    let build = |yaml: &str| {
        let loaded = arbiter_core::model::load::load_str(yaml, std::path::Path::new("runs.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        scenario::build(loaded).unwrap_or_else(|e| panic!("{e}"))
    };
    let gpus = |s: &scenario::Scenario| -> Vec<String> {
        s.jobs
            .iter()
            .map(|j| j.info.pod_sets[0].requests["nvidia.com/gpu"].to_string())
            .collect()
    };

    let s = build(&format!("{queues}{}{}", run("a", "2"), run("b", "4")));
    assert_eq!(gpus(&s), ["2", "4"]);
    let told: Vec<&String> = s
        .warnings
        .iter()
        .filter(|w| w.contains("PipelineRun is the article's kind"))
        .collect();
    assert_eq!(told.len(), 1, "{:?}", s.warnings);
    assert!(
        told[0].starts_with("runs.yaml (document 4): "),
        "{}",
        told[0]
    );

    // The scenario's own integration: every PipelineRun asks for 1 GPU, nothing told.
    let own = "---\napiVersion: arbiter.dev/v1alpha1\nkind: JobIntegration\nmetadata: {name: mine}\nspec:\n  jobApiVersion: kubeflow.org/v1\n  jobKind: PipelineRun\n  podSets: \"[{'name': 'run', 'count': 1, 'requests': {'nvidia.com/gpu': '1'}}]\"\n  hold: {path: spec.suspend, held: true, released: false}\n";
    let s = build(&format!("{queues}{own}{}", run("a", "2")));
    assert_eq!(gpus(&s), ["1"]);
    assert!(
        !s.warnings.iter().any(|w| w.contains("the article's kind")),
        "{:?}",
        s.warnings
    );
}

#[test]
fn wait_for_pods_ready_blocks_admission_and_evicts_a_gang_that_never_starts() {
    let r = run("wait-for-pods-ready");
    // `next` fits the quota at once but waits for `slow`'s pods (2m).
    assert_eq!(
        events(&r, "slow"),
        vec![("admitted", 0.0), ("finished", 720.0)]
    );
    assert_eq!(
        events(&r, "next"),
        vec![("admitted", 120.0), ("finished", 420.0)]
    );
    // `stuck` is evicted at each 5m timeout, requeued after 60s once, then deactivated.
    assert_eq!(
        events(&r, "stuck"),
        vec![
            ("admitted", 1800.0),
            ("evicted", 2100.0),
            ("requeued", 2160.0),
            ("admitted", 2160.0),
            ("evicted", 2460.0),
        ]
    );
    let stuck = workload(&r, "stuck");
    assert!(
        stuck.history[1]
            .reason
            .contains("waitForPodsReady.timeout 5m"),
        "{:?}",
        stuck.history[1]
    );
    assert_eq!(stuck.state, "pending");
    assert!(
        stuck.reason.contains("backoffLimitCount 1"),
        "{:?}",
        stuck.reason
    );
}

// ------------------------------------------------------------ topology-aware placement

/// The nodes of `name`'s placement, `<flavor>-<index>` once per pod, sorted.
fn nodes_of(report: &Report, name: &str) -> Vec<String> {
    let mut nodes: Vec<String> = workload(report, name)
        .placement
        .iter()
        .flat_map(|p| std::iter::repeat_n(p.node.clone(), p.pods as usize))
        .collect();
    nodes.sort();
    nodes
}

fn nodes(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[test]
fn a_required_topology_level_places_the_pod_set_in_one_domain_best_fit() {
    let r = run("tas-required");
    assert_eq!(nodes_of(&r, "rack-3"), nodes(&["tas-1", "tas-2", "tas-3"]));
    // The only rack holding 3 pods is busy: it waits for rack-3 to finish.
    assert_eq!(admitted_at(&r, "rack-3-again"), Some(300.0));
    assert_eq!(
        nodes_of(&r, "rack-3-again"),
        nodes(&["tas-1", "tas-2", "tas-3"])
    );
    assert_eq!(nodes_of(&r, "rack-2"), nodes(&["tas-5", "tas-5"]));
    assert_eq!(nodes_of(&r, "rack-1"), nodes(&["tas-0"]));
    assert_eq!(
        nodes_of(&r, "block-4"),
        nodes(&["tas-0", "tas-1", "tas-2", "tas-3"])
    );
    assert_eq!(nodes_of(&r, "block-1"), nodes(&["tas-4"]));
    // The pods block-4 ran in block b1 fit in no rack.
    assert_pending_because(
        &r,
        "rack-4",
        "tas: topology default allows to fit only 3 out of 4 pod(s) in one cloud.com/topology-rack domain",
    );
    assert_pending_because(
        &r,
        "block-5",
        "tas: topology default allows to fit only 4 out of 5 pod(s) in one cloud.com/topology-block domain",
    );
}

#[test]
fn a_topology_request_takes_only_a_flavor_whose_topology_has_the_level() {
    let r = run("tas-flavors");
    assert_eq!(
        nodes_of(&r, "custom-level"),
        nodes(&["tas-custom-flavor-0"])
    );
    assert_pending_because(
        &r,
        "missing-level",
        "tas-default: Topology tas-single-level has no level cloud.com/non-existing",
    );
    assert_pending_because(
        &r,
        "missing-level",
        "plain: topology level cloud.com/non-existing requested, but the flavor names no Topology",
    );
    assert_pending_because(
        &r,
        "two-pods",
        "tas-default: topology tas-single-level allows to fit only 1 out of 2 pod(s) in one kubernetes.io/hostname domain",
    );
    assert_eq!(nodes_of(&r, "one-pod"), nodes(&["tas-default-0"]));
    // Preferred hostname: no host holds 3 pods, their rack does.
    assert_eq!(
        nodes_of(&r, "preferred"),
        nodes(&["tas-racks-0", "tas-racks-0", "tas-racks-1"])
    );
}

#[test]
fn a_bad_topology_is_an_error_naming_the_object_and_the_field() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let loaded = load_paths(&[root.join("tas-bad-topology")]).unwrap_or_else(|e| panic!("{e}"));
    let error = match scenario::build(loaded) {
        Ok(_) => panic!("a bad topology was accepted"),
        Err(e) => e.to_string(),
    };
    for needle in [
        "(document 2): Topology no-levels: spec.levels: is empty",
        "(document 3): Topology twice: spec.levels[1].nodeLabel: cloud.com/topology-rack is also level 0",
        "(document 4): ResourceFlavor on-twice: spec.topologyName: Topology twice is invalid",
        "(document 5): ResourceFlavor on-nothing: spec.topologyName: Topology nowhere does not exist",
    ] {
        assert!(error.contains(needle), "the error should say {needle:?}: {error}");
    }
}

#[test]
fn a_cycle_of_preemptions_is_held_until_the_cluster_changes() {
    // Mid-cycle: w25 would take w15's quota by fair sharing once more,
    // after the same preemption was undone with nothing else changing.
    let r = run_until(&["preemption-cycle"], Some(Millis::from_secs(800)));
    assert_pending_because(
        &r,
        "w25",
        "preempting ns1/w15 again would repeat a preemption it made since anything last arrived, finished or changed",
    );
    // To the end: it settles, and w15 runs to completion, where Kueue's
    // rules alone preempt it every second for the three hours (9,746 times).
    let r = run("preemption-cycle");
    let w15 = workload(&r, "w15");
    assert_eq!(w15.state, "finished", "{w15:?}");
    let most = r.workloads.iter().map(|w| w.evictions).max().unwrap_or(0);
    assert!(
        most < 30,
        "a workload was evicted {most} times: the cycle goes on"
    );
}
