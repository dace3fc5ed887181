#!/usr/bin/env bash
# The main job, end to end: build h9sandbox, then run the README's Quick start block as written
# (start a sandbox on this repository, run commands in it, list it, tear it down), saying before
# each line what it does. The binary is the one cargo reports (`cargo build --message-format=json`:
# CARGO_TARGET_DIR and the target of .cargo/config.toml are honoured), put first on PATH.
# PROFILE=debug builds (or reuses) the debug binary instead of the release one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -t 2 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
say() { printf '%sdemo:%s %s\n' "$bold" "$plain" "$*" >&2; }

profile=${PROFILE:-release}   # PROFILE=debug reuses the test build
say "building h9sandbox (cargo build, $profile profile; the first build takes a few minutes)"
h9=$(python3 scripts/built_binary.py "$profile")
say "built $h9"
PATH="$(dirname "$h9"):$PATH"
export PATH

# The block after the `<!-- quick-start` marker of README.md, up to its closing fence.
block=$(awk '/^<!-- quick-start/ {m=1; next} m && /^```sh$/ {f=1; next} f && /^```$/ {exit} f' README.md)
if [ -z "$block" ]; then
  say "README.md has no quick-start block"; exit 1
fi
script=''
while IFS= read -r line; do
  what=${line##*  # }                 # the comment after two spaces: what the line does
  cmd=${line%%  # *}
  cmd=${cmd%"${cmd##*[![:space:]]}"}
  printf -v quoted_what '%q' "$what"
  printf -v quoted_cmd '%q' "$cmd"
  script+="say $quoted_what; printf '  \$ %s\\n' $quoted_cmd >&2; $cmd"$'\n'
done <<<"$block"
eval "$script"
say "done"
