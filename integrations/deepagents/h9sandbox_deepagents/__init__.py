"""h9sandbox as a LangChain Deep Agents sandbox backend.

``H9Sandbox`` is a ``deepagents.backends.sandbox.BaseSandbox`` (so a
``SandboxBackendProtocol``) over one h9sandbox sandbox: ``execute`` is
``h9sandbox exec --format json``, ``upload_files`` is ``h9sandbox write``,
``download_files`` is ``h9sandbox read``; Deep Agents' own helpers (``ls``,
``read``, ``write``, ``edit``, ``grep``, ``glob``) run their Python scripts
through ``execute``, so the image needs ``python3``.

``H9SandboxClient`` is the provider side: ``create`` (``h9sandbox up``),
``list``, ``get`` by ID and ``delete`` (``h9sandbox down``), each with an async
twin (``acreate``, ...). Nothing here talks to the engine: only the CLI.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
from typing import Any

from deepagents.backends.protocol import (
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
)
from deepagents.backends.sandbox import BaseSandbox

__all__ = [
    "H9Sandbox",
    "H9SandboxClient",
    "SandboxNotFoundError",
    "DEFAULT_TIMEOUT",
]

DEFAULT_TIMEOUT = 30 * 60
"""Seconds an ``execute`` may run when the caller gives no timeout (its whole
process tree is killed then, exit 124)."""

# Bytes kept of each of stdout and stderr by `exec --format json`.
_MAX_OUTPUT = 16 << 20
# A command longer than this (bytes) is not passed as one argument (the kernel
# limits one argument to 128 KiB): it goes on stdin (`exec --command-file -`).
_ARGV_COMMAND_MAX = 100 * 1024
# The label of every sandbox the client makes (`list` shows those).
LABEL = "deepagents"


class SandboxNotFoundError(LookupError):
    """No sandbox of that ID (or it is not running)."""


def _binary(binary: str | None) -> str:
    return binary or os.environ.get("H9SANDBOX_BIN") or "h9sandbox"


def _run(binary: str, args: list[str], input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [binary, *args],
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )


def _message(run: subprocess.CompletedProcess[bytes]) -> str:
    return run.stderr.decode("utf-8", "replace").strip()


def _file_error(message: str) -> str:
    """The Deep Agents error code for an h9sandbox file command's error line."""
    text = message.lower()
    if "permission denied" in text:
        return "permission_denied"
    if "is a directory" in text:
        return "is_directory"
    if "no such file" in text or "not found" in text:
        return "file_not_found"
    return "invalid_path"


class H9Sandbox(BaseSandbox):
    """One h9sandbox sandbox as a Deep Agents backend.

    Commands run in the sandbox's work dir as its user; paths are absolute
    paths of the container (the work dir is mounted at its host path)."""

    def __init__(
        self,
        sandbox_id: str,
        *,
        binary: str | None = None,
        default_timeout: int = DEFAULT_TIMEOUT,
    ) -> None:
        self._id = sandbox_id
        self._binary = _binary(binary)
        self._default_timeout = default_timeout

    @property
    def id(self) -> str:
        return self._id

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Runs ``command`` with bash (sh without it) in the sandbox; the output is
        stdout and stderr together, in the order they were read. A timeout
        (``timeout``, else the default) kills the command's whole process tree:
        exit code 124 and a line saying so."""
        seconds = timeout if timeout is not None else self._default_timeout
        if seconds is not None and seconds <= 0:
            msg = f"timeout must be positive, got {seconds}"
            raise ValueError(msg)
        args = ["exec", self._id, "--format", "json", "--combined"]
        args += ["--max-output", str(_MAX_OUTPUT), "--timeout", str(seconds or 0)]
        text = command.encode("utf-8")
        if len(text) > _ARGV_COMMAND_MAX:
            # Too long for one argument of the exec (the kernel limits one to
            # 128 KiB): the command line on stdin (`--command-file -`, up to 4 MiB).
            run = _run(self._binary, [*args, "--command-file", "-"], text)
        else:
            run = _run(self._binary, [*args, "--", command])
        try:
            result = json.loads(run.stdout)
        except ValueError:
            # h9sandbox's own failure (exit 125): its one-line reason.
            return ExecuteResponse(output=_message(run), exit_code=run.returncode)
        # stdout and stderr together in the order the agent read them (`--combined`).
        output = result["output"]
        if result.get("timed_out"):
            output += f"\nError: Command timed out after {seconds} seconds (its process tree was killed)."
        return ExecuteResponse(
            output=output,
            exit_code=result["exit_code"],
            truncated=bool(result.get("truncated")),
        )

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        responses = []
        for path, content in files:
            if not path.startswith("/"):
                responses.append(FileUploadResponse(path=path, error="invalid_path"))
                continue
            # Parents are made, as the suite's uploads into fresh directories need.
            run = _run(self._binary, ["write", self._id, path, "--parents"], content)
            error = None if run.returncode == 0 else _file_error(_message(run))
            responses.append(FileUploadResponse(path=path, error=error))
        return responses

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        responses = []
        for path in paths:
            if not path.startswith("/"):
                responses.append(FileDownloadResponse(path=path, content=None, error="invalid_path"))
                continue
            run = _run(self._binary, ["read", self._id, path])
            if run.returncode == 0:
                responses.append(FileDownloadResponse(path=path, content=run.stdout, error=None))
            else:
                responses.append(
                    FileDownloadResponse(path=path, content=None, error=_file_error(_message(run)))
                )
        return responses


class H9SandboxClient:
    """The provider of h9sandbox sandboxes for Deep Agents: ``create``, ``list``,
    ``get`` and ``delete`` (and ``acreate``, ``alist``, ``aget``, ``adelete``).

    Every option left out is h9sandbox's configuration's (``image``, limits,
    network, user). A sandbox it creates gets a fresh temporary work dir
    (removed by ``delete``), the label ``deepagents=1``, and is tied to this
    process (``--owner-pid``): ``h9sandbox reap`` removes the sandboxes of an
    agent that was killed."""

    def __init__(
        self,
        *,
        image: str | None = None,
        memory: str | None = None,
        cpus: float | None = None,
        pids_limit: int | None = None,
        network: str | None = None,
        user: str | None = None,
        binary: str | None = None,
        default_timeout: int = DEFAULT_TIMEOUT,
    ) -> None:
        self._options = {
            "--image": image,
            "--memory": memory,
            "--cpus": cpus,
            "--pids-limit": pids_limit,
            "--network": network,
            "--user": user,
        }
        self._binary = _binary(binary)
        self._default_timeout = default_timeout
        self._workdirs: dict[str, str] = {}

    def _sandbox(self, sandbox_id: str) -> H9Sandbox:
        return H9Sandbox(sandbox_id, binary=self._binary, default_timeout=self._default_timeout)

    def create(self, **kwargs: Any) -> H9Sandbox:
        """Starts a sandbox (``h9sandbox up``). ``kwargs`` override the client's
        options (``image``, ``memory``, ``cpus``, ``pids_limit``, ``network``,
        ``user``); any other is refused. Errors: ``RuntimeError`` with h9sandbox's
        one-line reason."""
        options = dict(self._options)
        for key, value in kwargs.items():
            flag = "--" + key.replace("_", "-")
            if flag not in options:
                msg = f"H9SandboxClient.create() got unsupported kwargs: {sorted(kwargs)}"
                raise ValueError(msg)
            options[flag] = value
        workdir = tempfile.mkdtemp(prefix="h9deepagents-")
        os.chmod(workdir, 0o755)
        user = options.get("--user")
        if user and ":" in str(user) and os.geteuid() == 0:
            uid, gid = (int(x) for x in str(user).split(":", 1))
            os.chown(workdir, uid, gid)
        args = ["up", "--format", "json", "--workdir", workdir]
        args += ["--owner-pid", str(os.getpid()), "--label", f"{LABEL}=1"]
        for flag, value in options.items():
            if value is not None:
                args += [flag, str(value)]
        run = _run(self._binary, args)
        if run.returncode != 0:
            shutil.rmtree(workdir, ignore_errors=True)
            msg = f"h9sandbox up failed: {_message(run)}"
            raise RuntimeError(msg)
        sandbox_id = json.loads(run.stdout)["id"]
        self._workdirs[sandbox_id] = workdir
        return self._sandbox(sandbox_id)

    def _records(self) -> list[dict[str, Any]]:
        run = _run(self._binary, ["ls", "--format", "json"])
        if run.returncode != 0:
            msg = f"h9sandbox ls failed: {_message(run)}"
            raise RuntimeError(msg)
        return json.loads(run.stdout)

    def list(self) -> list[str]:
        """The IDs of the Running sandboxes made for Deep Agents (label
        ``deepagents=1``) in h9sandbox's state directory."""
        return [
            r["id"]
            for r in self._records()
            if r.get("labels", {}).get(LABEL) == "1" and r.get("state") == "Running"
        ]

    def get(self, *, sandbox_id: str, **kwargs: Any) -> H9Sandbox:
        """The Running sandbox ``sandbox_id`` (an ID, unique prefix or name).
        Errors: ``SandboxNotFoundError``."""
        if kwargs:
            msg = f"H9SandboxClient.get() got unsupported kwargs: {sorted(kwargs)}"
            raise ValueError(msg)
        matches = [
            r
            for r in self._records()
            if r["id"] == sandbox_id or r["name"] == sandbox_id or r["id"].startswith(sandbox_id)
        ]
        if len(matches) != 1 or matches[0].get("state") != "Running":
            raise SandboxNotFoundError(sandbox_id)
        return self._sandbox(matches[0]["id"])

    def delete(self, *, sandbox_id: str, **kwargs: Any) -> None:
        """Removes the sandbox (``h9sandbox down``) and the work dir this client
        made for it; a sandbox that is already gone is no error."""
        if kwargs:
            msg = f"H9SandboxClient.delete() got unsupported kwargs: {sorted(kwargs)}"
            raise ValueError(msg)
        run = _run(self._binary, ["down", sandbox_id])
        if run.returncode != 0 and "no sandbox matches" not in _message(run):
            msg = f"h9sandbox down failed: {_message(run)}"
            raise RuntimeError(msg)
        workdir = self._workdirs.pop(sandbox_id, None)
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    async def acreate(self, **kwargs: Any) -> H9Sandbox:
        return await asyncio.to_thread(self.create, **kwargs)

    async def alist(self) -> list[str]:
        return await asyncio.to_thread(self.list)

    async def aget(self, *, sandbox_id: str, **kwargs: Any) -> H9Sandbox:
        return await asyncio.to_thread(self.get, sandbox_id=sandbox_id, **kwargs)

    async def adelete(self, *, sandbox_id: str, **kwargs: Any) -> None:
        await asyncio.to_thread(self.delete, sandbox_id=sandbox_id, **kwargs)
