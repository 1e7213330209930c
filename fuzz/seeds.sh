#!/usr/bin/env bash
# Seeds the fuzz corpora from the repo's real inputs:
#   corpus/manifests/  scenarios, examples, the seed article's manifests,
#                      YAML blocks of README.md and docs/design.md, a few extra kinds
#   corpus/bundle/     bundle.yaml files and PolicyBundle blocks of the docs,
#                      plus a tenant, a WASM and an error-expecting bundle
#   corpus/cel/        every `expression`/`messageExpression` of those
#                      bundles, plus pod-set expressions and edge cases
# Idempotent (files are named by content hash); files over 64 KiB are left
# out (the CRD schemas). The corpora are not committed (.gitignore);
# scripts/fuzz.sh runs this first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
shared=${ARBITER_SHARED:-$root/../shared}
corpus=$here/corpus
mkdir -p "$corpus/manifests" "$corpus/bundle" "$corpus/cel" \
  "$corpus/webhook" "$corpus/records" "$corpus/jobs"

# add TARGET < content
add() {
  local tmp
  tmp=$(mktemp)
  cat >"$tmp"
  if [ -s "$tmp" ] && [ "$(wc -c <"$tmp")" -le 65536 ]; then
    mv "$tmp" "$corpus/$1/seed-$(sha1sum "$tmp" | cut -c1-16)"
  else
    rm -f "$tmp"
  fi
}

# YAML code blocks of a markdown file, one per line-delimited chunk on stdout, NUL-separated.
yaml_blocks() {
  awk '/^```ya?ml/{f=1; next} /^```/{if (f) printf "%c", 0; f=0} f' "$1"
}

# `expression:` and `messageExpression:` values of a bundle.yaml, one per line
# (folded `>-` blocks joined; quotes stripped — good enough for seeds).
expressions() {
  awk '
    function flush() { if (folded != "") print folded; folded = ""; infold = 0 }
    {
      if (infold) {
        match($0, /^ */)
        if (RLENGTH > indent && $0 !~ /^ *$/) { line = $0; sub(/^ +/, "", line); folded = folded (folded == "" ? "" : " ") line; next }
        flush()
      }
      if (match($0, /^ *(expression|messageExpression): */)) {
        match($0, /^ */); indent = RLENGTH
        value = $0; sub(/^ *(expression|messageExpression): */, "", value)
        if (value ~ /^>-?$|^\|-?$/) { infold = 1; folded = ""; next }
        if (value ~ /^".*"$/ || value ~ /^'\''.*'\''$/) value = substr(value, 2, length(value) - 2)
        print value
      }
    }
    END { flush() }' "$1"
}

# ------------------------------------------------------------------ manifests
while IFS= read -r -d '' f; do
  add manifests <"$f"
done < <(find "$root/tests/scenarios" "$root/examples" -name '*.yaml' -print0)
[ -f "$shared/testdata/article/manifests.yaml" ] && add manifests <"$shared/testdata/article/manifests.yaml"
for md in "$root/README.md" "$root/docs/design.md"; do
  [ -f "$md" ] || continue
  while IFS= read -r -d '' block; do
    if grep -q 'kind: PolicyBundle' <<<"$block"; then
      printf '%s\n' "$block" | add bundle
    else
      printf '%s\n' "$block" | add manifests
    fi
  done < <(yaml_blocks "$md")
done
add manifests <<'YAML'
apiVersion: arbiter.dev/v1alpha1
kind: JobIntegration
metadata: {name: kfp-v1-pipelinerun}
spec:
  jobApiVersion: kubeflow.org/v1
  jobKind: PipelineRun
  podSets: >-
    object.spec.steps.map(s, {'name': s.name,
      'count': has(s.parallelism) ? s.parallelism : 1, 'requests': s.resources})
  hold: {path: spec.paused, held: true, released: null}
---
apiVersion: kubeflow.org/v1
kind: PipelineRun
metadata:
  name: churn-model
  namespace: analytics
  labels: {arbiter.dev/queue-name: pipelines}
  annotations: {sim.arbiter.dev/arrival: 1m, sim.arbiter.dev/runtime: 10m}
spec:
  steps:
  - {name: ingest, resources: {cpu: "2", memory: 4Gi}}
  - {name: train, parallelism: 4, resources: {cpu: "8", nvidia.com/gpu: "1"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: analytics, labels: {tier: &tier gold}, annotations: {team: *tier}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: analytics, labels: {kueue.x-k8s.io/queue-name: pipelines}}
spec:
  parallelism: 3
  completions: 2
  template:
    spec:
      containers:
      - name: c
        resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {nvidia.com/gpu: 1}}
      initContainers:
      - {name: i, resources: {requests: {cpu: "2"}}}
YAML

# --------------------------------------------------------------------- bundle
while IFS= read -r -d '' f; do
  add bundle <"$f"
done < <(find "$root/policies" -name 'bundle.yaml' -print0)
add bundle <<'YAML'
apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {name: team-a-rules, version: "1"}
spec:
  tenant: team-a
  policies:
  - name: urgent-first
    hook: weight
    cel:
      expression: "'urgent' in workload.labels ? 10.0 : double(workload.gpus)"
  - name: small-only
    hook: admission
    match: {namespaces: [team-a]}
    cel:
      expression: "workload.gpus <= params.max"
      messageExpression: "'at most ' + string(params.max) + ' GPUs'"
      retryable: false
    config: {max: 4}
    failurePolicy: Ignore
    mode: DryRun
    limits: {timeoutMs: 10, memoryMiB: 8}
  tests:
  - {name: big, policy: small-only, input: {workload: {namespace: team-a, gpus: 16}}, expect: {allowed: false, reasonContains: "at most", retryable: false}}
  - {name: urgent, policy: urgent-first, input: {workloads: [{name: a, labels: {urgent: "1"}}, {name: b, gpus: 2}]}, expect: {scores: [10.0, 2.0]}}
YAML
add bundle <<'YAML'
apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {name: wasm-rules, version: "2"}
spec:
  policies:
  - name: shortest
    hook: weight
    match: {namespaces: [a], clusterQueues: [cq], kinds: [Job], flavors: [a100]}
    wasm: {module: plugin.wasm, config: {scale: 10.0, referenceSeconds: 60.0, unknownScore: 1.0}}
    limits: {timeoutMs: 100, memoryMiB: 64}
  - name: boom
    hook: fairShare
    cel: {expression: "clusterQueue.weight / 0.0"}
  - name: nodes
    hook: autoscale
    cel: {expression: "flavor.nodes + 1"}
  - name: order
    hook: flavor
    cel: {expression: "params.order.filter(f, f != 'v100')"}
    config: {order: [a100, v100]}
  tests:
  - {name: wasm, policy: shortest, input: {workloads: [{name: x, namespace: a, estimate: {runtimeSeconds: 60, samples: 1}}]}}
  - {name: nan, policy: boom, input: {clusterQueues: [{name: c, weight: 1.0}]}, expect: {error: evaluation}}
  - {name: n, policy: nodes, input: {flavors: [{name: a100, nodes: 2}]}, expect: {nodes: [3]}}
  - {name: o, policy: order, input: {candidates: [a100, v100]}, expect: {flavors: [a100]}}
YAML

# ------------------------------------------------------------------------ cel
for f in "$corpus"/bundle/*; do
  expressions "$f"
done | sort -u | while IFS= read -r e; do printf '%s' "$e" | add cel; done
while IFS= read -r e; do printf '%s' "$e" | add cel; done <<'CEL'
workload.podSets.all(p, p.requests.all(r, p.requests[r] <= 8.0))
workload.labels.?team.orValue('none') == tenant.name
has(workload.estimate) ? workload.estimate.runtimeSeconds : 0.0
[1, 2, 3].map(x, x * params.n).exists(y, y > 4)
{'a': 1, 'b': 2}.filter(k, k != 'a').size() == 1
quantity('500m') + quantity('1Gi') > 0.0
type(params.m) == map && params.list[0] == 'a100'
double(workload.retries) / (now + 1.0) - clusterQueue.decayedUsage
int(workload.ageSeconds) % 7 == 0 || workload.name.startsWith('w')
string(cohort.parent) + queue.name + flavor.name
object.spec.names.map(n, {'name': n, 'count': object.spec.replicas, 'template': object.spec.template})
[{'name': 'main', 'count': 2, 'requests': {'cpu': '1', 'nvidia.com/gpu': '1'}}]
[{'name': object.metadata.name.lowerAscii(), 'minCount': 1, 'template': object.spec.template}]
CEL

# The webhooks: a first byte choosing the webhook (even: mutating, odd:
# validating), then an AdmissionReview as the API server sends it.
job='{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"train","namespace":"team-a","labels":{"arbiter.dev/queue-name":"research"}},"spec":{"parallelism":2,"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"train","image":"pytorch","resources":{"requests":{"nvidia.com/gpu":"4"}}}]}}}}'
cq='{"apiVersion":"arbiter.dev/v1alpha1","kind":"ClusterQueue","metadata":{"name":"research"},"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu","nvidia.com/gpu"],"flavors":[{"name":"a100","resources":[{"name":"cpu","nominalQuota":64},{"name":"nvidia.com/gpu","nominalQuota":-1}]}]}]}}'
review() {
  printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"%s","version":"v1","kind":"%s"},"resource":{"group":"%s","version":"v1","resource":"%s"},"operation":"%s","userInfo":{"username":"alice"},"namespace":"team-a","name":"x","object":%s}}' "$@"
}
{ printf '\x00'; review batch Job batch jobs CREATE "$job"; } | add webhook
{ printf '\x01'; review arbiter.dev ClusterQueue arbiter.dev clusterqueues UPDATE "$cq"; } | add webhook
{ printf '\x00'; printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}'; } | add webhook
# Admission records and devices annotations as the operator writes them.
printf '%s' '{"flavors":[{"nvidia.com/gpu":"a100"}],"counts":[1],"admittedAt":2000,"queueTime":1000,"injected":[{"templatePath":".spec.template","nodeSelector":{"gpu":null,"zone":"b"},"tolerations":1}]}' | add records
printf '%s' '{"flavors":[{"nvidia.com/gpu":"a100"}],"counts":[3],"admittedAt":2000,"queueTime":1000,"injected":[],"placements":[{"podSet":0,"flavor":"a100","node":"n-1","pods":3,"cards":[{"resource":"nvidia.com/gpu","card":0,"amount":"1500m"}]}]}' | add records
printf '%s' 'nvidia.com/gpu=4' | add records
# Jobs as the watches hand them over, and devices annotations.
printf '%s' "$job" | add jobs
printf '%s' '{"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{"name":"p","namespace":"team-a","labels":{"kueue.x-k8s.io/queue-name":"research"}},"spec":{"runPolicy":{"suspend":true},"pytorchReplicaSpecs":{"Master":{"replicas":1,"template":{"spec":{"containers":[{"name":"pytorch","resources":{"requests":{"nvidia.com/gpu":"1"}}}]}}},"Worker":{"replicas":2,"template":{"spec":{"containers":[{"name":"pytorch","resources":{"requests":{"nvidia.com/gpu":"1"}}}]}}}}},"status":{"conditions":[{"type":"Succeeded","status":"True"}]}}' | add jobs
printf '%s' 'nvidia.com/gpu=4' | add jobs

for t in manifests bundle cel webhook records jobs; do
  echo "corpus/$t: $(find "$corpus/$t" -type f | wc -l) files"
done
