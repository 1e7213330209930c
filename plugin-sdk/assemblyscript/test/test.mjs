// The SDK's tests (`npm test`): builds test/plugin.ts with asconfig.json,
// then checks, through test/host.mjs, that the module imports nothing,
// that every hook decodes its request (defaults, escapes, unknown members,
// numbers read as the nearest double and written back exactly) and
// encodes its response, and that malformed requests fail the call.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import asc from "assemblyscript/asc";
import { call, load } from "./host.mjs";

const sdk = fileURLToPath(new URL("..", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "arbiter-as-sdk-"));
const wasm = join(dir, "plugin.wasm");
const { error, stderr } = await asc.main(
  [join(sdk, "test/plugin.ts"), "--config", join(sdk, "asconfig.json"), "-o", wasm],
  {},
);
if (error) {
  console.error(stderr.toString());
  throw error;
}
const module = load(wasm); // throws if it imports anything but arbiter.log
rmSync(dir, { recursive: true });

let failures = 0;
function test(name, f) {
  try {
    f();
  } catch (e) {
    failures++;
    console.error(`FAIL ${name}: ${e.message}`);
  }
}

test("weight fields", () => {
  assert.deepEqual(call(module, "arbiter_weight_fields", ""), ['["workloads.ageSeconds","params"]', []]);
});

// Numbers: what the host writes (Rust's shortest round-trip text), read
// to the nearest double and written so they read back as the same one.
test("numbers round-trip", () => {
  const values = [0, -0, 0.5, 59.999999, 1e-300, 5e-324, -5, 4294967294.9999995, 4294967295, 4294967296, 1e12,
    1e300, Number.MAX_VALUE, 123456.789, 86400.0000001, 2 ** 53 + 2, 0.1, 1 / 3, 2.2250738585072014e-308];
  let seed = 12345n;
  const bits = new BigUint64Array(1);
  const f = new Float64Array(bits.buffer);
  while (values.length < 3000) {
    seed = (seed * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
    bits[0] = seed;
    if (Number.isFinite(f[0])) values.push(f[0]);
    values.push(Number((seed >> 11n) % 1000000000n) / 1000); // ages with milliseconds
  }
  const text = (v) => (Object.is(v, -0) ? "-0.0" : String(v).replace("e+", "e"));
  const request = `{"workloads":[${values.map((v) => `{"ageSeconds":${text(v)}}`).join(",")}]}`;
  const [out] = call(module, "arbiter_weight", request);
  const scores = JSON.parse(out).scores;
  assert.equal(scores.length, values.length);
  for (let i = 0; i < values.length; i++) {
    assert.ok(Object.is(scores[i], values[i]), `${text(values[i])} read back as ${scores[i]}`);
  }
});

test("admission: views, defaults, escapes and unknown members", () => {
  const request = JSON.stringify({
    workload: {
      name: "j\u00fcb \"1\"\n🚀", gpus: 0, unknown: { deep: [1, { x: null }] },
      estimate: { runtimeSeconds: 60.5, samples: 3 }, podSets: [{ name: "main", count: 2, minCount: 1 }],
    },
    tenant: { name: "t", labels: { allowed: "j\u00fcb \"1\"\n🚀" } },
    clusterQueue: { name: "cq", weight: 2.5 },
    params: { a: [1, 2] },
  }).replace('"j\\u00fcb', '"j\\u00fc\\u0062'); // an escaped letter too
  const [out] = call(module, "arbiter_admission", request);
  assert.deepEqual(JSON.parse(out), {
    allowed: true, reason: 'jüb "1"\n🚀|1.0|2.5|60.5|1|none|{"a":[1,2]}', retryable: false,
  });
  const [defaults] = call(module, "arbiter_admission", "{}");
  assert.deepEqual(JSON.parse(defaults), {
    allowed: false, reason: "|1.0|1.0|none|none|none|null", retryable: false,
  });
});

test("fairShare, autoscale and flavor", () => {
  assert.equal(call(module, "arbiter_fair_share", '{"clusterQueues":[{"weight":1.5},{}]}')[0], '{"weights":[3.0,2.0]}');
  assert.equal(call(module, "arbiter_autoscale", '{"flavors":[{"maxNodes":4294967295},{}]}')[0], '{"nodes":[4294967295,0]}');
  assert.equal(call(module, "arbiter_flavor", '{"candidates":["a","\\u00e9\\t"]}')[0], '{"flavors":["é\\u0009","a"]}');
});

test("placement", () => {
  const request = JSON.stringify({
    pod: { requests: { "example.com/gpu-milli": 300 } }, flavor: "t4", podSet: "main",
    nodes: [
      { index: 0, name: "t4-0", free: { "example.com/gpu-milli": 2000 },
        devices: [{ resource: "example.com/gpu-milli", perCard: 1000, cards: [1000, 1000] }] },
      { index: 1, name: "t4-1", free: { "example.com/gpu-milli": 900 },
        devices: [{ resource: "example.com/gpu-milli", perCard: 1000, cards: [500, 400] }] },
      { index: 2, name: "t4-2", free: { "example.com/gpu-milli": 200 },
        devices: [{ resource: "example.com/gpu-milli", perCard: 1000, cards: [100, 100] }] },
    ],
    typical: [{ requests: { "example.com/gpu-milli": 300 }, share: 1 }],
  });
  assert.equal(call(module, "arbiter_placement", request)[0], '{"cards":[0,1,null],"scores":[-2000.0,-900.0,-200.0]}');
});

test("a handler's null fails the call, and log reaches arbiter.log", () => {
  assert.deepEqual(call(module, "arbiter_weight", '{"params":{"fail":true}}'), ["", [[0, "failing on purpose: ü"]]]);
});

test("malformed requests fail the call", () => {
  for (const bad of ["", "{", "[]", '{"workloads":[{"ageSeconds":"1"}]}', '{"workloads":[{"gpus":1.5}]}',
    '{"workloads":[{"gpus":9223372036854775808}]}', '{"workloads":[{}],}', '{"a":1 "b":2}', '{"a":tru}',
    '{"a":"\\x"}', '{"a":"\u0001"}', '{} {}', '{"a":' + "[".repeat(200) + "]".repeat(200) + "}",
    '{"workloads":[{"labels":{"urgent":1}}]}']) {
    assert.equal(call(module, "arbiter_weight", bad)[0], "", bad);
  }
  assert.equal(call(module, "arbiter_autoscale", '{"flavors":[{"maxNodes":-1}]}')[0], "");
});

if (failures) process.exit(1);
console.log("plugin-sdk/assemblyscript: all tests passed");
