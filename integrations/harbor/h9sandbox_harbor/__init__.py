"""h9sandbox as a Harbor environment (``harbor.environments.base.BaseEnvironment``).

Use it with ``harbor run ... -e h9sandbox_harbor:H9SandboxEnvironment`` (Harbor takes
custom environments as an import path). Each trial's task container is one h9sandbox
sandbox, driven through the CLI's JSON output only:

- ``start``: ``h9sandbox up --build ENVIRONMENT_DIR`` (the task's Dockerfile, built by the
  engine as Harbor's Docker environment builds it, and cached the same way), or ``--image``
  for a task with a prebuilt ``docker_image``; the task's CPU and memory as ``--cpus`` and
  ``--memory``; its network policy as ``--network none`` or an allowlist; ``--owner-pid`` of
  this process, so ``h9sandbox reap`` removes the sandboxes of a killed run.
- ``exec``: ``h9sandbox exec --format json -- bash -c COMMAND`` in the task's ``workdir``
  (else the Dockerfile's ``WORKDIR``), as the given user (else the Dockerfile's ``USER``,
  else root, as ``docker exec`` does), with the trial's environment variables.
- ``upload_file`` / ``upload_dir``: ``h9sandbox write --from --mode --parents`` per file
  (modes kept; no ``tar`` needed in the image).
- ``download_file``: ``h9sandbox read``; ``download_dir``: ``tar`` in the sandbox, extracted
  here with Harbor's own filter (without ``tar``: ``find`` and ``read`` per file).
- ``stop``: ``h9sandbox down`` (``stop``, keeping the container, with ``keep_containers``).

The sandbox's work dir is a fresh temporary directory (h9sandbox mounts it at the same path);
the task's files live where its Dockerfile puts them, as with Docker.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult, transfer_tar_filter
from harbor.environments.capabilities import (
    EnvironmentCapabilities,
    EnvironmentResourceCapabilities,
)
from harbor.environments.definition import (
    require_agent_environment_definition,
    should_use_prebuilt_docker_image,
)
from harbor.models.task.config import EnvironmentConfig, NetworkMode, TaskOS
from harbor.models.trial.paths import EnvironmentPaths, TrialPaths

__all__ = ["H9SandboxEnvironment", "dockerfile_defaults"]

# What one exec keeps of each stream (h9sandbox's --max-output).
_MAX_OUTPUT = 16 << 20
# Files written at once by upload_dir.
_UPLOAD_CONCURRENCY = 8


class _Run:
    """The outcome of one h9sandbox invocation."""

    def __init__(self, code: int, stdout: bytes, stderr: bytes) -> None:
        self.code = code
        self.stdout = stdout
        self.stderr = stderr

    @property
    def message(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()


def dockerfile_defaults(dockerfile: Path) -> tuple[str | None, str | None]:
    """The ``WORKDIR`` and ``USER`` the final stage of ``dockerfile`` leaves (``None`` each
    when it sets none): what ``docker exec`` starts commands in and as, which an h9sandbox
    sandbox replaces with its work dir and user. Line continuations and comments are
    followed; values with variables (``$APP``) are taken as written."""
    if not dockerfile.is_file():
        return None, None
    text = dockerfile.read_text(errors="replace")
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    workdir: str | None = None
    user: str | None = None
    for line in lines:
        parts = line.split(None, 1)
        instruction = parts[0].upper()
        value = parts[1].strip() if len(parts) > 1 else ""
        if instruction == "FROM":
            workdir, user = None, None
        elif instruction == "WORKDIR" and value:
            value = value.strip("\"'")
            workdir = (
                value
                if value.startswith("/")
                else str(PurePosixPath(workdir or "/") / value)
            )
        elif instruction == "USER" and value:
            user = value.strip("\"'")
    return workdir, user


class H9SandboxEnvironment(BaseEnvironment):
    """A Harbor task environment in an h9sandbox sandbox (one container, hardened)."""

    def __init__(
        self,
        environment_dir: Path,
        environment_name: str,
        session_id: str,
        trial_paths: TrialPaths,
        task_env_config: EnvironmentConfig,
        binary: str | None = None,
        keep_containers: bool = False,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self._binary = binary or os.environ.get("H9SANDBOX_BIN") or "h9sandbox"
        self._keep_containers = keep_containers
        self._sandbox_id: str | None = None
        self._workdir: str | None = None
        workdir, user = dockerfile_defaults(Path(environment_dir) / "Dockerfile")
        self._image_workdir = workdir
        self._image_user = user
        super().__init__(
            environment_dir=environment_dir,
            environment_name=environment_name,
            session_id=session_id,
            trial_paths=trial_paths,
            task_env_config=task_env_config,
            *args,
            **kwargs,
        )

    @staticmethod
    def type() -> str:
        return "h9sandbox"

    @classmethod
    def preflight(cls) -> None:
        binary = os.environ.get("H9SANDBOX_BIN") or "h9sandbox"
        if not shutil.which(binary):
            raise SystemExit(
                f"h9sandbox ({binary}) is not on PATH; install it (cargo install --path .) "
                "or set H9SANDBOX_BIN"
            )

    @classmethod
    def resource_capabilities(cls) -> EnvironmentResourceCapabilities:
        return EnvironmentResourceCapabilities(
            cpu_limit=True, memory_limit=True, fractional_cpus=True
        )

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        # h9sandbox's allowlist takes host names and *.domain patterns (no addresses).
        return EnvironmentCapabilities(
            disable_internet=True,
            network_allowlist=True,
            network_allowlist_hostnames=True,
            network_allowlist_wildcard_hostnames=True,
        )

    def _validate_definition(self) -> None:
        if (Path(self.environment_dir) / "docker-compose.yaml").exists():
            raise ValueError(
                "h9sandbox runs one container per trial: tasks with an "
                "environment/docker-compose.yaml need Harbor's docker environment"
            )
        if self.task_env_config.os == TaskOS.WINDOWS:
            raise ValueError("h9sandbox runs Linux containers only")
        require_agent_environment_definition(
            self.environment_dir,
            docker_image=self.task_env_config.docker_image,
        )

    async def _h9(
        self, args: list[str], input: bytes | None = None, timeout: float | None = None
    ) -> _Run:
        """Runs h9sandbox with ``args``, ``input`` on its stdin (closed at once when
        ``None``). ``timeout`` bounds the whole call (the process is killed after it)."""
        proc = await asyncio.create_subprocess_exec(
            self._binary,
            *args,
            stdin=asyncio.subprocess.PIPE
            if input is not None
            else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(input), timeout)
        except BaseException:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        return _Run(proc.returncode or 0, out, err)

    def _sid(self) -> str:
        if self._sandbox_id is None:
            raise RuntimeError("the h9sandbox environment has not been started")
        return self._sandbox_id

    async def start(self, force_build: bool) -> None:
        self._workdir = tempfile.mkdtemp(prefix="h9harbor-")
        os.chmod(self._workdir, 0o755)
        args = ["up", "--format", "json", "--workdir", self._workdir]
        # As docker exec: root unless the image says otherwise (exec passes --user).
        args += ["--user", "root", "--owner-pid", str(os.getpid())]
        args += ["--label", f"harbor.session={self.session_id}"]
        prebuilt = should_use_prebuilt_docker_image(
            self.environment_dir,
            docker_image=self.task_env_config.docker_image,
            force_build=force_build,
        )
        if prebuilt:
            args += ["--image", str(self.task_env_config.docker_image)]
        else:
            args += ["--build", str(Path(self.environment_dir).resolve())]
        if (cpus := self._effective_cpus) is not None:
            args += ["--cpus", str(cpus)]
        if (memory_mb := self._effective_memory_mb) is not None:
            args += ["--memory", f"{memory_mb}m"]
        policy = self.network_policy
        if policy.network_mode == NetworkMode.NO_NETWORK:
            args += ["--network", "none"]
        elif policy.network_mode == NetworkMode.ALLOWLIST:
            args += ["--network", "allowlist"]
            for host in policy.allowed_hosts:
                args += ["--allow", host]
        else:
            args += ["--network", "bridge"]
        run = await self._h9(args)
        if run.code != 0:
            shutil.rmtree(self._workdir, ignore_errors=True)
            raise RuntimeError(f"h9sandbox up failed: {run.message}")
        self._sandbox_id = json.loads(run.stdout)["id"]
        paths = EnvironmentPaths.for_os(self.os)
        await self.ensure_dirs(
            [paths.agent_dir, paths.verifier_dir, paths.artifacts_dir]
        )
        await self._upload_environment_dir_after_start()

    async def stop(self, delete: bool) -> None:
        if self._sandbox_id is None:
            return
        # As Harbor's docker environment: keep_containers stops, anything else removes the
        # container (delete or not: that only decides about the image there).
        keep = self._keep_containers
        run = await self._h9(["stop" if keep else "down", self._sandbox_id])
        if run.code != 0:
            self.logger.warning(f"h9sandbox {'stop' if keep else 'down'}: {run.message}")
        if not keep and self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
        self._sandbox_id = None

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        args = ["exec", self._sid(), "--format", "json"]
        args += ["--max-output", str(_MAX_OUTPUT), "--timeout", str(timeout_sec or 0)]
        cwd = cwd or self.task_env_config.workdir or self._image_workdir
        if cwd:
            args += ["--cwd", cwd]
        user = self._resolve_user(user)
        if user is None:
            user = self._image_user
        if user is not None:
            args += ["--user", str(user)]
        for key, value in (self._merge_env(env) or {}).items():
            args += ["--env", f"{key}={value}"]
        # An argument vector, run exactly: bash -c, as Harbor's Docker environment runs it.
        args += ["--", "bash", "-c", command]
        run = await self._h9(args)
        try:
            result = json.loads(run.stdout)
        except ValueError:
            # h9sandbox's own failure (a directory that cannot be entered, an unknown
            # user): its one-line reason, as the command's.
            return ExecResult(stdout=None, stderr=run.message or None, return_code=run.code)
        if result.get("timed_out"):
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds")
        return ExecResult(
            stdout=result["stdout"] or None,
            stderr=result["stderr"] or None,
            return_code=result["exit_code"],
        )

    async def _is_dir(self, path: str) -> bool:
        run = await self._h9(
            ["exec", self._sid(), "--user", "root", "--", "test", "-d", path]
        )
        return run.code == 0

    async def _write(self, source: Path, target: str) -> None:
        mode = f"{source.stat().st_mode & 0o7777:o}"
        run = await self._h9(
            [
                "write",
                self._sid(),
                target,
                "--from",
                str(source),
                "--mode",
                mode,
                "--parents",
            ]
        )
        if run.code != 0:
            raise RuntimeError(f"h9sandbox write {target}: {run.message}")

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        source = Path(source_path)
        # docker cp's rule: into a directory that exists, or to that path.
        if target_path.endswith("/") or await self._is_dir(target_path):
            target_path = str(PurePosixPath(target_path) / source.name)
        await self._write(source, target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        source = Path(source_dir)
        files = sorted(p for p in source.rglob("*") if p.is_file())
        run = await self._h9(
            ["exec", self._sid(), "--user", "root", "--", "mkdir", "-p", target_dir]
        )
        if run.code != 0:
            raise RuntimeError(f"cannot make {target_dir}: {run.message}")
        limit = asyncio.Semaphore(_UPLOAD_CONCURRENCY)

        async def one(path: Path) -> None:
            async with limit:
                rel = path.relative_to(source).as_posix()
                await self._write(path, str(PurePosixPath(target_dir) / rel))

        await asyncio.gather(*(one(p) for p in files))
        # Empty directories, which writing files does not make.
        dirs = [
            str(PurePosixPath(target_dir) / p.relative_to(source).as_posix())
            for p in source.rglob("*")
            if p.is_dir() and not any(p.iterdir())
        ]
        if dirs:
            await self._h9(
                ["exec", self._sid(), "--user", "root", "--", "mkdir", "-p", *dirs]
            )

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        run = await self._h9(["read", self._sid(), source_path])
        if run.code != 0:
            raise RuntimeError(f"h9sandbox read {source_path}: {run.message}")
        target = Path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(run.stdout)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        target = Path(target_dir)
        target.mkdir(parents=True, exist_ok=True)
        run = await self._h9(
            ["exec", self._sid(), "--user", "root", "--", "tar", "-cf", "-", "-C", source_dir, "."]
        )
        if run.code == 0:
            with tarfile.open(fileobj=io.BytesIO(run.stdout), mode="r:") as tf:
                tf.extractall(path=target, filter=transfer_tar_filter)
            return
        if run.code != 127:
            raise RuntimeError(f"cannot pack {source_dir}: {run.message}")
        # No tar in the image: every regular file, one by one.
        listing = await self._h9(
            ["exec", self._sid(), "--user", "root", "--", "find", source_dir, "-type", "f"]
        )
        if listing.code != 0:
            raise RuntimeError(f"cannot list {source_dir}: {listing.message}")
        base = PurePosixPath(source_dir)
        for line in listing.stdout.decode("utf-8", "replace").splitlines():
            rel = PurePosixPath(line).relative_to(base)
            if ".." in rel.parts or re.match(r"^/", str(rel)):
                continue
            await self.download_file(line, target / rel)
