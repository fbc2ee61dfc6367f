package etcd

import (
	"context"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// hintBuffer is how many hints wait for a slow reader before more are dropped (a lost hint
// costs latency, never safety).
const hintBuffer = 1024

// Hints watches the lease prefix (a deleted lease key, by Release, CloseSession or the
// expiry of its holder's lease, is a Released hint), the waiters prefix (a deleted waiter key,
// by a grant, Withdraw or the end of the waiter's session, is a Released hint for its name: the
// next waiter may now be the oldest, and a lease reserved for a waiter that left is free) and
// the groups prefix (any change of a member key is a GroupChanged hint), from every client of
// the cluster. The watches require a
// leader (clientv3.WithRequireLeader): a member cut off from the quorum ends them and they are
// made again, on whichever member the client reaches, from the current revision.
func (b *Backend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	cli, err := b.check()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan spi.Hint, hintBuffer)
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.ctx, cancel)
	go func() {
		defer close(ch)
		defer cancel()
		defer stop()
		b.watch(wctx, cli, ch)
	}()
	return ch, nil
}

// watch runs the three watches until ctx is done, making them again whenever one ends.
func (b *Backend) watch(ctx context.Context, cli *clientv3.Client, ch chan<- spi.Hint) {
	leases, groups, waiters := wire.EtcdLeasesPrefix(b.prefix), wire.EtcdGroupsPrefix(b.prefix), wire.EtcdWaitersPrefix(b.prefix)
	send := func(h spi.Hint) {
		select {
		case ch <- h:
		default:
		}
	}
	for ctx.Err() == nil {
		rctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		lw := cli.Watch(rctx, leases, clientv3.WithPrefix(), clientv3.WithFilterPut())
		gw := cli.Watch(rctx, groups, clientv3.WithPrefix())
		ww := cli.Watch(rctx, waiters, clientv3.WithPrefix(), clientv3.WithFilterPut())
		for lw != nil && gw != nil && ww != nil {
			select {
			case r, ok := <-lw:
				if !ok || r.Err() != nil || r.Canceled {
					lw = nil
					continue
				}
				for _, ev := range r.Events {
					send(spi.Hint{Kind: spi.Released, Name: strings.TrimPrefix(string(ev.Kv.Key), leases)})
				}
			case r, ok := <-ww:
				if !ok || r.Err() != nil || r.Canceled {
					ww = nil
					continue
				}
				for _, ev := range r.Events {
					n, _, _ := strings.Cut(strings.TrimPrefix(string(ev.Kv.Key), waiters), "/")
					send(spi.Hint{Kind: spi.Released, Name: n})
				}
			case r, ok := <-gw:
				if !ok || r.Err() != nil || r.Canceled {
					gw = nil
					continue
				}
				for _, ev := range r.Events {
					g, _, _ := strings.Cut(strings.TrimPrefix(string(ev.Kv.Key), groups), "/")
					send(spi.Hint{Kind: spi.GroupChanged, Name: g})
				}
			}
		}
		cancel()
		// One watch ended (a lost leader, a compacted revision, a closed client): what
		// happened meanwhile is lost, as hints may be. Start all three again after a pause.
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
