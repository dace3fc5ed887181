#!/bin/bash
# The reference solution: relative paths, so it relies on the image's WORKDIR.
set -euo pipefail
wc -l < input.txt > answer.txt
printf '%s\n' "$GREETING" > greeting.txt
