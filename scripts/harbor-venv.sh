#!/usr/bin/env bash
# Makes the Python virtual environment with Harbor (`harbor` from PyPI, the Terminal-Bench
# framework), pytest and h9sandbox's Harbor environment (integrations/harbor, installed
# editable) that tests/it/harbor.rs runs real Harbor trials with, and prints its interpreter's
# path. Idempotent: an environment that already has the pinned versions is left as it is.
#
#   export H9TEST_HARBOR_PYTHON=$(scripts/harbor-venv.sh)    # what .ci/run does
#
# Harbor needs Python 3.12 or later: the first of $H9TEST_HARBOR_BASE_PYTHON, python3.13,
# python3.12 (PATH, /usr/bin, /usr/local/bin, pyenv's versions) that is one. Where there is none
# (Debian bookworm has 3.11), uv (from PyPI, pinned) installs its CPython 3.12 build into
# $venv-python, with uv itself in $venv-uv; nothing is installed on the host but python3-venv.
# The tests compare h9sandbox with Harbor's own docker environment, which runs `docker compose`
# (Compose V2). Where the Docker CLI has no such plugin (Debian bookworm's docker.io), the
# script takes Debian's docker-compose plugin (trixie's package, a static Go program needing
# glibc 2.34) with apt-get download, into $venv/docker-config/cli-plugins, and the tests point
# DOCKER_CONFIG there; nothing is installed on the host.
#
# Location: $H9TEST_HARBOR_VENV, default target/harbor-venv (removed by `cargo clean`).
set -euo pipefail
cd "$(dirname "$0")/.."
HARBOR_VERSION=0.25.0
PYTEST_VERSION=8.3.5
COMPOSE_DEB_VERSION=2.26.1-4
UV_VERSION=0.13.8
venv="${H9TEST_HARBOR_VENV:-target/harbor-venv}"
case "$venv" in /*) ;; *) venv="$PWD/$venv" ;; esac
python="$venv/bin/python"

log() { echo "harbor-venv: $*" >&2; }

have() {
  [ -x "$python" ] || return 1
  "$python" - <<PY 2>/dev/null || return 1
import importlib.metadata as m, sys
ok = m.version("harbor") == "$HARBOR_VERSION" and m.version("pytest") == "$PYTEST_VERSION"
import h9sandbox_harbor
sys.exit(0 if ok else 1)
PY
  docker compose version >/dev/null 2>&1 || [ -x "$venv/docker-config/cli-plugins/docker-compose" ]
}

base_python() {
  local c candidates=()
  [ -n "${H9TEST_HARBOR_BASE_PYTHON:-}" ] && candidates+=("$H9TEST_HARBOR_BASE_PYTHON")
  for v in 3.13 3.12; do
    candidates+=("$(command -v "python$v" 2>/dev/null || true)" "/usr/bin/python$v" "/usr/local/bin/python$v")
  done
  local root="${PYENV_ROOT:-$HOME/.pyenv}"
  for d in "$root"/versions/3.1[3-9]* "$root"/versions/3.12*; do
    [ -x "$d/bin/python3" ] && candidates+=("$d/bin/python3")
  done
  for c in "${candidates[@]}"; do
    [ -n "$c" ] && [ -x "$c" ] || continue
    if "$c" -c 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

# No Python 3.12 or later here: uv's CPython 3.12 in $venv-python; prints its interpreter.
fetch_python() {
  local uv="$venv-uv"
  if [ ! -x "$uv/bin/uv" ]; then
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
      log "installing python3-venv"
      apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    fi
    log "no Python 3.12 or later: uv $UV_VERSION into $uv, to install CPython 3.12"
    python3 -m venv "$uv" >&2
    "$uv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION" >&2
  fi
  export UV_PYTHON_INSTALL_DIR="$venv-python" UV_PYTHON_PREFERENCE=only-managed
  "$uv/bin/uv" python install --quiet 3.12 >&2
  "$uv/bin/uv" python find --no-project 3.12
}

compose_plugin() {
  docker compose version >/dev/null 2>&1 && return 0
  local dest="$venv/docker-config/cli-plugins" apt="$venv/apt"
  [ -x "$dest/docker-compose" ] && return 0
  log "docker compose (Compose V2) is missing: Debian's docker-compose $COMPOSE_DEB_VERSION plugin into $dest"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$dest"
  echo 'deb http://deb.debian.org/debian trixie main' >"$apt/sources.list"
  local opts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o Dir::Etc::sourceparts=-
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
    -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root)
  apt-get -qq "${opts[@]}" update >&2
  (cd "$apt" && apt-get -qq "${opts[@]}" download "docker-compose=$COMPOSE_DEB_VERSION" >&2)
  dpkg-deb --fsys-tarfile "$apt"/docker-compose_"$COMPOSE_DEB_VERSION"_*.deb |
    tar -xO ./usr/libexec/docker/cli-plugins/docker-compose >"$dest/docker-compose"
  chmod 755 "$dest/docker-compose"
  DOCKER_CONFIG="$venv/docker-config" docker compose version >&2
}

if ! have; then
  base=$(base_python || fetch_python) || { log "Harbor needs Python 3.12 or later; none found, and uv could not install one (set H9TEST_HARBOR_BASE_PYTHON)"; exit 1; }
  log "creating $venv with harbor==$HARBOR_VERSION ($("$base" --version))"
  [ -x "$python" ] || "$base" -m venv "$venv"
  "$python" -m pip install --quiet --disable-pip-version-check \
    "harbor==$HARBOR_VERSION" "pytest==$PYTEST_VERSION" >&2
  "$python" -m pip install --quiet --disable-pip-version-check --no-deps -e integrations/harbor >&2
  compose_plugin
  have || { log "harbor $HARBOR_VERSION or docker compose is not usable from $python" >&2; exit 1; }
fi
echo "$(cd "$venv/bin" && pwd)/python"
