#!/usr/bin/env bash
# The full loop on a real cluster (kind, needs Docker): build the image, run Prometheus and a
# simulated vLLM server under load, install the chart, apply a LatencyTarget and wait until the
# operator reports TargetsMet. Re-runnable; `KEEP=1` keeps the cluster for poking around.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
cluster="${CLUSTER:-latency-tuner-e2e}"
image="${IMAGE:-latency-tuner:dev}"
helm="${HELM:-$(command -v helm || echo .tools/bin/helm)}"

if ! kind get clusters | grep -qx "$cluster"; then
  kind create cluster --name "$cluster" --wait 120s
  # Delete only a cluster this run created, unless asked to keep it.
  [[ "${KEEP:-0}" == 1 ]] || trap 'kind delete cluster --name "$cluster"' EXIT
fi
kubectl config use-context "kind-$cluster"

docker build -t "$image" .
kind load docker-image "$image" --name "$cluster"

kubectl apply -f e2e/kind/prometheus.yaml
kubectl apply -f e2e/kind/vllm-sim.yaml
kubectl -n monitoring rollout status deployment/prometheus --timeout=5m
kubectl -n demo rollout status deployment/vllm-sim --timeout=5m

"$helm" upgrade --install latency-tuner charts/latency-tuner \
  --namespace latency-tuner --create-namespace \
  --set image.repository="${image%:*}" --set image.tag="${image##*:}" \
  --set image.pullPolicy=Never \
  --set prometheus.url=http://prometheus.monitoring:9090 \
  --set interval=10s \
  --wait --timeout 5m

kubectl apply -f e2e/kind/latencytarget.yaml
if ! kubectl -n demo wait --for=condition=TargetsMet lt/vllm-sim --timeout=15m; then
  kubectl -n demo get lt vllm-sim -o yaml
  kubectl -n latency-tuner logs deployment/latency-tuner --tail=200
  exit 1
fi
kubectl -n demo get lt
