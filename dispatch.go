package simba

import (
	"sync"

	"github.com/simba-go/simba/internal/engine"
)

// serialDispatcher runs submitted functions one at a time, in submission order, on the
// callback executor: the callbacks of one election never overlap and never block the loop.
type serialDispatcher struct {
	exec    Executor
	mu      sync.Mutex
	queue   []func()
	running bool
	idle    *sync.Cond // signalled when the queue drains
}

func newSerialDispatcher(exec Executor) *serialDispatcher {
	d := &serialDispatcher{exec: exec}
	d.idle = sync.NewCond(&d.mu)
	return d
}

// submit queues f; it never blocks.
func (d *serialDispatcher) submit(f func()) {
	d.mu.Lock()
	d.queue = append(d.queue, f)
	start := !d.running
	d.running = true
	d.mu.Unlock()
	if start {
		d.exec(d.drain)
	}
}

func (d *serialDispatcher) drain() {
	for {
		d.mu.Lock()
		if len(d.queue) == 0 {
			d.running = false
			d.idle.Broadcast()
			d.mu.Unlock()
			return
		}
		f := d.queue[0]
		d.queue[0] = nil
		d.queue = d.queue[1:]
		d.mu.Unlock()
		f()
	}
}

// wait blocks until every submitted function has run.
func (d *serialDispatcher) wait() {
	d.mu.Lock()
	for d.running {
		d.idle.Wait()
	}
	d.mu.Unlock()
}

// future is a one-shot result the loop completes and a caller waits for.
type future struct {
	id   engine.FutureID
	done chan struct{}
	term Term
	err  error
}

func newFuture() *future { return &future{done: make(chan struct{})} }

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
