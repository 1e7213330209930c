// urgent-first, in AssemblyScript: a tenant `weight` plugin ordering a
// tenant's own workloads: those labelled urgent=true first, then fewer
// GPUs, then older. The same policy as examples/plugins/{rust,go,c,zig}
// (examples/plugins/README.md has the formula); tests/plugin_languages.rs
// checks they all score every workload identically.
//
//   plugin-sdk/assemblyscript/node_modules/.bin/asc urgent-first.ts \
//     --config plugin-sdk/assemblyscript/asconfig.json -o urgent-first.wasm

import { WeightRequest, WeightResponse, Workload, weight, weightFields } from "../../../plugin-sdk/assemblyscript/assembly";

export { arbiter_abi_version, arbiter_alloc } from "../../../plugin-sdk/assemblyscript/assembly";

const MAX_GPUS: u64 = (1 << 14) - 1; // more GPUs than this score as this many
const MAX_AGE: u64 = 0xffffffff; // whole seconds; older scores as this old

/** Exact in a double: urgent × 2^46 + (MAX_GPUS − gpus) × 2^32 + age. */
function score(w: Workload): f64 {
  const urgent: u64 = w.labels.has("urgent") && w.labels.get("urgent") == "true" ? 1 : 0;
  const gpus: u64 = w.gpus < 0 ? 0 : w.gpus > <i64>MAX_GPUS ? MAX_GPUS : <u64>w.gpus;
  let age: u64 = 0;
  if (w.ageSeconds >= <f64>MAX_AGE) age = MAX_AGE;
  else if (w.ageSeconds > 0) age = <u64>Math.floor(w.ageSeconds);
  return <f64>((urgent << 46) | ((MAX_GPUS - gpus) << 32) | age);
}

function scores(request: WeightRequest): WeightResponse | null {
  const response = new WeightResponse();
  for (let i = 0; i < request.workloads.length; i++) response.scores.push(score(request.workloads[i]));
  return response;
}

export function arbiter_weight(ptr: usize, len: usize): u64 { return weight(ptr, len, scores); }
export function arbiter_weight_fields(): u64 { return weightFields(["workloads.labels", "workloads.gpus", "workloads.ageSeconds"]); }
