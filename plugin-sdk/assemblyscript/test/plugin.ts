// The SDK's test plugin: every hook, answering from what it decoded, so
// test.mjs can check the decoders, the encoders and the exports.

import {
  AdmissionRequest, AdmissionResponse, AutoscaleRequest, AutoscaleResponse, Box, FairShareRequest,
  FairShareResponse, FlavorRequest, FlavorResponse, Level, WeightRequest, WeightResponse,
  admission, autoscale, fairShare, flavor, log, weight, weightFields,
} from "../assembly";

export { arbiter_abi_version, arbiter_alloc } from "../assembly";

// Scores each workload's ageSeconds as it was read (number round trips);
// params {"fail": true} fails the call after logging.
function ages(request: WeightRequest): WeightResponse | null {
  if (request.params.text == "{\"fail\":true}") {
    log(Level.Error, "failing on purpose: ü");
    return null;
  }
  const response = new WeightResponse();
  for (let i = 0; i < request.workloads.length; i++) response.scores.push(request.workloads[i].ageSeconds);
  return response;
}

// Allows a workload whose name is its namespace's label "allowed", with
// the reason naming what it read; retryable unless it has no GPUs.
function admit(request: AdmissionRequest): AdmissionResponse | null {
  const w = request.workload;
  const response = new AdmissionResponse();
  response.allowed = request.tenant.labels.has("allowed") && request.tenant.labels.get("allowed") == w.name;
  const estimate = w.estimate;
  const minCount = w.podSets.length > 0 ? w.podSets[0].minCount : null;
  response.reason = w.name + "|" + w.priorityWeight.toString() + "|" + request.clusterQueue.weight.toString() + "|" +
    (estimate === null ? "none" : estimate.runtimeSeconds.toString()) + "|" +
    (minCount === null ? "none" : minCount.value.toString()) + "|" + (request.cohort === null ? "none" : "cohort") +
    "|" + request.params.text;
  if (w.gpus == 0) response.retryable = new Box<bool>(false);
  return response;
}

function shares(request: FairShareRequest): FairShareResponse | null {
  const response = new FairShareResponse();
  for (let i = 0; i < request.clusterQueues.length; i++) response.weights.push(request.clusterQueues[i].weight * 2);
  return response;
}

function nodes(request: AutoscaleRequest): AutoscaleResponse | null {
  const response = new AutoscaleResponse();
  for (let i = 0; i < request.flavors.length; i++) response.nodes.push(<i64>request.flavors[i].maxNodes);
  return response;
}

function reversed(request: FlavorRequest): FlavorResponse | null {
  const response = new FlavorResponse();
  for (let i = request.candidates.length - 1; i >= 0; i--) response.flavors.push(request.candidates[i]);
  return response;
}

export function arbiter_weight(ptr: usize, len: usize): u64 { return weight(ptr, len, ages); }
export function arbiter_admission(ptr: usize, len: usize): u64 { return admission(ptr, len, admit); }
export function arbiter_fair_share(ptr: usize, len: usize): u64 { return fairShare(ptr, len, shares); }
export function arbiter_autoscale(ptr: usize, len: usize): u64 { return autoscale(ptr, len, nodes); }
export function arbiter_flavor(ptr: usize, len: usize): u64 { return flavor(ptr, len, reversed); }
export function arbiter_weight_fields(): u64 { return weightFields(["workloads.ageSeconds", "params"]); }
