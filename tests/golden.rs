//! The seed example's report, pinned: `examples/seed/` (with `policies/`
//! in force) run through the library exactly as
//! `arbiter simulate --reproducible --report` does must
//! give `tests/golden/seed-report.json` byte for byte. A change in scheduling
//! behaviour shows up here as a diff to review; when it is intended, rewrite
//! the file with `ARBITER_BLESS=1 cargo test --test golden`.

use std::path::{Path, PathBuf};

use arbiter_policy::sources::{self, PolicyChoice};
use arbiter_sim::policies;
use arbiter_sim::scenario;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The report as `--reproducible --report` writes it.
fn seed_report() -> String {
    // Relative, as a user types it (cargo runs tests in the package root):
    // the report names the bundle's source, which must not depend on the checkout.
    assert_eq!(std::env::current_dir().ok().as_deref(), Some(root()));
    let loaded = arbiter_sim::files::load_paths(&[PathBuf::from("examples/seed")])
        .unwrap_or_else(|e| panic!("examples/seed does not load: {e}"));
    let scenario =
        scenario::build(loaded).unwrap_or_else(|e| panic!("examples/seed does not build: {e}"));
    let mut engine = sources::engine(&scenario.policies, &PolicyChoice::default())
        .unwrap_or_else(|e| panic!("the seed's policies do not load: {e}"));
    assert!(
        engine.is_some(),
        "examples/seed names policies/ in spec.policies"
    );
    let (report, _) = policies::run(&scenario, engine.as_mut(), true, &mut |_| {});
    let json = serde_json::to_string_pretty(&report).unwrap_or_else(|e| panic!("{e}"));
    format!("{json}\n")
}

fn first_difference(expected: &str, actual: &str) -> String {
    let line = expected
        .lines()
        .zip(actual.lines())
        .position(|(e, a)| e != a)
        .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    format!(
        "first difference at line {}:\n  golden: {}\n  now:    {}",
        line + 1,
        expected.lines().nth(line).unwrap_or("<end of file>"),
        actual.lines().nth(line).unwrap_or("<end of file>")
    )
}

#[test]
fn seed_report_matches_golden_file() {
    let golden: PathBuf = root().join("tests/golden/seed-report.json");
    let actual = seed_report();
    if std::env::var_os("ARBITER_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(root().join("tests/golden")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&golden, &actual)
            .unwrap_or_else(|e| panic!("writing {}: {e}", golden.display()));
        return;
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; create it with ARBITER_BLESS=1 cargo test --test golden",
            golden.display()
        )
    });
    assert!(
        expected == actual,
        "the seed report changed ({}); if intended, run ARBITER_BLESS=1 cargo test --test golden and review the diff",
        first_difference(&expected, &actual)
    );
}

#[test]
fn seed_report_is_byte_identical_across_runs() {
    let first = seed_report();
    let second = seed_report();
    assert!(
        first == second,
        "two runs differ: {}",
        first_difference(&first, &second)
    );
}
