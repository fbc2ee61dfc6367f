package simbahttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// countingInspector decorates a backend's Inspector: it counts the Inspects and, while gate is
// open (not nil and not closed), holds each until gate closes.
type countingInspector struct {
	spi.Backend
	n    atomic.Int64
	gate chan struct{}
}

func (c *countingInspector) Inspect(ctx context.Context) (spi.Snapshot, error) {
	c.n.Add(1)
	if c.gate != nil {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return spi.Snapshot{}, ctx.Err()
		}
	}
	return c.Backend.(spi.Inspector).Inspect(ctx)
}

// client opens a client on b with the handler h (nil: none) and closes it at the test's end.
func client(t *testing.T, b spi.Backend, owner string, h *simbahttp.Handler) *simba.Client {
	t.Helper()
	opts := []simba.Option{simba.WithOwner(owner), simba.WithTTL(5 * time.Second)}
	if h != nil {
		opts = append(h.Options(), opts...)
	}
	c, err := simba.New(b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if h != nil {
		h.Attach(c)
	}
	return c
}

func lock(t *testing.T, ctx context.Context, c *simba.Client, name string) *simba.Held {
	t.Helper()
	held, err := c.Lock(ctx, name)
	if err != nil {
		t.Fatalf("Lock(%s): %v", name, err)
	}
	return held
}

// The outside trial's shape: a client with per-entity locks leaves a free lease record per
// name it ever used (2,000 here, as SQL rows and Redis hashes do). /status lists the held
// leases only, counts the free ones, and stays under 20 KB; the timeline keeps 20 names, the
// held ones and the most recently ended; ?free=1 lists the free records too.
func TestStatusIsBoundedByLiveLeases(t *testing.T) {
	t.Run("simbatest", func(t *testing.T) {
		srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
		_, _ = testStatusIsBounded(t, srv.Backend(), srv.Backend())
	})
	t.Run("sqlite", func(t *testing.T) {
		dsn := "sqlite://" + filepath.Join(t.TempDir(), "simba.db")
		var bs [2]spi.Backend
		for i := range bs {
			b, err := simbasql.Open(context.Background(), dsn, simbasql.WithAutoMigrate())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			bs[i] = b
		}
		status, page := testStatusIsBounded(t, bs[0], bs[1])
		checkSizesAsQuoted(t, status, page)
	})
}

// checkSizesAsQuoted checks the sizes of /status and the page that the README quotes for this
// test's shape on SQLite ("/status is 9.5 KB and the page 21 KB"), within 10 %: they vary by a
// few bytes from run to run (times, the length of ids), and by more when the output changes.
func checkSizesAsQuoted(t *testing.T, status, page int) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("on SQLite, `/status` is ([0-9.]+) KB and the page ([0-9.]+) KB").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md no longer quotes the sizes of /status and the page (\"on SQLite, `/status` is … KB and the page … KB\")")
	}
	for _, c := range []struct {
		what   string
		quoted []byte
		got    int
	}{{"/status", m[1], status}, {"the page", m[2], page}} {
		kb, err := strconv.ParseFloat(string(c.quoted), 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := float64(c.got) / 1000; got < kb*0.9 || got > kb*1.1 {
			t.Errorf("%s is %.1f KB; README.md says %s KB", c.what, got, c.quoted)
		}
	}
}

// testStatusIsBounded runs TestStatusIsBoundedByLiveLeases with node-a, whose status is served,
// on a and node-b on b (the same backend store), and returns the sizes of /status and the page.
func testStatusIsBounded(t *testing.T, a, b spi.Backend) (statusBytes, pageBytes int) {
	const names = 2000
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	h := simbahttp.New(simbahttp.Opts{Backend: a})
	c := client(t, a, "node-a", h)
	other := client(t, b, "node-b", nil)

	tokens := make(map[string]int64)
	for i := range 3 {
		name := fmt.Sprintf("held-%d", i)
		tokens[name] = lock(t, ctx, c, name).Token()
	}
	tokens["other"] = lock(t, ctx, other, "other").Token()
	for i := range names {
		if err := lock(t, ctx, c, fmt.Sprintf("entity-%04d", i)).Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The listener has seen the last unlock once the client holds the three only.
	until(t, "the handler to see the last unlock", 10*time.Second, func() bool {
		st := h.Status(ctx)
		tl := st.Timeline[fmt.Sprintf("entity-%04d", names-1)]
		return len(st.Terms) == 3 && len(tl) == 1 && tl[0].Until != nil
	})

	hs := httptest.NewServer(h)
	defer hs.Close()
	code, body := get(t, hs.URL+"/status")
	statusLen := len(body)
	if code != http.StatusOK {
		t.Fatalf("/status: %d", code)
	}
	var st simbahttp.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("/status: %d bytes, %d leases listed, %d free left out, %d timeline names",
		len(body), len(st.Backend.Leases), st.FreeLeases, len(st.Timeline))
	if len(body) > 20<<10 {
		t.Errorf("/status is %d bytes, more than 20 KB", len(body))
	}
	if st.Backend == nil || len(st.Backend.Leases) != len(tokens) || st.FreeLeases != names {
		t.Fatalf("backend snapshot %+v with %d free left out; want the %d held leases and %d free", st.Backend, st.FreeLeases, len(tokens), names)
	}
	for _, l := range st.Backend.Leases {
		want := "node-a"
		if l.Name == "other" {
			want = "node-b"
		}
		if l.Token != tokens[l.Name] || l.Owner != want || l.Session == "" {
			t.Errorf("lease %+v, want held by %s with token %d", l, want, tokens[l.Name])
		}
	}
	if len(st.Holders) != len(tokens) || len(st.Backend.Sessions) != 2 {
		t.Errorf("holders %+v, sessions %+v", st.Holders, st.Backend.Sessions)
	}

	// The timeline: the four current terms, then the sixteen names that ended last.
	if len(st.Timeline) != 20 {
		t.Errorf("the timeline keeps %d names, want 20", len(st.Timeline))
	}
	for name := range tokens {
		if tl := st.Timeline[name]; len(tl) != 1 || tl[0].Until != nil || tl[0].Token != tokens[name] {
			t.Errorf("timeline of %s: %s, want its current term", name, timelineJSON(st, name))
		}
	}
	for i := names - 16; i < names; i++ {
		name := fmt.Sprintf("entity-%04d", i)
		if tl := st.Timeline[name]; len(tl) != 1 || tl[0].Until == nil || tl[0].Reason != "stopped" {
			t.Errorf("timeline of %s: %s, want its ended term (unlocked: stopped)", name, timelineJSON(st, name))
		}
	}

	code, page := get(t, hs.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("page: %d", code)
	}
	t.Logf("page: %d bytes, %d timeline lines", len(page), strings.Count(page, `<div class="line"`))
	if n := strings.Count(page, `<div class="line"`); n != 20 || len(page) > 64<<10 {
		t.Errorf("the page is %d bytes with %d timeline lines, want at most 64 KB and 20", len(page), n)
	}

	// ?free=1 lists the free records as well.
	code, body = get(t, hs.URL+"/status?free=1")
	var all simbahttp.Status
	if err := json.Unmarshal([]byte(body), &all); code != http.StatusOK || err != nil {
		t.Fatalf("/status?free=1: %d %v", code, err)
	}
	if all.Backend == nil || len(all.Backend.Leases) != names+len(tokens) || all.FreeLeases != names {
		t.Errorf("?free=1 lists %d leases with %d free, want %d and %d", len(all.Backend.Leases), all.FreeLeases, names+len(tokens), names)
	}
	return statusLen, len(page)
}

// Concurrent requests, to /status and the page, within the snapshot's time to live share one
// Inspect, in flight or done; a request that gives up waiting fails alone.
func TestConcurrentRequestsShareOneInspect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	insp := &countingInspector{Backend: srv.Backend(), gate: make(chan struct{})}
	h := simbahttp.New(simbahttp.Opts{Backend: insp, SnapshotTTL: time.Minute})
	other := client(t, srv.Backend(), "node-b", nil)
	token := lock(t, ctx, other, "shared").Token()
	hs := httptest.NewServer(h)
	defer hs.Close()

	const requests = 16
	var wg sync.WaitGroup
	bodies := make([]string, requests)
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/status"
			if i%2 == 1 {
				path = "/"
			}
			resp, err := http.Get(hs.URL + path)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Error(err)
			}
			bodies[i] = string(b)
		}()
	}
	until(t, "the first Inspect", 10*time.Second, func() bool { return insp.n.Load() >= 1 })
	// A request that ends while the Inspect is in flight gets its own context's error.
	gone, stop := context.WithCancel(ctx)
	stop()
	if st := h.Status(gone); st.Backend != nil || !strings.Contains(st.BackendError, "canceled") {
		t.Errorf("a request cancelled while waiting: backend %+v, error %q", st.Backend, st.BackendError)
	}
	close(insp.gate)
	wg.Wait()
	for i := range 4 {
		if st := h.Status(ctx); len(st.Holders) != 1 || st.Holders[0].Token != token {
			t.Errorf("sequential request %d: holders %+v", i+1, st.Holders)
		}
	}
	if n := insp.n.Load(); n != 1 {
		t.Errorf("%d concurrent and 4 sequential requests made %d Inspects, want 1", requests, n)
	}
	for i, b := range bodies {
		want := `"token": ` + itoa(token)
		if i%2 == 1 {
			want = `data-name="shared" data-holder="node-b" data-token="` + itoa(token) + `"`
		}
		if !strings.Contains(b, want) {
			t.Errorf("response %d lacks %s", i, want)
		}
	}
}

// A lease taken shows in every response that begins SnapshotTTL or more after it was taken,
// however recently an earlier request inspected.
func TestHeldLeaseShowsWithinSnapshotTTL(t *testing.T) {
	const ttl = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	insp := &countingInspector{Backend: srv.Backend()}
	h := simbahttp.New(simbahttp.Opts{Backend: insp, SnapshotTTL: ttl})
	other := client(t, srv.Backend(), "node-b", nil)
	for i := range 3 {
		name := fmt.Sprintf("job-%d", i)
		if hd, ok := holderOf(h.Status(ctx), name); ok {
			t.Fatalf("%s is free, but the status shows %+v", name, hd)
		}
		token := lock(t, ctx, other, name).Token()
		taken := time.Now()
		time.Sleep(ttl - time.Since(taken) + time.Millisecond)
		st := h.Status(ctx)
		if hd, ok := holderOf(st, name); !ok || hd.Token != token || st.BackendAt.IsZero() {
			t.Fatalf("a request %v after %s was taken: holder %+v %v (snapshot begun %v), want token %d",
				time.Since(taken), name, hd, ok, st.BackendAt, token)
		}
	}
	if n := insp.n.Load(); n < 4 {
		t.Errorf("%d Inspects for 6 requests %v apart in pairs, want at least 4", n, ttl)
	}
}

// The timeline forgets a name TimelineRetain after its last term ended, and keeps a current
// term however old.
func TestTimelineForgetsEndedNames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	h := simbahttp.New(simbahttp.Opts{Backend: srv.Backend(), Now: clock, TimelineRetain: time.Minute, SnapshotTTL: -1})
	c := client(t, srv.Backend(), "node-a", h)
	lock(t, ctx, c, "kept")
	if err := lock(t, ctx, c, "gone").Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, "the release of gone in the timeline", 10*time.Second, func() bool {
		tl := h.Status(ctx).Timeline["gone"]
		return len(tl) == 1 && tl[0].Until != nil
	})
	advance(30 * time.Second)
	if st := h.Status(ctx); len(st.Timeline) != 2 {
		t.Fatalf("30 s after gone's release the timeline has %d names, want kept and gone", len(st.Timeline))
	}
	advance(31 * time.Second)
	st := h.Status(ctx)
	if _, ok := st.Timeline["gone"]; ok || len(st.Timeline["kept"]) != 1 || len(st.Timeline) != 1 {
		b, _ := json.Marshal(st.Timeline)
		t.Fatalf("61 s after gone's release (retain 1 min): timeline %s, want kept only", b)
	}
}
