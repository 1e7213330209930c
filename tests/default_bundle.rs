//! `policies/`, the default bundle: it loads (its own tests pass), and the
//! shortest-first plugin freshly built from `policies/plugins/` by
//! `scripts/build-plugins.sh` passes the same tests as the committed module.

use std::path::{Path, PathBuf};

use arbiter_policy::bundle::{self, LoadOptions};
use arbiter_policy::wasm::Runtime;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn default_bundle_loads_and_its_tests_pass() {
    let runtime = Runtime::new().unwrap();
    let b = bundle::load_path(&root().join("policies"), &runtime, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("policies/ does not load: {e}"));
    assert_eq!(b.name, "platform-default");
    assert!(b.policies.iter().any(|p| p.language() == "wasm"));
    assert!(b.policies.iter().any(|p| p.language() == "cel"));
    assert!(b.tests.len() >= 10);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn freshly_built_plugin_passes_the_bundle_tests() {
    let fresh: PathBuf =
        root().join("target/plugins/wasm32-unknown-unknown/release/shortest_first.wasm");
    if !fresh.exists() {
        // scripts/test.sh always builds it first; a bare `cargo test` may not have.
        assert!(
            std::env::var_os("ARBITER_REQUIRE_PLUGINS").is_none(),
            "{} is missing; run scripts/build-plugins.sh",
            fresh.display()
        );
        eprintln!("skipped: {} not built", fresh.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root().join("policies"), dir.path());
    std::fs::copy(&fresh, dir.path().join("plugins/shortest-first.wasm")).unwrap();
    let runtime = Runtime::new().unwrap();
    bundle::load_path(dir.path(), &runtime, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("the freshly built plugin fails the bundle: {e}"));
}

/// The engine builds only the context views some policy reads: what each of
/// the default bundle's policies reads, as the engine sees it.
#[test]
fn each_policy_reads_only_the_views_it_names() {
    use arbiter_policy::view::Reads;
    let runtime = Runtime::new().expect("runtime starts");
    let bundle = bundle::load_path(&root().join("policies"), &runtime, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let reads = |name: &str| bundle.policy(name).expect("policy exists").reads();
    let none = Reads::default();
    assert_eq!(
        reads("multifactor"),
        Reads {
            queue: true,
            ..none
        }
    );
    assert_eq!(
        reads("adaptive-fair-share"),
        Reads {
            cluster_queue: true,
            ..none
        }
    );
    // WASM, but it declares it reads only workloads.estimate.
    assert_eq!(reads("shortest-first"), none);
    for name in [
        "premium-flavor-order",
        "a100-80gb-production-only",
        "dev-gpu-cap",
    ] {
        assert_eq!(reads(name), none, "{name}");
    }
}
