//! The typed views every policy sees (docs/design.md §4) and the request/response
//! types of each hook: the CEL variables and the JSON of plugin ABI v1 are
//! the same structures, defined once in `arbiter-abi` (which the Rust
//! plugin SDK shares) and re-exported here. Built from the core's
//! read-only state by [`build`]; their JSON Schemas are what
//! `plugin-sdk/schema/` ships. Here too: the lean `weight` request
//! ([`WeightFields`], [`WeightRequest`]). Never mutates scheduler state and
//! never reads a clock: `now` comes from the core's request.

use std::collections::BTreeMap;

use serde::Serialize;

pub use arbiter_abi::{
    AdmissionInput, AdmissionOutput, AutoscaleInput, AutoscaleOutput, ClusterQueueView, CohortView,
    DeviceView, EstimateView, FairShareInput, FairShareOutput, FlavorInput, FlavorOutput,
    FlavorView, NodeView, PlacementInput, PlacementOutput, PodSetView, PodView, Quantities,
    QueueView, TenantView, TypicalPodView, WeightInput, WeightOutput, WorkloadView,
};

/// The fields of a `weight` request a plugin reads, as it declares them with
/// the optional `arbiter_weight_fields` export (plugin-sdk/ABI.md "Lean
/// weight requests"): `workloads.<field>` for each [`WorkloadView`] field,
/// and the context maps `queues`, `clusterQueues` and `tenants`. The host
/// then sends only those, plus `now` and `params`; a plugin that declares
/// nothing gets the whole request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightFields {
    /// Bit `i` set: [`WORKLOAD_FIELDS`]`[i]` is sent.
    workload: u32,
    queues: bool,
    cluster_queues: bool,
    tenants: bool,
}

/// The JSON names of [`WorkloadView`]'s fields, in serialisation order (a
/// test checks them against the schema).
pub const WORKLOAD_FIELDS: [&str; 19] = [
    "name",
    "namespace",
    "kind",
    "labels",
    "annotations",
    "priority",
    "priorityClass",
    "priorityWeight",
    "queueName",
    "clusterQueue",
    "podSets",
    "requests",
    "gpus",
    "ageSeconds",
    "retries",
    "evictions",
    "estimate",
    "flavors",
    "eligibleFlavors",
];

const CONTEXT_MAPS: [&str; 3] = ["queues", "clusterQueues", "tenants"];

impl WeightFields {
    /// The whole request: what a plugin that declares nothing gets.
    pub const ALL: WeightFields = WeightFields {
        workload: (1 << WORKLOAD_FIELDS.len()) - 1,
        queues: true,
        cluster_queues: true,
        tenants: true,
    };

    /// Reads a declaration; an unknown name is an error that lists the known ones.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<WeightFields, String> {
        let mut fields = WeightFields {
            workload: 0,
            queues: false,
            cluster_queues: false,
            tenants: false,
        };
        for name in names {
            let name = name.as_ref();
            if let Some(field) = name.strip_prefix("workloads.") {
                match WORKLOAD_FIELDS.iter().position(|&f| f == field) {
                    Some(i) => fields.workload |= 1 << i,
                    None => {
                        return Err(format!(
                            "declares weight field {name:?}, but a workload has no field \
                             {field:?}; the fields are {}",
                            WORKLOAD_FIELDS.join(", ")
                        ))
                    }
                }
                continue;
            }
            match name {
                "queues" => fields.queues = true,
                "clusterQueues" => fields.cluster_queues = true,
                "tenants" => fields.tenants = true,
                // Always sent; naming them is harmless.
                "now" | "params" => {}
                _ => {
                    return Err(format!(
                        "declares weight field {name:?}, which a weight request does not \
                         have; name workload fields as workloads.<field> ({}) or the maps {}",
                        WORKLOAD_FIELDS.join(", "),
                        CONTEXT_MAPS.join(", ")
                    ))
                }
            }
        }
        Ok(fields)
    }

    /// The declaration in its canonical form (known order, no duplicates).
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = WORKLOAD_FIELDS
            .iter()
            .enumerate()
            .filter(|(i, _)| self.workload & (1 << i) != 0)
            .map(|(_, f)| format!("workloads.{f}"))
            .collect();
        for (on, map) in [self.queues, self.cluster_queues, self.tenants]
            .into_iter()
            .zip(CONTEXT_MAPS)
        {
            if on {
                names.push(map.to_string());
            }
        }
        names
    }
}

/// Which context views a policy reads besides the workload: the engine
/// builds only the views some matching policy reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reads {
    pub queue: bool,
    pub cluster_queue: bool,
    pub tenant: bool,
    pub cohort: bool,
    /// The ClusterQueue view's `nominal` and `usage` maps (the costly part
    /// of building it): left empty when no policy reads them.
    pub quotas: bool,
}

impl Reads {
    pub const ALL: Reads = Reads {
        queue: true,
        cluster_queue: true,
        tenant: true,
        cohort: true,
        quotas: true,
    };

    pub fn union(self, other: Reads) -> Reads {
        Reads {
            queue: self.queue || other.queue,
            cluster_queue: self.cluster_queue || other.cluster_queue,
            tenant: self.tenant || other.tenant,
            cohort: self.cohort || other.cohort,
            quotas: self.quotas || other.quotas,
        }
    }
}

impl WeightFields {
    /// The context maps sent, as views read (a weight request has no cohort).
    pub fn reads(&self) -> Reads {
        Reads {
            queue: self.queues,
            cluster_queue: self.cluster_queues,
            tenant: self.tenants,
            cohort: false,
            quotas: self.cluster_queues,
        }
    }
}

/// A `weight` request as the host serialises it: borrowed views, cut to
/// the fields the plugin reads.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WeightRequest<'a> {
    workloads: Workloads<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    queues: Option<&'a BTreeMap<String, QueueView>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_queues: Option<&'a BTreeMap<String, ClusterQueueView>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tenants: Option<&'a BTreeMap<String, TenantView>>,
    now: f64,
    params: &'a serde_json::Value,
}

impl<'a> WeightRequest<'a> {
    pub fn new(
        input: &'a WeightInput,
        params: &'a serde_json::Value,
        fields: &WeightFields,
    ) -> WeightRequest<'a> {
        WeightRequest {
            workloads: Workloads {
                views: &input.workloads,
                mask: fields.workload,
            },
            queues: fields.queues.then_some(&input.queues),
            cluster_queues: fields.cluster_queues.then_some(&input.cluster_queues),
            tenants: fields.tenants.then_some(&input.tenants),
            now: input.now,
            params,
        }
    }
}

struct Workloads<'a> {
    views: &'a [WorkloadView],
    mask: u32,
}

impl Serialize for Workloads<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.mask == WeightFields::ALL.workload {
            return self.views.serialize(serializer);
        }
        serializer.collect_seq(self.views.iter().map(|view| Projected {
            view,
            mask: self.mask,
        }))
    }
}

/// One workload view with only the fields in `mask`, each serialised as the
/// derived `Serialize` does.
struct Projected<'a> {
    view: &'a WorkloadView,
    mask: u32,
}

impl Serialize for Projected<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (w, mask) = (self.view, self.mask);
        let mut map = serializer.serialize_map(Some(mask.count_ones() as usize))?;
        macro_rules! fields {
            ($($i:literal $field:ident),* $(,)?) => {
                $(
                    if mask & (1 << $i) != 0 {
                        map.serialize_entry(WORKLOAD_FIELDS[$i], &w.$field)?;
                    }
                )*
            };
        }
        fields!(
            0 name, 1 namespace, 2 kind, 3 labels, 4 annotations, 5 priority,
            6 priority_class, 7 priority_weight, 8 queue_name, 9 cluster_queue,
            10 pod_sets, 11 requests, 12 gpus, 13 age_seconds, 14 retries,
            15 evictions, 16 estimate, 17 flavors, 18 eligible_flavors,
        );
        map.end()
    }
}

/// Building views from what a hook may read of the scheduler ([`HookState`]).
pub mod build {
    use super::*;
    use arbiter_core::model::cluster::{ClusterQueueId, FlavorId, FlavorResource, ResourceId};
    use arbiter_core::model::{Amount, Millis};
    use arbiter_core::scheduler::capacity::Candidate;
    use arbiter_core::scheduler::{Entry, HookState};

    /// Seconds as policies see them.
    pub fn seconds(t: Millis) -> f64 {
        t.as_secs_f64()
    }

    fn quantities(state: HookState<'_>, per: &[(ResourceId, Amount)]) -> Quantities {
        per.iter()
            .map(|&(r, a)| (state.cluster().resource_name(r).to_string(), a.as_f64()))
            .collect()
    }

    pub fn workload(state: HookState<'_>, entry: &Entry, now: Millis) -> WorkloadView {
        let cluster = state.cluster();
        let wl = &entry.workload;
        let mut requests = Quantities::new();
        // Which of the queue's flavors some pod set may use.
        let listed = state.flavors(wl.cluster_queue);
        let mut usable = vec![false; listed.len()];
        let pod_sets = wl
            .pod_sets
            .iter()
            .map(|ps| {
                for &(r, a) in &ps.per_pod {
                    *requests
                        .entry(cluster.resource_name(r).to_string())
                        .or_insert(0.0) += a.as_f64() * ps.count as f64;
                }
                let eligible = state.eligible_flavors(wl.cluster_queue, ps);
                for (i, f) in listed.iter().enumerate() {
                    usable[i] |= eligible.contains(f);
                }
                PodSetView {
                    name: ps.name.clone(),
                    count: ps.count,
                    min_count: ps.min_count,
                    requests: quantities(state, &ps.per_pod),
                    eligible_flavors: eligible.iter().map(|&f| flavor_name(state, f)).collect(),
                }
            })
            .collect();
        let gpus = requests
            .get(arbiter_core::scheduler::GPU)
            .copied()
            .unwrap_or(0.0)
            .ceil() as i64;
        WorkloadView {
            name: wl.name.clone(),
            namespace: wl.namespace.clone(),
            kind: wl.kind.clone(),
            labels: wl.labels.clone(),
            annotations: wl.annotations.clone(),
            priority: wl.priority as i64,
            priority_class: wl.priority_class.clone(),
            priority_weight: wl.priority_weight,
            queue_name: wl.queue_name.clone(),
            cluster_queue: cluster.cluster_queue(wl.cluster_queue).name.clone(),
            pod_sets,
            requests,
            gpus,
            age_seconds: seconds(now.saturating_sub(entry.queue_time)),
            retries: entry.retries,
            evictions: entry.evictions,
            estimate: state.estimate(wl.local_queue).map(|e| EstimateView {
                runtime_seconds: seconds(e.runtime),
                samples: e.samples,
            }),
            flavors: entry
                .admission
                .as_ref()
                .map(|a| flavor_names(state, &a.pod_sets))
                .unwrap_or_default(),
            eligible_flavors: listed
                .iter()
                .zip(usable)
                .filter(|&(_, usable)| usable)
                .map(|(&f, _)| flavor_name(state, f))
                .collect(),
        }
    }

    /// Distinct flavor names of an assignment, in pod-set order.
    pub fn flavor_names(
        state: HookState<'_>,
        pod_sets: &[arbiter_core::scheduler::PodSetFlavors],
    ) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for f in pod_sets.iter().flat_map(|ps| ps.flavors.iter()) {
            let name = flavor_name(state, f.1);
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    pub fn queue(state: HookState<'_>, entry: &Entry) -> QueueView {
        let cluster = state.cluster();
        let lq = &cluster.local_queues[entry.workload.local_queue.index()];
        QueueView {
            name: lq.name.clone(),
            namespace: lq.namespace.clone(),
            priority: lq.priority.map(i64::from),
            cluster_queue: cluster.cluster_queue(lq.cluster_queue).name.clone(),
        }
    }

    pub fn tenant(state: HookState<'_>, namespace: &str) -> TenantView {
        let ns = state.cluster().namespaces.get(namespace);
        TenantView {
            name: namespace.to_string(),
            labels: ns.map(|n| n.labels.clone()).unwrap_or_default(),
            annotations: ns.map(|n| n.annotations.clone()).unwrap_or_default(),
        }
    }

    pub fn cohort(state: HookState<'_>, cq: ClusterQueueId) -> Option<CohortView> {
        let cluster = state.cluster();
        let cohort = cluster.cluster_queue(cq).cohort?;
        let c = &cluster.cohorts[cohort.index()];
        Some(CohortView {
            name: c.name.clone(),
            parent: c.parent.map(|p| cluster.cohorts[p.index()].name.clone()),
        })
    }

    /// The ClusterQueue's view; its `nominal` and `usage` maps only with `quotas`.
    pub fn cluster_queue(
        state: HookState<'_>,
        cq: ClusterQueueId,
        quotas: bool,
    ) -> ClusterQueueView {
        let cluster = state.cluster();
        let def = cluster.cluster_queue(cq);
        let mut nominal: BTreeMap<String, Quantities> = BTreeMap::new();
        let mut usage: BTreeMap<String, Quantities> = BTreeMap::new();
        let defined = if quotas { def.quotas.as_slice() } else { &[] };
        for (i, quota) in defined.iter().enumerate() {
            let Some(quota) = quota else { continue };
            let fr = FlavorResource(i as u32);
            let (flavor, resource) = cluster.split(fr);
            let flavor = &cluster.flavors[flavor.index()].name;
            let resource = cluster.resource_name(resource).to_string();
            nominal
                .entry(flavor.clone())
                .or_default()
                .insert(resource.clone(), quota.nominal.as_f64());
            usage
                .entry(flavor.clone())
                .or_default()
                .insert(resource, state.usage(cq, fr).as_f64());
        }
        ClusterQueueView {
            name: def.name.clone(),
            cohort: def.cohort.map(|c| cluster.cohorts[c.index()].name.clone()),
            weight: state.fair_weight(cq),
            share: state.dominant_share(cq),
            decayed_usage: state.decayed_usage(cq),
            nominal,
            usage,
            priority_weight: def.priority_weight,
            admitted: state.admitted_count(cq) as u32,
            pending: state.pending_count(cq) as u32,
            flavors: state
                .flavors(cq)
                .iter()
                .map(|&f| flavor_name(state, f))
                .collect(),
        }
    }

    pub fn flavor_name(state: HookState<'_>, flavor: FlavorId) -> String {
        state.cluster().flavors[flavor.index()].name.clone()
    }

    /// The pod the placement hook places.
    pub fn pod(state: HookState<'_>, per_pod: &[(ResourceId, Amount)]) -> PodView {
        PodView {
            requests: quantities(state, per_pod),
        }
    }

    /// A candidate node of `flavor` (named `<flavor>-<index>`): free and
    /// allocatable for the resources it limits, free per card per device.
    pub fn node(state: HookState<'_>, candidate: &Candidate<'_>) -> NodeView {
        node_named(candidate, flavor_name(state, candidate.flavor), &|r| {
            state.cluster().resource_name(r).to_string()
        })
    }

    /// [`node`] with the flavor's name given and resources named by
    /// `name`: for a caller without a scheduler (a trace replay).
    pub fn node_named(
        candidate: &Candidate<'_>,
        flavor: String,
        name: &dyn Fn(ResourceId) -> String,
    ) -> NodeView {
        let quantities = |per: &[(ResourceId, Amount)]| -> Quantities {
            per.iter().map(|&(r, a)| (name(r), a.as_f64())).collect()
        };
        let mut cards = candidate.cards;
        let devices = candidate
            .devices
            .iter()
            .map(|d| {
                let (own, rest) = cards.split_at((d.cards as usize).min(cards.len()));
                cards = rest;
                DeviceView {
                    resource: name(d.resource),
                    per_card: d.per_card.as_f64(),
                    cards: own.iter().map(|a| a.as_f64()).collect(),
                }
            })
            .collect();
        NodeView {
            index: candidate.node,
            name: format!("{flavor}-{}", candidate.node),
            flavor,
            free: candidate
                .allocatable
                .iter()
                .filter_map(|&(r, _)| Some((name(r), candidate.free.get(r.index())?.as_f64())))
                .collect(),
            allocatable: quantities(candidate.allocatable),
            devices,
            labels: candidate.labels.clone(),
        }
    }

    /// The typical pods of ClusterQueue `cq` ([`HookState::typical_pods`]).
    pub fn typical(state: HookState<'_>, cq: ClusterQueueId) -> Vec<TypicalPodView> {
        state
            .typical_pods(cq)
            .iter()
            .map(|t| TypicalPodView {
                requests: quantities(state, &t.per_pod),
                flavors: t.flavors.iter().map(|&f| flavor_name(state, f)).collect(),
                share: t.share,
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{json, Value};

    pub(crate) fn full_workload() -> WorkloadView {
        WorkloadView {
            name: "train".into(),
            namespace: "research".into(),
            kind: "PyTorchJob".into(),
            labels: BTreeMap::from([("team".into(), "nlp".into())]),
            annotations: BTreeMap::from([("note".into(), "x".into())]),
            priority: 100,
            priority_class: Some("high".into()),
            priority_weight: 1.5,
            queue_name: "research-queue".into(),
            cluster_queue: "gpu".into(),
            pod_sets: vec![PodSetView {
                name: "worker".into(),
                count: 2,
                min_count: Some(1),
                requests: BTreeMap::from([("nvidia.com/gpu".into(), 4.0)]),
                eligible_flavors: vec!["a100".into(), "h100".into()],
            }],
            requests: BTreeMap::from([("nvidia.com/gpu".into(), 8.0)]),
            gpus: 8,
            age_seconds: 60.0,
            retries: 1,
            evictions: 2,
            estimate: Some(EstimateView {
                runtime_seconds: 300.0,
                samples: 4,
            }),
            flavors: vec!["a100".into()],
            eligible_flavors: vec!["a100".into(), "h100".into()],
        }
    }

    #[test]
    fn workload_fields_are_the_schema_properties_in_order() {
        let derived = serde_json::to_value(full_workload()).unwrap();
        let keys: Vec<&str> = derived
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut sorted = WORKLOAD_FIELDS.to_vec();
        sorted.sort_unstable();
        let mut keys_sorted = keys.clone();
        keys_sorted.sort_unstable();
        assert_eq!(
            keys_sorted, sorted,
            "WORKLOAD_FIELDS drifted from WorkloadView"
        );
        let schema = serde_json::to_value(schemars::schema_for!(WorkloadView)).unwrap();
        let mut properties: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        properties.sort_unstable();
        assert_eq!(properties, sorted);
    }

    fn request_json(fields: &WeightFields) -> Value {
        let input = WeightInput {
            workloads: vec![full_workload(), WorkloadView::default()],
            queues: BTreeMap::from([("research/q".into(), QueueView::default())]),
            cluster_queues: BTreeMap::from([("gpu".into(), ClusterQueueView::default())]),
            tenants: BTreeMap::from([("research".into(), TenantView::default())]),
            now: 5.0,
            params: Value::Null,
        };
        let params = json!({"scale": 1});
        serde_json::to_value(WeightRequest::new(&input, &params, fields)).unwrap()
    }

    #[test]
    fn every_single_field_projects_to_the_derived_json_of_that_field() {
        let full = request_json(&WeightFields::ALL);
        for field in WORKLOAD_FIELDS {
            let fields = WeightFields::parse(&[format!("workloads.{field}")]).unwrap();
            let lean = request_json(&fields);
            for (i, w) in lean["workloads"].as_array().unwrap().iter().enumerate() {
                assert_eq!(
                    w,
                    &json!({ field: full["workloads"][i][field].clone() }),
                    "{field}"
                );
            }
            assert_eq!(
                lean.as_object().unwrap().keys().collect::<Vec<_>>(),
                ["now", "params", "workloads"],
                "context maps are left out unless declared"
            );
            assert_eq!(lean["params"], json!({"scale": 1}));
        }
    }

    #[test]
    fn declaring_everything_is_the_whole_request() {
        let all: Vec<String> = WeightFields::ALL.names();
        assert_eq!(WeightFields::parse(&all).unwrap(), WeightFields::ALL);
        let input = request_json(&WeightFields::ALL);
        assert_eq!(
            input["workloads"][0],
            serde_json::to_value(full_workload()).unwrap()
        );
        assert_eq!(
            input["queues"],
            json!({"research/q": serde_json::to_value(QueueView::default()).unwrap()})
        );
        let maps = WeightFields::parse(&["queues", "tenants", "now"]).unwrap();
        let lean = request_json(&maps);
        assert_eq!(lean["workloads"], json!([{}, {}]));
        assert!(lean.get("queues").is_some() && lean.get("tenants").is_some());
        assert!(lean.get("clusterQueues").is_none());
        assert_eq!(maps.names(), ["queues", "tenants"]);
    }

    #[test]
    fn unknown_declarations_are_errors_that_list_the_known_names() {
        let error = WeightFields::parse(&["workloads.estimat"]).unwrap_err();
        assert!(
            error.contains("\"estimat\"") && error.contains("estimate"),
            "{error}"
        );
        let error = WeightFields::parse(&["workload.gpus"]).unwrap_err();
        assert!(
            error.contains("workloads.<field>") && error.contains("clusterQueues"),
            "{error}"
        );
    }
}
