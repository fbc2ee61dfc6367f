package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// Mutants the harness's mutation test can build in (the value of CHAOS_MUTANT).
const (
	// mutantIgnoreDeadline: a worker that believes its term valid for one TTL past the last
	// time the term said so, and keeps writing after revocation.
	mutantIgnoreDeadline = "ignore-deadline"
	// mutantReleaseIgnoresToken: a backend whose release ignores the token (and so the
	// holder): Release(session, name, token), and CloseSession for every name the session was
	// ever granted, free the lease whoever holds it now, the stale unlock of a lock service
	// that does not check its fencing token. PostgreSQL only.
	mutantReleaseIgnoresToken = "release-ignores-token"
)

// staleRelease is the broken statement: spec/sql.yaml's release (PostgreSQL) without its
// session_id and token conditions, so the lease is freed by name alone, and waiters are told
// at once, as by a real release (on the lease's own channel, which waiters LISTEN on).
var staleRelease = `WITH r AS (UPDATE simba_lease SET session_id = NULL WHERE name = $1 RETURNING name)
SELECT pg_notify('` + wire.SQLLeaseChannelPrefix + `' || md5(r.name), r.name), pg_notify('` + wire.SQLReleaseChannel + `', r.name) FROM r`

// tokenBlindBackend wraps a PostgreSQL backend with a release that ignores the token. Every
// other call, hints and the waiter queue included, goes to the real backend.
type tokenBlindBackend struct {
	spi.Backend
	db *sql.DB

	mu      sync.Mutex
	granted map[spi.SessionID]map[string]bool // names each session was ever granted
}

// newTokenBlind wraps b, which must be the PostgreSQL backend of dsn.
func newTokenBlind(b spi.Backend, dsn string) (*tokenBlindBackend, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return nil, fmt.Errorf("mutant %s: PostgreSQL only, not %q", mutantReleaseIgnoresToken, dsn)
	}
	if _, ok := b.(spi.Queuer); !ok {
		return nil, errors.New("mutant: the PostgreSQL backend is no spi.Queuer")
	}
	if _, ok := b.(spi.Hinter); !ok {
		return nil, errors.New("mutant: the PostgreSQL backend is no spi.Hinter")
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("mutant: %w", err)
	}
	return &tokenBlindBackend{Backend: b, db: db, granted: map[spi.SessionID]map[string]bool{}}, nil
}

func (m *tokenBlindBackend) note(session spi.SessionID, name string, a spi.Acquire) {
	if a.Kind != spi.Granted {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.granted[session] == nil {
		m.granted[session] = map[string]bool{}
	}
	m.granted[session][name] = true
}

// Acquire is the real one; the wrapper remembers the grant.
func (m *tokenBlindBackend) Acquire(ctx context.Context, session spi.SessionID, name string) (spi.Acquire, error) {
	a, err := m.Backend.Acquire(ctx, session, name)
	if err == nil {
		m.note(session, name, a)
	}
	return a, err
}

// AcquireQueued is the real one; the wrapper remembers the grant.
func (m *tokenBlindBackend) AcquireQueued(ctx context.Context, session spi.SessionID, name string) (spi.Acquire, error) {
	a, err := m.Backend.(spi.Queuer).AcquireQueued(ctx, session, name)
	if err == nil {
		m.note(session, name, a)
	}
	return a, err
}

// Withdraw is the real one.
func (m *tokenBlindBackend) Withdraw(ctx context.Context, session spi.SessionID, name string) error {
	return m.Backend.(spi.Queuer).Withdraw(ctx, session, name)
}

// CheckTTL is the real one (spi.TTLChecker).
func (m *tokenBlindBackend) CheckTTL(ttl time.Duration) error { return spi.CheckTTL(m.Backend, ttl) }

// CheckRenewal is the real one (spi.RenewalChecker).
func (m *tokenBlindBackend) CheckRenewal(ttl, every time.Duration) error {
	return spi.CheckRenewal(m.Backend, ttl, every)
}

// Hints are the real ones.
func (m *tokenBlindBackend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	return m.Backend.(spi.Hinter).Hints(ctx)
}

// Release is the broken one: it frees name whoever holds it, with whatever token.
func (m *tokenBlindBackend) Release(ctx context.Context, session spi.SessionID, name string, token int64) error {
	if err := m.Backend.Release(ctx, session, name, token); err != nil {
		return err
	}
	if _, err := m.db.ExecContext(ctx, staleRelease, name); err != nil {
		return fmt.Errorf("mutant release: %w", err)
	}
	return nil
}

// CloseSession closes the session for real, then releases, token-blind, every name it was
// ever granted: a late close of a session lost to its deadline frees its successor's lease.
func (m *tokenBlindBackend) CloseSession(ctx context.Context, session spi.SessionID) error {
	if err := m.Backend.CloseSession(ctx, session); err != nil {
		return err
	}
	m.mu.Lock()
	names := m.granted[session]
	delete(m.granted, session)
	m.mu.Unlock()
	for name := range names {
		if _, err := m.db.ExecContext(ctx, staleRelease, name); err != nil {
			return fmt.Errorf("mutant close: %w", err)
		}
	}
	return nil
}

// Close closes the real backend and the mutant's connections.
func (m *tokenBlindBackend) Close() error {
	return errors.Join(m.Backend.Close(), m.db.Close())
}
