//! Which queue objects are in force, said where users look: each object
//! left out of the configuration (`Cluster::inactive`: invalid, or
//! depending on one that is) gets a Warning `Inactive` Event when it turns
//! so and a Normal `Active` one when it recovers, its error is logged once,
//! and ClusterQueues and LocalQueues carry an `Active` condition (Kueue's:
//! `Ready` when in force, the typed reason otherwise) whose transition time
//! is kept while the state holds. The rest of the configuration is in
//! force meanwhile.

use std::collections::BTreeMap;

use arbiter_core::model::cluster::{Cluster, Inactive};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::DynamicObject;

use crate::publish::Publisher;
use crate::workloads::Owner;

/// Kueue's reason and message for a queue in force.
const READY: (&str, &str) = ("Ready", "Can admit new workloads");

/// `(kind, name)`: `name` is `namespace/name` for a LocalQueue.
type Key = (String, String);

/// The state of every queue object the driver has seen.
#[derive(Default)]
pub struct Activity {
    /// Objects left out now: (reason, message).
    inactive: BTreeMap<Key, (&'static str, String)>,
    /// When each object's `Active` condition last changed, and to what
    /// (first read from the object's status: a restart keeps the time).
    since: BTreeMap<Key, (bool, String, Time)>,
    /// Each object's `metadata.generation` as last seen.
    generations: BTreeMap<Key, i64>,
    /// Objects being deleted, kept by their in-use finalizer.
    terminating: std::collections::BTreeSet<Key>,
    /// Every queue object in the stores.
    objects: std::collections::BTreeSet<Key>,
}

impl Activity {
    /// Takes in the configuration just built from `objects`: tells what
    /// turned inactive or recovered. Returns how many objects of each kind
    /// are (active, inactive).
    pub fn update(
        &mut self,
        cluster: &Cluster,
        objects: &[std::sync::Arc<DynamicObject>],
        publisher: &Publisher,
    ) -> BTreeMap<String, (usize, usize)> {
        let now: BTreeMap<Key, &Inactive> = cluster
            .inactive
            .iter()
            .map(|i| ((i.kind.to_string(), i.name.clone()), i))
            .collect();
        let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        self.terminating.clear();
        self.objects.clear();
        for object in objects {
            let Some(owner) = owner(object) else {
                continue;
            };
            let key = key(&owner);
            self.objects.insert(key.clone());
            if object.metadata.deletion_timestamp.is_some() {
                self.terminating.insert(key.clone());
            }
            if let Some(generation) = object.metadata.generation {
                self.generations.insert(key.clone(), generation);
            }
            if !self.since.contains_key(&key) {
                if let Some(written) = written_active(object) {
                    self.since.insert(key.clone(), written);
                }
            }
            let count = counts.entry(owner.kind.clone()).or_default();
            match now.get(&key) {
                Some(inactive) => {
                    count.1 += 1;
                    let was = self.inactive.get(&key);
                    if was.map(|w| (w.0, w.1.as_str()))
                        != Some((inactive.reason, inactive.message.as_str()))
                    {
                        tracing::error!(
                            object = %inactive.object(),
                            reason = inactive.reason,
                            message = %inactive.message,
                            "queue object left out of the configuration; the rest is in force"
                        );
                        publisher.event(
                            &owner,
                            true,
                            "Inactive",
                            format!(
                                "{} is inactive ({}): {}. Nothing is admitted through it until it is fixed; the rest of the configuration is in force",
                                inactive.object(),
                                inactive.reason,
                                inactive.message
                            ),
                        );
                    }
                }
                None => {
                    count.0 += 1;
                    if self.inactive.contains_key(&key) {
                        tracing::info!(object = %format!("{} {}", key.0, key.1), "queue object in force again");
                        publisher.event(
                            &owner,
                            false,
                            "Active",
                            format!("{} {} is in force again", key.0, key.1),
                        );
                    }
                }
            }
        }
        self.inactive = now
            .into_iter()
            .map(|(k, i)| (k, (i.reason, i.message.clone())))
            .collect();
        // Nothing is kept of objects gone.
        let objects = &self.objects;
        self.since.retain(|k, _| objects.contains(k));
        self.generations.retain(|k, _| objects.contains(k));
        counts
    }

    /// Whether `kind name` is left out now, and why.
    pub fn inactive(&self, kind: &str, name: &str) -> Option<(&'static str, &str)> {
        self.inactive
            .get(&(kind.to_string(), name.to_string()))
            .map(|(r, m)| (*r, m.as_str()))
    }

    /// The names of the objects of `kind` in the stores.
    pub fn objects_of(&self, kind: &str) -> Vec<String> {
        self.objects
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, name)| name.clone())
            .collect()
    }

    /// The objects of `kind` left out now: (name, reason, message).
    pub fn inactive_of<'a>(
        &'a self,
        kind: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'static str, &'a str)> + 'a {
        self.inactive
            .iter()
            .filter(move |((k, _), _)| k == kind)
            .map(|((_, name), (reason, message))| (name.as_str(), *reason, message.as_str()))
    }

    /// The `Active` condition of `kind name` as it stands, its transition
    /// time kept while its state and reason hold.
    pub fn condition(&mut self, kind: &str, name: &str) -> Condition {
        let key = (kind.to_string(), name.to_string());
        let (active, reason, message) = match self.inactive.get(&key) {
            Some((reason, message)) => (false, *reason, message.clone()),
            None if self.terminating.contains(&key) => (
                false,
                "Terminating",
                format!(
                    "being deleted: admits nothing new, and is kept (finalizer {}) until what it admitted is gone",
                    crate::finalizers::IN_USE_FINALIZER
                ),
            ),
            None => (true, READY.0, READY.1.to_string()),
        };
        let since = match self.since.get(&key) {
            Some((a, r, at)) if *a == active && r == reason => at.clone(),
            _ => {
                let at = Time(k8s_openapi::jiff::Timestamp::now());
                self.since
                    .insert(key.clone(), (active, reason.to_string(), at.clone()));
                at
            }
        };
        Condition {
            type_: "Active".into(),
            status: if active { "True" } else { "False" }.into(),
            reason: reason.into(),
            message,
            last_transition_time: since,
            observed_generation: self.generations.get(&key).copied(),
        }
    }
}

/// The `Active` condition `object`'s status says (written by this
/// operator before it restarted, or by another replica): its state,
/// reason and transition time.
fn written_active(object: &DynamicObject) -> Option<(bool, String, Time)> {
    let condition = object
        .data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Active")?;
    let condition: Condition = serde_json::from_value(condition.clone()).ok()?;
    Some((
        condition.status == "True",
        condition.reason,
        condition.last_transition_time,
    ))
}

/// The Event owner of a queue object of the configuration stores.
fn owner(object: &DynamicObject) -> Option<Owner> {
    let types = object.types.as_ref()?;
    Some(Owner {
        api_version: types.api_version.clone(),
        kind: types.kind.clone(),
        namespace: object.metadata.namespace.clone().unwrap_or_default(),
        name: object.metadata.name.clone()?,
        uid: object.metadata.uid.clone().unwrap_or_default(),
    })
}

fn key(owner: &Owner) -> Key {
    let name = if owner.namespace.is_empty() {
        owner.name.clone()
    } else {
        format!("{}/{}", owner.namespace, owner.name)
    };
    (owner.kind.clone(), name)
}
