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
#
# With `concurrent`, N sandboxes (40) up at once over both nodes against N raw service creations
# at once, each batch timed until every task runs (raw: Running in one `docker service ps`; up:
# every `h9sandbox up` returned its ID), then removed; alternated, RUNS times (3), medians:
#
#   bash scripts/swarm-bench.sh concurrent [N] [RUNS] [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=serial
if [ "${1:-}" = concurrent ]; then
  MODE=concurrent
  shift
  RUNS=${2:-3}
  set -- "${1:-40}" "${3:-}"
fi
N=${1:-5}
BIN=$(realpath "${2:-$(ls target/*/release/h9sandbox target/release/h9sandbox 2>/dev/null | head -1)}")
eval "$(bash scripts/swarm.sh env)"
work=$(mktemp -d)
state=$(mktemp -d)
trap 'rm -rf "$work" "$state"' EXIT
export H9SANDBOX_STATE_DIR=$state H9SANDBOX_ENGINE=swarm H9SANDBOX_IMAGE=h9sandbox-test/debian:bookworm
h9() { (cd "$work" && "$BIN" "$@"); }
now() { date +%s.%N; }
wdocker() { docker -H "$H9TEST_SWARM_WORKER" "$@"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Once: the derived image made and pushed (what every later `up` of this image reuses).
id=$(h9 up --constraint node.role==worker); h9 down "$id" >/dev/null
image=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep "^$H9SANDBOX_REGISTRY/h9sandbox-agent:" | grep -v '<none>' | head -1)

if [ "$MODE" = concurrent ]; then
  # Small enough that N fit on two nodes of this machine (reserved: N x 0.05 CPU, N x 64 MiB).
  limits=(--limit-cpu 0.05 --reserve-cpu 0.05 --limit-memory 64m --reserve-memory 64m --limit-pids 256)
  raw=() ups=()
  for _ in $(seq "$RUNS"); do
    t0=$(now)
    for i in $(seq "$N"); do
      # A task whose daemon failed to start its container is made once more, as `up` does (two
      # daemons of one machine pick host ports of their own, and one can take another's).
      docker service create --detach --quiet --name "h9bench-$$-$i" --restart-condition on-failure \
        --restart-max-attempts 1 --restart-delay 0s \
        "${limits[@]}" --publish mode=host,target=7336 --no-resolve-image \
        --label h9sandbox.bench=1 --container-label h9sandbox.bench=1 \
        --stop-signal SIGKILL --entrypoint sleep "$image" 600 >"$work/raw.$i" &
    done
    wait
    svcs=$(cat "$work"/raw.*)
    [ "$(echo "$svcs" | grep -c .)" -eq "$N" ] || { echo "not every service create printed an ID" >&2; exit 1; }
    # shellcheck disable=SC2086
    deadline=$(( $(date +%s) + 120 ))
    until [ "$(docker service ps --format '{{.CurrentState}}' $svcs | grep -c '^Running')" -ge "$N" ]; do
      if [ "$(date +%s)" -gt "$deadline" ]; then
        echo "not all $N raw tasks ran within 120 s:" >&2
        docker service ps --no-trunc --format '{{.Name}} {{.CurrentState}} {{.Error}}' $svcs | grep -v Running >&2
        # shellcheck disable=SC2086
        docker service rm $svcs >/dev/null
        exit 1
      fi
      sleep 0.1
    done
    raw+=("$(echo "$(now) - $t0" | bc)")
    on_worker=$(wdocker ps -q --filter label=h9sandbox.bench=1 2>/dev/null | wc -l || true)
    # shellcheck disable=SC2086
    docker service rm $svcs >/dev/null
    rm -f "$work"/raw.*
    sleep 5 # the nodes' removal of the tasks done, as before the other batch
    t0=$(now)
    for i in $(seq "$N"); do
      h9 up --cpus 0.05 --memory 64m >"$work/up.$i" &
    done
    wait
    ups+=("$(echo "$(now) - $t0" | bc)")
    ids=$(cat "$work"/up.*)
    [ "$(echo "$ids" | grep -c .)" -eq "$N" ] || { echo "not every up printed an ID" >&2; exit 1; }
    ours_on_worker=$(wdocker ps -q --filter "label=h9sandbox.state_dir=$state" | wc -l)
    # shellcheck disable=SC2086
    h9 down $ids >/dev/null
    rm -f "$work"/up.*
    echo "run: raw ${raw[-1]} s ($on_worker of $N on the worker), up ${ups[-1]} s ($ours_on_worker on the worker)" >&2
    sleep 5
  done
  r=$(printf '%s\n' "${raw[@]}" | median)
  u=$(printf '%s\n' "${ups[@]}" | median)
  printf '%d raw service creates at once until all run: %.2f s (median of %d)\n' "$N" "$r" "$RUNS"
  printf '%d h9sandbox up at once (swarm, 2 nodes):      %.2f s (%.2fx)\n' "$N" "$u" "$(echo "$u / $r" | bc -l)"
  exit 0
fi

raw=() ups=() execs=()
for _ in $(seq "$N"); do
  t0=$(now)
  svc=$(docker service create --detach --quiet --restart-condition none --limit-cpu 1 \
    --reserve-cpu 1 --limit-memory 512m --reserve-memory 512m --limit-pids 256 \
    --publish mode=host,target=7336 --constraint node.role==worker --no-resolve-image \
    --label h9sandbox.bench=1 --stop-signal SIGKILL --entrypoint sleep "$image" 600)
  deadline=$(( $(date +%s) + 60 ))
  until docker service ps --format '{{.CurrentState}}' "$svc" | grep -q '^Running'; do
    [ "$(date +%s)" -le "$deadline" ] || { echo "the raw task did not run within 60 s" >&2; docker service rm "$svc" >/dev/null; exit 1; }
    sleep 0.05
  done
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
