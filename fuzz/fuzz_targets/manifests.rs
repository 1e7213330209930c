//! The manifest loader: YAML text → `model::load::load_str` (decoding every
//! kind, unknown-field warnings, duplicate keys) → `arbiter_sim::scenario::build`,
//! which builds the checked `Cluster` (`model::cluster::ClusterBuilder`:
//! quotas, cohorts, references), compiles `JobIntegration` pod-set CEL,
//! extracts jobs of every integration and expands `WorkloadGenerator`s.
//! Any panic, stack overflow, timeout or OOM is a finding; errors are fine.
#![no_main]

use std::path::Path;

use arbiter_core::model::limits::MAX_GENERATED_WORKLOADS;
use arbiter_core::model::load::{load_str, Manifest};
use libfuzzer_sys::fuzz_target;

/// Generators within the documented cap still make that many workloads;
/// the fuzzer would spend its time allocating them. Counts over the cap
/// are kept (their refusal is fuzzed); counts under it are clamped.
const FUZZ_GENERATED_WORKLOADS: u32 = 1_000;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut loaded = match load_str(text, Path::new("fuzz.yaml")) {
        Ok(loaded) => loaded,
        Err(err) => {
            let _ = err.to_string();
            return;
        }
    };
    for doc in &mut loaded.documents {
        if let Manifest::WorkloadGenerator(generator) = &mut doc.manifest {
            let count = &mut generator.spec.count;
            if *count <= MAX_GENERATED_WORKLOADS {
                *count = (*count).min(FUZZ_GENERATED_WORKLOADS);
            }
        }
        // Names and the Display of sources must not panic either.
        let _ = doc.manifest.name();
        let _ = doc.source.to_string();
    }
    for warning in &loaded.warnings {
        let _ = warning.to_string();
    }
    if let Err(errors) = arbiter_sim::scenario::build(loaded) {
        let _ = errors.to_string();
    }
});
