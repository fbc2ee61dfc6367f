package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// earlyStop is when run and lock stop the command of a term whose renewals fail, before the
// term ends (runTerm): a term lost to an outage ends only once its validity has run out, too
// late for a SIGTERM to do any good, since the SIGKILL is due then too. Stopped while the
// validity still holds at, the command has that long between SIGTERM and SIGKILL.
type earlyStop struct {
	at     time.Duration // the validity left when the command gets SIGTERM; 0: no early stop
	what   string        // "lock" or "leadership", for the line saying why
	errs   *backendErrors
	stderr io.Writer
}

// earlyStopAt is earlyStop.at for a TTL and a -grace: the -grace, but at most a quarter of the
// TTL, and below what one failed keep-alive leaves of the validity by a margin more. While
// keep-alives succeed the validity stays above about two thirds of the TTL (less drift and
// margin; renewal every TTL/3); a keep-alive that fails at its timeout (the renewal interval,
// TTL/3) leaves about TTL/3 less the margin, one that fails at once is retried within a
// backoff starting at 50 ms. So one failed keep-alive never stops the command, whatever the
// -grace: only renewals that go on failing (an outage, a partition) do. 0 (a -grace of 0, a
// TTL of 300 ms or less) means no early stop: SIGTERM and SIGKILL come at the term's end.
func earlyStopAt(ttl, grace time.Duration) time.Duration {
	return max(min(grace, ttl/4, ttl/3-2*simba.DefaultMargin), 0)
}

// line is the stderr line saying why the command of t gets SIGTERM with rem of its validity
// left.
func (e earlyStop) line(t simba.Term, rem time.Duration) string {
	why := "no keep-alive reply"
	if err := e.errs.last(); err != nil {
		why = "last error: " + err.Error()
	}
	return errorLine(fmt.Errorf("%s of %s (token %d) not renewed (%s), %v of its validity left (early stop at %v): sending the command SIGTERM now, SIGKILL when the validity runs out",
		e.what, t.Name(), t.Token(), why, rem.Round(time.Millisecond), e.at))
}

// backendErrors keeps the client's last retryable backend error (its listener's
// EventBackendError), for earlyStop's line.
type backendErrors struct {
	mu  sync.Mutex
	err error
}

// event is part of the client's listener: it must not block.
func (b *backendErrors) event(ev simba.Event) {
	if ev.Kind != simba.EventBackendError || ev.Class == spi.Permanent {
		return
	}
	b.mu.Lock()
	b.err = ev.Err // it names the operation
	b.mu.Unlock()
}

// last returns the last error noted, or nil.
func (b *backendErrors) last() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}
