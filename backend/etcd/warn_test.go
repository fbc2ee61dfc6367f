package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestWarnsWhenTheServerRaisesTheTTL: a TTL under the server's minimum lease TTL opens a
// session (as safe as any: its time left counts on the TTL asked) and the backend says, once
// per asked and granted TTL, that a crashed holder's leases may outlive the TTL; a TTL the
// server grants as asked logs nothing.
func TestWarnsWhenTheServerRaisesTheTTL(t *testing.T) {
	lo := minTTL(t, rawClient(t, testenv.Etcd(t)))
	if lo <= time.Second {
		t.Fatalf("the test server grants one-second leases (minimum %v): start it with the default election timeout", lo)
	}
	var logs testenv.LogBuffer
	b, err := New(serverDSN(t), WithSlog(logs.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		s, err := b.OpenSession(ctx, "short", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if s.Remaining > time.Second {
			t.Fatalf("Remaining %v above the TTL asked (1s): the time left must count on what was asked", s.Remaining)
		}
	}
	if n := strings.Count(logs.String(), "longer lease TTL than asked"); n != 1 {
		t.Fatalf("%d warnings for two sessions of the same TTL, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "granted="+lo.String()) {
		t.Fatalf("the warning does not name the granted TTL %v:\n%s", lo, logs.String())
	}
	before := logs.String()
	if _, err := b.OpenSession(ctx, "long", lo+time.Second); err != nil {
		t.Fatal(err)
	}
	if logs.String() != before {
		t.Fatalf("a TTL the server grants as asked logged:\n%s", strings.TrimPrefix(logs.String(), before))
	}
}

// TestCallsAfterCloseSayTheBackendIsClosed: after Close every call fails with an error matching
// spi.ErrBackendClosed (and so spi.ErrClosed).
func TestCallsAfterCloseSayTheBackendIsClosed(t *testing.T) {
	b, err := New(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	ctx := context.Background()
	if _, err := b.OpenSession(ctx, "o", 2*time.Second); !errors.Is(err, spi.ErrBackendClosed) || !errors.Is(err, spi.ErrClosed) {
		t.Fatalf("OpenSession after Close = %v, want ErrBackendClosed", err)
	}
	if _, err := b.Hints(ctx); !errors.Is(err, spi.ErrBackendClosed) {
		t.Fatalf("Hints after Close = %v, want ErrBackendClosed", err)
	}
}
