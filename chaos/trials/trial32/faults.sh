#!/bin/bash
# faults.sh KIND: two hosts (`simba run -ttl 2s`, each through its own proxy) on a private KIND
# server (postgres, mariadb, redis, zookeeper) started by faultsrv. Phases: blackhole the
# leader's link; kill the server with the other host leading and start it again 3 s later;
# a `simba lock` and a `simba status` started while the server is down. Prints what simba
# printed and exited with, and the times from each fault; then the ledger check.
set -u
kind=$1
S=${SIMBA:-/tmp/simba32}
here=$(cd "$(dirname "$0")" && pwd)
d=/tmp/t32/faults-$kind
rm -rf "$d" && mkdir -p "$d"
mkfifo "$d/ctl"
/tmp/t32/faultsrv -kind "$kind" -root "$d/srv" -proxies 3 -dsns "$d/dsns" -ctl "$d/ctl" -log "$d/faults.log" 2>"$d/faultsrv.err" &
fs=$!
for ((i = 0; i < 600; i++)); do [ -s "$d/dsns" ] && break; sleep 0.1; done
mapfile -t dsn <"$d/dsns"
ctl() { echo "$*" >"$d/ctl"; sleep 0.05; }
now() { date +%s.%N; }
ts() { awk -v e="$1" '$1==e{print $NF}' "$d/ledger" | head -1; }
case $kind in postgres | mariadb) $S migrate -dsn "${dsn[0]}" >"$d/migrate.out" 2>&1 ;; esac
name=t32-f-$kind
host() { # i: host i runs the long job through proxy i (simba's pid in $d/pid.i; stderr in $d/err.i)
	"$S" run -dsn "${dsn[$1]}" -name "$name" -ttl 2s -- "$here/job.sh" "host$1" "$d/ledger" 40 2>>"$d/err.$1" &
	echo $! >"$d/pid.$1"
	wait $!
	echo "host$1 rc=$? at $(now)" >>"$d/exits"
	echo "-- exited" >>"$d/err.$1"
}
: >"$d/ledger"
host 0 & sleep 1.5
host 1 & sleep 2
leader=$(awk '$1=="start"{h=$3} END{print substr(h,5)}' "$d/ledger")
other=$((1 - leader))
# 1. blackhole the leader's link
t=$(now); ctl cut "$leader"; sleep 6; ctl heal "$leader"; sleep 0.5
echo "[$kind] blackhole host$leader's link at $t:"
awk -v t="$t" '$1=="term"||$1=="start"{ if ($5>t) printf "  %s %s token %s at +%.2fs\n", $3, $1, $4, $5-t }' "$d/ledger"
echo "  host$leader: $(grep "host$leader rc" "$d/exits"); stderr: $(tr '\n' ' ' <"$d/err.$leader" | cut -c1-400)"
# 2. kill the server with host$other leading; host$leader waits again; start it 3 s later
host "$leader" & sleep 1
t=$(now); ctl kill; sleep 3; ctl start; ts2=$(now); sleep 6
echo "[$kind] kill server at $t (host$other leading), started again at +$(awk -v a="$t" -v b="$ts2" 'BEGIN{printf "%.2f", b-a}')s:"
awk -v t="$t" '$1=="term"||$1=="start"{ if ($5>t) printf "  %s %s token %s at +%.2fs\n", $3, $1, $4, $5-t }' "$d/ledger"
echo "  exits: $(awk -v t="$t" '{split($3,a,"="); print}' "$d/exits" | tr '\n' ' ')"
echo "  host$other stderr: $(tr '\n' ' ' <"$d/err.$other" | cut -c1-600)"
echo "  host$leader stderr: $(tr '\n' ' ' <"$d/err.$leader" | cut -c1-900)"
# 3. server down: a lock (waits?) and a status (exit code?)
ctl kill
t=$(now); "$S" status -dsn "${dsn[2]}" -name "$name" >"$d/status.down" 2>&1; echo "[$kind] status while down: rc=$? in $(awk -v a="$t" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}')s: $(head -c 300 "$d/status.down" | tr '\n' ' ')"
"$S" lock -dsn "${dsn[2]}" -name "$name-lock" -ttl 2s -- sh -c 'echo token=$SIMBA_TOKEN' >"$d/lock.out" 2>"$d/lock.err" &
lp=$!; sleep 4; ctl start; t=$(now); wait $lp
echo "[$kind] lock started while down, server up after 4 s: rc=$? $(awk -v a="$t" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}')s after start; out: $(cat "$d/lock.out"); stderr lines: $(wc -l <"$d/lock.err"): $(head -c 300 "$d/lock.err" | tr '\n' ' ')"
"$S" status -dsn "${dsn[2]}" -name "$name" >"$d/status.up" 2>&1; echo "[$kind] status: $(tr '\n' '|' <"$d/status.up")"
# stop the hosts (SIGTERM to simba, as a supervisor would)
for i in 0 1; do kill -TERM "$(cat "$d/pid.$i")" 2>/dev/null; done
sleep 2; ctl quit; wait

"$here/check.sh" "$d/ledger"
