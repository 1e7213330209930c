#!/usr/bin/env bash
# Fuzzes the untrusted-input boundaries (fuzz/README.md): the manifest
# loader, the policy bundle loader, the CEL compilers, the webhooks'
# request decoding, the admission records and the job and Node readers, one
# target after the other, each for SECONDS_PER_TARGET (default 1800). Not
# run by CI.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (targets: manifests bundle cel webhook records jobs)
#
# Needs a nightly toolchain and cargo-fuzz (`rustup toolchain install
# nightly`, `cargo install cargo-fuzz --locked`). Seeds the corpora from the
# repo (fuzz/seeds.sh), builds once (release, debug assertions, overflow
# checks, AddressSanitizer), then runs each target with
# `-max_total_time=N -rss_limit_mb=4096 -timeout=10`. Reports each run's
# final statistics and every artifact (crash, timeout, OOM input) it left in
# fuzz/artifacts/TARGET/; exits 1 if any target found something.
#
# Environment: FUZZ_TARGET_DIR (cargo target dir; default
# $CARGO_TARGET_DIR/fuzz, else fuzz/target), FUZZ_ARGS (more libFuzzer
# flags, e.g. "-max_len=20000"), FUZZ_BUILD_ARGS (more `cargo fuzz` flags,
# e.g. "-s none" to build without a sanitizer). Logs: fuzz/logs/TARGET.log.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*"; }

seconds=${1:-1800}
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]; SECONDS_PER_TARGET must be a positive whole number, got '$seconds'" >&2
  exit 2
fi
shift $(( $# > 0 ? 1 : 0 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(manifests bundle cel webhook records jobs)
for t in "${targets[@]}"; do
  case "$t" in
    manifests|bundle|cel|webhook|records|jobs) ;;
    *) echo "unknown fuzz target '$t'; the targets are manifests, bundle, cel, webhook, records and jobs" >&2; exit 2 ;;
  esac
done

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "scripts/fuzz.sh needs a nightly toolchain: rustup toolchain install nightly" >&2
  exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "scripts/fuzz.sh needs cargo-fuzz: cargo install cargo-fuzz --locked" >&2
  exit 2
fi

target_dir=${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/fuzz}}
target_dir=${target_dir:-$PWD/fuzz/target}
# shellcheck disable=SC2206
build_args=(--target-dir "$target_dir" ${FUZZ_BUILD_ARGS:-})
# shellcheck disable=SC2206
extra=(${FUZZ_ARGS:-})

log "seeding fuzz/corpus (fuzz/seeds.sh)"
fuzz/seeds.sh
log "building the fuzz targets (nightly, target dir $target_dir)"
cargo +nightly fuzz build "${build_args[@]}"

mkdir -p fuzz/logs
found=0
summary=()
for t in "${targets[@]}"; do
  mkdir -p "fuzz/artifacts/$t"
  before=$(mktemp)
  find "fuzz/artifacts/$t" -type f | sort >"$before"
  dict=fuzz/dict/yaml.dict
  [ "$t" = cel ] && dict=fuzz/dict/cel.dict
  case "$t" in webhook|records|jobs) dict=fuzz/dict/json.dict ;; esac
  log "fuzzing $t for ${seconds}s (log: fuzz/logs/$t.log)"
  status=0
  cargo +nightly fuzz run "${build_args[@]}" "$t" -- \
    -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=10 \
    -dict="$dict" -print_final_stats=1 "${extra[@]}" >"fuzz/logs/$t.log" 2>&1 || status=$?
  new=$(find "fuzz/artifacts/$t" -type f | sort | comm -13 "$before" -)
  rm -f "$before"
  stats=$(grep -E '^#[0-9]+' "fuzz/logs/$t.log" | tail -n 1 || true)
  execs=$(grep -E '^stat::number_of_executed_units' "fuzz/logs/$t.log" | awk '{print $2}' || true)
  if [ "$status" -ne 0 ] || [ -n "$new" ]; then
    found=1
    summary+=("$t: FOUND SOMETHING (exit $status) — last stats: ${stats:-none}")
    grep -E '^(==[0-9]+==ERROR|thread .* panicked|SUMMARY|ALARM|.*deadly signal|Test unit written)' "fuzz/logs/$t.log" | head -n 20 || true
    for a in $new; do
      summary+=("  artifact: $a  (reproduce: cargo +nightly fuzz run --target-dir $target_dir $t $a; minimise: cargo +nightly fuzz tmin --target-dir $target_dir $t $a)")
    done
  else
    summary+=("$t: clean, ${execs:-?} executions in ${seconds}s — $stats")
  fi
done

log "summary"
printf '%s\n' "${summary[@]}"
exit "$found"
