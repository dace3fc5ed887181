#!/usr/bin/env bash
# The main job, end to end: build h9sandbox, start a sandbox on this repository, run commands in
# it, list it, tear it down. Uses IMAGE (default ubuntu:22.04; on a machine without a registry,
# scripts/build-test-images.sh builds h9sandbox-test/debian:bookworm and this script uses it).
set -euo pipefail
cd "$(dirname "$0")/.."
h9=$(python3 scripts/built_binary.py)
image=${IMAGE:-ubuntu:22.04}
if ! docker image inspect "$image" >/dev/null 2>&1 && ! docker pull -q "$image" >/dev/null 2>&1; then
  bash scripts/build-test-images.sh
  image=h9sandbox-test/debian:bookworm
fi
set -x
id=$($h9 up --image "$image" --workdir . --memory 256m)
$h9 exec "$id" -- 'cat /etc/os-release | head -n 2; ls | head -n 5'
$h9 exec "$id" --format json -- 'id -u; grep -E "CapEff|NoNewPrivs" /proc/self/status'
$h9 exec "$id" --timeout 1 -- 'sleep 60' || echo "exit status $? (124 = timed out, tree killed)"
$h9 ls
$h9 down "$id"
