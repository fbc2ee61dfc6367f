# Simba's developer entry points. `make test` is what CI runs after `make verify`.
GO ?= go
SEEDS ?= 10000

.PHONY: all generate verify test test-etcd-current test-short vet vet-cross fmt bench bench-peers bench-outage sim failover services redis-cluster zookeeper zk-ensemble zk-ensemble-stop demo chaos chaos-short chaos-mutant

all: verify test

## generate: regenerate every artifact from spec/ (SQL, Lua, ZooKeeper layout, generated Go)
generate:
	$(GO) generate ./...

## verify: regenerate and fail on any difference, stale leftovers included; then check that
## backend/ spells no wire detail by hand (internal/wirecheck) and that every generated
## statement prepares on a real server of its dialect (sqlc vet with sqlc/db-prepare, over
## sql/sqlc-vet.yaml; needs PostgreSQL and MySQL/MariaDB: make services)
verify:
	$(GO) -C gen run ./cmd/simbagen -root .. -verify
	$(GO) generate ./...
	@changes=$$(git status --porcelain --untracked-files=all -- generated sql lua zk); \
	if [ -n "$$changes" ]; then echo "generated artifacts are stale; run make generate and commit:"; echo "$$changes"; git --no-pager diff --stat -- generated sql lua zk; exit 1; fi
	$(GO) test -count=1 ./internal/wirecheck
	$(GO) -C tools run ./cmd/sqlcvet -root ..

## vet: static checks over the modules: the root, gen/, examples/backend, observe/, bench/, tools/
## and chaos/ (bench/ is only vetted, so CI compiles it; its run is make bench-peers); then
## vet-cross
vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) -C gen vet ./...
	$(GO) -C examples/backend vet ./...
	$(GO) -C observe vet ./...
	$(GO) -C bench vet ./...
	$(GO) -C tools vet ./...
	$(GO) -C chaos vet ./...
	$(MAKE) --no-print-directory vet-cross

## vet-cross: go vet of every module (which compiles its tests too) for the other systems a Go
## user has: Windows, macOS (amd64 and arm64), FreeBSD, and Linux on arm64, so that a file
## that only builds on Linux fails CI (go install of cmd/simba on Windows, the tests on a
## Mac). chaos/ needs a Unix system (process groups, SIGSTOP): not vetted for Windows.
CROSS_TARGETS = windows/amd64 darwin/amd64 darwin/arm64 freebsd/amd64 linux/arm64
VET_MODULES = . gen examples/backend observe bench tools chaos
vet-cross:
	@set -e; for t in $(CROSS_TARGETS); do for m in $(VET_MODULES); do \
	  if [ "$${t%/*}" = windows ] && [ "$$m" = chaos ]; then continue; fi; \
	  echo "GOOS=$${t%/*} GOARCH=$${t#*/} go -C $$m vet ./..."; \
	  GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) -C $$m vet ./...; done; done

## test: every test of the root, gen/, examples/backend, observe/ and chaos/ modules (chaos/'s
## own unit tests: the checkers; the harness runs with make chaos), with the race detector
## (the README's test command). examples/backend is a module of its own (a backend
## written outside Simba's module), and so is observe/ (metrics and the HTTP handler, which
## bring in Prometheus: the library's go.mod stays without it), so ./... reaches neither.
## Packages run one at a time (-p 1): many tests run real servers on real time, and two
## packages hammering the same servers at once on a 2-core machine only add noise.
test: vet
	$(GO) test -race -count=1 -p 1 ./...
	# Built without -race (see backend/zookeeper/ensemble_test.go: an upstream go-zookeeper race).
	$(GO) test -count=1 -run TestEnsembleLeaderFailover ./backend/zookeeper
	$(MAKE) test-etcd-current
	$(GO) -C gen test -count=1 ./...
	$(GO) -C examples/backend test -race -count=1 ./...
	$(GO) -C observe test -race -count=1 -p 1 ./...
	$(GO) -C chaos test -race -count=1 ./...

## test-etcd-current: backend/etcd's tests (with -race) once more, against a current etcd:
## ./... runs them against SIMBA_TEST_ETCD (Debian's 3.4 on 2379), this against
## SIMBA_TEST_ETCD_CURRENT (v3.7.3, which .ci/services.sh builds and starts on 2479), and their
## private members (auth, the leader-loss cluster) on SIMBA_TEST_ETCD_CURRENT_BIN: etcd 3.5 and
## later answer some reads differently (a keys-only read carries no lease on 3.7). About 4 min.
SIMBA_TEST_ETCD_CURRENT ?= 127.0.0.1:2479
SIMBA_TEST_ETCD_CURRENT_BIN ?= $(or $(SIMBA_SERVICES_DIR),/tmp/simba-services)/etcd37/etcd
test-etcd-current:
	SIMBA_TEST_ETCD=$(SIMBA_TEST_ETCD_CURRENT) SIMBA_TEST_ETCD_BIN=$(SIMBA_TEST_ETCD_CURRENT_BIN) \
	  $(GO) test -race -count=1 ./backend/etcd

## test-short: the fast subset
test-short:
	$(GO) test -short ./...
	$(GO) -C examples/backend test -short ./...
	$(GO) -C observe test -short ./...

## bench: the benchmarks; each reports its speed as a ratio against a baseline of the same run
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

## bench-peers: Simba beside redislock, redsync, pglock, zk.Lock and etcd on the local servers
## (a few minutes; bench/ is a module of its own so the peers stay out of Simba's dependencies).
## Writes bench/results/latest.md, latest.json and the charts.
bench-peers:
	$(GO) -C bench run ./cmd/benchpeers

## bench-outage: locks under link outages, Simba beside the peers: 3 clients contend for one
## lock, each through its own fault proxy, one link blackholed at a time (a new seed, printed;
## OUTAGE_FLAGS adds flags, e.g. -outage-seed N -outage-duration 2m). Writes
## bench/results/outage.md and outage.json (about 6 minutes at 30 s per row).
OUTAGE_FLAGS ?=
bench-outage:
	$(GO) -C bench run ./cmd/benchpeers -measures outage $(OUTAGE_FLAGS)

## sim: the simulator over many seeds (SEEDS=10000 by default)
sim:
	$(GO) test ./internal/sim -run TestSimulate -seeds=$(SEEDS) -timeout 60m -v

## failover: the cron-singleton failover test of simbatest, RUNS times under -race (1000 by
## default): 3 clients, the leader's link cut, virtual time advanced, no sleeps
RUNS ?= 1000
failover:
	$(GO) test -race -count=1 -run TestCronSingletonFailover ./simbatest -failover.runs=$(RUNS) -v

## services: start PostgreSQL, MariaDB, Redis, a Redis Cluster, ZooKeeper, etcd 3.4 (2379), etcd
## v3.7.3 (2479, built from the Go module proxy: .ci/etcd37) and a 3-server
## ZooKeeper ensemble (2191-2193, to try Simba on by hand) if not running; no test needs the
## ensemble (the etcd leader-loss and ZooKeeper ensemble failover tests start their own 3 members)
services:
	bash .ci/services.sh
	bash .ci/zk-ensemble.sh start

redis-cluster zookeeper: services

## zk-ensemble: start the 3-server ZooKeeper ensemble (2191-2193) alone, to try Simba on by hand; no
## test needs it (the ensemble failover test and the chaos harness start private ones on spare ports)
zk-ensemble:
	bash .ci/zk-ensemble.sh start

zk-ensemble-stop:
	bash .ci/zk-ensemble.sh stop

## chaos: the fault-injection harness (chaos/, a module of its own) on real servers and real
## worker processes: BACKEND (sqlite postgres mariadb redis redis-nodurable redis-cluster
## zookeeper zookeeper-ensemble etcd, or all: every one but redis-nodurable), MODE (election, lock,
## group), ROUNDS of each fault, SEED (0: from the clock; every run prints its seed and the
## command that replays it), TTL, FAULTS (a comma list), RESULTS (append one JSON line per
## run), CHURN (election and group modes: each worker stops or leaves about every CHURN, often
## with a ctx that has ended, and starts or joins again; empty: never). Private servers on spare ports are started,
## killed and restarted; the shared ones are only read and written (fence tables, keys).
BACKEND ?= postgres
MODE ?= election
ROUNDS ?= 1
SEED ?= 0
TTL ?= 1s
FAULTS ?=
RESULTS ?=
CHURN ?=
MUTANT_ROUNDS ?= 2
# redis-nodurable (no persistence) is not in BACKEND=all: a restart loses its leases, which the
# checkers then report (overlap, linearizability) as the README says it must; run it by name.
CHAOS_BACKENDS = sqlite postgres mariadb redis redis-cluster zookeeper zookeeper-ensemble etcd
# The binary and the mutants' logs live in the checkout's .tmp/ (ignored by git): a path shared by
# every checkout (it was $TMPDIR/simba-chaos-bin) let two checkouts' runs overwrite each other's.
CHAOS_TMP = $(CURDIR)/.tmp
CHAOS_BIN = $(CHAOS_TMP)/simba-chaos-bin
chaos:
	mkdir -p $(CHAOS_TMP)
	$(GO) -C chaos build -o $(CHAOS_BIN) ./cmd/chaos
	set -e; for b in $(if $(filter all,$(BACKEND)),$(CHAOS_BACKENDS),$(BACKEND)); do \
	  $(CHAOS_BIN) run -backend $$b -mode $(MODE) -rounds $(ROUNDS) -seed $(SEED) -ttl $(TTL) \
	    $(if $(FAULTS),-faults $(FAULTS)) $(if $(RESULTS),-result $(RESULTS)) $(if $(CHURN),-churn $(CHURN)); done

## chaos-mutant: the mutation test of the harness, one run per mutant on PostgreSQL; this target
## fails unless the checkers catch each: ignore-deadline (a worker that believes its term valid
## past its deadline; partition and one-way faults) and release-ignores-token (a backend whose
## release frees a lease whatever its token and holder; pause and kill faults: a paused
## holder's late close frees its successor's lease)
CHAOS_MUTANTS = ignore-deadline:partition,oneway release-ignores-token:pause,kill
chaos-mutant:
	mkdir -p $(CHAOS_TMP)
	$(GO) -C chaos build -o $(CHAOS_BIN) ./cmd/chaos
	@set -e; for mf in $(CHAOS_MUTANTS); do m=$${mf%%:*}; f=$${mf#*:}; \
	  log=$(CHAOS_TMP)/simba-chaos-mutant-$$m.log; \
	  if CHAOS_MUTANT=$$m $(CHAOS_BIN) run -backend postgres -rounds $(MUTANT_ROUNDS) -seed $(SEED) -ttl $(TTL) \
	      -faults $$f > $$log 2>&1; then \
	    cat $$log; echo "chaos-mutant: $$m was NOT caught"; exit 1; fi; \
	  grep -q VIOLATION $$log || { cat $$log; echo "chaos-mutant: $$m failed without a violation"; exit 1; }; \
	  grep -m3 VIOLATION $$log; echo "chaos-mutant: $$m caught"; done

## chaos-short: what CI runs: one round of each fault on every backend, then the mutation test
chaos-short:
	$(MAKE) chaos BACKEND=all ROUNDS=1
	$(MAKE) chaos-mutant
