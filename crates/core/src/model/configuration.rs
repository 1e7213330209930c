//! Kueue's controller configuration file (`apiVersion:
//! config.kueue.x-k8s.io/v1beta2` or `v1beta1`, `kind: Configuration`),
//! read for the part Arbiter decides by: `waitForPodsReady`. A platform
//! team moving from Kueue points `arbiter run --config` at the file it
//! already has; every other top-level field is named in a warning as not
//! used. Text in, a checked policy out; no I/O.

use serde::Deserialize;
use serde_json::Value;

use super::api::WaitForPodsReady;
use super::cluster::PodsReadyPolicy;
use super::load::{decode, Source, Warning};

/// The configuration group Kueue's file is written in.
pub const GROUP: &str = "config.kueue.x-k8s.io";

/// What Arbiter takes from a Kueue `Configuration`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Configuration {
    /// `waitForPodsReady`, checked; `None`: off (absent, or `enable: false`).
    pub pods_ready: Option<PodsReadyPolicy>,
    /// Fields not used, unknown fields of `waitForPodsReady`, each naming
    /// the file.
    pub warnings: Vec<Warning>,
}

/// Reads one Kueue `Configuration` document from `text` (`source` names
/// the file in every message).
pub fn read(text: &str, source: &Source) -> Result<Configuration, String> {
    let document = serde_yaml_ng::Deserializer::from_str(text)
        .next()
        .ok_or_else(|| format!("{source}: holds no document; give a Kueue Configuration (apiVersion: {GROUP}/v1beta2, kind: Configuration)"))?;
    let object = super::yaml::UniqueKeys::deserialize(document)
        .map_err(|e| format!("{source}: {e}"))?
        .0;
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let group = api_version.split('/').next().unwrap_or("");
    if group != GROUP || kind != "Configuration" {
        return Err(format!(
            "{source}: is `{api_version} {kind}`; expected a Kueue Configuration (apiVersion: {GROUP}/v1beta2 or v1beta1, kind: Configuration)"
        ));
    }
    let mut configuration = Configuration::default();
    let Value::Object(fields) = &object else {
        return Err(format!("{source}: is not a mapping"));
    };
    let unused: Vec<&str> = fields
        .keys()
        .map(String::as_str)
        .filter(|k| !matches!(*k, "apiVersion" | "kind" | "metadata" | "waitForPodsReady"))
        .collect();
    if !unused.is_empty() {
        configuration.warnings.push(Warning {
            source: source.clone(),
            message: format!(
                "Kueue Configuration fields Arbiter does not use, ignored: {}",
                unused.join(", ")
            ),
        });
    }
    if let Some(section) = fields.get("waitForPodsReady") {
        let mut warnings = Vec::new();
        let spec: WaitForPodsReady =
            decode(section, source, &mut warnings).map_err(|e| e.to_string())?;
        configuration.warnings.extend(warnings);
        configuration.pods_ready =
            PodsReadyPolicy::from_spec(&spec).map_err(|e| format!("{source}: {e}"))?;
    }
    Ok(configuration)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Millis;

    fn source() -> Source {
        Source {
            file: "kueue-config.yaml".into(),
            document: 1,
        }
    }

    #[test]
    fn wait_for_pods_ready_is_read_with_kueues_defaults() {
        let text = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n\
                    manageJobsWithoutQueueName: false\n\
                    waitForPodsReady:\n  timeout: 10m\n  blockAdmission: true\n  \
                    recoveryTimeout: 2m\n  \
                    requeuingStrategy: {backoffLimitCount: 5, timestamp: Creation}\n";
        let read = read(text, &source()).unwrap();
        assert_eq!(
            read.pods_ready,
            Some(PodsReadyPolicy {
                timeout: Millis::from_secs(600),
                recovery_timeout: Some(Millis::from_secs(120)),
                block_admission: true,
                requeue_at_creation: true,
                backoff_limit: Some(5),
                backoff_base: Millis::from_secs(60),
                backoff_max: Millis::from_secs(3600),
            })
        );
        assert_eq!(read.warnings.len(), 1);
        assert!(read.warnings[0]
            .message
            .contains("manageJobsWithoutQueueName"));
        // The backoff doubles from the base, up to the maximum.
        let policy = read.pods_ready.unwrap();
        assert_eq!(policy.backoff(1), Millis::from_secs(60));
        assert_eq!(policy.backoff(3), Millis::from_secs(240));
        assert_eq!(policy.backoff(10), Millis::from_secs(3600));
    }

    #[test]
    fn off_unless_present_and_enabled() {
        let base = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n";
        assert_eq!(read(base, &source()).unwrap().pods_ready, None);
        let off = format!("{base}waitForPodsReady: {{enable: false, timeout: 1m}}\n");
        assert_eq!(read(&off, &source()).unwrap().pods_ready, None);
    }

    #[test]
    fn bad_input_names_the_file_and_field() {
        let wrong = read(
            "apiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\n",
            &source(),
        )
        .unwrap_err();
        assert!(
            wrong.contains("kueue-config.yaml") && wrong.contains("expected a Kueue Configuration"),
            "{wrong}"
        );
        let bad = read(
            "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady: {timeout: soon}\n",
            &source(),
        )
        .unwrap_err();
        assert!(bad.contains("waitForPodsReady.timeout"), "{bad}");
        let bad = read(
            "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady: {requeuingStrategy: {timestamp: Later}}\n",
            &source(),
        )
        .unwrap_err();
        assert!(bad.contains("Later"), "{bad}");
    }
}
