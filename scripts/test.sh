#!/usr/bin/env bash
# The one test command (README): prepares a fresh machine, then checks and
# tests everything. Safe to re-run; every set-up step is skipped when done.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf "==> [%dm%02ds] %s\n" $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

# Toolchain pieces the build needs (idempotent).
if command -v rustup >/dev/null; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

# A clean run needs about 4 GB under target/ (see Cargo.toml's profiles).
# Incremental compilation would roughly double that and buys nothing on a
# one-shot run; a caller may still turn it back on.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# On CI (CI set, no CARGO_TARGET_DIR given), cargo's output is kept between
# runs under the user's cache, as a CI cache of target/ would be: a warm run
# builds only the workspace's own crates, its dependencies are reused. The
# workspace's own artifacts are removed when the run ends (a clone elsewhere
# would not reuse them), so the cache holds only dependencies.
if [[ -n "${CI:-}" && -z "${CARGO_TARGET_DIR:-}" ]]; then
  export CARGO_TARGET_DIR="${ARBITER_CI_TARGET_DIR:-$HOME/.cache/arbiter/ci-target}"
  forget_workspace() {
    cargo clean --quiet --target-dir "$CARGO_TARGET_DIR" \
      -p arbiter -p arbiter-abi -p arbiter-core -p arbiter-policy \
      -p arbiter-sim -p arbiter-operator -p arbiter-testcluster || true
  }
  trap forget_workspace EXIT
fi
target_dir="${CARGO_TARGET_DIR:-target}"
mkdir -p target "$target_dir"
free_kib=$(df -Pk "$target_dir" | awk 'NR==2 {print $4}')
if [[ -n "$free_kib" && "$free_kib" -lt $((6 * 1024 * 1024)) ]]; then
  log "warning: only $((free_kib / 1024)) MiB free where $target_dir lives; a clean build needs about 4 GB"
fi

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
log "plugins (scripts/build-plugins.sh)"
ARBITER_REQUIRE_PLUGINS=1 ./scripts/build-plugins.sh
log "test cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, training-operator, helm, promtool (scripts/test-cluster.sh; cached after the first build)"
ARBITER_TEST_CLUSTER_BIN=$(./scripts/test-cluster.sh)
export ARBITER_TEST_CLUSTER_BIN
log "Kueue's manager and CRDs from the Go module proxy, for the shadow mode's end-to-end test (scripts/kueue.sh; cached after the first build)"
./scripts/kueue.sh >/dev/null
# Headless Chromium for tests/dashboard.rs (Debian's package), installed
# once; the test fails, never skips, without it.
if ! command -v chromium >/dev/null; then
  log "installing chromium (apt-get) for the dashboard's browser test"
  if [[ $(id -u) -eq 0 ]]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
log "cargo test"
ARBITER_REQUIRE_PLUGINS=1 cargo test --workspace --all-targets --locked
log "disk used by $target_dir: $(du -sh "$target_dir" | cut -f1)"
