package history

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Checks a history can fail, as Violation.Check names them.
const (
	// CheckFence: an accepted write went back in token (a write accepted after another
	// accepted write had returned, with a lower token).
	CheckFence = "fence-order"
	// CheckOverlap: two terms of one name were believed valid at overlapping times.
	CheckOverlap = "overlap"
	// CheckBeliefAfterEnd: a worker believed a term valid after it saw the term end.
	CheckBeliefAfterEnd = "belief-after-end"
	// CheckTokens: a token repeated for another holder, or a later tenure got a lower one.
	CheckTokens = "tokens"
	// CheckLinearizable: the lock operations are not linearizable against a lock model.
	CheckLinearizable = "linearizable"
	// CheckLiveness: no holder within the liveness bound after a heal.
	CheckLiveness = "liveness"
)

// Config tells the checkers what a run promised.
type Config struct {
	// TTL is the session TTL of the workers.
	TTL time.Duration
	// LiveWithin bounds the time from a heal to a valid holder of every name (default 2 × TTL).
	LiveWithin time.Duration
	// Names are the names that must have a holder after every heal (every partition of a
	// group); empty: every name the history mentions.
	Names []string
	// PorcupineTimeout bounds the linearizability check of each run (default 60 s); a check
	// that times out is reported as Unknown, never as a pass.
	PorcupineTimeout time.Duration
}

// Violation is one broken property.
type Violation struct {
	Check  string
	Name   string
	Detail string
}

func (v Violation) String() string { return v.Check + " " + v.Name + ": " + v.Detail }

// Failover is the time from a fault on the holder of Name to the next holder's acquisition.
type Failover struct {
	Fault string
	Name  string
	// After is the time from the fault to the first acquisition by another worker; 0 with
	// Found false when no other worker acquired before the history ends.
	After time.Duration
	Found bool
}

// Report is what the checkers found in one history.
type Report struct {
	Violations []Violation
	Terms      int
	Writes     int
	Accepted   int
	// Linearizable is porcupine's verdict on the lock operations: "ok", "illegal" or
	// "unknown" (timed out).
	Linearizable string
	Failovers    []Failover
}

// OK reports whether no check failed and the linearizability check finished with ok.
func (r Report) OK() bool { return len(r.Violations) == 0 && r.Linearizable == "ok" }

type interval struct{ from, to int64 }

type term struct {
	worker, name string
	token        int64
	call, acq    int64
	end          int64
	beliefs      []interval
}

func (t *term) id() string { return fmt.Sprintf("%s#%d@%s", t.name, t.token, t.worker) }

func (t *term) observe(m, rem int64) {
	t.beliefs = append(t.beliefs, interval{m, m + rem})
}

// Check runs every checker over a history sorted by Mono (Read sorts it).
func Check(evs []Event, cfg Config) Report {
	if cfg.LiveWithin == 0 {
		cfg.LiveWithin = 2 * cfg.TTL
	}
	if cfg.PorcupineTimeout == 0 {
		cfg.PorcupineTimeout = 60 * time.Second
	}
	var rep Report
	terms, vs := buildTerms(evs)
	rep.Violations = append(rep.Violations, vs...)
	rep.Terms = len(terms)
	for _, e := range evs {
		if e.Kind == Write {
			rep.Writes++
			if e.Accepted {
				rep.Accepted++
			}
		}
	}
	rep.Violations = append(rep.Violations, checkFence(evs)...)
	rep.Violations = append(rep.Violations, checkOverlap(terms)...)
	rep.Violations = append(rep.Violations, checkTokens(terms)...)
	rep.Violations = append(rep.Violations, checkLiveness(evs, terms, cfg)...)
	lin, v := checkLinearizable(terms, cfg.PorcupineTimeout)
	rep.Linearizable = lin
	if v != nil {
		rep.Violations = append(rep.Violations, *v)
	}
	rep.Failovers = failovers(evs, terms)
	return rep
}

// buildTerms folds the workers' events into terms: a term opens at an acquisition and closes
// at the worker's end event; beliefs of validity (acquisitions and writes made while the worker
// believed its term valid) become intervals [Mono, Mono+Remaining], cut at the term's end.
func buildTerms(evs []Event) ([]*term, []Violation) {
	var terms []*term
	var vs []Violation
	open := map[string]*term{}     // worker \x00 name → open term
	boundary := map[string]int64{} // worker \x00 name → last begin or end
	ended := map[string]*term{}    // worker \x00 name \x00 token → last ended term
	for _, e := range evs {
		k := e.Worker + "\x00" + e.Name
		switch e.Kind {
		case Begin:
			boundary[k] = e.Mono
		case Acquired:
			t := open[k]
			if t == nil || t.token != e.Token {
				call, ok := boundary[k]
				if !ok {
					call = e.Mono
				}
				t = &term{worker: e.Worker, name: e.Name, token: e.Token, call: call, acq: e.Mono}
				terms = append(terms, t)
				open[k] = t
			}
			// A term seen only once already expired (leader work started after a pause)
			// was never believed valid from here.
			if e.Remaining > 0 {
				t.observe(e.Mono, e.Remaining)
			}
		case Write:
			if !e.Valid {
				continue
			}
			t := open[k]
			if t == nil || t.token != e.Token {
				if old := ended[fmt.Sprintf("%s\x00%d", k, e.Token)]; old != nil {
					vs = append(vs, Violation{CheckBeliefAfterEnd, e.Name, fmt.Sprintf(
						"%s wrote token %d believing it valid for %v, %v after it saw the term end",
						e.Worker, e.Token, time.Duration(e.Remaining), time.Duration(e.Mono-old.end))})
					old.beliefs = append(old.beliefs, interval{e.Mono, e.Mono + e.Remaining})
					continue
				}
				vs = append(vs, Violation{CheckBeliefAfterEnd, e.Name, fmt.Sprintf(
					"%s wrote token %d believing it valid without holding it", e.Worker, e.Token)})
				continue
			}
			t.observe(e.Mono, e.Remaining)
		case Ended:
			boundary[k] = e.Mono
			t := open[k]
			if t == nil || t.token != e.Token {
				continue
			}
			t.end = e.Mono
			delete(open, k)
			ended[fmt.Sprintf("%s\x00%d", k, e.Token)] = t
		}
	}
	for _, t := range terms {
		if t.end == 0 {
			continue
		}
		for i := range t.beliefs {
			if t.beliefs[i].from < t.end && t.beliefs[i].to > t.end {
				t.beliefs[i].to = t.end
			}
		}
	}
	return terms, vs
}

// merged returns the union of a term's belief intervals, sorted.
func merged(ivs []interval) []interval {
	s := append([]interval(nil), ivs...)
	sort.Slice(s, func(i, j int) bool { return s[i].from < s[j].from })
	var out []interval
	for _, iv := range s {
		if n := len(out); n > 0 && iv.from <= out[n-1].to {
			if iv.to > out[n-1].to {
				out[n-1].to = iv.to
			}
			continue
		}
		out = append(out, iv)
	}
	return out
}

// checkOverlap: no two terms of one name believed valid at the same instant.
func checkOverlap(terms []*term) []Violation {
	type piece struct {
		interval
		t *term
	}
	byName := map[string][]piece{}
	for _, t := range terms {
		for _, iv := range merged(t.beliefs) {
			byName[t.name] = append(byName[t.name], piece{iv, t})
		}
	}
	var vs []Violation
	for name, ps := range byName {
		sort.Slice(ps, func(i, j int) bool { return ps[i].from < ps[j].from })
		var active []piece
		for _, p := range ps {
			keep := active[:0]
			for _, a := range active {
				if a.to > p.from {
					keep = append(keep, a)
				}
			}
			active = keep
			for _, a := range active {
				if a.t != p.t {
					vs = append(vs, Violation{CheckOverlap, name, fmt.Sprintf(
						"%s believed valid until +%v while %s believed valid from +0 (overlap %v)",
						a.t.id(), time.Duration(a.to-p.from), p.t.id(), time.Duration(min(a.to, p.to)-p.from))})
				}
			}
			active = append(active, p)
		}
	}
	return vs
}

// checkTokens: a token is never another holder's, and a tenure that began wanting the name after
// another's acquisition was seen gets a greater token.
func checkTokens(terms []*term) []Violation {
	var vs []Violation
	byName := map[string][]*term{}
	for _, t := range terms {
		byName[t.name] = append(byName[t.name], t)
	}
	for name, ts := range byName {
		owner := map[int64]string{}
		for _, t := range ts {
			if w, ok := owner[t.token]; ok && w != t.worker {
				vs = append(vs, Violation{CheckTokens, name, fmt.Sprintf("token %d granted to %s and to %s", t.token, w, t.worker)})
			}
			owner[t.token] = t.worker
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].acq < ts[j].acq })
		for i, x := range ts {
			for _, y := range ts[i+1:] {
				if x.worker != y.worker && x.acq < y.call && y.token <= x.token {
					vs = append(vs, Violation{CheckTokens, name, fmt.Sprintf(
						"%s began wanting the name after %s was acquired, and got a token not greater", y.id(), x.id())})
				}
			}
		}
	}
	return vs
}

// checkFence: per resource and name, an accepted write never has a lower token than a write
// accepted before it began.
func checkFence(evs []Event) []Violation {
	byKey := map[string][]Event{}
	for _, e := range evs {
		if e.Kind == Write && e.Accepted {
			k := e.Resource + "\x00" + e.Name
			byKey[k] = append(byKey[k], e)
		}
	}
	var vs []Violation
	for k, ws := range byKey {
		byDone := append([]Event(nil), ws...)
		sort.Slice(byDone, func(i, j int) bool { return byDone[i].Done < byDone[j].Done })
		sort.Slice(ws, func(i, j int) bool { return ws[i].Mono < ws[j].Mono })
		var maxTok int64
		var maxBy Event
		j := 0
		for _, w := range ws {
			for j < len(byDone) && byDone[j].Done < w.Mono {
				if byDone[j].Token > maxTok {
					maxTok, maxBy = byDone[j].Token, byDone[j]
				}
				j++
			}
			if w.Token < maxTok {
				res, name, _ := strings.Cut(k, "\x00")
				vs = append(vs, Violation{CheckFence, name, fmt.Sprintf(
					"%s accepted token %d from %s after it had accepted %d from %s", res, w.Token, w.Worker, maxTok, maxBy.Worker)})
			}
		}
	}
	return vs
}

// checkLiveness: after every heal, each name has a believed-valid holder within LiveWithin,
// unless a fault injected within that time cut the window short.
func checkLiveness(evs []Event, terms []*term, cfg Config) []Violation {
	names := cfg.Names
	if len(names) == 0 {
		seen := map[string]bool{}
		for _, t := range terms {
			if !seen[t.name] {
				seen[t.name] = true
				names = append(names, t.name)
			}
		}
	}
	var end int64
	if len(evs) > 0 {
		end = evs[len(evs)-1].Mono
	}
	var vs []Violation
	for i, e := range evs {
		if e.Kind != Heal {
			continue
		}
		from, to := e.Mono, e.Mono+int64(cfg.LiveWithin)
		if to > end {
			continue // the history ends before the bound: nothing to judge
		}
		// A fault injected before the bound cuts the window short: the promise is a holder
		// within the bound of a heal that stays healed, so only the time up to that fault is
		// judged, and a name without a holder by then is no violation (the next heal's window
		// judges it again).
		cut := false
		for _, n := range evs[i+1:] {
			if n.Mono > to {
				break
			}
			if n.Kind == Fault {
				to, cut = n.Mono, true
				break
			}
		}
		for _, name := range names {
			held := false
			for _, t := range terms {
				if t.name != name {
					continue
				}
				for _, iv := range t.beliefs {
					if iv.from <= to && iv.to >= from {
						held = true
						break
					}
				}
				if held {
					break
				}
			}
			if !held && !cut {
				vs = append(vs, Violation{CheckLiveness, name, fmt.Sprintf(
					"no holder within %v after healing %s", cfg.LiveWithin, e.Fault)})
			}
		}
	}
	return vs
}

// failovers measures, for each fault on a holder, the time to the next acquisition of its name
// by another worker.
func failovers(evs []Event, terms []*term) []Failover {
	var out []Failover
	for i, e := range evs {
		if e.Kind != Fault || e.Worker == "" || e.Name == "" {
			continue
		}
		// Only an acquisition before the next fault answers this one.
		next := int64(1) << 62
		for _, n := range evs[i+1:] {
			if n.Kind == Fault {
				next = n.Mono
				break
			}
		}
		f := Failover{Fault: e.Fault, Name: e.Name}
		for _, t := range terms {
			if t.name == e.Name && t.worker != e.Worker && t.acq > e.Mono && t.acq < next {
				if !f.Found || time.Duration(t.acq-e.Mono) < f.After {
					f.After, f.Found = time.Duration(t.acq-e.Mono), true
				}
			}
		}
		out = append(out, f)
	}
	return out
}

// lockInput is a lock operation of the porcupine model: an acquisition by Worker (the output
// is the token granted) or a release of Token by Worker.
type lockInput struct {
	Name    string
	Release bool
	Worker  string
	Token   int64
}

// lockState is the model's state: the holder ("" when free), its token, and the last token
// granted and to whom (a re-acquire by the same holder may keep its token).
type lockState struct {
	Holder     string
	Token      int64
	Last       int64
	LastHolder string
}

// lockModel is a lock with fencing tokens: an acquisition needs the lock free and a token
// greater than every token granted before (or the last one again, to its last holder); a
// release needs the holder and its token.
var lockModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byName := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range h {
			n := op.Input.(lockInput).Name
			if _, ok := byName[n]; !ok {
				order = append(order, n)
			}
			byName[n] = append(byName[n], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, n := range order {
			out = append(out, byName[n])
		}
		return out
	},
	Init: func() interface{} { return lockState{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in := state.(lockState), input.(lockInput)
		if in.Release {
			if s.Holder != in.Worker || s.Token != in.Token {
				return false, s
			}
			s.Holder = ""
			return true, s
		}
		tok := output.(int64)
		if s.Holder != "" || tok < s.Last || (tok == s.Last && s.Last != 0 && s.LastHolder != in.Worker) {
			return false, s
		}
		return true, lockState{Holder: in.Worker, Token: tok, Last: tok, LastHolder: in.Worker}
	},
	Equal: func(a, b interface{}) bool { return a.(lockState) == b.(lockState) },
	DescribeOperation: func(input, output interface{}) string {
		in := input.(lockInput)
		if in.Release {
			return fmt.Sprintf("%s release %s#%d", in.Worker, in.Name, in.Token)
		}
		return fmt.Sprintf("%s acquire %s → %v", in.Worker, in.Name, output)
	},
}

// lockOperations turns terms into porcupine operations: the acquisition happened between the
// worker's last begin or end and its acquisition event; the loss or release after the last
// belief of validity ended.
func lockOperations(terms []*term) []porcupine.Operation {
	clients := map[string]int{}
	var ops []porcupine.Operation
	for _, t := range terms {
		id, ok := clients[t.worker]
		if !ok {
			id = len(clients)
			clients[t.worker] = id
		}
		ops = append(ops, porcupine.Operation{ClientId: id, Input: lockInput{Name: t.name, Worker: t.worker},
			Call: t.call, Output: t.token, Return: t.acq})
		// The lock was held through every belief of validity: the release (or loss) comes
		// after the last belief ends, and before the end the worker saw, if it saw one (a
		// killed worker's loss may come any time later).
		call := t.acq
		for _, iv := range t.beliefs {
			call = max(call, iv.to)
		}
		ret := int64(1) << 62
		if t.end != 0 {
			ret = max(call, t.end)
		}
		ops = append(ops, porcupine.Operation{ClientId: id, Input: lockInput{Name: t.name, Release: true, Worker: t.worker, Token: t.token},
			Call: call, Output: nil, Return: ret})
	}
	return ops
}

func checkLinearizable(terms []*term, timeout time.Duration) (string, *Violation) {
	ops := lockOperations(terms)
	res, _ := porcupine.CheckOperationsVerbose(lockModel, ops, timeout)
	switch res {
	case porcupine.Ok:
		return "ok", nil
	case porcupine.Illegal:
		return "illegal", &Violation{CheckLinearizable, "", fmt.Sprintf("%d lock operations admit no linearization against the lock model", len(ops))}
	default:
		return "unknown", nil
	}
}
