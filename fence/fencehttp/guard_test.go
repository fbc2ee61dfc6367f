package fencehttp_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencehttp"
	"github.com/simba-go/simba/fence/internal/fencetest"
)

// TestHostileTokensRefused: with Verify = fence.LeaseVerifier on the lock's SQLite backend,
// a token the lease never granted (the int64 maximum, another lease's) gets 403 and leaves
// the resource's highest alone, so the holders after it are not locked out.
func TestHostileTokensRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := simbasql.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "simba.db"), simbasql.WithAutoMigrate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	g := &fencehttp.Guard{
		Resource: func(*http.Request) string { return "invoice-42" },
		Verify:   fence.LeaseVerifier(b, nil),
	}
	write, read := client(server(t, g), "/invoices/42")
	fencetest.HostileTokens(t, b, "invoice-42", write, read)
	if n := g.Resources(); n != 1 {
		t.Fatalf("Resources() = %d, want 1", n)
	}
}

// serve sends a PUT of path with token through h and returns the recorded answer.
func serve(h http.Handler, path string, token int64) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPut, path, strings.NewReader("x"))
	fencehttp.SetToken(req, token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

var noContent = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })

// TestVerifyOncePerTenure: Verify is asked only about a token that would raise the highest
// (the first one included), not about the holder's later writes or stale tokens; a refusal
// gets 403 and records nothing; an error of the verifier itself gets 503 and records nothing.
func TestVerifyOncePerTenure(t *testing.T) {
	var calls atomic.Int64
	down := atomic.Bool{}
	g := &fencehttp.Guard{Verify: func(ctx context.Context, resource string, token int64) error {
		calls.Add(1)
		if down.Load() {
			return errors.New("lock service unreachable")
		}
		if token > 100 {
			return &fence.UnverifiedTokenError{Resource: resource, Lease: resource, Token: token}
		}
		return nil
	}}
	h := g.Wrap(noContent)
	for range 5 {
		if rec := serve(h, "/a", 7); rec.Code != http.StatusNoContent {
			t.Fatalf("token 7: %d %s", rec.Code, rec.Body)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("Verify called %d times for 5 writes with one token, want 1", n)
	}
	if rec := serve(h, "/a", 6); rec.Code != http.StatusConflict {
		t.Fatalf("stale token 6: %d, want 409", rec.Code)
	}
	rec := serve(h, "/a", math.MaxInt64)
	if rec.Code != http.StatusForbidden || rec.Header().Get(fencehttp.RefusedHeader) != "unverified" || rec.Header().Get(fencehttp.ResourceHeader) != "/a" {
		t.Fatalf("unverified token: %d %v, want 403 with the refusal headers", rec.Code, rec.Header())
	}
	if h, _ := g.Highest("/a"); h != 7 {
		t.Fatalf("Highest = %d after a refused token, want 7", h)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("Verify called %d times, want 2 (the stale token needs none)", n)
	}
	down.Store(true)
	if rec := serve(h, "/a", 8); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("token 8 with the verifier failing: %d, want 503", rec.Code)
	}
	if rec := serve(h, "/b", 1); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("new resource with the verifier failing: %d, want 503", rec.Code)
	}
	if rec := serve(h, "/a", 7); rec.Code != http.StatusNoContent {
		t.Fatalf("the holder's token 7 with the verifier failing: %d, want 204 (no raise, no call)", rec.Code)
	}
	if h, _ := g.Highest("/a"); h != 7 {
		t.Fatalf("Highest = %d, want 7", h)
	}
	if n := g.Resources(); n != 1 {
		t.Fatalf("Resources() = %d after refused requests for /b, want 1", n)
	}
}

// TestMaxResources: a guard keeps at most MaxResources entries; a request for one more gets
// 503 (a *TooManyResourcesError through the Transport) while the known resources are still
// fenced, and no entry is forgotten to make room.
func TestMaxResources(t *testing.T) {
	g := &fencehttp.Guard{MaxResources: 3}
	srv := httptest.NewServer(g.Wrap(noContent))
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: &fencehttp.Transport{Base: srv.Client().Transport}}
	put := func(path string, token int64) error {
		req, err := http.NewRequestWithContext(fencehttp.WithToken(context.Background(), token), http.MethodPut, srv.URL+path, nil)
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
	for i, p := range []string{"/a", "/b", "/c"} {
		if err := put(p, int64(10+i)); err != nil {
			t.Fatal(err)
		}
	}
	err := put("/d", 1)
	var full *fencehttp.TooManyResourcesError
	if !errors.Is(err, fencehttp.ErrTooManyResources) || !errors.As(err, &full) || full.Resource != "/d" {
		t.Fatalf("PUT /d beyond MaxResources: got %v, want a *TooManyResourcesError for /d", err)
	}
	if err := g.Check("/d", 1); !errors.Is(err, fencehttp.ErrTooManyResources) {
		t.Fatalf("Check(/d) = %v, want ErrTooManyResources", err)
	}
	if err := put("/a", 9); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale PUT /a with the guard full: got %v, want fence.ErrStaleToken (the entry kept)", err)
	}
	if err := put("/b", 20); err != nil {
		t.Fatalf("PUT /b with a newer token with the guard full: %v", err)
	}
	if n := g.Resources(); n != 3 {
		t.Fatalf("Resources() = %d, want 3", n)
	}
}

// TestDefaultMaxResources: the zero Guard stops at DefaultMaxResources distinct paths, and
// requests that were refused (400, 428) or only asked about (Check, Highest) leave no entry.
func TestDefaultMaxResources(t *testing.T) {
	g := &fencehttp.Guard{}
	h := g.Wrap(noContent)
	for i := range fencehttp.DefaultMaxResources {
		if rec := serve(h, fmt.Sprintf("/r/%d", i), 1); rec.Code != http.StatusNoContent {
			t.Fatalf("path %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := serve(h, "/one-too-many", 1)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get(fencehttp.RefusedHeader) != "too-many-resources" {
		t.Fatalf("path %d: %d %v, want 503 too-many-resources", fencehttp.DefaultMaxResources, rec.Code, rec.Header())
	}
	if rec := serve(h, "/r/0", 1); rec.Code != http.StatusNoContent {
		t.Fatalf("a known path with the guard full: %d", rec.Code)
	}
	if n := g.Resources(); n != fencehttp.DefaultMaxResources {
		t.Fatalf("Resources() = %d, want %d", n, fencehttp.DefaultMaxResources)
	}

	g2 := &fencehttp.Guard{}
	h2 := g2.Wrap(noContent)
	bad := httptest.NewRequest(http.MethodPut, "/x", nil)
	bad.Header.Set(fencehttp.Header, "-1")
	h2.ServeHTTP(httptest.NewRecorder(), bad)
	h2.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPut, "/y", nil))
	_ = g2.Check("/z", 1)
	_, _ = g2.Highest("/w")
	if n := g2.Resources(); n != 0 {
		t.Fatalf("Resources() = %d after refused requests and queries, want 0", n)
	}
}

// BenchmarkGuardMemory reports the heap a guard's entry takes (B/resource), for paths of 17
// bytes: DefaultMaxResources of them is what a zero Guard can hold.
func BenchmarkGuardMemory(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g := &fencehttp.Guard{MaxResources: b.N}
	h := g.Wrap(noContent)
	for i := range b.N {
		serve(h, fmt.Sprintf("/invoices/%08d", i), 1)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(g.Resources()), "B/resource")
	runtime.KeepAlive(g)
}

// TestNegativeMaxResources: a negative MaxResources is a settings error (ErrInvalidGuard):
// 500 for every fenced request, and Check says why.
func TestNegativeMaxResources(t *testing.T) {
	g := &fencehttp.Guard{MaxResources: -1}
	if rec := serve(g.Wrap(noContent), "/a", 1); rec.Code != http.StatusInternalServerError {
		t.Fatalf("MaxResources -1: %d, want 500", rec.Code)
	}
	if err := g.Check("/a", 1); !errors.Is(err, fencehttp.ErrInvalidGuard) {
		t.Fatalf("Check with MaxResources -1 = %v, want ErrInvalidGuard", err)
	}
	if n := g.Resources(); n != 0 {
		t.Fatalf("Resources() = %d, want 0", n)
	}
}
