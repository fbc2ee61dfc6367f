// Package adoptlog is the logger of a backend made without a logger of its own: it writes to
// slog.Default() (read at each record, so a later slog.SetDefault is followed) until the
// client the backend is given to hands it the client's logger (spi.LoggerAdopter, which
// simba.New calls when the program set simba.WithLogger). Backends given a logger of their own
// keep it and make no Sink.
package adoptlog

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Sink is where a backend's default logger writes: slog.Default() until Adopt.
type Sink struct {
	to atomic.Pointer[slog.Logger]
}

// New returns a new Sink and its Logger: what a backend made without a logger of its own
// logs through.
func New() (*slog.Logger, *Sink) {
	s := &Sink{}
	return s.Logger(), s
}

// Adopt makes every logger of s (Logger, and what its With and WithGroup derive) write to l
// from now on. A nil l changes nothing, and so does a nil s (a backend given a logger of its
// own has no Sink), so that a backend's AdoptLogger is Adopt on its Sink.
func (s *Sink) Adopt(l *slog.Logger) {
	if s != nil && l != nil {
		s.to.Store(l)
	}
}

// Target is the logger s writes to now: the adopted one, or slog.Default().
func (s *Sink) Target() *slog.Logger {
	if l := s.to.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// Logger returns a logger that writes to s's target at each record.
func (s *Sink) Logger() *slog.Logger {
	return slog.New(&handler{s: s})
}

// handler follows its Sink's target, replaying the attributes and groups it was derived with.
type handler struct {
	s   *Sink
	ops []op
}

// op is one WithAttrs (attrs) or WithGroup (group) applied to the handler.
type op struct {
	group string
	attrs []slog.Attr
}

func (h *handler) current() slog.Handler {
	t := h.s.Target().Handler()
	for _, o := range h.ops {
		if o.attrs != nil {
			t = t.WithAttrs(o.attrs)
		} else {
			t = t.WithGroup(o.group)
		}
	}
	return t
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.current().Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	return h.current().Handle(ctx, r)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return &handler{s: h.s, ops: append(h.ops[:len(h.ops):len(h.ops)], op{attrs: attrs})}
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &handler{s: h.s, ops: append(h.ops[:len(h.ops):len(h.ops)], op{group: name})}
}
