#!/usr/bin/env bash
# Builds the release binary and the test images, then runs scripts/bench.py (ratios vs raw docker).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q
SKIP_DEBIAN=1 bash scripts/build-test-images.sh
exec python3 scripts/bench.py "$@"
