// A hostile tenant weight plugin in AssemblyScript, for
// tests/plugin_languages.rs: its policy's `config.mode` picks the
// misbehaviour — `loop` spins forever, `bomb` allocates until memory runs
// out (the stub runtime then traps), `bad` answers scores that are not a
// list, `short` one score too few, `fail` logs an error and fails the
// call; anything else scores every workload 1. Built by
// scripts/build-plugins.sh.

import { Level, Reader, Writer, decodeWeightRequest, log, readString } from "../../../../../plugin-sdk/assemblyscript/assembly";

export { arbiter_abi_version, arbiter_alloc } from "../../../../../plugin-sdk/assemblyscript/assembly";

let spins: u64 = 0;

function mode(r: Reader): string {
  let first = true;
  if (!r.beginObject()) return "";
  while (r.member(first)) {
    first = false;
    if (r.keyIs("mode")) return readString(r);
    r.skip();
  }
  return "";
}

export function arbiter_weight(ptr: usize, len: usize): u64 {
  const r = new Reader(ptr, len);
  const request = decodeWeightRequest(r);
  if (!r.finish()) return 0;
  const m = request.params.isNull ? "" : mode(request.params.reader());
  const w = new Writer();
  if (m == "loop") {
    while (true) spins++;
  }
  if (m == "bomb") {
    while (true) store<u8>(heap.alloc(1 << 20), 1);
  }
  if (m == "bad") {
    w.ascii("{\"scores\":\"not a list\"}");
    return w.result();
  }
  if (m == "fail") {
    log(Level.Error, "hostile: failing on purpose");
    return 0;
  }
  let n = request.workloads.length;
  if (m == "short") n--;
  w.ascii("{\"scores\":[");
  for (let i = 0; i < n; i++) w.ascii(i > 0 ? ",1" : "1");
  w.ascii("]}");
  return w.result();
}
