package fencehttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencehttp"
)

// TestRefusalOfControlCharResource: a resource with a NUL or another control byte (the URL path
// "/a%00b", which any client can send) is refused with an answer the client can read, its
// resource escaped in the Simba-Fencing-Resource header. net/http writes a header value's NUL
// as it is, and the client's reader dropped the whole answer ("malformed MIME header line"):
// the Transport returned a connection error instead of the refusal. Fails on the old guard.
func TestRefusalOfControlCharResource(t *testing.T) {
	unreachable := errors.New("lock service unreachable")
	for _, c := range []struct {
		name   string
		guard  *fencehttp.Guard
		first  int64 // admitted first, when non-zero
		token  int64
		status int
		want   error // matched by the Transport's error, nil for a plain answer
	}{
		{"stale", &fencehttp.Guard{}, 5, 4, http.StatusConflict, fence.ErrStaleToken},
		{"unverified", &fencehttp.Guard{Verify: func(ctx context.Context, resource string, token int64) error {
			return &fence.UnverifiedTokenError{Resource: resource, Token: token}
		}}, 0, 4, http.StatusForbidden, fence.ErrUnverifiedToken},
		{"verifier failed", &fencehttp.Guard{Verify: func(context.Context, string, int64) error { return unreachable }}, 0, 4, http.StatusServiceUnavailable, nil},
		{"too many", &fencehttp.Guard{MaxResources: 1}, 0, 4, http.StatusServiceUnavailable, fencehttp.ErrTooManyResources},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.guard.Wrap(noContent))
			defer srv.Close()
			if c.name == "too many" { // fill the guard's one place with another resource
				if rec := serve(c.guard.Wrap(noContent), "/full", 1); rec.Code != http.StatusNoContent {
					t.Fatalf("filling the guard: %d", rec.Code)
				}
			}
			put := func(client *http.Client, token int64) (*http.Response, error) {
				req, err := http.NewRequestWithContext(fencehttp.WithToken(context.Background(), token), http.MethodPut, srv.URL+"/a%00b%1b[2J", strings.NewReader("x"))
				if err != nil {
					t.Fatal(err)
				}
				fencehttp.SetToken(req, token) // a plain client's request too
				return client.Do(req)
			}
			if c.first != 0 {
				resp, err := put(srv.Client(), c.first)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Fatalf("first token: %s", resp.Status)
				}
			}
			resp, err := put(srv.Client(), c.token)
			if err != nil {
				t.Fatalf("plain client: %v (the refusal could not be read)", err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %s, want %d", resp.Status, c.status)
			}
			if got, want := resp.Header.Get(fencehttp.ResourceHeader), `/a\x00b\x1b[2J`; got != want {
				t.Fatalf("%s = %q, want %q", fencehttp.ResourceHeader, got, want)
			}
			if c.want == nil {
				return
			}
			_, err = put(&http.Client{Transport: &fencehttp.Transport{Base: srv.Client().Transport}}, c.token)
			if !errors.Is(err, c.want) {
				t.Fatalf("Transport: %v, want %v", err, c.want)
			}
		})
	}
}
