#!/usr/bin/env bash
# `up` on engine swarm against the raw engine, on the bed of scripts/swarm.sh (run `up` first):
# the median of N runs of each, alternated, on the worker node (--constraint node.role==worker):
#
#   raw:  docker service create --detach (the same image, limits, reservations and published
#         port) and `docker service ps` polled every 50 ms until its task is Running
#   up:   h9sandbox up until it prints the ID (task running, channel connected, agent ready)
#   exec: h9sandbox exec -- true over the channel to that task (the median of 10 per run)
#
#   bash scripts/swarm-bench.sh [N] [BINARY]     (defaults: 5, target/release/h9sandbox)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5}
BIN=$(realpath "${2:-$(ls target/*/release/h9sandbox target/release/h9sandbox 2>/dev/null | head -1)}")
eval "$(bash scripts/swarm.sh env)"
work=$(mktemp -d)
state=$(mktemp -d)
trap 'rm -rf "$work" "$state"' EXIT
export H9SANDBOX_STATE_DIR=$state H9SANDBOX_ENGINE=swarm H9SANDBOX_IMAGE=h9sandbox-test/debian:bookworm
h9() { (cd "$work" && "$BIN" "$@"); }
now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Once: the derived image made and pushed (what every later `up` of this image reuses).
id=$(h9 up --constraint node.role==worker); h9 down "$id" >/dev/null
image=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep "^$H9SANDBOX_REGISTRY/h9sandbox-agent:" | grep -v '<none>' | head -1)

raw=() ups=() execs=()
for _ in $(seq "$N"); do
  t0=$(now)
  svc=$(docker service create --detach --quiet --restart-condition none --limit-cpu 1 \
    --reserve-cpu 1 --limit-memory 512m --reserve-memory 512m --limit-pids 256 \
    --publish mode=host,target=7336 --constraint node.role==worker --no-resolve-image \
    --label h9sandbox.bench=1 --stop-signal SIGKILL --entrypoint sleep "$image" 600)
  until docker service ps --format '{{.CurrentState}}' "$svc" | grep -q '^Running'; do sleep 0.05; done
  raw+=("$(echo "$(now) - $t0" | bc)")
  docker service rm "$svc" >/dev/null
  sleep 1 # the node's removal of the task done, as before every `up`
  t0=$(now)
  id=$(h9 up --constraint node.role==worker)
  ups+=("$(echo "$(now) - $t0" | bc)")
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    t0=$(now)
    h9 exec "$id" -- true
    execs+=("$(echo "$(now) - $t0" | bc)")
  done
  h9 down "$id" >/dev/null
  sleep 1
done
r=$(printf '%s\n' "${raw[@]}" | median)
u=$(printf '%s\n' "${ups[@]}" | median)
e=$(printf '%s\n' "${execs[@]}" | median)
printf 'raw service create until running: %.3f s (median of %d)\n' "$r" "$N"
printf 'h9sandbox up (swarm, worker):     %.3f s (%.2fx)\n' "$u" "$(echo "$u / $r" | bc -l)"
printf 'h9sandbox exec -- true (channel): %.1f ms\n' "$(echo "$e * 1000" | bc -l)"
