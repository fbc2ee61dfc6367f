#!/bin/bash
# job.sh HOST LEDGER SECONDS [EXIT]: the job the trial's hosts run under simba. It appends to
# LEDGER (one line per event: EVENT LEASE HOST TOKEN UNIXTIME) a start, a beat every 0.1 s, and
# an end (or term, on SIGTERM) line, then exits EXIT (0 by default). A SIGKILL leaves no end
# line: the checker takes the last beat as the end then.
host=$1 ledger=$2 secs=$3 code=${4:-0}
ev() { echo "$1 $SIMBA_LEASE $host $SIMBA_TOKEN $(date +%s.%N)" >>"$ledger"; }
ev start
trap 'ev term; exit 143' TERM
n=$(awk -v s="$secs" 'BEGIN{print int(s*10)}')
for ((i = 0; i < n; i++)); do
	sleep 0.1
	ev beat
done
ev end
exit "$code"
