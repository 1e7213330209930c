//! Kueue's controller configuration file (`apiVersion:
//! config.kueue.x-k8s.io/v1beta2` or `v1beta1`, `kind: Configuration`),
//! read for the parts Arbiter decides by: `waitForPodsReady` and
//! `fairSharing.preemptionStrategies`. A platform team moving from Kueue
//! points `arbiter run --config` at the file it already has; every other
//! top-level field is named in a warning as not used. Text in, a checked
//! policy out; no I/O.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::api::WaitForPodsReady;
use super::cluster::{FairPreemptionStrategies, PodsReadyPolicy};
use super::load::{decode, Source, Warning};

/// The configuration group Kueue's file is written in.
pub const GROUP: &str = "config.kueue.x-k8s.io";

/// What Arbiter takes from a Kueue `Configuration`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Configuration {
    /// `waitForPodsReady`, checked; `None`: off (absent, or `enable: false`).
    pub pods_ready: Option<PodsReadyPolicy>,
    /// `fairSharing.preemptionStrategies`, checked; Kueue's default when
    /// absent.
    pub preemption_strategies: FairPreemptionStrategies,
    /// Fields not used, unknown fields of `waitForPodsReady` and
    /// `fairSharing`, each naming the file.
    pub warnings: Vec<Warning>,
}

/// Kueue's `fairSharing` section (v1beta1 has `enable`; v1beta2 is on by
/// being there).
#[derive(Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
struct FairSharingSection {
    /// Kueue: fair sharing for every cohort. Not how Arbiter turns it on.
    #[serde(default)]
    enable: Option<bool>,
    /// The strategies, in order.
    #[serde(default)]
    preemption_strategies: Option<Vec<String>>,
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
        .filter(|k| {
            !matches!(
                *k,
                "apiVersion" | "kind" | "metadata" | "waitForPodsReady" | "fairSharing"
            )
        })
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
    if let Some(section) = fields.get("fairSharing") {
        read_fair_sharing(section, source, &mut configuration)?;
    }
    Ok(configuration)
}

/// `fairSharing`: its `preemptionStrategies` checked into `configuration`;
/// `enable` named in a warning (Arbiter turns fair sharing on per cohort
/// tree, by a ClusterQueue's `scheduling.algorithm`).
fn read_fair_sharing(
    section: &Value,
    source: &Source,
    configuration: &mut Configuration,
) -> Result<(), String> {
    let mut warnings = Vec::new();
    let spec: FairSharingSection = match section {
        Value::Null => FairSharingSection::default(),
        _ => decode(section, source, &mut warnings).map_err(|e| e.to_string())?,
    };
    configuration.warnings.extend(warnings);
    if spec.enable.is_some() {
        configuration.warnings.push(Warning {
            source: source.clone(),
            message: "fairSharing.enable is not used: Arbiter turns fair sharing on per cohort tree, with a ClusterQueue's `scheduling.algorithm: fair-sharing`; preemptionStrategies applies wherever it is on".to_string(),
        });
    }
    if let Some(names) = &spec.preemption_strategies {
        configuration.preemption_strategies = FairPreemptionStrategies::parse(names)
            .map_err(|e| format!("{source}: fairSharing.preemptionStrategies: {e}"))?;
    }
    Ok(())
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
    fn fair_sharing_preemption_strategies_are_read_in_kueues_lists() {
        let base = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n";
        let read_strategies = |section: &str| read(&format!("{base}{section}"), &source());
        // Absent: Kueue's default, with no warning.
        let absent = read_strategies("").unwrap();
        assert_eq!(
            absent.preemption_strategies,
            FairPreemptionStrategies::FinalThenInitialShare
        );
        assert!(absent.warnings.is_empty(), "{:?}", absent.warnings);
        let only =
            read_strategies("fairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n")
                .unwrap();
        assert_eq!(
            only.preemption_strategies,
            FairPreemptionStrategies::InitialShareOnly
        );
        assert!(only.warnings.is_empty(), "{:?}", only.warnings);
        // v1beta1's enable is named: Arbiter turns fair sharing on per tree.
        let v1beta1 = read(
            "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n\
             fairSharing: {enable: true, preemptionStrategies: [LessThanOrEqualToFinalShare]}\n",
            &source(),
        )
        .unwrap();
        assert_eq!(
            v1beta1.preemption_strategies,
            FairPreemptionStrategies::FinalShareOnly
        );
        assert_eq!(v1beta1.warnings.len(), 1);
        assert!(
            v1beta1.warnings[0]
                .message
                .contains("fairSharing.enable is not used"),
            "{:?}",
            v1beta1.warnings
        );
        let bare = read_strategies("fairSharing:\n").unwrap();
        assert_eq!(
            bare.preemption_strategies,
            FairPreemptionStrategies::default()
        );
    }

    #[test]
    fn fair_sharing_preemption_strategies_kueue_refuses_are_errors() {
        let base = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing:\n  preemptionStrategies: ";
        let allowed = "give one of [LessThanOrEqualToFinalShare], [LessThanInitialShare], [LessThanOrEqualToFinalShare, LessThanInitialShare]";
        for (list, why) in [
            ("[]", "is empty"),
            (
                "[LessThanFinalShare]",
                "`LessThanFinalShare` is not a strategy",
            ),
            (
                "[LessThanInitialShare, LessThanInitialShare]",
                "names LessThanInitialShare twice",
            ),
            (
                "[LessThanInitialShare, LessThanOrEqualToFinalShare]",
                "is not a list Kueue accepts",
            ),
        ] {
            let e = read(&format!("{base}{list}\n"), &source()).unwrap_err();
            assert!(
                e.starts_with("kueue-config.yaml (document 1): fairSharing.preemptionStrategies: ")
                    && e.contains(why)
                    && e.contains(allowed),
                "{list}: {e}"
            );
        }
        let e = read(&format!("{base}LessThanInitialShare\n"), &source()).unwrap_err();
        assert!(
            e.contains("kueue-config.yaml") && e.contains("preemptionStrategies"),
            "{e}"
        );
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
