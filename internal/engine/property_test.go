package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
	"pgregory.net/rapid"
)

// TestStepProperties feeds random event sequences (random replies to outstanding calls,
// timers, starts, stops, hints, signs that the backend answers again, groups, close) and checks, after every step:
//   - Step never panics;
//   - per name, Elected and Revoked alternate, with matching tokens;
//   - a term is elected only while the session is live and before its deadline, with a token
//     above every token its session released for the name (rule 1);
//   - a release never targets a term that is not yet revoked (rule 2), nor the lease of a
//     stopped term whose work still runs before the deadline as of the stop (rule 5);
//   - at most one acquire in flight per name, at most one keep-alive in flight; calls go to
//     the live session only; every keep-alive asks about every open term (rule 3);
//   - every future completes at most once, and after Close and a drain (every call answered,
//     every timer fired) the client is closed and every future has completed.
func TestStepProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		o := Defaults()
		o.Owner, o.TTL, o.Cooldown = "p", 3*time.Second, 500*time.Millisecond
		e, err := New(o)
		if err != nil {
			rt.Fatal(err)
		}
		names := []string{"a", "b", "c", "g.0"}
		var (
			now       time.Duration
			calls     []Effect
			timers    = map[Timer]time.Duration{}
			term      = map[string]int64{} // open terms by name
			working   = map[string]int64{} // terms whose work runs (token by name)
			handUntil = map[string]time.Duration{}
			until     = map[string]time.Duration{} // open terms' own bounds (rule 6)
			released  = map[spi.SessionID]map[string]int64{}
			// confirmed: per session and name, the highest released token whose release was
			// answered with success, and the last request id sent by then. A backend re-grants a
			// released token only to an acquire it may have handled before that release: one
			// sent before the success reply (tokens strictly increase across tenures).
			confirmed = map[spi.SessionID]map[string][2]int64{}
			lastReq   ReqID
			completed = map[FutureID]bool{}
			nextFut   FutureID
			nextSess  int
			nextToken int64
			log       []string
		)
		check := func(cond bool, format string, args ...any) {
			if !cond {
				rt.Fatalf("after %d events: %s\n%s", len(log), fmt.Sprintf(format, args...), tail(log, 150))
			}
		}
		step := func(ev Event) {
			log = append(log, fmt.Sprintf("t=%v %v", now, ev))
			if tok, ok := working[ev.Name]; ev.Kind == EvWorkExited && ok && tok == ev.Token {
				delete(working, ev.Name)
			}
			for _, ef := range e.Step(ev, now) {
				log = append(log, "  "+ef.String())
				switch ef.Kind {
				case EfCall:
					lastReq = max(lastReq, ef.Req)
					switch ef.Op {
					case OpAcquire, OpRelease, OpKeepAlive, OpJoin, OpLeave:
						check(ef.Session == e.SessionID() && (e.SessionState() == SessionLive || e.SessionState() == SessionClosing),
							"%v for session %q while the session is %v %q", ef.Op, ef.Session, e.SessionState(), e.SessionID())
					}
					if ef.Op == OpKeepAlive {
						for n := range term {
							check(slices.Contains(ef.Names, n), "keep-alive names %v miss the term %s", ef.Names, n)
						}
					}
					if ef.Op == OpAcquire || ef.Op == OpKeepAlive {
						for _, c := range calls {
							check(!(c.Op == ef.Op && c.Name == ef.Name && c.Session == ef.Session), "second %v in flight for %q", ef.Op, ef.Name)
						}
					}
					if ef.Op == OpRelease {
						if tok, ok := working[ef.Name]; ok && tok == ef.Token {
							check(now >= handUntil[ef.Name], "rule 5: release of %s token %d while its work runs, before %v", ef.Name, ef.Token, handUntil[ef.Name])
						}
						tok, open := term[ef.Name]
						check(!open || tok != ef.Token, "release of %s token %d before its term is revoked", ef.Name, ef.Token)
						if released[ef.Session] == nil {
							released[ef.Session] = map[string]int64{}
						}
						released[ef.Session][ef.Name] = max(released[ef.Session][ef.Name], ef.Token)
					}
					calls = append(calls, ef)
				case EfArm:
					timers[ef.Timer] = ef.At
				case EfElected:
					_, open := term[ef.Name]
					check(!open, "second Elected for %s without Revoked", ef.Name)
					check(e.SessionState() == SessionLive && now < e.Deadline(), "elected %s with session %v, now %v, deadline %v", ef.Name, e.SessionState(), now, e.Deadline())
					check(ef.Token > released[ef.Session][ef.Name], "elected %s token %d not above released %d", ef.Name, ef.Token, released[ef.Session][ef.Name])
					check(now < ef.Until, "elected %s at %v, at or after its own bound %v (rule 6)", ef.Name, now, ef.Until)
					check(ef.At == min(e.Deadline(), ef.Until), "elected %s with deadline %v, not the earlier of the session's %v and its bound %v", ef.Name, ef.At, e.Deadline(), ef.Until)
					term[ef.Name] = ef.Token
					until[ef.Name] = ef.Until
				case EfDeadline:
					if ef.Name != "" {
						tok, open := term[ef.Name]
						check(open && tok == ef.Token, "confirmed %s token %d, not a current term", ef.Name, ef.Token)
						until[ef.Name] = math.MaxInt64
					}
				case EfRevoked:
					tok, open := term[ef.Name]
					check(open && tok == ef.Token, "Revoked %s token %d without a matching Elected", ef.Name, ef.Token)
					delete(term, ef.Name)
					handUntil[ef.Name] = min(e.Deadline(), until[ef.Name]) // the term's deadline as of the stop
					if ef.Reason != ReasonStopped && ef.Reason != ReasonSteppedDown && ef.Reason != ReasonClosed {
						delete(working, ef.Name) // an involuntary loss: the lease is not ours to keep
					}
				case EfComplete:
					check(!completed[ef.Future], "future %d completed twice", ef.Future)
					completed[ef.Future] = true
				}
			}
			for n, tok := range term {
				if in, ok := e.Election(n); ok && in.Token == tok && in.WorkRunning {
					working[n] = tok
				}
			}
		}
		drained := false
		step(Event{Kind: EvBoot})
		steps := rapid.IntRange(1, 300).Draw(rt, "steps")
		for i := 0; i <= steps+2000; i++ {
			if i == steps {
				// Drain: close, then answer every call and let time pass until nothing is
				// left. Every future must have completed by then.
				nextFut++
				step(Event{Kind: EvClose, Future: nextFut})
			}
			if i >= steps {
				if len(calls) > 0 {
					c := calls[0]
					calls = calls[1:]
					ev := ReplyTo(c)
					ev.SentAt = now
					ev.Session = spi.Session{ID: "final", Remaining: time.Second}
					ev.Acquire = spi.Acquire{Kind: spi.HeldBy, Holder: "zz", Remaining: time.Second}
					ev.Status = spi.OK
					ev.KeepAlive.Remaining = time.Second
					step(ev)
					continue
				}
				if len(timers) > 0 {
					now += 10 * time.Second
					for tm := range timers {
						delete(timers, tm)
						step(Event{Kind: EvTimer, Timer: tm})
						break
					}
					continue
				}
				check(e.Closed(), "drained but not closed: session %v", e.SessionState())
				for f := FutureID(1); f <= nextFut; f++ {
					check(completed[f], "future %d never completed", f)
				}
				drained = true
				break
			}
			jit := rapid.Float64Range(0, 1).Draw(rt, "jitter")
			switch rapid.IntRange(0, 12).Draw(rt, "action") {
			case 0, 1, 2, 3: // answer an outstanding call
				if len(calls) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(calls)-1).Draw(rt, "call")
				c := calls[k]
				calls = slices.Delete(calls, k, k+1)
				ev := ReplyTo(c)
				ev.Jitter = jit
				ev.SentAt = now - time.Duration(rapid.IntRange(0, 300).Draw(rt, "age"))*time.Millisecond
				outcome := rapid.IntRange(0, 9).Draw(rt, "outcome")
				switch {
				case outcome == 0:
					ev.Err = errors.New("timeout")
				case outcome == 1 && c.Op != OpOpenSession:
					ev.KeepAlive.Expired = true
					ev.Acquire.Kind = spi.SessionExpired
					ev.Status = spi.Expired
				default:
					remaining := time.Duration(rapid.IntRange(0, 3000).Draw(rt, "remaining")) * time.Millisecond
					switch c.Op {
					case OpOpenSession:
						nextSess++
						ev.Session = spi.Session{ID: spi.SessionID(fmt.Sprintf("s%d", nextSess)), Remaining: remaining}
					case OpKeepAlive:
						ev.KeepAlive.Remaining = remaining
						for _, n := range c.Names {
							if rapid.Bool().Draw(rt, "held") {
								tok, ok := term[n]
								if !ok || rapid.IntRange(0, 3).Draw(rt, "other") == 0 {
									nextToken++
									tok = nextToken
								}
								ev.KeepAlive.Held = append(ev.KeepAlive.Held, spi.Held{Name: n, Token: tok})
							}
						}
						ev.KeepAlive.Members = map[string][]spi.SessionID{"g": {c.Session, "zz"}}
					case OpAcquire:
						if rapid.Bool().Draw(rt, "granted") {
							tok := released[c.Session][c.Name] // an idempotent re-grant of a released token
							if conf := confirmed[c.Session][c.Name]; ReqID(conf[1]) < c.Req && tok <= conf[0] {
								tok = 0 // sent after that release succeeded: a new tenure
							}
							if tok == 0 || rapid.Bool().Draw(rt, "fresh") {
								nextToken++
								tok = nextToken
							}
							ev.Acquire = spi.Acquire{Kind: spi.Granted, Token: tok, Remaining: remaining}
						} else {
							ev.Acquire = spi.Acquire{Kind: spi.HeldBy, Holder: "zz", HolderOwner: "z", Remaining: remaining,
								RemainingUnknown: rapid.IntRange(0, 4).Draw(rt, "unknown") == 0}
						}
					case OpJoin, OpLeave:
						ev.Status = spi.OK
					case OpMembers:
						ev.Members = []spi.SessionID{e.SessionID(), "zz"}
					}
				}
				if c.Op == OpRelease && ev.Err == nil {
					if confirmed[c.Session] == nil {
						confirmed[c.Session] = map[string][2]int64{}
					}
					conf := confirmed[c.Session][c.Name]
					confirmed[c.Session][c.Name] = [2]int64{max(conf[0], c.Token), int64(lastReq)}
				}
				step(ev)
			case 4, 5: // time passes; due timers fire in order
				target := now + time.Duration(rapid.IntRange(0, 1500).Draw(rt, "advance"))*time.Millisecond
				for {
					var next Timer
					at, found := time.Duration(0), false
					for tm, tat := range timers {
						if tat <= target && (!found || tat < at || (tat == at && tm.String() < next.String())) {
							next, at, found = tm, tat, true
						}
					}
					if !found {
						break
					}
					delete(timers, next)
					now = max(now, at)
					step(Event{Kind: EvTimer, Timer: next, Jitter: jit})
				}
				now = target
			case 6:
				nextFut++
				step(Event{Kind: EvStart, Name: rapid.SampledFrom(names).Draw(rt, "name"), Future: nextFut,
					Flavor: Flavor(rapid.IntRange(0, 2).Draw(rt, "flavor")), HasWork: rapid.Bool().Draw(rt, "work"), Jitter: jit})
			case 7:
				nextFut++
				kind := EvStop
				if rapid.Bool().Draw(rt, "stepdown") {
					kind = EvStepDown
				}
				step(Event{Kind: kind, Name: rapid.SampledFrom(names).Draw(rt, "name"), Future: nextFut})
			case 8:
				n := rapid.SampledFrom(names).Draw(rt, "name")
				if in, ok := e.Election(n); ok && in.Token != 0 {
					step(Event{Kind: EvWorkExited, Name: n, Token: in.Token})
				}
			case 9:
				step(Event{Kind: EvHint, Hint: spi.Hint{Kind: spi.Released, Name: rapid.SampledFrom(names).Draw(rt, "name")}, Jitter: jit})
			case 10:
				nextFut++
				if rapid.Bool().Draw(rt, "join") {
					step(Event{Kind: EvJoin, Name: "g", Partitions: 2, HasWork: rapid.Bool().Draw(rt, "work"), Future: nextFut})
				} else {
					step(Event{Kind: EvLeave, Name: "g", Future: nextFut})
				}
			case 11:
				if rapid.Bool().Draw(rt, "reachable") {
					step(Event{Kind: EvReachable, Jitter: jit})
				} else {
					step(Event{Kind: EvHint, Hint: spi.Hint{Kind: spi.GroupChanged, Name: "g"}})
				}
			case 12:
				if rapid.IntRange(0, 5).Draw(rt, "close") == 0 {
					nextFut++
					step(Event{Kind: EvClose, Future: nextFut})
				}
			}
		}
		check(drained, "no quiescence after 2000 drain steps: %d calls, %d timers left", len(calls), len(timers))
	})
}

func tail(log []string, n int) string {
	if len(log) > n {
		log = log[len(log)-n:]
	}
	out := ""
	for _, l := range log {
		out += l + "\n"
	}
	return out
}
