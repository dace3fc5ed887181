#!/usr/bin/env bash
# Makes the Python virtual environment with Deep Agents (`deepagents` from PyPI), LangChain's
# standard sandbox tests (`langchain-tests`: SandboxIntegrationTests), pytest and h9sandbox's
# Deep Agents backend (integrations/deepagents, installed editable) that tests/it/deepagents.rs
# runs the suite with, and prints its interpreter's path. Idempotent: an environment that
# already has the pinned versions is left as it is.
#
#   export H9TEST_DEEPAGENTS_PYTHON=$(scripts/deepagents-venv.sh)    # what .ci/run does
#
# Location: $H9TEST_DEEPAGENTS_VENV, default target/deepagents-venv (removed by `cargo clean`).
set -euo pipefail
cd "$(dirname "$0")/.."
DEEPAGENTS_VERSION=0.7.32
LANGCHAIN_TESTS_VERSION=1.1.9
PYTEST_VERSION=9.2.0
PYTEST_ASYNCIO_VERSION=1.5.0
venv="${H9TEST_DEEPAGENTS_VENV:-target/deepagents-venv}"
python="$venv/bin/python"

have() {
  "$python" - <<PY 2>/dev/null
import importlib.metadata as m, sys
want = {"deepagents": "$DEEPAGENTS_VERSION", "langchain-tests": "$LANGCHAIN_TESTS_VERSION",
        "pytest": "$PYTEST_VERSION", "pytest-asyncio": "$PYTEST_ASYNCIO_VERSION"}
ok = all(m.version(k) == v for k, v in want.items())
import h9sandbox_deepagents
sys.exit(0 if ok else 1)
PY
}

if ! have; then
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    echo "deepagents-venv: installing python3-venv" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  fi
  echo "deepagents-venv: creating $venv with deepagents==$DEEPAGENTS_VERSION, langchain-tests==$LANGCHAIN_TESTS_VERSION" >&2
  [ -x "$python" ] || python3 -m venv "$venv"
  "$python" -m pip install --quiet --disable-pip-version-check \
    "deepagents==$DEEPAGENTS_VERSION" "langchain-tests==$LANGCHAIN_TESTS_VERSION" \
    "pytest==$PYTEST_VERSION" "pytest-asyncio==$PYTEST_ASYNCIO_VERSION" >&2
  "$python" -m pip install --quiet --disable-pip-version-check --no-deps -e integrations/deepagents >&2
  have || { echo "deepagents-venv: the pinned versions are not importable from $python" >&2; exit 1; }
fi
echo "$(cd "$venv/bin" && pwd)/python"
