#!/usr/bin/env bash
# Validates deploy/: every Kubernetes manifest against the Kubernetes JSON schema in strict mode
# (kubernetes-validate, offline schemas, for the oldest and newest versions we support), the kustomize output
# (when kubectl is installed), docker-compose.yml against the compose-spec schema (check-jsonschema), yamllint on
# all YAML, the values that must agree across files, `systemd-analyze verify` on the unit, and --check-config on
# each shipped configuration (when a built sse-relay is found). Nothing but PyPI is contacted.
#
# Usage: deploy/check-manifests.sh     Environment: VENV (/tmp/sse-relay-manifests-venv), K8S_VERSIONS
#        ("1.28.0 1.37.0"), SSE_RELAY_BIN. Ends with "N passed, N failed, N skipped"; exits 1 on a failure.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${VENV:-/tmp/sse-relay-manifests-venv}
K8S_VERSIONS=${K8S_VERSIONS:-1.28.0 1.37.0}
REQUIREMENTS=(kubernetes-validate==1.37.0 yamllint==1.38.0 check-jsonschema==0.39.0)

if ! "$VENV/bin/python" -c 'import kubernetes_validate, yamllint, check_jsonschema' 2>/dev/null \
   || [ "$("$VENV/bin/kubernetes-validate" --version 2>/dev/null)" != "1.37.0" ]; then
  echo "setting up $VENV: ${REQUIREMENTS[*]}"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${REQUIREMENTS[@]}"
fi
# shellcheck disable=SC2086
exec "$VENV/bin/python" "$HERE/testing/check_manifests.py" "$HERE" $K8S_VERSIONS
