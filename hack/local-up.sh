#!/usr/bin/env bash
# README command 1: run kthena-py against a local control plane with a sample workload.
#
# Builds what is missing (virtualenv, control-plane binaries), starts the cluster tier on loopback
# (etcd, kube-apiserver, kube-controller-manager, kwok fake GPU nodes, Volcano's scheduler),
# installs the CRDs, starts the manager, applies examples/modelserving-pd.yaml and shows its
# progress until it is Available. Then it keeps running until Ctrl-C (or exits at once with
# --exit-when-ready), stopping everything cleanly.
#   KUBECONFIG=.kthena-local/kubeconfig kubectl get modelservings,pods,podgroups -A
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DIR=${KTHENA_LOCAL_DIR:-$ROOT/.kthena-local}
SAMPLE=${SAMPLE:-examples/modelserving-pd.yaml}
EXIT_WHEN_READY=0
[ "${1:-}" = "--exit-when-ready" ] && EXIT_WHEN_READY=1

say() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

if [ ! -x .venv/bin/kthena-py ]; then
  say "creating .venv and installing kthena-py"
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e .
fi
PY=.venv/bin/python

say "building missing control-plane binaries (first run: ~15-25 minutes on 2 cores)"
hack/build-controlplane.sh >/dev/null

mkdir -p "$DIR/logs"
rm -f "$DIR/state.json"
pids=()
cleanup() {
  say "stopping"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

say "starting the control plane in $DIR (logs: $DIR/logs)"
$PY -m kthena_py.testing.controlplane up --tier cluster --dir "$DIR" --crds manifests/crd/workload.serving.volcano.sh_*.yaml \
  >"$DIR/logs/controlplane-up.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
  [ -f "$DIR/state.json" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { tail -20 "$DIR/logs/controlplane-up.log" >&2; exit 1; }
  sleep 1
done
[ -f "$DIR/state.json" ] || { echo "control plane did not start; see $DIR/logs" >&2; exit 1; }
export KUBECONFIG="$DIR/kubeconfig"

say "starting the manager (log: $DIR/logs/manager.log)"
.venv/bin/kthena-py manager --kubeconfig "$KUBECONFIG" --metrics-bind-address 127.0.0.1:18080 \
  --health-probe-bind-address 127.0.0.1:18081 --webhook-port 0 >"$DIR/logs/manager.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  $PY -c "import urllib.request as u; u.urlopen('http://127.0.0.1:18081/readyz', timeout=2)" 2>/dev/null && break
  kill -0 "${pids[1]}" 2>/dev/null || { tail -20 "$DIR/logs/manager.log" >&2; exit 1; }
  sleep 1
done

say "applying $SAMPLE"
kubectl apply -f "$SAMPLE"
name=$($PY -c 'import sys,yaml; print(next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind")=="ModelServing")["metadata"]["name"])' "$SAMPLE")

say "waiting for modelserving/$name to become Available"
show() {
  kubectl get modelserving "$name" 2>/dev/null || true
  echo
  kubectl get pods -l "modelserving.volcano.sh/name=$name" -o wide 2>/dev/null || true
  echo
  kubectl get podgroups 2>/dev/null || true
}
for _ in $(seq 1 180); do
  if [ -t 1 ]; then clear; fi
  show
  if kubectl wait --for=condition=Available "modelserving/$name" --timeout=1s >/dev/null 2>&1; then
    [ -t 1 ] && clear
    show
    say "modelserving/$name is Available"
    break
  fi
  sleep 2
done
kubectl wait --for=condition=Available "modelserving/$name" --timeout=1s >/dev/null

if [ "$EXIT_WHEN_READY" = 1 ]; then exit 0; fi
say "running; try: KUBECONFIG=$KUBECONFIG kubectl get modelservings,pods,podgroups -A  (Ctrl-C stops everything)"
wait "${pids[0]}"
