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
// left: the last backend error since the term was last renewed, or, with none (the one before
// has been followed by a renewal: that outage is over), "no keep-alive reply" (a keep-alive
// still waiting for its answer).
func (e earlyStop) line(t simba.Term, rem time.Duration) string {
	why := "no keep-alive reply"
	if err := e.errs.since(t); err != nil {
		why = "last error: " + err.Error()
	}
	return errorLine(fmt.Errorf("%s of %s (token %d) not renewed (%s), %v of its validity left (early stop at %v): sending the command SIGTERM now, SIGKILL when the validity runs out",
		e.what, t.Name(), t.Token(), why, rem.Round(time.Millisecond), e.at))
}

// backendErrors keeps the client's last retryable backend error (its listener's
// EventBackendError), for earlyStop's line, with the end of the term's validity as it stood
// then. The client publishes no event when a keep-alive succeeds after failing, but the term
// tells: a renewal moves the end of its validity later. An error noted before the term's
// validity last moved is one the client has recovered from, which the line must not name.
type backendErrors struct {
	mu   sync.Mutex
	term simba.Term // the term whose command runs (watch); the zero Term before
	err  error
	end  time.Duration // the end of term's validity (validityEnd) when err was noted; 0: no term then
}

// renewalSlack is how much later the end of a term's validity must be than it was at an
// error, for a renewal to have come since: each end is read as the clock plus
// Term.Remaining, two clock readings that a descheduled goroutine may find apart by a few
// milliseconds; a renewal moves the end by the time between the sends of the keep-alive that
// made it and of the last one that renewed before, which spans the failed call's: about the
// renewal interval (TTL/3, at least 166 ms for run and lock), far above that.
const renewalSlack = 5 * time.Millisecond

// clockOrigin is what validityEnd measures from: its readings are Go's monotonic clock.
var clockOrigin = time.Now()

// validityEnd is the end of t's validity, as a reading of the monotonic clock (time since
// clockOrigin; positive).
func validityEnd(t simba.Term) time.Duration { return time.Since(clockOrigin) + t.Remaining() + 1 }

// watch makes t the term whose validity the errors noted from now on are compared with.
func (b *backendErrors) watch(t simba.Term) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.term = t
	b.mu.Unlock()
}

// event is part of the client's listener: it must not block. Listeners run where the client
// applies the backend's replies, so the term's validity read here counts every renewal
// applied before the failure and none after.
func (b *backendErrors) event(ev simba.Event) {
	if ev.Kind != simba.EventBackendError || ev.Class == spi.Permanent {
		return
	}
	b.mu.Lock()
	b.err = ev.Err // it names the operation
	b.end = 0
	if b.term != (simba.Term{}) {
		b.end = validityEnd(b.term)
	}
	b.mu.Unlock()
}

// since returns the last error noted, if it came while t held and t has not been renewed since;
// else nil.
func (b *backendErrors) since(t simba.Term) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil || b.end == 0 || b.term != t || validityEnd(t) > b.end+renewalSlack {
		return nil
	}
	return b.err
}
