package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
)

// TestClientRevokesMovedLeaseKey: through the client, a Lock whose lease key is put again on
// another etcd lease (or on none) by something other than Simba is revoked by the next
// keep-alive (taken-over; corrupt-record for no lease), and another client is granted the
// lock once the other lease ends (or the key is deleted). On the old backend the first term
// was never revoked: its keep-alives kept reporting the lease held while the second client
// held it.
func TestClientRevokesMovedLeaseKey(t *testing.T) {
	for _, detach := range []bool{false, true} {
		t.Run(map[bool]string{false: "reattached", true: "detached"}[detach], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			dsn := serverDSN(t)
			open := func(owner string) *simba.Client {
				be, err := New(dsn, WithSlog(nil))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { be.Close() })
				c, err := simba.New(be, simba.WithOwner(owner), simba.WithTTL(3*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close(context.Background()) }) //nolint:errcheck
				return c
			}
			first, second := open("first"), open("second")
			h, err := first.Lock(ctx, "moved")
			if err != nil {
				t.Fatal(err)
			}
			cli := rawClient(t, testenv.Etcd(t))
			prefix, _ := ParseDSN(dsn)
			key := wire.EtcdLeaseKey(prefix.Prefix, "moved")
			var other clientv3.LeaseID
			var opts []clientv3.OpOption
			if !detach {
				g, err := cli.Grant(ctx, 60)
				if err != nil {
					t.Fatal(err)
				}
				other = g.ID
				opts = append(opts, clientv3.WithLease(other))
			}
			if _, err := cli.Put(ctx, key, "first", opts...); err != nil {
				t.Fatal(err)
			}
			select {
			case <-h.Context().Done():
			case <-ctx.Done():
				t.Fatal("the term whose lease key was moved off its session's lease was not revoked")
			}
			want := simba.RevokedTakenOver
			if detach {
				want = simba.RevokedCorruptRecord
			}
			var rev *simba.RevokedError
			if err := context.Cause(h.Context()); !errors.As(err, &rev) || rev.Reason != want {
				t.Errorf("revoked with %v, want reason %v", err, want)
			}
			if detach {
				_, err = cli.Delete(ctx, key)
			} else {
				_, err = cli.Revoke(ctx, other)
			}
			if err != nil {
				t.Fatal(err)
			}
			h2, err := second.Lock(ctx, "moved")
			if err != nil {
				t.Fatal(err)
			}
			if h.IsValid() {
				t.Errorf("double grant: the first term %v is valid while the second client holds %v", h.Term, h2.Term)
			}
		})
	}
}
