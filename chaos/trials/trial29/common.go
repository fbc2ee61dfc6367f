package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba"
)

// rec is one write that reached the sink.
type rec struct {
	At       time.Time
	Res, Who string
	Token    int64
	OK       bool
	Code     int // the HTTP status the guard answered
}

// sink is the fenced resource: per resource it keeps the highest token it accepted and refuses a
// lower one (as fence/fencesql does), and it records every write for the analysis.
type sink struct {
	mu   sync.Mutex
	high map[string]int64
	recs []rec
}

func newSink() *sink { return &sink{high: map[string]int64{}} }

// write admits (true) or refuses (false) a write of res with token by who.
func (s *sink) write(res, who string, token int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := token >= s.high[res]
	if ok {
		s.high[res] = token
	}
	s.recs = append(s.recs, rec{At: time.Now(), Res: res, Who: who, Token: token, OK: ok})
	return ok
}

func (s *sink) snapshot() []rec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rec(nil), s.recs...)
}

// span is one tenure (resource, token) as the sink saw its accepted writes.
type span struct {
	Res, Who    string
	Token       int64
	First, Last time.Time
	N           int
}

// spans groups accepted writes per (resource, token), sorted per resource by first write.
func spans(recs []rec) map[string][]span {
	idx := map[string]map[int64]*span{}
	for _, r := range recs {
		if !r.OK {
			continue
		}
		m := idx[r.Res]
		if m == nil {
			m = map[int64]*span{}
			idx[r.Res] = m
		}
		sp := m[r.Token]
		if sp == nil {
			sp = &span{Res: r.Res, Who: r.Who, Token: r.Token, First: r.At}
			m[r.Token] = sp
		}
		if r.Who != sp.Who {
			sp.Who += "+" + r.Who // one token written by two workers
		}
		sp.Last = r.At
		sp.N++
	}
	out := map[string][]span{}
	for res, m := range idx {
		for _, sp := range m {
			out[res] = append(out[res], *sp)
		}
		sort.Slice(out[res], func(i, j int) bool { return out[res][i].First.Before(out[res][j].First) })
	}
	return out
}

// verdict is the safety summary of a run.
type verdict struct {
	Accepted, Refused int
	// Overlaps are tenures of one resource whose accepted writes interleave in time with
	// another tenure's (two holders working at once, both admitted).
	Overlaps []string
	// Shared are tokens written by two workers.
	Shared []string
	// Backwards counts accepted writes whose token is below an earlier accepted one (the
	// fence makes it 0 by construction; counted to show the sink is what held).
	Backwards int
	// RefusedRecs are the refused writes, with the highest token they met.
	RefusedRecs []refused
}

type refused struct {
	rec
	High int64
}

func analyse(recs []rec) verdict {
	var v verdict
	high := map[string]int64{}
	for _, r := range recs {
		if !r.OK {
			v.Refused++
			v.RefusedRecs = append(v.RefusedRecs, refused{r, high[r.Res]})
			continue
		}
		v.Accepted++
		if r.Token < high[r.Res] {
			v.Backwards++
		}
		high[r.Res] = max(high[r.Res], r.Token)
	}
	for res, ss := range spans(recs) {
		for i, sp := range ss {
			if strings.Contains(sp.Who, "+") {
				v.Shared = append(v.Shared, fmt.Sprintf("%s token %d by %s", res, sp.Token, sp.Who))
			}
			for _, o := range ss[:i] {
				if sp.First.Before(o.Last) {
					v.Overlaps = append(v.Overlaps, fmt.Sprintf("%s: %s#%d [%s..%s] and %s#%d [%s..%s]", res,
						o.Who, o.Token, o.First.Format("15:04:05.000"), o.Last.Format("15:04:05.000"),
						sp.Who, sp.Token, sp.First.Format("15:04:05.000"), sp.Last.Format("15:04:05.000")))
				}
			}
		}
	}
	sort.Strings(v.Overlaps)
	return v
}

func (v verdict) print(w io.Writer) {
	fmt.Fprintf(w, "sink: %d accepted, %d refused as stale, %d accepted below an earlier token, %d tenures overlapping another, %d tokens shared\n",
		v.Accepted, v.Refused, v.Backwards, len(v.Overlaps), len(v.Shared))
	for i, o := range v.Overlaps {
		if i == 10 {
			fmt.Fprintf(w, "  … %d more\n", len(v.Overlaps)-10)
			break
		}
		fmt.Fprintln(w, "  overlap", o)
	}
	for i, r := range v.RefusedRecs {
		if i == 10 {
			break
		}
		fmt.Fprintf(w, "  refused %s %s#%d at %s (highest %d)\n", r.Res, r.Who, r.Token, r.At.Format("15:04:05.000"), r.High)
	}
	for _, s := range v.Shared {
		fmt.Fprintln(w, "  shared", s)
	}
}

// gapAround is the time from the last accepted write before t to the first accepted write
// after t (any resource in res, nil: all): how long no work was done across a fault at t.
func gapAround(recs []rec, t time.Time, res func(string) bool) (before, after time.Time) {
	for _, r := range recs {
		if !r.OK || (res != nil && !res(r.Res)) {
			continue
		}
		if r.At.Before(t) {
			before = r.At
		} else if after.IsZero() {
			after = r.At
		}
	}
	return before, after
}

// logbook keeps every log line of the clients of a run, with counts per level and message.
type logbook struct {
	mu    sync.Mutex
	f     *os.File
	count map[string]int
	first map[string]string
}

func newLogbook(path string) (*logbook, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &logbook{f: f, count: map[string]int{}, first: map[string]string{}}, nil
}

// logger is a client's logger: text lines into the logbook's file, tagged with who.
func (l *logbook) logger(who string) *slog.Logger {
	return slog.New(&countHandler{lb: l, h: slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}).WithAttrs([]slog.Attr{slog.String("who", who)})})
}

func (l *logbook) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

func (l *logbook) note(level slog.Level, msg, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := level.String() + " " + msg
	l.count[k]++
	if _, ok := l.first[k]; !ok {
		l.first[k] = line
	}
}

// mark writes a line of the harness into the log file.
func (l *logbook) mark(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.f, "=== %s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
}

// reset returns the counts so far and starts counting anew.
func (l *logbook) reset() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.count
	l.count = map[string]int{}
	return c
}

func printCounts(w io.Writer, c map[string]int) {
	var ks []string
	for k := range c {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		fmt.Fprintf(w, "    %4d × %s\n", c[k], k)
	}
}

type countHandler struct {
	lb *logbook
	h  slog.Handler
}

func (c *countHandler) Enabled(ctx context.Context, l slog.Level) bool { return c.h.Enabled(ctx, l) }
func (c *countHandler) Handle(ctx context.Context, r slog.Record) error {
	var attrs []string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" || a.Key == "error" || a.Key == "reason" {
			attrs = append(attrs, a.Key+"="+a.Value.String())
		}
		return true
	})
	c.lb.note(r.Level, r.Message, strings.Join(attrs, " "))
	return c.h.Handle(ctx, r)
}
func (c *countHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countHandler{lb: c.lb, h: c.h.WithAttrs(as)}
}
func (c *countHandler) WithGroup(n string) slog.Handler {
	return &countHandler{lb: c.lb, h: c.h.WithGroup(n)}
}

// events counts a client's events by kind (and revocations by reason).
type events struct {
	mu  sync.Mutex
	n   map[string]int
	why map[int64]string // token → reason of its EventRevoked
}

// reason is the reason the EventRevoked of token gave ("" if none came).
func (e *events) reason(token int64) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.why[token]
}

func (e *events) listener() simba.Listener {
	return func(ev simba.Event) {
		k := ev.Kind.String()
		if ev.Kind == simba.EventRevoked {
			k += " " + ev.Reason.String()
		}
		if ev.Kind == simba.EventBackendError {
			k += " " + ev.Op
		}
		e.mu.Lock()
		if e.n == nil {
			e.n = map[string]int{}
		}
		if e.why == nil {
			e.why = map[int64]string{}
		}
		if ev.Kind == simba.EventRevoked {
			e.why[ev.Token] = ev.Reason.String()
		}
		e.n[k]++
		e.mu.Unlock()
	}
}

func (e *events) reset() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.n
	e.n = map[string]int{}
	return n
}

// firstNewTenure is the first accepted write of a tenure whose first write came after t.
func firstNewTenure(recs []rec, t time.Time) time.Time {
	var first time.Time
	for _, ss := range spans(recs) {
		for _, sp := range ss {
			if sp.First.After(t) && (first.IsZero() || sp.First.Before(first)) {
				first = sp.First
			}
		}
	}
	return first
}
