#!/usr/bin/env bash
# A two-node Docker Swarm on this machine, for the swarm engine's tests (engine = "swarm"):
#
#   bash scripts/swarm.sh up     make it (idempotent), print the environment of its tests
#   bash scripts/swarm.sh env    print that environment
#   bash scripts/swarm.sh down   remove h9sandbox's services and secrets, both nodes leave, the
#                                worker's daemon and the registry stopped, docker0 checked
#
# Manager: this machine's own daemon (`docker swarm init`, listening on 127.0.0.1:2377 only).
# Worker: a third dockerd of its own (scripts/testbed.sh with other roots, socket, bridge and
# address: 127.0.0.3), joined with --advertise-addr 127.0.0.3, so that the testbed daemon of
# the remote tests (127.0.0.2) stays out of the swarm. Registry: Debian's docker-registry on
# 127.0.0.1:5000 (no auth, storage of its own), which both daemons reach without configuration
# (Docker trusts registries on 127.0.0.0/8 as insecure by default); the worker reaches the
# manager's loopback, since both run on this machine. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT=${H9_SWARM_ROOT:-/var/lib/h9-swarm}
RUN=${H9_SWARM_RUN:-/run/h9-swarm}
REGISTRY=${H9_SWARM_REGISTRY:-127.0.0.1:5000}
WORKER_ADDR=${H9_SWARM_WORKER_ADDR:-127.0.0.3}
WORKER_SOCK=$RUN/worker/docker.sock
REG_PIDFILE=$RUN/registry.pid

log() { echo "swarm: $*" >&2; }

# The worker: testbed.sh's daemon with its own everything.
worker() {
  H9_TESTBED_SSH=0 H9_TESTBED_ROOT=$ROOT/worker H9_TESTBED_RUN=$RUN/worker H9_TESTBED_PORT=23761 \
    H9_TESTBED_ADDR=$WORKER_ADDR H9_TESTBED_BRIDGE=h9sw0 H9_TESTBED_BRIDGE_IP=172.31.251.1/24 \
    bash scripts/testbed.sh "$@"
}

wdocker() { docker -H "unix://$WORKER_SOCK" "$@"; }

print_env() {
  echo "export H9TEST_SWARM=1 H9TEST_SWARM_WORKER=unix://$WORKER_SOCK H9SANDBOX_REGISTRY=$REGISTRY"
}

state() { docker info --format '{{.Swarm.LocalNodeState}}' 2>/dev/null; }

registry_up() {
  if [ -f "$REG_PIDFILE" ] && kill -0 "$(cat "$REG_PIDFILE")" 2>/dev/null; then
    return 0
  fi
  if ! command -v docker-registry >/dev/null 2>&1; then
    log "installing docker-registry"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null
  fi
  mkdir -p "$ROOT/registry" "$RUN"
  cat >"$ROOT/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $ROOT/registry
  delete:
    enabled: true
http:
  addr: $REGISTRY
EOF
  log "starting docker-registry on $REGISTRY"
  setsid docker-registry serve "$ROOT/registry.yml" >"$ROOT/registry.log" 2>&1 </dev/null &
  echo $! >"$REG_PIDFILE"
  for _ in $(seq 30); do
    curl -sf "http://$REGISTRY/v2/" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  tail -5 "$ROOT/registry.log" >&2
  log "the registry did not answer on $REGISTRY"
  exit 1
}

up() {
  command -v curl >/dev/null 2>&1 || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null
  }
  registry_up
  worker up >/dev/null
  case "$(state)" in
    active) ;;
    inactive)
      # A worker still in a swarm of before (a `down` whose leave failed; seen after a run whose
      # node-death test failed) stays pending for ever and refuses to join this one.
      if [ "$(wdocker info --format '{{.Swarm.LocalNodeState}}')" != inactive ]; then
        log "the worker leaves the swarm it was in before"
        wdocker swarm leave --force >/dev/null
      fi
      log "making this machine's daemon a swarm manager (127.0.0.1:2377)"
      docker swarm init --advertise-addr 127.0.0.1 --listen-addr 127.0.0.1:2377 >/dev/null
      ;;
    *) log "this daemon's swarm state is $(state); run: bash scripts/swarm.sh down"; exit 1 ;;
  esac
  if [ "$(wdocker info --format '{{.Swarm.LocalNodeState}}')" != active ]; then
    log "joining the worker ($WORKER_ADDR)"
    token=$(docker swarm join-token -q worker)
    wdocker swarm join --token "$token" --advertise-addr "$WORKER_ADDR" \
      --listen-addr "$WORKER_ADDR:2377" 127.0.0.1:2377 >/dev/null
  fi
  for _ in $(seq 60); do
    ready=$(docker node ls --format '{{.Status}}' | grep -c Ready || true)
    [ "$ready" -ge 2 ] && break
    sleep 1
  done
  [ "$ready" -ge 2 ] || { docker node ls >&2; log "the worker did not become Ready"; exit 1; }
  docker node ls --format 'swarm: node {{.Hostname}} {{.Status}} {{.ManagerStatus}}' >&2
  print_env
}

down() {
  if [ "$(state)" = active ]; then
    svcs=$(docker service ls -q --filter label=h9sandbox 2>/dev/null || true)
    [ -n "$svcs" ] && { log "removing services $svcs"; docker service rm $svcs >/dev/null || true; }
    secrets=$(docker secret ls -q --filter label=h9sandbox 2>/dev/null || true)
    [ -n "$secrets" ] && { docker secret rm $secrets >/dev/null 2>&1 || true; }
  fi
  if [ -S "$WORKER_SOCK" ] && [ "$(wdocker info --format '{{.Swarm.LocalNodeState}}' 2>/dev/null)" != inactive ]; then
    log "the worker leaves the swarm"
    wdocker swarm leave --force >/dev/null 2>&1 || true
  fi
  if [ "$(state)" != inactive ]; then
    log "this machine's daemon leaves the swarm"
    docker swarm leave --force >/dev/null
  fi
  worker down
  if [ -f "$REG_PIDFILE" ]; then
    pid=$(cat "$REG_PIDFILE")
    if kill -0 "$pid" 2>/dev/null; then
      log "stopping docker-registry (pid $pid)"
      kill "$pid"
    fi
    rm -f "$REG_PIDFILE"
  fi
  [ "$(state)" = inactive ] || { log "this daemon is still in a swarm"; exit 1; }
  ip link show docker0 >/dev/null 2>&1 || { log "docker0 is gone"; exit 1; }
  log "down; this daemon is in no swarm, docker0 is still there"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) print_env ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
