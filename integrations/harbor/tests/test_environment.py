"""H9SandboxEnvironment's methods against a real sandbox (the task's image, built by
h9sandbox with the engine): what Harbor's trial, agents and verifier call on an environment
(start, exec with cwd/env/user/timeout, uploads and downloads of files and directories,
stop), and the refusals of what it cannot run."""

import os
import stat
from pathlib import Path

import pytest

from harbor.models.task.config import EnvironmentConfig, NetworkMode, NetworkPolicy
from harbor.models.trial.paths import TrialPaths

from conftest import TASK
from h9sandbox_harbor import H9SandboxEnvironment, dockerfile_defaults

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make(tmp_path: Path, **kwargs) -> H9SandboxEnvironment:
    paths = TrialPaths(tmp_path / "trial")
    paths.mkdir()
    config = kwargs.pop("config", None) or EnvironmentConfig(env={"TASK_VAR": "from-task"})
    return H9SandboxEnvironment(
        environment_dir=kwargs.pop("environment_dir", TASK / "environment"),
        environment_name="count-lines",
        session_id=f"count-lines__{tmp_path.name[-8:]}__env",
        trial_paths=paths,
        task_env_config=config,
        **kwargs,
    )


@pytest.fixture
async def env(tmp_path: Path):
    e = make(tmp_path)
    await e.start(force_build=False)
    try:
        yield e
    finally:
        await e.stop(delete=True)


async def test_exec_starts_in_the_workdir_with_the_task_env(env) -> None:
    r = await env.exec("pwd; cat input.txt | wc -l; echo $TASK_VAR; id -u")
    assert r.return_code == 0, r
    assert r.stdout.split() == ["/app", "3", "from-task", "0"]
    r = await env.exec("echo $X; pwd; echo err >&2; exit 4", cwd="/tmp", env={"X": "y"})
    assert (r.return_code, r.stdout, r.stderr) == (4, "y\n/tmp\n", "err\n")
    r = await env.exec("id -u", user="nobody")
    assert r.stdout.strip() == "65534"
    # The task's network_mode "public": Docker's bridge.
    r = await env.exec("ls /sys/class/net")
    assert "eth0" in r.stdout.split(), r


async def test_a_timeout_kills_the_command(env) -> None:
    with pytest.raises(RuntimeError, match="timed out after 1 seconds"):
        await env.exec("sleep 30", timeout_sec=1)
    # Its whole tree is gone (no `ps` in the image: /proc).
    r = await env.exec("cat /proc/[0-9]*/comm 2>/dev/null | grep -cx sleep || true")
    assert r.stdout.strip() == "0", r


async def test_files_and_directories_go_both_ways(env, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub" / "empty").mkdir(parents=True)
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    (src / "sub" / "data.bin").write_bytes(bytes(range(256)) * 1000)
    await env.upload_dir(src, "/solution")
    r = await env.exec("/solution/run.sh && test -d /solution/sub/empty && stat -c %a /solution/run.sh")
    assert r.stdout.split() == ["ran", "755"], r
    # A file into an existing directory, and to a new path.
    await env.upload_file(src / "run.sh", "/tmp")
    await env.upload_file(src / "run.sh", "/opt/new/place.sh")
    r = await env.exec("ls /tmp/run.sh /opt/new/place.sh")
    assert r.return_code == 0, r
    back = tmp_path / "back"
    await env.download_dir("/solution", back)
    assert (back / "sub" / "data.bin").read_bytes() == (src / "sub" / "data.bin").read_bytes()
    assert stat.S_IMODE(os.stat(back / "run.sh").st_mode) == 0o755
    await env.download_file("/app/input.txt", tmp_path / "in" / "input.txt")
    assert (tmp_path / "in" / "input.txt").read_text() == "one\ntwo\nthree\n"
    with pytest.raises(RuntimeError):
        await env.download_file("/no/such/file", tmp_path / "x")


async def test_the_network_policy_is_the_sandboxs(tmp_path: Path) -> None:
    e = make(tmp_path, network_policy=NetworkPolicy(network_mode=NetworkMode.NO_NETWORK))
    await e.start(force_build=False)
    try:
        r = await e.exec("ls /sys/class/net")
        assert r.stdout.split() == ["lo"], r
    finally:
        await e.stop(delete=True)


def test_what_it_cannot_run_is_refused(tmp_path: Path) -> None:
    compose = tmp_path / "environment"
    compose.mkdir()
    (compose / "docker-compose.yaml").write_text("services: {}\n")
    with pytest.raises(ValueError, match="one container per trial"):
        make(tmp_path, environment_dir=compose)
    with pytest.raises(ValueError, match="network_mode='allowlist' with IPv4 addresses"):
        make(
            tmp_path,
            network_policy=NetworkPolicy(
                network_mode=NetworkMode.ALLOWLIST, allowed_hosts=["10.0.0.1"]
            ),
        )


def test_the_dockerfiles_workdir_and_user_are_read(tmp_path: Path) -> None:
    f = tmp_path / "Dockerfile"
    f.write_text(
        "FROM a AS build\nWORKDIR /src\nUSER builder\n"
        "FROM b\n# comment\nWORKDIR /srv\nWORKDIR app \\\n  \nUSER 'node'\n"
    )
    assert dockerfile_defaults(f) == ("/srv/app", "node")
    assert dockerfile_defaults(tmp_path / "missing") == (None, None)
