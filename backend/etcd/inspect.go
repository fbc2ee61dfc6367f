package etcd

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// Inspect reads the sessions, leases and groups under the prefix in one read-only
// transaction (one revision), then each live session's time left with LeaseTimeToLive (whole
// seconds, rounded down). Free leases have no key, so they do not show.
func (b *Backend) Inspect(ctx context.Context) (spi.Snapshot, error) {
	cli, err := b.check()
	if err != nil {
		return spi.Snapshot{}, err
	}
	sp, lp, gp := wire.EtcdSessionsPrefix(b.prefix), wire.EtcdLeasesPrefix(b.prefix), wire.EtcdGroupsPrefix(b.prefix)
	// The read fails at once when no member can be reached (simba status has no deadline).
	rctx, done := b.unlessUnreachable(ctx)
	defer done()
	r, err := cli.Txn(rctx).Then(
		clientv3.OpGet(sp, clientv3.WithPrefix()),
		clientv3.OpGet(lp, clientv3.WithPrefix()),
		clientv3.OpGet(gp, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		if u := unreachable(ctx, rctx); u != nil {
			return spi.Snapshot{}, spi.Unavailable("etcd: inspect", u)
		}
		return spi.Snapshot{}, b.classify("inspect", err)
	}
	remaining := map[int64]time.Duration{}
	var snap spi.Snapshot
	for _, kv := range r.Responses[0].GetResponseRange().Kvs {
		ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil && ttl.TTL < 0 {
			continue // expired since the read
		}
		if err != nil {
			return spi.Snapshot{}, b.classify("inspect: lease", err)
		}
		remaining[kv.Lease] = time.Duration(ttl.TTL) * time.Second
		snap.Sessions = append(snap.Sessions, spi.SessionInfo{ID: spi.SessionID(strings.TrimPrefix(string(kv.Key), sp)), Owner: string(kv.Value), Remaining: remaining[kv.Lease]})
	}
	for _, kv := range r.Responses[1].GetResponseRange().Kvs {
		rem, ok := remaining[kv.Lease]
		if !ok {
			continue
		}
		snap.Leases = append(snap.Leases, spi.LeaseInfo{Name: strings.TrimPrefix(string(kv.Key), lp), Holder: sessionID(clientv3.LeaseID(kv.Lease)), Owner: string(kv.Value), Token: kv.CreateRevision, Remaining: rem})
	}
	snap.Groups = map[string][]spi.SessionID{}
	for _, kv := range r.Responses[2].GetResponseRange().Kvs {
		g, sid, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), gp), "/")
		if !ok || !slices.ContainsFunc(snap.Sessions, func(s spi.SessionInfo) bool { return string(s.ID) == sid }) {
			continue
		}
		snap.Groups[g] = append(snap.Groups[g], spi.SessionID(sid))
	}
	for g := range snap.Groups {
		slices.Sort(snap.Groups[g])
	}
	slices.SortFunc(snap.Sessions, func(a, b spi.SessionInfo) int { return strings.Compare(string(a.ID), string(b.ID)) })
	slices.SortFunc(snap.Leases, func(a, b spi.LeaseInfo) int { return strings.Compare(a.Name, b.Name) })
	return snap, nil
}
