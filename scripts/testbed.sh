#!/usr/bin/env bash
# A second Docker daemon on this machine, for the remote-sandbox (and Swarm) tests: a daemon
# that is "not this machine's" as far as h9sandbox can tell (reached over TCP with TLS at
# 127.0.0.2, so every sandbox on it has its work dir copied and its agent reached over the
# remote channel), without a second machine.
#
#   bash scripts/testbed.sh up     start it (idempotent), load the test images, print its env
#   bash scripts/testbed.sh env    print the environment that points a client at it
#
# Where sshd is installed (Debian's openssh-server, never started as a service here), it also
# runs an sshd of its own on $ADDR:$H9_TESTBED_SSH_PORT (2222) whose sessions' docker client is
# pointed at this daemon (SetEnv DOCKER_HOST), so `DOCKER_HOST=ssh://root@127.0.0.2:2222` reaches
# it as `ssh://builder` would: root by key only, keys and known_hosts in $ROOT/ssh, an
# ssh_config there for the client (ssh -F), its PID in $RUN/sshd.pid.
#   bash scripts/testbed.sh down   stop it by its PID file, remove its bridge, check docker0
#
# It has its own data root, exec root, PID file, config file, containerd, unix socket
# (/run/h9-testbed/docker.sock) and TCP socket (tcp://127.0.0.2:$H9_TESTBED_PORT, TLS with a
# CA and certificates made here, client certificates required), and its own bridge, created
# first with `ip link add` (never `--bridge none`: at start that deletes the host daemon's
# docker0). It leaves the host's iptables alone (--iptables=false): its containers get no
# outbound NAT, and published ports are served by docker-proxy. Needs root.
set -euo pipefail

ROOT=${H9_TESTBED_ROOT:-/var/lib/h9-testbed}
RUN=${H9_TESTBED_RUN:-/run/h9-testbed}
PORT=${H9_TESTBED_PORT:-23760}
ADDR=${H9_TESTBED_ADDR:-127.0.0.2}
BRIDGE=${H9_TESTBED_BRIDGE:-h9tb0}
SUBNET_IP=${H9_TESTBED_BRIDGE_IP:-172.31.250.1/24}
SSH_PORT=${H9_TESTBED_SSH_PORT:-2222}
SSH_DIR=$ROOT/ssh
SSHD_PID=$RUN/sshd.pid
CERTS=$ROOT/certs
SOCK=$RUN/docker.sock
PIDFILE=$RUN/docker.pid
LOG=$ROOT/dockerd.log

log() { echo "testbed: $*" >&2; }

# 02:42:AA:BB:CC:DD for the address AA.BB.CC.DD/N (in hex), as Docker derives a container's
# MAC from its address: the gateway's own, which no container of the bridge gets.
bridge_mac() {
  local a b c d
  IFS=./ read -r a b c d _ <<<"$1"
  printf '02:42:%02x:%02x:%02x:%02x\n' "$a" "$b" "$c" "$d"
}

print_env() {
  echo "export DOCKER_HOST=tcp://$ADDR:$PORT DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=$CERTS/client"
}

running() {
  [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

make_certs() {
  [ -f "$CERTS/client/key.pem" ] && return 0
  log "making TLS certificates in $CERTS"
  mkdir -p "$CERTS/client"
  chmod 700 "$CERTS"
  (
    cd "$CERTS"
    openssl genrsa -out ca-key.pem 2048 2>/dev/null
    openssl req -new -x509 -days 365 -key ca-key.pem -sha256 -subj "/CN=h9-testbed CA" -out ca.pem
    openssl genrsa -out server-key.pem 2048 2>/dev/null
    openssl req -new -key server-key.pem -subj "/CN=$ADDR" -out server.csr
    printf 'subjectAltName = IP:%s,IP:127.0.0.1,DNS:localhost\nextendedKeyUsage = serverAuth\n' "$ADDR" >server.ext
    openssl x509 -req -days 365 -sha256 -in server.csr -CA ca.pem -CAkey ca-key.pem \
      -CAcreateserial -out server-cert.pem -extfile server.ext 2>/dev/null
    openssl genrsa -out client/key.pem 2048 2>/dev/null
    openssl req -new -key client/key.pem -subj "/CN=h9-testbed client" -out client.csr
    printf 'extendedKeyUsage = clientAuth\n' >client.ext
    openssl x509 -req -days 365 -sha256 -in client.csr -CA ca.pem -CAkey ca-key.pem \
      -CAcreateserial -out client/cert.pem -extfile client.ext 2>/dev/null
    cp ca.pem client/ca.pem
    rm -f server.csr client.csr server.ext client.ext
    chmod 600 ca-key.pem server-key.pem client/key.pem
  )
}

# The sshd of the testbed (see the header), when sshd is installed; idempotent.
ssh_up() {
  [ "${H9_TESTBED_SSH:-1}" = 1 ] || return 0
  [ -x /usr/sbin/sshd ] || { log "no sshd here (openssh-server): ssh:// is not served"; return 0; }
  if [ -f "$SSHD_PID" ] && kill -0 "$(cat "$SSHD_PID")" 2>/dev/null; then
    return 0
  fi
  mkdir -p "$SSH_DIR" /run/sshd
  chmod 700 "$SSH_DIR"
  [ -f "$SSH_DIR/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$SSH_DIR/host_key"
  [ -f "$SSH_DIR/client_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$SSH_DIR/client_key"
  cp "$SSH_DIR/client_key.pub" "$SSH_DIR/authorized_keys"
  echo "[$ADDR]:$SSH_PORT $(cut -d' ' -f1,2 "$SSH_DIR/host_key.pub")" >"$SSH_DIR/known_hosts"
  cat >"$SSH_DIR/sshd_config" <<CONF
ListenAddress $ADDR:$SSH_PORT
HostKey $SSH_DIR/host_key
PidFile $SSHD_PID
AuthorizedKeysFile $SSH_DIR/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
SetEnv DOCKER_HOST=unix://$SOCK
CONF
  cat >"$SSH_DIR/ssh_config" <<CONF
Host *
  IdentityFile $SSH_DIR/client_key
  UserKnownHostsFile $SSH_DIR/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
CONF
  /usr/sbin/sshd -f "$SSH_DIR/sshd_config" -E "$ROOT/sshd.log"
  for _ in $(seq 50); do [ -f "$SSHD_PID" ] && break; sleep 0.1; done
  log "sshd at ssh://root@$ADDR:$SSH_PORT (client: ssh -F $SSH_DIR/ssh_config)"
}

ssh_down() {
  if [ -f "$SSHD_PID" ] && kill -0 "$(cat "$SSHD_PID")" 2>/dev/null; then
    log "stopping sshd (pid $(cat "$SSHD_PID"))"
    kill "$(cat "$SSHD_PID")"
  fi
  rm -f "$SSHD_PID"
}

need_tools() {
  local need=()
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
}

up() {
  need_tools
  if running; then
    log "already running (pid $(cat "$PIDFILE"))"
  else
    ip link show docker0 >/dev/null 2>&1 || log "warning: the host has no docker0 before the testbed starts"
    mkdir -p "$ROOT/data" "$RUN/exec"
    make_certs
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
      ip link add "$BRIDGE" type bridge
      ip addr add "$SUBNET_IP" dev "$BRIDGE"
    fi
    # A MAC address of its own, as Docker gives the bridges it makes (docker0): a bridge made
    # by `ip link add` takes the lowest MAC of its ports, which changes as containers come and
    # go, and a container whose ARP entry of its gateway is older sends its packets to this
    # machine into the void until the host happens to send it something (an exec waiting for
    # a command's end never got it; a TLS handshake did not finish within 10 s).
    ip link set "$BRIDGE" address "$(bridge_mac "$SUBNET_IP")"
    ip link set "$BRIDGE" up
    # The host daemon's storage driver works on this machine; the same one here.
    driver=$(docker info --format '{{.Driver}}' 2>/dev/null || echo overlay2)
    cat >"$ROOT/daemon.json" <<EOF
{
  "data-root": "$ROOT/data",
  "exec-root": "$RUN/exec",
  "pidfile": "$PIDFILE",
  "hosts": ["unix://$SOCK", "tcp://$ADDR:$PORT"],
  "tls": true,
  "tlsverify": true,
  "tlscacert": "$CERTS/ca.pem",
  "tlscert": "$CERTS/server-cert.pem",
  "tlskey": "$CERTS/server-key.pem",
  "bridge": "$BRIDGE",
  "iptables": false,
  "ip-masq": false,
  "storage-driver": "$driver",
  "log-level": "warn"
}
EOF
    log "starting dockerd (config $ROOT/daemon.json, log $LOG)"
    # setsid: the daemon outlives this script and its caller's terminal.
    setsid dockerd --config-file "$ROOT/daemon.json" >"$LOG" 2>&1 </dev/null &
    for _ in $(seq 60); do
      docker -H "unix://$SOCK" info >/dev/null 2>&1 && break
      sleep 1
    done
    docker -H "unix://$SOCK" info >/dev/null 2>&1 || {
      tail -20 "$LOG" >&2
      log "dockerd did not come up"
      exit 1
    }
  fi
  ip link show docker0 >/dev/null 2>&1 || { log "docker0 is gone"; exit 1; }
  # The test images, from the host daemon (no registry), unless the same image is there.
  for img in h9sandbox-test/tiny:latest h9sandbox-test/nobash:latest h9sandbox-test/debian:bookworm; do
    want=$(docker image inspect --format '{{.Id}}' "$img" 2>/dev/null) || continue
    have=$(docker -H "unix://$SOCK" image inspect --format '{{.Id}}' "$img" 2>/dev/null || true)
    if [ "$have" != "$want" ]; then
      log "loading $img"
      docker save "$img" | docker -H "unix://$SOCK" load -q >/dev/null
    fi
  done
  ssh_up
  # Reached as a client would: TCP with TLS.
  eval "$(print_env)"
  docker version --format 'testbed: server {{.Server.Version}} at '"$DOCKER_HOST" >&2
  print_env
}

down() {
  ssh_down
  if running; then
    pid=$(cat "$PIDFILE")
    log "stopping dockerd (pid $pid)"
    # Its containers first (they have no restart policy; removing them frees the bridge).
    ids=$(docker -H "unix://$SOCK" ps -aq 2>/dev/null || true)
    [ -n "$ids" ] && docker -H "unix://$SOCK" rm -f $ids >/dev/null 2>&1 || true
    kill "$pid"
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && { log "dockerd $pid did not stop; killing it"; kill -9 "$pid"; }
  fi
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link set "$BRIDGE" down || true
    ip link del "$BRIDGE"
  fi
  ip link show docker0 >/dev/null 2>&1 || { log "docker0 is gone"; exit 1; }
  log "stopped; docker0 is still there"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) print_env ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
