package zookeeper

import (
	"sync"
	"time"
)

// hopIdle is how long a hop worker waits for another request before it exits.
const hopIdle = time.Second

// hops runs the go-zookeeper requests of calls whose context can end (see call) on goroutines
// it keeps for the next such request, as the client's call workers do for backend calls.
// go-zookeeper's requests take no context, so a call that must return once its context ends
// waits for its request on a goroutine other than its caller's. A goroutine started for each
// request starts on a small stack, which go-zookeeper's encoding and decoding of the request
// then grows (a new stack allocated and the old one copied), and exits after it: on the 2-CPU
// machine of 2026-12-06, perf put stack growth at 4.8-6.2 % of the process's CPU in an
// uncontended acquire and release loop (SPI calls, and simba.Client Lock cycles, with a
// deadline; 15-25 µs of CPU a cycle of two requests), and goroutine starts and exits at another
// 1.4-3.7 %; with workers, 0.05 % and under 1 %. A worker keeps its grown stack: it takes the
// next request while one waits for it (an unbuffered hand-off: a request finds an idle worker
// or starts one), and exits once idle for hopIdle (to 2 hopIdle) or when the backend closes.
//
// Close waits for the workers (wait): a worker still running a request when Close came (its
// request fails once Close has dropped the request's connection) used to be seen alive after
// Close had returned. A request handed over once Close has begun (a call that was under way)
// runs on its caller's goroutine instead: its connection is closed or closing, so it fails at
// once, and no worker starts that Close would not wait for.
type hops struct {
	q    chan func()
	stop <-chan struct{} // the backend's stop: closed by Close

	mu      sync.Mutex
	stopped bool          // wait has begun: no more workers start
	workers int           // the running workers
	ended   chan struct{} // closed once stopped and no worker runs
}

func newHops(stop <-chan struct{}) *hops {
	return &hops{q: make(chan func()), stop: stop, ended: make(chan struct{})}
}

// run runs f on an idle worker, or on a new one if none waits.
func (h *hops) run(f func()) {
	select {
	case h.q <- f:
	default:
		h.mu.Lock()
		if h.stopped {
			h.mu.Unlock()
			f()
			return
		}
		h.workers++
		h.mu.Unlock()
		go h.worker(f)
	}
}

// wait stops new workers from starting and waits, up to limit, for the running ones to end.
// It reports whether they did. The backend's stop must be closed first (idle workers exit on
// it), and the connections of the requests the workers run closed (their requests then fail).
func (h *hops) wait(limit time.Duration) bool {
	h.mu.Lock()
	if !h.stopped {
		h.stopped = true
		if h.workers == 0 {
			close(h.ended)
		}
	}
	h.mu.Unlock()
	select {
	case <-h.ended:
		return true
	default:
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-h.ended:
		return true
	case <-t.C:
		return false
	}
}

// exit counts a worker out.
func (h *hops) exit() {
	h.mu.Lock()
	h.workers--
	if h.stopped && h.workers == 0 {
		close(h.ended)
	}
	h.mu.Unlock()
}

// worker runs f, then the requests handed to it, until it has waited hopIdle for one or the
// backend stops. Its timer is not reset per request (two resets a lock cycle that the cycle
// need not pay): when it fires, the worker exits if it ran nothing since it was last set, and
// otherwise waits another hopIdle; so an idle worker exits one to two hopIdle after its last
// request.
func (h *hops) worker(f func()) {
	defer h.exit()
	idle := time.NewTimer(hopIdle)
	defer idle.Stop()
	ran := false
	for {
		if f != nil {
			f()
			f, ran = nil, true
		}
		select {
		case f = <-h.q:
		case <-idle.C:
			if !ran {
				return
			}
			ran = false
			idle.Reset(hopIdle)
		case <-h.stop:
			return
		}
	}
}
