package engine

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the transcripts under testdata/")

// A transcript is a file of cases. A case is optional comment lines (#), one command line,
// a "----" line and the expected output, ended by a blank line:
//
//	# the session opens
//	boot ttl=3s
//	----
//	t=0s boot
//	  call 1 open-session owner=a ttl=3s
//
// Commands (durations in Go syntax; f=N names a future, otherwise one is made up when the
// event takes one):
//
//	boot [owner=a] [ttl=D] [renew=D] [drift=F] [margin=D] [cooldown=D] [retry-jitter=D]
//	     [backoff-min=D] [backoff-max=D] [break=N] [queue=true] [queue-lives-with-session=true]
//	     [steady-hints=true]
//	advance D [jitter=F]        move the clock by D, firing due timers in time order
//	pause D                     move the clock by D without firing timers (a paused client)
//	start NAME [work] [lock|trylock] [f=N] [jitter=F]
//	stop NAME | stepdown NAME   (a future is made up)
//	work-exited NAME [token=N]  (default: the election's current token)
//	hint released NAME | hint group G
//	reachable [jitter=F]        the backend answers again (the shell's probe succeeded)
//	join G partitions=N [work] | leave G | close
//	reply REQ RESULT [sent=D] [jitter=F]   RESULT by the call's op:
//	    err[=permanent] [msg=...]                any op
//	    not-sent                                 any op (the driver dropped it on an EfCancel)
//	    id=S remaining=D                         open-session
//	    expired | remaining=D [held=x:1,y:2] [unrenewed=z,w] [corrupt=v] [members=g:a,b/h:c] [lapse=g:D/h:D]   keep-alive
//	    granted token=N [remaining=D] | heldby holder=S owner=O remaining=D|unknown | expired   acquire
//	    ok | expired                             release, close-session, join, leave, withdraw
//	    members=a,b                              members
//	state                        print the engine's session, elections, groups, calls, timers
type transcriptCase struct {
	comments []string
	cmd      string
	want     string
	line     int
}

func parseTranscript(t *testing.T, path string) []transcriptCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var cases []transcriptCase
	var c transcriptCase
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "" && c.cmd == "":
			if len(c.comments) > 0 {
				c.comments = append(c.comments, "")
			}
		case strings.HasPrefix(l, "#") && c.cmd == "":
			c.comments = append(c.comments, l)
		case c.cmd == "":
			c.cmd, c.line = strings.TrimSpace(l), i+1
			if i+1 >= len(lines) || lines[i+1] != "----" {
				t.Fatalf("%s:%d: command without a ---- line", path, i+1)
			}
			i++
			var out []string
			for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
				i++
				out = append(out, lines[i])
			}
			c.want = strings.Join(out, "\n")
			cases = append(cases, c)
			c = transcriptCase{}
		}
	}
	if len(c.comments) > 0 {
		cases = append(cases, transcriptCase{comments: c.comments})
	}
	return cases
}

func formatTranscript(cases []transcriptCase) string {
	var b strings.Builder
	for i, c := range cases {
		for _, l := range c.comments {
			b.WriteString(l + "\n")
		}
		if c.cmd == "" {
			continue
		}
		b.WriteString(c.cmd + "\n----\n")
		if c.want != "" {
			b.WriteString(c.want + "\n")
		}
		if i < len(cases)-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// coverage records what the transcripts exercised.
type coverage struct {
	events   map[EventKind]bool
	states   map[State]bool
	sessions map[SessionState]bool
	effects  map[EffectKind]bool
	reasons  map[Reason]bool
	ops      map[Op]bool
	timers   map[TimerKind]bool
	pubs     map[PublishKind]bool
}

func newCoverage() *coverage {
	return &coverage{events: map[EventKind]bool{}, states: map[State]bool{}, sessions: map[SessionState]bool{},
		effects: map[EffectKind]bool{}, reasons: map[Reason]bool{}, ops: map[Op]bool{},
		timers: map[TimerKind]bool{}, pubs: map[PublishKind]bool{}}
}

// driver plays the shell for transcripts: it keeps the armed timers and the outstanding
// calls, and prints every event and its effects.
type driver struct {
	eng     *Engine
	now     time.Duration
	timers  map[Timer]time.Duration
	calls   map[ReqID]Effect
	issued  map[ReqID]time.Duration
	futures FutureID
	cov     *coverage
	brk     Rule // forced Options.Break (rule tests)
	out     strings.Builder
}

func newDriver(cov *coverage, brk Rule) *driver {
	return &driver{timers: map[Timer]time.Duration{}, calls: map[ReqID]Effect{}, issued: map[ReqID]time.Duration{}, cov: cov, brk: brk}
}

func (d *driver) step(ev Event) {
	if d.eng == nil {
		panic("boot first")
	}
	effects := d.eng.Step(ev, d.now)
	fmt.Fprintf(&d.out, "t=%v %v\n", d.now, ev)
	d.cov.events[ev.Kind] = true
	if ev.Kind == EvTimer {
		d.cov.timers[ev.Timer.Kind] = true
	}
	for _, ef := range effects {
		fmt.Fprintf(&d.out, "  %v\n", ef)
		d.cov.effects[ef.Kind] = true
		switch ef.Kind {
		case EfCall:
			d.calls[ef.Req] = ef
			d.issued[ef.Req] = d.now
			d.cov.ops[ef.Op] = true
		case EfArm:
			d.timers[ef.Timer] = ef.At
		case EfRevoked:
			d.cov.reasons[ef.Reason] = true
		case EfPublish:
			d.cov.pubs[ef.Publish] = true
		}
	}
	d.cov.sessions[d.eng.SessionState()] = true
	for _, e := range d.eng.Elections() {
		d.cov.states[e.State] = true
	}
}

func (d *driver) future(args map[string]string) FutureID {
	if f, ok := args["f"]; ok {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			panic(err)
		}
		return FutureID(n)
	}
	d.futures++
	return d.futures
}

func parseArgs(fields []string) (words []string, args map[string]string) {
	args = map[string]string{}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			args[k] = v
		} else {
			words = append(words, f)
		}
	}
	return words, args
}

func dur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

func num(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

func jitter(args map[string]string) float64 {
	if j, ok := args["jitter"]; ok {
		f, err := strconv.ParseFloat(j, 64)
		if err != nil {
			panic(err)
		}
		return f
	}
	return 0
}

func (d *driver) run(cmd string) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	d.out.Reset()
	fields := strings.Fields(cmd)
	words, args := parseArgs(fields[1:])
	arg := func(i int) string {
		if i >= len(words) {
			panic(fmt.Sprintf("%s: missing argument %d", fields[0], i+1))
		}
		return words[i]
	}
	switch fields[0] {
	case "boot":
		opts := Defaults() // a transcript's boot line lists only what differs from the defaults
		opts.Owner = "a"
		for k, v := range args {
			switch k {
			case "owner":
				opts.Owner = v
			case "ttl":
				opts.TTL = dur(v)
			case "renew":
				opts.RenewInterval = dur(v)
			case "drift":
				opts.Drift, _ = strconv.ParseFloat(v, 64)
			case "margin":
				opts.Margin = dur(v)
			case "cooldown":
				opts.Cooldown = dur(v)
			case "retry-jitter":
				opts.RetryJitter = dur(v)
			case "backoff-min":
				opts.BackoffMin = dur(v)
			case "backoff-max":
				opts.BackoffMax = dur(v)
			case "break":
				opts.Break = Rule(num(v))
			case "queue":
				opts.Queue = v == "true"
			case "queue-lives-with-session":
				opts.QueueLivesWithSession = v == "true"
			case "steady-hints":
				opts.SteadyHints = v == "true"
			default:
				panic("boot: unknown option " + k)
			}
		}
		if d.brk != 0 {
			opts.Break = d.brk
		}
		eng, err := New(opts)
		if err != nil {
			return "", err
		}
		d.eng = eng
		d.step(Event{Kind: EvBoot, Jitter: jitter(args)})
	case "advance":
		target := d.now + dur(arg(0))
		for {
			var next Timer
			at, found := time.Duration(0), false
			for t, tat := range d.timers {
				if tat <= target && (!found || tat < at || (tat == at && t.String() < next.String())) {
					next, at, found = t, tat, true
				}
			}
			if !found {
				break
			}
			delete(d.timers, next)
			d.now = max(d.now, at)
			d.step(Event{Kind: EvTimer, Timer: next, Jitter: jitter(args)})
		}
		d.now = target
	case "pause":
		d.now += dur(arg(0)) // the client was paused: timers fire late, at the next advance
	case "start":
		ev := Event{Kind: EvStart, Name: arg(0), Jitter: jitter(args)}
		for _, w := range words[1:] {
			switch w {
			case "work":
				ev.HasWork = true
			case "lock":
				ev.Flavor = FlavorLock
			case "trylock":
				ev.Flavor = FlavorTryLock
			default:
				panic("start: unknown word " + w)
			}
		}
		if ev.Flavor != FlavorElection || args["f"] != "" {
			ev.Future = d.future(args)
		}
		d.step(ev)
	case "stop", "stepdown":
		kind := EvStop
		if fields[0] == "stepdown" {
			kind = EvStepDown
		}
		d.step(Event{Kind: kind, Name: arg(0), Future: d.future(args), Jitter: jitter(args)})
	case "work-exited":
		ev := Event{Kind: EvWorkExited, Name: arg(0)}
		if t, ok := args["token"]; ok {
			ev.Token = num(t)
		} else if e, ok := d.eng.Election(ev.Name); ok {
			ev.Token = e.Token
		}
		d.step(ev)
	case "hint":
		h := spi.Hint{Kind: spi.Released, Name: arg(1)}
		if arg(0) == "group" {
			h.Kind = spi.GroupChanged
		}
		d.step(Event{Kind: EvHint, Hint: h, Jitter: jitter(args)})
	case "reachable":
		d.step(Event{Kind: EvReachable, Jitter: jitter(args)})
	case "join":
		var f FutureID
		if _, ok := args["f"]; ok { // the Join's future only when asked: it completes at once
			f = d.future(args)
		}
		d.step(Event{Kind: EvJoin, Name: arg(0), Partitions: int(num(args["partitions"])),
			HasWork: slices.Contains(words, "work"), Future: f})
	case "leave":
		d.step(Event{Kind: EvLeave, Name: arg(0), Future: d.future(args)})
	case "close":
		d.step(Event{Kind: EvClose, Future: d.future(args)})
	case "reply":
		d.reply(words, args)
	case "state":
		d.state()
	default:
		return "", fmt.Errorf("unknown command %q", fields[0])
	}
	return strings.TrimRight(d.out.String(), "\n"), nil
}

func (d *driver) reply(words []string, args map[string]string) {
	req := ReqID(num(words[0]))
	call, ok := d.calls[req]
	if !ok {
		panic(fmt.Sprintf("reply: no outstanding call %d", req))
	}
	delete(d.calls, req)
	ev := ReplyTo(call)
	ev.SentAt = d.now
	if s, ok := args["sent"]; ok {
		ev.SentAt = dur(s)
	} else if iss, ok := d.issued[req]; ok {
		ev.SentAt = iss
	}
	ev.Jitter = jitter(args)
	word := ""
	if len(words) > 1 {
		word = words[1]
	}
	if word == "not-sent" {
		ev.NotSent = true // the shell dropped it unsent (EfCancel)
		d.step(ev)
		return
	}
	if word == "err" || args["err"] != "" {
		msg := args["msg"]
		if msg == "" {
			msg = "timeout"
		}
		ev.Err = errors.New(msg)
		if args["err"] == "permanent" {
			ev.Err = spi.AsPermanent(ev.Err)
		}
		d.step(ev)
		return
	}
	switch call.Op {
	case OpOpenSession:
		ev.Session = spi.Session{ID: spi.SessionID(args["id"]), Remaining: dur(args["remaining"])}
	case OpKeepAlive:
		if word == "expired" {
			ev.KeepAlive.Expired = true
			break
		}
		ev.KeepAlive.Remaining = dur(args["remaining"])
		if h := args["held"]; h != "" {
			for _, nt := range strings.Split(h, ",") {
				n, t, _ := strings.Cut(nt, ":")
				ev.KeepAlive.Held = append(ev.KeepAlive.Held, spi.Held{Name: n, Token: num(t)})
			}
		}
		if u := args["unrenewed"]; u != "" {
			ev.KeepAlive.Unrenewed = strings.Split(u, ",")
		}
		if u := args["corrupt"]; u != "" {
			ev.KeepAlive.Corrupt = strings.Split(u, ",")
		}
		if m, ok := args["members"]; ok {
			ev.KeepAlive.Members = map[string][]spi.SessionID{}
			for _, gm := range strings.Split(m, "/") {
				g, ms, _ := strings.Cut(gm, ":")
				ev.KeepAlive.Members[g] = ids(ms)
			}
		}
		if m, ok := args["lapse"]; ok {
			ev.KeepAlive.MembersRemaining = map[string]time.Duration{}
			for _, gd := range strings.Split(m, "/") {
				g, d, _ := strings.Cut(gd, ":")
				ev.KeepAlive.MembersRemaining[g] = dur(d)
			}
		}
	case OpAcquire:
		switch word {
		case "granted":
			ev.Acquire = spi.Acquire{Kind: spi.Granted, Token: num(args["token"])}
			if r, ok := args["remaining"]; ok {
				ev.Acquire.Remaining = dur(r)
			}
		case "heldby":
			ev.Acquire = spi.Acquire{Kind: spi.HeldBy, Holder: spi.SessionID(args["holder"]), HolderOwner: args["owner"]}
			if args["remaining"] == "unknown" {
				ev.Acquire.RemainingUnknown = true
			} else {
				ev.Acquire.Remaining = dur(args["remaining"])
			}
		case "expired":
			ev.Acquire = spi.Acquire{Kind: spi.SessionExpired}
		default:
			panic("reply: acquire result must be granted, heldby or expired")
		}
	case OpJoin, OpLeave:
		ev.Status = spi.OK
		if word == "expired" {
			ev.Status = spi.Expired
		}
	case OpMembers:
		ev.Members = ids(args["members"])
	}
	d.step(ev)
}

func ids(s string) []spi.SessionID {
	out := []spi.SessionID{}
	for _, m := range strings.Split(s, ",") {
		if m != "" {
			out = append(out, spi.SessionID(m))
		}
	}
	return out
}

func (d *driver) state() {
	e := d.eng
	fmt.Fprintf(&d.out, "session %v id=%s deadline=%v\n", e.SessionState(), e.SessionID(), e.Deadline())
	for _, in := range e.Elections() {
		fmt.Fprintf(&d.out, "election %s %v %v token=%d work=%v inflight=%v unknown=%v\n",
			in.Name, in.Flavor, in.State, in.Token, in.WorkRunning, in.AcquireInFlight, in.Unknown)
	}
	for _, name := range e.groupNames {
		g, _ := e.Group(name)
		fmt.Fprintf(&d.out, "group %s partitions=%d joined=%v members=%v assigned=%v\n", g.Name, g.Partitions, g.Joined, g.Members, g.Assigned)
	}
	reqs := make([]ReqID, 0, len(d.calls))
	for r := range d.calls {
		reqs = append(reqs, r)
	}
	slices.Sort(reqs)
	for _, r := range reqs {
		fmt.Fprintf(&d.out, "outstanding %v\n", d.calls[r])
	}
	timers := make([]string, 0, len(d.timers))
	for t, at := range d.timers {
		timers = append(timers, fmt.Sprintf("timer %v at=%v", t, at))
	}
	slices.Sort(timers)
	for _, t := range timers {
		fmt.Fprintln(&d.out, t)
	}
}

// runTranscript runs one file; it returns the cases with their actual output.
func runTranscript(t *testing.T, path string, cov *coverage, brk Rule) (cases []transcriptCase, mismatches []string, first int) {
	t.Helper()
	cases = parseTranscript(t, path)
	d := newDriver(cov, brk)
	first = -1
	for i := range cases {
		c := &cases[i]
		if c.cmd == "" {
			continue
		}
		got, err := d.run(c.cmd)
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != c.want {
			if first < 0 {
				first = i
			}
			mismatches = append(mismatches, fmt.Sprintf("%s:%d: %s\n--- want\n%s\n--- got\n%s", path, c.line, c.cmd, c.want, got))
		}
		c.want = got
	}
	return cases, mismatches, first
}

func transcriptFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	return files
}

func TestTranscripts(t *testing.T) {
	for _, path := range transcriptFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cases, mismatches, _ := runTranscript(t, path, newCoverage(), 0)
			if *rewrite {
				if err := os.WriteFile(path, []byte(formatTranscript(cases)), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, m := range mismatches {
				t.Error(m)
			}
		})
	}
}

// ruleTranscripts names, for each rule of DESIGN.md §2, the transcript that proves it. Each
// file marks the case where breaking the rule first shows with a comment "RULE n", which also
// names the engine line that breaks it.
var ruleTranscripts = map[Rule]string{
	Rule1: "election.txt",
	Rule2: "step-down.txt",
	Rule3: "keepalive.txt",
	Rule4: "expiry.txt",
	Rule5: "handover.txt",
	Rule6: "grant-expiry.txt",
}

// TestRulesNeeded breaks each rule in turn (Options.Break) and checks that its transcript
// fails, first at a case marked for that rule.
func TestRulesNeeded(t *testing.T) {
	for r := Rule1; r <= Rule6; r++ {
		t.Run(fmt.Sprintf("rule%d", r), func(t *testing.T) {
			path := filepath.Join("testdata", ruleTranscripts[r])
			if _, mism, _ := runTranscript(t, path, newCoverage(), 0); len(mism) != 0 {
				t.Fatalf("%s fails with every rule kept:\n%s", path, mism[0])
			}
			cases, mism, first := runTranscript(t, path, newCoverage(), r)
			if len(mism) == 0 {
				t.Fatalf("%s still passes with rule %d broken", path, r)
			}
			marker := fmt.Sprintf("RULE %d", r)
			if !strings.Contains(strings.Join(cases[first].comments, "\n"), marker) {
				t.Fatalf("with rule %d broken, %s first fails at a case not marked %q:\n%s", r, path, marker, mism[0])
			}
			t.Logf("rule %d broken: %d case(s) of %s fail, first:\n%s", r, len(mism), path, mism[0])
		})
	}
}

// TestTranscriptCoverage runs every transcript and asserts that each election state, session
// state, event kind, effect kind, backend operation, revocation reason, timer kind and
// published event kind appears in at
// least one: a new state or event without a transcript fails here.
func TestTranscriptCoverage(t *testing.T) {
	cov := newCoverage()
	for _, path := range transcriptFiles(t) {
		runTranscript(t, path, cov, 0)
	}
	for st := State(0); st < numStates; st++ {
		if !cov.states[st] {
			t.Errorf("no transcript reaches election state %v", st)
		}
	}
	for st := SessionState(0); st < numSessionStates; st++ {
		if !cov.sessions[st] && st != SessionNone { // none: only before Boot
			t.Errorf("no transcript reaches session state %v", st)
		}
	}
	for k := EvBoot; k < numEventKinds; k++ {
		if !cov.events[k] {
			t.Errorf("no transcript steps a %v event", k)
		}
	}
	for k := EfCall; k < numEffectKinds; k++ {
		if !cov.effects[k] {
			t.Errorf("no transcript shows a %v effect", k)
		}
	}
	for op := OpOpenSession; op < numOps; op++ {
		if !cov.ops[op] {
			t.Errorf("no transcript calls %v", op)
		}
	}
	for r := ReasonDeadline; r < numReasons; r++ {
		if !cov.reasons[r] {
			t.Errorf("no transcript revokes a term for reason %v", r)
		}
	}
	for k := TimerOpen; k < numTimerKinds; k++ {
		if !cov.timers[k] {
			t.Errorf("no transcript fires a %v timer", k)
		}
	}
	for k := PubSessionOpened; k < numPublishKinds; k++ {
		if !cov.pubs[k] {
			t.Errorf("no transcript publishes %v", k)
		}
	}
}

// TestRuleCommentsQuoteTheEngine keeps the RULE comments honest: every `code` they quote must
// appear (whitespace aside) in the engine file they name.
func TestRuleCommentsQuoteTheEngine(t *testing.T) {
	squash := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for r, file := range ruleTranscripts {
		var quoted []string
		for _, c := range parseTranscript(t, filepath.Join("testdata", file)) {
			text := squash(strings.ReplaceAll(strings.Join(c.comments, " "), "#", " "))
			if !strings.Contains(text, fmt.Sprintf("RULE %d", r)) {
				continue
			}
			parts := strings.Split(text, "`")
			for i := 1; i < len(parts); i += 2 {
				quoted = append(quoted, parts[i])
			}
			for _, src := range []string{"engine.go", "election.go", "group.go"} {
				if !strings.Contains(text, src) {
					continue
				}
				data, err := os.ReadFile(src)
				if err != nil {
					t.Fatal(err)
				}
				code := squash(string(data))
				for _, q := range quoted {
					if !strings.Contains(code, q) {
						t.Errorf("%s: the RULE %d comment quotes `%s`, which %s does not contain", file, r, q, src)
					}
				}
			}
		}
		if len(quoted) == 0 {
			t.Errorf("%s: no RULE %d comment quotes the engine line that breaks it", file, r)
		}
	}
}
