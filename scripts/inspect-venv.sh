#!/usr/bin/env bash
# Makes the Python virtual environment with Inspect (`inspect_ai` from PyPI), pytest and
# h9sandbox's Inspect provider (integrations/inspect, installed editable) that tests/it/inspect.rs
# runs Inspect's own sandbox self-check suite with, and prints its interpreter's path.
# Idempotent: an environment that already has the pinned versions is left as it is.
#
#   export H9TEST_INSPECT_PYTHON=$(scripts/inspect-venv.sh)    # what .ci/run does
#
# Location: $H9TEST_INSPECT_VENV, default target/inspect-venv (removed by `cargo clean`).
set -euo pipefail
cd "$(dirname "$0")/.."
INSPECT_VERSION=0.3.285
PYTEST_VERSION=8.3.5
venv="${H9TEST_INSPECT_VENV:-target/inspect-venv}"
python="$venv/bin/python"

have() {
  "$python" - <<PY 2>/dev/null
import importlib.metadata as m, sys
ok = m.version("inspect_ai") == "$INSPECT_VERSION" and m.version("pytest") == "$PYTEST_VERSION"
import h9sandbox_inspect
sys.exit(0 if ok else 1)
PY
}

if ! have; then
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    echo "inspect-venv: installing python3-venv" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  fi
  echo "inspect-venv: creating $venv with inspect_ai==$INSPECT_VERSION" >&2
  [ -x "$python" ] || python3 -m venv "$venv"
  "$python" -m pip install --quiet --disable-pip-version-check \
    "inspect_ai==$INSPECT_VERSION" "pytest==$PYTEST_VERSION" >&2
  "$python" -m pip install --quiet --disable-pip-version-check --no-deps -e integrations/inspect >&2
  have || { echo "inspect-venv: inspect_ai $INSPECT_VERSION is not importable from $python" >&2; exit 1; }
fi
echo "$(cd "$venv/bin" && pwd)/python"
