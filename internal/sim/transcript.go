package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba/internal/engine"
)

// DefaultTranscript is how many lines of the past a failure report shows by default.
const DefaultTranscript = 400

type recKind uint8

const (
	recEvent recKind = iota + 1
	recEffect
	recNote
)

// note says what a driver-level transcript line reports; its text is made only on failure.
type note uint8

const (
	nHandled     note = iota + 1 // the backend handled request n (op s)
	nLostRequest                 // request n (op s) lost on its way
	nLostReply                   // the reply to request n (op s) lost
	nTimedOut                    // request n (op s) times out at the client
	nLate                        // the reply to request n (op s) will be late
	nDown                        // request n (op s) failed: backend unavailable
	nHintLost                    // a hint for s lost on its way
	nPause
	nResume
	nCrash
	nRestart
	nExpire // the backend expired session s by force
	nOutage // the backend is unavailable until n
	nHeal
	nWithdrawAgain // the backend withdraws again from s after a keep-alive (session waiters)
	nDropped       // request n (op s) dropped unsent on an EfCancel
)

var noteText = [...]string{"", "backend handled", "request lost", "reply lost", "times out", "reply will be late",
	"failed: backend unavailable", "hint lost", "pause", "resume", "crash", "restart", "backend expires session",
	"backend unavailable until", "faults heal", "backend withdraws again from", "dropped unsent"}

// record is one transcript line, stored without formatting: events and effects are copied
// (the engine never mutates the slices inside an effect once emitted) and printed with their
// stable String methods only when a run fails.
type record struct {
	at     time.Duration // backend time
	ct     time.Duration // client time (events and effects)
	client int32
	kind   recKind
	note   note
	n      int64
	s      string
	ev     engine.Event
	ef     engine.Effect
}

// ring keeps the last len(recs) records.
type ring struct {
	recs []record
	next int
	full bool
}

func (r *ring) reset(size int) {
	if len(r.recs) != size {
		r.recs = make([]record, size)
	} else {
		clear(r.recs)
	}
	r.next, r.full = 0, false
}

func (r *ring) slot() *record {
	rec := &r.recs[r.next]
	r.next++
	if r.next == len(r.recs) {
		r.next, r.full = 0, true
	}
	return rec
}

// String formats the records, oldest first.
func (r *ring) String() string {
	var b strings.Builder
	start, n := 0, r.next
	if r.full {
		start, n = r.next, len(r.recs)
	}
	for i := 0; i < n; i++ {
		rec := &r.recs[(start+i)%len(r.recs)]
		b.WriteString(fmtDur(rec.at))
		if rec.client >= 0 {
			b.WriteString(" c" + strconv.Itoa(int(rec.client)))
		} else {
			b.WriteString("   ")
		}
		switch rec.kind {
		case recEvent:
			b.WriteString(" [" + fmtDur(rec.ct) + "] " + rec.ev.String())
		case recEffect:
			b.WriteString(" [" + fmtDur(rec.ct) + "]   " + rec.ef.String())
		case recNote:
			b.WriteString(" -- " + noteText[rec.note])
			switch rec.note {
			case nHandled, nLostRequest, nLostReply, nTimedOut, nLate, nDown, nDropped:
				b.WriteString(" " + strconv.FormatInt(rec.n, 10) + " " + rec.s)
			case nOutage:
				b.WriteString(" " + time.Duration(rec.n).String())
			default:
				if rec.s != "" {
					b.WriteString(" " + rec.s)
				}
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// fmtDur prints a duration as fixed-width seconds with microseconds.
func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%13.6fs", d.Seconds())
}
