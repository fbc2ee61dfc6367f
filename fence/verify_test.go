package fence_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// TestLeaseVerifierOnBackends: on every backend, LeaseVerifier admits the token Lock granted
// (the backend's snapshot reports the same token) and refuses the int64 maximum, the token of
// another lease, and the holder's token once the lease is released; a backend that cannot
// inspect fails with its error wrapped, never nil.
func TestLeaseVerifierOnBackends(t *testing.T) {
	dsns := map[string]func(t *testing.T) string{
		"sqlite":    func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "simba.db") },
		"postgres":  func(t *testing.T) string { return testenv.Postgres(t) },
		"redis":     func(t *testing.T) string { return "redis://" + testenv.Redis(t) },
		"zookeeper": func(t *testing.T) string { return "zk://" + strings.Join(testenv.ZooKeeper(t), ",") },
		"etcd":      func(t *testing.T) string { return "etcd://" + strings.Join(testenv.Etcd(t), ",") },
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := open.Open(ctx, dsn(t), open.WithAutoMigrate())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			in, ok := b.(spi.Inspector)
			if !ok {
				t.Fatalf("%T is not an spi.Inspector", b)
			}
			c, err := simba.New(b)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			var r [6]byte
			_, _ = rand.Read(r[:])
			lease := "verify-" + hex.EncodeToString(r[:])
			held, err := c.Lock(ctx, lease)
			if err != nil {
				t.Fatal(err)
			}
			other, err := c.Lock(ctx, lease+"-other")
			if err != nil {
				t.Fatal(err)
			}
			verify := fence.LeaseVerifier(in, func(resource string) string { return strings.TrimPrefix(resource, "res/") })
			if err := verify(ctx, "res/"+lease, held.Token()); err != nil {
				t.Fatalf("the holder's token %d: %v", held.Token(), err)
			}
			for _, tok := range []int64{math.MaxInt64, other.Token(), held.Token() + 1} {
				if tok == held.Token() {
					// Tokens rise per name: another name's token can equal this one's (on
					// SQLite both come from the same millisecond of the database clock), and
					// is then this lease's current token, rightly verified.
					continue
				}
				err := verify(ctx, "res/"+lease, tok)
				var refused *fence.UnverifiedTokenError
				if !errors.As(err, &refused) || !refused.Held || refused.Current != held.Token() || refused.Lease != lease {
					t.Fatalf("token %d: got %v, want a *fence.UnverifiedTokenError naming the current token %d", tok, err, held.Token())
				}
			}
			_ = other.Unlock(ctx)
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := verify(ctx, "res/"+lease, held.Token()); !errors.Is(err, fence.ErrUnverifiedToken) {
				t.Fatalf("the token of a released lease: got %v, want fence.ErrUnverifiedToken", err)
			}
			cctx, ccancel := context.WithCancel(ctx)
			ccancel()
			if err := verify(cctx, "res/"+lease, held.Token()); err == nil || errors.Is(err, fence.ErrUnverifiedToken) {
				t.Fatalf("with the context cancelled: got %v, want the backend's error", err)
			}
		})
	}
}

// TestLeaseVerifierInvalidLeaseName: a resource that maps to no valid lease name (a guard's
// default resource, the URL path) refuses the token as unverified, with an error that says the
// name is not a lease name, without asking the backend.
func TestLeaseVerifierInvalidLeaseName(t *testing.T) {
	inspected := false
	v := fence.LeaseVerifier(inspectorFunc(func(context.Context) (spi.Snapshot, error) {
		inspected = true
		return spi.Snapshot{Leases: []spi.LeaseInfo{{Name: "/invoices/42", Holder: "s1", Token: 7}}}, nil
	}), nil)
	err := v(context.Background(), "/invoices/42", 7)
	var refused *fence.UnverifiedTokenError
	if !errors.Is(err, fence.ErrUnverifiedToken) || !errors.As(err, &refused) || refused.Token != 7 {
		t.Fatalf("err = %v, want an *UnverifiedTokenError for token 7", err)
	}
	if !strings.Contains(err.Error(), "is not a lease name") || inspected {
		t.Fatalf("err = %q (backend inspected: %v), want it to name the invalid lease name without inspecting", err, inspected)
	}
}

// countingInspector is a simbatest backend that counts its whole snapshots (Inspect).
type countingInspector struct {
	*simbatest.Backend
	snapshots int
}

func (c *countingInspector) Inspect(ctx context.Context) (spi.Snapshot, error) {
	c.snapshots++
	return c.Backend.Inspect(ctx)
}

// TestLeaseVerifierReadsOneLease: on a backend with spi.LeaseInspector, LeaseVerifier checks a
// token by reading that one lease, never the whole snapshot, so a client sending ever new
// tokens or resources costs one small read each; it admits and refuses exactly as it does
// from the snapshot of a backend with only spi.Inspector. It fails on the code before
// LeaseInspector, which read Inspect for every check.
func TestLeaseVerifierReadsOneLease(t *testing.T) {
	ctx := context.Background()
	b := &countingInspector{Backend: simbatest.NewServer().Backend()}
	s, err := b.OpenSession(ctx, "guarded", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	held, err := b.Acquire(ctx, s.ID, "held")
	if err != nil || held.Kind != spi.Granted {
		t.Fatalf("acquire: %v %v", held.Kind, err)
	}
	freed, err := b.Acquire(ctx, s.ID, "freed")
	if err != nil || freed.Kind != spi.Granted {
		t.Fatalf("acquire: %v %v", freed.Kind, err)
	}
	if err := b.Release(ctx, s.ID, "freed", freed.Token); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		lease string
		token int64
		ok    bool
	}{
		{"held", held.Token, true},
		{"held", held.Token + 1, false},
		{"held", math.MaxInt64, false},
		{"freed", freed.Token, false},
		{"never", 1, false},
	}
	one := fence.LeaseVerifier(b, nil)
	whole := fence.LeaseVerifier(inspectorFunc(b.Backend.Inspect), nil)
	for _, c := range cases {
		got, want := one(ctx, c.lease, c.token), whole(ctx, c.lease, c.token)
		if (got == nil) != c.ok || (want == nil) != c.ok {
			t.Fatalf("lease %q token %d: one lease read says %v, the snapshot %v; want admitted %v", c.lease, c.token, got, want, c.ok)
		}
		if got != nil && got.Error() != want.Error() {
			t.Fatalf("lease %q token %d: one lease read refuses with %q, the snapshot with %q", c.lease, c.token, got, want)
		}
	}
	if b.snapshots != 0 {
		t.Fatalf("LeaseVerifier read the whole snapshot %d times for %d checks, want 0 (InspectLease)", b.snapshots, len(cases))
	}
}

type inspectorFunc func(context.Context) (spi.Snapshot, error)

func (f inspectorFunc) Inspect(ctx context.Context) (spi.Snapshot, error) { return f(ctx) }
