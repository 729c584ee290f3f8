#!/usr/bin/env bash
# README command 1: run kthena-py against a local control plane with a sample workload.
#
# Builds what is missing (virtualenv, control-plane binaries, kubectl), starts the cluster tier on
# loopback (etcd, kube-apiserver, kube-controller-manager, kwok fake GPU nodes, Volcano's scheduler),
# installs the CRDs, registers the admission webhooks at the manager's loopback address (the manager
# makes its own certificate and fills in caBundle, as in a cluster), starts the manager, shows that an
# invalid ModelServing is refused, applies examples/modelserving-pd.yaml and shows its progress until it
# is Available. Then it keeps running until Ctrl-C (or exits at once with --exit-when-ready), stopping
# everything cleanly. Needs no kubectl of its own: it uses the one the build script puts in the cache.
#
# Environment: KTHENA_LOCAL_DIR (state and logs, default .kthena-local), SAMPLE, LOG_FORMAT (console or
# json, default console), METRICS_PORT / PROBE_PORT / WEBHOOK_PORT (default 18080 / 18081 / 19443),
# PYTHON (an interpreter with kthena-py installed; default: .venv, created if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DIR=${KTHENA_LOCAL_DIR:-$ROOT/.kthena-local}
SAMPLE=${SAMPLE:-examples/modelserving-pd.yaml}
LOG_FORMAT=${LOG_FORMAT:-console}
METRICS_PORT=${METRICS_PORT:-18080}
PROBE_PORT=${PROBE_PORT:-18081}
WEBHOOK_PORT=${WEBHOOK_PORT:-19443}
EXIT_WHEN_READY=0
[ "${1:-}" = "--exit-when-ready" ] && EXIT_WHEN_READY=1

say() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }
fail() { printf '\033[1;31m== %s\033[0m\n' "$*" >&2; exit 1; }

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ ! -x .venv/bin/kthena-py ]; then
    say "creating .venv and installing kthena-py"
    python3 -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet --constraint constraints.txt -e .
  fi
  PY=.venv/bin/python
fi

# Prints progress only for what it has to build; silent when everything is cached.
hack/build-controlplane.sh >/dev/null
KUBECTL=$("$PY" -c 'from kthena_py.testing.controlplane import find_kubectl; print(find_kubectl())')

mkdir -p "$DIR/logs" "$DIR/bin"
ln -sf "$KUBECTL" "$DIR/bin/kubectl"
rm -f "$DIR/state.json"
pids=()
cleanup() {
  say "stopping"
  # The manager first, while the API server can still take its Lease release.
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
}
trap cleanup EXIT INT TERM

say "starting the control plane in $DIR (logs: $DIR/logs)"
"$PY" -m kthena_py.testing.controlplane up --tier cluster --dir "$DIR" --crds manifests/crd/workload.serving.volcano.sh_*.yaml manifests/crd/serving.kthena-py.io_*.yaml \
  >"$DIR/logs/controlplane-up.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
  [ -f "$DIR/state.json" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { tail -20 "$DIR/logs/controlplane-up.log" >&2; exit 1; }
  sleep 1
done
[ -f "$DIR/state.json" ] || fail "control plane did not start; see $DIR/logs"
export KUBECONFIG="$DIR/kubeconfig"
kubectl() { "$KUBECTL" "$@"; }

say "registering the admission webhooks at https://127.0.0.1:$WEBHOOK_PORT"
kubectl create namespace kthena-system >/dev/null
"$PY" hack/local-webhooks.py "https://127.0.0.1:$WEBHOOK_PORT" | kubectl apply --server-side -f - >/dev/null

say "starting the manager (log: $DIR/logs/manager.log)"
# As in the cluster: self-managed webhook certificate (Secret kthena-py-webhook-server-cert in
# kthena-system, caBundle injected), here also valid for 127.0.0.1, which the API server calls.
POD_NAMESPACE=kthena-system "$PY" -m kthena_py.main manager --kubeconfig "$KUBECONFIG" \
  --metrics-bind-address "127.0.0.1:$METRICS_PORT" --health-probe-bind-address "127.0.0.1:$PROBE_PORT" \
  --webhook-port "$WEBHOOK_PORT" --webhook-bind-address 127.0.0.1 --webhook-host 127.0.0.1 \
  --log-format "$LOG_FORMAT" >"$DIR/logs/manager.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  "$PY" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$PROBE_PORT/readyz', timeout=2)" 2>/dev/null && break
  kill -0 "${pids[1]}" 2>/dev/null || { tail -20 "$DIR/logs/manager.log" >&2; fail "the manager exited"; }
  sleep 1
done

# The API server trusts the webhook once the manager has put its CA into caBundle; until then a
# request fails with "failed calling webhook". A server-side dry run of the sample tells.
for _ in $(seq 1 60); do
  kubectl apply --dry-run=server -f "$SAMPLE" >/dev/null 2>&1 && break
  sleep 1
done
kubectl apply --dry-run=server -f "$SAMPLE" >/dev/null || fail "the sample is refused; see $DIR/logs/manager.log"

bad=$("$PY" - "$SAMPLE" <<'PY'
import sys, yaml
doc = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") == "ModelServing")
doc["spec"]["template"]["roles"][0]["workerReplicas"] = -1
print(yaml.safe_dump(doc))
PY
)
if refusal=$(kubectl apply --dry-run=server -f - <<<"$bad" 2>&1); then
  fail "an invalid ModelServing (workerReplicas: -1) was accepted: the webhooks are not in place"
fi
say "admission is on: a copy of the sample with workerReplicas: -1 is refused, as in a cluster:"
printf '   %s\n' "$refusal" >&2

say "applying $SAMPLE"
kubectl apply -f "$SAMPLE"
name=$("$PY" -c 'import sys,yaml; print(next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind")=="ModelServing")["metadata"]["name"])' "$SAMPLE")

say "waiting for modelserving/$name to become Available"
show() {
  kubectl get modelserving "$name" 2>/dev/null || true
  echo
  kubectl get pods -l "modelserving.volcano.sh/name=$name" -o wide 2>/dev/null || true
  echo
  kubectl get podgroups 2>/dev/null || true
}
available=0
for _ in $(seq 1 180); do
  if [ -t 1 ]; then clear; fi
  show
  if kubectl wait --for=condition=Available "modelserving/$name" --timeout=1s >/dev/null 2>&1; then
    [ -t 1 ] && clear
    show
    available=1
    break
  fi
  sleep 2
done
[ "$available" = 1 ] || fail "modelserving/$name did not become Available; see $DIR/logs/manager.log"
say "modelserving/$name is Available"

cat >&2 <<EOF

  metrics     http://127.0.0.1:$METRICS_PORT/metrics
  probes      http://127.0.0.1:$PROBE_PORT/healthz  http://127.0.0.1:$PROBE_PORT/readyz
  webhooks    https://127.0.0.1:$WEBHOOK_PORT (registered with the API server, certificate by the manager)
  logs        $DIR/logs/manager.log ($LOG_FORMAT; LOG_FORMAT=json for JSON lines), control plane: $DIR/logs/
  kubectl     export KUBECONFIG=$KUBECONFIG PATH=$DIR/bin:\$PATH
              kubectl get modelservings,pods,podgroups -A

EOF
if [ "$EXIT_WHEN_READY" = 1 ]; then exit 0; fi
say "running; Ctrl-C stops everything"
wait "${pids[0]}"
