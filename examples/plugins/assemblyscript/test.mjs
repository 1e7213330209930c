// The AssemblyScript urgent-first's own test (scripts/build-plugins.sh runs
// it with Node once urgent-first.wasm is built): the request the Rust,
// Go, C and Zig examples' tests send, scored the same.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { call, load } from "../../../plugin-sdk/assemblyscript/test/host.mjs";

const module = load(fileURLToPath(new URL("urgent-first.wasm", import.meta.url)));
const request = `{"workloads":[
  {"labels":{"urgent":"true"},"gpus":8,"ageSeconds":10.9},
  {"labels":{"urgent":"false"},"gpus":0,"ageSeconds":1e300},
  {"gpus":-3,"ageSeconds":-1},
  {"labels":{"\\u0075rgent":"true","team":"ü"},"gpus":99999}
],"now":5,"params":null}`;
assert.deepEqual(call(module, "arbiter_weight", request), [
  '{"scores":[140698833649674.0,70368744177663.0,70364449210368.0,70368744177664.0]}',
  [],
]);
assert.deepEqual(call(module, "arbiter_weight_fields", ""), [
  '["workloads.labels","workloads.gpus","workloads.ageSeconds"]',
  [],
]);
console.log("examples/plugins/assemblyscript: test passed");
