#!/usr/bin/env python3
"""Benchmarks h9sandbox against the raw engine, measured side by side in one run.

  exec: `h9sandbox exec ID -- true`        vs `docker exec C true` (through the sandbox's agent;
        `true` alone is bash's builtin there, as in `bash -c true`, so also `-- /bin/true`, which
        starts the image's program as `docker exec` does; also through the engine's exec,
        `exec_agent = false`, and `sleep 1000 & echo started` against a plain exec)
  up:   `h9sandbox up`                     vs `docker run -d` with the same flags (printed by `up -v`)
  down: `h9sandbox down ID`                vs `docker stop -t 5 C && docker rm -f -v C`

With --runtime runsc (gVisor, see scripts/setup-gvisor.sh), the same under that OCI runtime: the
raw `docker run` gets the same `--runtime` (it copies the flags `up -v` prints) and `docker exec`
runs in the same gVisor container (h9sandbox's commands go through the engine's exec there).

With --only owner: `h9sandbox up --owner-pid PID` (which starts the sandbox's owner watcher)
against a plain `h9sandbox up`, interleaved, each followed by its `down`.

With --only allowlist: `h9sandbox up --allow deb.debian.org` (a proxy sidecar started first) and
its `down` against plain `h9sandbox up` / `down` (network bridge), the sidecar's cost.

With --engine podman, the same against `podman` (the test image must be loaded into Podman, see
.ci/run); with --engine local, only exec, against `bash -c true` run directly.

And the file commands on a 64 MiB file of random bytes (the work dir and the source on one file
system), against the host's own tools:

  read:       `h9sandbox read ID F > OUT`            vs `cat F > OUT`
  read|pipe:  `h9sandbox read ID F | cat >/dev/null` vs `cat F | cat >/dev/null`
  write:      `h9sandbox write ID F --from SRC`      vs `cp SRC F` (in place: not atomic)
  write~mv:                                          vs `cp SRC T && mv T F` (atomic replace)
  write~all:                                         vs `cp SRC T && sync T && mv T F` (atomic
                                                        and durable: what `write` does)
  write<in:   `h9sandbox write ID F < SRC`           vs `cat < SRC > F`

with the peak resident memory (ru_maxrss from wait4) of each, to show that memory stays flat.

And the MCP server (`h9sandbox mcp --auto-up`, one session, spoken to by hand over its pipes):

  mcp exec:   one `tools/call sandbox_exec {"command": "true"}` round trip
              vs `h9sandbox exec ID -- true` and `docker exec C true`
  mcp read:   one `tools/call sandbox_read` of a 100-line file vs `h9sandbox read ID F`
  mcp start:  spawn to the answer of `initialize` (the sandbox is made alongside, not waited for)
The page cache is written back (`sync`) before every timed run, so one run's dirty pages do not
slow the next.

With --only remote, a sandbox whose work dir is copied in (`--workdir-mode copy`: what a daemon
that is not this machine's gets; run it with DOCKER_HOST etc. naming that daemon, e.g.
`eval "$(bash scripts/testbed.sh env)"`, and the raw docker client goes there too):

  exec:        `h9sandbox exec ID -- true` (the remote channel) vs `docker exec C true`, same C
  exec relay:  the same with `network = "none"` (the channel relayed through the engine's exec)
  up:          `h9sandbox up` (empty work dir)  vs `docker run -d` with the flags `up -v` prints
               (the hardening, limits, tmpfs, volumes, network and published port), minus the
               attached stdin (the secret) and the labels, PID 1 a busybox shell that sleeps
  down:        `h9sandbox down ID`               vs `docker stop -t 5 C && docker rm -f -v C`
  cp in:       `h9sandbox cp DIR/. ID:D1`        vs `tar c -C DIR . | docker cp - C:D2`
  cp out:      `h9sandbox cp ID:D1/. OUT1`       vs `docker cp C:D2/. - | tar x -C OUT2`
               (DIR: 200 files of 1 MiB of random bytes in 10 directories, D1 and D2 in the
               same container's work dir; throughputs)

With --only forward, the throughput of one 64 MiB HTTP download from busybox httpd in a
sandbox on the bridge network: through `h9sandbox port-forward` (the agent carries it) against
the port `up --publish` had the engine publish (docker-proxy or the kernel's NAT), alternating.

With --only ls, 30 sandboxes up at once (`--sandboxes N`), listed and swept:

  ls:          `h9sandbox ls`                    vs `docker ps -a --filter label=h9sandbox.managed=1`
  ls --json:   `h9sandbox ls --json`             (the same raw counterpart)
  reap:        `h9sandbox reap --dry-run`        (the same raw counterpart)

and the engine calls each makes (`-v`'s lines), which must not grow with the sandboxes.

With --only pool, `up --pool P` (the claim of a ready sandbox of a warm pool, `pool create`)
against the same bare `docker run -d`, for a pool with a mounted work dir and one with a copied
work dir (the claim copies its content in), the pool refilled before each claim.

With --only concurrent, 50 `h9sandbox up`s (`--sandboxes N`) run 8 at a time against 50 bare
`docker run -d`s of the same container 8 at a time (totals: the state lock must not serialise
the engine's part), then their `down`s against `docker stop -t 5` + `docker rm -f -v`.

Runs alternate (ours, theirs, ours, ...) so drift hits both alike; prints medians and the ratio
ours/theirs. Usage:
  scripts/bench.py [--binary PATH] [--image IMG] [--runs N] [--engine E] [--runtime R]
                   [--only core|files|mcp|allowlist|owner|remote|forward|ls|concurrent|pool]
                   [--sandboxes N]
"""
import argparse, os, re, shlex, statistics, subprocess, sys, tempfile, time


def timed(argv, **kw):
    t = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"bench: {shlex.join(argv)} failed: {p.stderr.decode()}")
    return dt, p


def report(name, ours, theirs, raw="docker"):
    mo, mt = statistics.median(ours), statistics.median(theirs)
    print(f"{name} h9sandbox {mo*1000:8.1f} ms   {raw} {mt*1000:8.1f} ms   ratio {mo/mt:5.2f}x"
          f"   (median of {len(ours)}; h9sandbox p90 {sorted(ours)[int(len(ours)*0.9)-1]*1000:.1f} ms)")


def shell_timed(line, **kw):
    """Runs `line` with sh after writing back dirty pages; returns seconds."""
    os.sync()
    t = time.perf_counter()
    p = subprocess.run(["sh", "-c", line], **kw)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"bench: {line} failed")
    return dt


def peak_rss_mib(line, tmp, **kw):
    """Peak resident memory of the first command of `line` (GNU time's %M), in MiB, or None."""
    if not os.path.exists("/usr/bin/time"):
        return None
    out = os.path.join(tmp, "rss")
    shell_timed(f"/usr/bin/time -o {shlex.quote(out)} -f %M {line}", **kw)
    with open(out) as f:
        return int(f.read().split()[-1]) / 1024


def bench_files(a, env, h9, work, tmp):
    size = 64 << 20
    src = os.path.join(tmp, "src.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(size))
    _, p = timed(h9 + ["up", "--workdir", work], env=env)
    sid = p.stdout.decode().strip()
    q = shlex.quote
    b, w = q(a.binary), lambda n: q(os.path.join(work, n))
    out = q(os.path.join(tmp, "out.bin"))
    timed(h9 + ["write", sid, "big.bin", "--from", src], env=env)
    pairs = [
        ("read", f"{b} read {sid} big.bin > {out}", f"cat {w('big.bin')} > {out}"),
        ("read|pipe", f"{b} read {sid} big.bin | cat > /dev/null",
         f"cat {w('big.bin')} | cat > /dev/null"),
        ("write", f"{b} write {sid} h9.bin --from {q(src)}", f"cp {q(src)} {w('cp.bin')}"),
        ("write~mv", f"{b} write {sid} h9.bin --from {q(src)}",
         f"cp {q(src)} {w('cp.tmp')} && mv {w('cp.tmp')} {w('cp.bin')}"),
        ("write~all", f"{b} write {sid} h9.bin --from {q(src)}",
         f"cp {q(src)} {w('cp.tmp')} && sync {w('cp.tmp')} && mv {w('cp.tmp')} {w('cp.bin')}"),
        ("write<in", f"{b} write {sid} h9.bin < {q(src)}", f"cat < {q(src)} > {w('cp.bin')}"),
    ]
    runs = max(5, a.runs // 3)
    for name, ours_line, theirs_line in pairs:
        for _ in range(2):
            shell_timed(ours_line, env=env); shell_timed(theirs_line, env=env)
        ours, theirs = [], []
        for _ in range(runs):
            ours.append(shell_timed(ours_line, env=env))
            theirs.append(shell_timed(theirs_line, env=env))
        mo, mt = statistics.median(ours), statistics.median(theirs)
        rss = lambda line: (lambda m: "  n/a" if m is None else f"{m:5.1f}")(
            peak_rss_mib(line, tmp, env=env))
        print(f"{name:10} h9sandbox {mo*1000:7.1f} ms ({size / mo / 2**20:5.0f} MiB/s, "
              f"RSS {rss(ours_line)} MiB)   host {mt*1000:7.1f} ms (RSS {rss(theirs_line)} MiB)"
              f"   ratio {mo/mt:5.2f}x   (median of {runs})")
    timed(h9 + ["down", sid], env=env)


class McpSession:
    """`h9sandbox mcp` on pipes, spoken to one JSON-RPC line at a time."""

    def __init__(self, h9, env, work):
        import json
        self.json = json
        t = time.perf_counter()
        self.p = subprocess.Popen(h9 + ["mcp", "--auto-up", "--workdir", work], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.started = time.perf_counter() - t
        self.p.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def request(self, method, params):
        self.next_id += 1
        self.p.stdin.write(self.json.dumps({"jsonrpc": "2.0", "id": self.next_id,
                                            "method": method, "params": params}) + "\n")
        while True:
            msg = self.json.loads(self.p.stdout.readline())
            if msg.get("id") == self.next_id:
                return msg

    def call(self, name, arguments):
        """Seconds for one tools/call round trip, and its result (which must be no error)."""
        t = time.perf_counter()
        r = self.request("tools/call", {"name": name, "arguments": arguments})
        dt = time.perf_counter() - t
        if "error" in r or r["result"].get("isError"):
            sys.exit(f"bench: {name} failed: {r}")
        return dt, r["result"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def bench_mcp(a, env, h9, work):
    import json
    starts = []
    for _ in range(5):
        s = McpSession(h9, env, work)
        starts.append(s.started)
        s.call("sandbox_list", {})
        s.close()
    s = McpSession(h9, env, work)
    _, r = s.call("sandbox_exec", {"command": "true"})  # waits for --auto-up
    sid = r["structuredContent"]["id"]
    cid = next(e for e in json.loads(timed(h9 + ["ls", "--json"], env=env)[1].stdout)
               if e["id"] == sid)["container_id"]
    raw = [a.engine, "exec", cid, "true"]
    for _ in range(3):
        s.call("sandbox_exec", {"command": "true"})
        timed(h9 + ["exec", sid, "--", "true"], env=env); timed(raw)
    tool, cli, docker = [], [], []
    for _ in range(a.runs):
        tool.append(s.call("sandbox_exec", {"command": "true"})[0])
        cli.append(timed(h9 + ["exec", sid, "--", "true"], env=env)[0])
        docker.append(timed(raw)[0])
    med = lambda xs: statistics.median(xs) * 1000
    print(f"mcp exec  sandbox_exec {med(tool):7.1f} ms   h9sandbox exec {med(cli):7.1f} ms   "
          f"{a.engine} exec {med(docker):7.1f} ms   ratios {med(tool)/med(docker):4.2f}x and "
          f"{med(cli)/med(docker):4.2f}x of {a.engine} exec   (median of {a.runs})")
    text = "".join(f"line {i}: some text of a file\n" for i in range(100))
    s.call("sandbox_write", {"path": "bench-lines.txt", "content": text})
    tool, cli = [], []
    for _ in range(a.runs):
        tool.append(s.call("sandbox_read", {"path": "bench-lines.txt"})[0])
        cli.append(timed(h9 + ["read", sid, "bench-lines.txt"], env=env)[0])
    print(f"mcp read  sandbox_read {med(tool):7.1f} ms   h9sandbox read {med(cli):7.1f} ms   "
          f"ratio {med(tool)/med(cli):4.2f}x   (median of {a.runs})")
    print(f"mcp start spawn to initialized {med(starts):7.1f} ms   (median of {len(starts)})")
    s.close()
    os.remove(os.path.join(work, "bench-lines.txt"))


def bench_allowlist(a, env, h9, work):
    up_a, up_b, down_a, down_b = [], [], [], []
    runs = max(5, a.runs // 3)
    for _ in range(runs + 1):
        dt, p = timed(h9 + ["up", "--workdir", work, "--allow", "deb.debian.org"], env=env)
        up_a.append(dt)
        down_a.append(timed(h9 + ["down", p.stdout.decode().strip()], env=env)[0])
        dt, p = timed(h9 + ["up", "--workdir", work], env=env)
        up_b.append(dt)
        down_b.append(timed(h9 + ["down", p.stdout.decode().strip()], env=env)[0])
    # The first round warms caches; it is left out.
    report("up --allow", up_a[1:], up_b[1:], "up (bridge)")
    report("down (allowlist)", down_a[1:], down_b[1:], "down (bridge)")


def bench_owner(a, env, h9, work):
    """`up --owner-pid` (which starts the sandbox's owner watcher) against a plain `up`,
    interleaved, each followed by its `down` (which ends the watcher)."""
    owner = subprocess.Popen(["sleep", "100000"])
    up_w, up_p = [], []
    runs = max(5, a.runs // 2)
    try:
        for _ in range(runs + 1):
            dt, p = timed(h9 + ["up", "--workdir", work, "--owner-pid", str(owner.pid)], env=env)
            up_w.append(dt)
            timed(h9 + ["down", p.stdout.decode().strip()], env=env)
            dt, p = timed(h9 + ["up", "--workdir", work], env=env)
            up_p.append(dt)
            timed(h9 + ["down", p.stdout.decode().strip()], env=env)
    finally:
        owner.kill()
    # The first round warms caches; it is left out.
    report("up --owner-pid", up_w[1:], up_p[1:], "up")


def bench_forward(a, env, h9, work):
    """A 64 MiB download through `port-forward` against the published port (see the docstring)."""
    import json, urllib.request
    _, p = timed(h9 + ["up", "--workdir", work, "--network", "bridge", "--publish", "8000"],
                 env=env)
    sid = p.stdout.decode().strip()
    fwd = None
    try:
        timed(h9 + ["exec", sid, "--", "mkdir -p /var/tmp/www && head -c 67108864 /dev/urandom"
                    " > /var/tmp/www/big"], env=env)
        timed(h9 + ["exec", "-d", sid, "--", "httpd -f -p 8000 -h /var/tmp/www"], env=env)
        _, p = timed(h9 + ["ls", "--format", "json"], env=env)
        published = json.loads(p.stdout)[0]["published"][0]["address"]
        fwd = subprocess.Popen(h9 + ["port-forward", sid, ":8000", "--format", "json"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        forwarded = json.loads(fwd.stdout.readline())["forwards"][0]["address"]

        def get(addr):
            for _ in range(100):  # httpd may still be starting
                try:
                    t = time.perf_counter()
                    with urllib.request.urlopen(f"http://{addr}/big", timeout=60) as r:
                        n = len(r.read())
                    return n / (time.perf_counter() - t) / (1 << 20)
                except OSError:
                    time.sleep(0.1)
            sys.exit(f"bench: nothing answered at {addr}")

        get(published), get(forwarded)  # warm both
        ours, theirs = [], []
        runs = max(5, a.runs // 3)
        for _ in range(runs):
            ours.append(get(forwarded))
            theirs.append(get(published))
        mo, mt = statistics.median(ours), statistics.median(theirs)
        print(f"forward   port-forward {mo:8.1f} MiB/s   published port {mt:8.1f} MiB/s"
              f"   throughput ratio {mo/mt:5.2f}x   (median of {runs} downloads of 64 MiB)")
    finally:
        if fwd:
            fwd.terminate()
            fwd.wait(timeout=30)
        subprocess.run(h9 + ["down", sid], env=env, stdout=subprocess.DEVNULL)
def bench_ls(a, env, h9, work):
    """`ls`, `ls --json` and `reap --dry-run` with `a.sandboxes` sandboxes against `docker ps -a`
    of the same label, and how many engine calls each makes (`-v`'s `+ ` lines)."""
    made = []
    try:
        for _ in range(a.sandboxes):
            _, p = timed(h9 + ["up", "--workdir", work], env=env)
            made.append(p.stdout.decode().strip())
        raw = [a.engine, "ps", "-a", "--no-trunc", "--filter", "label=h9sandbox.managed=1"]
        for name, argv in (("ls", ["ls"]), ("ls --json", ["ls", "--json"]),
                           ("reap --dry-run", ["reap", "--dry-run"])):
            _, p = timed(h9 + ["-v"] + argv, env=env)
            calls = [l for l in p.stderr.decode().splitlines() if l.startswith("+ ")]
            for _ in range(3):
                timed(h9 + argv, env=env); timed(raw)
            ours, theirs = [], []
            for _ in range(a.runs):
                ours.append(timed(h9 + argv, env=env)[0])
                theirs.append(timed(raw)[0])
            report(f"{name} ({a.sandboxes} sandboxes, {len(calls)} engine calls)", ours, theirs,
                   f"{a.engine} ps")
    finally:
        for sid in made:
            subprocess.run(h9 + ["down", sid], env=env, stdout=subprocess.DEVNULL)


def bare_run_template(a, env, h9, work):
    """The `docker run -d` argv of a bare container with exactly the flags `up -v` prints (a run
    directory, mount root and anonymous scratch volume of its own), the index of its name, and
    the directories to remove afterwards."""
    cli = a.engine
    _, p = timed(h9 + ["-v", "up", "--workdir", work], env=env)
    sid = p.stdout.decode().strip()
    run_line = next(l[2:] for l in p.stderr.decode().splitlines() if l.startswith(f"+ {cli} run"))
    timed(h9 + ["down", sid], env=env)
    run_argv = shlex.split(run_line)
    name_at = run_argv.index("--name") + 1
    # The bare run mounts a run directory of its own (the sandbox's went with `down`).
    bare_run = tempfile.mkdtemp(prefix="h9bench-run")
    run_argv = [re.sub(r"source=[^,]*/run/[0-9a-f-]{36},", f"source={bare_run},", x) for x in run_argv]
    # ... and a mount root of its own (the read-only /.h9sandbox with its empty mount points).
    bare_root = tempfile.mkdtemp(prefix="h9bench-root")
    os.chmod(bare_root, 0o755)
    for d in ("run", "proxy"):
        os.mkdir(os.path.join(bare_root, d))
    open(os.path.join(bare_root, "h9sandbox"), "w").close()
    run_argv = [re.sub(r"source=[^,]*/mounts/[0-9a-f-]{36},", f"source={bare_root},", x) for x in run_argv]
    # ... and an anonymous scratch volume (one of its own per run, removed with `rm -v`).
    run_argv = [anonymous_volume(x) for x in run_argv]
    return run_argv, name_at, [bare_run, bare_root]


def bare_argv(run_argv, name_at, name):
    """`run_argv` naming its container `name`, without h9sandbox's labels (so that h9sandbox
    never sees the bare containers)."""
    argv = list(run_argv)
    argv[name_at] = name
    return [x for j, x in enumerate(argv)
            if not (x.startswith("h9sandbox") and argv[j-1] == "--label")
            and not (x == "--label" and argv[j+1].startswith("h9sandbox"))]


def bench_concurrent(a, env, h9, work):
    """`a.sandboxes` `up`s, 8 at a time, against as many bare `docker run -d`s of the same
    container, 8 at a time (totals), then their `down`s against `stop` + `rm`."""
    from concurrent.futures import ThreadPoolExecutor
    cli, n = a.engine, a.sandboxes
    run_argv, name_at, bare_dirs = bare_run_template(a, env, h9, work)
    ours, theirs = [], []
    try:
        with ThreadPoolExecutor(8) as pool:
            t = time.perf_counter()
            ours = [p.stdout.decode().strip() for _, p in
                    pool.map(lambda _: timed(h9 + ["up", "--workdir", work], env=env), range(n))]
            up_o = time.perf_counter() - t
            t = time.perf_counter()
            theirs = [p.stdout.decode().strip() for _, p in pool.map(
                lambda i: timed(bare_argv(run_argv, name_at, f"h9bench-{os.getpid()}-c{i}")),
                range(n))]
            up_t = time.perf_counter() - t
            t = time.perf_counter()
            list(pool.map(lambda sid: timed(h9 + ["down", sid], env=env), ours))
            down_o = time.perf_counter() - t
            ours = []
            t = time.perf_counter()
            list(pool.map(lambda c: (timed([cli, "stop", "-t", "5", c]),
                                     timed([cli, "rm", "-f", "-v", c])), theirs))
            down_t = time.perf_counter() - t
            theirs = []
        for name, o, r, raw in ((f"{n} up, 8 at a time", up_o, up_t, f"{cli} run -d"),
                                (f"{n} down, 8 at a time", down_o, down_t, f"{cli} stop+rm")):
            print(f"{name}: h9sandbox {o*1000:8.0f} ms   {raw} {r*1000:8.0f} ms   ratio {o/r:5.2f}x"
                  f"   (totals)")
    finally:
        for sid in ours:
            subprocess.run(h9 + ["down", sid], env=env, stdout=subprocess.DEVNULL)
        for c in theirs:
            subprocess.run([cli, "rm", "-f", "-v", c], stdout=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf"] + bare_dirs)


def bench_pool(a, env, h9, work):
    """`up --pool P` (a claim of a warm pool's ready sandbox) against a bare `docker run -d` with
    the flags `up -v` prints, for a pool with a mounted work dir and one with a copied work dir
    (the claim copies its content in: here one small file). Before each claim the pool is
    refilled, so that each claim finds a ready sandbox (the claim is measured, not the filler)."""
    import json
    run_argv, name_at, bare_dirs = bare_run_template(a, env, h9, work)
    with open(os.path.join(work, "hello.txt"), "w") as f:
        f.write("hello\n")
    size = 2

    def ready(name):
        _, p = timed(h9 + ["pool", "ls", "--format", "json"], env=env)
        return next(x["ready"] for x in json.loads(p.stdout) if x["name"] == name)

    def wait_full(name):
        deadline = time.time() + 120
        while ready(name) < size:
            if time.time() > deadline:
                sys.exit(f"bench: pool {name} did not refill in 120 s")
            time.sleep(0.05)

    try:
        for name, mode in (("bench-mount", "mount"), ("bench-copy", "copy")):
            timed(h9 + ["pool", "create", name, "--size", str(size), "--workdir", work,
                        "--workdir-mode", mode], env=env)
            claims, bare = [], []
            runs = max(5, a.runs // 3)
            for i in range(runs + 1):
                wait_full(name)
                dt, p = timed(h9 + ["up", "--pool", name], env=env)
                claims.append(dt)
                sid = p.stdout.decode().strip()
                dt, p = timed(bare_argv(run_argv, name_at, f"h9bench-{os.getpid()}-{name}-{i}"))
                bare.append(dt)
                cid = p.stdout.decode().strip()
                timed(h9 + ["down", sid], env=env)
                subprocess.run([a.engine, "rm", "-f", "-v", cid], stdout=subprocess.DEVNULL)
            # The first round warms caches; it is left out.
            report(f"up --pool ({mode} work dir)", claims[1:], bare[1:], f"{a.engine} run -d")
            timed(h9 + ["pool", "rm", name], env=env)
    finally:
        subprocess.run(h9 + ["down", "--all"], env=env, stdout=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf"] + bare_dirs)


def anonymous_volume(mount):
    """A `--mount` value of the sandbox's named scratch volume (`type=volume,source=NAME,...`) as
    an anonymous volume at the same place (a bare run's own, removed with `rm -v`, which a named
    one is not); any other value unchanged."""
    if not (mount.startswith("type=volume,") and "source=" in mount):
        return mount
    return "type=volume,destination=" + re.search(r"destination=([^,]*)", mount).group(1)


def bench_remote(a, env, h9, work):
    """exec, up, down and cp of a copied sandbox (see the docstring); `work` stays empty."""
    import json
    cli, q = a.engine, shlex.quote
    daemon = os.environ.get("DOCKER_HOST") or os.environ.get("DOCKER_CONTEXT") or "the default"
    print(f"remote: daemon {daemon}")
    up = h9 + ["up", "--workdir-mode", "copy", "--workdir", work]
    made = []  # sandboxes to take down, raw containers to remove, whatever happens

    def h9_up(extra=()):
        dt, p = timed(up + list(extra), env=env)
        sid = p.stdout.decode().strip()
        made.append(("h9", sid))
        return dt, sid, p

    def container_of(sid):
        ls = json.loads(timed(h9 + ["ls", "--json"], env=env)[1].stdout)
        return next(e for e in ls if e["id"] == sid)["container_id"]

    def h9_down(sid):
        dt, _ = timed(h9 + ["down", sid], env=env)
        made.remove(("h9", sid))
        return dt

    tmp = tempfile.mkdtemp(prefix="h9bench-remote")
    try:
        # The first `up` of the image builds its derived image (the image plus the binary).
        _, sid, _ = h9_up()
        cid = container_of(sid)
        raw = [cli, "exec", cid, "true"]
        for _ in range(3):
            timed(h9 + ["exec", sid, "--", "true"], env=env); timed(raw)
        ours, theirs = [], []
        for _ in range(a.runs):
            ours.append(timed(h9 + ["exec", sid, "--", "true"], env=env)[0])
            theirs.append(timed(raw)[0])
        report("exec (remote channel)", ours, theirs, f"{cli} exec")

        # network = "none": no published port, the channel relayed through the engine's exec.
        _, nid, _ = h9_up(["--network", "none"])
        ncid = container_of(nid)
        nraw = [cli, "exec", ncid, "true"]
        for _ in range(2):
            timed(h9 + ["exec", nid, "--", "true"], env=env); timed(nraw)
        ours, theirs = [], []
        for _ in range(max(5, a.runs // 3)):
            ours.append(timed(h9 + ["exec", nid, "--", "true"], env=env)[0])
            theirs.append(timed(nraw)[0])
        report("exec (relay, network none)", ours, theirs, f"{cli} exec")
        h9_down(nid)

        # cp of a 200 MiB tree, both ways, against docker cp of a tar stream into the same
        # container's work dir (the same volume). The tar's owner is the sandbox's user, as
        # `h9sandbox cp` makes them, so the sandbox's user can remove either copy.
        tree = os.path.join(tmp, "tree")
        for d in range(10):
            os.makedirs(os.path.join(tree, f"d{d}"))
            for f in range(20):
                with open(os.path.join(tree, f"d{d}", f"f{f}.bin"), "wb") as fh:
                    fh.write(os.urandom(1 << 20))
        size = 200 << 20
        uid, gid = (timed([cli, "exec", cid, "id", "-" + x])[1].stdout.decode().strip()
                    for x in "ug")
        # The sandbox's work dir is at the host's path; relative paths of `cp` start there.
        dst_h9, dst_raw = "bench-h9", os.path.join(work, "bench-raw")
        out_h9, out_raw = os.path.join(tmp, "out-h9"), os.path.join(tmp, "out-raw")
        b = q(a.binary)
        cp_in = (f"{b} cp {q(tree)}/. {sid}:{dst_h9}",
                 f"tar c --numeric-owner --owner={uid} --group={gid} -C {q(tree)} . | "
                 f"{cli} cp - {cid}:{q(dst_raw)}")
        cp_out = (f"{b} cp {sid}:{dst_h9}/. {q(out_h9)}",
                  f"{cli} cp {cid}:{q(dst_raw)}/. - | tar x -C {q(out_raw)}")

        def fresh_in():
            # `docker cp -` needs its destination; `h9sandbox cp DIR/. ID:D1` makes D1 (into an
            # existing D1 it puts DIR itself, unlike docker cp).
            timed(h9 + ["exec", sid, "--", f"rm -rf {dst_h9} {q(dst_raw)} && "
                                           f"mkdir {q(dst_raw)}"], env=env)

        def fresh_out():
            subprocess.run(["rm", "-rf", out_h9, out_raw])
            os.mkdir(out_h9); os.mkdir(out_raw)

        runs = max(5, a.runs // 3)
        for name, (ours_line, theirs_line), fresh in (("cp in", cp_in, fresh_in),
                                                      ("cp out", cp_out, fresh_out)):
            ours, theirs = [], []
            for i in range(runs + 1):  # the first round warms caches; it is left out
                fresh()
                o = shell_timed(ours_line, env=env)
                t = shell_timed(theirs_line, env=env)
                if i:
                    ours.append(o); theirs.append(t)
            mo, mt = statistics.median(ours), statistics.median(theirs)
            print(f"{name:7} h9sandbox {mo*1000:7.0f} ms ({size / mo / 2**20:5.0f} MiB/s)   "
                  f"{cli} cp {mt*1000:7.0f} ms ({size / mt / 2**20:5.0f} MiB/s)   "
                  f"throughput ratio {mt/mo:5.2f}x   (median of {runs})")
        sums = lambda d: subprocess.run(["sh", "-c", f"cd {q(d)} && find . -type f | sort | "
                                              "xargs md5sum"], stdout=subprocess.PIPE).stdout
        for d in (out_h9, out_raw):
            if sums(d) != sums(tree):
                sys.exit(f"bench: {d}, copied in and out, differs from {tree}")
        h9_down(sid)

        # up and down: the bare docker run gets the flags `up -v` prints, run detached.
        _, p = timed(h9 + ["-v"] + up[len(h9):], env=env)
        sid = p.stdout.decode().strip()
        made.append(("h9", sid))
        # `+ docker run …`, or `+ /usr/bin/docker run …` with an `engine_bin` of its own.
        client = os.environ.get("H9SANDBOX_ENGINE_BIN") or cli
        # A remote daemon's settings lead the line (`DOCKER_HOST=… docker run …`): the bare
        # run gets them from this environment.
        lines = [re.sub(r"^\+ (?:DOCKER_\w+=\S+ )*", "+ ", l)
                 for l in p.stderr.decode().splitlines()]
        run_line = next((l[2:] for l in lines if l.startswith(f"+ {client} run")), None)
        if run_line is None:
            sys.exit(f"bench: `up -v` showed no `{client} run` line:\n{p.stderr.decode()}")
        h9_down(sid)
        argv = shlex.split(run_line)
        image_at = argv.index("--") + 1
        argv, image = argv[:image_at - 1], argv[image_at]
        bare = [cli, "run", "-d"]
        i = 2
        while i < len(argv):
            x = argv[i]
            if x in ("-i", "--sig-proxy=false"):
                i += 1
            elif x in ("-a", "--cidfile", "--name", "--label", "--entrypoint"):
                i += 2
            elif x == "--mount":
                bare += [x, anonymous_volume(argv[i + 1])]  # the scratch volume
                i += 2
            else:
                bare.append(x)
                i += 1
        bare += ["--entrypoint", "/bin/busybox", "--", image,
                 "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"]
        up_o, up_t, down_o, down_t = [], [], [], []
        for i in range(max(5, a.runs // 3) + 1):  # the first round is left out
            dt, sid, _ = h9_up()
            up_o.append(dt)
            dt, p = timed(bare[:3] + ["--name", f"h9bench-{os.getpid()}-{i}"] + bare[3:])
            rid = p.stdout.decode().strip()
            made.append(("raw", rid))
            up_t.append(dt)
            down_o.append(h9_down(sid))
            t = time.perf_counter()
            subprocess.run([cli, "stop", "-t", "5", rid], stdout=subprocess.DEVNULL)
            subprocess.run([cli, "rm", "-f", "-v", rid], stdout=subprocess.DEVNULL)
            down_t.append(time.perf_counter() - t)
            made.remove(("raw", rid))
        report("up (copy, empty work dir)", up_o[1:], up_t[1:], f"{cli} run -d")
        report("down (copy)", down_o[1:], down_t[1:], f"{cli} stop+rm")
    finally:
        for kind, x in made:
            if kind == "h9":
                subprocess.run(h9 + ["down", x], env=env, stdout=subprocess.DEVNULL)
            else:
                subprocess.run([cli, "rm", "-f", "-v", x], stdout=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", tmp])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", help="h9sandbox to measure [default: cargo's release build]")
    ap.add_argument("--image", default="h9sandbox-test/tiny:latest")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--engine", choices=["docker", "podman", "local"], default="docker")
    ap.add_argument("--runtime", help="OCI runtime of the sandboxes and raw containers (runsc)")
    ap.add_argument("--only", choices=["core", "files", "mcp", "allowlist", "owner", "remote",
                                       "forward", "ls", "concurrent", "pool"])
    ap.add_argument("--sandboxes", type=int,
                    help="how many sandboxes `--only ls` lists (30), `--only concurrent` makes (50)")
    a = ap.parse_args()
    if a.binary is None:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from built_binary import built_binary
        a.binary = built_binary()
    state = tempfile.mkdtemp(prefix="h9bench-state")
    work = tempfile.mkdtemp(prefix="h9bench-work")
    env = dict(os.environ, H9SANDBOX_STATE_DIR=state, H9SANDBOX_IMAGE=a.image,
               H9SANDBOX_ENGINE=a.engine)
    if a.runtime:
        env["H9SANDBOX_RUNTIME"] = a.runtime
    elif a.engine == "podman":
        env["H9SANDBOX_RUNTIME"] = "runc"
    h9 = [a.binary]
    if a.only == "owner":
        bench_owner(a, env, h9, work)
        subprocess.run(["rm", "-rf", state, work])
        return
    if a.sandboxes is None:
        a.sandboxes = 50 if a.only == "concurrent" else 30
    if a.only == "concurrent":
        try:
            bench_concurrent(a, env, h9, work)
        finally:
            subprocess.run(["rm", "-rf", state, work])
        return
    if a.only == "pool":
        try:
            bench_pool(a, env, h9, work)
        finally:
            subprocess.run(["rm", "-rf", state, work])
        return
    if a.only == "ls":
        try:
            bench_ls(a, env, h9, work)
        finally:
            subprocess.run(["rm", "-rf", state, work])
        return
    if a.only == "remote":
        try:
            bench_remote(a, env, h9, work)
        finally:
            subprocess.run(["rm", "-rf", state, work])
        return
    if a.only == "forward":
        try:
            bench_forward(a, env, h9, work)
        finally:
            subprocess.run(["rm", "-rf", state, work])
        return
    if a.only == "allowlist":
        bench_allowlist(a, env, h9, work)
        subprocess.run(["rm", "-rf", state, work])
        return
    if a.engine != "local" and a.only in (None, "mcp"):
        bench_mcp(a, env, h9, work)
        if a.only == "mcp":
            subprocess.run(["rm", "-rf", state, work])
            return
    if a.only not in ("core", "mcp"):
        tmp = tempfile.mkdtemp(prefix="h9bench-files")
        try:
            bench_files(a, env, h9, work, tmp)
        finally:
            subprocess.run(["rm", "-rf", tmp] + [os.path.join(work, n) for n in
                                                  ("big.bin", "h9.bin", "cp.bin", "cp.tmp")])
        if a.only == "files":
            subprocess.run(["rm", "-rf", state, work])
            return
    cli = a.engine

    # exec
    _, p = timed(h9 + ["up", "--workdir", work], env=env)
    sid = p.stdout.decode().strip()
    _, p = timed(h9 + ["ls", "--json"], env=env)
    import json
    cid = json.loads(p.stdout)[0]["container_id"]
    raw = ["bash", "-c", "true"] if a.engine == "local" else [cli, "exec", cid, "true"]
    raw_name = "bash -c" if a.engine == "local" else cli
    # Through the sandbox's agent (the default), through the engine's exec (the fallback), and
    # with a background child holding stdout (`exec` returns with the command's own exit).
    engine_env = dict(env, H9SANDBOX_EXEC_AGENT="false")
    bg = h9 + ["exec", sid, "--", "sleep 1000 & echo started"]
    for _ in range(3):
        timed(h9 + ["exec", sid, "--", "true"], env=env); timed(raw, cwd=work)
    ours, theirs, fallback, background, program = [], [], [], [], []
    # Each measurement starts from a quiet machine: an engine's exec goes on winding its session
    # down (the shim, the daemon) for tens of ms after its client returned, which would be
    # counted against the measurement that follows it.
    settle = lambda: time.sleep(0.1)
    for _ in range(a.runs):
        settle()
        ours.append(timed(h9 + ["exec", sid, "--", "true"], env=env)[0])
        settle()
        theirs.append(timed(raw, cwd=work)[0])
        # `true` alone is bash's builtin (no program starts, as in `bash -c true`); a path
        # starts the image's program, as `docker exec C true` does.
        settle()
        program.append(timed(h9 + ["exec", sid, "--", "/bin/true"], env=env)[0])
        if a.engine != "local":
            settle()
            fallback.append(timed(h9 + ["exec", sid, "--", "true"], env=engine_env)[0])
    # Apart: under gVisor the exec after one that left a background process holding its output
    # waits about 2 s more (the engine still winds the previous exec session down).
    if a.engine != "local":
        for _ in range(a.runs):
            background.append(timed(bg, env=env)[0])
    report("exec", ours, theirs, raw_name)
    report("exec -- /bin/true (a program)", program, theirs, raw_name)
    if a.engine != "local":
        report("exec (engine's exec, fallback)", fallback, theirs, raw_name)
        mb, mo = statistics.median(background), statistics.median(ours)
        print(f"exec 'sleep 1000 & echo started' {mb*1000:7.1f} ms   plain exec {mo*1000:7.1f} ms"
              f"   ratio {mb/mo:5.2f}x   (median of {len(background)})")
    timed(h9 + ["down", sid], env=env)
    if a.engine == "local":
        subprocess.run(["rm", "-rf", state, work])
        return  # no container to start or stop

    # up and down: the bare docker run uses exactly the flags h9sandbox prints with -v.
    run_argv, name_at, bare_dirs = bare_run_template(a, env, h9, work)
    up_o, up_t, down_o, down_t = [], [], [], []
    runs = max(5, a.runs // 3)
    for i in range(runs):
        dt, p = timed(h9 + ["up", "--workdir", work], env=env)
        up_o.append(dt)
        sid = p.stdout.decode().strip()
        dt, p = timed(bare_argv(run_argv, name_at, f"h9bench-{os.getpid()}-{i}"))
        up_t.append(dt)
        cid = p.stdout.decode().strip()
        down_o.append(timed(h9 + ["down", sid], env=env)[0])
        t = time.perf_counter()
        subprocess.run([cli, "stop", "-t", "5", cid], stdout=subprocess.DEVNULL)
        subprocess.run([cli, "rm", "-f", "-v", cid], stdout=subprocess.DEVNULL)
        down_t.append(time.perf_counter() - t)
    report("up", up_o, up_t, cli)
    report("down", down_o, down_t, cli)
    subprocess.run(["rm", "-rf", state, work] + bare_dirs)


if __name__ == "__main__":
    main()
