//! Variable resolution: the [`Vars`] of one evaluation, and the resolver
//! cel asks for each name — a view, `now`, `params`, or a flattened
//! `view.field` answered in one lookup. Used by `evaluate`. It borrows the
//! views and converts nothing up front (`values` does the per-field work
//! when an expression reaches a field); it never mutates a view.

use cel::common::types::{CelDouble, CelString};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;

use super::params::Params;
use super::values::{
    typical_list, ClusterQueueVal, CohortVal, FlavorVal, NodeVal, PodVal, QueueVal, TenantVal,
    WorkloadVal,
};
use crate::view::{
    ClusterQueueView, CohortView, FlavorView, NodeView, PodView, QueueView, TenantView,
    TypicalPodView, WorkloadView,
};

/// Variables of one evaluation; any may be absent (then referencing it is a
/// runtime error naming it).
#[derive(Default, Clone, Copy)]
pub struct Vars<'a> {
    pub workload: Option<&'a WorkloadView>,
    pub queue: Option<&'a QueueView>,
    pub cluster_queue: Option<&'a ClusterQueueView>,
    pub tenant: Option<&'a TenantView>,
    pub cohort: Option<&'a CohortView>,
    pub flavor: Option<&'a FlavorView>,
    pub node: Option<&'a NodeView>,
    pub pod: Option<&'a PodView>,
    pub typical: Option<&'a [TypicalPodView]>,
    pub now: f64,
    pub params: Option<&'a Params>,
}

/// The variables of one evaluation, as CEL values borrowing the views.
pub(super) struct Scope<'a> {
    workload: Option<WorkloadVal<'a>>,
    queue: Option<QueueVal<'a>>,
    cluster_queue: Option<ClusterQueueVal<'a>>,
    tenant: Option<TenantVal<'a>>,
    cohort: Option<CohortVal<'a>>,
    flavor: Option<FlavorVal<'a>>,
    node: Option<NodeVal<'a>>,
    pod: Option<PodVal<'a>>,
    typical: Option<&'a [TypicalPodView]>,
    now: CelDouble,
    params: Option<&'a Params>,
}

impl<'a> Scope<'a> {
    pub(super) fn new(vars: &Vars<'a>) -> Scope<'a> {
        Scope {
            workload: vars.workload.map(WorkloadVal),
            queue: vars.queue.map(QueueVal),
            cluster_queue: vars.cluster_queue.map(ClusterQueueVal),
            tenant: vars.tenant.map(TenantVal),
            cohort: vars.cohort.map(CohortVal),
            flavor: vars.flavor.map(FlavorVal),
            node: vars.node.map(NodeVal),
            pod: vars.pod.map(PodVal),
            typical: vars.typical,
            now: CelDouble::from(vars.now),
            params: vars.params,
        }
    }
}

fn borrowed<'b, 'v>(value: &'b (dyn Val + 'v)) -> CowVal<'b, 'v> {
    CowVal::Borrowed(value)
}

impl Scope<'_> {
    /// A view variable by name.
    fn view(&self, variable: &str) -> Option<&dyn Val> {
        match variable {
            "workload" => self.workload.as_ref().map(|v| v as &dyn Val),
            "queue" => self.queue.as_ref().map(|v| v as &dyn Val),
            "clusterQueue" => self.cluster_queue.as_ref().map(|v| v as &dyn Val),
            "tenant" => self.tenant.as_ref().map(|v| v as &dyn Val),
            "cohort" => self.cohort.as_ref().map(|v| v as &dyn Val),
            "flavor" => self.flavor.as_ref().map(|v| v as &dyn Val),
            "node" => self.node.as_ref().map(|v| v as &dyn Val),
            "pod" => self.pod.as_ref().map(|v| v as &dyn Val),
            _ => None,
        }
    }
}

impl VariableResolver for Scope<'_> {
    /// cel asks for the whole qualified name first (`workload.priority`),
    /// then for shorter prefixes: answering `view.field` at once saves it a
    /// second lookup. Anything else (a missing field, deeper paths) is left
    /// to cel, which then reports the error.
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        if let Some((root, field)) = variable.split_once('.') {
            if field.contains('.') {
                return None;
            }
            let indexer = self.view(root)?.as_indexer()?;
            return indexer.get(&CelString::from(field)).ok();
        }
        match variable {
            "workload" => self.workload.as_ref().map(|v| borrowed(v)),
            "queue" => self.queue.as_ref().map(|v| borrowed(v)),
            "clusterQueue" => self.cluster_queue.as_ref().map(|v| borrowed(v)),
            "tenant" => self.tenant.as_ref().map(|v| borrowed(v)),
            "cohort" => self.cohort.as_ref().map(|v| borrowed(v)),
            "flavor" => self.flavor.as_ref().map(|v| borrowed(v)),
            "node" => self.node.as_ref().map(|v| borrowed(v)),
            "pod" => self.pod.as_ref().map(|v| borrowed(v)),
            "typical" => self.typical.map(typical_list),
            "now" => Some(borrowed(&self.now)),
            "params" => self.params.map(|p| borrowed(p.value.as_ref())),
            _ => None,
        }
    }
}
