package simbahttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// While the live session's keep-alives fail (a backend restarting: trial 30 saw /healthz say
// "200 ok" for the first 2 s of a PostgreSQL restart while backend errors rose), /healthz stays
// 200 but says "degraded: …" with the run of failures, the session's time left and the last
// error, /readyz answers 503, /livez stays 200, and /status carries the same (Degraded,
// Ready). One successful keep-alive ends it. The handler's options are passed twice, as trial
// 30 passed simbaprom's, and count each failure once. Virtual time throughout.
func TestDegradedWhileKeepAlivesFail(t *testing.T) {
	const ttl = 3 * time.Second
	clock := simbatest.NewVirtualClock()
	srv := simbatest.NewServer(simbatest.WithClock(clock))
	b := srv.Backend()
	h := simbahttp.New(simbahttp.Opts{Backend: b})
	var failed atomic.Int32 // failed keep-alives, counted by an observer registered once
	countFailed := simba.WithCallObserver(func(ci simba.CallInfo) {
		if ci.Op == simba.OpKeepAlive && ci.Err != nil && !ci.Abandoned && !ci.Closing {
			failed.Add(1)
		}
	})
	opts := append(h.Options(), h.Options()...)
	c, err := simba.New(b, append(opts, countFailed, simba.WithOwner("node-a"), simba.WithTTL(ttl), simba.WithClock(clock))...)
	if err != nil {
		t.Fatal(err)
	}
	h.Attach(c)
	defer clocktest.Close(clock, 10*time.Second, c.Close)
	hs := httptest.NewServer(h)
	defer hs.Close()
	vuntil := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		for end := clock.Now() + limit; !cond(); clock.Advance(10 * time.Millisecond) {
			if clock.Now() >= end {
				t.Fatalf("after %v of virtual time: no %s", limit, what)
			}
		}
	}
	probe := func(path string) (int, string) {
		code, body := get(t, hs.URL+path)
		return code, strings.TrimSpace(body)
	}

	vuntil("ready", 10*time.Second, func() bool { code, _ := probe("/readyz"); return code == http.StatusOK })
	if code, body := probe("/healthz"); code != http.StatusOK || !strings.HasPrefix(body, "ok: session ") {
		t.Fatalf("live: /healthz %d %q", code, body)
	}

	b.FailOp("KeepAlive", spi.Unavailable("keep-alive", errBackendRestarting))
	var ready, health, live string
	vuntil("/readyz 503 while keep-alives fail", ttl, func() bool {
		code, body := probe("/readyz")
		ready = body
		return code == http.StatusServiceUnavailable
	})
	code, body := probe("/healthz")
	health = body
	if code != http.StatusOK || c.Session() == "" {
		t.Fatalf("degraded: /healthz %d %q (session %q): want 200 while the session is live", code, body, c.Session())
	}
	if code, live = probe("/livez"); code != http.StatusOK {
		t.Fatalf("degraded: /livez %d %q", code, live)
	}
	t.Logf("/readyz 503: %s", ready)
	t.Logf("/healthz 200: %s", health)
	t.Logf("/livez 200: %s", live)
	for _, want := range []string{"degraded: keep-alives failing since ", "(1 failed)",
		"session " + string(c.Session()) + " has ", " left; last error: ", errBackendRestarting.Error()} {
		if !strings.Contains(health, want) || !strings.Contains(ready, want) {
			t.Fatalf("degraded body lacks %q:\n/healthz %q\n/readyz %q", want, health, ready)
		}
	}
	st := status(t, hs.URL)
	if !st.Healthy || st.Ready || st.Degraded == nil {
		t.Fatalf("status while degraded: healthy %v ready %v degraded %+v", st.Healthy, st.Ready, st.Degraded)
	}
	if got, want := st.Degraded.Failures, int(failed.Load()); got != want || got < 1 {
		t.Fatalf("status counts %d failed keep-alives, the backend saw %d", got, want)
	}
	if rem := st.Degraded.SessionRemainingMillis; rem <= 0 || rem >= ttl.Milliseconds() {
		t.Fatalf("session time left %d ms, want in (0, %d)", rem, ttl.Milliseconds())
	}

	b.FailOp("KeepAlive", nil)
	vuntil("ready again", ttl, func() bool { code, _ := probe("/readyz"); return code == http.StatusOK })
	if code, body := probe("/healthz"); code != http.StatusOK || !strings.HasPrefix(body, "ok: session ") {
		t.Fatalf("healed: /healthz %d %q", code, body)
	}
	if st := status(t, hs.URL); !st.Ready || st.Degraded != nil {
		t.Fatalf("status healed: ready %v degraded %+v", st.Ready, st.Degraded)
	}

	if err := clocktest.Close(clock, 10*time.Second, c.Close); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/livez", "/readyz", "/healthz"} {
		if code, body := probe(path); code != http.StatusServiceUnavailable || !strings.Contains(body, "client closed") {
			t.Fatalf("after Close: %s %d %q", path, code, body)
		}
	}
}

// Without a live session /readyz and /healthz answer 503 and /livez 200: a backend down from
// the start must not make an orchestrator restart the process, which would not bring it back.
func TestLivezWithoutSession(t *testing.T) {
	h := simbahttp.New(simbahttp.Opts{})
	for path, want := range map[string]int{"/livez": http.StatusOK, "/readyz": http.StatusServiceUnavailable,
		"/healthz": http.StatusServiceUnavailable} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want || !strings.Contains(rec.Body.String(), "no session yet") {
			t.Fatalf("%s: %d %q, want %d saying no session yet", path, rec.Code, rec.Body.String(), want)
		}
	}
}

var errBackendRestarting = &restarting{}

type restarting struct{}

func (*restarting) Error() string {
	return "FATAL: the database system is starting up (SQLSTATE 57P03)"
}
