//! The core's scale plan carried out as ProvisioningRequests
//! (`provision`), and the requests that ended told back to the core
//! (`Input::ProvisioningDone`), so nodes are not counted in flight for
//! ever.

use arbiter_core::scheduler::ScaleRequest;

use super::*;

impl Driver {
    /// The scale-ups whose requests ended since the last tick, as inputs.
    pub(super) fn provisioning_inputs(&mut self, inputs: &mut Vec<Input>) {
        let Some(scheduler) = &self.scheduler else {
            return;
        };
        for (flavor, nodes) in self.provisioner.ended() {
            if let Some(flavor) = scheduler.cluster().flavor_id(&flavor) {
                inputs.push(Input::ProvisioningDone { flavor, nodes });
            }
        }
    }

    /// Hands a step's scale plan to the provisioner.
    pub(super) fn scale(&mut self, plan: &[ScaleRequest]) {
        if let Some(scheduler) = &self.scheduler {
            self.provisioner
                .apply(plan, scheduler.cluster(), &self.pools);
        }
    }
}
