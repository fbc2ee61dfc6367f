// Package history is what a chaos run records and what its checkers read: one Event per line
// of JSON, written by the workers (terms acquired, beliefs of validity, write attempts on the
// fenced resources, terms ended) and by the nemesis (faults and heals). Every time is the host's
// CLOCK_MONOTONIC in nanoseconds: all processes of a run share one host, so times taken by
// different workers compare.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"golang.org/x/sys/unix"
)

// Event kinds.
const (
	// Begin: a worker starts wanting Name (a Lock call, a candidacy, a group join).
	Begin = "begin"
	// Acquired: the worker holds Name with Token; Remaining is its belief of validity at Mono.
	Acquired = "acq"
	// Write: an attempt to write Token to Resource. Mono is when the worker checked its term,
	// Valid and Remaining what it believed then, Done when the write returned, Accepted
	// whether the resource took it.
	Write = "wr"
	// Ended: the worker saw its term of Name with Token end (revoked, unlocked, work
	// returned). Its belief of validity ends here at the latest.
	Ended = "end"
	// Fault: the nemesis injects Fault on Worker (or on the server if Worker is empty).
	Fault = "fault"
	// Heal: the nemesis ends the fault injected last.
	Heal = "heal"
)

// Event is one line of a run's history.
type Event struct {
	Kind      string `json:"k"`
	Worker    string `json:"w,omitempty"`
	Name      string `json:"n,omitempty"`
	Token     int64  `json:"t,omitempty"`
	Mono      int64  `json:"m"`
	Remaining int64  `json:"r,omitempty"`
	Valid     bool   `json:"v,omitempty"`
	Resource  string `json:"res,omitempty"`
	Accepted  bool   `json:"acc,omitempty"`
	Done      int64  `json:"e,omitempty"`
	Fault     string `json:"f,omitempty"`
	Err       string `json:"err,omitempty"`
}

// Now is the host's CLOCK_MONOTONIC in nanoseconds (Go's monotonic clock is the same clock,
// but time.Time does not expose its reading).
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_MONOTONIC): %v", err))
	}
	return ts.Nano()
}

// Read parses a history, one JSON event per line. A torn last line (a worker killed in the
// middle of a write) is skipped; any other bad line is an error.
func Read(r io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var bad error
	for line := 1; sc.Scan(); line++ {
		if bad != nil {
			return nil, bad
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			bad = fmt.Errorf("history line %d: %w", line, err)
			continue
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	Sort(out)
	return out, nil
}

// Sort orders events by Mono (stable, so one worker's events keep their order).
func Sort(evs []Event) {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Mono < evs[j].Mono })
}
