"""h9sandbox as an Inspect (``inspect_ai``) sandbox provider.

Each sample gets its own h9sandbox sandbox (``h9sandbox up``), driven through the
CLI's JSON output: ``exec --format json`` for commands, ``read`` and ``write`` for
files, ``down`` at the end. Use it with ``sandbox="h9sandbox"`` or
``sandbox=("h9sandbox", H9SandboxConfig(image="python:3.12-slim"))``.

The sandbox's work dir is a fresh temporary directory per sample (or the
``workdir`` of the configuration); relative paths, and commands without ``cwd``,
start there. Absolute paths reach the whole container. Every file operation acts
as the sandbox's user (``user`` of the configuration, h9sandbox's ``user`` key
otherwise), and ``exec(user=...)`` runs a command as any user of the container.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from typing import Any, Literal, Union, overload

import anyio
from pydantic import BaseModel

from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    sandboxenv,
)

__all__ = ["H9SandboxConfig", "H9SandboxEnvironment"]


class H9SandboxConfig(BaseModel, frozen=True):
    """Configuration of the sandboxes of a task (any field left out: h9sandbox's
    own configuration decides, as for ``h9sandbox up``)."""

    image: str | None = None
    """Image of the container (``up --image``)."""
    memory: str | None = None
    """Memory limit, e.g. ``"1g"`` (``up --memory``)."""
    cpus: float | None = None
    """CPU limit in cores (``up --cpus``)."""
    pids_limit: int | None = None
    """Most processes (``up --pids-limit``)."""
    network: Literal["bridge", "none"] | None = None
    """Network mode (``up --network``)."""
    caps: Literal["minimal", "standard"] | None = None
    """Capability profile of root in the sandbox (``up --caps``)."""
    user: str | None = None
    """Who the sandbox's commands and file operations act as: ``owner``,
    ``root``, ``host`` or ``UID:GID`` (``up --user``). With ``UID:GID`` and no
    ``workdir``, the per-sample work dir is given to that user (when this
    process may, i.e. runs as root)."""
    workdir: str | None = None
    """An existing directory to use as every sample's work dir (kept after the
    sample); default: a fresh temporary directory per sample, removed after."""
    binary: str | None = None
    """The h9sandbox executable; default ``$H9SANDBOX_BIN``, else
    ``h9sandbox`` on ``PATH``."""


class _Run:
    """The outcome of one h9sandbox invocation."""

    def __init__(self, code: int, stdout: bytes, stderr: bytes) -> None:
        self.code = code
        self.stdout = stdout
        self.stderr = stderr

    @property
    def message(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()


async def _h9(binary: str, args: list[str], input: bytes | None = None) -> _Run:
    """Runs h9sandbox with ``args``, ``input`` on its stdin (closed at once when
    ``None``: it reads stdin only for ``exec -i`` and ``write``). A refusal that
    comes before h9sandbox read its input (a read-only file) closes the pipe:
    the rest of the input is dropped, and the refusal reported."""
    out, err = bytearray(), bytearray()
    async with await anyio.open_process(
        [binary, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdin and proc.stdout and proc.stderr

        async def feed() -> None:
            try:
                if input:
                    await proc.stdin.send(input)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass
            finally:
                try:
                    await proc.stdin.aclose()
                except (anyio.BrokenResourceError, OSError):
                    pass

        async def drain(stream: Any, into: bytearray) -> None:
            async for chunk in stream:
                into.extend(chunk)

        async with anyio.create_task_group() as tg:
            tg.start_soon(feed)
            tg.start_soon(drain, proc.stdout, out)
            tg.start_soon(drain, proc.stderr, err)
        code = await proc.wait()
    return _Run(code, bytes(out), bytes(err))


def _file_error(run: _Run, file: str) -> Exception:
    """The Python exception for a failed ``read`` or ``write`` of ``file``."""
    text = run.message.lower()
    if "no such file" in text:
        return FileNotFoundError(errno.ENOENT, "No such file or directory.", file)
    if "permission denied" in text:
        return PermissionError(errno.EACCES, "Permission denied.", file)
    if "is a directory" in text:
        return IsADirectoryError(errno.EISDIR, "Is a directory.", file)
    return RuntimeError(run.message or f"h9sandbox exited with status {run.code}")


@sandboxenv(name="h9sandbox")
class H9SandboxEnvironment(SandboxEnvironment):
    """An h9sandbox sandbox: a hardened container per sample."""

    def __init__(self, sandbox_id: str, binary: str, workdir: str, owned: bool) -> None:
        super().__init__()
        self.sandbox_id = sandbox_id
        self.binary = binary
        self.workdir = workdir
        self._owned_workdir = owned

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return H9SandboxConfig(**config)

    @classmethod
    async def sample_init(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        metadata: dict[str, str],
    ) -> dict[str, SandboxEnvironment]:
        cfg = config if isinstance(config, H9SandboxConfig) else H9SandboxConfig()
        binary = cfg.binary or os.environ.get("H9SANDBOX_BIN") or "h9sandbox"
        owned = cfg.workdir is None
        workdir = cfg.workdir or tempfile.mkdtemp(prefix="h9inspect-")
        if owned:
            # Other users of the container (exec(user=...)) start there too.
            os.chmod(workdir, 0o755)
        if owned and cfg.user and ":" in cfg.user and os.geteuid() == 0:
            uid, gid = (int(x) for x in cfg.user.split(":", 1))
            os.chown(workdir, uid, gid)
        args = ["up", "--format", "json", "--workdir", workdir]
        # The sandbox lives no longer than this process (h9sandbox reap removes it).
        args += ["--owner-pid", str(os.getpid())]
        for flag, value in [
            ("--image", cfg.image),
            ("--memory", cfg.memory),
            ("--cpus", cfg.cpus),
            ("--pids-limit", cfg.pids_limit),
            ("--network", cfg.network),
            ("--caps", cfg.caps),
            ("--user", cfg.user),
        ]:
            if value is not None:
                args += [flag, str(value)]
        run = await _h9(binary, args)
        if run.code != 0:
            if owned:
                shutil.rmtree(workdir, ignore_errors=True)
            raise RuntimeError(f"h9sandbox up failed: {run.message}")
        record = json.loads(run.stdout)
        env = H9SandboxEnvironment(record["id"], binary, workdir, owned)
        return {"default": env}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for env in environments.values():
            sandbox = env.as_type(H9SandboxEnvironment)
            await _h9(sandbox.binary, ["down", sandbox.sandbox_id])
            if sandbox._owned_workdir:
                shutil.rmtree(sandbox.workdir, ignore_errors=True)

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        args = ["exec", self.sandbox_id, "--format", "json"]
        args += ["--max-output", str(limit), "--timeout", str(timeout or 0)]
        if cwd is not None:
            args += ["--cwd", cwd]
        if user is not None:
            args += ["--user", user]
        for k, v in (env or {}).items():
            args += ["--env", f"{k}={v}"]
        if input is not None:
            args.append("-i")
        # Two or more words are an argument vector; one word would be a shell
        # command line, so it is quoted to stay one program's name.
        words = [shlex.quote(cmd[0])] if len(cmd) == 1 else list(cmd)
        args += ["--", *words]
        data = input.encode("utf-8") if isinstance(input, str) else input
        run = await _h9(self.binary, args, data)
        try:
            result = json.loads(run.stdout)
        except ValueError:
            # h9sandbox's own failure (an unknown user, a directory that cannot
            # be entered): its one-line error, as the command's.
            return ExecResult(False, run.code, "", run.message)
        if result["timed_out"]:
            error = TimeoutError(f"Command timed out after {timeout} seconds")
            setattr(error, "truncated_output", result["stdout"] + result["stderr"])
            raise error
        if result["truncated"]:
            raise OutputLimitExceededError(
                limit_str=SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR,
                truncated_output=result["stdout"],
            )
        code = result["exit_code"]
        if code == 126 and "permission denied" in result["stderr"].lower():
            raise PermissionError(errno.EACCES, "Permission denied.", cmd[0])
        return ExecResult(code == 0, code, result["stdout"], result["stderr"])

    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode("utf-8") if isinstance(contents, str) else contents
        run = await _h9(
            self.binary, ["write", self.sandbox_id, file, "--parents"], data
        )
        if run.code != 0:
            raise _file_error(run, file)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> Union[str, bytes]:
        limit = SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
        run = await _h9(
            self.binary,
            ["read", self.sandbox_id, file, "--max-bytes", str(limit + 1)],
        )
        if run.code != 0:
            raise _file_error(run, file)
        if len(run.stdout) > limit:
            raise OutputLimitExceededError(
                limit_str=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR,
                truncated_output=None,
            )
        return run.stdout.decode("utf-8") if text else run.stdout
