package simbatest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/simba-go/simba/spi"
)

// ErrLinkCut is the cause of a call that a cut Link dropped.
var ErrLinkCut = errors.New("simbatest: link cut")

// Link stands between a client and ANY backend (a real server's too) like a network link a
// test can cut: while cut, every call hangs until its context ends (a partition drops
// packets), calls already under way lose their replies, and no hints get through. Cutting the
// link of a leader is how tests crash it without a goodbye: its session then expires at the
// server. A Link is safe for concurrent use.
type Link struct {
	b        spi.Backend
	mu       sync.Mutex
	severed  bool
	restored chan struct{} // closed by Restore; replaced by CutOff
}

// NewLink returns an uncut link to b.
func NewLink(b spi.Backend) *Link { return &Link{b: b, restored: make(chan struct{})} }

// Backend returns the link as a backend for a client: a spi.Hinter and a spi.Queuer too when
// the backend behind it is one.
func (l *Link) Backend() spi.Backend {
	_, hints := l.b.(spi.Hinter)
	_, queues := l.b.(spi.Queuer)
	switch {
	case hints && queues:
		return hintingQueuingLink{hintingLink{linked{l}}}
	case hints:
		return hintingLink{linked{l}}
	case queues:
		return queuingLink{linked{l}}
	}
	return linked{l}
}

// CutOff cuts the link until Restore.
func (l *Link) CutOff() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.severed {
		l.severed = true
		l.restored = make(chan struct{})
	}
}

// Restore ends a cut; calls hanging in it fail with a retryable error wrapping ErrLinkCut.
func (l *Link) Restore() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.severed {
		l.severed = false
		close(l.restored)
	}
}

// IsCut reports whether the link is cut.
func (l *Link) IsCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.severed
}

// pass returns nil if the link is up; while it is cut it waits until ctx ends (or the link is
// restored) and returns a retryable error.
func (l *Link) pass(ctx context.Context, op string) error {
	l.mu.Lock()
	severed, restored := l.severed, l.restored
	l.mu.Unlock()
	if !severed {
		return nil
	}
	if err := spi.Await(ctx, restored); err != nil { // a client's call waits idle
		return spi.Unavailable(op, fmt.Errorf("%w: %w", ErrLinkCut, err))
	}
	return spi.Unavailable(op, ErrLinkCut)
}

// through runs f over the link: not at all while it is cut, and with its reply lost if the
// link was cut while f ran.
func through[T any](l *Link, ctx context.Context, op string, f func() (T, error)) (T, error) {
	var zero T
	if err := l.pass(ctx, op); err != nil {
		return zero, err
	}
	v, err := f()
	if err := l.pass(ctx, op); err != nil {
		return zero, err
	}
	return v, err
}

// linked is the spi.Backend side of a Link.
type linked struct{ l *Link }

// CutSafe implements spi.CutSafe as the linked backend does.
func (k linked) CutSafe() bool { return spi.IsCutSafe(k.l.b) }

// QueueEntriesLiveWithSession implements spi.SessionQueue as the linked backend does: a cut
// link leaves the server's waiter entries as they are.
func (k linked) QueueEntriesLiveWithSession() bool { return spi.EntriesLiveWithSession(k.l.b) }

// HintsSteady implements spi.SteadyHints as the linked backend does: the hints a cut link
// drops stand, like the backend's own, for hints lost anyway (see Backend.HintsSteady).
func (k linked) HintsSteady() bool { return spi.AreHintsSteady(k.l.b) }

// CheckTTL implements spi.TTLChecker as the linked backend does (if it does): a check made
// without I/O, which a cut link does not stop.
func (k linked) CheckTTL(ttl time.Duration) error { return spi.CheckTTL(k.l.b, ttl) }

// AdoptLogger implements spi.LoggerAdopter as the linked backend does (if it does).
func (k linked) AdoptLogger(l *slog.Logger) { spi.AdoptLogger(k.l.b, l) }

// EndWait implements spi.WaitEnder as the linked backend does (if it does): a call that stays
// in the client's process, which a cut link does not stop.
func (k linked) EndWait(s spi.SessionID, name string) {
	if we, ok := k.l.b.(spi.WaitEnder); ok {
		we.EndWait(s, name)
	}
}

func (k linked) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	return through(k.l, ctx, "open-session", func() (spi.Session, error) { return k.l.b.OpenSession(ctx, owner, ttl) })
}

func (k linked) KeepAlive(ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	return through(k.l, ctx, "keep-alive", func() (spi.KeepAlive, error) { return k.l.b.KeepAlive(ctx, s, names, groups) })
}

func (k linked) CloseSession(ctx context.Context, s spi.SessionID) error {
	_, err := through(k.l, ctx, "close-session", func() (struct{}, error) { return struct{}{}, k.l.b.CloseSession(ctx, s) })
	return err
}

func (k linked) Acquire(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	return through(k.l, ctx, "acquire", func() (spi.Acquire, error) { return k.l.b.Acquire(ctx, s, name) })
}

func (k linked) Release(ctx context.Context, s spi.SessionID, name string, token int64) error {
	_, err := through(k.l, ctx, "release", func() (struct{}, error) { return struct{}{}, k.l.b.Release(ctx, s, name, token) })
	return err
}

func (k linked) Join(ctx context.Context, s spi.SessionID, group string) (spi.Status, error) {
	return through(k.l, ctx, "join", func() (spi.Status, error) { return k.l.b.Join(ctx, s, group) })
}

func (k linked) Leave(ctx context.Context, s spi.SessionID, group string) (spi.Status, error) {
	return through(k.l, ctx, "leave", func() (spi.Status, error) { return k.l.b.Leave(ctx, s, group) })
}

func (k linked) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	return through(k.l, ctx, "members", func() ([]spi.SessionID, error) { return k.l.b.Members(ctx, group) })
}

// Close closes the backend behind the link.
func (k linked) Close() error { return k.l.b.Close() }

// hintingLink is a link to a backend with hints; hints are dropped while the link is cut.
type hintingLink struct{ linked }

// Hints forwards the backend's hints while the link is up. A hint it drops ends the unit the
// backend may have begun for it in ctx's activity (see spi.ContextWithActivity).
func (k hintingLink) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	in, err := k.l.b.(spi.Hinter).Hints(ctx)
	if err != nil {
		return nil, err
	}
	act := spi.ActivityFromContext(ctx)
	drop := func() {
		if act != nil {
			act.End()
		}
	}
	out := make(chan spi.Hint)
	go func() {
		defer close(out)
		for h := range in {
			if k.l.IsCut() {
				drop()
				continue
			}
			select {
			case out <- h:
			case <-ctx.Done():
				drop()
			}
		}
	}()
	return out, nil
}

// queuingLink is a link to a backend with a waiter queue.
type queuingLink struct{ linked }

// AcquireQueued forwards spi.Queuer's AcquireQueued over the link.
func (k queuingLink) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	return acquireQueued(k.linked, ctx, s, name)
}

// hintingQueuingLink is a link to a backend with hints and a waiter queue.
type hintingQueuingLink struct{ hintingLink }

// AcquireQueued forwards spi.Queuer's AcquireQueued over the link.
func (k hintingQueuingLink) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	return acquireQueued(k.linked, ctx, s, name)
}

// Withdraw forwards spi.Queuer's Withdraw over the link.
func (k queuingLink) Withdraw(ctx context.Context, s spi.SessionID, name string) error {
	return withdraw(k.linked, ctx, s, name)
}

// Withdraw forwards spi.Queuer's Withdraw over the link.
func (k hintingQueuingLink) Withdraw(ctx context.Context, s spi.SessionID, name string) error {
	return withdraw(k.linked, ctx, s, name)
}

func withdraw(k linked, ctx context.Context, s spi.SessionID, name string) error {
	_, err := through(k.l, ctx, "withdraw", func() (struct{}, error) {
		return struct{}{}, k.l.b.(spi.Queuer).Withdraw(ctx, s, name)
	})
	return err
}

func acquireQueued(k linked, ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	return through(k.l, ctx, "acquire", func() (spi.Acquire, error) {
		return k.l.b.(spi.Queuer).AcquireQueued(ctx, s, name)
	})
}
