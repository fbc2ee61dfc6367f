package testenv

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	fatals []string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Logf(format string, a ...any) { r.TB.Logf(format, a...) }
func (r *recorder) Fatalf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fatals = append(r.fatals, fmt.Sprintf(format, a...))
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestRequiredServiceIsWaitedFor: a required service that does not answer at a test's start
// but comes back within the wait (a shared server CI's watcher starts again) passes the check,
// and one that does not come back fails it, and then every later check at once.
func TestRequiredServiceIsWaitedFor(t *testing.T) {
	t.Setenv("SIMBA_REQUIRE_SERVICES", "1")
	t.Setenv("SIMBA_SERVICE_WAIT", "5s")
	addr := freeAddr(t)
	up := make(chan net.Listener, 1)
	time.AfterFunc(300*time.Millisecond, func() {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			up <- nil
			return
		}
		up <- l
	})
	r := &recorder{TB: t}
	if got := need(r, "Back-soon", "dsn", addr); got != "dsn" || len(r.fatals) != 0 {
		t.Fatalf("need of a service back within the wait = %q, fatals %q; want dsn and none", got, r.fatals)
	}
	if l := <-up; l != nil {
		l.Close()
	} else {
		t.Fatal("could not listen again on " + addr)
	}

	t.Setenv("SIMBA_SERVICE_WAIT", "300ms")
	gone := freeAddr(t)
	r = &recorder{TB: t}
	need(r, "Gone", "", gone)
	if len(r.fatals) != 1 || !strings.Contains(r.fatals[0], "Gone is required") {
		t.Fatalf("need of a service that stays away: fatals %q, want one saying it is required", r.fatals)
	}
	// The second check does not wait again: a long wait now would show.
	t.Setenv("SIMBA_SERVICE_WAIT", "1h")
	done := make(chan struct{})
	r = &recorder{TB: t}
	go func() { need(r, "Gone", "", gone); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a service waited for in vain was waited for again")
	}
	if len(r.fatals) != 1 || !strings.Contains(r.fatals[0], "earlier in this run") {
		t.Fatalf("second check of a service that stayed away: fatals %q, want one naming the earlier wait", r.fatals)
	}
}
