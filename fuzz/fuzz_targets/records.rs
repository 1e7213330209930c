//! What the operator reads back from a job someone else may have edited:
//! the admission record annotation (`inject::recorded`, then the places of
//! its pods, `inject::placed_pods`), the retry annotation, and the
//! eviction transforms that undo what a record says was injected
//! (`inject::hold`, `inject::restore`) — on a batch Job whose
//! `arbiter.dev/admission` annotation is the input. Also the seal check
//! (`seal::Sealer::verify`) of the input as a seal. Any panic, stack
//! overflow, timeout or OOM is a finding; errors are fine.
#![no_main]

use arbiter_core::jobs::Integrations;
use arbiter_operator::{inject, seal};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a", "uid": "u-1",
                     "labels": {"arbiter.dev/queue-name": "research"},
                     "annotations": {
                         inject::ADMISSION_ANNOTATION: text,
                         inject::RETRY_OF_ANNOTATION: text,
                         seal::SEAL_ANNOTATION: text,
                     }},
        "spec": {"suspend": false, "parallelism": 2, "template": {
            "metadata": {"labels": {"app": "train"}},
            "spec": {"nodeSelector": {"nvidia.com/gpu.product": "A100"},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                     "containers": [{"name": "train", "image": "pytorch",
                         "resources": {"requests": {"nvidia.com/gpu": "4"}}}]}}}
    });
    if let Some(Ok(record)) = inject::recorded(&job) {
        let _ = inject::placed_pods(&record);
        let _ = serde_json::to_string(&record);
    }
    let _ = inject::retry_of(&job);
    let _ = seal::Sealer::new(&[7u8; 32]).verify("u-1", text, text);
    let integrations = Integrations::builtin();
    if let Some(integration) = integrations.find("batch/v1", "Job") {
        let _ = inject::hold(&mut job.clone(), integration);
        let _ = inject::restore(&mut job, integration);
    }
});
