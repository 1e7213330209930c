//! The policy engine's Prometheus metrics (docs/design.md §7: per-policy
//! evaluations, latency and errors; bundle reloads), as `prometheus-client`
//! families registered into the caller's [`Registry`].
//!
//! [`PolicyMetrics`] hands out handles whose label sets are resolved once:
//! [`PolicyMetrics::policy`] for the engine's hot path (recording an
//! evaluation is a counter increment and a histogram observation, no label
//! lookup), [`PolicyMetrics::bundle`] for the reload results of one bundle
//! source, fed by `reload::Reloadable`. Every family's
//! `bundle` label is the bundle's source (its directory or ConfigMap, the
//! report's `bundles[].source`), which stays the same across reloads;
//! `arbiter_policy_bundle_info` maps it to the name, version and digest in
//! force. This module never reads a clock, writes a file or serves HTTP: the
//! engine and `Reloadable` feed it, and the drivers expose [`encode`]'s text
//! (`arbiter simulate|policy check --watch --metrics`, later the operator's
//! `/metrics`).

use std::sync::atomic::AtomicU64;

use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use super::status::{Identity, ReloadOutcome};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    bundle: String,
    policy: String,
    hook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    bundle: String,
    policy: String,
    hook: String,
    /// `PolicyError::kind`: `trap`, `timeout`, `cel`, …
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    bundle: String,
    /// `loaded`, `unchanged` or `rejected`.
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BundleLabels {
    bundle: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    bundle: String,
    name: String,
    version: String,
    digest: String,
}

/// Upper bounds of the latency buckets: powers of 4 from 1 µs to about 1 s
/// (the report's `latencyMicros` uses the same steps).
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-6, 4.0, 11))
}

type Timestamps = Family<BundleLabels, Gauge<f64, AtomicU64>>;

/// The families of the policy engine. Cloning shares them.
#[derive(Clone)]
pub struct PolicyMetrics {
    evaluations: Family<PolicyLabels, Counter>,
    reused: Family<PolicyLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    durations: Family<PolicyLabels, Histogram, fn() -> Histogram>,
    reloads: Family<ReloadLabels, Counter>,
    info: Family<InfoLabels, Gauge>,
    loaded_at: Timestamps,
    last_success: Family<BundleLabels, Gauge>,
}

impl PolicyMetrics {
    /// Registers the `arbiter_policy_*` families into `registry`.
    pub fn register(registry: &mut Registry) -> PolicyMetrics {
        let metrics = PolicyMetrics {
            evaluations: Family::default(),
            reused: Family::default(),
            errors: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
            reloads: Family::default(),
            info: Family::default(),
            loaded_at: Family::default(),
            last_success: Family::default(),
        };
        registry.register(
            "arbiter_policy_evaluations",
            "Policy evaluations, failed ones included (a batch hook counts one per workload or subject)",
            metrics.evaluations.clone(),
        );
        registry.register(
            "arbiter_policy_reused",
            "Answers reused without evaluating: the policy had already decided on exactly this input (fairShare and autoscale CEL policies that do not read now)",
            metrics.reused.clone(),
        );
        registry.register(
            "arbiter_policy_errors",
            "Policy evaluations that failed, by error kind; the policy's failurePolicy decided what happened",
            metrics.errors.clone(),
        );
        registry.register_with_unit(
            "arbiter_policy_evaluation_duration",
            "Wall-clock time of one policy evaluation (a batch's time split evenly over its items)",
            Unit::Seconds,
            metrics.durations.clone(),
        );
        registry.register(
            "arbiter_policy_bundle_reloads",
            "Bundle reload results: loaded (swapped in), unchanged (same digest as in force), rejected (the last good bundle stays)",
            metrics.reloads.clone(),
        );
        registry.register(
            "arbiter_policy_bundle_info",
            "The bundle in force for each source: 1 for its name, version and digest",
            metrics.info.clone(),
        );
        registry.register_with_unit(
            "arbiter_policy_bundle_loaded_timestamp",
            "When the bundle in force was loaded (Unix time)",
            Unit::Seconds,
            metrics.loaded_at.clone(),
        );
        registry.register(
            "arbiter_policy_bundle_last_reload_success",
            "1 if the latest reload of the source succeeded or found the bundle unchanged, 0 if it was rejected",
            metrics.last_success.clone(),
        );
        metrics
    }

    /// The handle of one policy of the bundle from `bundle` (its source).
    pub fn policy(&self, bundle: &str, policy: &str, hook: &str) -> PolicyHandle {
        let labels = PolicyLabels {
            bundle: bundle.to_string(),
            policy: policy.to_string(),
            hook: hook.to_string(),
        };
        PolicyHandle {
            evaluations: self.evaluations.get_or_create_owned(&labels),
            reused: self.reused.get_or_create_owned(&labels),
            duration: self.durations.get_or_create_owned(&labels),
            errors: self.errors.clone(),
            by_kind: Vec::new(),
            labels,
        }
    }

    /// The handle of one bundle source's reload results. Handles for one
    /// source share its series.
    pub fn bundle(&self, bundle: &str) -> BundleMetrics {
        let result = |result| {
            self.reloads.get_or_create_owned(&ReloadLabels {
                bundle: bundle.to_string(),
                result,
            })
        };
        BundleMetrics {
            loaded: result("loaded"),
            unchanged: result("unchanged"),
            rejected: result("rejected"),
            loaded_at: self.loaded_at.clone(),
            last_success: self.last_success.clone(),
            info: self.info.clone(),
            in_force: None,
            bundle: BundleLabels {
                bundle: bundle.to_string(),
            },
        }
    }
}

/// Records the evaluations of one policy.
pub struct PolicyHandle {
    labels: PolicyLabels,
    evaluations: Counter,
    reused: Counter,
    duration: Histogram,
    errors: Family<ErrorLabels, Counter>,
    /// The error counters resolved so far (a handful of kinds at most).
    by_kind: Vec<(&'static str, Counter)>,
}

impl PolicyHandle {
    /// One evaluation that took `seconds` and failed with error kind `error`, if any.
    pub fn record(&mut self, seconds: f64, error: Option<&'static str>) {
        self.evaluations.inc();
        self.duration.observe(seconds);
        if let Some(kind) = error {
            self.error_counter(kind).inc();
        }
    }

    /// One answer reused for an input the policy had already decided on.
    pub fn record_reused(&mut self) {
        self.reused.inc();
    }

    fn error_counter(&mut self, kind: &'static str) -> &Counter {
        let at = match self.by_kind.iter().position(|(k, _)| *k == kind) {
            Some(at) => at,
            None => {
                let counter = self.errors.get_or_create_owned(&ErrorLabels {
                    bundle: self.labels.bundle.clone(),
                    policy: self.labels.policy.clone(),
                    hook: self.labels.hook.clone(),
                    kind,
                });
                self.by_kind.push((kind, counter));
                self.by_kind.len() - 1
            }
        };
        &self.by_kind[at].1
    }
}

/// Records the reload results of one bundle source and the bundle it has in force.
pub struct BundleMetrics {
    bundle: BundleLabels,
    loaded: Counter,
    unchanged: Counter,
    rejected: Counter,
    loaded_at: Timestamps,
    last_success: Family<BundleLabels, Gauge>,
    info: Family<InfoLabels, Gauge>,
    /// The `arbiter_policy_bundle_info` labels set last, removed when another bundle comes in force.
    in_force: Option<InfoLabels>,
}

impl BundleMetrics {
    /// `identity` is in force since `loaded_at`.
    pub fn in_force(&mut self, identity: &Identity, loaded_at: Timestamp) {
        let labels = InfoLabels {
            bundle: self.bundle.bundle.clone(),
            name: identity.name.clone(),
            version: identity.version.clone(),
            digest: identity.digest.clone(),
        };
        if let Some(previous) = self.in_force.take() {
            if previous != labels {
                self.info.remove(&previous);
            }
        }
        self.info.get_or_create(&labels).set(1);
        self.in_force = Some(labels);
        self.loaded_at
            .get_or_create(&self.bundle)
            .set(loaded_at.as_millisecond() as f64 / 1000.0);
    }

    /// Whether the latest attempt succeeded (or found the bundle unchanged).
    pub fn last_succeeded(&self, succeeded: bool) {
        self.last_success
            .get_or_create(&self.bundle)
            .set(i64::from(succeeded));
    }

    /// One reload result; a swap brings its bundle in force at `loaded_at`.
    pub fn reloaded(&mut self, outcome: &ReloadOutcome, loaded_at: Timestamp) {
        match outcome {
            ReloadOutcome::Swapped { identity, .. } => {
                self.loaded.inc();
                self.in_force(identity, loaded_at);
            }
            ReloadOutcome::Unchanged { .. } => {
                self.unchanged.inc();
            }
            ReloadOutcome::Rejected { .. } => {
                self.rejected.inc();
            }
        }
        self.last_succeeded(!matches!(outcome, ReloadOutcome::Rejected { .. }));
    }

    /// A load rejected while the source has no bundle in force (its first
    /// version did not load): counted as rejected, the latest attempt failed.
    pub fn refused(&self) {
        self.rejected.inc();
        self.last_succeeded(false);
    }

    /// The source is gone: its bundle is no longer in force, so its info,
    /// loaded-at and last-success series go; the reload counters stay.
    pub fn retire(&mut self) {
        if let Some(labels) = self.in_force.take() {
            self.info.remove(&labels);
        }
        self.loaded_at.remove(&self.bundle);
        self.last_success.remove(&self.bundle);
    }
}

/// The registry in the Prometheus text exposition format (0.0.4): what a
/// `/metrics` endpoint serves and node_exporter's textfile collector reads.
/// Each family's series are in label order (the library keeps them in a hash
/// map), so two runs differ only in their numbers.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, registry);
    let mut sorted = String::with_capacity(text.len());
    let mut samples: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            push_sorted(&mut sorted, &mut samples);
            sorted.push_str(line);
            sorted.push('\n');
        } else {
            samples.push(line);
        }
    }
    push_sorted(&mut sorted, &mut samples);
    sorted
}

/// Appends one family's sample lines ordered by series. The sort is stable
/// and a histogram's `_bucket`, `_sum` and `_count` lines share a key, so
/// they stay together in the order the library wrote them.
fn push_sorted(out: &mut String, samples: &mut Vec<&str>) {
    fn series(line: &str) -> &str {
        let labels = line.find('{').map_or("", |at| &line[at..]);
        match labels.rfind(",le=\"").or_else(|| labels.rfind('}')) {
            Some(end) => &labels[..end],
            None => labels,
        }
    }
    samples.sort_by(|a, b| series(a).cmp(series(b)));
    for line in samples.drain(..) {
        out.push_str(line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn registry() -> (Registry, PolicyMetrics) {
        let mut registry = Registry::default();
        let metrics = PolicyMetrics::register(&mut registry);
        (registry, metrics)
    }

    /// The value of the sample line `series` (name and labels exactly as encoded).
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            Some(value.parse().unwrap_or_else(|e| panic!("{line}: {e}")))
        })
    }

    fn identity(version: &str, digest: &str) -> Identity {
        Identity {
            name: "platform".to_string(),
            version: version.to_string(),
            digest: digest.to_string(),
        }
    }

    #[test]
    fn evaluations_errors_and_durations_per_policy() {
        let (registry, metrics) = registry();
        let mut cap = metrics.policy("policies", "gpu-cap", "admission");
        let mut weights = metrics.policy("policies", "team-weights", "weight");
        cap.record(3e-6, None);
        cap.record(2e-3, Some("timeout"));
        cap.record(5e-6, Some("trap"));
        cap.record(1e-6, Some("timeout"));
        weights.record(0.5e-6, None);
        let text = encode(&registry);
        let labels = r#"{bundle="policies",policy="gpu-cap",hook="admission""#;
        let at = |name: &str, extra: &str| sample(&text, &format!("{name}{labels}{extra}"));
        assert_eq!(
            at("arbiter_policy_evaluations_total", "}"),
            Some(4.0),
            "{text}"
        );
        assert_eq!(
            at("arbiter_policy_errors_total", r#",kind="timeout"}"#),
            Some(2.0),
            "{text}"
        );
        assert_eq!(
            at("arbiter_policy_errors_total", r#",kind="trap"}"#),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            at("arbiter_policy_evaluation_duration_seconds_count", "}"),
            Some(4.0),
            "{text}"
        );
        // 1 µs falls in the first bucket, 3 µs and 5 µs in the 4 µs and 16 µs ones.
        assert_eq!(
            at(
                "arbiter_policy_evaluation_duration_seconds_bucket",
                r#",le="1e-06"}"#
            ),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            at(
                "arbiter_policy_evaluation_duration_seconds_bucket",
                r#",le="+Inf"}"#
            ),
            Some(4.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                r#"arbiter_policy_evaluations_total{bundle="policies",policy="team-weights",hook="weight"}"#
            ),
            Some(1.0),
            "{text}"
        );
        assert!(
            !text.contains(r#"policy="team-weights",hook="weight",kind="#),
            "an error series for a policy that never failed:\n{text}"
        );
    }

    #[test]
    fn the_histogram_spans_a_microsecond_to_a_second() {
        let bounds: Vec<f64> = exponential_buckets(1e-6, 4.0, 11).collect();
        assert_eq!(bounds.first(), Some(&1e-6));
        let last = bounds.last().copied().unwrap_or_default();
        assert!((1.0..1.1).contains(&last), "{bounds:?}");
    }

    #[test]
    fn two_handles_for_one_policy_share_its_series() {
        let (registry, metrics) = registry();
        metrics.policy("a", "p", "weight").record(1e-6, None);
        metrics.policy("a", "p", "weight").record(1e-6, Some("cel"));
        let text = encode(&registry);
        let series = r#"{bundle="a",policy="p",hook="weight"}"#;
        assert_eq!(
            sample(&text, &format!("arbiter_policy_evaluations_total{series}")),
            Some(2.0),
            "{text}"
        );
    }

    #[test]
    fn reload_results_count_by_result_and_info_follows_the_bundle_in_force() {
        let (registry, metrics) = registry();
        let mut source = metrics.bundle("/etc/arbiter/bundle");
        let v1 = identity("1", "aaa");
        let v2 = identity("2", "bbb");
        let loaded_at: Timestamp = "2026-11-30T04:00:00Z".parse().expect("timestamp");
        source.in_force(&v1, loaded_at);
        source.last_succeeded(true);
        let took = Duration::from_millis(3);
        source.reloaded(
            &ReloadOutcome::Unchanged {
                identity: v1.clone(),
            },
            loaded_at,
        );
        source.reloaded(
            &ReloadOutcome::Rejected {
                error: "bundle.yaml: bad".to_string(),
                kept: v1.clone(),
                took,
            },
            loaded_at,
        );
        let text = encode(&registry);
        let bundle = r#"bundle="/etc/arbiter/bundle""#;
        let reloads = |result: &str| {
            sample(
                &text,
                &format!(r#"arbiter_policy_bundle_reloads_total{{{bundle},result="{result}"}}"#),
            )
        };
        assert_eq!(reloads("rejected"), Some(1.0), "{text}");
        assert_eq!(reloads("unchanged"), Some(1.0), "{text}");
        assert_eq!(reloads("loaded"), Some(0.0), "{text}");
        let success = format!("arbiter_policy_bundle_last_reload_success{{{bundle}}}");
        assert_eq!(sample(&text, &success), Some(0.0), "{text}");
        let v1_info = format!(
            r#"arbiter_policy_bundle_info{{{bundle},name="platform",version="1",digest="aaa"}}"#
        );
        assert_eq!(sample(&text, &v1_info), Some(1.0), "{text}");

        let later: Timestamp = "2026-11-30T04:05:00.250Z".parse().expect("timestamp");
        source.reloaded(&ReloadOutcome::Swapped { identity: v2, took }, later);
        let text = encode(&registry);
        assert_eq!(
            sample(&text, &v1_info),
            None,
            "the old bundle's info stays:\n{text}"
        );
        let v2_info = format!(
            r#"arbiter_policy_bundle_info{{{bundle},name="platform",version="2",digest="bbb"}}"#
        );
        assert_eq!(sample(&text, &v2_info), Some(1.0), "{text}");
        assert_eq!(sample(&text, &success), Some(1.0), "{text}");
        assert_eq!(
            sample(
                &text,
                &format!("arbiter_policy_bundle_loaded_timestamp_seconds{{{bundle}}}")
            ),
            Some(later.as_millisecond() as f64 / 1000.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                &format!(r#"arbiter_policy_bundle_reloads_total{{{bundle},result="loaded"}}"#)
            ),
            Some(1.0),
            "{text}"
        );
    }

    #[test]
    fn a_source_refused_before_any_bundle_loaded_and_a_retired_one_show_nothing_in_force() {
        let (registry, metrics) = registry();
        let cm = r#"bundle="ConfigMap team-a/rules""#;
        let success = format!("arbiter_policy_bundle_last_reload_success{{{cm}}}");
        let rejected = format!(r#"arbiter_policy_bundle_reloads_total{{{cm},result="rejected"}}"#);
        let loaded_at = format!("arbiter_policy_bundle_loaded_timestamp_seconds{{{cm}}}");
        metrics.bundle("ConfigMap team-a/rules").refused();
        let text = encode(&registry);
        assert_eq!(sample(&text, &rejected), Some(1.0), "{text}");
        assert_eq!(sample(&text, &success), Some(0.0), "{text}");
        assert_eq!(
            sample(&text, &loaded_at),
            None,
            "nothing was loaded:\n{text}"
        );
        assert!(!text.contains("arbiter_policy_bundle_info{"), "{text}");

        let mut source = metrics.bundle("ConfigMap team-a/rules");
        source.in_force(&identity("1", "aaa"), Timestamp::UNIX_EPOCH);
        source.last_succeeded(true);
        let text = encode(&registry);
        assert_eq!(sample(&text, &success), Some(1.0), "{text}");
        assert!(text.contains("arbiter_policy_bundle_info{"), "{text}");
        source.retire();
        let text = encode(&registry);
        assert!(!text.contains("arbiter_policy_bundle_info{"), "{text}");
        assert_eq!(sample(&text, &success), None, "{text}");
        assert_eq!(sample(&text, &loaded_at), None, "{text}");
        assert_eq!(
            sample(&text, &rejected),
            Some(1.0),
            "counters stay:\n{text}"
        );
    }

    #[test]
    fn the_text_is_the_prometheus_format_node_exporter_reads() {
        let (registry, metrics) = registry();
        metrics.policy("b", "p", "admission").record(1e-6, None);
        let text = encode(&registry);
        assert!(
            text.contains("# TYPE arbiter_policy_evaluations_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE arbiter_policy_evaluation_duration_seconds histogram\n"),
            "{text}"
        );
        assert!(
            !text.contains("# EOF"),
            "OpenMetrics, not Prometheus text:\n{text}"
        );
        assert!(text.ends_with('\n'), "{text}");
    }

    #[test]
    fn series_come_in_label_order_with_histogram_lines_together() {
        let (registry, metrics) = registry();
        for policy in ["p3", "p1", "p4", "p2", "p0"] {
            metrics.policy("b", policy, "weight").record(1e-6, None);
        }
        let text = encode(&registry);
        let counted: Vec<&str> = text
            .lines()
            .filter_map(|l| {
                l.strip_prefix("arbiter_policy_evaluations_total{bundle=\"b\",policy=\"")
            })
            .map(|rest| &rest[..2])
            .collect();
        assert_eq!(counted, ["p0", "p1", "p2", "p3", "p4"], "{text}");
        let histogram: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("arbiter_policy_evaluation_duration_seconds"))
            .collect();
        assert_eq!(histogram.len(), 5 * (12 + 2), "{text}");
        for (series, lines) in histogram.chunks(14).enumerate() {
            let policy = format!("policy=\"p{series}\"");
            assert!(lines.iter().all(|l| l.contains(&policy)), "{lines:#?}");
            assert!(lines[0].contains("le=\"1e-06\""), "{lines:#?}");
            assert!(lines[11].contains("le=\"+Inf\""), "{lines:#?}");
            assert!(lines[12].contains("_sum{"), "{lines:#?}");
            assert!(lines[13].contains("_count{"), "{lines:#?}");
        }
    }
}
