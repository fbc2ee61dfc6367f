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
// expiry of its holder's lease, is a Released hint) and the groups prefix (any change of a
// member key is a GroupChanged hint), from every client of the cluster. The watches require a
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

// watch runs the two watches until ctx is done, making them again whenever they end.
func (b *Backend) watch(ctx context.Context, cli *clientv3.Client, ch chan<- spi.Hint) {
	leases, groups := wire.EtcdLeasesPrefix(b.prefix), wire.EtcdGroupsPrefix(b.prefix)
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
		for lw != nil && gw != nil {
			select {
			case r, ok := <-lw:
				if !ok || r.Err() != nil || r.Canceled {
					lw = nil
					continue
				}
				for _, ev := range r.Events {
					send(spi.Hint{Kind: spi.Released, Name: strings.TrimPrefix(string(ev.Kv.Key), leases)})
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
		// happened meanwhile is lost, as hints may be. Start both again after a pause.
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
