package fencehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencehttp"
	"github.com/simba-go/simba/fence/internal/fencetest"
)

// store is the fenced resource behind the guard: documents by path.
type store struct {
	mu   sync.Mutex
	docs map[string]string
}

func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		if s.docs == nil {
			s.docs = map[string]string{}
		}
		s.docs[r.URL.Path] = string(body)
		w.WriteHeader(http.StatusNoContent)
	default:
		_, _ = io.WriteString(w, s.docs[r.URL.Path])
	}
}

// server serves PUT through the guard and GET without it.
func server(t *testing.T, g *fencehttp.Guard) *httptest.Server {
	t.Helper()
	s := &store{}
	guarded := g.Wrap(s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			guarded.ServeHTTP(w, r)
			return
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// client returns a fenced write of a document and a read of it.
func client(srv *httptest.Server, path string) (fencetest.WriteFunc, fencetest.ReadFunc) {
	c := &http.Client{Transport: &fencehttp.Transport{Base: srv.Client().Transport}}
	write := func(ctx context.Context, token int64, value string) error {
		req, err := http.NewRequestWithContext(fencehttp.WithToken(ctx, token), http.MethodPut, srv.URL+path, strings.NewReader(value))
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("PUT %s: %s", path, resp.Status)
		}
		return nil
	}
	read := func(ctx context.Context) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			return "", err
		}
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	return write, read
}

// TestPausedHolderRejected: two Simba clients on one SQLite file take turns at a lock; the
// paused ex-holder's PUT with its old token is refused after the new holder's PUT.
func TestPausedHolderRejected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "simba.db")
	open := func() *simbasql.Backend {
		b, err := simbasql.Open(ctx, dsn, simbasql.WithAutoMigrate())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	a, b := open(), open()
	g := &fencehttp.Guard{}
	write, read := client(server(t, g), "/invoices/42")
	_, tokenB := fencetest.PausedHolder(t, a, b, "invoice-42", write, read)
	if h, ok := g.Highest("/invoices/42"); !ok || h != tokenB {
		t.Fatalf("Highest = %d, %v; want %d", h, ok, tokenB)
	}
}

// TestInterleavedWriters: many goroutines PUT one path with interleaved tokens; the document
// ends with the highest token's value.
func TestInterleavedWriters(t *testing.T) {
	srv := server(t, &fencehttp.Guard{})
	for round := range 5 {
		write, read := client(srv, fmt.Sprintf("/accounts/%d", round))
		fencetest.Interleaved(t, fencetest.Seed(t), 32, 8, write, read)
	}
}

// TestResourceFunc: with a resource function, paths of one collection share a fence.
func TestResourceFunc(t *testing.T) {
	g := &fencehttp.Guard{Resource: func(r *http.Request) string { return "invoices" }}
	srv := server(t, g)
	ctx := context.Background()
	w42, _ := client(srv, "/invoices/42")
	w43, _ := client(srv, "/invoices/43")
	if err := w42(ctx, 10, "a"); err != nil {
		t.Fatal(err)
	}
	err := w43(ctx, 9, "b")
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Resource != "invoices" || stale.Highest != 10 || stale.Token != 9 {
		t.Fatalf("token 9 on another path of the collection after 10: %v", err)
	}
	// By default each path is its own resource.
	srv2 := server(t, &fencehttp.Guard{})
	w42, _ = client(srv2, "/invoices/42")
	w43, _ = client(srv2, "/invoices/43")
	if err := w42(ctx, 10, "a"); err != nil {
		t.Fatal(err)
	}
	if err := w43(ctx, 9, "b"); err != nil {
		t.Fatalf("default resource (the path): token 9 on another path refused: %v", err)
	}
}

// TestMissingAndMalformedTokens: no token is 428 (or passes with AllowMissing), a malformed one
// 400 — any but the canonical decimal SetToken writes: leading zeros, a sign (even "-0"),
// spaces, separators, non-ASCII digits, empty, beyond int64 — and the handler sees the
// admitted token.
func TestMissingAndMalformedTokens(t *testing.T) {
	var seen []int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := fencehttp.Token(r.Context())
		if ok {
			seen = append(seen, tok)
		}
	})
	do := func(g *fencehttp.Guard, header []string) int {
		req := httptest.NewRequest(http.MethodPut, "/x", nil)
		for _, v := range header {
			req.Header.Add(fencehttp.Header, v)
		}
		rec := httptest.NewRecorder()
		g.Wrap(h).ServeHTTP(rec, req)
		return rec.Code
	}
	g := &fencehttp.Guard{}
	for _, c := range []struct {
		header []string
		want   int
	}{
		{nil, http.StatusPreconditionRequired},
		{[]string{"abc"}, http.StatusBadRequest},
		{[]string{"-1"}, http.StatusBadRequest},
		{[]string{"+5"}, http.StatusBadRequest},
		// Only the canonical spelling SetToken writes: ParseInt read "007" as 7 and "-0" as 0.
		{[]string{"005"}, http.StatusBadRequest},
		{[]string{"-0"}, http.StatusBadRequest},
		{[]string{"00"}, http.StatusBadRequest},
		{[]string{"5 "}, http.StatusBadRequest},
		{[]string{" 5"}, http.StatusBadRequest},
		{[]string{"5\t"}, http.StatusBadRequest},
		{[]string{"5_0"}, http.StatusBadRequest},
		{[]string{"٥"}, http.StatusBadRequest},
		{[]string{""}, http.StatusBadRequest},
		{[]string{"9223372036854775808"}, http.StatusBadRequest},
		{[]string{"1", "2"}, http.StatusBadRequest},
		{[]string{"5"}, http.StatusOK},
		{[]string{"4"}, http.StatusConflict},
		{[]string{"5"}, http.StatusOK},
	} {
		if got := do(g, c.header); got != c.want {
			t.Errorf("header %q: status %d, want %d", c.header, got, c.want)
		}
	}
	if len(seen) != 2 || seen[0] != 5 || seen[1] != 5 {
		t.Errorf("the handler saw tokens %v, want [5 5]", seen)
	}
	if got := do(&fencehttp.Guard{AllowMissing: true}, nil); got != http.StatusOK {
		t.Errorf("AllowMissing without a token: %d", got)
	}
	if err := g.Check("/x", 4); !errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("Check(4) after 5: %v", err)
	}
	if err := g.Check("/x", 6); err != nil {
		t.Errorf("Check(6) after 5: %v", err)
	}
}

// TestTransportLeavesRequestAlone: the round-tripper sets the header on a clone, keeps a header
// the request set itself, and passes other statuses through.
func TestTransportLeavesRequestAlone(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get(fencehttp.Header))
		w.WriteHeader(http.StatusConflict) // a 409 that is not the guard's
	}))
	defer srv.Close()
	tr := &fencehttp.Transport{Base: srv.Client().Transport}
	req, _ := http.NewRequestWithContext(fencehttp.WithToken(context.Background(), 77), http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.Header.Get(fencehttp.Header) != "" {
		t.Error("RoundTrip modified the caller's request")
	}
	req2, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	fencehttp.SetToken(req2, 5)
	resp, err = tr.RoundTrip(req2.WithContext(fencehttp.WithToken(context.Background(), 77)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 2 || got[0] != "77" || got[1] != "5" {
		t.Errorf("server saw tokens %q, want [77 5]", got)
	}
}

// TestAbandonedWaiterNotAdmitted: a request that waits for its resource while another one's
// handler runs (a holder paused mid-upload holds it so) and whose client gives up meanwhile is
// not admitted once the resource frees: its token is not recorded, its handler does not run.
// The guard used to wait on a mutex that ignored the request's context, so every abandoned
// request stayed parked on the server and later ran a write its client had been told failed.
func TestAbandonedWaiterNotAdmitted(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var ran []int64
	g := &fencehttp.Guard{}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fencehttp.Token(r.Context())
		mu.Lock()
		ran = append(ran, tok)
		mu.Unlock()
		if tok == 5 {
			close(entered)
			<-release // the slow holder: the resource stays held
		}
	}))
	put := func(ctx context.Context, token int64) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(ctx, http.MethodPut, "/doc", nil)
		fencehttp.SetToken(req, token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	var wg sync.WaitGroup
	wg.Go(func() { put(context.Background(), 5) })
	<-entered
	gone, cancel := context.WithCancel(context.Background())
	cancel() // the waiter's client has given up (a timeout, a closed connection)
	var rec *httptest.ResponseRecorder
	wg.Go(func() { rec = put(gone, 7) })
	close(release)
	wg.Wait()
	if rec.Code < 400 {
		t.Errorf("the abandoned request got %d, want an error status", rec.Code)
	}
	if len(ran) != 1 {
		t.Errorf("the handler ran for tokens %v, want only [5]", ran)
	}
	if hi, _ := g.Highest("/doc"); hi != 5 {
		t.Errorf("Highest = %d, want 5: the abandoned request's token was recorded", hi)
	}
}

// TestParseTokenSaysWhy: ParseToken refuses each non-canonical spelling of a token with an
// error matching ErrNoToken that says what is wrong, and reads the canonical ones. Before,
// strconv.ParseInt read "007" as 7 and "-0" as 0, and both were admitted.
func TestParseTokenSaysWhy(t *testing.T) {
	for _, c := range []struct{ in, why string }{
		{"007", "leading zeros"},
		{"00", "leading zeros"},
		{"+7", "a sign"},
		{"-0", "a sign"},
		{"-7", "a sign"},
		{" 7", "not a plain decimal"},
		{"7 ", "not a plain decimal"},
		{"7e3", "not a plain decimal"},
		{"0x7", "not a plain decimal"},
		{"", "empty"},
		{"9223372036854775808", "out of range"},
	} {
		h := http.Header{fencehttp.Header: {c.in}}
		_, ok, err := fencehttp.ParseToken(h)
		if !ok || !errors.Is(err, fencehttp.ErrNoToken) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseToken(%q) = ok %v, %v; want ErrNoToken saying %q", c.in, ok, err, c.why)
		}
	}
	for _, c := range []struct {
		in   string
		want int64
	}{{"0", 0}, {"7", 7}, {"10", 10}, {"9223372036854775807", 1<<63 - 1}} {
		got, ok, err := fencehttp.ParseToken(http.Header{fencehttp.Header: {c.in}})
		if !ok || err != nil || got != c.want {
			t.Errorf("ParseToken(%q) = %d, %v, %v; want %d", c.in, got, ok, err, c.want)
		}
	}
}
