//! The bundle loader: bundle.yaml bytes, from a ConfigMap (the in-memory
//! source; a directory reads the same bytes through the same parser) →
//! parse, validate, compile (CEL programs; WASM modules by name, with the
//! repo's shortest-first plugin available as `plugins/shortest-first.wasm`
//! and `plugin.wasm`), the bundle's own tests, then one evaluation of each
//! policy on its hook's fixed request. An odd-length input is loaded as
//! the tenant bundle of `team-a` (tenant limits and confinement checks);
//! an even-length one as a platform bundle, or the tenant named in
//! `spec.tenant`. Any panic, stack overflow, timeout or OOM is a finding.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::self_check();
    let tenant = (data.len() % 2 == 1).then_some("team-a");
    match common::load(data, tenant, true) {
        Ok(bundle) => common::evaluate_all(&bundle),
        Err(err) => {
            let _ = err.to_string();
        }
    }
});
