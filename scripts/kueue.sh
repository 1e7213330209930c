#!/usr/bin/env bash
# Builds Kueue's manager from the Go module proxy, to run beside Arbiter on
# the same API server — the shadow mode's end-to-end test
# (crates/operator/tests/shadow.rs, through arbiter_testcluster::kueue) and
# the benchmark (examples/operator-perf.rs --against kueue) — cached outside
# the repository keyed by version like the test cluster
# (scripts/test-cluster.sh):
#   - the manager, `sigs.k8s.io/kueue` `./cmd/kueue`, built as the module is
#     (its go.mod unchanged), the version stamped as Kueue's Makefile does;
#   - its CRDs, `config/components/crd/bases/*.yaml`, as the module ships them.
#
#   scripts/kueue.sh            build what is missing, print the directory
#   scripts/kueue.sh --print    print the directory only (exit 1 if unbuilt)
#
# Environment:
#   ARBITER_TEST_CLUSTER_CACHE  cache root (default ~/.cache/arbiter/test-cluster)
#   KUEUE_VERSION               sigs.k8s.io/kueue release (default below)
#
# The directory holds `kueue` and `crds/`. scripts/test.sh runs it before
# the tests.
set -euo pipefail

KUEUE_VERSION=${KUEUE_VERSION:-v0.17.0}
cache=${ARBITER_TEST_CLUSTER_CACHE:-$HOME/.cache/arbiter/test-cluster}
out="$cache/kueue-$KUEUE_VERSION"

# shellcheck source=scripts/go-module.sh
. "$(dirname "$0")/go-module.sh"

built() { [ -x "$out/kueue" ] && [ -f "$out/crds/kueue.x-k8s.io_workloads.yaml" ]; }

if [ "${1:-}" = "--print" ]; then
  built || exit 1
  echo "$out"
  exit 0
elif [ $# -gt 0 ]; then
  echo "usage: scripts/kueue.sh [--print]" >&2
  exit 2
fi

if ! built; then
  if ! command -v go >/dev/null; then
    echo "scripts/kueue.sh needs Go (1.25 or newer) on PATH to build Kueue" >&2
    exit 2
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/arbiter-kueue.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  export GOFLAGS="-mod=mod -buildvcs=false"
  export CGO_ENABLED=0
  export GOWORK=off
  start=$SECONDS
  log "building Kueue $KUEUE_VERSION (sigs.k8s.io/kueue ./cmd/kueue) into $out"
  module_source sigs.k8s.io/kueue "$KUEUE_VERSION" "$work/kueue"
  (
    cd "$work/kueue"
    go build -trimpath \
      -ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
      -o "$work/kueue.bin" ./cmd/kueue
  )
  mkdir -p "$out/crds.tmp"
  cp "$work"/kueue/config/components/crd/bases/*.yaml "$out/crds.tmp/"
  rm -rf "$out/crds"
  mv "$out/crds.tmp" "$out/crds"
  mv "$work/kueue.bin" "$out/kueue"
  log "Kueue built in $((SECONDS - start)) s"
fi
echo "$out"
