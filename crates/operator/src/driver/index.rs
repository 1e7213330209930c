//! What the driver knows of each job object, kept incrementally: a job is
//! read (turned into JSON, its pod sets extracted by the integration's CEL,
//! its hold and finish looked at) only when the reflector holds a new
//! version of it, and only the jobs the watch noted as changed are looked
//! up at all (every job after a relist). A tick over 15,000 jobs of which
//! ten changed looks at ten. Pod sets are read from what a job asks for:
//! they are extracted again only when its `metadata.generation` (which the
//! API server moves on every change of the spec), labels or annotations
//! changed, so a new status alone (most of a job's versions) costs no
//! extraction.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arbiter_core::jobs::{Ended, Integrations, JobInfo};
use arbiter_core::model::Millis;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;

use super::JobKey;
use crate::inject;
use crate::jobs::{self, queue_label, uid};
use crate::watch::JobWatch;

/// One job, as last read.
#[derive(Clone, Debug)]
pub(crate) struct ObservedJob {
    /// Its pod sets and queue, or why they cannot be read.
    pub info: Result<JobInfo, String>,
    pub held: bool,
    /// How it ended, as its integration reads it (`None`: not yet).
    pub ended: Option<Ended>,
    /// Whether every pod is ready or done (`None`: the kind cannot say).
    pub pods_ready: Option<bool>,
    /// Being deleted (a finalizer may keep the object a while).
    pub deleting: bool,
    pub uid: String,
    pub created: Option<Millis>,
    /// It names a queue (Arbiter's or Kueue's label).
    pub queue_label: bool,
    /// It carries an admission record of Arbiter's.
    pub recorded: bool,
    /// The uid of the failed job it was created anew in place of.
    pub retry_of: Option<String>,
    /// Its `metadata.generation`, which `info` was extracted at.
    generation: Option<i64>,
}

impl ObservedJob {
    /// Reads `object`; `before`, the same job's last reading, gives its
    /// pod sets when only its status changed since.
    fn read(
        object: &DynamicObject,
        before: Option<&ObservedJob>,
        integrations: &Integrations,
        watch: &JobWatch,
    ) -> ObservedJob {
        let value = match serde_json::to_value(object) {
            Ok(v) => v,
            Err(e) => Value::String(e.to_string()),
        };
        let integration = integration(integrations, watch);
        let generation = object.metadata.generation;
        let unchanged = before.and_then(|before| {
            let info = before.info.as_ref().ok()?;
            let meta = &object.metadata;
            let same = generation.is_some()
                && before.generation == generation
                && meta.uid.as_deref() == Some(before.uid.as_str())
                && meta
                    .labels
                    .as_ref()
                    .map_or(info.labels.is_empty(), |l| *l == info.labels)
                && meta
                    .annotations
                    .as_ref()
                    .map_or(info.annotations.is_empty(), |a| *a == info.annotations);
            same.then(|| info.clone())
        });
        let progress = integration.progress(&value);
        ObservedJob {
            generation,
            info: match unchanged {
                Some(info) => Ok(info),
                None => integration.extract(&value).map_err(|e| e.to_string()),
            },
            held: integration.is_held(&value),
            ended: progress.ended.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot tell whether the job ended; taken as running");
                None
            }),
            pods_ready: progress.pods_ready.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot tell whether the job's pods are ready; taken as not ready");
                Some(false)
            }),
            deleting: value.pointer("/metadata/deletionTimestamp").is_some(),
            uid: uid(&value),
            created: jobs::created_at(&value),
            queue_label: queue_label(&value),
            recorded: inject::recorded(&value).is_some(),
            retry_of: inject::retry_of(&value),
        }
    }
}

/// The integration a job watch is for.
pub(crate) fn integration<'a>(
    integrations: &'a Integrations,
    watch: &JobWatch,
) -> &'a arbiter_core::jobs::Integration {
    let (api_version, kind) = integrations
        .kinds()
        .nth(watch.integration)
        .expect("job watches index the integrations");
    integrations
        .find(api_version, kind)
        .expect("a kind the integrations list")
}

/// Every job of every watched kind, as last read, by key.
#[derive(Default)]
pub(crate) struct JobIndex {
    jobs: BTreeMap<JobKey, ObservedJob>,
    /// The reflector's object each entry was read from (the store swaps in
    /// a new `Arc` when an object changes, and the entry holds the old one,
    /// so the same address is the same version).
    read_from: HashMap<JobKey, Arc<DynamicObject>>,
    /// How many jobs ask for each resource.
    resources: BTreeMap<String, usize>,
    /// The jobs the last refresh read again or dropped.
    pub changed: Vec<JobKey>,
}

impl JobIndex {
    /// Brings the index up to the stores: the objects each watch noted as
    /// changed looked up, new versions read, gone ones dropped.
    pub fn refresh(&mut self, watches: &[JobWatch], integrations: &Integrations) {
        let mut changed = Vec::new();
        // Changes of every kind in the order they were seen, so jobs
        // created in the same second are queued in that order.
        let mut noted_objects = Vec::new();
        for (index, watch) in watches.iter().enumerate() {
            let store = &watch.watched.store;
            let noted = watch.watched.changes.take();
            if noted.all {
                let mut present = HashSet::new();
                let mut read = Vec::new();
                for object in store.state() {
                    let key = JobKey {
                        watch: index,
                        namespace: object.metadata.namespace.clone().unwrap_or_default(),
                        name: object.metadata.name.clone().unwrap_or_default(),
                    };
                    present.insert(key.clone());
                    if self.look(&key, object, integrations, watch) {
                        read.push(key);
                    }
                }
                // A store lists in no order; by name, the same every time.
                read.sort();
                changed.extend(read);
                let gone: Vec<JobKey> = self
                    .read_from
                    .keys()
                    .filter(|k| k.watch == index && !present.contains(*k))
                    .cloned()
                    .collect();
                for key in gone {
                    self.drop_job(&key);
                    changed.push(key);
                }
                continue;
            }
            noted_objects.extend(
                noted
                    .objects
                    .into_iter()
                    .map(|((namespace, name), seen)| (seen, index, namespace, name)),
            );
        }
        noted_objects.sort_unstable_by_key(|(seen, ..)| *seen);
        for (_, index, namespace, name) in noted_objects {
            let watch = &watches[index];
            let key = JobKey {
                watch: index,
                namespace,
                name,
            };
            let mut reference =
                ObjectRef::<DynamicObject>::new_with(&key.name, watch.resource.clone());
            if !key.namespace.is_empty() {
                reference = reference.within(&key.namespace);
            }
            let touched = match watch.watched.store.get(&reference) {
                Some(object) => self.look(&key, object, integrations, watch),
                None => self.drop_job(&key),
            };
            if touched {
                changed.push(key);
            }
        }
        self.changed = changed;
    }

    /// Reads `object` unless it is the version last read. Returns whether it was read.
    fn look(
        &mut self,
        key: &JobKey,
        object: Arc<DynamicObject>,
        integrations: &Integrations,
        watch: &JobWatch,
    ) -> bool {
        if self
            .read_from
            .get(key)
            .is_some_and(|o| Arc::ptr_eq(o, &object))
        {
            return false;
        }
        let seen = ObservedJob::read(&object, self.jobs.get(key), integrations, watch);
        self.count(&seen, 1);
        if let Some(before) = self.jobs.insert(key.clone(), seen) {
            self.count(&before, -1);
        }
        self.read_from.insert(key.clone(), object);
        true
    }

    /// Forgets a job gone from its store. Returns whether it was known.
    fn drop_job(&mut self, key: &JobKey) -> bool {
        self.read_from.remove(key);
        match self.jobs.remove(key) {
            Some(before) => {
                self.count(&before, -1);
                true
            }
            None => false,
        }
    }

    fn count(&mut self, seen: &ObservedJob, delta: isize) {
        let Ok(info) = &seen.info else {
            return;
        };
        for pod_set in &info.pod_sets {
            for name in pod_set.requests.keys() {
                let slot = self.resources.entry(name.clone()).or_default();
                *slot = slot.saturating_add_signed(delta);
                if *slot == 0 {
                    self.resources.remove(name);
                }
            }
        }
    }

    /// The resources some job asks for.
    pub fn resources(&self) -> impl Iterator<Item = &String> {
        self.resources.keys()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&JobKey, &ObservedJob)> {
        self.jobs.iter()
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn get(&self, key: &JobKey) -> Option<&ObservedJob> {
        self.jobs.get(key)
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ApiResource;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use serde_json::json;

    use super::*;
    use crate::watch::Watched;

    fn job(name: &str, version: &str, cpu: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "team-a", "resourceVersion": version,
                "uid": format!("uid-{name}"), "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": true, "parallelism": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {cpu: "1"}}}]}}}
        }))
        .unwrap()
    }

    /// One watch of batch/v1 Jobs over a store the test writes.
    fn batch_jobs(integrations: &Integrations) -> (Vec<JobWatch>, Writer<DynamicObject>) {
        let index_of_job = integrations
            .kinds()
            .position(|(a, k)| a == "batch/v1" && k == "Job")
            .unwrap();
        let resource = ApiResource::erase::<k8s_openapi::api::batch::v1::Job>(&());
        let writer = Writer::new(resource.clone());
        let watches = vec![JobWatch {
            integration: index_of_job,
            resource,
            watched: Watched {
                store: writer.as_reader(),
                task: tokio::spawn(async {}),
                what: "Job".into(),
                changes: Default::default(),
            },
        }];
        (watches, writer)
    }

    #[tokio::test]
    async fn pod_sets_are_extracted_again_only_when_the_spec_labels_or_annotations_change() {
        let integrations = Integrations::builtin();
        let (watches, mut writer) = batch_jobs(&integrations);
        let mut apply = |event: watcher::Event<DynamicObject>| {
            writer.apply_watcher_event(&event);
            watches[0].watched.changes.note(&event);
        };
        let at = |version: &str, generation: i64, cpu: &str| {
            let mut job = job("a", version, cpu);
            job.metadata.generation = Some(generation);
            job
        };
        let mut index = JobIndex::default();
        let requests = |index: &JobIndex| -> Vec<String> {
            let (_, seen) = index.iter().next().unwrap();
            seen.info.as_ref().unwrap().pod_sets[0]
                .requests
                .keys()
                .cloned()
                .collect()
        };
        apply(watcher::Event::Apply(at("1", 1, "cpu")));
        index.refresh(&watches, &integrations);
        assert_eq!(requests(&index), ["cpu"]);
        // A new version at the same generation (its status changed): the
        // pod sets are not read again (what the spec says here is not seen).
        let mut finished = at("2", 1, "nvidia.com/gpu");
        finished.data["status"] = json!({"succeeded": 1});
        apply(watcher::Event::Apply(finished));
        index.refresh(&watches, &integrations);
        assert_eq!(index.changed.len(), 1, "the new version is read");
        assert_eq!(requests(&index), ["cpu"]);
        // A new generation, or new labels, are read again.
        apply(watcher::Event::Apply(at("3", 2, "nvidia.com/gpu")));
        index.refresh(&watches, &integrations);
        assert_eq!(requests(&index), ["nvidia.com/gpu"]);
        let mut relabelled = at("4", 2, "memory");
        relabelled
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("team".into(), "a".into());
        apply(watcher::Event::Apply(relabelled));
        index.refresh(&watches, &integrations);
        assert_eq!(requests(&index), ["memory"]);
    }

    #[tokio::test]
    async fn only_new_and_changed_jobs_are_read_and_gone_ones_are_dropped() {
        let integrations = Integrations::builtin();
        let (watches, mut writer) = batch_jobs(&integrations);
        let mut apply = |event: watcher::Event<DynamicObject>| {
            writer.apply_watcher_event(&event);
            watches[0].watched.changes.note(&event);
        };
        apply(watcher::Event::Apply(job("a", "1", "cpu")));
        apply(watcher::Event::Apply(job("b", "1", "nvidia.com/gpu")));
        let mut index = JobIndex::default();
        index.refresh(&watches, &integrations);
        assert_eq!(index.len(), 2);
        assert_eq!(index.changed.len(), 2);
        let resources: Vec<_> = index.resources().cloned().collect();
        assert_eq!(resources, ["cpu", "nvidia.com/gpu"]);
        assert!(index.iter().all(|(_, s)| s.held && s.info.is_ok()));

        index.refresh(&watches, &integrations);
        assert!(index.changed.is_empty(), "nothing changed, nothing read");

        let mut released = job("a", "2", "cpu");
        released.data["spec"]["suspend"] = json!(false);
        apply(watcher::Event::Apply(released));
        apply(watcher::Event::Delete(job("b", "1", "nvidia.com/gpu")));
        index.refresh(&watches, &integrations);
        let changed: Vec<_> = index.changed.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(changed.len(), 2);
        assert!(changed.contains(&"a") && changed.contains(&"b"));
        assert_eq!(index.len(), 1);
        let (key, seen) = index.iter().next().unwrap();
        assert_eq!(key.name, "a");
        assert!(!seen.held);
        let resources: Vec<_> = index.resources().cloned().collect();
        assert_eq!(resources, ["cpu"], "a resource no job asks for is dropped");

        // Only what the watch noted is looked at; after a relist, everything.
        writer.apply_watcher_event(&watcher::Event::Apply(job("c", "1", "cpu")));
        index.refresh(&watches, &integrations);
        assert!(index.changed.is_empty(), "not noted, not looked at");
        assert_eq!(index.len(), 1);
        watches[0]
            .watched
            .changes
            .note(&watcher::Event::<DynamicObject>::Init);
        index.refresh(&watches, &integrations);
        let changed: Vec<_> = index.changed.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(
            changed,
            ["c"],
            "a relist reads what is new, not what was read"
        );
        assert_eq!(index.len(), 2);
    }
}
