#!/usr/bin/env python3
"""Benchmarks h9sandbox against the raw engine, measured side by side in one run.

  exec: `h9sandbox exec ID -- true`        vs `docker exec C true`
  up:   `h9sandbox up`                     vs `docker run -d` with the same flags (printed by `up -v`)
  down: `h9sandbox down ID`                vs `docker stop -t 5 C && docker rm -f -v C`

With --engine podman, the same against `podman` (the test image must be loaded into Podman, see
.ci/run); with --engine local, only exec, against `bash -c true` run directly.
Runs alternate (ours, theirs, ours, ...) so drift hits both alike; prints medians and the ratio
ours/theirs. Usage: scripts/bench.py [--binary PATH] [--image IMG] [--runs N] [--engine E]
"""
import argparse, os, shlex, statistics, subprocess, sys, tempfile, time


def timed(argv, **kw):
    t = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"bench: {shlex.join(argv)} failed: {p.stderr.decode()}")
    return dt, p


def report(name, ours, theirs, raw="docker"):
    mo, mt = statistics.median(ours), statistics.median(theirs)
    print(f"{name:5} h9sandbox {mo*1000:8.1f} ms   {raw} {mt*1000:8.1f} ms   ratio {mo/mt:5.2f}x"
          f"   (median of {len(ours)}; h9sandbox p90 {sorted(ours)[int(len(ours)*0.9)-1]*1000:.1f} ms)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="target/release/h9sandbox")
    ap.add_argument("--image", default="h9sandbox-test/tiny:latest")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--engine", choices=["docker", "podman", "local"], default="docker")
    a = ap.parse_args()
    state = tempfile.mkdtemp(prefix="h9bench-state")
    work = tempfile.mkdtemp(prefix="h9bench-work")
    env = dict(os.environ, H9SANDBOX_STATE_DIR=state, H9SANDBOX_IMAGE=a.image,
               H9SANDBOX_ENGINE=a.engine)
    if a.engine == "podman":
        env["H9SANDBOX_RUNTIME"] = "runc"
    h9 = [a.binary]
    cli = a.engine

    # exec
    _, p = timed(h9 + ["up", "--workdir", work], env=env)
    sid = p.stdout.decode().strip()
    _, p = timed(h9 + ["ls", "--json"], env=env)
    import json
    cid = json.loads(p.stdout)[0]["container_id"]
    raw = ["bash", "-c", "true"] if a.engine == "local" else [cli, "exec", cid, "true"]
    raw_name = "bash -c" if a.engine == "local" else cli
    for _ in range(3):
        timed(h9 + ["exec", sid, "--", "true"], env=env); timed(raw, cwd=work)
    ours, theirs = [], []
    for _ in range(a.runs):
        ours.append(timed(h9 + ["exec", sid, "--", "true"], env=env)[0])
        theirs.append(timed(raw, cwd=work)[0])
    report("exec", ours, theirs, raw_name)
    timed(h9 + ["down", sid], env=env)
    if a.engine == "local":
        return  # no container to start or stop

    # up and down: the bare docker run uses exactly the flags h9sandbox prints with -v.
    _, p = timed(h9 + ["-v", "up", "--workdir", work], env=env)
    sid = p.stdout.decode().strip()
    run_line = next(l[2:] for l in p.stderr.decode().splitlines() if l.startswith(f"+ {cli} run"))
    timed(h9 + ["down", sid], env=env)
    run_argv = shlex.split(run_line)
    name_at = run_argv.index("--name") + 1
    up_o, up_t, down_o, down_t = [], [], [], []
    runs = max(5, a.runs // 3)
    for i in range(runs):
        dt, p = timed(h9 + ["up", "--workdir", work], env=env)
        up_o.append(dt)
        sid = p.stdout.decode().strip()
        argv = list(run_argv)
        argv[name_at] = f"h9bench-{os.getpid()}-{i}"
        # strip our labels so `h9sandbox` never sees the bare containers
        argv = [x for j, x in enumerate(argv) if not (x.startswith("h9sandbox") and argv[j-1] == "--label") and not (x == "--label" and argv[j+1].startswith("h9sandbox"))]
        dt, p = timed(argv)
        up_t.append(dt)
        cid = p.stdout.decode().strip()
        down_o.append(timed(h9 + ["down", sid], env=env)[0])
        t = time.perf_counter()
        subprocess.run([cli, "stop", "-t", "5", cid], stdout=subprocess.DEVNULL)
        subprocess.run([cli, "rm", "-f", "-v", cid], stdout=subprocess.DEVNULL)
        down_t.append(time.perf_counter() - t)
    report("up", up_o, up_t, cli)
    report("down", down_o, down_t, cli)


if __name__ == "__main__":
    main()
