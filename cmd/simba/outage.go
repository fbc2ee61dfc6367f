package main

import (
	"log/slog"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// reportEvery is how long after its first line outageReporter first repeats that backend
// calls still fail; each later gap is twice the one before, up to reportEveryMax.
const (
	reportEvery    = 10 * time.Second
	reportEveryMax = 2 * time.Minute
)

// outageReporter logs the backend's retryable failures while simba waits for a lease or holds
// one, so that a backend that is down or refusing is not silent: the client retries through
// them, and without this `simba lock` at a server that refuses connections waited without a
// word. It logs the first failure of an outage at once (the backends fail a call at once when
// the server refuses connections, rather than at the call's timeout), then, while failures go
// on, one line reportEvery later, and further lines twice as far apart each time, up to
// reportEveryMax (with how many it left out), and a line when a session opens again.
// Permanent failures are not its business: they end the command, which reports them.
type outageReporter struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	failing bool          // a failure was reported and no session opened since
	last    time.Time     // when the last line was logged
	gap     time.Duration // how long after last the next line may come
	skipped int           // failures left out since then
}

func newOutageReporter(log *slog.Logger) *outageReporter {
	return &outageReporter{log: log, now: time.Now}
}

// event is the client's listener (simba.WithListener): it must not block.
func (r *outageReporter) event(ev simba.Event) {
	switch {
	case ev.Kind == simba.EventBackendError && ev.Class != spi.Permanent:
		r.mu.Lock()
		defer r.mu.Unlock()
		now := r.now()
		if r.failing && now.Sub(r.last) < r.gap {
			r.skipped++
			return
		}
		attrs := []any{"op", ev.Op, "err", ev.Err}
		if r.skipped > 0 {
			attrs = append(attrs, "failures_since_last_report", r.skipped)
		}
		r.log.Warn("simba: a backend call failed; retrying", attrs...)
		if !r.failing {
			r.gap = reportEvery
		} else {
			r.gap = min(2*r.gap, reportEveryMax)
		}
		r.failing, r.last, r.skipped = true, now, 0
	case ev.Kind == simba.EventSessionOpened:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.failing {
			r.log.Info("simba: the backend answers again: a session is open")
			r.failing, r.skipped = false, 0
		}
	}
}
