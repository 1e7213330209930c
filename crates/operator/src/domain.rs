//! Topology-aware placement carried out: a pod set whose topology request
//! the core admitted is kept inside the domain the core placed it in, by a
//! node selector on its pod template naming that domain's label values
//! (levels `0..=k` of the flavor's Topology). `inject` adds it where a
//! flavor's node labels go, for every job kind, and takes it out on
//! eviction; the places are recorded on the job, so a restarted operator
//! reads the same nodes back and selects the same domain.
//!
//! The domain is read from the core's decision, never chosen here: the
//! narrowest level, at or above the one asked for, at which every node the
//! pods were placed on has the same values. For a required request that
//! is the level asked for (the core placed them in one of its domains);
//! for a preferred one that fell back to a wider level it is that level,
//! and for one placed anywhere there is no common domain and nothing is
//! selected beyond the flavor's labels. Kueue ungates each pod onto its
//! own domain of the lowest level instead; here kube-scheduler places the
//! pods inside the one domain. Pure; `inject::admission_of` calls it.

use std::collections::BTreeMap;

use arbiter_core::model::api::HOSTNAME_LABEL;
use arbiter_core::scheduler::{Scheduler, WorkloadId};

/// The node selector keeping a pod set in its domain: `levels` are the
/// Topology's node labels (widest first), `requested` the index of the
/// level asked for, `nodes` the labels of each node the pods were placed
/// on. Empty when the nodes share no domain of any level up to it.
pub fn selector(
    levels: &[String],
    requested: usize,
    nodes: &[BTreeMap<String, String>],
) -> BTreeMap<String, String> {
    let Some(first) = nodes.first() else {
        return BTreeMap::new();
    };
    for level in (0..=requested.min(levels.len().saturating_sub(1))).rev() {
        let labels = &levels[..=level];
        let shared = labels.iter().all(|label| {
            first.get(label).is_some_and(|value| {
                nodes
                    .iter()
                    .all(|node| node.get(label).is_some_and(|v| v == value))
            })
        });
        if shared {
            return labels
                .iter()
                .map(|label| (label.clone(), first[label].clone()))
                .collect();
        }
    }
    BTreeMap::new()
}

/// The node selector keeping pod set `pod_set` of admitted workload `id`
/// in its domain, if it asked for a topology level and the core placed it
/// on named nodes of a flavor with a Topology; `hostname` gives a Node's
/// `kubernetes.io/hostname` label by its name.
pub fn of_pod_set(
    scheduler: &Scheduler,
    id: WorkloadId,
    pod_set: usize,
    hostname: &dyn Fn(&str) -> String,
) -> Option<BTreeMap<String, String>> {
    let cluster = scheduler.cluster();
    let entry = scheduler.entry(id);
    let request = entry.workload.pod_sets.get(pod_set)?.topology.as_ref()?;
    let admission = entry.admission.as_ref()?;
    let mine: Vec<_> = admission
        .placements
        .iter()
        .filter(|p| p.pod_set as usize == pod_set && p.pods > 0)
        .collect();
    let flavor = mine.first()?.flavor;
    let topology = cluster.flavors[flavor.index()]
        .topology
        .and_then(|t| cluster.topologies.get(t.index()))
        .filter(|_| cluster.topology_aware)?;
    let requested = topology.level(request.level())?;
    let nodes = mine
        .iter()
        .map(|p| {
            if p.flavor != flavor {
                return None;
            }
            let name = scheduler.node_name(p.flavor, p.node)?;
            let mut labels = scheduler
                .node_labels(p.flavor, p.node)
                .cloned()
                .unwrap_or_default();
            labels.insert(HOSTNAME_LABEL.to_string(), hostname(name));
            Some(labels)
        })
        .collect::<Option<Vec<_>>>()?;
    Some(selector(&topology.levels, requested, &nodes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: &str = "example.com/block";
    const RACK: &str = "example.com/rack";

    fn levels() -> Vec<String> {
        [BLOCK, RACK, HOSTNAME_LABEL].map(String::from).to_vec()
    }

    fn node(block: &str, rack: &str, host: &str) -> BTreeMap<String, String> {
        [(BLOCK, block), (RACK, rack), (HOSTNAME_LABEL, host)]
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn want(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn pods_in_one_rack_are_kept_to_that_rack_of_that_block() {
        let nodes = [node("b1", "r1", "n1"), node("b1", "r1", "n2")];
        assert_eq!(
            selector(&levels(), 1, &nodes),
            want(&[(BLOCK, "b1"), (RACK, "r1")])
        );
    }

    #[test]
    fn a_request_at_the_hostname_level_selects_the_host() {
        let nodes = [node("b1", "r2", "n3")];
        assert_eq!(
            selector(&levels(), 2, &nodes),
            want(&[(BLOCK, "b1"), (RACK, "r2"), (HOSTNAME_LABEL, "n3")])
        );
    }

    #[test]
    fn a_preferred_rack_that_fell_back_to_the_block_selects_only_the_block() {
        let nodes = [node("b1", "r1", "n1"), node("b1", "r2", "n3")];
        assert_eq!(selector(&levels(), 1, &nodes), want(&[(BLOCK, "b1")]));
    }

    #[test]
    fn pods_placed_anywhere_select_nothing() {
        let nodes = [node("b1", "r1", "n1"), node("b2", "r1", "n4")];
        assert!(selector(&levels(), 1, &nodes).is_empty());
        assert!(selector(&levels(), 1, &[]).is_empty());
    }

    #[test]
    fn a_node_without_a_level_label_shares_no_domain_of_it() {
        // The same rack name in another block is another rack (Kueue's rule).
        let nodes = [node("b1", "r1", "n1"), node("", "r1", "n2")];
        assert!(selector(&levels(), 1, &nodes).is_empty());
        let nodes = [node("b1", "r1", "n1"), node("b1", "", "n2")];
        assert_eq!(selector(&levels(), 1, &nodes), want(&[(BLOCK, "b1")]));
    }
}
