package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/simba-go/simba/examples/internal/exampletest"
)

// state is what the members' lines say: who consumes each partition now, and each member's
// latest view (member count and assigned partitions).
type state struct {
	consumer map[int]string
	members  map[string]int
	assigned map[string][]int
}

var (
	consumes = regexp.MustCompile(`^(\w+) consumes partition (\d+) with token (\d+)$`)
	stops    = regexp.MustCompile(`^(\w+) stops consuming partition (\d+)$`)
	sees     = regexp.MustCompile(`^(\w+) sees (\d+) members; its partitions: \[([\d ]*)\]$`)
)

// replay reads the lines in order, failing t if a partition ever has two consumers at once or
// a partition's token goes down.
func replay(t *testing.T, lines []string) state {
	s := state{consumer: map[int]string{}, members: map[string]int{}, assigned: map[string][]int{}}
	tokens := map[int]int64{}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	for _, l := range lines {
		if m := consumes.FindStringSubmatch(l); m != nil {
			p, tok := atoi(m[2]), exampletest.Token(t, m[3])
			if c, ok := s.consumer[p]; ok {
				t.Fatalf("%q while %s consumes it", l, c)
			}
			if tok < tokens[p] {
				t.Fatalf("%q: token below %d, seen before", l, tokens[p])
			}
			s.consumer[p], tokens[p] = m[1], tok
		} else if m := stops.FindStringSubmatch(l); m != nil {
			delete(s.consumer, atoi(m[2]))
		} else if m := sees.FindStringSubmatch(l); m != nil {
			var ps []int
			for _, f := range strings.Fields(m[3]) {
				ps = append(ps, atoi(f))
			}
			s.members[m[1]], s.assigned[m[1]] = atoi(m[2]), ps
		}
	}
	return s
}

// settled reports whether every member listed sees len(members) members, their assignments
// split the partitions among them, and each consumes exactly what it is assigned.
func (s state) settled(partitions int, members ...string) bool {
	var all []int
	for _, m := range members {
		if s.members[m] != len(members) {
			return false
		}
		var consumed []int
		for p, c := range s.consumer {
			if c == m {
				consumed = append(consumed, p)
			}
		}
		slices.Sort(consumed)
		if !slices.Equal(consumed, s.assigned[m]) {
			return false
		}
		all = append(all, consumed...)
	}
	slices.Sort(all)
	return len(all) == partitions && len(s.consumer) == partitions && all[0] == 0 && all[partitions-1] == partitions-1 && len(slices.Compact(all)) == partitions
}

// One member consumes every partition; a second joins and takes its share, each partition
// consumed by one member at a time; when it leaves, the first consumes everything again.
func TestPartitionsMove(t *testing.T) {
	const partitions = 8
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "simba.db")
	group := exampletest.Name(t, "example-orders")
	out := exampletest.NewOutput(t)
	args := func(owner string) []string {
		return []string{"-dsn", dsn, "-group", group, "-owner", owner, "-partitions", strconv.Itoa(partitions), "-for", "5m"}
	}
	settled := func(members ...string) {
		out.Await("settled group of "+strings.Join(members, ", "), func(lines []string) bool {
			return replay(t, lines).settled(partitions, members...)
		})
	}

	out.Start(run, args("a")...)
	settled("a")
	b := out.Start(run, args("b")...)
	settled("a", "b")
	b.Stop()
	out.Expect(`^b left ` + regexp.QuoteMeta(group) + `$`)
	settled("a")
}

// TestPartitionsPrintInOrder: one member prints its view, then its partitions' starts in
// partition order, and at the end their stops in partition order, as the examples' README
// shows (tokens aside). Its consumers start and stop concurrently: they printed in whatever
// order they ran, after a first view of 0 members.
func TestPartitionsPrintInOrder(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sample, ok := strings.Cut(string(readme), "$ go run ./examples/partitions -owner a -partitions 4\n")
	sample, _, ok2 := strings.Cut(sample, "```")
	if !ok || !ok2 {
		t.Fatal("no sample output of partitions in examples/README.md")
	}
	tokens := regexp.MustCompile(`token \d+`)
	want := tokens.ReplaceAllString(strings.ReplaceAll(sample, "^C", ""), "token N")

	dsn := "sqlite://" + filepath.Join(t.TempDir(), "simba.db")
	group := exampletest.Name(t, "example-orders")
	out := exampletest.NewOutput(t)
	p := out.Start(run, "-dsn", dsn, "-group", group, "-owner", "a", "-partitions", "4", "-for", "5m")
	out.Await("partition 3 consumed", func(lines []string) bool {
		return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "a consumes partition 3 ") })
	})
	p.Stop()
	got := strings.Join(out.Lines(), "\n") + "\n"
	got = tokens.ReplaceAllString(strings.ReplaceAll(got, group, "example-orders"), "token N")
	if got != want {
		t.Errorf("output:\n%s\nwant (examples/README.md):\n%s", got, want)
	}
}
