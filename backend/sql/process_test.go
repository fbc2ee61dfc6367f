package sql

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// childEnv carries the SQLite DSN to the child process of TestSQLiteTwoProcesses (the test
// binary re-executed).
const childEnv = "SIMBA_SQL_CHILD_DSN"

// Names the two processes use.
const (
	sharedName = "two-processes"
	killedName = "killed-holder"
	childTTL   = time.Second
)

// child runs the child's part when the binary was started as the child process, and reports
// whether it did.
func child() bool {
	dsn := os.Getenv(childEnv)
	if dsn == "" {
		return false
	}
	if err := runChild(dsn, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	os.Exit(0)
	return true
}

// contend acquires and releases sharedName for d and returns the tokens it was granted.
func contend(ctx context.Context, b *Backend, s spi.SessionID, d time.Duration) ([]int64, error) {
	var toks []int64
	for end := time.Now().Add(d); time.Now().Before(end); {
		r, err := b.Acquire(ctx, s, sharedName)
		if err != nil {
			if spi.Classify(err) == spi.Retryable {
				continue
			}
			return nil, err
		}
		if r.Kind != spi.Granted {
			time.Sleep(time.Millisecond)
			continue
		}
		toks = append(toks, r.Token)
		if err := b.Release(ctx, s, sharedName, r.Token); err != nil {
			return nil, err
		}
	}
	return toks, nil
}

// runChild contends for sharedName for two seconds, printing "token N" per grant, then takes
// killedName, prints "holding N" and waits to be killed.
func runChild(dsn string, out io.Writer) error {
	ctx := context.Background()
	b, err := Open(ctx, dsn)
	if err != nil {
		return err
	}
	s, err := b.OpenSession(ctx, "child", longTTL)
	if err != nil {
		return err
	}
	toks, err := contend(ctx, b, s.ID, 2*time.Second)
	if err != nil {
		return err
	}
	for _, tok := range toks {
		fmt.Fprintf(out, "token %d\n", tok)
	}
	short, err := b.OpenSession(ctx, "child-short", childTTL)
	if err != nil {
		return err
	}
	r, err := b.Acquire(ctx, short.ID, killedName)
	if err != nil || r.Kind != spi.Granted {
		return fmt.Errorf("acquire %s: %+v, %v", killedName, r, err)
	}
	fmt.Fprintf(out, "holding %d\n", r.Token)
	for { // keep the session alive until killed
		if _, err := b.KeepAlive(ctx, short.ID, nil, nil); err != nil {
			return err
		}
		time.Sleep(childTTL / 4)
	}
}

// TestSQLiteTwoProcesses: two processes share one SQLite file. They contend for one lease (every
// grant's token is distinct and each process's tokens increase), then the parent SIGKILLs the
// child while it holds a lease: the lease stays held until the child's session expires by the
// database clock, and the parent's takeover has a greater token.
func TestSQLiteTwoProcesses(t *testing.T) {
	dsn := liteDSN(t)
	b := migrated(t, dsn)
	cmd, stdin, stdout := startChild(t, childEnv+"="+dsn) // the child reads no input
	defer func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	ctx := testCtx(t)
	s := openSession(t, b, longTTL)
	mine, err := contend(ctx, b, s, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var theirs []int64
	var held int64
	sc := bufio.NewScanner(stdout)
	for held == 0 && sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("child said %q", sc.Text())
		}
		switch f[0] {
		case "token":
			theirs = append(theirs, n)
		case "holding":
			held = n
		}
	}
	if held == 0 {
		t.Fatalf("the child did not take %s (%v)", killedName, sc.Err())
	}
	seen := map[int64]string{}
	for who, toks := range map[string][]int64{"parent": mine, "child": theirs} {
		if len(toks) == 0 {
			t.Errorf("the %s was never granted %s", who, sharedName)
		}
		for i, tok := range toks {
			if i > 0 && tok <= toks[i-1] {
				t.Errorf("the %s's tokens do not increase: %v", who, toks)
			}
			if other, dup := seen[tok]; dup {
				t.Errorf("token %d granted to the %s and the %s", tok, other, who)
			}
			seen[tok] = who
		}
	}
	t.Logf("parent granted %d times, child %d times", len(mine), len(theirs))

	// The child holds killedName; kill it hard.
	if r, err := b.Acquire(ctx, s, killedName); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("Acquire of the child's lease = %+v, %v; want held by the child", r, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed := time.Now()
	for {
		r, err := b.Acquire(ctx, s, killedName)
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind == spi.Granted {
			if r.Token <= held {
				t.Fatalf("takeover token %d, the killed child held %d", r.Token, held)
			}
			break
		}
		if time.Since(killed) > 10*childTTL {
			t.Fatalf("the killed child's lease is still held after %v: %+v", time.Since(killed), r)
		}
		time.Sleep(r.Remaining + time.Millisecond)
	}
	if wait := time.Since(killed); wait > childTTL+time.Second {
		t.Errorf("takeover took %v after the kill, TTL %v", wait, childTTL)
	}
}
