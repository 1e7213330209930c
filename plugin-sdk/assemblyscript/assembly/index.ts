// The AssemblyScript guest SDK for Arbiter policy plugins (plugin ABI v1,
// plugin-sdk/ABI.md). A plugin's entry file re-exports the ABI's two
// functions and exports each hook it implements in one line:
//
//   export { arbiter_abi_version, arbiter_alloc } from "<sdk>/assembly";
//   export function arbiter_weight(ptr: usize, len: usize): u64 { return weight(ptr, len, scores); }
//
// and is built with asconfig.json's options: `--runtime stub`, and
// `--use abort=`, which turns AssemblyScript's aborts (a failed assertion,
// an index out of range, a missing Map key) into traps — the call fails
// as `trap` — instead of an import of `env.abort` the host would refuse.
// So the module imports nothing but, when log() is used, arbiter.log. Memory: the stub runtime's bump allocator, never
// freed — every call runs in a fresh instance.

export * from "./json";
export * from "./views";

import { Writer, writeString } from "./json";

/** The plugin ABI this SDK speaks; the host refuses any other. */
export function arbiter_abi_version(): i32 {
  return 1;
}

/** A buffer of len bytes for the host to write a request into. */
export function arbiter_alloc(len: usize): usize {
  return heap.alloc(len);
}

/**
 * What `arbiter_weight_fields` returns for the weight request fields a
 * plugin reads (WEIGHT_FIELD_NAMES lists them; plugin-sdk/ABI.md "Lean
 * weight requests"); the host refuses the module at load, naming it, if
 * one is unknown. Export it in one line:
 *
 *   export function arbiter_weight_fields(): u64 { return weightFields(["workloads.labels"]); }
 */
export function weightFields(names: string[]): u64 {
  const w = new Writer();
  w.byte(0x5b);
  for (let i = 0; i < names.length; i++) {
    if (i > 0) w.byte(0x2c);
    writeString(w, names[i]);
  }
  w.byte(0x5d);
  return w.result();
}

/** Log levels of arbiter.log. */
export enum Level {
  Error = 0,
  Warn = 1,
  Info = 2,
  Debug = 3,
}

// @ts-ignore: decorator
@external("arbiter", "log")
declare function arbiterLog(level: i32, ptr: usize, len: usize): void;

/**
 * Logs a line to the decision log through the host's arbiter.log (the
 * module imports it only if a plugin calls this).
 */
export function log(level: Level, message: string): void {
  const bytes = String.UTF8.encode(message);
  arbiterLog(level, changetype<usize>(bytes), <usize>bytes.byteLength);
}
