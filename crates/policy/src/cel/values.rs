//! The views as CEL values: each view struct wrapped in a value that
//! borrows it and answers field access by the JSON (camelCase) name, built
//! field by field when an expression reaches it. Used by `resolve`. A
//! missing field is a `no such key` error, never a panic; nothing here
//! copies a view up front or changes one.

use std::collections::{BTreeMap, HashMap};

use cel::common::traits::Indexer;
use cel::common::types::{CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, Type};
use cel::common::value::{CowVal, Val};
use cel::ExecutionError;

use crate::view::{
    ClusterQueueView, CohortView, DeviceView, EstimateView, FlavorView, NodeView, PodSetView,
    PodView, Quantities, QueueView, TenantView, TypicalPodView, WorkloadView,
};

// Field values, borrowing the view's data for `'v`.

fn int<'b, 'v>(value: i64) -> CowVal<'b, 'v> {
    CowVal::owned(CelInt::from(value))
}

fn double<'b, 'v>(value: f64) -> CowVal<'b, 'v> {
    CowVal::owned(CelDouble::from(value))
}

fn string<'b, 'v>(value: &'v str) -> CowVal<'b, 'v> {
    CowVal::owned(CelString::from(value))
}

fn optional<'b, 'v, T>(
    value: Option<T>,
    to_val: impl FnOnce(T) -> CowVal<'b, 'v>,
) -> CowVal<'b, 'v> {
    value.map_or_else(|| CowVal::owned(CelNull), to_val)
}

fn string_map<'b, 'v>(map: &'v BTreeMap<String, String>) -> CowVal<'b, 'v> {
    let entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = map
        .iter()
        .map(|(k, v)| {
            let value: Box<dyn Val + 'v> = Box::new(CelString::from(v.as_str()));
            (CelMapKey::from(k.as_str()), value)
        })
        .collect();
    CowVal::owned(CelMap::from(entries))
}

fn quantities_val<'v>(map: &'v Quantities) -> Box<dyn Val + 'v> {
    let entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = map
        .iter()
        .map(|(k, v)| {
            let value: Box<dyn Val + 'v> = Box::new(CelDouble::from(*v));
            (CelMapKey::from(k.as_str()), value)
        })
        .collect();
    Box::new(CelMap::from(entries))
}

fn quantities<'b, 'v>(map: &'v Quantities) -> CowVal<'b, 'v> {
    CowVal::Owned(quantities_val(map))
}

fn quantities_by_flavor<'b, 'v>(map: &'v BTreeMap<String, Quantities>) -> CowVal<'b, 'v> {
    let entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = map
        .iter()
        .map(|(k, v)| (CelMapKey::from(k.as_str()), quantities_val(v)))
        .collect();
    CowVal::owned(CelMap::from(entries))
}

/// A CEL list of `items`, each made a value by `val`.
fn list<'b, 'v, T>(items: &'v [T], val: impl Fn(&'v T) -> Box<dyn Val + 'v>) -> CowVal<'b, 'v> {
    let items: Vec<Box<dyn Val + 'v>> = items.iter().map(val).collect();
    CowVal::owned(CelList::from(items))
}

fn pod_sets<'b, 'v>(pod_sets: &'v [PodSetView]) -> CowVal<'b, 'v> {
    list(pod_sets, |ps| Box::new(PodSetVal(ps)))
}

fn doubles<'b, 'v>(items: &'v [f64]) -> CowVal<'b, 'v> {
    list(items, |&d| Box::new(CelDouble::from(d)))
}

fn devices<'b, 'v>(devices: &'v [DeviceView]) -> CowVal<'b, 'v> {
    list(devices, |d| Box::new(DeviceVal(d)))
}

/// The placement hook's `typical` variable: a list of typical pods.
pub(super) fn typical_list<'b, 'v>(typical: &'v [TypicalPodView]) -> CowVal<'b, 'v> {
    list(typical, |t| Box::new(TypicalVal(t)))
}

fn string_list<'b, 'v>(items: &'v [String]) -> CowVal<'b, 'v> {
    list(items, |s| Box::new(CelString::from(s.as_str())))
}

/// The field name of `x.f` or `x['f']`.
fn field_name(index: &dyn Val) -> Result<&str, ExecutionError> {
    index
        .downcast_ref::<CelString>()
        .map(CelString::inner)
        .ok_or_else(|| ExecutionError::UnexpectedType {
            got: index.get_type().name().to_string(),
            want: "string".to_string(),
        })
}

/// A CEL value borrowing one view struct: its type, and field access by
/// the JSON (camelCase) names.
macro_rules! view_val {
    ($val:ident, $view:ty, $type_name:literal, |$v:ident, $field:ident| $lookup:expr) => {
        #[derive(Clone, Copy, Debug)]
        pub(super) struct $val<'a>(pub(super) &'a $view);

        impl Val for $val<'_> {
            fn get_type(&self) -> &Type {
                static TYPE: Type = Type::new_unspecified_type($type_name);
                &TYPE
            }

            fn cel_type() -> &'static Type {
                static TYPE: Type = Type::new_unspecified_type($type_name);
                &TYPE
            }

            fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
            where
                Self: 'v,
            {
                Some(self)
            }

            fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
            where
                Self: 'v,
            {
                Box::new(*self)
            }
        }

        impl Indexer for $val<'_> {
            fn get<'b, 'v>(&'b self, index: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
            where
                Self: 'v,
            {
                let $v = self.0;
                let $field = field_name(index)?;
                $lookup
            }

            fn steal<'v>(
                self: Box<Self>,
                index: &dyn Val,
            ) -> Result<Box<dyn Val + 'v>, ExecutionError>
            where
                Self: 'v,
            {
                self.get(index).map(CowVal::into_owned)
            }
        }
    };
}

view_val!(WorkloadVal, WorkloadView, "arbiter.Workload", |w, field| {
    Ok(match field {
        "name" => string(&w.name),
        "namespace" => string(&w.namespace),
        "kind" => string(&w.kind),
        "labels" => string_map(&w.labels),
        "annotations" => string_map(&w.annotations),
        "priority" => int(w.priority),
        "priorityClass" => optional(w.priority_class.as_deref(), string),
        "priorityWeight" => double(w.priority_weight),
        "queueName" => string(&w.queue_name),
        "clusterQueue" => string(&w.cluster_queue),
        "podSets" => pod_sets(&w.pod_sets),
        "requests" => quantities(&w.requests),
        "gpus" => int(w.gpus),
        "ageSeconds" => double(w.age_seconds),
        "retries" => int(i64::from(w.retries)),
        "evictions" => int(i64::from(w.evictions)),
        "estimate" => optional(w.estimate.as_ref(), |e| CowVal::owned(EstimateVal(e))),
        "flavors" => string_list(&w.flavors),
        "eligibleFlavors" => string_list(&w.eligible_flavors),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(PodSetVal, PodSetView, "arbiter.PodSet", |p, field| {
    Ok(match field {
        "name" => string(&p.name),
        "count" => int(i64::from(p.count)),
        "minCount" => optional(p.min_count, |n| int(i64::from(n))),
        "requests" => quantities(&p.requests),
        "eligibleFlavors" => string_list(&p.eligible_flavors),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(EstimateVal, EstimateView, "arbiter.Estimate", |e, field| {
    Ok(match field {
        "runtimeSeconds" => double(e.runtime_seconds),
        "samples" => int(i64::from(e.samples)),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(QueueVal, QueueView, "arbiter.Queue", |q, field| {
    Ok(match field {
        "name" => string(&q.name),
        "namespace" => string(&q.namespace),
        "priority" => optional(q.priority, int),
        "clusterQueue" => string(&q.cluster_queue),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(
    ClusterQueueVal,
    ClusterQueueView,
    "arbiter.ClusterQueue",
    |c, field| {
        Ok(match field {
            "name" => string(&c.name),
            "cohort" => optional(c.cohort.as_deref(), string),
            "weight" => double(c.weight),
            "share" => double(c.share),
            "decayedUsage" => double(c.decayed_usage),
            "nominal" => quantities_by_flavor(&c.nominal),
            "usage" => quantities_by_flavor(&c.usage),
            "priorityWeight" => double(c.priority_weight),
            "admitted" => int(i64::from(c.admitted)),
            "pending" => int(i64::from(c.pending)),
            "flavors" => string_list(&c.flavors),
            _ => return Err(ExecutionError::no_such_key(field)),
        })
    }
);

view_val!(TenantVal, TenantView, "arbiter.Tenant", |t, field| {
    Ok(match field {
        "name" => string(&t.name),
        "labels" => string_map(&t.labels),
        "annotations" => string_map(&t.annotations),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(CohortVal, CohortView, "arbiter.Cohort", |c, field| {
    Ok(match field {
        "name" => string(&c.name),
        "parent" => optional(c.parent.as_deref(), string),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(FlavorVal, FlavorView, "arbiter.Flavor", |f, field| {
    Ok(match field {
        "name" => string(&f.name),
        "nodes" => int(i64::from(f.nodes)),
        "minNodes" => int(i64::from(f.min_nodes)),
        "maxNodes" => int(i64::from(f.max_nodes)),
        "utilization" => double(f.utilization),
        "pendingNodes" => double(f.pending_nodes),
        "targetUtilization" => double(f.target_utilization),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(NodeVal, NodeView, "arbiter.Node", |n, field| {
    Ok(match field {
        "index" => int(i64::from(n.index)),
        "name" => string(&n.name),
        "free" => quantities(&n.free),
        "allocatable" => quantities(&n.allocatable),
        "devices" => devices(&n.devices),
        "labels" => string_map(&n.labels),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(DeviceVal, DeviceView, "arbiter.Device", |d, field| {
    Ok(match field {
        "resource" => string(&d.resource),
        "perCard" => double(d.per_card),
        "cards" => doubles(&d.cards),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(PodVal, PodView, "arbiter.Pod", |p, field| {
    Ok(match field {
        "requests" => quantities(&p.requests),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(
    TypicalVal,
    TypicalPodView,
    "arbiter.TypicalPod",
    |t, field| {
        Ok(match field {
            "requests" => quantities(&t.requests),
            "share" => double(t.share),
            _ => return Err(ExecutionError::no_such_key(field)),
        })
    }
);
