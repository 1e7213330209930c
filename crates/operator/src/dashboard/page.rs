//! What one request of `/dashboard/api/state` is sent: the whole
//! [`Dashboard`] but its workloads, of which only those the query's filter
//! keeps, at most `limit` (default [`WORKLOADS_SHOWN`]), with how many
//! there are in all and how many match, so a cluster with tens of
//! thousands of Workloads sends the page a bounded answer.

use serde::{Deserialize, Serialize};

use super::model::{
    BundleView, ClusterQueueView, Dashboard, FlavorView, LocalQueueView, TreeNode, WorkloadView,
};
use arbiter_policy::engine::Decision;

/// Most workloads sent to the page unless the query asks for fewer or more.
pub const WORKLOADS_SHOWN: usize = 200;
/// The most a query may ask for.
pub const WORKLOADS_MAX: usize = 5_000;
/// Newest decisions sent to the page.
pub const DECISIONS_SHOWN: usize = 50;

/// The query: `?namespace=&clusterQueue=&state=&limit=` (each optional;
/// an empty value is no filter).
#[derive(Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub cluster_queue: Option<String>,
    /// `Pending`, `Admitted`, `Finished`, `Rejected` or `Inactive`.
    pub state: Option<String>,
    pub limit: Option<usize>,
}

fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

impl Filter {
    fn keeps(&self, w: &WorkloadView) -> bool {
        given(&self.namespace).is_none_or(|ns| w.namespace == ns)
            && given(&self.cluster_queue).is_none_or(|cq| w.cluster_queue.as_deref() == Some(cq))
            && given(&self.state).is_none_or(|s| w.state.eq_ignore_ascii_case(s))
    }
}

/// The answer to one request.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Page<'a> {
    pub tree: &'a [TreeNode],
    pub flavors: &'a [FlavorView],
    pub cluster_queues: &'a [ClusterQueueView],
    pub local_queues: &'a [LocalQueueView],
    /// The workloads the filter keeps, in the dashboard's order, at most the limit.
    pub workloads: Vec<&'a WorkloadView>,
    /// How many workloads there are, and how many the filter keeps.
    pub workloads_total: usize,
    pub workloads_matching: usize,
    pub bundles: &'a [BundleView],
    pub engine: &'a [super::engine::EngineBundle],
    /// Absent where no engine runs (`arbiter dashboard`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decisions: Option<&'a [Decision]>,
    pub errors: &'a [String],
}

impl Dashboard {
    /// What `filter` asks for of this state; `engine_runs` says whether
    /// decisions are known at all.
    pub fn page(&self, filter: &Filter, engine_runs: bool) -> Page<'_> {
        let limit = filter.limit.unwrap_or(WORKLOADS_SHOWN).min(WORKLOADS_MAX);
        let matching: Vec<&WorkloadView> =
            self.workloads.iter().filter(|w| filter.keeps(w)).collect();
        Page {
            tree: &self.tree,
            flavors: &self.flavors,
            cluster_queues: &self.cluster_queues,
            local_queues: &self.local_queues,
            workloads_total: self.workloads.len(),
            workloads_matching: matching.len(),
            workloads: matching.into_iter().take(limit).collect(),
            bundles: &self.bundles,
            engine: &self.engine,
            decisions: engine_runs.then_some(self.decisions.as_slice()),
            errors: &self.errors,
        }
    }
}
