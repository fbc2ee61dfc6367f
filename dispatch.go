package simba

import (
	"sync"
	"sync/atomic"

	"github.com/simba-go/simba/internal/engine"
)

// serialDispatcher runs submitted functions one at a time, in submission order, on the
// callback executor: the callbacks of one election never overlap and never block the loop.
// The goroutine that runs them is marked as inside the client (Client.Close from a callback
// does not wait for it) while it drains.
//
// running counts the dispatchers of a client that have functions to run: the client's close
// waits for it, so no callback outlives Close, whether or not its election is still known.
type serialDispatcher struct {
	exec    Executor
	running *sync.WaitGroup
	inside  *goroutines
	mu      sync.Mutex
	queue   []func()
	busy    bool
}

func newSerialDispatcher(exec Executor, running *sync.WaitGroup, inside *goroutines) *serialDispatcher {
	return &serialDispatcher{exec: exec, running: running, inside: inside}
}

// submit queues f and starts the dispatcher on its executor if it was idle; it never blocks.
func (d *serialDispatcher) submit(f func()) {
	if d.enqueue(f) {
		d.start()
	}
}

// enqueue queues f and reports whether the dispatcher was idle: then it is busy from now on
// and counted in running, and the caller must drain it (start, or drainOn).
func (d *serialDispatcher) enqueue(f func()) (idle bool) {
	d.mu.Lock()
	d.queue = append(d.queue, f)
	idle = !d.busy
	d.busy = true
	d.mu.Unlock()
	if idle {
		d.running.Add(1)
	}
	return idle
}

// start drains d on its executor.
func (d *serialDispatcher) start() {
	d.exec(func() {
		defer d.inside.enter()()
		d.drain()
	})
}

// drainOn drains d on the calling goroutine, whose id is id (goid): a call worker that has
// nothing else to do (Client.runDrains).
func (d *serialDispatcher) drainOn(id uint64) {
	defer d.inside.enterID(id, "")()
	d.drain()
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

// future is a one-shot result the loop completes and a caller waits for. Its channel is made
// only for a wait that begins before the completion: a Lock or Unlock that steps its event and
// runs its call inline finds its future completed, and a channel made and closed for each
// cost an allocation and a close per request.
type future struct {
	id   engine.FutureID
	mu   sync.Mutex
	ch   chan struct{} // made by the first wait before the completion, closed by it (mu)
	fin  atomic.Bool   // completed: term and err are set
	term Term
	err  error
}

func newFuture() *future { return &future{} }

// closedChan is the channel of every wait that begins after its future's completion.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// wait returns a channel closed once the future is completed.
func (f *future) wait() <-chan struct{} {
	if f.fin.Load() {
		return closedChan
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fin.Load() {
		return closedChan
	}
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch
}

// completed reports whether the future has its result.
func (f *future) completed() bool { return f.fin.Load() }

// complete sets the result; only the first call counts.
func (f *future) complete(t Term, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fin.Load() {
		return
	}
	f.term, f.err = t, err
	f.fin.Store(true)
	if f.ch != nil {
		close(f.ch)
	}
}
