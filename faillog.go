package simba

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/simba-go/simba/internal/engine"
	"github.com/simba-go/simba/spi"
)

// How the log tells failed backend calls (failLevel). Every failure is an EventBackendError to
// the listeners, kept for Err and counted by simbaprom; only the log is damped, so that an
// outage reads as a few lines rather than one per retry of every name:
//
//   - A permanent error is logged at ERROR the first time per call (operation and name) and
//     distinct error, at DEBUG while it repeats, with one ERROR line per failLogInterval
//     counting the repeats ("repeats"); a success of the call resets it.
//   - A retryable error starts an outage unless one is under way: one WARN line naming the
//     backend, the call, the error and what it affects (and one more when the session's call
//     fails in an outage that began with a lease's or group's). In the outage a failure with an error
//     not yet logged in it is a WARN line at once; the rest are at DEBUG, with one WARN line
//     per failLogInterval summarising them ("simba backend still failing": the failures since
//     the last WARN line, the calls failing, how long). Calls of leases and groups failing
//     while the session's own calls fail add nothing and are folded in, and so does a session
//     call that a probe cut short (errCutStuck): the backend answers again, the outage ends.
//   - A call that lost its race with other clients' changes (spi.ErrContended: the backend
//     answered every request) is contention, not an outage: it is logged at DEBUG ("simba
//     backend call contended") and neither starts an outage nor counts in one. It was a WARN
//     "simba backend error" followed by "reachable again" a few ms later under busy locks
//     (ZooKeeper's "waiter queue kept changing", trial 25).
//   - The outage ends with one INFO line, "simba backend reachable again", counting its
//     failures and its length, when the session's open or keep-alive succeeds after failing in
//     it, or when every call that failed in it has succeeded since.
//
// Errors are compared with their numbers folded (failShape: the local port of a reset
// connection, a timeout's duration differ from one failure to the next).

// failKey names the call whose failures the log damps: the operation and the lease or group
// ("" for the session's calls).
type failKey struct {
	op   engine.Op
	name string
}

// failSeen is a call whose latest failure was not followed by a success: the error it last
// logged (permanent: the message; retryable: its shape), when, and how many failures were
// logged at DEBUG since.
type failSeen struct {
	msg       string
	at        time.Duration
	quiet     int
	retryable bool
}

// outageLog is the outage under way, as the log tells it (failLevel).
type outageLog struct {
	active  bool
	since   time.Duration // its first failure
	at      time.Duration // its latest WARN line
	fails   int           // failed calls in it
	quiet   int           // of which at DEBUG since its latest WARN line
	session bool          // the session's open or keep-alive failed in it
	failing int           // calls in failLog whose latest failure is retryable
	shapes  []string      // the errors logged in it (failShape), at most failLogShapes
}

// failLogInterval is how often an error that repeats is logged loud again: a permanent one
// at ERROR with the repeats counted, an outage's retryable ones in one WARN summary.
const failLogInterval = time.Minute

// failLogMax bounds failLog: past it the map starts afresh (a client whose calls about many
// names fail logs each once more).
const failLogMax = 1024

// failLogShapes bounds the distinct errors an outage logs at once; past it they are summarised.
const failLogShapes = 8

// isSessionOp reports whether op is one of the session's own calls, whose failure stops every
// lease and group of the client.
func isSessionOp(op engine.Op) bool { return op == engine.OpOpenSession || op == engine.OpKeepAlive }

// failShape is the message of err's root cause (the end of its chain of wrapped errors, the
// last of a join) with every run of digits folded into one '#': two failures of one cause
// (connection refused, reset, a timeout) compare equal whatever the call, port or duration.
func failShape(err error) string {
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := u.Unwrap(); len(errs) > 0 {
				next = errs[len(errs)-1]
			}
		}
		if next == nil {
			break
		}
		err = next
	}
	msg := err.Error()
	b := make([]byte, 0, len(msg))
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c >= '0' && c <= '9' {
			if len(b) == 0 || b[len(b)-1] != '#' {
				b = append(b, '#')
			}
			continue
		}
		b = append(b, msg[i])
	}
	return string(b)
}

// failEntry returns failLog's entry for k, adding one (and starting the map afresh when it is
// full) if there is none.
func (c *Client) failEntry(k failKey) (seen *failSeen, fresh bool) {
	if seen = c.failLog[k]; seen != nil {
		return seen, false
	}
	if c.failLog == nil || len(c.failLog) >= failLogMax {
		c.failLog = make(map[failKey]*failSeen)
		c.outage.failing = 0
	}
	seen = &failSeen{}
	c.failLog[k] = seen
	return seen, true
}

// failLevel returns the level, message and extra attributes of the log line of a failed call
// op/name whose error is cause (before backendError wraps it), as the comment above says.
// Owned by whoever steps the engine, as failLog is.
func (c *Client) failLevel(op engine.Op, name string, class spi.Class, cause error, now time.Duration) (slog.Level, string, []any) {
	const msg = "simba backend error"
	if class != spi.Permanent && errors.Is(cause, spi.ErrContended) {
		return slog.LevelDebug, "simba backend call contended", nil
	}
	seen, fresh := c.failEntry(failKey{op, name})
	o := &c.outage
	if class == spi.Permanent {
		text := cause.Error()
		if seen.retryable {
			seen.retryable = false
			o.failing--
			fresh = true
		}
		same := !fresh && seen.msg == text
		if same && now-seen.at < failLogInterval {
			seen.quiet++
			return slog.LevelDebug, msg, nil
		}
		repeats := 0
		if same {
			repeats = seen.quiet
		}
		*seen = failSeen{msg: text, at: now}
		if repeats > 0 {
			return slog.LevelError, msg, []any{"repeats", repeats}
		}
		return slog.LevelError, msg, nil
	}
	shape := failShape(cause)
	if !seen.retryable {
		*seen = failSeen{msg: shape, at: now, retryable: true}
		o.failing++
	}
	if !o.active {
		*o = outageLog{active: true, since: now, at: now, fails: 1, session: isSessionOp(op), failing: o.failing,
			shapes: []string{shape}}
		return slog.LevelWarn, msg, c.affects(op, name)
	}
	o.fails++
	if errors.Is(cause, errCutStuck) {
		// A probe found the backend answering and cut this call short: the outage is ending
		// (the retry follows at once, and its success says "reachable again"), not news.
		o.quiet++
		return slog.LevelDebug, msg, nil
	}
	if isSessionOp(op) && !o.session {
		// The outage began with a call of a lease or group; now the session's fails too, and
		// with it every lease and group of the client.
		o.session, o.at = true, now
		o.addShape(shape)
		return slog.LevelWarn, msg, append(c.affects(op, name), "outage_failures", o.fails, "outage_for", now-o.since)
	}
	if o.addShape(shape) {
		o.at = now
		return slog.LevelWarn, msg, []any{"outage_failures", o.fails, "outage_for", now - o.since}
	}
	if now-o.at >= failLogInterval {
		quiet := o.quiet
		o.at, o.quiet = now, 0
		return slog.LevelWarn, "simba backend still failing", []any{"failures", quiet + 1, "outage_failures", o.fails,
			"failing_calls", o.failing, "names", c.failingNames(), "outage_for", now - o.since}
	}
	o.quiet++
	return slog.LevelDebug, msg, nil
}

// addShape adds shape to the errors the outage has logged, unless it is among them or they
// are failLogShapes already; it reports whether it did (the failure is news).
func (o *outageLog) addShape(shape string) bool {
	if slices.Contains(o.shapes, shape) || len(o.shapes) >= failLogShapes {
		return false
	}
	o.shapes = append(o.shapes, shape)
	return true
}

// failingNamesMax bounds the names an outage's summary lists.
const failingNamesMax = 5

// failingNames returns the first few names, in order, of the leases and groups whose calls
// fail with a retryable error, and "…" if there are more.
func (c *Client) failingNames() []string {
	var names []string
	for k, seen := range c.failLog {
		if seen.retryable && k.name != "" && !slices.Contains(names, k.name) {
			names = append(names, k.name)
		}
	}
	slices.Sort(names)
	if len(names) > failingNamesMax {
		names = append(names[:failingNamesMax], "…")
	}
	return names
}

// affects returns the attributes of an outage's first line: the backend, and what the failed
// call stops (for a session call: every lease and group of the client).
func (c *Client) affects(op engine.Op, name string) []any {
	attrs := []any{"backend", fmt.Sprintf("%T", c.backend)}
	if !isSessionOp(op) {
		return attrs
	}
	c.mu.Lock()
	leases, groups := len(c.handles), len(c.groups)
	c.mu.Unlock()
	return append(attrs, "affects", "the session: every election, lock and group", "elections_and_locks", leases, "groups", groups)
}

// callSucceeded forgets the failures of the call op/name, which succeeded, and ends the outage
// under way with an INFO line when it proves the backend reachable again: the session's call
// after failing in it, or the last call that failed in it.
func (c *Client) callSucceeded(op engine.Op, name string, now time.Duration) {
	k := failKey{op, name}
	if seen := c.failLog[k]; seen != nil {
		delete(c.failLog, k)
		if seen.retryable {
			c.outage.failing--
		}
	}
	o := &c.outage
	if !o.active || !(o.failing <= 0 || isSessionOp(op) && o.session) {
		return
	}
	c.cfg.logger.Info("simba backend reachable again", "op", publicOp(op), "failures", o.fails, "outage_for", now-o.since)
	if o.failing > 0 {
		// The session is back: the calls of leases and groups that failed in the outage
		// are retried on it, and a failure of one now is news.
		for k, seen := range c.failLog {
			if seen.retryable {
				delete(c.failLog, k)
			}
		}
	}
	*o = outageLog{}
}
