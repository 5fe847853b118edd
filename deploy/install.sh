#!/bin/sh
# streamfix's install step, for the image (deploy/Dockerfile's build stage runs exactly this)
# and for systemd (docs/operations.md#systemd): a venv at $1 (default /opt/streamfix/.venv)
# with streamfix and its runtime dependencies only (mitmproxy, orjson, protobuf,
# prometheus_client; no test tools), installed (not editable) from the source tree this
# script is in (or $2). Where a C compiler is found, the wheel carries the compiled
# protocol core (setup.py); the last line says which core the install runs.
# $PYTHON: the interpreter (>= 3.12). tests/e2e/test_operator_deploy.py runs it from a fresh clone.
set -eu
venv=${1:-/opt/streamfix/.venv}
src=${2:-$(cd "$(dirname "$0")/.." && pwd)}
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$src"
# the addons are loaded with mitmdump -s from the installed package; check they import
"$venv/bin/python" -c "import streamfix.addons.repair, streamfix.addons.metrics, prometheus_client, streamfix.sidecar"
echo "streamfix installed into $venv; protocol core: $("$venv/bin/streamfix" core)"
