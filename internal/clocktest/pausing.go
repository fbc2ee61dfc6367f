package clocktest

import (
	"sync"
	"time"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// Pausing is a virtual clock on which a client's process can be stopped: while stopped, the
// timers that fall due run nothing (the process does not run) until Resume runs them, late, as
// a process resumed after SIGSTOP finds its timers overdue. The backend's server, on the
// VirtualClock itself, runs on.
type Pausing struct {
	*simbatest.VirtualClock
	mu      sync.Mutex
	stopped bool
	held    []func()
}

// NewPausing returns a Pausing clock over vc.
func NewPausing(vc *simbatest.VirtualClock) *Pausing { return &Pausing{VirtualClock: vc} }

// AfterFunc is the VirtualClock's, but a timer falling due while the clock is stopped waits
// for Resume.
func (p *Pausing) AfterFunc(d time.Duration, f func()) spi.Timer {
	return p.VirtualClock.AfterFunc(d, func() {
		p.mu.Lock()
		if p.stopped {
			p.held = append(p.held, f)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		f()
	})
}

// Stop stops the process: timers falling due from now on wait for Resume.
func (p *Pausing) Stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

// Resume runs the timers that fell due while stopped, late, and lets later ones run in time.
// It settles the clock after each, as the clock does after each timer it fires, so that what
// a timer starts (a call it times out, ending on its own goroutine) is done before the next
// runs, and a seeded run repeats.
func (p *Pausing) Resume() {
	p.mu.Lock()
	held := p.held
	p.held, p.stopped = nil, false
	p.mu.Unlock()
	for _, f := range held {
		f()
		p.Settle()
	}
}

// PauseFor stops the process, moves the time by d, resumes it and settles the clock.
func (p *Pausing) PauseFor(d time.Duration) {
	p.Stop()
	p.Advance(d)
	p.Resume()
	p.Settle()
}
