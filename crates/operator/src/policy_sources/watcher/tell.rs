//! Telling what the bundle watcher decided, where users look: an Event on
//! the ConfigMap per version's result, and its status annotation
//! ([`STATUS_ANNOTATION`](crate::policy_sources::STATUS_ANNOTATION)) — both only by the
//! replica that speaks (the leader); a replica that starts speaking
//! announces what it loaded while following. The annotation is written on
//! every ConfigMap; Events are bounded per tenant namespace
//! ([`EventBudget`]: a tenant making thousands of labelled ConfigMaps, or
//! versions, gets a few Events and an annotation on each, not thousands
//! of Events), its ConfigMaps ignored counted apart from its bundle's
//! results, so a flood of the one never silences the other. Decides
//! nothing.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use arbiter_policy::bundle;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};

use super::{now, status_of, Index, Key};
use crate::policy_sources::STATUS_ANNOTATION;
use crate::workloads::{self, MANAGER};

impl Index {
    /// This replica has started speaking (it leads now): what it built
    /// while following is told — each ConfigMap's status annotation brought
    /// to what is in force, and the Event of its last result unless the
    /// annotation shows the old leader already told that result.
    pub(super) async fn announce(&mut self) {
        let keys: Vec<Key> = self.loaded.keys().cloned().collect();
        let mut told = 0;
        for key in keys {
            let Some(cm) = self.objects.get(&key).cloned() else {
                continue;
            };
            let Some(tracked) = self.loaded.get_mut(&key) else {
                continue;
            };
            let untold = tracked.untold.take();
            let (status, at) = (tracked.status.clone(), tracked.at);
            let said = cm
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(STATUS_ANNOTATION))
                .is_some_and(|c| status_of(c) == status);
            if let (Some((warning, reason, note)), false) = (untold, said) {
                self.event(&cm, warning, reason, &note).await;
                told += 1;
            }
            self.write_status(&cm, &status, at).await;
        }
        tracing::info!(told, "leading: the bundles in force announced");
    }
    /// A tenant ConfigMap not used: told once per ConfigMap used instead
    /// (its status annotation written again only if `look`: it changed,
    /// or everything was listed).
    pub(super) async fn ignore(&mut self, key: &Key, winner: Key, look: bool) {
        let told = self.ignored.get(key);
        if !look && told.is_some_and(|(told, _)| *told == winner) {
            return;
        }
        let Some(cm) = self.objects.get(key).cloned() else {
            return;
        };
        let at = match told {
            Some((told, at)) if *told == winner => *at,
            _ => {
                let note = format!(
                    "not loaded: {} has another ConfigMap labelled {}, {winner}, which is older and is its tenant bundle; a namespace has one tenant bundle, so delete one of them",
                    key.namespace,
                    bundle::CONFIGMAP_LABEL
                );
                self.event(&cm, true, "BundleIgnored", &note).await;
                let at = now();
                self.ignored.insert(key.clone(), (winner.clone(), at));
                at
            }
        };
        let status = format!(
            "ignored: ConfigMap {winner} is the tenant bundle of {}",
            key.namespace
        );
        self.write_status(&cm, &status, at).await;
    }
    /// An Event about this version of `cm`. kube-runtime's recorder folds
    /// an Event into the last one with the same reason about the same
    /// reference (keeping that one's note), so the reference names the
    /// `resourceVersion`: each version's result is its own Event.
    /// Past its namespace's [`EventBudget`] (the platform's has none), it
    /// is only logged: the status annotation says the same.
    pub(super) async fn event(&mut self, cm: &ConfigMap, warning: bool, reason: &str, note: &str) {
        if !(self.speaks)() {
            return;
        }
        let namespace = cm.metadata.namespace.as_deref().unwrap_or_default();
        if namespace != self.platform_namespace {
            let ignored = reason == "BundleIgnored";
            match self.budget.take(namespace, ignored, Instant::now()) {
                Told::Yes => {}
                Told::FirstNo => {
                    tracing::warn!(namespace, configmap = cm.metadata.name.as_deref().unwrap_or_default(), reason, "bundle Events of this kind in this namespace are limited ({EVENT_BURST} at once, then one every {} s); each labelled ConfigMap's {STATUS_ANNOTATION} annotation still says what became of it", EVENT_REFILL.as_secs());
                    return;
                }
                Told::No => {
                    tracing::debug!(
                        namespace,
                        configmap = cm.metadata.name.as_deref().unwrap_or_default(),
                        reason,
                        "bundle Event not told: the namespace's are limited"
                    );
                    return;
                }
            }
        }
        let regarding = ObjectReference {
            resource_version: cm.metadata.resource_version.clone(),
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            name: cm.metadata.name.clone(),
            namespace: cm.metadata.namespace.clone(),
            uid: cm.metadata.uid.clone(),
            ..ObjectReference::default()
        };
        workloads::record_event(
            &self.recorder,
            &regarding,
            warning,
            reason,
            "LoadBundle",
            note,
        )
        .await;
    }
    /// Writes the status annotation `STATUS at TIME` unless it says
    /// `status` already: a JSON merge patch carrying the `resourceVersion`
    /// seen, so a ConfigMap changed meanwhile is left to its next event.
    pub(super) async fn write_status(&self, cm: &ConfigMap, status: &str, at: Timestamp) {
        if !(self.speaks)() {
            return;
        }
        let current = cm
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(STATUS_ANNOTATION));
        if current.is_some_and(|c| status_of(c) == status) {
            return;
        }
        let key = Key::of(cm);
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.namespace);
        let patch = serde_json::json!({"metadata": {
            "resourceVersion": cm.metadata.resource_version,
            "annotations": {STATUS_ANNOTATION: format!("{status} at {at}")},
        }});
        let params = PatchParams {
            field_manager: Some(MANAGER.to_string()),
            ..PatchParams::default()
        };
        match api.patch(&key.name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_conflict() || status.is_not_found() => {
                tracing::debug!(configmap = %key, "ConfigMap changed or went while its status was written; its next event writes it")
            }
            Err(e) => {
                tracing::warn!(configmap = %key, error = %e, "could not write the bundle status annotation")
            }
        }
    }
}

/// Bundle Events of one kind (a bundle's results; ConfigMaps ignored) a
/// tenant namespace may be told at once…
pub const EVENT_BURST: u32 = 10;
/// …and how long until it may be told one more.
pub const EVENT_REFILL: Duration = Duration::from_secs(30);

/// Whether an Event may be told.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Told {
    Yes,
    /// No, and the namespace's Events of this kind were told until now.
    FirstNo,
    No,
}

/// A token bucket per tenant namespace and kind of bundle Event (a
/// bundle's results, or ConfigMaps ignored): up to [`EVENT_BURST`] at
/// once, then one per [`EVENT_REFILL`].
#[derive(Default)]
pub(super) struct EventBudget {
    /// Per namespace and kind (ignored or not): tokens, when last
    /// counted, whether it ran out.
    buckets: HashMap<(String, bool), (f64, Instant, bool)>,
}

impl EventBudget {
    /// Whether one more Event of its kind (`ignored` or a result) may be
    /// told in `namespace` at `now` (taking it).
    pub(super) fn take(&mut self, namespace: &str, ignored: bool, now: Instant) -> Told {
        let burst = f64::from(EVENT_BURST);
        let refilled =
            |at: Instant| now.duration_since(at).as_secs_f64() / EVENT_REFILL.as_secs_f64();
        if self.buckets.len() >= 4096 {
            // Forget the buckets full again.
            self.buckets
                .retain(|_, (tokens, at, _)| *tokens + refilled(*at) < burst);
        }
        let (tokens, at, out) = self
            .buckets
            .entry((namespace.to_string(), ignored))
            .or_insert((burst, now, false));
        *tokens = (*tokens + refilled(*at)).min(burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            *out = false;
            Told::Yes
        } else if *out {
            Told::No
        } else {
            *out = true;
            Told::FirstNo
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_told_a_burst_then_one_event_per_refill() {
        let mut budget = EventBudget::default();
        let start = Instant::now();
        for _ in 0..EVENT_BURST {
            assert_eq!(budget.take("flood", true, start), Told::Yes);
        }
        assert_eq!(budget.take("flood", true, start), Told::FirstNo);
        assert_eq!(budget.take("flood", true, start), Told::No);
        // Its bundle's results have their own, and so has another namespace.
        assert_eq!(budget.take("flood", false, start), Told::Yes);
        assert_eq!(budget.take("quiet", true, start), Told::Yes);
        let later = start + EVENT_REFILL;
        assert_eq!(budget.take("flood", true, later), Told::Yes);
        assert_eq!(budget.take("flood", true, later), Told::FirstNo);
        // Long quiet: full again, never more than the burst.
        let much_later = later + EVENT_REFILL * 100;
        for _ in 0..EVENT_BURST {
            assert_eq!(budget.take("flood", true, much_later), Told::Yes);
        }
        assert_eq!(budget.take("flood", true, much_later), Told::FirstNo);
    }
}
