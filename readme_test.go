package simba_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestREADMEQuotesLatestBenchRun: the README names the latest make bench-peers run by its date
// and its count of targets met, and bench/results/latest.md is that run. A new run committed
// without the README's sentence updated fails here (the README quoted a run two runs old).
func TestREADMEQuotesLatestBenchRun(t *testing.T) {
	readme := readFile(t, "README.md")
	latest := readFile(t, "bench/results/latest.md")

	quote := regexp.MustCompile(`The latest run — (\d{4}-\d\d-\d\d)\s+(\d\d:\d\d) UTC,[^(]*\((\d+) of its (\d+) targets\s+met`).FindStringSubmatch(readme)
	if quote == nil {
		t.Fatal("README.md: no sentence \"The latest run — <date> <time> UTC, … (<n> of its <m> targets met\"")
	}
	run := regexp.MustCompile(`(?m)^Run (\d{4}-\d\d-\d\d) (\d\d:\d\d) UTC`).FindStringSubmatch(latest)
	targets := regexp.MustCompile(`: (\d+) met, (\d+) not met, (\d+) not measured\.`).FindStringSubmatch(latest)
	if run == nil || targets == nil {
		t.Fatalf("bench/results/latest.md: no \"Run <date> <time> UTC\" header or no \"<n> met, <k> not met, <u> not measured.\" count")
	}
	if quote[1] != run[1] || quote[2] != run[2] {
		t.Errorf("README.md quotes the run of %s %s UTC; bench/results/latest.md is the run of %s %s UTC", quote[1], quote[2], run[1], run[2])
	}
	total := atoi(t, targets[1]) + atoi(t, targets[2]) + atoi(t, targets[3])
	if quote[3] != targets[1] || atoi(t, quote[4]) != total {
		t.Errorf("README.md: %s of %s targets met; bench/results/latest.md: %s of %d", quote[3], quote[4], targets[1], total)
	}
}

// TestREADMEQuotesStaleRun: the README's paragraph on stale writes after a pause names the run
// of bench/results/stale.md by its date and quotes its outcome: Simba's paused holders' writes
// never landed, redislock's, redsync's and zk.Lock's did in every round, pglock's in some.
func TestREADMEQuotesStaleRun(t *testing.T) {
	readme := readFile(t, "README.md")
	stale := readFile(t, "bench/results/stale.md")
	quote := regexp.MustCompile(`stale\.md\) \(the run of (\d{4}-\d\d-\d\d \d\d:\d\d) UTC: (\d+) rounds,[\s\S]*?pglock's in (\d+) of (\d+)`).FindStringSubmatch(readme)
	if quote == nil {
		t.Fatal("README.md: no \"stale.md) (the run of <date> UTC: <n> rounds, … pglock's in <k> of <n>\"")
	}
	run := regexp.MustCompile(`(?m)^Run (\d{4}-\d\d-\d\d \d\d:\d\d) UTC.*?; (\d+) rounds`).FindStringSubmatch(stale)
	if run == nil {
		t.Fatal("bench/results/stale.md: no \"Run <date> UTC …; <n> rounds\" header")
	}
	if quote[1] != run[1] || quote[2] != run[2] {
		t.Errorf("README.md quotes the stale run of %s UTC with %s rounds; stale.md is the run of %s UTC with %s", quote[1], quote[2], run[1], run[2])
	}
	n := quote[2]
	for _, want := range []string{
		"**Simba `Lock`: 0 of ", "redislock " + n + " of " + n, "redsync " + n + " of " + n,
		"zk.Lock " + n + " of " + n, "pglock " + quote[3] + " of " + quote[4],
	} {
		if !strings.Contains(stale, want) {
			t.Errorf("bench/results/stale.md does not say %q, as README.md's quote has it", want)
		}
	}
}

// TestREADMEQuotesOutageRun: the README's paragraph "After an outage" names the run of
// bench/results/outage.md by its date and seed, and quotes, for Simba's Lock on each server,
// the longest wait from a heal to a grant, the longest Lock, its p99 and the grants, and for
// each peer its grants, failed Locks, longest Lock and overlaps, as the table has them. A new
// run committed without the README's numbers updated fails here.
func TestREADMEQuotesOutageRun(t *testing.T) {
	readme := strings.Join(strings.Fields(readFile(t, "README.md")), " ")
	outage := readFile(t, "bench/results/outage.md")
	quote := regexp.MustCompile(`outage\.md\) \(the run of (\d{4}-\d\d-\d\d \d\d:\d\d) UTC, seed (\d+)`).FindStringSubmatch(readme)
	if quote == nil {
		t.Fatal("README.md: no \"outage.md) (the run of <date> UTC, seed <n>\"")
	}
	run := regexp.MustCompile(`(?m)^Run (\d{4}-\d\d-\d\d \d\d:\d\d) UTC .*; seed (\d+);`).FindStringSubmatch(outage)
	if run == nil {
		t.Fatal("bench/results/outage.md: no \"Run <date> UTC …; seed <n>;\" header")
	}
	if quote[1] != run[1] || quote[2] != run[2] {
		t.Errorf("README.md quotes the outage run of %s UTC, seed %s; outage.md is the run of %s UTC, seed %s", quote[1], quote[2], run[1], run[2])
	}
	// The table's rows by server and library: grants, failed, p50 / p99 / max, heal → grant,
	// overlaps (through the fence).
	type row struct{ grants, failed, p99, max, heal, overlaps string }
	rows := map[string]row{}
	for _, m := range regexp.MustCompile("(?m)^\\| ([^|]+?) \\| ([^|]+?) \\| (\\d+) \\| (\\d+) \\| [^|/]+ / ([^|/]+) / ([^|/]+) \\| ([^|]+?) \\| (\\d+) \\(").FindAllStringSubmatch(outage, -1) {
		rows[m[1]+" / "+m[2]] = row{grants: m[3], failed: m[4], p99: strings.TrimSpace(m[5]), max: strings.TrimSpace(m[6]), heal: m[7], overlaps: m[8]}
	}
	find := func(group, lib string) (row, bool) {
		for k, r := range rows {
			g, l, _ := strings.Cut(k, " / ")
			if strings.HasPrefix(g, group) && strings.Contains(l, lib) {
				return r, true
			}
		}
		return row{}, false
	}
	simbaQuotes := regexp.MustCompile(`(Redis|PostgreSQL|MariaDB|ZooKeeper|etcd) (\d[\d.]* m?s) and (\d[\d.]* m?s) \(p99 (\d[\d.]* m?s), (\d+) grants`).FindAllStringSubmatch(readme, -1)
	if len(simbaQuotes) != 5 {
		t.Errorf("README.md quotes Simba's outage numbers for %d servers, want 5 (\"<server> <heal> and <max> (p99 <p99>, <n> grants\")", len(simbaQuotes))
	}
	for _, q := range simbaQuotes {
		r, ok := find(q[1], "**Simba `Lock`**")
		if !ok {
			t.Errorf("bench/results/outage.md has no Simba row for %s", q[1])
			continue
		}
		if got := []string{r.heal, r.max, r.p99, r.grants}; !slices.Equal(got, q[2:6]) {
			t.Errorf("README.md quotes Simba on %s as %v (heal → grant, max, p99, grants); outage.md has %v", q[1], q[2:6], got)
		}
	}
	peerQuotes := regexp.MustCompile(`(redislock|redsync|pglock|zk\.Lock|etcd's Mutex) (\d+) grants, (\d+) failed, the longest (\d[\d.]* m?s), (\d+) overlaps`).FindAllStringSubmatch(readme, -1)
	if len(peerQuotes) != 5 {
		t.Errorf("README.md quotes %d peers' outage numbers, want 5 (\"<peer> <n> grants, <k> failed, the longest <max>, <m> overlaps\")", len(peerQuotes))
	}
	peerRow := map[string][2]string{"redislock": {"Redis", "redislock"}, "redsync": {"Redis", "redsync"}, "pglock": {"PostgreSQL", "pglock"}, "zk.Lock": {"ZooKeeper", "zk.Lock"}, "etcd's Mutex": {"etcd", "concurrency.Mutex"}}
	for _, q := range peerQuotes {
		r, ok := find(peerRow[q[1]][0], peerRow[q[1]][1])
		if !ok {
			t.Errorf("bench/results/outage.md has no row for %s", q[1])
			continue
		}
		if got := []string{r.grants, r.failed, r.max, r.overlaps}; !slices.Equal(got, q[2:6]) {
			t.Errorf("README.md quotes %s as %v (grants, failed, max, overlaps); outage.md has %v", q[1], q[2:6], got)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readmePackages maps the package names the READMEs qualify identifiers with to their import
// paths, and the directory to run go doc in (observe/ is a module of its own).
var readmePackages = map[string]struct{ dir, path string }{
	"simba":      {".", "github.com/simba-go/simba"},
	"simbasql":   {".", "github.com/simba-go/simba/backend/sql"},
	"redis":      {".", "github.com/simba-go/simba/backend/redis"},
	"zookeeper":  {".", "github.com/simba-go/simba/backend/zookeeper"},
	"etcd":       {".", "github.com/simba-go/simba/backend/etcd"},
	"open":       {".", "github.com/simba-go/simba/open"},
	"spi":        {".", "github.com/simba-go/simba/spi"},
	"tck":        {".", "github.com/simba-go/simba/tck"},
	"simbatest":  {".", "github.com/simba-go/simba/simbatest"},
	"wire":       {".", "github.com/simba-go/simba/generated/wire"},
	"fence":      {".", "github.com/simba-go/simba/fence"},
	"fencesql":   {".", "github.com/simba-go/simba/fence/fencesql"},
	"fenceredis": {".", "github.com/simba-go/simba/fence/fenceredis"},
	"fencehttp":  {".", "github.com/simba-go/simba/fence/fencehttp"},
	"simbaprom":  {"observe", "github.com/simba-go/simba/observe/simbaprom"},
	"simbahttp":  {"observe", "github.com/simba-go/simba/observe/simbahttp"},
}

// readmeForeign are qualified names in the docs that are not identifiers of Simba's package of
// that name: go-redis's logger hook, client types and constructor, and a plural in prose.
var readmeForeign = map[string]bool{
	"redis.SetLogger": true, "redis.Client": true, "redis.ClusterClient": true, "redis.UniversalClient": true,
	"redis.NewFailoverClient": true, "simba.Clients": true,
}

// TestDocsNamesExist: every package-qualified identifier the READMEs and the package docs name
// (simba.ErrClosed, fencesql.New, open.WithPing, spi.Queuer, …), in their prose and in their Go
// snippets, is declared by that package, so that a rename cannot leave the docs pointing at
// nothing.
func TestDocsNamesExist(t *testing.T) {
	goTool := goCommand(t)
	ref := regexp.MustCompile(`(?:^|[^\w./])([a-z]+)\.([A-Z]\w*)`)
	want := make(map[string]map[string]bool) // package name → identifiers
	for _, file := range []string{
		"README.md", "examples/README.md", "doc.go", "backend/sql/doc.go", "backend/redis/doc.go",
		"backend/zookeeper/doc.go", "backend/etcd/doc.go", "simbatest/doc.go", "open/open.go",
		"fence/fence.go", "tck/tck.go", "spi/spi.go",
	} {
		for _, m := range ref.FindAllStringSubmatch(readFile(t, file), -1) {
			if _, ok := readmePackages[m[1]]; !ok || readmeForeign[m[1]+"."+m[2]] {
				continue
			}
			if want[m[1]] == nil {
				want[m[1]] = make(map[string]bool)
			}
			want[m[1]][m[2]] = true
		}
	}
	if len(want["simba"]) == 0 || len(want["fencesql"]) == 0 {
		t.Fatalf("found too few qualified names in the docs: %v", want)
	}
	total := 0
	for _, names := range want {
		total += len(names)
	}
	t.Logf("%d qualified names of %d packages", total, len(want))
	for pkg, names := range want {
		p := readmePackages[pkg]
		declared := declaredNames(run(t, goTool, "-C", p.dir, "doc", "-all", p.path))
		for name := range names {
			if !declared[name] {
				t.Errorf("the docs name %s.%s, which %s does not declare", pkg, name, p.path)
			}
		}
	}
}

// declaredNames are the package-level identifiers in a package's `go doc -all` output: its
// functions, types and the variables and constants of single and grouped declarations.
func declaredNames(doc string) map[string]bool {
	names := make(map[string]bool)
	single := regexp.MustCompile(`^(?:func|type|var|const) ([A-Za-z]\w*)`)
	grouped := regexp.MustCompile(`^\t([A-Za-z]\w*(?:, [A-Za-z]\w*)*)\b`)
	group := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case line == "var (" || line == "const (":
			group = true
		case group && line == ")":
			group = false
		case group:
			if m := grouped.FindStringSubmatch(line); m != nil {
				for _, n := range strings.Split(m[1], ", ") {
					names[n] = true
				}
			}
		default:
			if m := single.FindStringSubmatch(line); m != nil {
				names[m[1]] = true
			}
		}
	}
	return names
}
