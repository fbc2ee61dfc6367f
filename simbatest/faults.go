package simbatest

import (
	"errors"
	"sync"
	"time"
)

// Errors of injected faults. Each reaches the caller wrapped by spi.Unavailable, so it is
// retryable and matches both spi.ErrUnavailable and itself under errors.Is.
var (
	// ErrInjected is the default cause of a call failed by FailNext: the call had no effect.
	ErrInjected = errors.New("simbatest: injected failure")
	// ErrReplyLost is the cause of a call whose reply DropNextReplies dropped: the call took
	// effect at the server but the client cannot know it.
	ErrReplyLost = errors.New("simbatest: reply lost")
	// ErrCutOff is the cause of a call made while the client (or the whole server) is cut off:
	// the call had no effect.
	ErrCutOff = errors.New("simbatest: cut off from the server")
)

// CutMode says how calls behave while cut off.
type CutMode uint8

const (
	// Refuse makes calls fail at once, like a refused connection.
	Refuse CutMode = iota + 1
	// Hang makes calls block until their context is done (or the cut ends, when they fail),
	// like a network partition that drops packets.
	Hang
)

// Faults holds the faults injected into calls. A Server has one set that applies to every
// client's calls and each Backend has its own that applies only to its calls; the server's are
// checked first. A Faults is safe for concurrent use; faults take effect for calls that start
// after they are set.
type Faults struct {
	mu         sync.Mutex
	failNext   int
	failErr    error
	dropNext   int
	reqDelay   time.Duration
	replyDelay time.Duration
	cut        CutMode
	restored   chan struct{} // closed by Restore; replaced by CutOff
	failOps    map[string]error
}

func newFaults() *Faults { return &Faults{restored: make(chan struct{})} }

// FailNext makes the next n calls fail without effect. A nil err fails them with a retryable
// error wrapping ErrInjected; otherwise err is returned as is (so a test can inject a permanent
// error, or spi.Unavailable with a cause of its choice).
func (f *Faults) FailNext(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext, f.failErr = n, err
}

// FailOp makes every call of the SPI method op ("OpenSession", "Join", "Leave", "Acquire", …:
// the names Backend.Calls counts) fail without effect with err, until FailOp(op, nil) or
// Heal: a condition that lasts, such as a server that refuses the TTL for good or a record
// of the wrong kind, which err (typically a permanent error, spi.AsPermanent) stands for.
// A cut-off comes first; FailNext's failures are not consumed by these calls.
func (f *Faults) FailOp(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.failOps, op)
		return
	}
	if f.failOps == nil {
		f.failOps = make(map[string]error)
	}
	f.failOps[op] = err
}

// DropNextReplies makes the next n calls take effect at the server but fail with a retryable
// error wrapping ErrReplyLost: the lost-reply case, where the client does not know the outcome.
func (f *Faults) DropNextReplies(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropNext = n
}

// DelayRequests makes every call wait d on the server's clock before it takes effect (0 ends
// the delay). A call whose context is done while it waits fails without effect.
func (f *Faults) DelayRequests(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqDelay = d
}

// DelayReplies makes every call wait d on the server's clock after it took effect, before it
// returns (0 ends the delay): the late-reply case. A call whose context is done while it waits
// returns the context's error although it took effect.
func (f *Faults) DelayReplies(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replyDelay = d
}

// CutOff cuts the client (or, for the server's faults, every client) off until Restore: calls
// fail or hang as mode says, without effect, and no hints are delivered.
func (f *Faults) CutOff(mode CutMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut == 0 {
		f.restored = make(chan struct{})
	}
	f.cut = mode
}

// Restore ends a cut-off; calls hanging in it fail with ErrCutOff.
func (f *Faults) Restore() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut != 0 {
		f.cut = 0
		close(f.restored)
	}
}

// Heal clears every fault: failures, dropped replies, delays and cut-offs.
func (f *Faults) Heal() {
	f.Restore()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext, f.failErr, f.dropNext, f.reqDelay, f.replyDelay = 0, nil, 0, 0, 0
	f.failOps = nil
}

// admission is what the faults decide for one call before it reaches the model.
type admission struct {
	cut      CutMode
	restored <-chan struct{}
	fail     bool
	failErr  error
	delay    time.Duration // request delay
}

// admit decides the faults of a call of op that is starting; a cut-off call consumes no
// failure.
func (f *Faults) admit(op string) admission {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := admission{cut: f.cut, restored: f.restored, delay: f.reqDelay}
	if err, ok := f.failOps[op]; ok && a.cut == 0 {
		a.fail, a.failErr = true, err
		return a
	}
	if a.cut == 0 && f.failNext > 0 {
		f.failNext--
		a.fail, a.failErr = true, f.failErr
	}
	return a
}

// afterEffect decides the faults of a call that took effect: whether its reply is dropped and
// how long it is delayed.
func (f *Faults) afterEffect() (drop bool, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dropNext > 0 {
		f.dropNext--
		drop = true
	}
	return drop, f.replyDelay
}

func (f *Faults) isCut() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cut != 0
}
