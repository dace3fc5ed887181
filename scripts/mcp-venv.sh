#!/usr/bin/env bash
# Makes the Python virtual environment with the official MCP SDK (the `mcp` package from PyPI)
# that tests/it/mcp.rs drives `h9sandbox mcp` with, and prints its interpreter's path. Idempotent:
# an environment that already has the pinned version is left as it is.
#
#   export H9TEST_MCP_PYTHON=$(scripts/mcp-venv.sh)    # what .ci/run does
#
# Location: $H9TEST_MCP_VENV, default target/mcp-venv (removed by `cargo clean`).
set -euo pipefail
cd "$(dirname "$0")/.."
MCP_VERSION=2.3.0
venv="${H9TEST_MCP_VENV:-target/mcp-venv}"
python="$venv/bin/python"

have() {
  "$python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_VERSION')" 2>/dev/null
}

if ! have; then
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    echo "mcp-venv: installing python3-venv" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  fi
  echo "mcp-venv: creating $venv with mcp==$MCP_VERSION" >&2
  python3 -m venv "$venv"
  "$python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION" >&2
  have || { echo "mcp-venv: mcp $MCP_VERSION is not importable from $python" >&2; exit 1; }
fi
echo "$(cd "$venv/bin" && pwd)/python"
