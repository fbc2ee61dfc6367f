#!/usr/bin/env bash
# Starts, idempotently, every server Simba's tests need: PostgreSQL, MariaDB, Redis, a Redis
# Cluster (3 masters with a replica each on 7001-7006), ZooKeeper (our own zoo.cfg with a
# short tickTime on 2181), etcd 3.4 on 2379 and a current etcd (v3.7.3) on 2479, and installs
# Chromium for the status page test. What already answers is left alone; what is missing is
# installed from Debian's packages, but for etcd v3.7.3, built from the Go module proxy (see
# .ci/etcd37). Used by .ci/run and `make services`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
state=${SIMBA_SERVICES_DIR:-/tmp/simba-services}
mkdir -p "$state"

log() { printf '[services] %s\n' "$*"; }
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { # port what
  for _ in $(seq 1 150); do up "$1" && return 0; sleep 0.2; done
  log "$2 did not come up on port $1"; return 1
}
apt_updated=
need_pkg() { # command package...
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ -z "$apt_updated" ]; then apt-get update -qq; apt_updated=1; fi
  shift
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# PostgreSQL
if ! up 5432; then
  need_pkg pg_ctlcluster postgresql
  ver=$(ls /etc/postgresql | sort -n | tail -1)
  log "starting PostgreSQL $ver"
  pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
  wait_port 5432 PostgreSQL
fi
pg() { if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1; then su postgres -c "psql -qtA -h 127.0.0.1 -c \"$1\""; else psql -qtA -h 127.0.0.1 -U postgres -c "$1"; fi; }
if [ "$(pg "select 1 from pg_database where datname='test'" 2>/dev/null)" != 1 ]; then
  log "creating PostgreSQL database test"; pg "create database test"
fi
pg "do \$\$ begin if not exists (select from pg_roles where rolname='root') then create role root superuser login; end if; end \$\$" >/dev/null 2>&1 || true

# MariaDB
if ! up 3306; then
  need_pkg mariadbd mariadb-server
  log "starting MariaDB"
  mkdir -p /run/mysqld; chown mysql /run/mysqld 2>/dev/null || true
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_port 3306 MariaDB
fi
for _ in $(seq 1 50); do mariadb -uroot -h127.0.0.1 -e 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
mariadb -uroot -h127.0.0.1 -e 'CREATE DATABASE IF NOT EXISTS test'

# Redis
need_pkg redis-server redis-server
if ! up 6379; then
  log "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_port 6379 Redis
fi

# Redis Cluster: 3 masters (7001-7003) with a replica each (7004-7006).
cluster_ok() { redis-cli -p 7001 cluster info 2>/dev/null | grep -q 'cluster_state:ok'; }
if ! cluster_ok; then
  log "starting Redis Cluster on 7001-7006"
  for p in 7001 7002 7003 7004 7005 7006; do
    if ! up $p; then
      d="$state/redis-cluster/$p"; rm -rf "$d"; mkdir -p "$d"
      redis-server --daemonize yes --port $p --bind 127.0.0.1 --cluster-enabled yes \
        --cluster-config-file "$d/nodes.conf" --cluster-node-timeout 2000 --save "" --appendonly no \
        --dir "$d" --logfile "$d/redis.log"
    fi
  done
  for p in 7001 7002 7003 7004 7005 7006; do wait_port $p "Redis Cluster node"; done
  if ! redis-cli -p 7001 cluster info | grep -q 'cluster_known_nodes:6'; then
    redis-cli --cluster create 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003 \
      127.0.0.1:7004 127.0.0.1:7005 127.0.0.1:7006 --cluster-replicas 1 --cluster-yes >/dev/null
  fi
  for _ in $(seq 1 150); do cluster_ok && break; sleep 0.2; done
  cluster_ok || { log "Redis Cluster not ok"; redis-cli -p 7001 cluster info; exit 1; }
fi

# ZooKeeper with our zoo.cfg (short tickTime).
if ! up 2181; then
  need_pkg java default-jre-headless
  [ -x /usr/share/zookeeper/bin/zkServer.sh ] || need_pkg /usr/share/zookeeper/bin/zkServer.sh zookeeperd
  mkdir -p /tmp/simba-zookeeper/data "$state/zookeeper"
  zkpid="$state/zookeeper/zk.pid"
  # A server of ours that is still starting keeps its pid file; any other pid file is stale (a
  # reboot reuses pids) and would make zkServer.sh refuse to start ("already running").
  if [ -f "$zkpid" ] && tr '\0' ' ' <"/proc/$(cat "$zkpid")/cmdline" 2>/dev/null | grep -qF "$state/zookeeper/zoo.cfg"; then
    log "ZooKeeper is starting"
  else
    log "starting ZooKeeper"
    rm -f "$zkpid"
    cp "$here/zoo.cfg" "$state/zookeeper/zoo.cfg"
    # A log file of its own (zk-jvmflags.sh). USER names the file the JVM's own stdout/stderr
    # go to in /var/log/zookeeper (Debian's zkEnv.sh overrides ZOO_LOG_DIR), which the
    # ensemble's would truncate.
    USER=simba-2181 ZOOPIDFILE="$zkpid" JVMFLAGS="$("$here/zk-jvmflags.sh" "$state/zookeeper/zookeeper.log")" \
      /usr/share/zookeeper/bin/zkServer.sh start "$state/zookeeper/zoo.cfg" >/dev/null
  fi
  wait_port 2181 ZooKeeper
fi
for _ in $(seq 1 100); do
  [ "$(echo ruok | timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/2181; cat >&3; cat <&3' 2>/dev/null)" = imok ] && break
  sleep 0.2
done
# etcd's /health over plain HTTP (etcdctl is not in etcd-server's package; curl may be absent).
etcd_healthy() { # port
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1; printf 'GET /health HTTP/1.0\r\n\r\n' >&3; cat <&3" 2>/dev/null |
    grep -q '"health":"true"'
}
wait_etcd() { # port what
  for _ in $(seq 1 100); do etcd_healthy "$1" && return 0; sleep 0.2; done
  log "$2 on port $1 is not healthy"; return 1
}
start_etcd() { # binary name client-port peer-port dir
  mkdir -p "$5"
  nohup "$1" --name "$2" --data-dir "$5/data" \
    --listen-client-urls "http://127.0.0.1:$3" --advertise-client-urls "http://127.0.0.1:$3" \
    --listen-peer-urls "http://127.0.0.1:$4" --initial-advertise-peer-urls "http://127.0.0.1:$4" \
    --initial-cluster "$2=http://127.0.0.1:$4" >"$5/etcd.log" 2>&1 &
}
# etcd: one node on 2379 (Debian's etcd-server, 3.4), data under $state/etcd. The 3-member
# cluster of the leader-loss test is started by that test itself, on ports of its own.
if ! up 2379; then
  need_pkg etcd etcd-server
  log "starting etcd"
  start_etcd etcd simba-ci 2379 2380 "$state/etcd"
  wait_port 2379 etcd
fi
wait_etcd 2379 etcd
# A current etcd: v3.7.3 (the version bench/ embeds) on 2479 (peer 2480), data under
# $state/etcd37, for backend/etcd's tests, which run against both (3.5 and later answer some
# reads differently from 3.4). Debian has none this new: the binary is built from the Go module
# proxy, pinned by .ci/etcd37/go.mod and go.sum, and only when it is missing.
if ! up 2479; then
  if [ ! -x "$state/etcd37/etcd" ]; then
    log "building etcd v3.7.3 (.ci/etcd37) into $state/etcd37"
    mkdir -p "$state/etcd37"
    go -C "$here/etcd37" build -o "$state/etcd37/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$state/etcd37/etcd.tmp" "$state/etcd37/etcd"
  fi
  log "starting etcd v3.7.3"
  start_etcd "$state/etcd37/etcd" simba-ci-37 2479 2480 "$state/etcd37"
  wait_port 2479 "etcd v3.7.3"
fi
wait_etcd 2479 "etcd v3.7.3"
# Chromium (Debian's package), headless, for the status page test of observe/simbahttp.
need_pkg chromium chromium

log "all services up"
