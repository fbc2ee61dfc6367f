#!/usr/bin/env bash
# A 3-server ZooKeeper ensemble on localhost to try Simba on by hand (make zk-ensemble),
# separate from the single server on 2181; make services starts it too. No test uses it and CI
# does not start it: the ensemble failover test (backend/zookeeper TestEnsembleLeaderFailover)
# and the chaos harness start private ensembles on spare ports with the same settings.
#
#   .ci/zk-ensemble.sh start            start every server that is not running (idempotent) and
#                                       wait until the ensemble has a leader and two followers
#   .ci/zk-ensemble.sh stop             stop every server
#   .ci/zk-ensemble.sh status           print each server's mode
#   .ci/zk-ensemble.sh leader           print the number (1-3) of the current leader
#   .ci/zk-ensemble.sh stop-server N    stop server N (1-3)
#   .ci/zk-ensemble.sh start-server N   start server N
#
# Client ports 2191-2193, quorum ports 2891-2893, election ports 3891-3893; tickTime 200 ms
# (session timeouts 400 ms to 60 s, as .ci/zoo.cfg). Data and logs live under
# $SIMBA_SERVICES_DIR/zk-ensemble (default /tmp/simba-services/zk-ensemble), wiped on start
# when no server runs. Its DSN: zk://127.0.0.1:2191,127.0.0.1:2192,127.0.0.1:2193/chroot.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
state=${SIMBA_SERVICES_DIR:-/tmp/simba-services}/zk-ensemble
zkserver=${ZKSERVER:-/usr/share/zookeeper/bin/zkServer.sh}
servers=(1 2 3)

log() { printf '[zk-ensemble] %s\n' "$*" >&2; }
client_port() { echo $((2190 + $1)); }

four() { # port command: send a four-letter command, print the reply
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1; printf %s '$2' >&3; cat <&3" 2>/dev/null || true
}
mode() { four "$(client_port "$1")" srvr | sed -n 's/^Mode: //p'; }
running() { # n: the pid file names a live process started with this server's zoo.cfg. A bare
  # kill -0 is not enough: after a reboot the pid of a server that is gone may be another
  # process's, and zkServer.sh would then refuse to start ("already running").
  local pid="$state/$1/zk.pid"
  [ -f "$pid" ] && tr '\0' ' ' <"/proc/$(cat "$pid")/cmdline" 2>/dev/null | grep -qF "$state/$1/zoo.cfg"
}

configure() { # n
  local d="$state/$1"
  mkdir -p "$d/data" "$d/logs"
  echo "$1" > "$d/data/myid"
  cat > "$d/zoo.cfg" <<EOF
tickTime=200
initLimit=10
syncLimit=5
minSessionTimeout=400
maxSessionTimeout=60000
dataDir=$d/data
clientPort=$(client_port "$1")
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat,mntr
server.1=127.0.0.1:2891:3891
server.2=127.0.0.1:2892:3892
server.3=127.0.0.1:2893:3893
EOF
}

start_server() { # n
  if running "$1"; then return 0; fi
  [ -f "$state/$1/zoo.cfg" ] || configure "$1"
  log "starting server $1 on port $(client_port "$1")"
  rm -f "$state/$1/zk.pid" # stale: running said so
  # A log file per server (zk-jvmflags.sh), and a stdout file per server (USER, see services.sh).
  USER="simba-ensemble-$1" ZOOPIDFILE="$state/$1/zk.pid" \
    JVMFLAGS="$("$here/zk-jvmflags.sh" "$state/$1/logs/zookeeper.log")" \
    "$zkserver" start "$state/$1/zoo.cfg" >/dev/null
}

stop_server() { # n
  if ! running "$1"; then return 0; fi
  log "stopping server $1"
  local pid
  pid=$(cat "$state/$1/zk.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$state/$1/zk.pid"
}

wait_quorum() {
  for _ in $(seq 1 300); do
    local modes=""
    for n in "${servers[@]}"; do modes="$modes $(mode "$n")"; done
    case "$modes" in
      *leader*follower*follower* | *follower*leader*follower* | *follower*follower*leader*) return 0 ;;
    esac
    sleep 0.2
  done
  log "the ensemble did not form:"; status; return 1
}

status() {
  for n in "${servers[@]}"; do
    printf 'server %s (port %s): %s\n' "$n" "$(client_port "$n")" "$(mode "$n" | tr -d '\n' || true)"
  done
}

case "${1:-}" in
  start)
    [ -x "$zkserver" ] || { log "$zkserver not found (Debian package zookeeperd)"; exit 1; }
    any=0
    for n in "${servers[@]}"; do running "$n" && any=1; done
    if [ "$any" = 0 ]; then rm -rf "$state"; fi
    for n in "${servers[@]}"; do start_server "$n"; done
    wait_quorum
    log "ensemble up: $(status | tr '\n' ';')"
    ;;
  stop)
    for n in "${servers[@]}"; do stop_server "$n"; done
    ;;
  status)
    status
    ;;
  leader)
    for n in "${servers[@]}"; do
      if [ "$(mode "$n")" = leader ]; then echo "$n"; exit 0; fi
    done
    log "no leader"; exit 1
    ;;
  stop-server)
    stop_server "${2:?server number}"
    ;;
  start-server)
    start_server "${2:?server number}"
    ;;
  *)
    echo "usage: $0 start|stop|status|leader|stop-server N|start-server N" >&2
    exit 2
    ;;
esac
