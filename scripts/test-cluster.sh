#!/usr/bin/env bash
# Builds the real cluster the operator's end-to-end tests run against, from
# published Go modules (no release download, no container), cached outside
# the repository keyed by version:
#   - etcd and kube-apiserver (every operator test),
#   - kube-controller-manager and kube-scheduler (one `go build` with the
#     API server, sharing its compile cache), kwok (fake Nodes and the pods'
#     life cycle) and the Kubeflow training-operator: the "full cluster"
#     that runs pods, and the ProvisioningRequest CRD of cluster-autoscaler's
#     API module (autoscaling.x-k8s.io), for the autoscaling tests;
#   - the clients the deploy-side tests drive: kubectl (the same build as
#     the API server; it finds the `kubectl-arbiter` plugin), helm (the
#     chart in deploy/helm) and promtool (the alert rules in
#     deploy/monitoring);
#   - upstream CRDs the deploy-side tests apply our objects against, as
#     their Go modules publish them (nothing built): the Prometheus
#     Operator's ServiceMonitor and PrometheusRule (its
#     example/prometheus-operator-crd/ files) and cert-manager's
#     Certificate and Issuer (rendered from its Helm chart, the form
#     cert-manager ships them in, with the helm built here).
#
#   scripts/test-cluster.sh            build what is missing, print the bin dir
#   scripts/test-cluster.sh --print    print the bin dir only (exit 1 if unbuilt)
#
# Environment:
#   ARBITER_TEST_CLUSTER_CACHE  cache root (default ~/.cache/arbiter/test-cluster)
#   KUBE_VERSION                k8s.io/kubernetes release (default below)
#   ETCD_VERSION                go.etcd.io/etcd release (default below)
#   KWOK_VERSION                sigs.k8s.io/kwok release (default below)
#   TRAINING_OPERATOR_VERSION   github.com/kubeflow/training-operator release
#   HELM_VERSION                helm.sh/helm/v4 release
#   PROMETHEUS_VERSION          github.com/prometheus/prometheus module (promtool)
#   PROMETHEUS_OPERATOR_VERSION github.com/prometheus-operator/prometheus-operator (CRDs)
#   CERT_MANAGER_VERSION        github.com/cert-manager/cert-manager (CRDs)
#
# The binaries land in $CACHE/kube-$KUBE_VERSION-etcd-$ETCD_VERSION/bin
# (kwok and the training-operator are built into their own versioned
# directories and linked there);
# tests find them through ARBITER_TEST_CLUSTER_BIN, which scripts/test.sh
# exports. tests/README.md records versions, build times and disk use.
#
# Why the module needs editing: a module download of k8s.io/kubernetes
# carries no staging/ tree, yet its go.mod replaces every k8s.io/* staging
# module with ./staging/src/k8s.io/*; each such replace is pointed at the
# published v0.x module of the same release instead. etcd's server module
# likewise replaces its sibling modules with ../api etc.; those replaces are
# dropped so its go.mod's own requirements (the same release) apply.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
TRAINING_OPERATOR_VERSION=${TRAINING_OPERATOR_VERSION:-v1.8.1}
HELM_VERSION=${HELM_VERSION:-v4.3.2}
# Prometheus v3.x's module version (the v0.3xx scheme of its Go module).
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}
# The version Kueue v0.17 depends on; the proxy serves that pseudo-version.
AUTOSCALER_APIS_VERSION=${AUTOSCALER_APIS_VERSION:-v0.0.0-20240830133931-adfbe7e45277}
PROVISIONING_CRD=autoscaling.x-k8s.io_provisioningrequests.yaml
# The newest version of the root module the Go module proxy serves (it
# refuses later ones, though it serves v0.95.x of the pkg/apis/monitoring
# module, which carries no CRD files).
PROMETHEUS_OPERATOR_VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}
MONITORING_CRDS="monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml"
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.21.2}
CERT_MANAGER_CRDS="cert-manager.io_certificates.yaml cert-manager.io_issuers.yaml"
cache=${ARBITER_TEST_CLUSTER_CACHE:-$HOME/.cache/arbiter/test-cluster}
dir="$cache/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
bin="$dir/bin"

# shellcheck source=scripts/go-module.sh
. "$(dirname "$0")/go-module.sh"

if [ "${1:-}" = "--print" ]; then
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok training-operator helm promtool; do
    [ -x "$bin/$b" ] || exit 1
  done
  for f in $PROVISIONING_CRD $MONITORING_CRDS $CERT_MANAGER_CRDS; do
    [ -f "$bin/$f" ] || exit 1
  done
  echo "$bin"
  exit 0
elif [ $# -gt 0 ]; then
  echo "usage: scripts/test-cluster.sh [--print]" >&2
  exit 2
fi

if ! command -v go >/dev/null; then
  echo "scripts/test-cluster.sh needs Go (1.26 or newer) on PATH to build the test cluster (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok, training-operator)" >&2
  exit 2
fi

staging_version() { # v1.37.2 -> v0.37.2
  local v=${1#v1.}
  echo "v0.$v"
}

mkdir -p "$bin"
work=$(mktemp -d "${TMPDIR:-/tmp}/arbiter-test-cluster.XXXXXX")
trap 'rm -rf "$work"' EXIT
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
# k8s.io/kubernetes ships a go.work naming its staging/ tree, absent from the module.
export GOWORK=off

if [ ! -x "$bin/etcd" ]; then
  start=$SECONDS
  log "building etcd $ETCD_VERSION (go.etcd.io/etcd/server/v3) into $bin"
  module_source go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "$work/etcd"
  (
    cd "$work/etcd"
    for r in $(go mod edit -json | sed -n 's/^[[:space:]]*"Path": "\(go\.etcd\.io\/etcd\/[^"]*\)"$/\1/p' | sort -u); do
      go mod edit -dropreplace="$r" 2>/dev/null || true
    done
    go build -trimpath -ldflags='-s -w' -o "$work/etcd.bin" .
  )
  mv "$work/etcd.bin" "$bin/etcd"
  log "etcd built in $((SECONDS - start)) s"
fi

kube_commands="kube-apiserver kube-controller-manager kube-scheduler kubectl"
kube_missing=0
for b in $kube_commands; do [ -x "$bin/$b" ] || kube_missing=1; done
if [ "$kube_missing" -eq 1 ]; then
  start=$SECONDS
  staging=$(staging_version "$KUBE_VERSION")
  log "building kube-apiserver, kube-controller-manager, kube-scheduler and kubectl $KUBE_VERSION (staging modules $staging) into $bin; a first build takes 10-20 min on 2 cores"
  module_source k8s.io/kubernetes "$KUBE_VERSION" "$work/kubernetes"
  (
    cd "$work/kubernetes"
    replaced=0
    for m in $(go mod edit -json | sed -n 's/^[[:space:]]*"Path": "\(\.\/staging\/src\/[^"]*\)"$/\1/p'); do
      mod=${m#./staging/src/}
      go mod edit -replace="$mod=$mod@$staging"
      replaced=$((replaced + 1))
    done
    if [ "$replaced" -eq 0 ]; then
      echo "k8s.io/kubernetes $KUBE_VERSION: found no ./staging/src replace lines in go.mod; the module layout changed" >&2
      exit 1
    fi
    log "pointed $replaced staging replaces at $staging"
    # The version the server reports (/version, compatibility checks), as
    # Kubernetes' own build stamps it (hack/lib/version.sh).
    minor=${KUBE_VERSION#v1.}
    minor=${minor%%.*}
    stamp=""
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      stamp+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    mkdir -p "$work/kube-bin"
    # One build of the four commands: they share most packages, so the
    # second to fourth cost about a fifth of the first.
    go build -trimpath -ldflags="-s -w$stamp" -o "$work/kube-bin/" \
      ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler ./cmd/kubectl
  )
  for b in $kube_commands; do
    mv "$work/kube-bin/$b" "$bin/$b"
  done
  log "kube-apiserver, kube-controller-manager, kube-scheduler and kubectl built in $((SECONDS - start)) s"
fi

# A module's main package built as it is (its go.mod unchanged) into its own
# versioned directory under the cache, linked into $bin.
build_module() { # name module version package [go build tags]
  local name=$1 module=$2 version=$3 package=$4 tags=${5:-} start
  local out="$cache/$name-$version"
  if [ ! -x "$out/$name" ]; then
    start=$SECONDS
    log "building $name $version ($module) into $out"
    module_source "$module" "$version" "$work/$name"
    mkdir -p "$out"
    (cd "$work/$name" && go build -trimpath -tags="$tags" -ldflags='-s -w' -o "$work/$name.bin" "$package")
    mv "$work/$name.bin" "$out/$name"
    rm -rf "$work/$name"
    log "$name built in $((SECONDS - start)) s"
  fi
  ln -sfn "$out/$name" "$bin/$name"
}

build_module kwok sigs.k8s.io/kwok "$KWOK_VERSION" ./cmd/kwok

# The ProvisioningRequest CRD, as the module publishes it (nothing to build).
crd_dir="$cache/autoscaler-apis-$AUTOSCALER_APIS_VERSION"
if [ ! -f "$crd_dir/$PROVISIONING_CRD" ]; then
  log "fetching the ProvisioningRequest CRD (k8s.io/autoscaler/cluster-autoscaler/apis $AUTOSCALER_APIS_VERSION)"
  module_source k8s.io/autoscaler/cluster-autoscaler/apis "$AUTOSCALER_APIS_VERSION" "$work/autoscaler-apis"
  mkdir -p "$crd_dir"
  cp "$work/autoscaler-apis/config/crd/$PROVISIONING_CRD" "$crd_dir/$PROVISIONING_CRD.tmp"
  mv "$crd_dir/$PROVISIONING_CRD.tmp" "$crd_dir/$PROVISIONING_CRD"
fi
ln -sfn "$crd_dir/$PROVISIONING_CRD" "$bin/$PROVISIONING_CRD"
build_module training-operator github.com/kubeflow/training-operator "$TRAINING_OPERATOR_VERSION" ./cmd/training-operator.v1
build_module helm helm.sh/helm/v4 "$HELM_VERSION" ./cmd/helm
# Only rules are checked and tested: without Prometheus's service discovery
# (its cloud SDKs), the build takes a fraction of the time.
build_module promtool github.com/prometheus/prometheus "$PROMETHEUS_VERSION" ./cmd/promtool remove_all_sd

# Whether any of the files named in $2.. is missing from directory $1.
any_missing() { # dir file...
  local dir=$1 f
  shift
  for f in "$@"; do [ -f "$dir/$f" ] || return 0; done
  return 1
}

# The Prometheus Operator's ServiceMonitor and PrometheusRule CRDs, the
# files its module publishes (what its bundle.yaml is made of).
crd_dir="$cache/prometheus-operator-crds-$PROMETHEUS_OPERATOR_VERSION"
# shellcheck disable=SC2086 # the lists are words
if any_missing "$crd_dir" $MONITORING_CRDS; then
  log "fetching the ServiceMonitor and PrometheusRule CRDs (github.com/prometheus-operator/prometheus-operator $PROMETHEUS_OPERATOR_VERSION)"
  module_source github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION" "$work/prometheus-operator"
  mkdir -p "$crd_dir"
  for f in $MONITORING_CRDS; do
    cp "$work/prometheus-operator/example/prometheus-operator-crd/$f" "$crd_dir/$f.tmp"
    mv "$crd_dir/$f.tmp" "$crd_dir/$f"
  done
  rm -rf "$work/prometheus-operator"
fi
for f in $MONITORING_CRDS; do ln -sfn "$crd_dir/$f" "$bin/$f"; done

# cert-manager's Certificate and Issuer CRDs as its Helm chart installs
# them (`crds.enabled=true`); the module's deploy/crds/ files are, its
# README says, sources "for reference" that "might be incomplete". The
# chart is packaged with the release's version first, as cert-manager's
# release does (the module's Chart.yaml says v0.0.0), so the CRDs carry
# the labels a real install gives them.
crd_dir="$cache/cert-manager-crds-$CERT_MANAGER_VERSION"
# shellcheck disable=SC2086
if any_missing "$crd_dir" $CERT_MANAGER_CRDS; then
  log "rendering the Certificate and Issuer CRDs from cert-manager's chart (github.com/cert-manager/cert-manager $CERT_MANAGER_VERSION)"
  module_source github.com/cert-manager/cert-manager "$CERT_MANAGER_VERSION" "$work/cert-manager"
  helm_in_work() {
    HOME="$work/helm-home" HELM_CACHE_HOME="$work/helm-home/cache" \
      HELM_CONFIG_HOME="$work/helm-home/config" HELM_DATA_HOME="$work/helm-home/data" \
      "$bin/helm" "$@"
  }
  helm_in_work package "$work/cert-manager/deploy/charts/cert-manager" \
    --version "$CERT_MANAGER_VERSION" --app-version "$CERT_MANAGER_VERSION" \
    --destination "$work" >&2
  mkdir -p "$crd_dir"
  for f in $CERT_MANAGER_CRDS; do
    helm_in_work template cert-manager "$work/cert-manager-$CERT_MANAGER_VERSION.tgz" \
      --namespace cert-manager --set crds.enabled=true \
      --show-only "templates/crd-$f" >"$crd_dir/$f.tmp"
    if ! grep -q '^kind: CustomResourceDefinition$' "$crd_dir/$f.tmp"; then
      echo "cert-manager $CERT_MANAGER_VERSION: its chart's templates/crd-$f rendered no CustomResourceDefinition with crds.enabled=true; the chart's layout changed" >&2
      exit 1
    fi
    mv "$crd_dir/$f.tmp" "$crd_dir/$f"
  done
  rm -rf "$work/cert-manager"
fi
for f in $CERT_MANAGER_CRDS; do ln -sfn "$crd_dir/$f" "$bin/$f"; done

"$bin/etcd" --version >&2 | head -n 1 || true
"$bin/kube-apiserver" --version >&2 || true
echo "$bin"
