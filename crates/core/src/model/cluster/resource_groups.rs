//! Checking a ClusterQueue's or a Cohort's `spec.resourceGroups` into
//! [`Group`]s (resources assigned together, flavors in order) and a quota
//! table indexed by [`FlavorResource`](super::FlavorResource): each resource
//! in one group, every flavor defined, listed once and giving a quota for
//! every covered resource, quantities exact and non-negative, lendingLimit
//! within nominalQuota. It never stops at the first problem (each is
//! reported through the caller's `err`) and never decides cohort
//! membership. Called by `builder` for every Cohort and ClusterQueue.

use std::collections::BTreeMap;

use crate::model::api::ResourceGroup;
use crate::model::Amount;

use super::checked::{Cluster, Group, Quota};

/// Checks resource groups and lays their quotas out by FlavorResource.
pub(super) fn quota_table(
    cluster: &Cluster,
    groups: &[ResourceGroup],
    source: &str,
    object: &str,
    frs: usize,
    err: &mut dyn FnMut(&str, String, String, String),
) -> (Vec<Group>, Vec<Option<Quota>>) {
    let mut quotas = vec![None; frs];
    let mut checked = Vec::new();
    let mut seen_resources: BTreeMap<&str, usize> = BTreeMap::new();
    for (gi, group) in groups.iter().enumerate() {
        let mut resources = Vec::new();
        for (ri, name) in group.covered_resources.iter().enumerate() {
            if let Some(prev) = seen_resources.insert(name, gi) {
                err(source, object.to_string(), format!("spec.resourceGroups[{gi}].coveredResources[{ri}]"),
                    format!("resource `{name}` is already covered by resourceGroups[{prev}]; a resource belongs to one group"));
            }
            if let Some(id) = cluster.resource_id(name) {
                resources.push(id);
            }
        }
        let mut flavors = Vec::new();
        for (fi, fq) in group.flavors.iter().enumerate() {
            let field = format!("spec.resourceGroups[{gi}].flavors[{fi}]");
            let Some(flavor) = cluster.flavor_id(&fq.name) else {
                let known: Vec<&str> = cluster.flavors.iter().map(|f| f.name.as_str()).collect();
                err(source, object.to_string(), format!("{field}.name"),
                    format!("ResourceFlavor `{}` is not defined (defined: {}); define it or fix the name", fq.name, if known.is_empty() { "none".to_string() } else { known.join(", ") }));
                continue;
            };
            if flavors.contains(&flavor) {
                err(
                    source,
                    object.to_string(),
                    format!("{field}.name"),
                    format!("flavor `{}` is listed twice in this group", fq.name),
                );
                continue;
            }
            flavors.push(flavor);
            for (qi, rq) in fq.resources.iter().enumerate() {
                let qfield = format!("{field}.resources[{qi}]");
                let Some(pos) = group.covered_resources.iter().position(|r| r == &rq.name) else {
                    err(source, object.to_string(), format!("{qfield}.name"),
                        format!("resource `{}` is not in this group's coveredResources [{}]; add it there or remove this quota", rq.name, group.covered_resources.join(", ")));
                    continue;
                };
                let Some(resource) = resources.get(pos).copied() else {
                    continue;
                };
                let mut amount = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
                                  what: &str| {
                    match Amount::from_quantity(q) {
                        Ok(a) if a.is_negative() => {
                            err(
                                source,
                                object.to_string(),
                                format!("{qfield}.{what}"),
                                format!("{a} is negative; quotas must be ≥ 0"),
                            );
                            None
                        }
                        Ok(a) => Some(a),
                        Err(e) => {
                            err(
                                source,
                                object.to_string(),
                                format!("{qfield}.{what}"),
                                e.to_string(),
                            );
                            None
                        }
                    }
                };
                let nominal = amount(&rq.nominal_quota, "nominalQuota").unwrap_or_default();
                let borrowing_limit = rq
                    .borrowing_limit
                    .as_ref()
                    .and_then(|q| amount(q, "borrowingLimit"));
                let lending_limit = rq
                    .lending_limit
                    .as_ref()
                    .and_then(|q| amount(q, "lendingLimit"));
                if let Some(l) = lending_limit {
                    if l > nominal {
                        err(source, object.to_string(), format!("{qfield}.lendingLimit"), format!("{l} exceeds nominalQuota {nominal}; a queue can lend at most what it has"));
                    }
                }
                quotas[cluster.flavor_resource(flavor, resource).index()] = Some(Quota {
                    nominal,
                    borrowing_limit,
                    lending_limit,
                });
            }
            for name in &group.covered_resources {
                if !fq.resources.iter().any(|r| &r.name == name) {
                    err(source, object.to_string(), format!("{field}.resources"),
                        format!("flavor `{}` gives no quota for covered resource `{name}`; every flavor lists every covered resource (use nominalQuota: 0)", fq.name));
                }
            }
        }
        checked.push(Group { resources, flavors });
    }
    (checked, quotas)
}
