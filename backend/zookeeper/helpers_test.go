package zookeeper

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/internal/zktest"
	"github.com/simba-go/simba/spi"
)

// credential is what it takes to act as a ZooKeeper session: its id and password.
type credential struct {
	zid    int64
	passwd []byte
	server string
	s      *session
}

// credentialsOf returns the credentials of the backend's session sid.
func (b *Backend) credentialsOf(sid spi.SessionID) (credential, bool) {
	b.mu.Lock()
	s := b.sessions[sid]
	b.mu.Unlock()
	if s == nil {
		return credential{}, false
	}
	zid, pw := s.tap.credentials()
	return credential{zid: zid, passwd: pw, server: s.conn.Server(), s: s}, true
}

// recorder wraps backends so that tests can end their sessions at the server even after the
// backend is closed (as a crashed client's): it remembers every session's credentials.
type recorder struct {
	mu    sync.Mutex
	creds map[spi.SessionID]credential
}

func newRecorder() *recorder { return &recorder{creds: map[spi.SessionID]credential{}} }

// recorded is a Backend whose OpenSession records the session's credentials.
type recorded struct {
	*Backend
	r *recorder
}

// OpenSession implements spi.Backend.
func (r recorded) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	s, err := r.Backend.OpenSession(ctx, owner, ttl)
	if err == nil {
		if c, ok := r.Backend.credentialsOf(s.ID); ok {
			r.r.mu.Lock()
			r.r.creds[s.ID] = c
			r.r.mu.Unlock()
		}
	}
	return s, err
}

// expire ends session sid at the server now.
func (r *recorder) expire(t testing.TB, sid spi.SessionID) {
	t.Helper()
	r.mu.Lock()
	c, ok := r.creds[sid]
	r.mu.Unlock()
	if !ok {
		t.Fatalf("no credentials recorded for session %s", sid)
	}
	// The backend redials the connection the kill's connect request took the session from
	// after 25-50 ms (see pacer); should its connect request get the session back before the
	// kill's close is read, the server drops the kill's connection: kill again.
	for attempt := 1; ; attempt++ {
		err := killSession(c.server, c.zid, c.passwd)
		if err == nil || c.s.gone() {
			break
		}
		if attempt == 5 {
			t.Fatalf("killing session %s: %v", sid, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The backend learns of the expiry when its connection, which the server has closed,
	// reconnects (after 25-50 ms, see pacer); wait for that so that the next call sees it.
	deadline := time.Now().Add(15 * time.Second)
	for !c.s.gone() {
		if time.Now().After(deadline) {
			t.Fatalf("the backend did not notice that session %s was killed", sid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killSession ends a ZooKeeper session at the server as if it had expired: it connects a second
// client with the session's id and password (which moves the session to it) and closes the
// session there, the technique of Curator's KillSession. The backend's own connection then
// finds the session gone.
func killSession(server string, zid int64, passwd []byte) error {
	return closeOver(context.Background(), nil, nil, server, 5*time.Second, time.Now().Add(10*time.Second), zid, closeSessionFrames(zid, passwd, 30000))
}

// serverDSN returns the DSN of the shared test server under a fresh chroot, removed when the
// test ends (zktest.New: the test fails if it is left).
func serverDSN(t testing.TB, query string) string {
	t.Helper()
	return serverChroot(t).DSN("", query)
}

// serverChroot returns a fresh chroot on the shared test server, removed when the test ends
// with every digest identity a DSN of it (Chroot.DSN) named: registered before the test's
// backends are, so it runs after they have closed.
func serverChroot(t testing.TB) *zktest.Chroot {
	t.Helper()
	return zktest.New(t, testenv.ZooKeeper(t), "simba-test")
}

// openBackend returns a backend for dsn, closed when the test ends.
func openBackend(t testing.TB, dsn string, opts ...Option) *Backend {
	t.Helper()
	b, err := New(dsn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// ttlBounds asks the server for its session timeout bounds: the timeouts it grants for a
// very short and a very long request.
func ttlBounds(t testing.TB, b *Backend) (lo, hi time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, ttl := range []time.Duration{time.Millisecond, 24 * time.Hour} {
		s, err := b.connect(ctx, "bounds", ttl)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		if i == 0 {
			lo = s.tap.sessionTimeout()
		} else {
			hi = s.tap.sessionTimeout()
		}
		s.end(false)
	}
	return lo, hi
}
