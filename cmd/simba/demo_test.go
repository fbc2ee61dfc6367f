//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
)

// TestMain lets the test binary serve as the demo's worker processes and as the supervisor of
// run and lock: they re-execute their own binary as `<binary> demo-worker …` and
// `<binary> run-supervisor …`; and as a command for run that breaks its SQLite database
// (dropSessionsCommand). It removes the simba binary built by simbaBinary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "demo-worker" {
		if err := demoWorker(context.Background(), os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "demo-worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == supervisorCommand {
		os.Exit(supervise(os.Args[2:]))
	}
	if len(os.Args) > 2 && os.Args[1] == dropSessionsCommand {
		os.Exit(dropSessions(os.Args[2]))
	}
	code := m.Run()
	removeSimbaBinary()
	os.Exit(code)
}

// runDemo runs the demo in this process (its workers are real child processes) and returns
// what it printed.
func runDemo(t *testing.T, args ...string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&out, r); close(copied) }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = demo(ctx, args)
	os.Stdout = stdout
	w.Close()
	<-copied
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	return out.String()
}

func checkDemo(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{"SIGKILL", "SIGSTOP", "SIGCONT", "failover in", "tokens strictly increased",
		"FENCED: write from", "1 stale write rejected"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if strings.Count(out, " leads with token ") < 3 {
		t.Errorf("demo output shows fewer than 3 leaders")
	}
}

// The multi-process check of DESIGN.md §8 on the embedded default: real worker processes on
// one SQLite file, the leader killed with SIGKILL, the next paused with SIGSTOP past its TTL;
// the fenced resource lets no stale write through.
func TestDemoOnSQLite(t *testing.T) {
	out := runDemo(t, "-ttl", "1s")
	checkDemo(t, out)
	checkDemoAsREADME(t, out)
}

// checkDemoAsREADME checks that every line of the demo's sample output in the README is a line
// the demo printed, up to the numbers, durations, worker numbers and the temporary directory
// (and the order of the lines: the paused worker's "lost" and "FENCED" lines race).
func checkDemoAsREADME(t *testing.T, out string) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sample, ok := strings.Cut(string(readme), "`go run ./cmd/simba demo` (nothing to install")
	if ok {
		_, sample, ok = strings.Cut(sample, "```\n")
	}
	if ok {
		sample, _, ok = strings.Cut(sample, "```")
	}
	if !ok {
		t.Fatal("README.md has no sample output after `go run ./cmd/simba demo` (nothing to install")
	}
	printed := make(map[string]bool)
	for _, line := range strings.Split(out, "\n") {
		printed[demoShape(line)] = true
	}
	for _, line := range strings.Split(strings.TrimSpace(sample), "\n") {
		if line != "" && !printed[demoShape(line)] {
			t.Errorf("the README's demo line\n%s\nis not among the lines the demo printed (shape %q)", line, demoShape(line))
		}
	}
}

var (
	demoDir      = regexp.MustCompile(`simba-demo-[^/]+`)
	demoWorkerN  = regexp.MustCompile(`worker-\d+`)
	demoPlural   = regexp.MustCompile(`(\d+ (?:stale write|write|row))s\b`)
	demoDuration = regexp.MustCompile(`\d+(?:\.\d+)?(?:ms|µs|s)\b`)
	demoNumber   = regexp.MustCompile(`\d+`)
)

// demoShape is a line of the demo's output without what changes from run to run.
func demoShape(line string) string {
	line = demoDir.ReplaceAllString(line, "simba-demo-X")
	line = demoWorkerN.ReplaceAllString(line, "worker-W")
	line = demoPlural.ReplaceAllString(line, "$1")
	line = demoDuration.ReplaceAllString(line, "D")
	line = demoNumber.ReplaceAllString(line, "N")
	return strings.TrimSpace(line)
}

func TestDemoOnPostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
	checkDemo(t, runDemo(t, "-ttl", "1s", "-dsn", dsn))
}
