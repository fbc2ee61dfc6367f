package simba_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// levelCount counts the lines of a text log by level, and those whose message is msg.
func levelCount(log string) map[string]int {
	n := map[string]int{}
	for _, l := range strings.Split(log, "\n") {
		for _, lv := range []string{"DEBUG", "INFO", "WARN", "ERROR"} {
			if strings.Contains(l, "level="+lv+" ") {
				n[lv]++
			}
		}
	}
	return n
}

// linesWith returns the lines of log that contain every one of subs.
func linesWith(log string, subs ...string) []string {
	var out []string
next:
	for _, l := range strings.Split(log, "\n") {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// outageLogDuration is how long TestOutageLogRedis's outage lasts (several TTLs: the session
// is lost and re-opened in it).
const outageLogDuration = 20 * time.Second

// TestOutageLogRedis: a client with a session, 50 elections it leads, 5 Locks waiting for
// another client's locks and a partition group, on a private Redis behind a fault proxy that
// cuts it off (every connection reset, new ones refused) for several TTLs. Every failed call
// is an event, but the log says it in a few lines: the first failure at WARN, the repeats at
// DEBUG (one WARN a minute summarising them), and one INFO line when the backend is back. The
// old log had a WARN line per failed call: 80 in a 60 s outage; now 4 for 77, one per root
// cause (EOF, a reset, a broken pipe, a timeout).
func TestOutageLogRedis(t *testing.T) {
	testenv.Short(t, "a real outage of several seconds")
	addr := testenv.PrivateRedis(t)
	proxy := faultproxy.StartTest(t, addr)
	open := func(a string) spi.Backend {
		b, err := redis.Open("redis://" + a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	ctx := context.Background()
	closeClient := func(c *simba.Client) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c.Close(ctx) //nolint:errcheck
	}

	// The holder of the locks the client waits for, straight to the server: not cut off.
	holder, err := simba.New(open(addr), simba.WithOwner("holder"), simba.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient(holder)
	for i := range 5 {
		if _, err := holder.Lock(ctx, fmt.Sprintf("lock-%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	var logs testenv.LogBuffer
	var failures atomic.Int64
	c, err := simba.New(open(proxy.Addr()), simba.WithOwner("a"), simba.WithTTL(3*time.Second),
		simba.WithLogger(logs.Logger()), simba.WithListener(func(ev simba.Event) {
			if ev.Kind == simba.EventBackendError {
				failures.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient(c)
	elections := startElections(t, ctx, c, 50)
	g, err := c.JoinGroup(ctx, "g", 8)
	if err != nil {
		t.Fatal(err)
	}
	lockCtx, stopLocks := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopLocks(); wg.Wait() }()
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Lock(lockCtx, fmt.Sprintf("lock-%d", i)) //nolint:errcheck // ends with lockCtx
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s did not happen within a minute", what)
			}
		}
	}
	leadsAll := func() bool {
		for _, e := range elections {
			if !e.IsLeader() {
				return false
			}
		}
		return len(g.Held()) == 8
	}
	waitFor("leading every election and partition", leadsAll)
	time.Sleep(500 * time.Millisecond) // the waiting Locks are queued
	before := levelCount(logs.String())
	mark := len(logs.String())

	proxy.Set(faultproxy.Fault{Cut: true, Reset: true})
	time.Sleep(outageLogDuration)
	outage := logs.String()[mark:]
	down, fails := levelCount(outage), failures.Load()
	proxy.Heal()
	t.Logf("in the %v outage: %v for %d failed calls", outageLogDuration, down, fails)
	waitFor("leading every election and partition again", leadsAll)
	after := levelCount(logs.String()[mark+len(outage):])
	t.Logf("before the outage: %v; after it: %v (%d failed calls in all)", before, after, failures.Load())
	t.Logf("the WARN and recovery lines:\n%s", strings.Join(append(linesWith(outage, "level=WARN"),
		linesWith(logs.String()[mark+len(outage):], "level=WARN")...), "\n"))
	t.Logf("%s", strings.Join(linesWith(logs.String()[mark:], "reachable again"), "\n"))
	if fails < 20 {
		t.Fatalf("%d failed calls in the outage: it did not happen", fails)
	}
	// The first failure of each distinct cause (EOF, a reset, a broken pipe, a timeout: 4 in a
	// 60 s outage), and a summary a minute.
	if maxWarn := 9 + int(outageLogDuration/time.Minute); down["WARN"] < 1 || down["WARN"] > maxWarn {
		t.Errorf("%d WARN lines in the outage for %d failed calls, want 1..%d:\n%s", down["WARN"], fails, maxWarn,
			strings.Join(linesWith(outage, "level=WARN"), "\n"))
	}
	if n := len(linesWith(logs.String()[mark:], "level=INFO", "simba backend reachable again", "failures=")); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, strings.Join(linesWith(logs.String()[mark:], "level=INFO"), "\n"))
	}
}
