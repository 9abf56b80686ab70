#!/usr/bin/env bash
# `make manifests`: the release manifests in dist/, rendered from deploy/ with kustomize
# (kubectl's), the image named by $1 (default fleetgate:0.1.0):
#   dist/fleetgate.yaml             the host cluster: namespace, Deployments, Services, policies
#   dist/fleetgate-karmada.yaml     the karmada-apiserver: webhook configurations, APIService, RBAC
#   dist/fleetgate-monitoring.yaml  the host cluster, with prometheus-operator: ServiceMonitors,
#                                   alerts, the Grafana dashboard (when deploy/monitoring exists)
set -euo pipefail
image="${1:-fleetgate:0.1.0}"
out="${2:-dist}"
cd "$(dirname "$0")/.."
mkdir -p "$out"
header="# Rendered by \`make manifests\` from deploy/; edit deploy/, not this file."
{ echo "$header"; kubectl kustomize deploy/ | sed "s|image: fleetgate:0.1.0|image: ${image}|"; } \
  > "$out/fleetgate.yaml"
{ echo "$header"; kubectl kustomize deploy/karmada-apiserver; } > "$out/fleetgate-karmada.yaml"
if [ -f deploy/monitoring/kustomization.yaml ]; then
  { echo "$header"; kubectl kustomize deploy/monitoring; } > "$out/fleetgate-monitoring.yaml"
fi
