// Package natskv is trial 33's Simba backend over NATS JetStream KV, written from the public SPI
// docs (package spi), examples/backend and the tck docs only. It is a trial, not a shipped
// backend: see RESULTS.md next to it for what it does not do.
//
// The store offers per-key compare-and-set (Create, Update at a revision) and nothing
// multi-key, and on nats-server 2.9 no per-key TTL. So:
//
//   - Time is the server's: every write carries the server's timestamp (KeyValueEntry.Created).
//     A session record s.<id> is {owner, ttl}; its expiry is the record's Created + ttl, so a
//     keep-alive is a CAS rewrite of the record. "Now" for a decision is the Created of a write
//     to the key clk made before the records the decision reads.
//   - A keep-alive that lands after its session's expiry (Created of the new write > the old
//     write's Created + ttl) has resurrected a dead session: it deletes the record and replies
//     Expired. Together with the order of an acquire's reads (lease, clock, holder's session),
//     no acquire takes a lease from a session whose keep-alive then succeeds.
//   - A lease record l.<name> is {session, token}, never deleted; a grant CASes it on the
//     revision the acquire read. Tokens are max(last + 1, server time in µs).
//   - A group record g.<name> is the list of member session ids, CASed; Members filters it by
//     the members' session records.
//
// Dead sessions' records are never removed by the server (no per-key TTL on 2.9; a bucket
// MaxAge would also drop held lease records). KeepAlive and Members make one round trip per
// name and per member: the KV API has no multi-key read, so the SPI's "bounded round trips"
// rule is broken (see RESULTS.md).
package natskv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/simba-go/simba/spi"
)

// casTries bounds the CAS retries of one call before it gives up with spi.Contended.
const casTries = 16

// Backend is one client of a JetStream KV bucket. It is safe for concurrent use.
type Backend struct {
	nc     *nats.Conn
	kv     jetstream.KeyValue
	ownsNC bool

	mu     sync.Mutex
	closed bool
	done   chan struct{} // closed by Close: ends the Hints goroutines
	// held remembers, per session opened here, the names granted to it and the groups it
	// joined, so that CloseSession can free them (a session is only used through the backend
	// that opened it).
	held   map[spi.SessionID]map[string]struct{}
	joined map[spi.SessionID]map[string]struct{}
}

// Open connects to url and opens (or creates, in memory storage) the KV bucket named bucket.
func Open(ctx context.Context, url, bucket string) (*Backend, error) {
	return OpenStorage(ctx, url, bucket, jetstream.MemoryStorage)
}

// OpenStorage is Open that creates a missing bucket with storage (jetstream.FileStorage for
// records that survive a server restart).
func OpenStorage(ctx context.Context, url, bucket string, storage jetstream.StorageType) (*Backend, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, spi.Unavailable("natskv open", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("natskv open: %w", err)
	}
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1, Storage: storage})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, bucket)
		}
	}
	if err != nil {
		nc.Close()
		return nil, classify("natskv open", err)
	}
	return &Backend{nc: nc, kv: kv, ownsNC: true, done: make(chan struct{}),
		held: map[spi.SessionID]map[string]struct{}{}, joined: map[spi.SessionID]map[string]struct{}{}}, nil
}

// DeleteBucket removes bucket from the server at url (test cleanup).
func DeleteBucket(ctx context.Context, url, bucket string) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return js.DeleteKeyValue(ctx, bucket)
}

type sessionRec struct {
	Owner string `json:"o"`
	TTL   int64  `json:"t"` // nanoseconds
}

type leaseRec struct {
	Session spi.SessionID `json:"s,omitempty"`
	Token   int64         `json:"k"`
	// Waiters is the waiter queue (spi.Queuer), in arrival order.
	Waiters []waiterRec `json:"w,omitempty"`
}

// waiterRec is one waiter entry: live while Expiry (server time, Unix ns: the session's expiry
// as of its latest AcquireQueued) has not passed and its session is live.
type waiterRec struct {
	Session spi.SessionID `json:"s"`
	Expiry  int64         `json:"e"`
}

// esc maps a wire name to a KV key token: KV keys allow [-/_=.A-Za-z0-9] but "." separates
// subject tokens (so "a..b" or a trailing "." is not a key) and ":" is not allowed at all.
func esc(name string) string {
	r := strings.NewReplacer("=", "=3D", ".", "=2E", ":", "=3A")
	return r.Replace(name)
}

func sessKey(id spi.SessionID) string { return "s." + string(id) }
func leaseKey(name string) string     { return "l." + esc(name) }
func groupKey(name string) string     { return "g." + esc(name) }

func (b *Backend) check() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return spi.ErrBackendClosed
	}
	return nil
}

// classify wraps a KV failure: a cut connection, a timeout or no responders is retryable;
// a closed connection, an invalid key or a JetStream API refusal is permanent.
func classify(op string, err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", op, err)
	case errors.Is(err, nats.ErrConnectionClosed):
		return fmt.Errorf("%s: %w", op, spi.ErrBackendClosed)
	case errors.Is(err, jetstream.ErrInvalidKey), errors.Is(err, nats.ErrAuthorization):
		return spi.AsPermanent(fmt.Errorf("%s: %w", op, err))
	default:
		return spi.Unavailable(op, err)
	}
}

// now returns the server's time: the Created of a fresh write to clk, read back. The value
// read may be a later prober's write; either way it was written before this call returns.
func (b *Backend) now(ctx context.Context) (time.Time, error) {
	if _, err := b.kv.Put(ctx, "clk", nil); err != nil {
		return time.Time{}, classify("natskv clock", err)
	}
	e, err := b.kv.Get(ctx, "clk")
	if err != nil {
		return time.Time{}, classify("natskv clock", err)
	}
	return e.Created(), nil
}

// session reads id's record: the record, its expiry, and ok=false when it is gone.
func (b *Backend) session(ctx context.Context, id spi.SessionID) (sessionRec, time.Time, jetstream.KeyValueEntry, bool, error) {
	var rec sessionRec
	e, err := b.kv.Get(ctx, sessKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return rec, time.Time{}, nil, false, nil
	}
	if err != nil {
		return rec, time.Time{}, nil, false, classify("natskv read session", err)
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return rec, time.Time{}, nil, false, fmt.Errorf("natskv session %s: %w: %v", id, spi.ErrCorruptRecord, err)
	}
	return rec, e.Created().Add(time.Duration(rec.TTL)), e, true, nil
}

// OpenSession creates the session record; its expiry is the write's server time plus ttl.
func (b *Backend) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	if ttl <= 0 || ttl > spi.MaxSessionTTL {
		return spi.Session{}, fmt.Errorf("natskv: ttl %v outside (0, %v]: %w", ttl, spi.MaxSessionTTL, spi.ErrInvalidOption)
	}
	if err := spi.ValidateOwner(owner); err != nil {
		return spi.Session{}, err
	}
	if err := b.check(); err != nil {
		return spi.Session{}, err
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := spi.SessionID(hex.EncodeToString(raw[:]))
	v, _ := json.Marshal(sessionRec{Owner: owner, TTL: int64(ttl)})
	if _, err := b.kv.Create(ctx, sessKey(id), v); err != nil {
		return spi.Session{}, classify("natskv open session", err)
	}
	return spi.Session{ID: id, Remaining: ttl}, nil
}

// KeepAlive rewrites the session record (CAS) and checks the rewrite landed before the old
// expiry; then reads each asked name and group.
func (b *Backend) KeepAlive(ctx context.Context, id spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	for _, g := range groups {
		if err := spi.ValidateName(g); err != nil {
			return spi.KeepAlive{}, err
		}
	}
	for _, n := range names {
		if err := spi.ValidateName(n); err != nil {
			return spi.KeepAlive{}, err
		}
	}
	if err := b.check(); err != nil {
		return spi.KeepAlive{}, err
	}
	var now time.Time
	var rec sessionRec
	for try := 0; ; try++ {
		if try == casTries {
			return spi.KeepAlive{}, spi.Contended("natskv keep-alive", errors.New("session record kept changing"))
		}
		r, expiry, e, ok, err := b.session(ctx, id)
		if err != nil {
			return spi.KeepAlive{}, err
		}
		if !ok {
			b.forget(id)
			return spi.KeepAlive{Expired: true}, nil
		}
		rev, err := b.kv.Update(ctx, sessKey(id), e.Value(), e.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return spi.KeepAlive{}, classify("natskv keep-alive", err)
		}
		ne, err := b.kv.Get(ctx, sessKey(id))
		if err != nil {
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				b.forget(id)
				return spi.KeepAlive{Expired: true}, nil
			}
			return spi.KeepAlive{}, classify("natskv keep-alive", err)
		}
		if ne.Revision() != rev {
			continue // changed again (ExpireSession, CloseSession): read it afresh
		}
		if ne.Created().Compare(expiry) >= 0 {
			// The rewrite came too late: the session had expired, and an acquire may have
			// taken its leases. It stays dead.
			_ = b.kv.Delete(ctx, sessKey(id), jetstream.LastRevision(rev))
			b.forget(id)
			return spi.KeepAlive{Expired: true}, nil
		}
		now, rec = ne.Created(), r
		break
	}
	ka := spi.KeepAlive{Remaining: time.Duration(rec.TTL)}
	for _, n := range names {
		l, _, ok, err := b.lease(ctx, n)
		if err != nil {
			return spi.KeepAlive{}, err
		}
		if ok && l.Session == id {
			ka.Held = append(ka.Held, spi.Held{Name: n, Token: l.Token})
		}
	}
	if len(groups) > 0 {
		ka.Members = make(map[string][]spi.SessionID, len(groups))
		for _, g := range groups {
			ms, err := b.members(ctx, g, now)
			if err != nil {
				return spi.KeepAlive{}, err
			}
			ka.Members[g] = ms
		}
	}
	return ka, nil
}

func (b *Backend) forget(id spi.SessionID) {
	b.mu.Lock()
	delete(b.held, id)
	delete(b.joined, id)
	b.mu.Unlock()
}

func (b *Backend) note(m map[spi.SessionID]map[string]struct{}, id spi.SessionID, name string, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if on {
		if m[id] == nil {
			m[id] = map[string]struct{}{}
		}
		m[id][name] = struct{}{}
	} else {
		delete(m[id], name)
	}
}

// CloseSession frees the leases and memberships this backend granted the session, then
// deletes its record.
func (b *Backend) CloseSession(ctx context.Context, id spi.SessionID) error {
	if err := b.check(); err != nil {
		return err
	}
	b.mu.Lock()
	var names, groups []string
	for n := range b.held[id] {
		names = append(names, n)
	}
	for g := range b.joined[id] {
		groups = append(groups, g)
	}
	b.mu.Unlock()
	for _, n := range names {
		if err := b.release(ctx, id, n, nil); err != nil {
			return err
		}
	}
	for _, g := range groups {
		if err := b.editGroup(ctx, g, id, false); err != nil {
			return err
		}
	}
	if err := b.kv.Delete(ctx, sessKey(id)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return classify("natskv close session", err)
	}
	b.forget(id)
	return nil
}

func (b *Backend) lease(ctx context.Context, name string) (leaseRec, uint64, bool, error) {
	var l leaseRec
	e, err := b.kv.Get(ctx, leaseKey(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return l, 0, false, nil
	}
	if err != nil {
		return l, 0, false, classify("natskv read lease", err)
	}
	if err := json.Unmarshal(e.Value(), &l); err != nil || l.Token < 0 {
		return l, 0, false, fmt.Errorf("natskv lease %s: %w", name, spi.ErrCorruptToken)
	}
	return l, e.Revision(), true, nil
}

// Acquire reads the lease, then the server's time, then the holder's and the caller's session
// records, and CASes the lease on the revision it read. It never queues.
func (b *Backend) Acquire(ctx context.Context, id spi.SessionID, name string) (spi.Acquire, error) {
	return b.acquire(ctx, id, name, false)
}

// AcquireQueued is Acquire that also enters (or keeps) the session in name's waiter queue when
// the reply is HeldBy, in the same CAS write.
func (b *Backend) AcquireQueued(ctx context.Context, id spi.SessionID, name string) (spi.Acquire, error) {
	return b.acquire(ctx, id, name, true)
}

// Withdraw removes the session's waiter entry for name, if any.
func (b *Backend) Withdraw(ctx context.Context, id spi.SessionID, name string) error {
	if err := spi.ValidateName(name); err != nil {
		return err
	}
	if err := b.check(); err != nil {
		return err
	}
	for try := 0; try < casTries; try++ {
		l, rev, ok, err := b.lease(ctx, name)
		if err != nil || !ok {
			return err
		}
		i := slices.IndexFunc(l.Waiters, func(w waiterRec) bool { return w.Session == id })
		if i < 0 {
			return nil
		}
		l.Waiters = slices.Delete(l.Waiters, i, i+1)
		v, _ := json.Marshal(l)
		_, err = b.kv.Update(ctx, leaseKey(name), v, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return classify("natskv withdraw", err)
		}
		return nil
	}
	return spi.Contended("natskv withdraw", errors.New("lease record kept changing"))
}

func (b *Backend) acquire(ctx context.Context, id spi.SessionID, name string, queued bool) (spi.Acquire, error) {
	if err := spi.ValidateName(name); err != nil {
		return spi.Acquire{}, err
	}
	if err := b.check(); err != nil {
		return spi.Acquire{}, err
	}
	for try := 0; try < casTries; try++ {
		l, rev, exists, err := b.lease(ctx, name)
		if err != nil {
			return spi.Acquire{}, err
		}
		now, err := b.now(ctx)
		if err != nil {
			return spi.Acquire{}, err
		}
		_, myExpiry, _, ok, err := b.session(ctx, id)
		if err != nil {
			return spi.Acquire{}, err
		}
		if !ok || !myExpiry.After(now) {
			return spi.Acquire{Kind: spi.SessionExpired}, nil
		}
		if l.Session == id {
			return spi.Acquire{Kind: spi.Granted, Token: l.Token, Remaining: myExpiry.Sub(now)}, nil
		}
		var reply *spi.Acquire
		if l.Session != "" {
			hrec, hExpiry, _, ok, err := b.session(ctx, l.Session)
			if err != nil {
				return spi.Acquire{}, err
			}
			if ok && hExpiry.After(now) {
				reply = &spi.Acquire{Kind: spi.HeldBy, Holder: l.Session, HolderOwner: hrec.Owner, Remaining: hExpiry.Sub(now)}
			}
		}
		// Prune the queue up to its first live entry.
		for reply == nil && len(l.Waiters) > 0 {
			w := l.Waiters[0]
			if w.Session == id {
				break
			}
			if w.Expiry > now.UnixNano() {
				_, wExpiry, _, ok, err := b.session(ctx, w.Session)
				if err != nil {
					return spi.Acquire{}, err
				}
				if ok && wExpiry.After(now) {
					reply = &spi.Acquire{Kind: spi.HeldBy, Holder: w.Session, Remaining: time.Duration(w.Expiry - now.UnixNano())}
					break
				}
			}
			l.Waiters = l.Waiters[1:]
		}
		i := slices.IndexFunc(l.Waiters, func(w waiterRec) bool { return w.Session == id })
		var token int64
		switch {
		case reply != nil && !queued:
			return *reply, nil
		case reply != nil && i >= 0:
			l.Waiters[i].Expiry = myExpiry.UnixNano()
		case reply != nil:
			l.Waiters = append(l.Waiters, waiterRec{Session: id, Expiry: myExpiry.UnixNano()})
		default:
			token = max(l.Token+1, now.UnixMicro())
			l.Session, l.Token = id, token
			if i >= 0 {
				l.Waiters = slices.Delete(l.Waiters, i, i+1)
			}
		}
		v, _ := json.Marshal(l)
		if exists {
			_, err = b.kv.Update(ctx, leaseKey(name), v, rev)
		} else {
			_, err = b.kv.Create(ctx, leaseKey(name), v)
		}
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			continue
		}
		if err != nil {
			return spi.Acquire{}, classify("natskv acquire", err)
		}
		if reply != nil {
			return *reply, nil
		}
		b.note(b.held, id, name, true)
		return spi.Acquire{Kind: spi.Granted, Token: token, Remaining: myExpiry.Sub(now)}, nil
	}
	return spi.Acquire{}, spi.Contended("natskv acquire", errors.New("lease record kept changing"))
}

// Release clears the lease's holder if session holds it with token.
func (b *Backend) Release(ctx context.Context, id spi.SessionID, name string, token int64) error {
	if err := spi.ValidateName(name); err != nil {
		return err
	}
	if err := b.check(); err != nil {
		return err
	}
	return b.release(ctx, id, name, &token)
}

func (b *Backend) release(ctx context.Context, id spi.SessionID, name string, token *int64) error {
	for try := 0; try < casTries; try++ {
		l, rev, ok, err := b.lease(ctx, name)
		if err != nil {
			return err
		}
		if !ok || l.Session != id || (token != nil && l.Token != *token) {
			if !ok || l.Session != id {
				b.note(b.held, id, name, false)
			}
			return nil
		}
		l.Session = ""
		v, _ := json.Marshal(l)
		_, err = b.kv.Update(ctx, leaseKey(name), v, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return classify("natskv release", err)
		}
		b.note(b.held, id, name, false)
		return nil
	}
	return spi.Contended("natskv release", errors.New("lease record kept changing"))
}

// editGroup adds (join) or removes id in group's record, CASed.
func (b *Backend) editGroup(ctx context.Context, group string, id spi.SessionID, join bool) error {
	for try := 0; try < casTries; try++ {
		var ms []spi.SessionID
		e, err := b.kv.Get(ctx, groupKey(group))
		exists := err == nil
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return classify("natskv read group", err)
		}
		if exists {
			if err := json.Unmarshal(e.Value(), &ms); err != nil {
				return fmt.Errorf("natskv group %s: %w: %v", group, spi.ErrCorruptRecord, err)
			}
		}
		i, found := slices.BinarySearch(ms, id)
		switch {
		case join && found, !join && !found:
			b.note(b.joined, id, group, join)
			return nil
		case join:
			ms = slices.Insert(ms, i, id)
		default:
			ms = slices.Delete(ms, i, i+1)
		}
		v, _ := json.Marshal(ms)
		if exists {
			_, err = b.kv.Update(ctx, groupKey(group), v, e.Revision())
		} else {
			_, err = b.kv.Create(ctx, groupKey(group), v)
		}
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			continue
		}
		if err != nil {
			return classify("natskv write group", err)
		}
		b.note(b.joined, id, group, join)
		return nil
	}
	return spi.Contended("natskv group", errors.New("group record kept changing"))
}

func (b *Backend) live(ctx context.Context, id spi.SessionID) (bool, error) {
	now, err := b.now(ctx)
	if err != nil {
		return false, err
	}
	_, expiry, _, ok, err := b.session(ctx, id)
	return ok && expiry.After(now), err
}

// Join adds the session to group.
func (b *Backend) Join(ctx context.Context, id spi.SessionID, group string) (spi.Status, error) {
	return b.joinLeave(ctx, id, group, true)
}

// Leave removes the session from group.
func (b *Backend) Leave(ctx context.Context, id spi.SessionID, group string) (spi.Status, error) {
	return b.joinLeave(ctx, id, group, false)
}

func (b *Backend) joinLeave(ctx context.Context, id spi.SessionID, group string, join bool) (spi.Status, error) {
	if err := spi.ValidateName(group); err != nil {
		return 0, err
	}
	if err := b.check(); err != nil {
		return 0, err
	}
	ok, err := b.live(ctx, id)
	if err != nil {
		return 0, err
	}
	if !ok {
		return spi.Expired, nil
	}
	if err := b.editGroup(ctx, group, id, join); err != nil {
		return 0, err
	}
	return spi.OK, nil
}

// Members lists group's members whose session is live.
func (b *Backend) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	if err := spi.ValidateName(group); err != nil {
		return nil, err
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	now, err := b.now(ctx)
	if err != nil {
		return nil, err
	}
	return b.members(ctx, group, now)
}

func (b *Backend) members(ctx context.Context, group string, now time.Time) ([]spi.SessionID, error) {
	e, err := b.kv.Get(ctx, groupKey(group))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, classify("natskv read group", err)
	}
	var ms []spi.SessionID
	if err := json.Unmarshal(e.Value(), &ms); err != nil {
		return nil, fmt.Errorf("natskv group %s: %w: %v", group, spi.ErrCorruptRecord, err)
	}
	var live []spi.SessionID
	for _, m := range ms {
		_, expiry, _, ok, err := b.session(ctx, m)
		if err != nil {
			return nil, err
		}
		if ok && expiry.After(now) {
			live = append(live, m)
		}
	}
	return live, nil
}

// ExpireSession makes id's session expire now at the server (tck.Factory.ExpireSession): its
// record is rewritten with a TTL of zero, so its expiry is the rewrite's own timestamp.
func (b *Backend) ExpireSession(ctx context.Context, id spi.SessionID) error {
	rec, _, _, ok, err := b.session(ctx, id)
	if err != nil || !ok {
		return err
	}
	rec.TTL = 0
	v, _ := json.Marshal(rec)
	_, err = b.kv.Put(ctx, sessKey(id), v)
	return err
}

// Close closes the connection this backend opened; later calls fail with ErrBackendClosed.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	close(b.done)
	if b.ownsNC {
		b.nc.Close()
	}
	return nil
}

// hintBuffer is how far a Hints reader may fall behind before hints are dropped.
const hintBuffer = 256

// Hints watches every lease and group record of the bucket: a lease record written free (its
// holder cleared, or its first waiter gone) is a Released hint, any group record write a
// GroupChanged hint. The watch is an ordered consumer: hints lost during a reconnect are lost
// (no spi.SteadyHints).
func (b *Backend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	lw, err := b.kv.Watch(wctx, "l.>", jetstream.UpdatesOnly())
	if err != nil {
		cancel()
		return nil, classify("natskv hints", err)
	}
	gw, err := b.kv.Watch(wctx, "g.>", jetstream.UpdatesOnly())
	if err != nil {
		_ = lw.Stop()
		cancel()
		return nil, classify("natskv hints", err)
	}
	out := make(chan spi.Hint, hintBuffer)
	go func() {
		defer close(out)
		defer cancel()
		defer func() { _ = lw.Stop(); _ = gw.Stop() }()
		last := map[string]leaseRec{}
		send := func(h spi.Hint) {
			select {
			case out <- h:
			default:
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-b.done:
				return
			case e, ok := <-lw.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				name := unesc(strings.TrimPrefix(e.Key(), "l."))
				var l leaseRec
				if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &l) != nil {
					send(spi.Hint{Kind: spi.Released, Name: name})
					continue
				}
				prev, seen := last[e.Key()]
				last[e.Key()] = l
				if l.Session == "" && (!seen || prev.Session != "" || firstWaiter(prev) != firstWaiter(l)) {
					send(spi.Hint{Kind: spi.Released, Name: name})
				}
			case e, ok := <-gw.Updates():
				if !ok {
					return
				}
				if e != nil {
					send(spi.Hint{Kind: spi.GroupChanged, Name: unesc(strings.TrimPrefix(e.Key(), "g."))})
				}
			}
		}
	}()
	return out, nil
}

func firstWaiter(l leaseRec) spi.SessionID {
	if len(l.Waiters) == 0 {
		return ""
	}
	return l.Waiters[0].Session
}

func unesc(key string) string {
	return strings.NewReplacer("=2E", ".", "=3A", ":", "=3D", "=").Replace(key)
}

var (
	_ spi.Hinter  = (*Backend)(nil)
	_ spi.Backend = (*Backend)(nil)
	_ spi.Queuer  = (*Backend)(nil)
)
