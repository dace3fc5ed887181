#!/usr/bin/env python3
"""Stress figures: many workers at once, with h9sandbox and with raw docker, in one run.

Each of --workers threads does --rounds rounds of five operations:
  h9sandbox: up --owner-pid (this process), exec `true`, exec (write a file), exec (read it back), down
  docker:    docker run -d (the flags `h9sandbox -v up` prints), docker exec C true,
             docker exec C sh -c (write), docker exec C cat (read), docker stop -t 5 C + docker rm -f C
while one more thread loops `h9sandbox reap` (for docker: the `docker ps -a --filter label=...` such
a reaper needs at least). Checks that every operation succeeded, every file read back, and nothing
leaked; prints operations per second of each and the ratio h9sandbox / docker.

Usage: scripts/stress.py [--binary PATH] [--image IMG] [--workers 8] [--rounds 10] [--repeat 1]
"""
import argparse, json, os, shlex, subprocess, sys, tempfile, threading, time


def run(argv, env=None, check=True):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if check and p.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {p.returncode}: {p.stderr.decode().strip()}")
    return p.stdout.decode()


def loop(workers, rounds, one_round, background):
    """Runs `one_round(worker, round)` in `workers` threads while `background()` loops; returns
    (seconds, errors, background iterations)."""
    errors, stop, bg_runs = [], threading.Event(), [0]

    def bg():
        while not stop.is_set():
            try:
                background()
                bg_runs[0] += 1
            except Exception as e:  # noqa: BLE001 - every failure is reported
                errors.append(f"background: {e}")

    def worker(w):
        for i in range(rounds):
            try:
                one_round(w, i)
            except Exception as e:  # noqa: BLE001
                errors.append(f"worker {w} round {i}: {e}")

    b = threading.Thread(target=bg)
    b.start()
    t = time.perf_counter()
    ts = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    dt = time.perf_counter() - t
    stop.set()
    b.join()
    return dt, errors, bg_runs[0]


def h9_loop(a, work):
    state = tempfile.mkdtemp(prefix="h9stress-state")
    env = dict(os.environ, H9SANDBOX_STATE_DIR=state, H9SANDBOX_IMAGE=a.image)
    h9 = [a.binary]
    me = str(os.getpid())
    reaped = []

    def one_round(w, i):
        sid = run(h9 + ["up", "--workdir", work, "--owner-pid", me], env).strip()
        run(h9 + ["exec", sid, "--", "true"], env)
        run(h9 + ["exec", sid, "--", f"echo h9-{w}-{i} > h9-{w}-{i}"], env)
        got = run(h9 + ["exec", sid, "--", f"cat h9-{w}-{i}"], env).strip()
        if got != f"h9-{w}-{i}":
            raise RuntimeError(f"read back {got!r}")
        run(h9 + ["down", sid], env)

    def reaper():
        reaped.extend(json.loads(run(h9 + ["reap", "--format", "json"], env)))

    dt, errors, bg = loop(a.workers, a.rounds, one_round, reaper)
    if reaped:
        errors.append(f"reap removed sandboxes in use: {reaped}")
    left = run(["docker", "ps", "-aq", "--filter", f"label=h9sandbox.state_dir={os.path.realpath(state)}"])
    if left.strip():
        errors.append(f"leaked containers: {left.split()}")
        run(["docker", "rm", "-f", "-v"] + left.split(), check=False)
    if json.loads(run(h9 + ["ls", "--format", "json"], env)):
        errors.append("records left in the state file")
    return dt, errors, bg


def docker_loop(a, work, run_argv):
    label = f"h9stress-{os.getpid()}"
    name_at = run_argv.index("--name") + 1

    def one_round(w, i):
        argv = list(run_argv)
        argv[name_at] = f"{label}-{w}-{i}"
        argv[2:2] = ["--label", label]
        cid = run(argv).strip()
        run(["docker", "exec", cid, "true"])
        run(["docker", "exec", cid, "sh", "-c", f"echo d-{w}-{i} > d-{w}-{i}"])
        got = run(["docker", "exec", cid, "cat", f"d-{w}-{i}"]).strip()
        if got != f"d-{w}-{i}":
            raise RuntimeError(f"read back {got!r}")
        run(["docker", "stop", "-t", "5", cid])
        run(["docker", "rm", "-f", "-v", cid])

    def lister():
        run(["docker", "ps", "-a", "--filter", f"label={label}"])

    dt, errors, bg = loop(a.workers, a.rounds, one_round, lister)
    left = run(["docker", "ps", "-aq", "--filter", f"label={label}"])
    if left.strip():
        errors.append(f"leaked containers: {left.split()}")
        run(["docker", "rm", "-f", "-v"] + left.split(), check=False)
    return dt, errors, bg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", help="h9sandbox to measure [default: cargo's release build]")
    ap.add_argument("--image", default="h9sandbox-test/tiny:latest")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1, help="alternate the two loops this many times")
    a = ap.parse_args()
    if a.binary is None:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from built_binary import built_binary
        a.binary = built_binary()
    work = tempfile.mkdtemp(prefix="h9stress-work")

    # The exact `docker run` h9sandbox issues, minus its labels (so no h9sandbox ever sees them).
    state = tempfile.mkdtemp(prefix="h9stress-probe")
    env = dict(os.environ, H9SANDBOX_STATE_DIR=state, H9SANDBOX_IMAGE=a.image)
    p = subprocess.run([a.binary, "-v", "up", "--workdir", work], env=env, capture_output=True, check=True)
    line = next(l[2:] for l in p.stderr.decode().splitlines() if l.startswith("+ docker run"))
    subprocess.run([a.binary, "down", p.stdout.decode().strip()], env=env, capture_output=True, check=True)
    argv = shlex.split(line)
    run_argv = [x for j, x in enumerate(argv)
                if not (x == "--label" and argv[j + 1].startswith("h9sandbox"))
                and not (j > 0 and argv[j - 1] == "--label" and x.startswith("h9sandbox"))]

    ops = a.workers * a.rounds * 5
    totals = {"h9sandbox": [], "docker": []}
    failed = False
    for r in range(a.repeat):
        for name, fn in (("h9sandbox", lambda: h9_loop(a, work)), ("docker", lambda: docker_loop(a, work, run_argv))):
            dt, errors, bg = fn()
            totals[name].append(dt)
            what = "reaps" if name == "h9sandbox" else "listings"
            print(f"{name:9} {ops} ops in {dt:6.1f} s = {ops/dt:6.1f} ops/s   "
                  f"({a.workers} workers x {a.rounds} rounds x 5 ops; {bg} {what} alongside; "
                  f"{len(errors)} errors)")
            for e in errors[:10]:
                print(f"  error: {e}", file=sys.stderr)
            failed |= bool(errors)
    h9 = ops * len(totals["h9sandbox"]) / sum(totals["h9sandbox"])
    dk = ops * len(totals["docker"]) / sum(totals["docker"])
    print(f"ratio     h9sandbox {h9:.1f} ops/s / docker {dk:.1f} ops/s = {h9/dk:.2f} "
          f"(time per op {dk/h9:.2f}x docker's)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
