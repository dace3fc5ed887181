#!/usr/bin/env bash
# Builds the container images the integration tests and benchmarks use, locally, with no registry:
#   h9sandbox-test/tiny:latest     FROM scratch + Debian's busybox-static and bash-static (seconds)
#   h9sandbox-test/nobash:latest   the same without bash (tests the `sh -c` fallback)
#   h9sandbox-test/debian:bookworm debootstrap --variant=minbase bookworm, imported (about 40 s)
#   h9sandbox-test/python:bookworm the Debian image with Debian's python3, python3-pip and
#                                  python-is-python3 (`python`), built with apt-get from Debian's
#                                  mirror (about 40 s; for the Deep Agents backend, whose file
#                                  helpers run python3, and the devcontainer tests); rebuilt when
#                                  its label h9sandbox-test.revision is not the one below
# Images already present are kept; set REBUILD=1 to build them again.
# Needs root (apt-get, debootstrap) on a Debian-like host and a Docker Engine that answers.
set -euo pipefail

ENGINE=${ENGINE:-docker}
REBUILD=${REBUILD:-0}
SKIP_DEBIAN=${SKIP_DEBIAN:-0}

have_image() { [ "$REBUILD" != 1 ] && "$ENGINE" image inspect "$1" >/dev/null 2>&1; }

need_pkgs=()
for p in busybox-static bash-static debootstrap; do
  dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "build-test-images: installing ${need_pkgs[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

build_tiny() { # $1 = tag, $2 = with bash (1/0)
  local tag=$1 with_bash=$2 ctx
  ctx=$(mktemp -d)
  mkdir -p "$ctx/root/bin" "$ctx/root/etc" "$ctx/root/tmp" "$ctx/root/root"
  cp /bin/busybox "$ctx/root/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$ctx/root/bin/$applet"
  done
  if [ "$with_bash" = 1 ]; then
    cp /bin/bash-static "$ctx/root/bin/bash"
  else
    rm -f "$ctx/root/bin/bash"
  fi
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$ctx/root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$ctx/root/etc/group"
  printf 'FROM scratch\nCOPY root/ /\nENV PATH=/bin\nCMD ["/bin/sh"]\n' >"$ctx/Dockerfile"
  if ! "$ENGINE" build -q -t "$tag" "$ctx" >"$ctx.log" 2>&1; then
    cat "$ctx.log" >&2; exit 1
  fi
  rm -f "$ctx.log"
  rm -rf "$ctx"
  echo "build-test-images: built $tag" >&2
}

have_image h9sandbox-test/tiny:latest || build_tiny h9sandbox-test/tiny:latest 1
have_image h9sandbox-test/nobash:latest || build_tiny h9sandbox-test/nobash:latest 0

if [ "$SKIP_DEBIAN" != 1 ] && ! have_image h9sandbox-test/debian:bookworm; then
  dir=$(mktemp -d)
  echo "build-test-images: debootstrap bookworm (about 40 s)" >&2
  debootstrap --variant=minbase bookworm "$dir" >/dev/null
  tar -C "$dir" -c . | "$ENGINE" import - h9sandbox-test/debian:bookworm >/dev/null
  rm -rf "$dir"
  echo "build-test-images: built h9sandbox-test/debian:bookworm" >&2
fi

PYTHON_REVISION=2
python_current() {
  have_image h9sandbox-test/python:bookworm && [ "$("$ENGINE" image inspect --format \
    '{{index .Config.Labels "h9sandbox-test.revision"}}' h9sandbox-test/python:bookworm)" = "$PYTHON_REVISION" ]
}
if [ "$SKIP_DEBIAN" != 1 ] && ! python_current; then
  ctx=$(mktemp -d)
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM h9sandbox-test/debian:bookworm
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
      python3 python3-pip python-is-python3 >/dev/null \\
 && rm -rf /var/lib/apt/lists/*
LABEL h9sandbox-test.revision=$PYTHON_REVISION
DOCKERFILE
  echo "build-test-images: h9sandbox-test/python:bookworm (apt-get install python3, about 40 s)" >&2
  if ! "$ENGINE" build -q -t h9sandbox-test/python:bookworm "$ctx" >"$ctx.log" 2>&1; then
    cat "$ctx.log" >&2; exit 1
  fi
  rm -rf "$ctx" "$ctx.log"
  echo "build-test-images: built h9sandbox-test/python:bookworm" >&2
fi
