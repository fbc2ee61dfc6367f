package zookeeper

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/joinerr"
	"github.com/simba-go/simba/spi"
)

// inspectParallel bounds the reads Inspect keeps in flight.
const inspectParallel = 64

// ownSessions is this backend's live sessions, whose time left it knows (ZooKeeper tells it
// nothing of other clients' sessions).
type ownSessions map[spi.SessionID]*session

// ownSessions returns the backend's sessions that are not gone.
func (b *Backend) ownSessions() ownSessions {
	own := ownSessions{}
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, ss := range b.sessions {
		if !ss.gone() {
			own[id] = ss
		}
	}
	return own
}

// remaining returns the time left of the session id and whether it is known.
func (own ownSessions) remaining(id spi.SessionID) (time.Duration, bool) {
	if ss := own[id]; ss != nil {
		return ss.remaining(), true
	}
	return 0, false
}

// leaseInfo decodes the lease node of name (its data and stat): an ephemeral node is held by
// its owner session, with the tenure's token its creation zxid; a persistent one is a foreign
// node (see ForeignHolder), shown held since it keeps the name held. Inspect and InspectLease
// share it, so they cannot disagree. An expired session's nodes are gone (the server deletes
// them), so a node read is a live tenure as far as the server has told.
func (own ownSessions) leaseInfo(name string, data []byte, stat *zk.Stat) spi.LeaseInfo {
	if stat.EphemeralOwner == 0 {
		return spi.LeaseInfo{Name: name, Holder: ForeignHolder, Owner: ForeignOwner}
	}
	holder := SessionIDString(stat.EphemeralOwner)
	owner := string(data)
	if wire.ValidateOwner(owner) != nil {
		owner = ForeignOwner
	}
	rem, known := own.remaining(holder)
	return spi.LeaseInfo{Name: name, Holder: holder, Owner: owner, Token: stat.Czxid, Remaining: rem, RemainingUnknown: !known}
}

// InspectLease reads the lease called name as Inspect lists it (spi.LeaseInspector): one read
// of its node (data and stat), on the connection Inspect would use, whatever the number of
// leases. A free lease has no node, so it is not found, as Inspect does not list it. A name
// outside the wire grammar is refused before any I/O.
func (b *Backend) InspectLease(ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
	if err := wire.ValidateName(name); err != nil {
		return spi.LeaseInfo{}, false, err
	}
	s, err := b.anySession(ctx)
	if err != nil {
		return spi.LeaseInfo{}, false, err
	}
	type got struct {
		data []byte
		stat *zk.Stat
	}
	g, err := call(ctx, b, func() (got, error) {
		data, stat, err := s.conn.Get(b.lay.lease(name))
		return got{data, stat}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return spi.LeaseInfo{}, false, nil
	case err != nil:
		return spi.LeaseInfo{}, false, s.fail("inspect lease", err)
	}
	return b.ownSessions().leaseInfo(name, g.data, g.stat), true, nil
}

// Inspect lists the held leases (holder, owner, token), the sessions that hold leases or
// belong to groups, and the groups' members. ZooKeeper does not tell one client how long
// another session has left, so Remaining is filled in only for this backend's own sessions
// (others have RemainingUnknown). A group node without live members (group nodes are
// persistent) is not listed, as on every backend. Inspect reads every lease node: it is for
// status tools, not hot paths.
func (b *Backend) Inspect(ctx context.Context) (spi.Snapshot, error) {
	s, err := b.anySession(ctx)
	if err != nil {
		return spi.Snapshot{}, err
	}
	children := func(p string) ([]string, error) {
		ch, err := call(ctx, b, func() ([]string, error) {
			ch, _, err := s.conn.Children(p)
			return ch, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return ch, err
	}
	names, err := children(b.lay.leasesRoot())
	if err != nil {
		return spi.Snapshot{}, s.fail("inspect", err)
	}
	groupNames, err := children(b.lay.groupsRoot())
	if err != nil {
		return spi.Snapshot{}, s.fail("inspect", err)
	}
	type node struct {
		path  string
		data  []byte
		stat  *zk.Stat
		found bool
	}
	var nodes []*node
	for _, n := range names {
		nodes = append(nodes, &node{path: b.lay.lease(n)})
	}
	for _, g := range groupNames {
		ms, err := children(b.lay.group(g))
		if err != nil {
			return spi.Snapshot{}, s.fail("inspect", err)
		}
		for _, m := range ms {
			nodes = append(nodes, &node{path: b.lay.member(g, m)})
		}
	}
	sem := make(chan struct{}, inspectParallel)
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			type got struct {
				data []byte
				stat *zk.Stat
			}
			g, err := call(ctx, b, func() (got, error) {
				data, stat, err := s.conn.Get(nd.path)
				return got{data, stat}, err
			})
			switch {
			case errors.Is(err, zk.ErrNoNode):
			case err != nil:
				errs[i] = err
			default:
				nd.data, nd.stat, nd.found = g.data, g.stat, true
			}
		})
	}
	wg.Wait()
	if err := joinerr.Join(errs...); err != nil {
		return spi.Snapshot{}, s.fail("inspect", err)
	}

	own := b.ownSessions()
	remaining := own.remaining
	snap := spi.Snapshot{Groups: map[string][]spi.SessionID{}}
	sessions := map[spi.SessionID]string{}
	for i, n := range names {
		nd := nodes[i]
		if !nd.found {
			continue
		}
		info := own.leaseInfo(n, nd.data, nd.stat)
		if info.Holder != ForeignHolder {
			sessions[info.Holder] = info.Owner
		}
		snap.Leases = append(snap.Leases, info)
	}
	for _, nd := range nodes[len(names):] {
		if !nd.found {
			continue
		}
		g, sid, ok := b.lay.memberOf(nd.path)
		id := spi.SessionID(sid)
		if !ok || !wire.IsZooKeeperSessionID(sid) || SessionIDString(nd.stat.EphemeralOwner) != id {
			continue // not a member (see Backend.Members)
		}
		snap.Groups[g] = append(snap.Groups[g], id)
		if _, ok := sessions[id]; !ok {
			sessions[id] = string(nd.data)
		}
	}
	for id, ss := range own {
		if _, ok := sessions[id]; !ok {
			sessions[id] = string(ss.owner)
		}
	}
	for g := range snap.Groups {
		slices.Sort(snap.Groups[g])
	}
	for id, owner := range sessions {
		rem, known := remaining(id)
		snap.Sessions = append(snap.Sessions, spi.SessionInfo{ID: id, Owner: owner, Remaining: rem, RemainingUnknown: !known})
	}
	slices.SortFunc(snap.Leases, func(a, b spi.LeaseInfo) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(snap.Sessions, func(a, b spi.SessionInfo) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return snap, nil
}
