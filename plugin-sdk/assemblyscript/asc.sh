#!/usr/bin/env bash
# asc.sh ENTRY.ts -o OUT.wasm [asc options]: the AssemblyScript compiler
# package-lock.json pins, with asconfig.json's options, and this SDK on the
# package path as `arbiter` (lib/arbiter links to assembly/), so a plugin
# anywhere imports it as `from "arbiter"`. When node_modules is missing or
# older than package-lock.json it runs `npm ci` here first (needs node and
# npm; Debian: apt-get install nodejs npm). scripts/build-plugins.sh and
# the build.sh of `arbiter plugin new --lang assemblyscript` build with it.
set -euo pipefail
sdk="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
asc="$sdk/node_modules/.bin/asc"
stale() {
  [[ ! -x "$asc" || "$sdk/package-lock.json" -nt "$sdk/node_modules/.package-lock.json" ]]
}
if stale; then
  for tool in node npm; do
    if ! command -v "$tool" >/dev/null; then
      echo "asc.sh: $tool not found; the AssemblyScript compiler needs node and npm (Debian: apt-get install nodejs npm)" >&2
      exit 1
    fi
  done
  # One install at a time: builds may run side by side.
  exec 9<"$sdk/package-lock.json"
  flock 9
  if stale; then
    echo "asc.sh: installing the AssemblyScript compiler (npm ci in $sdk)" >&2
    (cd "$sdk" && npm ci --no-audit --no-fund --loglevel=error) >&2
  fi
  exec 9<&-
fi
exec "$asc" --config "$sdk/asconfig.json" --path "$sdk/lib" "$@"
