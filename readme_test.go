package simba_test

import (
	"os"
	"regexp"
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
