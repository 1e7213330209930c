//! The mutating webhook's rules, kept covering every job kind the operator
//! holds: each kind of the integrations in force that the API serves
//! (built-in ones and `JobIntegration`s alike, found by discovery as the
//! driver finds them), so a user-defined kind is held at creation as a
//! built-in one is. Rules are only added: a kind `deploy/` lists that the
//! API does not serve yet stays listed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use kube::api::{Api, ApiResource};
use kube::Client;
use serde_json::{json, Value};

/// How often the configuration is looked at again (a kind served later,
/// a re-apply of `deploy/` that dropped an added rule).
const EVERY: Duration = Duration::from_secs(5);

/// Whether a webhook is the job hold (its path is `/mutate-job`).
fn holds_jobs(webhook: &MutatingWebhook) -> bool {
    let config = &webhook.client_config;
    let path = config.service.as_ref().and_then(|s| s.path.as_deref());
    let url = config.url.as_deref().unwrap_or_default();
    path == Some("/mutate-job") || url.ends_with("/mutate-job")
}

/// The JSON Patch operations adding, to each job-hold webhook, a rule for
/// each of `kinds` (group, version, plural) none of its rules covers at
/// creation.
pub fn missing_rules(
    configuration: &MutatingWebhookConfiguration,
    kinds: &[ApiResource],
) -> Vec<Value> {
    let mut ops = Vec::new();
    for (i, webhook) in configuration.webhooks.iter().flatten().enumerate() {
        if !holds_jobs(webhook) {
            continue;
        }
        let rules = webhook.rules.as_deref().unwrap_or_default();
        let covered = |kind: &ApiResource| {
            rules.iter().any(|rule| {
                let has = |list: &Option<Vec<String>>, value: &str| {
                    list.iter().flatten().any(|v| v == value || v == "*")
                };
                has(&rule.operations, "CREATE")
                    && has(&rule.api_groups, &kind.group)
                    && has(&rule.api_versions, &kind.version)
                    && has(&rule.resources, &kind.plural)
            })
        };
        if webhook.rules.is_none() {
            ops.push(json!({"op": "add", "path": format!("/webhooks/{i}/rules"), "value": []}));
        }
        for kind in kinds.iter().filter(|k| !covered(k)) {
            ops.push(json!({
                "op": "add",
                "path": format!("/webhooks/{i}/rules/-"),
                "value": {"operations": ["CREATE"], "apiGroups": [kind.group], "apiVersions": [kind.version],
                          "resources": [kind.plural], "scope": "Namespaced"}
            }));
        }
    }
    ops
}

/// Keeps the MutatingWebhookConfiguration `configuration`'s job-hold
/// webhooks covering `kinds` (the driver's served job kinds, which grow
/// as CRDs appear). Runs until the task is dropped; failures are logged
/// and tried again.
pub fn keep_job_rules(
    client: Client,
    configuration: String,
    kinds: Arc<Mutex<Vec<ApiResource>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<MutatingWebhookConfiguration> = Api::all(client);
        loop {
            let wanted = kinds.lock().map(|k| k.clone()).unwrap_or_default();
            match api.get_opt(&configuration).await {
                Ok(Some(current)) => {
                    let ops = missing_rules(&current, &wanted);
                    if !ops.is_empty() {
                        let added = ops.len();
                        match super::certs::patch_ops(&api, &configuration, ops).await {
                            Ok(_) => {
                                tracing::info!(name = %configuration, added, "the job-hold webhook now covers every job kind served")
                            }
                            Err(e) => {
                                tracing::warn!(name = %configuration, error = %e, "could not add job kinds to the job-hold webhook's rules; tried again")
                            }
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(name = %configuration, error = %e, "reading the MutatingWebhookConfiguration failed; tried again")
                }
            }
            tokio::time::sleep(EVERY).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_uncovered_kinds_are_added_to_job_hold_webhooks() {
        let configuration: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "arbiter"},
            "webhooks": [
                {"name": "jobs.arbiter.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": {"service": {"namespace": "arbiter-system", "name": "arbiter", "path": "/mutate-job"}},
                 "rules": [{"operations": ["CREATE"], "apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"]}]},
                {"name": "other", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": {"url": "https://x/validate"}}
            ]
        }))
        .unwrap();
        let job = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("batch", "v1", "Job"),
            "jobs",
        );
        let sweep = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("example.com", "v1", "Sweep"),
            "sweeps",
        );
        let ops = missing_rules(&configuration, &[job.clone(), sweep]);
        assert_eq!(ops.len(), 1, "{ops:?}");
        assert_eq!(ops[0]["path"], "/webhooks/0/rules/-");
        assert_eq!(ops[0]["value"]["resources"], json!(["sweeps"]));
        assert!(missing_rules(&configuration, &[job]).is_empty());
    }
}
