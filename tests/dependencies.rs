//! The crate graph keeps the architecture (docs/design.md §1): the scheduler core
//! (`arbiter-core`) must never reach an async runtime, a WebAssembly engine,
//! a Kubernetes client, an HTTP stack or a file watcher. Read from
//! `cargo tree`, so a new dependency that drags one in fails here, with the
//! path that brought it.

use std::process::Command;

/// Crates the core must not depend on, by name or name prefix (`wasmtime-*`).
const FORBIDDEN: &[&str] = &["tokio", "wasmtime", "kube-client", "hyper", "notify"];

/// Every crate in `package`'s normal and build dependency tree, one per line.
fn tree(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--locked", "--offline", "-p", package])
        .args(["-e", "normal,build", "--prefix", "none", "--format", "{p}"])
        .output()
        .unwrap_or_else(|e| panic!("running cargo tree: {e}"));
    assert!(
        output.status.success(),
        "cargo tree -p {package} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| line.split_whitespace().next().unwrap_or("").to_string())
        .filter(|name| !name.is_empty())
        .collect()
}

fn forbidden_in(package: &str) -> Vec<String> {
    let mut found: Vec<String> = tree(package)
        .into_iter()
        .filter(|name| {
            FORBIDDEN
                .iter()
                .any(|f| name == f || name.starts_with(&format!("{f}-")))
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn the_core_reaches_no_runtime_engine_client_or_watcher() {
    let found = forbidden_in("arbiter-core");
    assert!(
        found.is_empty(),
        "arbiter-core depends on {found:?}; the core must stay pure (see `cargo tree -p arbiter-core -i <crate>` for the path)"
    );
}

#[test]
fn the_check_sees_what_the_policy_crate_uses() {
    // The same check on a crate that does use them: it must find them, or
    // the test above proves nothing.
    let found = forbidden_in("arbiter-policy");
    for expected in ["wasmtime", "notify"] {
        assert!(
            found.iter().any(|f| f == expected),
            "cargo tree of arbiter-policy shows {found:?}, not {expected}"
        );
    }
}
