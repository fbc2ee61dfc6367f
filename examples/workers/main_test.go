package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/simba-go/simba/examples/internal/exampletest"
	"github.com/simba-go/simba/internal/testenv"
)

// Eight workers process 60 jobs on 6 invoices: every job is done under its invoice's lock, no
// update is lost, and each invoice's tokens never go down.
func TestWorkers(t *testing.T) {
	for _, tc := range []struct{ name, dsn string }{
		{"sqlite", "sqlite://" + filepath.Join(t.TempDir(), "simba.db")},
		{"postgres", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := tc.dsn
			if dsn == "" {
				dsn = testenv.Postgres(t)
			}
			out := exampletest.NewOutput(t)
			prefix := exampletest.Name(t, "invoice")
			if err := run(context.Background(), []string{"-dsn", dsn, "-prefix", prefix, "-workers", "8", "-invoices", "6", "-jobs", "60"}, out); err != nil {
				t.Fatal(err)
			}
			line := regexp.MustCompile(`^worker (\d+): job (\d+) on (\S+) with token (\d+)$`)
			jobs := map[string]bool{}
			last := map[string]int64{}
			for _, l := range out.Lines() {
				m := line.FindStringSubmatch(l)
				if m == nil {
					continue
				}
				if want := fmt.Sprintf("%s-%d", prefix, jobInvoice(t, m[2], 6)); m[3] != want {
					t.Errorf("%q: job on %s, want %s", l, m[3], want)
				}
				tok := exampletest.Token(t, m[4])
				if tok < last[m[3]] {
					t.Errorf("%q: token below %d, seen before on %s", l, last[m[3]], m[3])
				}
				last[m[3]] = tok
				jobs[m[2]] = true
			}
			if len(jobs) != 60 || len(last) != 6 {
				t.Errorf("%d jobs done on %d invoices, want 60 on 6", len(jobs), len(last))
			}
			out.Expect(`^60 of 60 jobs done by 8 workers; the ledger counts 60$`)
		})
	}
}

func jobInvoice(t *testing.T, job string, invoices int) int {
	var n int
	if _, err := fmt.Sscan(job, &n); err != nil {
		t.Fatal(err)
	}
	return n % invoices
}

// Two processes' pools on one database share the invoices' locks: on each invoice, the jobs of
// both follow one another with tokens that never go down.
func TestTwoProcesses(t *testing.T) {
	dsn := testenv.Postgres(t)
	prefix := exampletest.Name(t, "invoice")
	out := exampletest.NewOutput(t)
	args := []string{"-dsn", dsn, "-prefix", prefix, "-workers", "4", "-invoices", "3", "-jobs", "30"}
	a, b := out.Start(run, args...), out.Start(run, args...)
	a.Wait()
	b.Wait()

	line := regexp.MustCompile(`^worker \d+: job \d+ on (\S+) with token (\d+)$`)
	last := map[string]int64{}
	n := 0
	for _, l := range out.Lines() {
		if m := line.FindStringSubmatch(l); m != nil {
			tok := exampletest.Token(t, m[2])
			if tok < last[m[1]] {
				t.Errorf("%q: token below %d, seen before on %s", l, last[m[1]], m[1])
			}
			last[m[1]] = tok
			n++
		}
	}
	if n != 60 {
		t.Errorf("%d jobs done, want 60", n)
	}
	out.Expect(`^30 of 30 jobs done by 4 workers; the ledger counts 30$`)
	out.Expect(`^30 of 30 jobs done by 4 workers; the ledger counts 30$`)
}
