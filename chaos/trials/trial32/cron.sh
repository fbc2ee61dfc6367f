#!/bin/bash
# cron.sh DSN TAG [ROUNDS] [PERIOD] [JOBSECS]: 4 "hosts" fire, like cron, every PERIOD seconds
# (whether or not their last firing ended) `simba run -name t32-nightly-TAG -ttl 2s -- job.sh`.
# Host 3's job exits 3; with JOBSECS>2 every job outlives the 2 s TTL. Output under
# $OUT (default /tmp/t32/cron-TAG): ledger, exits (HOST ROUND RC SECONDS), stderr of each firing.
set -u
dsn=$1 tag=$2 rounds=${3:-5} period=${4:-3} jobsecs=${5:-0.5}
S=${SIMBA:-/tmp/simba32}
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/t32/cron-$tag}
rm -rf "$out" && mkdir -p "$out"
name=t32-nightly-$tag
fire() { # host round
	local h=$1 r=$2 code=0 t0 t1 rc
	[ "$h" = 3 ] && code=3
	t0=$(date +%s.%N)
	$S run -dsn "$dsn" -name "$name" -ttl 2s -- "$here/job.sh" "host$h" "$out/ledger" "$jobsecs" "$code" 2>"$out/err.$h.$r"
	rc=$?
	t1=$(date +%s.%N)
	echo "host$h $r $rc $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')" >>"$out/exits"
}
for ((r = 1; r <= rounds; r++)); do
	for h in 1 2 3 4; do fire "$h" "$r" & done
	sleep "$period"
done
wait
echo "== $tag: $(wc -l <"$out/exits") firings, $(grep -c '^start' "$out/ledger") job runs over $rounds rounds"
awk '{c[$3]++} END{for (k in c) printf "  simba exit %s: %d\n", k, c[k]}' "$out/exits"
"$here/check.sh" "$out/ledger"
