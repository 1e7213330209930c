//! Pods of pod sets placed per card: admission gave their template the
//! `arbiter.dev/placement` scheduling gate and the job's uid and the pod
//! set's index as labels (`inject`); here each such pod, once created, is
//! given one pod's share of the core's placement — its node (a
//! `kubernetes.io/hostname` node selector, which a gated pod may gain) and
//! its cards (the `arbiter.dev/gpu-cards` annotation a GPU-sharing device
//! plugin reads) — and its gate is taken off, in one merge patch carrying
//! the pod's `resourceVersion`. Kueue's topology-aware ungater does the
//! same for domains; this goes down to the card.
//!
//! A pod keeps its place while it runs: the places already given (read
//! back from the pods' annotations, or sent and not yet seen) are taken
//! out before gated pods get the rest, so a pod replaced after a failure
//! takes the place its predecessor left. A pod for which no place is left
//! stays gated. kube-scheduler still runs its filters on the node given.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arbiter_core::scheduler::{Scheduler, WorkloadId};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use crate::inject::{JOB_UID_LABEL, PLACEMENT_GATE, POD_SET_LABEL};
use crate::watch::{self, Watched};

/// On an ungated pod: the Node it was given.
pub const NODE_ANNOTATION: &str = "arbiter.dev/node";

/// On an ungated pod: its cards (see [`Slot::cards_text`]).
pub const CARDS_ANNOTATION: &str = "arbiter.dev/gpu-cards";

/// The Node label a pod's node selector names its Node by.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// One pod's place: a Node and its cards (resource, card index).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slot {
    pub node: String,
    pub cards: Vec<(String, u16)>,
}

impl Slot {
    /// The cards annotation: the card indices, comma-separated (`3`,
    /// `0,1`); when the pod holds cards of several resources, each
    /// resource's as `resource=indices`, separated by `;`.
    pub fn cards_text(&self) -> String {
        let mut by: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (resource, card) in &self.cards {
            by.entry(resource).or_default().push(card.to_string());
        }
        if by.len() == 1 {
            return by.into_values().next().unwrap_or_default().join(",");
        }
        by.into_iter()
            .map(|(r, cards)| format!("{r}={}", cards.join(",")))
            .collect::<Vec<_>>()
            .join(";")
    }

    /// The slot an ungated pod's annotations say it holds; `resources` are
    /// the device resources of its pod set (for the one-resource form).
    fn read(node: &str, cards: &str, resources: &[String]) -> Option<Slot> {
        let mut held = Vec::new();
        for part in cards.split(';').filter(|p| !p.is_empty()) {
            let (resource, indices) = match part.split_once('=') {
                Some((r, i)) => (r.to_string(), i),
                None => (resources.first()?.clone(), part),
            };
            for index in indices.split(',') {
                held.push((resource.clone(), index.trim().parse().ok()?));
            }
        }
        held.sort();
        Some(Slot {
            node: node.to_string(),
            cards: held,
        })
    }
}

/// Pods of one pod set on one Node: how many, and what they hold of each
/// card summed (resource, card, milli-units).
#[derive(Clone, Debug, PartialEq)]
pub struct OnNode {
    pub node: String,
    pub pods: u32,
    pub cards: Vec<(String, u16, i64)>,
}

/// Each pod's place from the pod set's placements: on each Node, its pods
/// in turn take what one asks (`per_pod`: device resource, milli-units) of
/// each device from its cards in order. The core placed them one by one
/// the same way, so each card's sum splits exactly.
pub fn slots(placements: &[OnNode], per_pod: &[(String, i64)]) -> Vec<Slot> {
    let mut slots = Vec::new();
    for placement in placements {
        let mut left = placement.cards.clone();
        for _ in 0..placement.pods {
            let mut cards = Vec::new();
            for (resource, ask) in per_pod {
                let mut need = *ask;
                for (r, card, amount) in left.iter_mut() {
                    if need <= 0 {
                        break;
                    }
                    if r == resource && *amount > 0 {
                        let take = need.min(*amount);
                        *amount -= take;
                        need -= take;
                        cards.push((r.clone(), *card));
                    }
                }
            }
            cards.sort();
            slots.push(Slot {
                node: placement.node.clone(),
                cards,
            });
        }
    }
    slots
}

/// What the ungater reads of a labelled pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub job_uid: String,
    pub pod_set: u32,
    /// Still carries the placement gate.
    pub gated: bool,
    /// Its other scheduling gates (kept).
    pub other_gates: Vec<Value>,
    /// Finished or being deleted: it holds no place.
    pub done: bool,
    /// The node and cards annotations, if given.
    pub placed: Option<(String, String)>,
    /// Creation time (RFC 3339), the order gated pods get places in.
    pub created: String,
}

/// A labelled pod as the ungater reads it; `None` without the labels.
pub fn view(pod: &Pod) -> Option<PodView> {
    let meta = &pod.metadata;
    let labels = meta.labels.as_ref()?;
    let job_uid = labels.get(JOB_UID_LABEL)?.clone();
    let pod_set = labels.get(POD_SET_LABEL)?.parse().ok()?;
    let gates = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.clone())
        .unwrap_or_default();
    let gated = gates.iter().any(|g| g.name == PLACEMENT_GATE);
    let other_gates = gates
        .iter()
        .filter(|g| g.name != PLACEMENT_GATE)
        .map(|g| json!({"name": g.name}))
        .collect();
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let annotations = meta.annotations.as_ref();
    let placed = annotations.and_then(|a| {
        Some((
            a.get(NODE_ANNOTATION)?.clone(),
            a.get(CARDS_ANNOTATION).cloned().unwrap_or_default(),
        ))
    });
    Some(PodView {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone().unwrap_or_default(),
        job_uid,
        pod_set,
        gated,
        other_gates,
        done: meta.deletion_timestamp.is_some() || matches!(phase, Some("Succeeded" | "Failed")),
        placed,
        created: meta
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
    })
}

/// The places gated `pods` of one pod set get: `slots` less those held by
/// its running pods (their annotations) and those sent and not yet seen
/// (`sent`, by pod uid), given in creation order. `resources`: the pod
/// set's device resources.
pub fn assign<'a>(
    slots: &[Slot],
    pods: &[&'a PodView],
    sent: &HashMap<String, Slot>,
    resources: &[String],
) -> Vec<(&'a PodView, Slot)> {
    let mut free = slots.to_vec();
    let mut take = |slot: &Slot| {
        if let Some(i) = free.iter().position(|s| s == slot) {
            free.remove(i);
        }
    };
    let mut gated = Vec::new();
    for pod in pods {
        if pod.done {
            continue;
        }
        if let Some(slot) = sent.get(&pod.uid) {
            take(slot);
        } else if pod.gated {
            gated.push(*pod);
        } else if let Some((node, cards)) = &pod.placed {
            if let Some(slot) = Slot::read(node, cards, resources) {
                take(&slot);
            }
        }
    }
    gated.sort_by(|a, b| (&a.created, &a.name).cmp(&(&b.created, &b.name)));
    gated.into_iter().zip(free).collect()
}

/// The merge patch that gives `pod` its place (`hostname`: the Node's
/// hostname label) and takes off the gate, only onto the version read.
pub fn patch(pod: &PodView, slot: &Slot, hostname: &str) -> Value {
    let gates = match pod.other_gates.is_empty() {
        true => Value::Null,
        false => Value::Array(pod.other_gates.clone()),
    };
    json!({
        "metadata": {
            "resourceVersion": pod.resource_version,
            "annotations": {NODE_ANNOTATION: slot.node, CARDS_ANNOTATION: slot.cards_text()},
        },
        "spec": {
            "nodeSelector": {HOSTNAME_LABEL: hostname},
            "schedulingGates": gates,
        }
    })
}

/// The places of pod set `pod_set` of admitted workload `id`, if its pods
/// hold cards (it is gated) and every node has a name.
pub fn places_of(scheduler: &Scheduler, id: WorkloadId, pod_set: u32) -> Option<PodSetPlaces> {
    let entry = scheduler.entry(id);
    let admission = entry.admission.as_ref()?;
    let cluster = scheduler.cluster();
    let mine: Vec<_> = admission
        .placements
        .iter()
        .filter(|p| p.pod_set == pod_set)
        .collect();
    if mine.iter().all(|p| p.cards.is_empty()) {
        return None;
    }
    let mut devices: Vec<_> = mine
        .iter()
        .flat_map(|p| p.cards.iter().map(|u| u.resource))
        .collect();
    devices.sort();
    devices.dedup();
    let on = mine
        .iter()
        .map(|p| {
            Some(OnNode {
                node: scheduler.node_name(p.flavor, p.node)?.to_string(),
                pods: p.pods,
                cards: p
                    .cards
                    .iter()
                    .map(|u| {
                        (
                            cluster.resource_name(u.resource).to_string(),
                            u.card,
                            u.amount.milli(),
                        )
                    })
                    .collect(),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let per_pod: Vec<(String, i64)> = entry
        .workload
        .pod_sets
        .get(pod_set as usize)?
        .per_pod
        .iter()
        .filter(|(r, _)| devices.contains(r))
        .map(|&(r, a)| (cluster.resource_name(r).to_string(), a.milli()))
        .collect();
    Some(PodSetPlaces {
        slots: slots(&on, &per_pod),
        resources: devices
            .iter()
            .map(|&r| cluster.resource_name(r).to_string())
            .collect(),
    })
}

/// How long a pod waits after failed patches in a row: 1 s, doubled per
/// failure, up to a minute.
const RETRY: crate::retry::WriteBackoff = crate::retry::WriteBackoff {
    first: Duration::from_secs(1),
    max: Duration::from_secs(60),
};

fn retry_delay(failures: u32) -> Duration {
    RETRY.delay(failures)
}

/// The places of one pod set, as the driver knows them.
pub struct PodSetPlaces {
    pub slots: Vec<Slot>,
    /// The pod set's device resources.
    pub resources: Vec<String>,
}

/// The labelled pods' watch and the patches in flight.
pub struct Ungater {
    client: Client,
    pods: Watched<Pod>,
    /// Places sent, by pod uid, until the pod is seen ungated or gone.
    sent: HashMap<String, Slot>,
    /// Pods whose patch failed, by uid: failures in a row and when to try
    /// again (1 s, doubling to a minute), so a patch the API keeps refusing
    /// (a template already selecting another hostname) is not a hot loop.
    failed: HashMap<String, (u32, Instant)>,
    done_tx: mpsc::UnboundedSender<(PodRef, Result<(), String>)>,
    done_rx: mpsc::UnboundedReceiver<(PodRef, Result<(), String>)>,
    wake: Arc<Notify>,
}

/// A pod as a patch's answer names it: namespace, name, uid.
pub type PodRef = (String, String, String);

/// A pod the API refused its place, the first time in a row: the pod and
/// the API's message (the driver tells it in a Warning Event on the pod).
pub type Refused = (PodRef, String);

impl Ungater {
    /// Starts watching the pods labelled with a pod set.
    pub fn start(client: Client, wake: Arc<Notify>) -> Ungater {
        let config = watcher::Config::default().labels(POD_SET_LABEL);
        let pods = watch::typed_selected::<Pod>(&client, wake.clone(), config);
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Ungater {
            client,
            pods,
            sent: HashMap::new(),
            failed: HashMap::new(),
            done_tx,
            done_rx,
            wake,
        }
    }

    /// One pass, when pods changed, a patch finished, or `force`: gated
    /// pods get places (`places`: by namespace, job uid and pod set; `None`
    /// unless a job of that uid in that namespace is admitted with places,
    /// so a pod labelled with another namespace's job gets nothing) and
    /// patches are sent. `hostname`: a Node's hostname label by its name.
    /// Returns the pods whose patch the API refused for the first time in
    /// a row since the last pass.
    pub fn pass(
        &mut self,
        force: bool,
        places: impl Fn(&str, &str, u32) -> Option<PodSetPlaces>,
        hostname: impl Fn(&str) -> String,
    ) -> Vec<Refused> {
        let mut finished = false;
        let mut refused = Vec::new();
        while let Ok((pod, result)) = self.done_rx.try_recv() {
            finished = true;
            let uid = pod.2.clone();
            match result {
                Ok(()) => {
                    self.failed.remove(&uid);
                }
                Err(e) => {
                    // Sent again on a later pass, read afresh.
                    self.sent.remove(&uid);
                    let failures = self.failed.get(&uid).map_or(1, |f| f.0 + 1);
                    let delay = retry_delay(failures);
                    self.failed
                        .insert(uid.clone(), (failures, Instant::now() + delay));
                    if failures == 1 {
                        refused.push((pod, e.clone()));
                    }
                    tracing::warn!(pod_uid = %uid, error = %e, failures, retry_in_s = delay.as_secs(), "giving a pod its place failed; trying again");
                    let wake = self.wake.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        wake.notify_one();
                    });
                }
            }
        }
        let due = self.failed.values().any(|&(_, at)| at <= Instant::now());
        if self.pods.changes.take().is_empty() && !finished && !force && !due {
            return refused;
        }
        let views: Vec<PodView> = self
            .pods
            .store
            .state()
            .iter()
            .filter_map(|p| view(p))
            .collect();
        // A place sent is held by the pod until it shows ungated or goes.
        let by_uid: HashMap<&str, &PodView> = views.iter().map(|v| (v.uid.as_str(), v)).collect();
        self.sent
            .retain(|uid, _| by_uid.get(uid.as_str()).is_some_and(|v| v.gated && !v.done));
        self.failed
            .retain(|uid, _| by_uid.get(uid.as_str()).is_some_and(|v| v.gated && !v.done));
        // A pod whose patch failed waits out its backoff (its place stays
        // free for another pod meanwhile).
        let now = Instant::now();
        let waiting = |v: &PodView| self.failed.get(&v.uid).is_some_and(|&(_, at)| at > now);
        let mut groups: BTreeMap<(&str, &str, u32), Vec<&PodView>> = BTreeMap::new();
        for v in views.iter().filter(|v| !waiting(v)) {
            groups
                .entry((v.namespace.as_str(), v.job_uid.as_str(), v.pod_set))
                .or_default()
                .push(v);
        }
        for ((namespace, job_uid, pod_set), pods) in groups {
            if !pods
                .iter()
                .any(|p| p.gated && !p.done && !self.sent.contains_key(&p.uid))
            {
                continue;
            }
            let Some(places) = places(namespace, job_uid, pod_set) else {
                continue;
            };
            for (pod, slot) in assign(&places.slots, &pods, &self.sent, &places.resources) {
                let body = patch(pod, &slot, &hostname(&slot.node));
                self.sent.insert(pod.uid.clone(), slot.clone());
                let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
                let (name, done) = (pod.name.clone(), self.done_tx.clone());
                let reference = (pod.namespace.clone(), pod.name.clone(), pod.uid.clone());
                tracing::info!(pod = %format!("{}/{name}", pod.namespace), node = %slot.node, cards = %slot.cards_text(), "pod given its place");
                tokio::spawn(async move {
                    let result = api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string());
                    let _ = done.send((reference, result));
                });
            }
        }
        refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MILLI: &str = "example.com/gpu-milli";

    fn on(node: &str, pods: u32, cards: &[(u16, i64)]) -> OnNode {
        OnNode {
            node: node.into(),
            pods,
            cards: cards
                .iter()
                .map(|&(c, m)| (MILLI.to_string(), c, m))
                .collect(),
        }
    }

    fn slot(node: &str, cards: &[u16]) -> Slot {
        Slot {
            node: node.into(),
            cards: cards.iter().map(|&c| (MILLI.to_string(), c)).collect(),
        }
    }

    fn pod(name: &str, gated: bool, placed: Option<(&str, &str)>) -> PodView {
        PodView {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: "7".into(),
            job_uid: "job".into(),
            pod_set: 0,
            gated,
            other_gates: Vec::new(),
            done: false,
            placed: placed.map(|(n, c)| (n.to_string(), c.to_string())),
            created: "2026-12-03T10:00:00Z".into(),
        }
    }

    #[test]
    fn shares_split_per_card_and_whole_cards_go_k_at_a_time() {
        // Three pods of 0.5 GPU: two on card 1, one on card 0.
        let shares = slots(
            &[on("n", 3, &[(0, 500_000), (1, 1_000_000)])],
            &[(MILLI.into(), 500_000)],
        );
        assert_eq!(shares, [slot("n", &[0]), slot("n", &[1]), slot("n", &[1])]);
        // Two pods of two whole cards each.
        let whole = slots(
            &[on(
                "m",
                2,
                &[
                    (0, 1_000_000),
                    (1, 1_000_000),
                    (4, 1_000_000),
                    (5, 1_000_000),
                ],
            )],
            &[(MILLI.into(), 2_000_000)],
        );
        assert_eq!(whole, [slot("m", &[0, 1]), slot("m", &[4, 5])]);
    }

    #[test]
    fn the_cards_annotation_reads_back_as_written() {
        let resources = [MILLI.to_string()];
        for s in [slot("n", &[3]), slot("n", &[0, 1])] {
            assert_eq!(
                Slot::read("n", &s.cards_text(), &resources),
                Some(s.clone())
            );
        }
        let two = Slot {
            node: "n".into(),
            cards: vec![("a/x".into(), 1), (MILLI.into(), 2)],
        };
        assert_eq!(two.cards_text(), format!("a/x=1;{MILLI}=2"));
        assert_eq!(Slot::read("n", &two.cards_text(), &resources), Some(two));
        assert_eq!(Slot::read("n", "x", &resources), None);
    }

    #[test]
    fn gated_pods_get_the_places_running_and_sent_pods_do_not_hold() {
        let slots = [slot("a", &[0]), slot("a", &[1]), slot("b", &[0])];
        let running = pod("p0", false, Some(("a", "1")));
        let mut finished = pod("p1", false, Some(("a", "0")));
        finished.done = true;
        let in_flight = pod("p2", true, None);
        let waiting = [
            pod("p4", true, None),
            pod("p3", true, None),
            pod("p5", true, None),
        ];
        let sent: HashMap<String, Slot> = [(in_flight.uid.clone(), slot("b", &[0]))].into();
        let mut pods = vec![&running, &finished, &in_flight];
        pods.extend(waiting.iter());
        let given = assign(&slots, &pods, &sent, &[MILLI.to_string()]);
        let given: Vec<(&str, Slot)> = given
            .into_iter()
            .map(|(p, s)| (p.name.as_str(), s))
            .collect();
        // Only a/0 is left (the finished pod's); p3 is first by name at the same time; p4, p5 wait.
        assert_eq!(given, [("p3", slot("a", &[0]))]);
    }

    #[test]
    fn a_refused_patch_is_tried_again_later_and_later() {
        let secs: Vec<u64> = (1..=9).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(retry_delay(0), RETRY.first);
    }

    #[test]
    fn the_patch_keeps_other_gates_and_carries_the_version_read() {
        let mut p = pod("p", true, None);
        let body = patch(&p, &slot("a", &[2]), "host-a");
        assert_eq!(body["metadata"]["resourceVersion"], "7");
        assert_eq!(body["metadata"]["annotations"][CARDS_ANNOTATION], "2");
        assert_eq!(body["spec"]["nodeSelector"][HOSTNAME_LABEL], "host-a");
        assert_eq!(body["spec"]["schedulingGates"], Value::Null);
        p.other_gates = vec![json!({"name": "other"})];
        let body = patch(&p, &slot("a", &[2]), "host-a");
        assert_eq!(body["spec"]["schedulingGates"], json!([{"name": "other"}]));
    }
}
