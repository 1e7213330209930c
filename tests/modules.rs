//! The shape ARCHITECTURE.md promises inside each crate: no module's code
//! (tests left out) is over about 800 lines, no function outside tests is
//! over about 150 (read with `syn`), and the modules of one directory
//! never import each other in a cycle. Read from the source, so a
//! change that breaks either fails here with the file or the cycle named.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Most lines of code a module may have before its tests.
const MAX_LINES: usize = 850;

const ROOTS: &[&str] = &[
    "src",
    "crates/abi/src",
    "crates/core/src",
    "crates/policy/src",
    "crates/sim/src",
    "crates/operator/src",
    "crates/testcluster/src",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file of tests: `tests.rs`, `<name>_tests.rs`, or any file under a
/// `tests` or `<name>_tests` directory.
fn is_test_file(path: &Path) -> bool {
    let is_tests = |s: &str| s == "tests" || s.ends_with("_tests");
    path.file_stem()
        .and_then(|s| s.to_str())
        .is_some_and(is_tests)
        || path
            .strip_prefix(root())
            .unwrap_or(path)
            .parent()
            .into_iter()
            .flat_map(Path::components)
            .any(|c| c.as_os_str().to_str().is_some_and(is_tests))
}

/// The module's code: everything before its `#[cfg(test)]` block.
fn code(text: &str) -> &str {
    [
        "\n#[cfg(test)]\nmod tests {",
        "\n#[cfg(test)]\npub(crate) mod tests {",
    ]
    .iter()
    .filter_map(|start| text.find(start))
    .min()
    .map_or(text, |at| &text[..at])
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The policy crate reads the scheduler only through the `HookState` a
/// hook request carries (what a policy may see is what that type holds):
/// no code of it outside tests names `Scheduler`.
#[test]
fn the_policy_crate_never_names_the_scheduler() {
    let mut files = Vec::new();
    rust_files(&root().join("crates/policy/src"), &mut files);
    let mut named = Vec::new();
    for file in files.iter().filter(|f| !is_test_file(f)) {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (n, line) in code(&text).lines().enumerate() {
            let line = line.trim_start();
            let words = line
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|w| w == "Scheduler");
            if words && !line.starts_with("//") {
                named.push(format!("{}:{}", file.display(), n + 1));
            }
        }
    }
    assert!(
        named.is_empty(),
        "policy code names Scheduler (read it through HookState): {named:?}"
    );
}

#[test]
fn no_module_is_over_about_800_lines_of_code() {
    let mut files = Vec::new();
    for dir in ROOTS {
        rust_files(&root().join(dir), &mut files);
    }
    assert!(files.len() > 40, "found only {} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter(|f| !is_test_file(f))
        .filter_map(|f| {
            let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let lines = code(&text).lines().count();
            (lines > MAX_LINES).then(|| format!("{}: {lines} lines", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these by concern: {long:#?}");
}

/// Sibling modules of `dir` (files and sub-directories) and, per module,
/// the siblings its code names through `super::` or `crate::` paths.
fn sibling_imports(dir: &Path, crate_root: bool) -> BTreeMap<String, BTreeSet<String>> {
    let mut modules: BTreeMap<String, String> = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        if path.is_dir() {
            let mut files = Vec::new();
            rust_files(&path, &mut files);
            let text: String = files
                .iter()
                .filter(|f| !is_test_file(f))
                .map(|f| code(&fs::read_to_string(f).unwrap_or_default()).to_string())
                .collect();
            // A module may be a file and a directory of its children
            // (`bundle.rs` beside `bundle/`): both are its code.
            modules.entry(name).or_default().push_str(&text);
        } else if !matches!(name.as_str(), "mod" | "lib" | "main") && !is_test_file(&path) {
            let text = fs::read_to_string(&path).unwrap_or_default();
            modules.entry(name).or_default().push_str(code(&text));
        }
    }
    let names: Vec<String> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(module, text)| {
            let uses = names
                .iter()
                .filter(|other| *other != module)
                .filter(|other| {
                    let mut prefixes = vec![format!("super::{other}"), format!("super::{{{other}")];
                    if crate_root {
                        prefixes.push(format!("crate::{other}"));
                    }
                    let in_path = text
                        .lines()
                        .filter(|l| !l.trim_start().starts_with("//"))
                        .any(|l| {
                            prefixes.iter().any(|p| {
                                l.match_indices(p.as_str()).any(|(at, _)| {
                                    let next = l[at + p.len()..].chars().next();
                                    !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
                                })
                            })
                        });
                    in_path || grouped_uses(text).contains(other.as_str())
                })
                .cloned()
                .collect();
            (module.clone(), uses)
        })
        .collect()
}

/// The first path segments named inside `use super::{ ... };` groups
/// (which may span lines): `use super::{entry::Entry, reason}` names
/// `entry` and `reason`.
fn grouped_uses(text: &str) -> BTreeSet<&str> {
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices("use super::{") {
        let rest = &text[at + "use super::{".len()..];
        let group = rest.find("};").map_or(rest, |end| &rest[..end]);
        for token in group.split(['{', ',', '}', ' ', '\n']) {
            let first = token.trim().split("::").next().unwrap_or_default();
            if !first.is_empty() {
                names.insert(first);
            }
        }
    }
    names
}

/// A cycle in `graph`, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn sibling_modules_never_import_each_other_in_a_cycle() {
    let dirs = [
        ("crates/core/src", true),
        ("crates/core/src/model", false),
        ("crates/core/src/scheduler", false),
        ("crates/core/src/jobs", false),
        ("crates/policy/src", true),
        ("crates/policy/src/cel", false),
        ("crates/policy/src/wasm", false),
        ("crates/policy/src/engine", false),
        ("crates/sim/src", true),
        ("crates/operator/src", true),
        ("src/cli", false),
    ];
    for (dir, crate_root) in dirs {
        let graph = sibling_imports(&root().join(dir), crate_root);
        if let Some(found) = cycle(&graph) {
            panic!(
                "{dir}: modules import each other in a cycle: {}",
                found.join(" -> ")
            );
        }
    }
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("bundle", vec!["test"]),
        ("test", vec!["eval"]),
        ("eval", vec!["bundle"]),
        ("view", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        cycle(&graph),
        Some(vec![
            "bundle".into(),
            "test".into(),
            "eval".into(),
            "bundle".into()
        ])
    );
    let scheduler = sibling_imports(&root().join("crates/core/src/scheduler"), false);
    assert!(
        scheduler["reason"].contains("workload"),
        "the import scan sees reason -> workload: {scheduler:?}"
    );
}

/// Most lines a non-test function may span, signature to closing brace.
const MAX_FN_LINES: usize = 150;

/// Every function with a body in a parsed file: `(name, first line, lines)`.
#[derive(Default)]
struct Functions(Vec<(String, usize, usize)>);

impl Functions {
    fn note(&mut self, name: &syn::Ident, sig: &syn::Signature, block: &syn::Block) {
        let start = sig.fn_token.span.start().line;
        let end = block.brace_token.span.close().end().line;
        self.0.push((name.to_string(), start, end + 1 - start));
    }
}

impl<'a> syn::visit::Visit<'a> for Functions {
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        self.note(&f.sig.ident, &f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        self.note(&f.sig.ident, &f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.note(&f.sig.ident, &f.sig, block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
    /// Test modules inside a file (`#[cfg(test)] mod …`) are not code.
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        let test_only = m.attrs.iter().any(|a| {
            a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|arg| arg == "test")
        });
        if !test_only {
            syn::visit::visit_item_mod(self, m);
        }
    }
}

/// The functions of `text` (a whole Rust file) longer than `max` lines.
fn long_functions(text: &str, max: usize) -> Result<Vec<(String, usize, usize)>, String> {
    let file = syn::parse_file(text).map_err(|e| format!("does not parse: {e}"))?;
    let mut found = Functions::default();
    syn::visit::Visit::visit_file(&mut found, &file);
    Ok(found.0.into_iter().filter(|(_, _, n)| *n > max).collect())
}

#[test]
fn no_function_is_over_about_150_lines() {
    let mut files = Vec::new();
    for dir in ROOTS {
        rust_files(&root().join(dir), &mut files);
    }
    let mut long = Vec::new();
    for file in files.iter().filter(|f| !is_test_file(f)) {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        match long_functions(&text, MAX_FN_LINES) {
            Ok(found) => {
                long.extend(found.into_iter().map(|(name, line, n)| {
                    format!("{}:{line}: fn {name}: {n} lines", file.display())
                }))
            }
            Err(e) => long.push(format!("{}: {e}", file.display())),
        }
    }
    assert!(long.is_empty(), "split these along their phases: {long:#?}");
}

#[test]
fn the_function_check_measures_bodies_and_leaves_test_modules_out() {
    let body = "    let x = 1;\n".repeat(10);
    let text = format!(
        "fn short() {{\n}}\nimpl S {{\n    fn long(&self) {{\n{body}    }}\n}}\n\
         #[cfg(test)]\nmod tests {{\n    fn in_a_test() {{\n{body}    }}\n}}\n"
    );
    let found = long_functions(&text, 5).unwrap();
    assert_eq!(found, vec![("long".to_string(), 4, 12)]);
    assert!(long_functions("fn broken(", 5).is_err());
}
