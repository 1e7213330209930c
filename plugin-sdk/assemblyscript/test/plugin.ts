// The SDK's test plugin: every hook, answering from what it decoded, so
// test.mjs can check the decoders, the encoders and the exports.

import {
  AdmissionRequest, AdmissionResponse, AutoscaleRequest, AutoscaleResponse, Box, FairShareRequest,
  FairShareResponse, FlavorRequest, FlavorResponse, Level, PlacementRequest, PlacementResponse, WeightRequest,
  WeightResponse, admission, autoscale, fairShare, flavor, log, placement, weight, weightFields,
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

// Best fit on one device: the fuller node scores higher; the card is the
// fullest that still holds the pod.
function bestFit(request: PlacementRequest): PlacementResponse | null {
  const resource = "example.com/gpu-milli";
  const ask = request.pod.requests.has(resource) ? request.pod.requests.get(resource) : 0;
  const response = new PlacementResponse();
  const cards = new Array<Box<u32> | null>();
  for (let i = 0; i < request.nodes.length; i++) {
    const node = request.nodes[i];
    response.scores.push(-(node.free.has(resource) ? node.free.get(resource) : 0));
    let best = -1;
    for (let d = 0; d < node.devices.length; d++) {
      const free = node.devices[d].cards;
      for (let c = 0; c < free.length; c++) {
        if (free[c] >= ask && (best < 0 || free[c] < free[best])) best = c;
      }
    }
    cards.push(best < 0 ? null : new Box<u32>(<u32>best));
  }
  response.cards = cards;
  return response;
}

export function arbiter_weight(ptr: usize, len: usize): u64 { return weight(ptr, len, ages); }
export function arbiter_placement(ptr: usize, len: usize): u64 { return placement(ptr, len, bestFit); }
export function arbiter_admission(ptr: usize, len: usize): u64 { return admission(ptr, len, admit); }
export function arbiter_fair_share(ptr: usize, len: usize): u64 { return fairShare(ptr, len, shares); }
export function arbiter_autoscale(ptr: usize, len: usize): u64 { return autoscale(ptr, len, nodes); }
export function arbiter_flavor(ptr: usize, len: usize): u64 { return flavor(ptr, len, reversed); }
export function arbiter_weight_fields(): u64 { return weightFields(["workloads.ageSeconds", "params"]); }
