// A minimal host for the SDK's tests: what Arbiter's host does for one
// hook call (plugin-sdk/ABI.md), on Node's WebAssembly: a fresh instance,
// arbiter_alloc, the request written there, the hook, the response read back.
import { readFileSync } from "node:fs";

export function load(path) {
  const module = new WebAssembly.Module(readFileSync(path));
  const imports = WebAssembly.Module.imports(module).filter((i) => !(i.module === "arbiter" && i.name === "log"));
  if (imports.length) throw new Error(`${path} imports ${JSON.stringify(imports)}`);
  return module;
}

/** Calls export `name` ((ptr, len) -> i64) of a fresh instance with request; returns [response text, log lines]. */
export function call(module, name, request) {
  const logs = [];
  let memory;
  const text = (ptr, len) => new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array(memory.buffer, ptr, len));
  const instance = new WebAssembly.Instance(module, {
    arbiter: { log: (level, ptr, len) => logs.push([level, text(ptr, len)]) },
  });
  const e = instance.exports;
  memory = e.memory;
  if (e.arbiter_abi_version() !== 1) throw new Error("arbiter_abi_version is not 1");
  const bytes = new TextEncoder().encode(request);
  const ptr = e.arbiter_alloc(bytes.length);
  new Uint8Array(memory.buffer, ptr, bytes.length).set(bytes);
  const out = name === "arbiter_weight_fields" ? e[name]() : e[name](ptr, bytes.length);
  const outPtr = Number(BigInt.asUintN(64, out) >> 32n);
  const outLen = Number(BigInt.asUintN(64, out) & 0xffffffffn);
  return [text(outPtr, outLen), logs];
}
