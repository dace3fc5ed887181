#!/usr/bin/env bash
# Makes gVisor's runsc usable as a Docker runtime named `runsc` (h9sandbox's `runtime = "runsc"`
# tier, see docs/security.md, "gVisor"). Idempotent; needs root on a Debian-like host:
#   1. installs Debian's `runsc` package when no runsc is on PATH (apt-get);
#   2. registers it in /etc/docker/daemon.json under "runtimes" (merged with python3: every other
#      setting of the file is kept as it is) with the runtimeArgs this host needs:
#        --platform=ptrace   no KVM in most VMs and CI runners; ptrace works everywhere
#        (--ignore-cgroups)  only when runsc cannot start a container in the cgroups dockerd
#                            gives it: without it the host's cgroups bound the whole gVisor
#                            sandbox (memory, CPU, and pids, where the Sentry's own threads, about
#                            40, count too); with it the limits are NOT enforced
#        --network=MODE      the first of these that starts a container here:
#          sandbox  gVisor's own network stack (netstack) on the container's veth;
#          host     the host kernel's stack, reached through gVisor's hostinet, still inside the
#                   container's network namespace (Debian's runsc 20221219 refuses `sandbox` on
#                   kernels that namespace net.core.rmem_default, 6.x: "cannot run with network
#                   enabled in root network namespace");
#          none     loopback only: a sandbox with network = "bridge" has no network at all
#      (RUNSC_ARGS="--platform=ptrace ..." sets them all and skips the probe);
#   3. makes dockerd reload its configuration (SIGHUP; the running containers are untouched) and
#      waits until `docker info` lists the runtime.
# The probe runs a missing program in an empty image (h9sandbox-probe/empty, imported here and
# removed after): a network mode that works fails later, at "failed to load".
# Prints the runtime's path and version on success; exits non-zero with a message otherwise.
set -euo pipefail

DAEMON_JSON=${DAEMON_JSON:-/etc/docker/daemon.json}
BASE_ARGS="--platform=ptrace"
PROBE_IMAGE=h9sandbox-probe/empty:latest
NAME=runsc

log() { echo "setup-gvisor: $*" >&2; }

runsc_bin=$(command -v runsc || true)
if [ -z "$runsc_bin" ]; then
  log "installing Debian's runsc package"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null
  runsc_bin=$(command -v runsc)
fi

# Merges runtimes.NAME = {path, runtimeArgs} into the daemon's configuration, keeping every
# other key; writes atomically; prints whether it changed anything.
MERGE_PY=$(cat <<'EOF'
import json, os, sys
path, name, binary, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
try:
    with open(path) as f:
        text = f.read()
except FileNotFoundError:
    text = ""
conf = json.loads(text) if text.strip() else {}
if not isinstance(conf, dict):
    sys.exit(f"setup-gvisor: {path} does not hold a JSON object")
want = {"path": binary, "runtimeArgs": args}
runtimes = conf.setdefault("runtimes", {})
if runtimes.get(name) == want:
    print("no")
    sys.exit(0)
runtimes[name] = want
tmp = path + ".h9sandbox-tmp"
with open(tmp, "w") as f:
    json.dump(conf, f, indent=2)
    f.write("\n")
    f.flush()
    os.fsync(f.fileno())
if os.path.exists(path):
    os.chmod(tmp, os.stat(path).st_mode & 0o7777)
os.replace(tmp, path)
print("yes")
EOF
)

registered() {
  docker info --format '{{json .Runtimes}}' 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); sys.exit(0 if sys.argv[1] in r else 1)' "$NAME"
}

# register ARGS: writes runtimes.runsc with ARGS and reloads dockerd when that changed anything.
register() {
  mkdir -p "$(dirname "$DAEMON_JSON")"
  # Merge: keep every key, replace only runtimes.runsc; write atomically; report whether it changed.
  changed=$(python3 -c "$MERGE_PY" "$DAEMON_JSON" "$NAME" "$runsc_bin" "$1")
  
  if [ "$changed" = yes ] || ! registered; then
    pid=$(pidof dockerd || true)
    if [ -z "$pid" ]; then
      log "dockerd is not running: start it (it reads $DAEMON_JSON at start)"
      exit 1
    fi
    log "reloading dockerd ($pid) to register $NAME"
    kill -HUP $pid
    for _ in $(seq 50); do registered && break; sleep 0.2; done
    if ! registered; then
      log "dockerd did not register $NAME after a reload; see its log"
      exit 1
    fi
  fi
}

# probe: whether a runsc container with a sandbox's limits gets past its set-up (see the header).
probe() {
  local err
  docker image inspect "$PROBE_IMAGE" >/dev/null 2>&1 ||
    tar -cf - --files-from /dev/null | docker import - "$PROBE_IMAGE" >/dev/null
  err=$(docker run --rm --runtime "$NAME" --network none --memory 256m --pids-limit 256 --cpus 1 --pull never "$PROBE_IMAGE" /h9sandbox-probe 2>&1 || true)
  case $err in
    *"failed to load /h9sandbox-probe"*) return 0 ;;
    *) log "probe: ${err%%$'\n'*}"; return 1 ;;
  esac
}

if [ -n "${RUNSC_ARGS:-}" ]; then
  register "$RUNSC_ARGS"
elif registered && probe; then
  log "already registered and starting containers"
else
  ok=
  for cg in "" " --ignore-cgroups"; do
    for mode in sandbox host none; do
      register "$BASE_ARGS$cg --network=$mode"
      if probe; then ok="$cg --network=$mode"; break 2; fi
      log "$cg --network=$mode does not start a container here"
    done
  done
  [ -n "$ok" ] || { log "runsc starts no container on this host"; exit 1; }
  log "registered with$ok"
fi
docker image rm "$PROBE_IMAGE" >/dev/null 2>&1 || true
echo "$NAME: $runsc_bin ($("$runsc_bin" --version 2>/dev/null | head -1))"
