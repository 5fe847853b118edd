#!/bin/sh
# The image's install steps (deploy/Dockerfile runs exactly this; tests/e2e/test_deploy_e2e.py runs
# it into a fresh venv): a venv at $1 (default /opt/streamfix/.venv) with streamfix and its
# runtime dependencies only (mitmproxy, orjson, protobuf, prometheus_client; no test tools),
# installed from the source tree this script is in (or $2). $PYTHON: the interpreter (>= 3.12).
set -eu
venv=${1:-/opt/streamfix/.venv}
src=${2:-$(cd "$(dirname "$0")/.." && pwd)}
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$src"
# the addons are loaded with mitmdump -s from the installed package; check they import
"$venv/bin/python" -c "import streamfix.addons.repair, streamfix.addons.metrics, prometheus_client, streamfix.sidecar"
echo "streamfix installed into $venv"
