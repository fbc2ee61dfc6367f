package main

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/simba-go/simba/examples/internal/exampletest"
)

// Two replicas: only the leader runs the job; when it stops, the other runs it with a greater
// token, and the tokens of the runs, in the order they happened, never go down.
func TestOneReplicaRunsTheJob(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "simba.db")
	name := exampletest.Name(t, "example-cron")
	out := exampletest.NewOutput(t)
	args := func(owner string) []string {
		return []string{"-dsn", dsn, "-name", name, "-owner", owner, "-every", "50ms", "-for", "5m"}
	}

	a := out.Start(run, args("a")...)
	tokA := exampletest.Token(t, out.Expect(`^a runs the job at \S+ with token (\d+)$`)[1])
	b := out.Start(run, args("b")...)
	out.Expect(`^b is a replica of `)
	for range 3 { // a keeps running the job while b waits
		if tok := exampletest.Token(t, out.Expect(`^a runs the job at \S+ with token (\d+)$`)[1]); tok != tokA {
			t.Fatalf("a's token changed from %d to %d while it led", tokA, tok)
		}
	}
	a.Stop()
	tokB := exampletest.Token(t, out.Expect(`^b runs the job at \S+ with token (\d+)$`)[1])
	if tokB <= tokA {
		t.Fatalf("b's token %d is not greater than a's %d", tokB, tokA)
	}
	out.Expect(`^b runs the job`)
	b.Stop()

	runs := regexp.MustCompile(`^(\w+) runs the job at \S+ with token (\d+)$`)
	var last int64
	for _, l := range out.Lines() {
		if m := runs.FindStringSubmatch(l); m != nil {
			tok := exampletest.Token(t, m[2])
			if tok < last {
				t.Fatalf("%q ran after a run with token %d", l, last)
			}
			if (m[1] == "a") != (tok == tokA) {
				t.Fatalf("%q: token %d is not its replica's (a led with %d, b with %d)", l, tok, tokA, tokB)
			}
			last = tok
		}
	}
}
