package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/spi"
)

// tracer writes one member's trace (-trace): its session, the replies of its acquires (kind,
// holder, the holder's time left), its withdrawals and releases, the hints it receives and its
// state lines, each stamped with the milliseconds since the member's join (since its start
// before it). A nil tracer writes nothing.
type tracer struct {
	mu    sync.Mutex
	f     *os.File
	start time.Time
}

// newTracer opens dir/<group>-<pid>.log; dir "" is no trace.
func newTracer(dir, group string) (*tracer, error) {
	if dir == "" {
		return nil, nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.log", group, os.Getpid())))
	if err != nil {
		return nil, err
	}
	return &tracer{f: f, start: time.Now()}, nil
}

// joined restarts the clock: the member joins now.
func (t *tracer) joined() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.start = time.Now()
	t.mu.Unlock()
	t.printf("join")
}

func (t *tracer) printf(format string, args ...any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.f, "%9.1f %s\n", float64(time.Since(t.start).Microseconds())/1000, fmt.Sprintf(format, args...))
}

func (t *tracer) close() {
	if t != nil {
		t.f.Close()
	}
}

// traced is the member's backend with its calls traced (every other method, and so every
// optional capability of the SQL backend, is the backend's own).
type traced struct {
	*simbasql.Backend
	t *tracer
}

func (b traced) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	s, err := b.Backend.OpenSession(ctx, owner, ttl)
	b.t.printf("open %s err=%v", s.ID, err)
	return s, err
}

func (b traced) Acquire(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	r, err := b.Backend.Acquire(ctx, s, name)
	b.acquired("acquire", name, r, err)
	return r, err
}

func (b traced) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	r, err := b.Backend.AcquireQueued(ctx, s, name)
	b.acquired("acquire-queued", name, r, err)
	return r, err
}

func (b traced) acquired(op, name string, r spi.Acquire, err error) {
	switch {
	case err != nil:
		b.t.printf("%s %s err=%v", op, name, err)
	case r.Kind == spi.HeldBy:
		b.t.printf("%s %s held-by %s remaining=%v", op, name, r.Holder, r.Remaining)
	default:
		b.t.printf("%s %s %v", op, name, r.Kind)
	}
}

func (b traced) Withdraw(ctx context.Context, s spi.SessionID, name string) error {
	err := b.Backend.Withdraw(ctx, s, name)
	b.t.printf("withdraw %s err=%v", name, err)
	return err
}

func (b traced) Release(ctx context.Context, s spi.SessionID, name string, token int64) error {
	err := b.Backend.Release(ctx, s, name, token)
	b.t.printf("release %s err=%v", name, err)
	return err
}

func (b traced) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	in, err := b.Backend.Hints(ctx)
	if err != nil {
		return in, err
	}
	out := make(chan spi.Hint, cap(in))
	go func() {
		defer close(out)
		for h := range in {
			b.t.printf("hint %v %s", h.Kind, h.Name)
			out <- h
		}
	}()
	return out, nil
}
