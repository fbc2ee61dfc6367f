package sqlcheck

import (
	"context"
	"sync"
	"time"

	sqlbe "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/spi"
)

// backendOps drives the production backend through its public SPI, so that these checks test
// the code users run. Tests name sessions with labels; the backend makes the ids (128 random
// bits), so backendOps maps each label to its id and back.
type backendOps struct {
	b     *sqlbe.Backend
	count func(ctx context.Context, query string, args ...any) (int, error) // test-only SQL

	mu     sync.Mutex
	ids    map[string]spi.SessionID
	labels map[spi.SessionID]string
}

func newBackendOps(b *sqlbe.Backend, count func(ctx context.Context, query string, args ...any) (int, error)) *backendOps {
	return &backendOps{b: b, count: count, ids: map[string]spi.SessionID{}, labels: map[spi.SessionID]string{}}
}

// id is the backend's id of label (the label itself when no session was opened with it: a
// session that does not exist).
func (o *backendOps) id(label string) spi.SessionID {
	o.mu.Lock()
	defer o.mu.Unlock()
	if id, ok := o.ids[label]; ok {
		return id
	}
	return spi.SessionID(label)
}

// label is the test's label of a backend id ("" stays "").
func (o *backendOps) label(id spi.SessionID) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l, ok := o.labels[id]; ok {
		return l
	}
	return string(id)
}

func (o *backendOps) sessionID(label string) string { return string(o.id(label)) }

func (o *backendOps) open(ctx context.Context, label, owner string, ttlMs int64) error {
	s, err := o.b.OpenSession(ctx, owner, time.Duration(ttlMs)*time.Millisecond)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.ids[label], o.labels[s.ID] = s.ID, label
	o.mu.Unlock()
	return nil
}

func (o *backendOps) acquire(ctx context.Context, sid, name string) (acquireReply, error) {
	r, err := o.b.Acquire(ctx, o.id(sid), name)
	if err != nil {
		return acquireReply{}, err
	}
	switch r.Kind {
	case spi.Granted:
		return acquireReply{Kind: "granted", Token: r.Token, Remaining: r.Remaining.Milliseconds()}, nil
	case spi.HeldBy:
		return acquireReply{Kind: "held", Holder: o.label(r.Holder), Owner: r.HolderOwner, Remaining: r.Remaining.Milliseconds()}, nil
	}
	return acquireReply{Kind: "expired"}, nil
}

func (o *backendOps) release(ctx context.Context, sid, name string, token int64) error {
	return o.b.Release(ctx, o.id(sid), name, token)
}

func (o *backendOps) keepAlive(ctx context.Context, sid string, groups []string) (keepAliveReply, error) {
	ka, err := o.b.KeepAlive(ctx, o.id(sid), nil, groups)
	if err != nil || ka.Expired {
		return keepAliveReply{Expired: ka.Expired}, err
	}
	r := keepAliveReply{Remaining: ka.Remaining.Milliseconds(), Held: map[string]int64{}, Members: map[string][]string{}}
	for _, h := range ka.Held {
		r.Held[h.Name] = h.Token
	}
	for g, ms := range ka.Members {
		for _, m := range ms {
			r.Members[g] = append(r.Members[g], o.label(m))
		}
	}
	return r, nil
}

func (o *backendOps) join(ctx context.Context, sid, group string) (bool, error) {
	st, err := o.b.Join(ctx, o.id(sid), group)
	return st == spi.OK, err
}

func (o *backendOps) leave(ctx context.Context, sid, group string) (bool, error) {
	st, err := o.b.Leave(ctx, o.id(sid), group)
	return st == spi.OK, err
}

func (o *backendOps) members(ctx context.Context, group string) ([]string, error) {
	ids, err := o.b.Members(ctx, group)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = o.label(id)
	}
	return out, err
}

func (o *backendOps) closeSession(ctx context.Context, sid string) error {
	return o.b.CloseSession(ctx, o.id(sid))
}

func (o *backendOps) housekeeping(ctx context.Context) error { return o.b.Housekeeping(ctx) }

func (o *backendOps) leases(ctx context.Context) (map[string]leaseRow, error) {
	snap, err := o.b.Inspect(ctx)
	out := map[string]leaseRow{}
	for _, l := range snap.Leases {
		holder := ""
		if l.Holder != "" {
			holder = o.label(l.Holder)
		}
		out[l.Name] = leaseRow{Holder: holder, Owner: l.Owner, Token: l.Token, Remaining: l.Remaining.Milliseconds()}
	}
	return out, err
}

func (o *backendOps) liveSessions(ctx context.Context) (map[string]int64, error) {
	snap, err := o.b.Inspect(ctx)
	out := map[string]int64{}
	for _, s := range snap.Sessions {
		out[o.label(s.ID)] = s.Remaining.Milliseconds()
	}
	return out, err
}

func (o *backendOps) schemaVersion(ctx context.Context) (int64, error) { return o.b.SchemaVersion(ctx) }
func (o *backendOps) now(ctx context.Context) (int64, error)           { return o.b.DatabaseNow(ctx) }

func (o *backendOps) sessionRows(ctx context.Context, sid string) (int, error) {
	return o.count(ctx, "SELECT count(*) FROM simba_session WHERE id = ?", string(o.id(sid)))
}

func (o *backendOps) leaseRowHeldBy(ctx context.Context, name, sid string, token int64) (bool, error) {
	n, err := o.count(ctx, "SELECT count(*) FROM simba_lease WHERE name = ? AND session_id = ? AND token = ?", name, string(o.id(sid)), token)
	return n == 1, err
}
