package simbahttp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/clocktest"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// until polls cond until it holds or the deadline passes.
func until(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func status(t *testing.T, url string) simbahttp.Status {
	t.Helper()
	code, body := get(t, url+"/status")
	if code != http.StatusOK {
		t.Fatalf("/status: %d %s", code, body)
	}
	var st simbahttp.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/status: %v in %s", err, body)
	}
	return st
}

// /healthz answers 503 within one TTL of cutting the client's link to its backend (its
// session's local deadline passes: the client no longer knows it is live), with the reason, and
// 200 again once the link is restored and a new session opens. The client and the server run
// on virtual time, so the TTL is measured on it: how loaded the machine is does not count.
func TestHealthzFollowsTheSessionAcrossACut(t *testing.T) {
	const ttl = 3 * time.Second
	clock := simbatest.NewVirtualClock()
	srv := simbatest.NewServer(simbatest.WithClock(clock))
	link := simbatest.NewLink(srv.Backend())
	h := simbahttp.New(simbahttp.Opts{Backend: link.Backend()})
	c, err := simba.New(link.Backend(), append(h.Options(), simba.WithOwner("node-a"), simba.WithTTL(ttl),
		simba.WithMargin(300*time.Millisecond), simba.WithDrift(0.05), simba.WithClock(clock))...)
	if err != nil {
		t.Fatal(err)
	}
	h.Attach(c)
	defer clocktest.Close(clock, 10*time.Second, c.Close)
	hs := httptest.NewServer(h)
	defer hs.Close()
	// vuntil advances virtual time 10 ms at a time (each step waits until the client is idle,
	// its listeners run) until cond holds or limit of virtual time has passed.
	vuntil := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		for end := clock.Now() + limit; !cond(); clock.Advance(10 * time.Millisecond) {
			if clock.Now() >= end {
				t.Fatalf("after %v of virtual time: no %s", limit, what)
			}
		}
	}

	var code int
	var body string
	vuntil("live session", 10*time.Second, func() bool {
		code, _ := get(t, hs.URL+"/healthz")
		return code == http.StatusOK
	})
	// Let one keep-alive go through, so the cut lands mid-session.
	n := srv.Calls("KeepAlive")
	vuntil("keep-alive", 10*time.Second, func() bool { return srv.Calls("KeepAlive") > n })

	cut := clock.Now()
	link.CutOff()
	vuntil("503 after the cut", 10*ttl, func() bool {
		code, body = get(t, hs.URL+"/healthz")
		return code == http.StatusServiceUnavailable
	})
	if took := clock.Now() - cut; took > ttl {
		t.Fatalf("503 came %v (virtual) after the cut, more than one TTL (%v)", took, ttl)
	} else {
		t.Logf("503 %v (virtual) after the cut: %s", took, strings.TrimSpace(body))
	}
	if !strings.Contains(body, "lost (deadline)") {
		t.Fatalf("503 without the reason: %q", body)
	}
	if strings.Contains(body, "paused") {
		t.Fatalf("a network cut read as a pause of the process: %q", body)
	}

	link.Restore()
	vuntil("200 after healing", 10*ttl, func() bool {
		code, body = get(t, hs.URL+"/healthz")
		return code == http.StatusOK
	})
	t.Logf("after healing: %s", strings.TrimSpace(body))
	if st := status(t, hs.URL); !st.Healthy || !st.Session.Live || st.Session.ID != c.Session() {
		t.Fatalf("status after healing: %+v (client session %s)", st.Session, c.Session())
	}

	if err := clocktest.Close(clock, 10*time.Second, c.Close); err != nil {
		t.Fatal(err)
	}
	code, body = get(t, hs.URL+"/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "client closed") {
		t.Fatalf("after Close: %d %q", code, body)
	}
}

// A handler whose client has not opened a session yet is unhealthy, and says so.
func TestHealthzBeforeAnySession(t *testing.T) {
	h := simbahttp.New(simbahttp.Opts{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "no session yet") {
		t.Fatalf("%d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nope", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("/nope: %d", rec.Code)
	}
}

// /status and the page show the holder of an election with its token (from the backend's
// Inspector and from the client's own terms), the timeline of terms across a failover, and a
// group's members and partitions.
func TestStatusAndPage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	type node struct {
		c  *simba.Client
		e  *simba.Election
		hs *httptest.Server
	}
	var nodes []node
	for _, owner := range []string{"node-a", "node-b"} {
		b := srv.Backend()
		h := simbahttp.New(simbahttp.Opts{Backend: b, Title: "Simba test"})
		c, err := simba.New(b, append(h.Options(), simba.WithOwner(owner), simba.WithTTL(3*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		h.Attach(c)
		defer c.Close(ctx)
		e, err := c.NewElection("leader")
		if err != nil {
			t.Fatal(err)
		}
		h.Track(e)
		g, err := c.JoinGroup(ctx, "shards", 4)
		if err != nil {
			t.Fatal(err)
		}
		h.Track(g)
		hs := httptest.NewServer(h)
		defer hs.Close()
		nodes = append(nodes, node{c, e, hs})
	}
	if err := nodes[0].e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, "node-a to lead", 10*time.Second, nodes[0].e.IsLeader)
	if err := nodes[1].e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t1, _ := nodes[0].e.Term()

	until(t, "both members, the four partitions shared out", 10*time.Second, func() bool {
		total := 0
		for _, n := range nodes {
			st := status(t, n.hs.URL)
			if len(st.Groups) != 1 || len(st.Groups[0].Members) != 2 || st.Groups[0].Count != 4 {
				return false
			}
			total += len(st.Groups[0].Partitions)
		}
		return total == 4
	})
	for i, n := range nodes {
		st := status(t, n.hs.URL)
		var found bool
		for _, hd := range st.Holders {
			if hd.Name == "leader" {
				found = true
				if hd.Owner != "node-a" || hd.Token != t1.Token() || hd.Self != (i == 0) || hd.Source != "backend" {
					t.Errorf("node %d sees holder %+v, want node-a with token %d", i, hd, t1.Token())
				}
			}
		}
		if !found || st.Backend == nil || len(st.Backend.Sessions) != 2 {
			t.Errorf("node %d status: holders %+v backend %+v", i, st.Holders, st.Backend)
		}
	}
	st := status(t, nodes[0].hs.URL)
	if len(st.Terms) == 0 || st.Terms[0].Name != "leader" || st.Terms[0].Token != t1.Token() || st.Terms[0].RemainingMillis <= 0 {
		t.Fatalf("node-a's terms: %+v", st.Terms)
	}

	// Fail over: node-a steps down; node-b takes the lease with a greater token.
	if err := nodes[0].e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, "node-b to lead", 10*time.Second, nodes[1].e.IsLeader)
	t2, _ := nodes[1].e.Term()
	// node-a's handler sees node-b once its snapshot is newer than the takeover (at most
	// Opts.SnapshotTTL later).
	var tl []*simbahttp.Entry
	until(t, "node-a's status to show node-b's term", 10*time.Second, func() bool {
		tl = status(t, nodes[0].hs.URL).Timeline["leader"]
		return len(tl) == 2
	})
	if len(tl) != 2 || tl[0].Owner != "node-a" || tl[0].Token != t1.Token() || tl[0].Until == nil ||
		tl[0].Reason != "stopped" || !tl[0].Self || tl[1].Owner != "node-b" || tl[1].Token != t2.Token() ||
		tl[1].Until != nil || tl[1].Self {
		b, _ := json.Marshal(tl)
		t.Fatalf("node-a's timeline of leader: %s", b)
	}

	code, page := get(t, nodes[0].hs.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("page: %d", code)
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="2">`,
		`data-name="leader" data-holder="node-b" data-token="` + itoa(t2.Token()) + `"`,
		`data-token="` + itoa(t1.Token()) + `" data-holder="node-a"`,
		`data-group="shards"`,
		`<span class="badge live" id="health">live</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, "ZgotmplZ") {
		t.Errorf("the template rejected a value: %s", page)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// keys returns the sorted keys of the JSON object v (nil when v is not one).
func keys(v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// snakeKeys reports the keys of the objects in v that are not snake_case (lower case letters,
// digits and '_'), skipping the keys of the timeline, which are lease names.
func snakeKeys(path string, v any, bad *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if path != ".timeline" && strings.ToLower(k) != k {
				*bad = append(*bad, path+"."+k)
			}
			snakeKeys(path+"."+k, x, bad)
		}
	case []any:
		for _, x := range v {
			snakeKeys(path+"[]", x, bad)
		}
	}
}

// The backend's snapshot in /status speaks the status's dialect: snake_case keys named as
// elsewhere in the document (name, session, owner, token, id, members) and the time left in
// milliseconds (remaining_ms, -1 when the backend cannot tell), not spi.Snapshot's Go field
// names with the time left in nanoseconds.
func TestBackendSnapshotJSON(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	insp := &scriptedInspector{Backend: srv.Backend()}
	insp.set(nil, &spi.Snapshot{
		Leases: []spi.LeaseInfo{
			{Name: "held", Holder: "s1", Owner: "node-b", Token: 8, Remaining: 1500 * time.Millisecond},
			{Name: "zk-held", Holder: "0x1", Owner: "node-c", Token: 7, RemainingUnknown: true},
		},
		Sessions: []spi.SessionInfo{
			{ID: "s1", Owner: "node-b", Remaining: 2500 * time.Millisecond},
			{ID: "0x1", Owner: "node-c", RemainingUnknown: true},
		},
		Groups: map[string][]spi.SessionID{"shards": {"0x1", "s1"}},
	}, nil)
	hs := httptest.NewServer(simbahttp.New(simbahttp.Opts{Backend: insp}))
	defer hs.Close()
	code, body := get(t, hs.URL+"/status")
	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); code != http.StatusOK || err != nil {
		t.Fatalf("/status: %d %v: %s", code, err, body)
	}
	backend, _ := doc["backend"].(map[string]any)
	if got := keys(backend); !slices.Equal(got, []string{"groups", "leases", "sessions"}) {
		t.Fatalf("backend keys %v: %s", got, body)
	}
	leases, _ := backend["leases"].([]any)
	sessions, _ := backend["sessions"].([]any)
	groups, _ := backend["groups"].([]any)
	if len(leases) != 2 || len(sessions) != 2 || len(groups) != 1 {
		t.Fatalf("backend: %d leases, %d sessions, %d groups, want 2, 2, 1: %s", len(leases), len(sessions), len(groups), body)
	}
	for _, c := range []struct {
		what string
		obj  any
		keys []string
	}{
		{"backend.leases[0]", leases[0], []string{"name", "owner", "remaining_ms", "session", "token"}},
		{"backend.sessions[0]", sessions[0], []string{"id", "owner", "remaining_ms"}},
		{"backend.groups[0]", groups[0], []string{"members", "name"}},
	} {
		if got := keys(c.obj); !slices.Equal(got, c.keys) {
			t.Errorf("%s has the keys %v, want %v", c.what, got, c.keys)
		}
	}
	// encoding/json decodes numbers as float64: 1500 is exact.
	for _, c := range []struct {
		what string
		obj  any
		want map[string]any
	}{
		{"backend.leases[0]", leases[0], map[string]any{"name": "held", "session": "s1", "owner": "node-b", "token": 8.0, "remaining_ms": 1500.0}},
		{"backend.leases[1]", leases[1], map[string]any{"name": "zk-held", "session": "0x1", "owner": "node-c", "token": 7.0, "remaining_ms": -1.0}},
		{"backend.sessions[0]", sessions[0], map[string]any{"id": "s1", "owner": "node-b", "remaining_ms": 2500.0}},
		{"backend.sessions[1]", sessions[1], map[string]any{"id": "0x1", "owner": "node-c", "remaining_ms": -1.0}},
		{"backend.groups[0]", groups[0], map[string]any{"name": "shards", "members": []any{"0x1", "s1"}}},
	} {
		m, _ := c.obj.(map[string]any)
		for k, want := range c.want {
			if got := m[k]; !reflect.DeepEqual(got, want) {
				t.Errorf("%s.%s = %v, want %v", c.what, k, got, want)
			}
		}
	}
	// One dialect: every key of the document is snake_case.
	var bad []string
	snakeKeys("", doc, &bad)
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("keys not in snake_case: %v", bad)
	}

	// The page's backend sessions read the same: 2.5 s left, and "—" where the backend cannot
	// tell (not "0s", which would read as a session about to expire).
	code, page := get(t, hs.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("page: %d", code)
	}
	for _, want := range []string{
		`<tr><td class="mono">s1</td><td>node-b</td><td>2.5s</td></tr>`,
		`<tr><td class="mono">0x1</td><td>node-c</td><td>—</td></tr>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}
