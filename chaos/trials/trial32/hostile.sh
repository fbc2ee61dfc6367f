#!/bin/bash
# hostile.sh: names, TTLs, graces, DSNs and commands a script might get wrong, each run once
# (timeout 8 s: run and lock wait through an outage) with its exit status and first stderr line.
# Every DSN carrying a password uses S3cretPW; the last line says whether it ever appeared, at
# the default log level and at SIMBA_LOG_LEVEL=debug.
set -u
S=${SIMBA:-/tmp/simba32}
d=/tmp/t32/hostile && rm -rf "$d" && mkdir -p "$d"
lite=sqlite://$d/h.db
i=0
t() { # what: run "$@" and print a line
	local what=$1; shift
	i=$((i + 1))
	timeout 8 "$@" >"$d/out.$i" 2>"$d/err.$i"; local rc=$?
	printf '%-44s rc=%-3s %s\n' "$what" "$rc" "$(head -1 "$d/err.$i" | cut -c1-150)"
}
t "no -dsn, no \$SIMBA_DSN" env -u SIMBA_DSN "$S" lock -name x -- true
t "-name ''" "$S" lock -dsn "$lite" -name '' -- true
t "-name a/b" "$S" lock -dsn "$lite" -name a/b -- true
t "-name .." "$S" lock -dsn "$lite" -name .. -- true
t "-name ../../etc" "$S" lock -dsn "$lite" -name ../../etc -- true
t "-name 129 x's" "$S" lock -dsn "$lite" -name "$(printf 'x%.0s' {1..129})" -- true
t "-name 128 x's" "$S" lock -dsn "$lite" -name "$(printf 'x%.0s' {1..128})" -- true
t "-name é日本" "$S" lock -dsn "$lite" -name 'é日本' -- true
t "-name 'a b'" "$S" lock -dsn "$lite" -name 'a b' -- true
t "-name -x" "$S" lock -dsn "$lite" -name -x -- true
t "status -name a/b (lock refuses it)" "$S" status -dsn "$lite" -name a/b
t "missing -- (CMD after flags)" "$S" lock -dsn "$lite" -name x sh -c 'exit 3'
t "no CMD" "$S" lock -dsn "$lite" -name x --
t "CMD not found" "$S" lock -dsn "$lite" -name x -- /nonexistent
t "CMD not executable" "$S" lock -dsn "$lite" -name x -- /etc/passwd
t "CMD a directory" "$S" lock -dsn "$lite" -name x -- /tmp
t "-ttl 0" "$S" lock -dsn "$lite" -name x -ttl 0 -- true
t "-ttl 100ms" "$S" lock -dsn "$lite" -name x -ttl 100ms -- true
t "-ttl 150ms (run/lock: under 500ms)" "$S" lock -dsn "$lite" -name x -ttl 150ms -- true
t "-ttl 499ms (run/lock: under 500ms)" "$S" lock -dsn "$lite" -name x -ttl 499ms -- true
t "-ttl 500ms (run/lock's least)" "$S" lock -dsn "$lite" -name x -ttl 500ms -- true
t "-ttl 25h" "$S" lock -dsn "$lite" -name x -ttl 25h -- true
t "-ttl 5 (no unit)" "$S" lock -dsn "$lite" -name x -ttl 5 -- true
t "-grace -1s" "$S" lock -dsn "$lite" -name x -grace -1s -- true
t "-wait 10s (flock -w analogue)" "$S" lock -dsn "$lite" -name x -wait 10s -- true
t "unknown scheme" "$S" status -dsn foo://bar
t "DSN with spaces" "$S" status -dsn 'postgres://a b:S3cretPW@h/x'
t "DSN bad sslmode" "$S" status -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=bogus&password=S3cretPW'
t "postgres unknown role" "$S" status -dsn 'postgres://nosuch:S3cretPW@127.0.0.1:5432/test'
t "postgres down (port 1)" "$S" status -dsn 'postgres://postgres:S3cretPW@127.0.0.1:1/test'
t "postgres down: lock waits" "$S" lock -dsn 'postgres://postgres:S3cretPW@127.0.0.1:1/test' -name x -- true
t "mysql wrong password" "$S" status -dsn 'mysql://root:S3cretPW@127.0.0.1:3306/test'
t "mysql down: lock waits" "$S" lock -dsn 'mysql://root:S3cretPW@127.0.0.1:1/test' -name x -- true
t "redis password the server lacks" "$S" status -dsn 'redis://:S3cretPW@127.0.0.1:6379/0'
t "redis down: lock waits" "$S" lock -dsn 'redis://:S3cretPW@127.0.0.1:1/0' -name x -- true
t "zk down (status)" "$S" status -dsn 'zk://u:S3cretPW@127.0.0.1:1/x'
t "sqlite missing file (status)" "$S" status -dsn "sqlite://$d/none.db"
t "sqlite in a missing directory (lock)" "$S" lock -dsn "sqlite://$d/no/such/dir.db" -name x -- true
t "\$SIMBA_DSN secret, postgres down, debug" env SIMBA_DSN='postgres://postgres:S3cretPW@127.0.0.1:1/test' SIMBA_LOG_LEVEL=debug "$S" lock -name x -- true
t "\$SIMBA_DSN secret, redis down, debug" env SIMBA_DSN='redis://:S3cretPW@127.0.0.1:1/0' SIMBA_LOG_LEVEL=debug "$S" lock -name x -- true
t "\$SIMBA_DSN secret, mysql down, debug" env SIMBA_DSN='mysql://root:S3cretPW@127.0.0.1:1/test' SIMBA_LOG_LEVEL=debug "$S" lock -name x -- true
t "\$SIMBA_DSN secret, zk down, debug" env SIMBA_DSN='zk://u:S3cretPW@127.0.0.1:1/x' SIMBA_LOG_LEVEL=debug "$S" lock -name x -- true
t "-h shows \$SIMBA_DSN's value?" env SIMBA_DSN='postgres://postgres:S3cretPW@127.0.0.1:1/test' "$S" lock -h
t "bad flag shows \$SIMBA_DSN's value?" env SIMBA_DSN='postgres://postgres:S3cretPW@127.0.0.1:1/test' "$S" lock -ttl x -- true
echo "bad flag value: $(wc -l <"$d/err.$i") lines of stderr"
leaks=$(grep -l S3cretPW "$d"/out.* "$d"/err.* 2>/dev/null | tr '\n' ' ')
echo "S3cretPW printed in: ${leaks:-nothing}"
for f in $leaks; do echo "  $f: $(grep -m1 -o '.\{60\}S3cretPW.\{0,20\}' "$f")"; done
