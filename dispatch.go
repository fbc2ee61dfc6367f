package simba

import (
	"sync"

	"github.com/simba-go/simba/internal/engine"
)

// serialDispatcher runs submitted functions one at a time, in submission order, on the
// callback executor: the callbacks of one election never overlap and never block the loop.
//
// running counts the dispatchers of a client that have functions to run: the client's close
// waits for it, so no callback outlives Close, whether or not its election is still known.
type serialDispatcher struct {
	exec    Executor
	running *sync.WaitGroup
	mu      sync.Mutex
	queue   []func()
	busy    bool
}

func newSerialDispatcher(exec Executor, running *sync.WaitGroup) *serialDispatcher {
	return &serialDispatcher{exec: exec, running: running}
}

// submit queues f; it never blocks.
func (d *serialDispatcher) submit(f func()) {
	d.mu.Lock()
	d.queue = append(d.queue, f)
	start := !d.busy
	d.busy = true
	d.mu.Unlock()
	if start {
		d.running.Add(1)
		d.exec(d.drain)
	}
}

func (d *serialDispatcher) drain() {
	for {
		d.mu.Lock()
		if len(d.queue) == 0 {
			d.busy = false
			d.mu.Unlock()
			d.running.Done()
			return
		}
		f := d.queue[0]
		d.queue[0] = nil
		d.queue = d.queue[1:]
		d.mu.Unlock()
		f()
	}
}

// future is a one-shot result the loop completes and a caller waits for.
type future struct {
	id   engine.FutureID
	done chan struct{}
	term Term
	err  error
}

func newFuture() *future { return &future{done: make(chan struct{})} }

// completed reports whether the future has its result.
func (f *future) completed() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// complete sets the result; only the first call counts.
func (f *future) complete(t Term, err error) {
	select {
	case <-f.done:
		return
	default:
	}
	f.term, f.err = t, err
	close(f.done)
}
