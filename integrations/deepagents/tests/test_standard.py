"""LangChain's standard sandbox suite (``SandboxIntegrationTests`` of the
``langchain-tests`` package) against h9sandbox's Deep Agents backend, one
sandbox for the whole class, plus the provider side (create, list, get,
delete).

Run it with the virtual environment of ``scripts/deepagents-venv.sh``::

    target/deepagents-venv/bin/python -m pytest integrations/deepagents/tests

Environment: ``H9SANDBOX_BIN`` (the h9sandbox binary), ``H9DEEPAGENTS_IMAGE``
(default ``h9sandbox-test/python:bookworm``: the helpers run ``python3``, the
suite ``python``), ``H9DEEPAGENTS_USER`` (default ``1000:1000``: root reads a
``chmod 000`` file, which the suite expects to fail), and h9sandbox's own
``H9SANDBOX_*`` as for the CLI.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from deepagents.backends.protocol import SandboxBackendProtocol
from langchain_tests.integration_tests import SandboxIntegrationTests

from h9sandbox_deepagents import H9Sandbox, H9SandboxClient, SandboxNotFoundError

# The tests where the suite and the pinned deepagents disagree with each other
# (not with h9sandbox), each with the reason. A listed test that starts passing
# fails the run (strict xfail), so the list stays true.
_WRITE = (
    "langchain-tests 1.1.9 expects write() to refuse an existing file; deepagents 0.7.32's "
    "BaseSandbox.write (and SandboxBackendProtocol.write) create or overwrite it"
)
_GLOB_RELATIVE = (
    "langchain-tests 1.1.9 expects glob() paths relative to the search root; deepagents "
    "0.7.32's BaseSandbox.glob returns absolute paths (_absolutize_glob_path: its tool "
    "contract, which permission rules match)"
)
_GLOB_DIRS = (
    "langchain-tests 1.1.9 expects glob('*') to list directories too (is_dir); deepagents "
    "0.7.32's BaseSandbox.glob matches regular files only"
)
DISAGREEMENTS: dict[str, str] = {
    "test_write_existing_file_fails": _WRITE,
    "test_glob": _GLOB_RELATIVE,
    "test_glob_basic_pattern": _GLOB_RELATIVE,
    "test_glob_hidden_files_explicitly": _GLOB_RELATIVE,
    "test_glob_with_character_class": _GLOB_RELATIVE,
    "test_glob_with_question_mark": _GLOB_RELATIVE,
    "test_glob_with_directories": _GLOB_DIRS,
}


def client() -> H9SandboxClient:
    return H9SandboxClient(
        image=os.environ.get("H9DEEPAGENTS_IMAGE", "h9sandbox-test/python:bookworm"),
        user=os.environ.get("H9DEEPAGENTS_USER", "1000:1000"),
    )


@pytest.fixture(autouse=True)
def _expected_failures(request: pytest.FixtureRequest) -> None:
    name = request.node.originalname
    if name in DISAGREEMENTS:
        request.node.add_marker(pytest.mark.xfail(reason=DISAGREEMENTS[name], strict=True))


class TestH9SandboxStandard(SandboxIntegrationTests):
    @pytest.fixture(scope="class")
    def sandbox(self) -> Iterator[SandboxBackendProtocol]:
        c = client()
        backend = c.create()
        try:
            yield backend
        finally:
            c.delete(sandbox_id=backend.id)


def test_the_provider_creates_lists_gets_and_deletes() -> None:
    c = client()
    a = c.create()
    b = c.create(memory="256m")
    try:
        assert isinstance(a, H9Sandbox) and a.id != b.id
        assert {a.id, b.id} <= set(c.list())
        got = c.get(sandbox_id=a.id[:8])
        assert got.id == a.id
        assert got.execute("echo $((6 * 7))").output == "42\n"
        with pytest.raises(ValueError, match="unsupported kwargs"):
            c.create(privileged=True)
    finally:
        c.delete(sandbox_id=a.id)
        c.delete(sandbox_id=b.id)
    assert a.id not in c.list()
    with pytest.raises(SandboxNotFoundError):
        c.get(sandbox_id=a.id)
    # Deleting what is gone is no error.
    c.delete(sandbox_id=a.id)


def test_execute_timeouts_and_long_commands() -> None:
    c = client()
    s = c.create()
    try:
        # A pause between the two: writes in quick succession to both pipes carry no order
        # (docs/reference/json.md); it once came back as "err\nout\n" in copy mode.
        r = s.execute("echo out; sleep 0.2; echo err >&2; exit 3")
        assert (r.output, r.exit_code) == ("out\nerr\n", 3)
        r = s.execute("sleep 30", timeout=1)
        assert r.exit_code == 124 and "timed out after 1 seconds" in r.output, r
        # Past the kernel's 128 KiB limit of one argument.
        long = "x=" + "a" * (200 * 1024) + "; echo ${#x}"
        r = s.execute(long)
        assert (r.output, r.exit_code) == (f"{200 * 1024}\n", 0), r.output[:200]
    finally:
        c.delete(sandbox_id=s.id)
