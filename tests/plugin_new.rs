//! `arbiter plugin new` as a user runs it: for each language, the scaffold
//! — made inside a directory that is itself a Cargo workspace, so one that
//! let itself be taken in as a member would fail — builds with its own
//! `build.sh` and passes `arbiter policy test` straight away, and its
//! bundle's tests fail before the module is built (so they test the
//! module). A language whose toolchain is missing — for AssemblyScript
//! and Zig, whose SDK wrapper (`asc.sh`, `zig.sh`) cannot install its
//! pinned compiler — is skipped with the reason printed, unless
//! `ARBITER_REQUIRE_PLUGINS=1` (`scripts/test.sh` sets it). Bad arguments — an unknown language, an existing path, a bad
//! name or tenant, no SDK — exit 2 with a message saying what to change
//! and create nothing; a directory that cannot be written exits 1 naming
//! it.
//!
//! The Rust scaffolds share one Cargo target directory,
//! `target/plugins/scaffold` (through `CARGO_TARGET_DIR`, which
//! `build.sh` honours), so the SDK's dependencies are compiled for
//! wasm32 once, not on every run.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

use assert_cmd::Command;
use predicates::prelude::*;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn arbiter() -> Command {
    let mut cmd = Command::cargo_bin("arbiter").unwrap_or_else(|e| panic!("arbiter binary: {e}"));
    cmd.current_dir(root());
    cmd
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `program args` and returns its output, or `None` when it cannot start.
fn run(program: &str, args: &[&str]) -> Option<Output> {
    std::process::Command::new(program)
        .args(args)
        .env("GOTOOLCHAIN", "local")
        .output()
        .ok()
}

fn succeeds(program: &str, args: &[&str]) -> bool {
    run(program, args).is_some_and(|out| out.status.success())
}

/// Why `language`'s scaffold cannot be built here, if it cannot.
fn missing_toolchain(language: &str) -> Option<String> {
    match language {
        "rust" => {
            let sysroot = run("rustc", &["--print", "sysroot"])
                .filter(|out| out.status.success())
                .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
            match sysroot {
                None => Some("rustc not found".to_string()),
                Some(sysroot)
                    if !sysroot
                        .join("lib/rustlib/wasm32-unknown-unknown")
                        .is_dir() =>
                {
                    Some(
                        "the wasm32-unknown-unknown target is not installed (rustup target add wasm32-unknown-unknown)"
                            .to_string(),
                    )
                }
                Some(_) => None,
            }
        }
        "go" => match run("go", &["env", "GOVERSION"]).filter(|out| out.status.success()) {
            None => Some("go not found (Go >= 1.26 is needed)".to_string()),
            Some(out) => {
                let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
                let minor = version
                    .strip_prefix("go1.")
                    .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|minor| minor.parse::<u32>().ok());
                if minor.is_some_and(|minor| minor >= 26) {
                    None
                } else {
                    Some(format!("{version} is older than Go 1.26"))
                }
            }
        },
        "c" => ["clang", "wasm-ld"]
            .into_iter()
            .find(|tool| !succeeds(tool, &["--version"]))
            .map(|tool| format!("{tool} not found (Debian: apt-get install clang lld)")),
        // The SDK's wrapper installs its pinned compiler when it is
        // missing, as build.sh would; what stops it is the reason.
        "assemblyscript" => sdk_tool_fails("plugin-sdk/assemblyscript/asc.sh", "--version"),
        "zig" => sdk_tool_fails("plugin-sdk/zig/zig.sh", "version"),
        other => Some(format!("no toolchain check for {other}")),
    }
}

/// Why the SDK's compiler wrapper `script` (relative to the checkout)
/// cannot run `arg`, if it cannot: the last line it printed.
fn sdk_tool_fails(script: &str, arg: &str) -> Option<String> {
    let path = root().join(script);
    let Some(out) = run(&path.display().to_string(), &[arg]) else {
        return Some(format!("{script} cannot be run"));
    };
    if out.status.success() {
        return None;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reason = stderr.lines().last().unwrap_or("no message");
    Some(format!("{script} {arg} failed: {reason}"))
}

/// True when the test may go on; prints why not, or fails when the
/// plugins are required.
fn toolchain_present(language: &str) -> bool {
    let Some(reason) = missing_toolchain(language) else {
        return true;
    };
    assert!(
        std::env::var_os("ARBITER_REQUIRE_PLUGINS").is_none_or(|v| v != "1"),
        "{language}: {reason}; ARBITER_REQUIRE_PLUGINS=1 requires every plugin language"
    );
    eprintln!("skipped: the {language} scaffold is not built: {reason}");
    false
}

/// Scaffolds, builds and tests a plugin in `language`, inside a directory
/// holding a Cargo workspace of its own.
fn scaffold_builds_and_passes(language: &str) {
    if !toolchain_present(language) {
        return;
    }
    let outer = tempdir();
    std::fs::write(
        outer.path().join("Cargo.toml"),
        "[workspace]\nmembers = []\nresolver = \"2\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let name = format!("team-a-{language}");
    let dir = outer.path().join(&name);

    arbiter()
        .args(["plugin", "new", "--lang", language, "--tenant", "team-a"])
        .arg(&dir)
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "next: {}/build.sh && arbiter policy test {}",
            dir.display(),
            dir.display()
        )));
    let bundle = std::fs::read_to_string(dir.join("bundle.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(bundle.contains("tenant: \"team-a\""), "{bundle}");
    assert!(
        bundle.contains(&format!("module: \"{name}.wasm\"")),
        "{bundle}"
    );

    // Before the module is built its tests cannot pass.
    arbiter()
        .args(["policy", "test"])
        .arg(&dir)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!("{name}.wasm")));

    let started = Instant::now();
    let build = std::process::Command::new(dir.join("build.sh"))
        .current_dir(outer.path())
        .env("CARGO_TARGET_DIR", root().join("target/plugins/scaffold"))
        .output()
        .unwrap_or_else(|e| panic!("running build.sh: {e}"));
    assert!(
        build.status.success(),
        "{language} build.sh failed:\n{}\n{}",
        String::from_utf8_lossy(&build.stdout),
        String::from_utf8_lossy(&build.stderr)
    );
    eprintln!(
        "{language}: build.sh took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(dir.join(format!("{name}.wasm")).is_file());

    arbiter()
        .args(["policy", "test"])
        .arg(&dir)
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "2 passed, 0 failed, bundle {name}"
        )));
}

#[test]
fn rust_scaffold_builds_and_passes_its_tests() {
    scaffold_builds_and_passes("rust");
}

#[test]
fn go_scaffold_builds_and_passes_its_tests() {
    scaffold_builds_and_passes("go");
}

#[test]
fn c_scaffold_builds_and_passes_its_tests() {
    scaffold_builds_and_passes("c");
}

#[test]
fn assemblyscript_scaffold_builds_and_passes_its_tests() {
    scaffold_builds_and_passes("assemblyscript");
}

#[test]
fn zig_scaffold_builds_and_passes_its_tests() {
    scaffold_builds_and_passes("zig");
}

/// `plugin new ARGS` fails with exit `code`; returns stderr.
fn fails(args: &[&str], code: i32) -> String {
    let output = arbiter()
        .args(["plugin", "new"])
        .args(args)
        .assert()
        .code(code)
        .stderr(predicate::str::contains("panicked").not())
        .get_output()
        .clone();
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_contains(text: &str, fragments: &[&str]) {
    for fragment in fragments {
        assert!(text.contains(fragment), "lacks {fragment:?}:\n{text}");
    }
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .count()
}

#[test]
fn bad_arguments_exit_2_and_create_nothing() {
    let tmp = tempdir();
    let at = |name: &str| tmp.path().join(name).display().to_string();

    let stderr = fails(&["--lang", "cobol", &at("p")], 2);
    assert_contains(
        &stderr,
        &[
            "invalid value 'cobol' for '--lang <LANG>'",
            "[possible values: rust, go, c, assemblyscript, zig]",
        ],
    );

    let stderr = fails(&["--lang", "rust", &at("My_Plugin")], 2);
    assert_contains(
        &stderr,
        &[
            "\"My_Plugin\" cannot name a plugin",
            "lower-case letters, digits and '-', starting with a letter",
        ],
    );

    let stderr = fails(&["--lang", "go", "--tenant", "Team_A", &at("p")], 2);
    assert_contains(&stderr, &["not a namespace name"]);

    let stderr = fails(&["--lang", "c", "--sdk", &at("no-sdk"), &at("p")], 2);
    assert_contains(
        &stderr,
        &[
            "the c SDK is not in",
            "(--sdk)",
            "no-sdk/c/arbiter_plugin.h is missing",
        ],
    );
    // The checkout's root instead of its plugin-sdk directory: say so.
    let checkout = root().display().to_string();
    let stderr = fails(&["--lang", "go", "--sdk", &checkout, &at("p")], 2);
    assert_contains(
        &stderr,
        &[&format!("did you mean --sdk {checkout}/plugin-sdk?")],
    );
    assert_eq!(
        entries(tmp.path()),
        0,
        "a failed plugin new created something"
    );

    std::fs::create_dir(tmp.path().join("taken")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(tmp.path().join("taken/keep"), "mine").unwrap_or_else(|e| panic!("{e}"));
    let stderr = fails(&["--lang", "rust", &at("taken")], 2);
    assert_contains(&stderr, &[&format!("{} already exists", at("taken"))]);
    assert_eq!(entries(&tmp.path().join("taken")), 1);
}

#[test]
fn a_directory_that_cannot_be_created_exits_1_naming_it() {
    let tmp = tempdir();
    std::fs::write(tmp.path().join("file"), "").unwrap_or_else(|e| panic!("{e}"));
    for parent in ["missing", "file"] {
        let dir = tmp.path().join(parent).join("p");
        let stderr = fails(&["--lang", "c", &dir.display().to_string()], 1);
        assert_contains(
            &stderr,
            &[
                "error: cannot create the plugin directory",
                &dir.display().to_string(),
            ],
        );
    }
}

#[test]
fn the_sdk_is_named_by_an_absolute_path() {
    let tmp = tempdir();
    let dir = tmp.path().join("p");
    // A relative --sdk, from the checkout's root.
    arbiter()
        .args(["plugin", "new", "--lang", "go", "--sdk", "plugin-sdk"])
        .arg(&dir)
        .assert()
        .success();
    let go_mod = std::fs::read_to_string(dir.join("go.mod")).unwrap_or_else(|e| panic!("{e}"));
    let sdk = root()
        .join("plugin-sdk/go")
        .canonicalize()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        go_mod.contains(&format!(
            "replace arbiter.dev/plugin-sdk/go => {}\n",
            sdk.display()
        )),
        "{go_mod}"
    );
}
