#!/bin/bash
# signals.sh DSN TAG: the deploy-lock scenarios of one shell team. Each case prints one line:
# what was done, simba's exit status, and what happened to CMD (and what it started).
set -u
dsn=$1 tag=$2
S=${SIMBA:-/tmp/simba32}
d=${OUT:-/tmp/t32/sig-$tag}
rm -rf "$d" && mkdir -p "$d"
n=t32-deploy-$tag
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'; }
# alive PID: "alive" unless gone or a zombie (PID 1 here does not reap what is reparented to it)
alive() { case $(ps -o stat= -p "$1" 2>/dev/null) in "" | Z*) echo gone ;; *) echo alive ;; esac; }
waitfile() { for ((i = 0; i < 100; i++)); do [ -s "$1" ] && return 0; sleep 0.1; done; return 1; }
# an array, not a function: `lock ... &` must make $! simba itself, not a subshell around it
lock=("$S" lock -dsn "$dsn" -ttl 2s)

# 1. queueing: holder for 2 s, then 3 waiters started 0.3 s apart: order of their grants
: >"$d/order"
"${lock[@]}" -name $n -- sh -c 'sleep 2' &
sleep 0.5
for w in A B C; do "${lock[@]}" -name $n -- sh -c "echo $w >>$d/order; sleep 0.3" & sleep 0.3; done
wait
echo "queue: waiters started A,B,C 0.3 s apart got the lock in order $(tr '\n' ',' <"$d/order")"

# 2. SIGINT / SIGTERM while waiting
"${lock[@]}" -name $n -- sleep 3 &
h=$!; sleep 0.7
for sig in INT TERM; do
	"${lock[@]}" -name $n -- sh -c "echo ran >$d/ran.$sig" 2>"$d/err.wait.$sig" &
	p=$!; sleep 0.5; t=$(now); kill -$sig $p; wait $p; rc=$?
	echo "SIG$sig while waiting: rc=$rc after $(since "$t") s, CMD ran: $([ -e "$d/ran.$sig" ] && echo yes || echo no), stderr: $(tr '\n' ' ' <"$d/err.wait.$sig")"
done
wait $h

# 3. signals to simba while CMD runs (CMD writes its pid; a TERM trap records it saw SIGTERM)
for sig in INT TERM KILL; do
	rm -f "$d/pid" "$d/saw"
	"${lock[@]}" -name $n -- sh -c "echo \$\$ >$d/pid; trap 'echo TERM >$d/saw; exit 143' TERM; sleep 20 & wait" 2>"$d/err.hold.$sig" &
	p=$!; waitfile "$d/pid"; c=$(cat "$d/pid"); t=$(now); kill -$sig $p; wait $p; rc=$?
	for ((i = 0; i < 100; i++)); do [ "$(alive "$c")" = gone ] && break; sleep 0.05; done
	gone=$(since "$t")
	t2=$(now); "${lock[@]}" -name $n -- true; free=$(since "$t2")
	echo "SIG$sig to simba holding: rc=$rc, CMD $(alive "$c") after ${gone} s (saw: $(cat "$d/saw" 2>/dev/null || echo nothing)), next lock of $n took $free s, stderr: $(tr '\n' ' ' <"$d/err.hold.$sig")"
done

# 4. SIGKILL to CMD; CMD ignoring SIGTERM (grace 1 s); exit status passthrough
rm -f "$d/pid"
"${lock[@]}" -name $n -- sh -c "echo \$\$ >$d/pid; sleep 20" & p=$!
waitfile "$d/pid"; kill -KILL "$(cat "$d/pid")"; wait $p
echo "SIGKILL to CMD: rc=$?"
rm -f "$d/pid"
"${lock[@]}" -name $n -grace 1s -- sh -c "trap '' TERM; echo \$\$ >$d/pid; sleep 20 & wait; sleep 20" & p=$!
waitfile "$d/pid"; t=$(now); kill -TERM $p; wait $p; rc=$?
echo "CMD ignores SIGTERM, -grace 1s, SIGTERM to simba: rc=$rc after $(since "$t") s, CMD $(alive "$(cat "$d/pid")")"
for code in 0 1 2 42 127 255; do "${lock[@]}" -name $n -- sh -c "exit $code"; echo -n "exit $code->$? "; done; echo

# 5. grandchildren: background, nohup, setsid (a new session), double-fork daemon
for how in bg nohup setsid daemon; do
	rm -f "$d/gpid"
	case $how in
	bg) cmd="sleep 30 & echo \$! >$d/gpid" ;;
	nohup) cmd="nohup sleep 30 >/dev/null 2>&1 & echo \$! >$d/gpid" ;;
	setsid) cmd="setsid sh -c 'echo \$\$ >$d/gpid; exec sleep 30' & sleep 0.3" ;;
	daemon) cmd="( setsid sh -c 'sleep 30 & echo \$! >$d/gpid' & ) ; sleep 0.3" ;;
	esac
	"${lock[@]}" -name $n -- sh -c "$cmd"
	rc=$?; sleep 0.5; g=$(cat "$d/gpid" 2>/dev/null)
	echo "grandchild ($how) after CMD exited and simba exited $rc: $([ -n "$g" ] && alive "$g" || echo 'no pid')"
	[ -n "$g" ] && kill "$g" 2>/dev/null
done
rm -f "$d/gpid"
"${lock[@]}" -name $n -- sh -c "setsid sh -c 'echo \$\$ >$d/gpid; exec sleep 30' & sleep 20" & p=$!
waitfile "$d/gpid"; sleep 0.2; kill -KILL $p; wait $p 2>/dev/null; sleep 1; g=$(cat "$d/gpid")
echo "grandchild (setsid) after SIGKILL to simba: $(alive "$g")"; kill "$g" 2>/dev/null

# 6. stdio: stdin piped through, 200 MB of stdout, CMD closing stdout, stderr kept apart
echo "stdin: $(printf 'in\n' | "${lock[@]}" -name $n -- cat)"
t=$(now); b=$("${lock[@]}" -name $n -- head -c 200000000 /dev/zero | wc -c)
echo "200 MB stdout: $b bytes in $(since "$t") s"
o=$("${lock[@]}" -name $n -- sh -c 'exec >&-; sleep 0.3; echo err >&2; exit 5' 2>"$d/err.closed"); rc=$?
echo "CMD closes stdout: rc=$rc stdout='$o' stderr='$(cat "$d/err.closed")'"
o=$("${lock[@]}" -name $n -- sh -c 'echo out; echo err >&2' 2>"$d/err.split")
echo "stdout='$o' stderr='$(cat "$d/err.split")'"
"${lock[@]}" -name $n -- sh -c 'yes | head -c 10000000' | head -c 10 >/dev/null; echo "reader closes the pipe early: rc=${PIPESTATUS[0]}"
