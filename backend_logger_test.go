package simba_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/open"
)

// recordingHandler keeps the messages logged through it.
type recordingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// has reports whether a message containing s was logged.
func (h *recordingHandler) has(s string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// TestBackendWarningsGoToTheClientsLogger: a backend opened on its own (open.Open without
// open.WithLogger) and given to simba.New with simba.WithLogger logs its warnings to the
// client's logger: the Redis backend's durability warning at the first session (the shared
// server has appendonly no) lands in the client's logger, not in slog.Default(). On the old
// code it went to slog.Default() (the client's logger had 0 such lines). A backend opened
// with a logger of its own keeps it: the warning lands there and not in the client's.
func TestBackendWarningsGoToTheClientsLogger(t *testing.T) {
	addr := testenv.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	def := &recordingHandler{}
	prev := slog.Default()
	slog.SetDefault(slog.New(def))
	defer slog.SetDefault(prev)
	const warning = "has appendonly no"

	start := func(b interface{ Close() error }, c *simba.Client) {
		t.Helper()
		defer func() {
			if err := c.Close(ctx); err != nil {
				t.Error(err)
			}
			b.Close()
		}()
		h, err := c.Lock(ctx, "simba-small-logger-"+strings.ReplaceAll(t.Name(), "/", "-"))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// No logger of the backend's own: the client's.
	b, err := open.Open(ctx, "redis://"+addr+"/0")
	if err != nil {
		t.Fatal(err)
	}
	clientLog := &recordingHandler{}
	c, err := simba.New(b, simba.WithLogger(slog.New(clientLog)), simba.WithOwner("logger-test"))
	if err != nil {
		t.Fatal(err)
	}
	start(b, c)
	if !clientLog.has(warning) || def.has(warning) {
		t.Errorf("backend without a logger: the warning %q in the client's logger: %v, in slog.Default(): %v; want only in the client's",
			warning, clientLog.has(warning), def.has(warning))
	}

	// A logger of the backend's own: kept.
	own := &recordingHandler{}
	b, err = open.Open(ctx, "redis://"+addr+"/0", open.WithLogger(slog.New(own)))
	if err != nil {
		t.Fatal(err)
	}
	clientLog = &recordingHandler{}
	c, err = simba.New(b, simba.WithLogger(slog.New(clientLog)), simba.WithOwner("logger-test"))
	if err != nil {
		t.Fatal(err)
	}
	start(b, c)
	if !own.has(warning) || clientLog.has(warning) || def.has(warning) {
		t.Errorf("backend with its own logger: the warning %q in it: %v, in the client's: %v, in slog.Default(): %v; want only in its own",
			warning, own.has(warning), clientLog.has(warning), def.has(warning))
	}
}
