package sim

import (
	"time"

	"github.com/simba-go/simba/internal/engine"
)

// kind says what a scheduled item does when its time comes.
type kind uint8

const (
	kCall    kind = iota + 1 // a request reaches the backend (idx: call)
	kReply                   // a reply reaches its client (idx: call)
	kTimeout                 // a call times out at its client (idx: call)
	kTimer                   // an engine timer fires (timer, arm)
	kHint                    // a hint reaches a client (idx: hint)
	kWork                    // a term's work returns (idx: term)
	kAction                  // the client's user does something
	kUnlock                  // the client's user unlocks the lock it holds (idx: term)
	kPause                   // the client pauses
	kResume                  // the client resumes
	kCrash                   // the client crashes
	kRestart                 // a fresh engine starts for the client
	kExpire                  // the backend expires the client's session by force
	kOutage                  // an outage starts (a note for the transcript)
	kProbe                   // a client's driver steps engine.EvReachable
	kCheck                   // the periodic checks
	kHeal                    // faults stop
	kSettled                 // the liveness deadline
)

// item is one scheduled happening. Items are ordered by (at, seq): seq makes the order total
// and deterministic.
type item struct {
	at     time.Duration // backend time
	seq    uint64
	kind   kind
	client int32
	inc    uint32 // the client's incarnation the item belongs to
	idx    int32
	arm    uint64 // kTimer: the arm sequence number
	timer  engine.Timer
}

// queue is a binary min-heap of items on a reusable slice (no interface boxing, no allocation
// once grown).
type queue struct {
	items []item
	seq   uint64
}

func (q *queue) reset() {
	clear(q.items) // drop references (timer names)
	q.items = q.items[:0]
	q.seq = 0
}

func (q *queue) len() int { return len(q.items) }

func less(a, b *item) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// push schedules it (its seq is assigned here).
func (q *queue) push(it item) {
	q.seq++
	it.seq = q.seq
	q.items = append(q.items, it)
	h := q.items
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(&h[i], &h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// pop removes and returns the earliest item.
func (q *queue) pop() item {
	h := q.items
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = item{}
	h = h[:n]
	q.items = h
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && less(&h[r], &h[l]) {
			m = r
		}
		if !less(&h[m], &h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top
}
