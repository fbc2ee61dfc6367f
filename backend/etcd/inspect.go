package etcd

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// Inspect reads the sessions, leases and groups under the prefix in one read-only
// transaction (one revision), then each live session's time left with LeaseTimeToLive (whole
// seconds, rounded down). Free leases have no key, so they do not show.
func (b *Backend) Inspect(ctx context.Context) (spi.Snapshot, error) {
	cli, err := b.check(ctx)
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
		if u := unreachable(ctx, rctx, "etcd: inspect"); u != nil {
			return spi.Snapshot{}, u
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
		snap.Sessions = append(snap.Sessions, spi.BoundSession(spi.SessionInfo{ID: spi.SessionID(strings.TrimPrefix(string(kv.Key), sp)), Owner: string(kv.Value), Remaining: remaining[kv.Lease]}))
	}
	for _, kv := range r.Responses[1].GetResponseRange().Kvs {
		rem, ok := remaining[kv.Lease]
		if !ok {
			continue
		}
		snap.Leases = append(snap.Leases, leaseInfo(strings.TrimPrefix(string(kv.Key), lp), kv, rem))
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

// leaseInfo decodes the key of lease name, whose holder (the session of the key's etcd lease)
// has rem left: the token is the key's creation revision. Inspect and InspectLease share it, so
// they cannot disagree.
func leaseInfo(name string, kv *mvccpb.KeyValue, rem time.Duration) spi.LeaseInfo {
	return spi.LeaseInfo{Name: name, Holder: sessionID(clientv3.LeaseID(kv.Lease)), Owner: string(kv.Value), Token: kv.CreateRevision, Remaining: rem}
}

// InspectLease reads the lease called name as Inspect lists it (spi.LeaseInspector): the
// lease's key, then its holder's session key and that session's time left (LeaseTimeToLive)
// sent together, three small reads in two round trips whatever the number of leases. A free lease has no key, and a key whose
// session has no session key or has expired is not listed by Inspect either: both are not
// found. A name outside the wire grammar is refused before any I/O.
func (b *Backend) InspectLease(ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
	if err := wire.ValidateName(name); err != nil {
		return spi.LeaseInfo{}, false, err
	}
	cli, err := b.check(ctx)
	if err != nil {
		return spi.LeaseInfo{}, false, err
	}
	rctx, done := b.unlessUnreachable(ctx)
	defer done()
	fail := func(err error) (spi.LeaseInfo, bool, error) {
		if u := unreachable(ctx, rctx, "etcd: inspect lease"); u != nil {
			return spi.LeaseInfo{}, false, u
		}
		return spi.LeaseInfo{}, false, b.classify("inspect lease", err)
	}
	r, err := cli.Get(rctx, wire.EtcdLeaseKey(b.prefix, name))
	if err != nil {
		return fail(err)
	}
	if len(r.Kvs) == 0 {
		return spi.LeaseInfo{}, false, nil
	}
	kv := r.Kvs[0]
	id := clientv3.LeaseID(kv.Lease)
	// The holder's session key and its time left depend on the lease key's etcd lease only,
	// not on each other: both are sent at once (one round trip where they took two), and the
	// answer is decided from them in the order they were read one after the other before.
	type timeToLive struct {
		r   *clientv3.LeaseTimeToLiveResponse
		err error
	}
	ttlc := make(chan timeToLive, 1)
	go func() {
		t, err := cli.TimeToLive(rctx, id)
		ttlc <- timeToLive{t, err}
	}()
	sr, err := cli.Get(rctx, wire.EtcdSessionKey(b.prefix, string(sessionID(id))))
	tr := <-ttlc
	if err != nil {
		return fail(err)
	}
	// Inspect lists a lease key only beside a session key of the same etcd lease.
	if len(sr.Kvs) == 0 || sr.Kvs[0].Lease != kv.Lease {
		return spi.LeaseInfo{}, false, nil
	}
	ttl, err := tr.r, tr.err
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil && ttl.TTL < 0 {
		return spi.LeaseInfo{}, false, nil // expired since the read
	}
	if err != nil {
		return fail(err)
	}
	return leaseInfo(name, kv, time.Duration(ttl.TTL)*time.Second), true, nil
}
