//! The policy engine (docs/design.md §4): CEL expressions and sandboxed WASM
//! plugins, loaded from bundles, hot-reloaded, evaluated through one path.
//!
//! From the bottom up (each module uses only those above it):
//! `bounded` (reading one regular file up to a cap, for bundles and the
//! simulator's manifests), `view` (what every policy sees: the typed views and each hook's request
//! and response), `wasm` (the plugin sandbox) and `cel` (compiled
//! expressions) — the two languages; `spec` (bundle.yaml's wire types),
//! `status` (what a reload reports: identity, outcome, history);
//! `compiled` (a checked bundle: its policies and their programs); `eval`
//! (one policy on one request, output checked); `hooks` (one descriptor
//! per hook: its request and response, evaluation, what a bundle may
//! declare for it, how a test checks it); `test` (a bundle's own tests); `bundle` (the loader: directory or ConfigMap, parse → validate →
//! compile → test); `metrics` (the `arbiter_policy_*` Prometheus families);
//! `reload` (watching a directory, atomic swaps, last good bundle kept);
//! `engine` (the core's `Hooks`: match, mode, failurePolicy, tenant
//! confinement, statistics, decision log); `sources` (which bundles are in
//! force for a run, and the engine over them).
//! Nothing here changes scheduler state except through the answers the
//! core asks for; nothing here panics on what a policy or bundle does.

pub mod bounded;
pub mod bundle;
pub mod cel;
pub mod compiled;
pub mod engine;
pub mod eval;
pub mod hooks;
pub mod metrics;
pub mod reload;
pub mod sources;
pub mod spec;
pub mod status;
pub mod test;
pub mod text;
pub mod view;
pub mod wasm;

use schemars::{schema_for, Schema};

/// The JSON Schemas of every hook's request and response, by file name
/// (what `plugin-sdk/schema/` holds).
pub fn schemas() -> Vec<(String, Schema)> {
    let mut files = Vec::new();
    for hook in wasm::Hook::ALL {
        let [request, response] = (hooks::descriptor(hook).schemas)();
        files.push((format!("{hook}.request.json"), request));
        files.push((format!("{hook}.response.json"), response));
    }
    files.push(("bundle.json".to_string(), schema_for!(spec::BundleSpec)));
    files
}

/// A schema as the checked-in file holds it.
pub fn schema_text(schema: &Schema) -> String {
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn checked_in_schemas_match_the_code() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugin-sdk/schema");
        for (name, schema) in super::schemas() {
            let path = dir.join(name);
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                on_disk == super::schema_text(&schema),
                "{} is out of date; run `cargo run -- policy schema plugin-sdk/schema`",
                path.display()
            );
        }
    }
}
