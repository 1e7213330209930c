# Sourced by the scripts that build Go programs from the module proxy
# (scripts/test-cluster.sh, scripts/kueue.sh): logging and a writable copy
# of a module's source.

log() { printf '==> %s\n' "$*" >&2; }

# A fresh, writable copy of a module's source (the module cache is read-only).
module_source() { # module version dest
  local json src
  json=$(go mod download -json "$1@$2")
  src=$(printf '%s' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "$src" ] || [ ! -d "$src" ]; then
    echo "go mod download $1@$2 gave no source directory:" >&2
    printf '%s\n' "$json" >&2
    exit 1
  fi
  rm -rf "$3"
  cp -r "$src" "$3"
  chmod -R u+w "$3"
}
