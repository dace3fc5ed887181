"""Shared settings of the Harbor tests: the task, the h9sandbox binary, the Docker CLI's
Compose plugin for Harbor's own docker environment (the comparison)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
TASK = HERE / "tasks" / "count-lines"

# Nothing of the tests leaves the machine: Harbor's usage telemetry off, litellm's model
# price list read from the package rather than fetched.
os.environ["HARBOR_TELEMETRY"] = "0"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


def harbor_cli() -> str:
    """The `harbor` command of this interpreter's environment."""
    return str(Path(sys.executable).parent / "harbor")


@pytest.fixture(scope="session")
def docker_compose_env() -> dict[str, str]:
    """The environment for Harbor's docker environment: `docker compose` (Compose V2)
    must answer, from the Docker CLI's own plugins, $H9TEST_DOCKER_CONFIG, or the
    docker-config directory of this virtual environment (where scripts/harbor-venv.sh puts
    Debian's docker-compose plugin when the CLI has none)."""
    env = dict(os.environ)
    config = os.environ.get("H9TEST_DOCKER_CONFIG")
    bundled = Path(sys.prefix) / "docker-config"
    if not config and (bundled / "cli-plugins" / "docker-compose").exists():
        config = str(bundled)
    if config:
        env["DOCKER_CONFIG"] = config
    probe = subprocess.run(
        ["docker", "compose", "version"], env=env, capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.fail(
            "`docker compose` (Compose V2) does not answer, so Harbor's docker environment "
            "cannot run for the comparison; run scripts/harbor-venv.sh (it sets up "
            f"Debian's docker-compose plugin) or set H9TEST_DOCKER_CONFIG: {probe.stderr.strip()}"
        )
    return env


@pytest.fixture(scope="session", autouse=True)
def h9sandbox_binary() -> str:
    binary = os.environ.get("H9SANDBOX_BIN") or shutil.which("h9sandbox")
    if not binary:
        pytest.fail("set H9SANDBOX_BIN to the h9sandbox binary")
    return binary


@pytest.fixture(scope="session", autouse=True)
def remove_built_images():
    """Removes, after the tests, the images h9sandbox built for the test task (Harbor's
    docker environment removes its own with `down --rmi local`), and first their derived
    images (`h9sandbox-agent:<12 hex of the image ID>-<build>`, made with the work dir
    copied), which would keep them."""
    yield
    label = f"label=h9sandbox.build={(TASK / 'environment').resolve()}"
    ids = set(
        subprocess.run(
            ["docker", "image", "ls", "-q", "--no-trunc", "--filter", label],
            capture_output=True,
            text=True,
        ).stdout.split()
    )
    if not ids:
        return
    prefixes = tuple(f"h9sandbox-agent:{i.removeprefix('sha256:')[:12]}-" for i in ids)
    derived = [
        ref
        for ref in subprocess.run(
            ["docker", "image", "ls", "h9sandbox-agent", "--format", "{{.Repository}}:{{.Tag}}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        if ref.startswith(prefixes)
    ]
    if derived:
        subprocess.run(["docker", "image", "rm", "-f", *derived], capture_output=True)
    subprocess.run(["docker", "image", "rm", "-f", *ids], capture_output=True)
