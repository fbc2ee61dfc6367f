package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"time"
)

// legNames are the legs of a hand-over, each timed from the frame or mark before it (server
// legs: the holder's request written → the waiter's watch event read, and the waiter's request
// written → its reply read), then the sums. "total" runs from the holder's unlock mark to the
// waiter's grant mark.
var legNames = []string{
	"unlock → release sent",      // holder's client
	"release sent → its reply",   // server (the holder's round trip, beside the next)
	"release sent → watch event", // server, and the waiter's process waking up
	"watch event → acquire sent", // waiter's client: the hint path
	"acquire sent → its reply",   // server
	"reply → Lock returned",      // waiter's client
	"client (sum of the three)",  // unlock → sent + event → sent + reply → returned
	"server (sum of the two)",    // sent → event + sent → reply
	"total",
}

// handover is one hand-over's legs, in legNames' order.
type handover [9]time.Duration // len(legNames)

// shape says which requests a mode's release and hinted acquire are.
type shape struct {
	release int32   // opcode of the holder's release
	acquire []int32 // opcodes the waiter's first request after the watch event may have
}

var shapes = map[string]shape{
	"simba":  {opMulti, []int32{opMulti}},
	"bare":   {opMulti, []int32{opMulti}},
	"zklock": {opDelete, []int32{opGetChildren, opGetChildren2}},
}

// legs finds the hand-overs in evs (both processes' events, sorted by time): from each unlock
// mark, the holder's release request and its reply, the waiter's first watch event of a
// deletion (or of a child change) after it, the waiter's first request of the acquire's shape
// after that and its reply, and the waiter's grant mark. A hand-over in which one of them is
// missing, or that another unlock mark interrupts, is skipped.
func legs(evs []event, sh shape) []handover {
	var out []handover
	for i, u := range evs {
		if u.Kind != kindUnlock {
			continue
		}
		holder := u.Proc
		var hw, hr, we, ws, wr, g *event
		for j := i + 1; j < len(evs) && g == nil; j++ {
			e := &evs[j]
			if e.Kind == kindUnlock {
				break
			}
			mine := e.Proc == holder
			switch {
			case mine && hw == nil && e.Kind == kindWrite && !e.Watcher && e.Op == sh.release:
				hw = e
			case mine && hw != nil && hr == nil && e.Kind == kindRead && e.Conn == hw.Conn && e.Xid == hw.Xid:
				hr = e
			case !mine && we == nil && e.Kind == kindRead && e.Xid == xidWatchEvent &&
				(e.Type == eventNodeDeleted || e.Type == eventChildrenChanged):
				we = e
			case !mine && we != nil && ws == nil && e.Kind == kindWrite && !e.Watcher && slices.Contains(sh.acquire, e.Op):
				ws = e
			case !mine && ws != nil && wr == nil && e.Kind == kindRead && e.Conn == ws.Conn && e.Xid == ws.Xid:
				wr = e
			case !mine && wr != nil && e.Kind == kindGranted:
				g = e
			}
		}
		if g == nil || hr == nil {
			continue
		}
		d := func(a, b int64) time.Duration { return time.Duration(b - a) }
		h := handover{d(u.T, hw.T), d(hw.T, hr.T), d(hw.T, we.T), d(we.T, ws.T), d(ws.T, wr.T), d(wr.T, g.T)}
		h[6] = h[0] + h[3] + h[5]
		h[7] = h[2] + h[4]
		h[8] = d(u.T, g.T)
		out = append(out, h)
	}
	return out
}

// merge tags each process's events and sorts them together by time.
func merge(parent, child []event) []event {
	all := make([]event, 0, len(parent)+len(child))
	for _, e := range parent {
		e.Proc = 'P'
		all = append(all, e)
	}
	for _, e := range child {
		e.Proc = 'C'
		all = append(all, e)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].T < all[j].T })
	return all
}

// quantile is the nearest-rank q-quantile of sorted v.
func quantile(v []time.Duration, q float64) time.Duration {
	return v[min(len(v)-1, int(float64(len(v))*q))]
}

// runStats is one run's p50 and p99 of each leg.
type runStats struct {
	mode     string
	n        int
	p50, p99 handover
}

func stats(mode string, hs []handover) runStats {
	s := runStats{mode: mode, n: len(hs)}
	if len(hs) == 0 {
		return s
	}
	v := make([]time.Duration, len(hs))
	for k := range legNames {
		for i, h := range hs {
			v[i] = h[k]
		}
		slices.Sort(v)
		s.p50[k], s.p99[k] = quantile(v, 0.5), quantile(v, 0.99)
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// report writes, per mode, each leg's median over the runs of the runs' p50 and p99, with
// every run's value beside it.
func report(w io.Writer, modes []string, runs []runStats) {
	for _, m := range modes {
		var rs []runStats
		for _, r := range runs {
			if r.mode == m && r.n > 0 {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		n := 0
		for _, r := range rs {
			n += r.n
		}
		fmt.Fprintf(w, "\n%s: %d runs, %d hand-overs (ms; median of the runs' p50 and p99, then each run's)\n", m, len(rs), n)
		for k, name := range legNames {
			p50, p99 := make([]time.Duration, len(rs)), make([]time.Duration, len(rs))
			each50, each99 := "", ""
			for i, r := range rs {
				p50[i], p99[i] = r.p50[k], r.p99[k]
				each50 += fmt.Sprintf(" %.2f", ms(r.p50[k]))
				each99 += fmt.Sprintf(" %.2f", ms(r.p99[k]))
			}
			slices.Sort(p50)
			slices.Sort(p99)
			fmt.Fprintf(w, "  %-28s p50 %6.3f [%s ]   p99 %7.3f [%s ]\n", name, ms(quantile(p50, 0.5)), each50, ms(quantile(p99, 0.5)), each99)
		}
	}
}
