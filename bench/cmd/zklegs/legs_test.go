package main

import (
	"testing"
	"time"
)

// TestLegsOfOneHandover: the legs of a Simba hand-over read off a trace of both processes,
// with the frames that are not on its path (the waiter's data-changed event, its watcher's
// removal of the watch after the grant, the holder's ping) passed over.
func TestLegsOfOneHandover(t *testing.T) {
	ms := func(f float64) int64 { return int64(f * float64(time.Millisecond)) }
	parent := []event{
		{T: ms(0), Kind: kindUnlock},
		{T: ms(0.1), Conn: 1, Kind: kindWrite, Xid: 7, Op: opMulti},
		{T: ms(0.2), Conn: 1, Kind: kindWrite, Xid: -2, Op: 11}, // ping
		{T: ms(1.3), Conn: 1, Kind: kindRead, Xid: 7},
	}
	child := []event{
		{T: ms(1.1), Conn: 1, Kind: kindRead, Xid: xidWatchEvent, Type: 3},                // data changed, on the session
		{T: ms(1.2), Conn: 2, Kind: kindRead, Xid: xidWatchEvent, Type: 2, Watcher: true}, // deleted, on the watcher
		{T: ms(1.25), Conn: 2, Kind: kindWrite, Xid: 4, Op: 18, Watcher: true},
		{T: ms(1.4), Conn: 1, Kind: kindWrite, Xid: 9, Op: opMulti},
		{T: ms(2.4), Conn: 1, Kind: kindRead, Xid: 9},
		{T: ms(2.5), Kind: kindGranted},
	}
	hs := legs(merge(parent, child), shapes["simba"])
	if len(hs) != 1 {
		t.Fatalf("%d hand-overs, want 1", len(hs))
	}
	want := [9]int64{ms(0.1), ms(1.2), ms(1.1), ms(0.2), ms(1.0), ms(0.1), ms(0.4), ms(2.1), ms(2.5)}
	for k, name := range legNames {
		if d := hs[0][k] - time.Duration(want[k]); d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s = %v, want %v", name, hs[0][k], time.Duration(want[k]))
		}
	}
}

// TestLegsSkipsAnInterruptedHandover: a hand-over whose grant never comes before the next
// unlock mark is not counted.
func TestLegsSkipsAnInterruptedHandover(t *testing.T) {
	evs := merge([]event{
		{T: 0, Kind: kindUnlock},
		{T: 1, Conn: 1, Kind: kindWrite, Xid: 7, Op: opMulti},
		{T: 2, Conn: 1, Kind: kindRead, Xid: 7},
		{T: 10, Kind: kindUnlock},
	}, nil)
	if hs := legs(evs, shapes["simba"]); len(hs) != 0 {
		t.Fatalf("%d hand-overs, want 0", len(hs))
	}
}
