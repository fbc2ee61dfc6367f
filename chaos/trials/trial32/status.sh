#!/bin/bash
# status.sh DSN: simba status as a script would use it: a lock held by a background simba lock,
# read back with -name, -prefix, -all; an unknown name; -name with -prefix; a flag for JSON;
# the exit status of each. Prints each invocation, its exit status and its output.
set -u
dsn=$1
S=${SIMBA:-/tmp/simba32}
d=/tmp/t32/status && mkdir -p "$d"
"$S" lock -dsn "$dsn" -name t32-status-held -ttl 3s -- sleep 8 &
p=$!
for ((i = 0; i < 50; i++)); do "$S" status -dsn "$dsn" -name t32-status-held 2>/dev/null | grep -q '^t32-status-held ' && break; sleep 0.1; done
show() { echo "\$ simba status $*"; "$S" status -dsn "$dsn" "$@" >"$d/out" 2>&1; rc=$?; sed 's/^/  | /' "$d/out"; echo "  rc=$rc"; }
show -name t32-status-held
show -prefix t32-status
show -name t32-status-nosuch
show -name t32-status-held -prefix t32
show -json 2>&1 | head -3
show -name 'bad/name'
# what a script would do: the holder's token of a lease, by column
tok=$("$S" status -dsn "$dsn" -name t32-status-held | awk '$1=="t32-status-held"{print $2}')
echo "token by awk: $tok"
wait $p
show -name t32-status-held
show -all -name t32-status-held
