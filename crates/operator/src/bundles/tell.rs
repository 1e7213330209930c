//! Telling what the bundle watcher decided, where users look: an Event on
//! the ConfigMap per version's result, and its status annotation
//! ([`STATUS_ANNOTATION`](super::STATUS_ANNOTATION)) — both only by the
//! replica that speaks (the leader); a replica that starts speaking
//! announces what it loaded while following. Decides nothing.

use arbiter_policy::bundle;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};

use super::{now, status_of, Index, Key, STATUS_ANNOTATION};
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
    /// A tenant ConfigMap not used: told once per ConfigMap used instead.
    pub(super) async fn ignore(&mut self, key: &Key, winner: Key) {
        let Some(cm) = self.objects.get(key).cloned() else {
            return;
        };
        let at = match self.ignored.get(key) {
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
    pub(super) async fn event(&self, cm: &ConfigMap, warning: bool, reason: &str, note: &str) {
        if !(self.speaks)() {
            return;
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
