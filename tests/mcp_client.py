#!/usr/bin/env python3
"""An MCP client for tests/mcp.rs: drives `h9sandbox mcp` with the official MCP Python SDK
(the `mcp` package from PyPI), so the server is tested by a client nobody here wrote.

Usage: mcp_client.py SCENARIO, with the environment tests/mcp.rs sets:
  H9_BIN       the h9sandbox binary
  H9_WORKDIR   the work dir (the server's --workdir and cwd)
  H9_ERRLOG    file that receives the server's stderr
  H9_UNIQUE    a string unique to this run (names of files that must never appear)
  H9SANDBOX_*  configuration, passed on to the server (state dir, engine, image, ...)

Each scenario asserts what a client sees, then prints one JSON document (its transcript) on
stdout for the Rust side, which checks what the client cannot see (containers, state file,
host files). A failed check exits 1 with the reason on stderr.
"""

import json
import logging
import os
import signal
import subprocess
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.client.stdio import stdio_client

TOOLS = [
    "sandbox_up",
    "sandbox_exec",
    "sandbox_spawn",
    "sandbox_ps",
    "sandbox_logs",
    "sandbox_kill",
    "sandbox_read",
    "sandbox_write",
    "sandbox_edit",
    "sandbox_list",
    "sandbox_down",
]


class Failed(Exception):
    pass


def check(cond, what, detail=None):
    if not cond:
        raise Failed(f"{what}: {json.dumps(detail, default=str)[:2000]}")


class ParseErrors(logging.Handler):
    """Collects the SDK's complaints about lines on the server's stdout that are no JSON-RPC."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.seen = []

    def emit(self, record):
        self.seen.append(record.getMessage())


PARSE_ERRORS = ParseErrors()
logging.getLogger("mcp.client.stdio").addHandler(PARSE_ERRORS)


def env(name):
    value = os.environ.get(name)
    if not value:
        raise Failed(f"{name} is not set")
    return value


def server(*extra):
    """The server's parameters: `h9sandbox mcp --workdir WORKDIR EXTRA...` with our config."""
    config = {k: v for k, v in os.environ.items() if k.startswith("H9SANDBOX_")}
    config["HOME"] = os.environ.get("HOME", "/")
    config["NO_COLOR"] = "1"
    return StdioServerParameters(
        command=env("H9_BIN"),
        args=["-v", "mcp", "--workdir", env("H9_WORKDIR"), *extra],
        env=config,
        cwd=env("H9_WORKDIR"),
    )


def cli(*args):
    """Runs the h9sandbox CLI (same configuration) and returns its JSON output."""
    out = subprocess.run(
        [env("H9_BIN"), *args, "--format", "json"],
        capture_output=True,
        text=True,
        cwd=env("H9_WORKDIR"),
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    check(out.returncode == 0, f"h9sandbox {' '.join(args)} failed", out.stderr)
    return json.loads(out.stdout)


async def call(session, name, args=None):
    r = await session.call_tool(name, args if args is not None else {})
    texts = [c.text for c in r.content if getattr(c, "type", None) == "text"]
    return {"is_error": r.is_error, "structured": r.structured_content, "texts": texts}


def ok(r, what):
    check(not r["is_error"], f"{what} failed", r)
    return r["structured"]


def error(r, what, needle):
    check(r["is_error"], f"{what} should be a tool error", r)
    check(r["structured"] is None, f"{what}: a tool error carries no structured content", r)
    check(len(r["texts"]) == 1, f"{what}: one text", r)
    check("\n" not in r["texts"][0], f"{what}: the reason is one line", r)
    check(needle in r["texts"][0], f"{what}: the reason names {needle!r}", r)
    return r["texts"][0]


def pid_state(pid):
    """'gone', 'zombie' or 'alive'."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return "gone"
    return "zombie" if stat[stat.rfind(")") + 2] in "ZXx" else "alive"


def server_pid(sandbox_id):
    """The PID of the server, as the owner recorded for its sandbox (`up --owner-pid`)."""
    entry = next(e for e in cli("ls") if e["id"] == sandbox_id)
    pid = entry["owner"]["pid"]
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        cmdline = f.read().split(b"\0")
    check(b"mcp" in cmdline, "the owner of an --auto-up sandbox is the server", cmdline)
    return pid


# ----------------------------------------------------------------------------------------------


async def tools():
    with open(env("H9_ERRLOG"), "w") as errlog:
        async with stdio_client(server(), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                listed = await s.list_tools()
    check([t.name for t in listed.tools] == TOOLS, "the tools, in order", [t.name for t in listed.tools])
    out = {
        "server": init.server_info.name,
        "protocol": str(init.protocol_version),
        "instructions": init.instructions,
        "tools": {},
    }
    for t in listed.tools:
        check(t.description and len(t.description) > 40, f"{t.name} has a description", t.description)
        check(t.input_schema.get("type") == "object", f"{t.name} takes an object", t.input_schema)
        check(t.output_schema is not None, f"{t.name} has an output schema", t.name)
        for prop, schema in t.input_schema.get("properties", {}).items():
            check(schema.get("description"), f"{t.name}.{prop} has a description", schema)
        out["tools"][t.name] = {
            "input": t.input_schema,
            "output": t.output_schema,
            "read_only": t.annotations.read_only_hint if t.annotations else None,
        }
    return out


async def flow():
    workdir = env("H9_WORKDIR")
    unique = env("H9_UNIQUE")
    t = {}
    with open(env("H9_ERRLOG"), "w") as errlog:
        async with stdio_client(server(), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                await s.list_tools()

                error(await call(s, "sandbox_exec", {"command": "true"}), "exec before any up", "sandbox_up")

                # The server's configuration is a ceiling: a client may ask for less, never more.
                for ask in ({"memory": "100g"}, {"pids_limit": 1000000}, {"cpus": 64}):
                    error(await call(s, "sandbox_up", ask), f"sandbox_up {ask}", "exceeds what this server grants")
                check(not cli("ls"), "nothing made by refused ups", cli("ls"))

                sb = ok(await call(s, "sandbox_up", {"memory": "256m", "network": "none"}), "up")
                check(sb["state"] == "Running" and sb["default"] and sb["session_owned"], "up's sandbox", sb)
                check(sb["workdir"] == workdir and sb["memory"] == "256m" and sb["network"] == "none", "up's limits", sb)
                t["id"] = sb["id"]
                listed = [e["id"] for e in cli("ls")]
                check(sb["id"] in listed, "a sandbox made over MCP shows up in `h9sandbox ls`", listed)

                r = await call(s, "sandbox_exec", {"command": "echo out; echo err >&2"})
                e = ok(r, "exec")
                check((e["exit_code"], e["stdout"], e["stderr"]) == (0, "out\n", "err\n"), "exec's result", e)
                check(not e["timed_out"] and not e["truncated"] and e["id"] == sb["id"], "exec's flags", e)
                check(r["texts"][0].startswith("exit code 0 in "), "exec's text", r["texts"])

                r = await call(s, "sandbox_exec", {"command": "echo partial; exit 7"})
                e = ok(r, "a failing command is a normal result")
                check((e["exit_code"], e["stdout"]) == (7, "partial\n"), "exit code 7", e)
                check((e["ended"], e["signal"]) == ("exited", None) and "output" not in e, "why it ended", e)

                # Both streams in the order written, and why a command ended.
                e = ok(await call(s, "sandbox_exec", {"command": "echo o1; sleep 0.1; echo e1 >&2; sleep 0.1; echo o2", "combined": True}), "combined")
                check(e["output"] == "o1\ne1\no2\n", "combined output in order", e)
                e = ok(await call(s, "sandbox_exec", {"command": "kill -KILL $$"}), "killed by a signal")
                check((e["exit_code"], e["ended"], e["signal"]) == (137, "signal", "SIGKILL"), "the signal is named", e)

                ok(await call(s, "sandbox_exec", {"command": "mkdir -p sub"}), "mkdir")
                e = ok(
                    await call(s, "sandbox_exec", {"command": "pwd; echo \"$GREETING\"", "cwd": "sub", "env": {"GREETING": "hello there"}}),
                    "exec with cwd and env",
                )
                check(e["stdout"] == f"{workdir}/sub\nhello there\n", "cwd and env apply", e)
                error(await call(s, "sandbox_exec", {"command": "pwd", "cwd": "../.."}), "cwd outside", "work dir")

                # argv: run exactly, no shell; variables whose names hold '.' or '-' arrive.
                e = ok(await call(s, "sandbox_exec", {"argv": ["printf", "%s|", "one two", "$HOME", "", "it's"]}), "argv")
                check(e["stdout"] == "one two|$HOME||it's|", "argv arrives exactly", e)
                e = ok(await call(s, "sandbox_exec", {"command": "env", "env": {"spring.profiles.active": "dev", "A-B": "1"}}), "dotted env")
                check("spring.profiles.active=dev\n" in e["stdout"] and "A-B=1\n" in e["stdout"], "dotted and dashed names arrive", e)
                error(await call(s, "sandbox_exec", {"command": "true", "argv": ["true"]}), "command and argv", "either command or argv")
                error(await call(s, "sandbox_exec", {}), "no command", "give the command")

                # A command line far longer than the kernel's 128 KiB per argument runs: it
                # travels on the agent's socket, not in an argument vector.
                long = "n=0\n" + "n=$((n+1))\n" * 30000 + "echo $n\n"
                e = ok(await call(s, "sandbox_exec", {"command": long}), "a 330 KiB command line")
                check(e["stdout"] == "30000\n", "the long command ran whole", e)

                # Background commands: spawn, ps, logs, kill.
                b = ok(await call(s, "sandbox_spawn", {"command": "echo up; echo warn >&2; sleep 293"}), "spawn")
                handle = b["handle"]
                check(len(handle) == 8 and b["pid"] > 0, "a handle", b)
                with anyio.fail_after(20):
                    while True:
                        lg = ok(await call(s, "sandbox_logs", {"handle": handle}), "logs")
                        if lg["stdout"] == "up\n" and lg["stderr"] == "warn\n":
                            break
                        await anyio.sleep(0.1)
                listed = ok(await call(s, "sandbox_ps", {}), "ps")["processes"]
                check([p["handle"] for p in listed] == [handle] and listed[0]["running"], "ps lists it", listed)
                ok(await call(s, "sandbox_kill", {"handle": handle}), "kill")
                with anyio.fail_after(20):
                    while True:
                        listed = ok(await call(s, "sandbox_ps", {}), "ps")["processes"]
                        if not listed[0]["running"]:
                            break
                        await anyio.sleep(0.1)
                ps = ok(await call(s, "sandbox_exec", {"command": "ps -o args"}), "ps")["stdout"]
                check("sleep 293" not in ps, "the killed tree is gone", ps)
                error(await call(s, "sandbox_kill", {"handle": "00000000"}), "unknown handle", "no detached command")

                # A timeout kills the whole process tree: also what the command left in the background.
                r = await call(s, "sandbox_exec", {"command": "sleep 297 & sleep 298; echo never", "timeout_secs": 2})
                check(r["is_error"], "a timeout is a tool error", r)
                check(r["texts"][0].startswith("the command timed out after 2s and its process tree was killed"), "the timeout's reason", r["texts"])
                e = r["structured"]
                check(e["timed_out"] and e["exit_code"] == 124 and "never" not in e["stdout"], "timed_out", e)
                t["timeout_duration_ms"] = e["duration_ms"]
                ps = ok(await call(s, "sandbox_exec", {"command": "ps -o args"}), "ps")["stdout"]
                check("sleep 29" not in ps, "the timed-out command's processes are gone", ps)
                t["ps_after_timeout"] = ps

                # A client that gives up on a call (read timeout: the SDK sends
                # notifications/cancelled) gets the command's process tree killed too.
                try:
                    await s.call_tool("sandbox_exec", {"command": "sleep 295 & sleep 294"}, read_timeout_seconds=1.5)
                    check(False, "the call should have timed out on the client", None)
                except Failed:
                    raise
                except Exception as exc:
                    t["abandoned_call"] = type(exc).__name__
                with anyio.fail_after(20):
                    while True:
                        ps = ok(await call(s, "sandbox_exec", {"command": "ps -o args"}), "ps")["stdout"]
                        if "sleep 29" not in ps:
                            break
                        await anyio.sleep(0.2)

                # Output caps keep the start and the end.
                e = ok(await call(s, "sandbox_exec", {"command": "seq 1 100000; echo done >&2", "max_output_bytes": 1000}), "big output")
                out = e["stdout"]
                check(e["truncated"] and e["stdout_bytes"] == 588895, "big output is cut", {k: v for k, v in e.items() if k != "stdout"})
                check(out.startswith("1\n2\n3\n") and out.endswith("99999\n100000\n"), "head and tail kept", out)
                check("bytes cut here" in out and len(out.encode()) < 1100, "one marker, within the cap", out)
                check(e["stderr"] == "done\n", "the other stream is whole", e["stderr"])
                t["capped_stdout"] = out
                error(await call(s, "sandbox_exec", {"command": "true", "max_output_bytes": 10}), "a cap below 256", "at least 256")
                # The sandbox's output would fill host memory up to the cap: the client cannot
                # raise it past what the server's operator allows (json_max_bytes).
                error(await call(s, "sandbox_exec", {"command": "true", "max_output_bytes": 10**12}), "a cap beyond the server's", "json_max_bytes")

                # Files.
                w = ok(await call(s, "sandbox_write", {"path": "notes/todo.txt", "content": "alpha\nbeta\ngamma\n"}), "write")
                check((w["path"], w["bytes_written"], w["size"]) == (f"{workdir}/notes/todo.txt", 17, 17), "write's result", w)
                r = await call(s, "sandbox_read", {"path": "notes/todo.txt"})
                f = ok(r, "read")
                check(f["content"] == "alpha\nbeta\ngamma\n" and f["total_lines"] == 3 and f["next_offset"] is None, "read all", f)
                check(r["texts"] == ["alpha\nbeta\ngamma\n"], "read's text is the content", r["texts"])
                f = ok(await call(s, "sandbox_read", {"path": f"{workdir}/notes/todo.txt", "offset": 2, "limit": 1, "line_numbers": True}), "read a line")
                check((f["content"], f["first_line"], f["lines"], f["next_offset"]) == ("     2\tbeta\n", 2, 1, 3), "offset, limit, numbers", f)
                d = ok(await call(s, "sandbox_edit", {"path": "notes/todo.txt", "old": "beta\n", "new": "BETA\nbeta2\n"}), "edit")
                check(d["replacements"] == 1, "one replacement", d)
                e = ok(await call(s, "sandbox_exec", {"command": "cat notes/todo.txt"}), "the sandbox sees the edit")
                check(e["stdout"] == "alpha\nBETA\nbeta2\ngamma\n", "edited content inside", e)
                ok(await call(s, "sandbox_write", {"path": "dup.txt", "content": "x and x"}), "write dup")
                error(await call(s, "sandbox_edit", {"path": "dup.txt", "old": "x", "new": "y"}), "ambiguous edit", "occurs 2 times")
                d = ok(await call(s, "sandbox_edit", {"path": "dup.txt", "old": "x", "new": "y", "replace_all": True}), "edit all")
                check(d["replacements"] == 2, "two replacements", d)
                # Create-only: a second write of the name is a tool error, and changes nothing.
                ok(await call(s, "sandbox_write", {"path": "once.txt", "content": "1", "no_clobber": True}), "write once")
                error(await call(s, "sandbox_write", {"path": "once.txt", "content": "2", "no_clobber": True}), "write twice", "exists already")
                e = ok(await call(s, "sandbox_exec", {"command": "cat once.txt"}), "once.txt kept")
                check(e["stdout"] == "1", "no_clobber kept the first content", e)

                # Escapes: refused, one line, nothing touched (the Rust side checks the host).
                error(await call(s, "sandbox_write", {"path": f"../escaped-{unique}.txt", "content": "no"}), "write ../", "outside")
                # An absolute path outside the work dir is the container's, never the host's.
                ok(await call(s, "sandbox_write", {"path": f"/tmp/escaped-{unique}.txt", "content": "in the container"}), "write the container's /tmp")
                e = ok(await call(s, "sandbox_exec", {"command": f"cat /tmp/escaped-{unique}.txt"}), "the container's /tmp holds it")
                check(e["stdout"] == "in the container", "written in the container", e)
                ok(await call(s, "sandbox_exec", {"command": "ln -s / rootlink && ln -s ../.. up2"}), "plant symlinks")
                error(await call(s, "sandbox_write", {"path": f"rootlink/tmp/escaped-{unique}.txt", "content": "no"}), "write through a symlink", "outside")
                error(await call(s, "sandbox_write", {"path": f"up2/escaped-{unique}.txt", "content": "no"}), "write through ..", "outside")
                error(await call(s, "sandbox_read", {"path": "rootlink/etc/hostname"}), "read through a symlink", "outside")
                r = ok(await call(s, "sandbox_read", {"path": "/etc/passwd"}), "read the container's /etc/passwd")
                check(r["path"] == "/etc/passwd" and "root:" in r["content"], "the container's /etc/passwd", r)
                error(await call(s, "sandbox_edit", {"path": "up2/etc/passwd", "old": "root", "new": "toor"}), "edit outside", "outside")

                ok(await call(s, "sandbox_exec", {"command": "printf 'a\\000b' > bin.dat"}), "binary file")
                error(await call(s, "sandbox_read", {"path": "bin.dat"}), "read a binary file", "binary")
                error(await call(s, "sandbox_read", {"path": "missing.txt"}), "read a missing file", "No such file")
                error(await call(s, "sandbox_exec", {"cmd": "true"}), "unknown argument", "invalid arguments for sandbox_exec")
                error(await call(s, "sandbox_exec", {"id": "nosuchsandbox", "command": "true"}), "unknown sandbox", "no sandbox matches")

                listed = ok(await call(s, "sandbox_list"), "list")
                mine = [x for x in listed["sandboxes"] if x["id"] == sb["id"]]
                check(len(mine) == 1 and mine[0]["default"] and mine[0]["container_state"] == "running", "list", listed)
                check(listed["default"] == sb["id"], "list names the default", listed)

                gone = ok(await call(s, "sandbox_down"), "down")
                check([x["id"] for x in gone["removed"]] == [sb["id"]], "down removes the default", gone)
                error(await call(s, "sandbox_exec", {"command": "true"}), "exec after down", "this session has no sandbox")
                t["ls_after_down"] = cli("ls")
    check(not PARSE_ERRORS.seen, "only JSON-RPC on the server's stdout", PARSE_ERRORS.seen)
    return t


async def close():
    """--auto-up; closing stdin (leaving the client) removes the session's sandbox, not a kept one."""
    t = {}
    with open(env("H9_ERRLOG"), "w") as errlog:
        async with stdio_client(server("--auto-up"), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                e = ok(await call(s, "sandbox_exec", {"command": "echo $((6 * 7))"}), "exec in the --auto-up sandbox")
                check(e["stdout"] == "42\n", "exec works without up", e)
                t["auto"] = e["id"]
                t["pid"] = server_pid(e["id"])
                kept = ok(await call(s, "sandbox_up", {"keep": True, "name": f"kept-{env('H9_UNIQUE')}"}), "a kept sandbox")
                check(not kept["session_owned"] and kept["default"], "kept is not the session's to remove", kept)
                t["kept"] = kept["id"]
                e = ok(await call(s, "sandbox_exec", {"command": "true", "id": t["auto"]}), "exec by id")
        # stdio_client closed the server's stdin and waited for it to exit.
    t["server_after_close"] = pid_state(t["pid"])
    check(not PARSE_ERRORS.seen, "only JSON-RPC on the server's stdout", PARSE_ERRORS.seen)
    return t


async def kill():
    """--auto-up; SIGKILL leaves the sandbox to `reap` (the Rust side runs it)."""
    t = {}
    with open(env("H9_ERRLOG"), "w") as errlog:
        async with stdio_client(server("--auto-up"), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                e = ok(await call(s, "sandbox_exec", {"command": "true"}), "exec")
                t["auto"] = e["id"]
                t["pid"] = server_pid(e["id"])
                os.kill(t["pid"], signal.SIGKILL)
                with anyio.fail_after(10):
                    while pid_state(t["pid"]) == "alive":
                        await anyio.sleep(0.05)
                t["listed_after_kill"] = [x["id"] for x in cli("ls")]
    return t


async def term():
    """--auto-up; SIGTERM while a command runs: the command's tree dies, the sandbox is removed."""
    t = {}
    with open(env("H9_ERRLOG"), "w") as errlog:
        async with stdio_client(server("--auto-up"), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                e = ok(await call(s, "sandbox_exec", {"command": "true"}), "exec")
                t["auto"] = e["id"]
                t["pid"] = server_pid(e["id"])

                async def long_command():
                    try:
                        await call(s, "sandbox_exec", {"command": "sleep 296"})
                    except Exception as exc:  # the connection ends under the call
                        t["long_call"] = type(exc).__name__

                async with anyio.create_task_group() as tg:
                    tg.start_soon(long_command)
                    await anyio.sleep(1.0)
                    started = time.monotonic()
                    os.kill(t["pid"], signal.SIGTERM)
                    with anyio.fail_after(30):
                        while pid_state(t["pid"]) == "alive":
                            await anyio.sleep(0.05)
                    t["exit_secs"] = round(time.monotonic() - started, 2)
                    tg.cancel_scope.cancel()
    return t


async def oversized():
    """A request over the server's 16 MiB message limit gets a JSON-RPC error naming it (it used
    to get no answer at all, the client waiting forever); the session goes on."""
    t = {}
    with open(env("H9_ERRLOG"), "w") as errlog:
        async with stdio_client(server(), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                big = "x" * (17 * 1024 * 1024)
                try:
                    await s.call_tool(
                        "sandbox_write", {"path": "big.txt", "content": big}, read_timeout_seconds=60
                    )
                    check(False, "an oversized request should be refused", None)
                except MCPError as e:
                    t["error"] = {"code": e.error.code, "message": e.error.message}
                msg = t["error"]["message"]
                check("16777216" in msg and "16 MiB" in msg, "the error names the limit", t["error"])
                listed = await s.list_tools()
                check(len(listed.tools) == len(TOOLS), "the session goes on", [x.name for x in listed.tools])
    check(not PARSE_ERRORS.seen, "only JSON-RPC on the server's stdout", PARSE_ERRORS.seen)
    return t


async def scope():
    """A session acts only on the sandboxes it made (and their sub-sandboxes); `--all-sandboxes`
    widens that to every sandbox of the state directory."""
    t = {}
    foreign = cli("up")["id"]  # a script's sandbox, made with the CLI
    t["foreign"] = foreign
    unique = env("H9_UNIQUE")
    with open(env("H9_ERRLOG"), "w") as errlog:
        async with stdio_client(server(), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                own = ok(await call(s, "sandbox_up", {"keep": True}), "up")["id"]
                t["own"] = own
                child = cli("up", "--parent", own)["id"]  # a sub-sandbox of the session's, by CLI
                t["child"] = child
                listed = [x["id"] for x in ok(await call(s, "sandbox_list"), "list")["sandboxes"]]
                check(set(listed) == {own, child}, "the list holds only the session's sandboxes", listed)
                for q in [foreign, foreign[:8]]:
                    error(await call(s, "sandbox_exec", {"id": q, "command": f"touch pwned-{unique}"}), "exec in another's", "no sandbox matches")
                    error(await call(s, "sandbox_read", {"id": q, "path": "x"}), "read in another's", "no sandbox matches")
                    error(await call(s, "sandbox_write", {"id": q, "path": f"written-{unique}", "content": "no"}), "write in another's", "no sandbox matches")
                    error(await call(s, "sandbox_edit", {"id": q, "path": "x", "old": "a", "new": "b"}), "edit in another's", "no sandbox matches")
                    error(await call(s, "sandbox_down", {"id": q}), "down of another's", "no sandbox matches")
                    error(await call(s, "sandbox_up", {"parent": q}), "a sub-sandbox of another's", "no sandbox matches")
                e = ok(await call(s, "sandbox_exec", {"id": child, "command": "echo child"}), "exec in the sub-sandbox")
                check(e["stdout"] == "child\n", "the sub-sandbox is the session's", e)
                gone = ok(await call(s, "sandbox_down", {"id": own}), "down own")
                check({x["id"] for x in gone["removed"]} == {own, child}, "down removes the sub-sandbox too", gone)
        async with stdio_client(server("--all-sandboxes"), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                listed = [x["id"] for x in ok(await call(s, "sandbox_list"), "list --all-sandboxes")["sandboxes"]]
                check(foreign in listed, "--all-sandboxes lists every sandbox", listed)
                e = ok(await call(s, "sandbox_exec", {"id": foreign, "command": "echo reached"}), "exec --all-sandboxes")
                check(e["stdout"] == "reached\n", "--all-sandboxes reaches another's sandbox", e)
    return t


async def confine():
    """sandbox_up's workdir stays inside the server's --workdir: `..`, an absolute path outside
    and a symlink inside that points out are refused (the Rust side plants them and checks that
    no sandbox was made there); a directory inside works."""
    workdir = env("H9_WORKDIR")
    home = os.path.dirname(workdir)  # the tests' HOME, holding .ssh and outside/
    t = {"refused": []}
    with open(env("H9_ERRLOG"), "w") as errlog:
        async with stdio_client(server(), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                for w in ["../.ssh", "../outside", f"{home}/outside", "link-out", "link-out/.", "sub/../../outside", "/"]:
                    t["refused"].append(error(await call(s, "sandbox_up", {"workdir": w}), f"workdir {w}", "--workdir"))
                listed = cli("ls")
                check(listed == [], "nothing was created for a refused workdir", listed)
                sb = ok(await call(s, "sandbox_up", {"workdir": "sub"}), "a workdir inside")
                check(sb["workdir"] == f"{workdir}/sub", "the work dir inside", sb)
                sb2 = ok(await call(s, "sandbox_up", {"workdir": f"{workdir}/sub"}), "an absolute workdir inside")
                check(sb2["workdir"] == f"{workdir}/sub", "the absolute work dir inside", sb2)
                t["made"] = [sb["id"], sb2["id"]]
    return t


SCENARIOS = {
    "tools": tools,
    "flow": flow,
    "close": close,
    "kill": kill,
    "term": term,
    "oversized": oversized,
    "scope": scope,
    "confine": confine,
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        print(f"usage: {sys.argv[0]} {'|'.join(SCENARIOS)}", file=sys.stderr)
        return 2
    try:
        transcript = anyio.run(lambda: _bounded(SCENARIOS[sys.argv[1]]))
    except Failed as e:
        print(f"mcp_client: check failed: {e}", file=sys.stderr)
        return 1
    print(json.dumps(transcript))
    return 0


async def _bounded(scenario):
    with anyio.fail_after(240):
        return await scenario()


if __name__ == "__main__":
    sys.exit(main())
