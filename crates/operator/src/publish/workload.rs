//! The Workloads' writes, for the publisher's task: a job's Workload
//! made (or taken over after a restart), written back when someone else
//! changed it, and its status; and how the task tells a change of
//! someone else's — the API's answer to each write, or a version the watch
//! shows after the last write, compared with what was written
//! ([`Written`]). Arbiter owns a Workload's content: one edited is written
//! back to what was decided (`workloads::write_back`) and told in a
//! Warning `WorkloadEdited` Event on it, naming the fields changed.

use std::collections::{BTreeMap, HashSet};

use arbiter_core::model::api;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::Client;

use super::{outcome, Message, Target, Wish, Worker, WorkloadWatchEvent, WriteOutcome};
use crate::workloads::{self, apply_status, Desired};

/// What was last written for one Workload.
#[derive(Clone, Default)]
pub(super) struct Written {
    /// The spec applied (kept to create the object again if it was deleted).
    pub(super) spec: Option<Box<api::Workload>>,
    pub(super) applied: bool,
    /// The status as last written (times aside), to write only changes.
    pub(super) last: Option<Desired>,
    pub(super) conditions: BTreeMap<String, Condition>,
    /// The `resourceVersion` the last write left: a version seen later is
    /// someone else's write.
    pub(super) version: Option<String>,
}

impl Written {
    /// The status as last written, conditions and their times included.
    fn status(&self) -> Option<api::WorkloadStatus> {
        let last = self.last.as_ref()?;
        let conditions = last
            .wanted
            .iter()
            .filter_map(|w| self.conditions.get(w.type_).cloned())
            .collect();
        Some(last.status(conditions))
    }

    /// What of `observed` is not as last written (nothing before the spec was).
    fn edited(&self, observed: &api::Workload) -> Vec<String> {
        match (&self.spec, self.applied) {
            (Some(spec), true) => workloads::edited(observed, Some(spec), self.status().as_ref()),
            _ => Vec::new(),
        }
    }
}

impl Worker {
    /// What the Workload watch saw. A Workload shown while a write of it
    /// is under way or due is looked at once that is over; one not written
    /// here is remembered (deleted with its job) until the watch shows it
    /// deleted, or a relist does not show it.
    pub(super) fn observed(&mut self, seen: WorkloadWatchEvent) {
        match seen {
            WorkloadWatchEvent::Relisting => self.relisted = Some(HashSet::new()),
            WorkloadWatchEvent::Relisted => {
                if let Some(shown) = self.relisted.take() {
                    self.seen_unwritten.retain(|target| shown.contains(target));
                }
            }
            WorkloadWatchEvent::Deleted(workload) => {
                if let Some(target) = target_of(&workload) {
                    self.seen_unwritten.remove(&target);
                }
            }
            WorkloadWatchEvent::Applied(workload) => {
                let Some(target) = target_of(&workload) else {
                    return;
                };
                if let Some(shown) = &mut self.relisted {
                    shown.insert(target.clone());
                }
                if self.wishes.contains_key(&target) || self.in_flight.contains(&target) {
                    self.seen_meanwhile.insert(target, Box::new(workload));
                } else {
                    self.compare(target, Box::new(workload));
                }
            }
        }
    }

    /// A Workload the watch showed, when no write of it is under way or
    /// due: a version after the last write is someone else's, and if it
    /// changed what was written, that is written back.
    pub(super) fn compare(&mut self, target: Target, workload: Box<api::Workload>) {
        let Target::Workload { namespace, name } = &target else {
            return;
        };
        let Some(written) = self.written.get(&(namespace.clone(), name.clone())) else {
            // In the API, not written here: deleted with its job.
            self.seen_unwritten.insert(target);
            return;
        };
        let version = workload.metadata.resource_version.as_deref();
        if !newer(version, written.version.as_deref()) {
            return;
        }
        let fields = written.edited(&workload);
        if !fields.is_empty() {
            self.write_back(target, workload, fields);
        }
    }

    /// Whether the job of `target` went before its Workload was ever
    /// written: its wish is still the first (the spec, to create it),
    /// nothing of it is under way or waiting out a failure, and neither
    /// this process nor the watch has seen it in the API. Then there is
    /// nothing to create and nothing to delete: when jobs come and go
    /// faster than the API takes writes, their Workloads would otherwise
    /// wait in memory, without bound, to be created and deleted at once.
    pub(super) fn never_written(&self, target: &Target) -> bool {
        let Target::Workload { namespace, name } = target else {
            return false;
        };
        matches!(
            self.wishes.get(target),
            Some(Wish::Workload {
                spec: Some(_),
                replace: false,
                restore: None,
                ..
            })
        ) && !self.in_flight.contains(target)
            && !self.delayed_targets.contains(target)
            && !self.seen_meanwhile.contains_key(target)
            && !self.seen_unwritten.contains(target)
            && !self
                .written
                .contains_key(&(namespace.clone(), name.clone()))
    }

    /// Someone else changed the Workload `workload` (these `fields`): told
    /// (a log line, a Warning Event on it) and written back.
    pub(super) fn write_back(
        &mut self,
        target: Target,
        workload: Box<api::Workload>,
        fields: Vec<String>,
    ) {
        let fields = fields.join(", ");
        tracing::warn!(object = %target, %fields, "changed by someone other than Arbiter; writing back what was decided");
        let note = format!(
            "{target} was changed by someone other than Arbiter ({fields}); written back to what \
             Arbiter decided. A Workload tells what was decided for its job and decides nothing: \
             change the job instead"
        );
        let regarding = ObjectReference {
            api_version: Some("arbiter.dev/v1alpha1".into()),
            kind: Some("Workload".into()),
            name: workload.metadata.name.clone(),
            namespace: workload.metadata.namespace.clone(),
            uid: workload.metadata.uid.clone(),
            ..ObjectReference::default()
        };
        self.queue_event(Message::Event {
            regarding,
            warning: true,
            reason: "WorkloadEdited".to_string(),
            note,
        });
        let wish = Wish::Workload {
            spec: None,
            status: None,
            replace: false,
            restore: Some(workload),
        };
        self.absorb(Message::Wish(target, wish));
    }
}

/// A Workload's wish, borrowed for its write.
pub(super) struct WorkloadWish<'a> {
    pub(super) spec: Option<&'a api::Workload>,
    pub(super) status: Option<&'a Desired>,
    pub(super) replace: bool,
    pub(super) restore: Option<&'a api::Workload>,
}

pub(super) async fn write_workload(
    client: &Client,
    namespace: &str,
    name: &str,
    wish: WorkloadWish<'_>,
    written: &mut Written,
) -> WriteOutcome {
    if wish.replace {
        if let Err(e) = workloads::delete(client, namespace, name).await {
            return outcome(Err(e));
        }
        *written = Written::default();
    }
    if let Some(spec) = wish.spec {
        written.spec = Some(Box::new(spec.clone()));
        written.applied = false;
    }
    // The object as the API holds it after the last of these writes.
    let mut answer = None;
    if !written.applied {
        let Some(spec) = written.spec.as_deref() else {
            // A status for a Workload whose spec never came: nothing to write to.
            return WriteOutcome::Done;
        };
        match workloads::apply(client, spec).await {
            Ok(now) => {
                written.applied = true;
                // Made or taken over: whatever status it has is not known
                // to be the last one written.
                written.last = None;
                answer = Some(now);
            }
            Err(e) => return outcome(Err(e)),
        }
    }
    if let (Some(observed), Some(spec)) = (wish.restore, written.spec.as_deref()) {
        let status = written.status();
        match workloads::write_back(client, observed, spec, status.as_ref()).await {
            Ok(now) => answer = Some(now),
            Err(e) => return outcome(Err(e)),
        }
    }
    if let Some(now) = wish
        .status
        .filter(|now| written.last.as_ref() != Some(*now))
    {
        let conditions = workloads::conditions(&now.wanted, &written.conditions, Timestamp::now());
        let body = now.status(conditions.clone());
        let api: Api<api::Workload> = Api::namespaced(client.clone(), namespace);
        match apply_status(&api, name, &body).await {
            Ok(object) => {
                written.conditions = conditions
                    .into_iter()
                    .map(|c| (c.type_.clone(), c))
                    .collect();
                written.last = Some(now.clone());
                answer = Some(object);
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                // Deleted under us: created again on the retry.
                written.applied = false;
                return WriteOutcome::Failed(format!(
                    "the Workload is gone ({}); creating it again",
                    s.message
                ));
            }
            Err(e) => return outcome(Err(e)),
        }
    }
    // Someone else's changes show in the API's answer.
    let Some(now) = answer else {
        return WriteOutcome::Done;
    };
    written.version = now.metadata.resource_version.clone();
    let fields = written.edited(&now);
    if fields.is_empty() {
        WriteOutcome::Done
    } else {
        WriteOutcome::Edited(Box::new(now), fields)
    }
}

/// Whether `resourceVersion` `seen` is after `last` (Kubernetes' comparable
/// resource versions: decimal integers without leading zeros, compared by
/// length and then digit by digit, as `k8s.io/apimachinery`'s
/// `CompareResourceVersion`). Unknown or malformed: not after.
fn newer(seen: Option<&str>, last: Option<&str>) -> bool {
    let well_formed =
        |v: &str| !v.is_empty() && !v.starts_with('0') && v.bytes().all(|b| b.is_ascii_digit());
    match (seen, last) {
        (Some(seen), Some(last)) if well_formed(seen) && well_formed(last) => {
            (seen.len(), seen) > (last.len(), last)
        }
        _ => false,
    }
}

fn target_of(workload: &api::Workload) -> Option<Target> {
    Some(Target::Workload {
        namespace: workload.metadata.namespace.clone()?,
        name: workload.metadata.name.clone()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_versions_compare_as_kubernetes_says() {
        assert!(newer(Some("10"), Some("9")));
        assert!(newer(Some("123"), Some("122")));
        assert!(!newer(Some("9"), Some("10")));
        assert!(!newer(Some("10"), Some("10")));
        // Malformed or unknown: never after.
        for (seen, last) in [
            (Some("010"), Some("9")),
            (Some("1a"), Some("1")),
            (Some(""), Some("1")),
            (Some("2"), None),
            (None, Some("1")),
        ] {
            assert!(!newer(seen, last), "{seen:?} {last:?}");
        }
    }
}
