package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

type interval struct {
	id, slot   string
	token      int64
	start, end int64
}

func (r *runner) scenarioAt(t int64) string {
	name := "startup"
	for _, m := range r.marks {
		if m.t <= t {
			name = m.name
		}
	}
	return name
}

func (r *runner) analyse() {
	r.mu.Lock()
	defer r.mu.Unlock()
	sort.Slice(r.events, func(i, j int) bool { return r.events[i].T < r.events[j].T })
	out := map[string]any{"backend": r.backend, "ttl_ms": ms(int64(r.ttl))}

	// Tokens never go back: every term started after another has a greater token.
	var last int64
	tokenBacks := 0
	open := map[string]*interval{}
	var ivs []*interval
	frozen := map[string]int64{}
	for _, e := range r.events {
		switch e.Ev {
		case "work-start":
			if e.Token <= last {
				tokenBacks++
			}
			last = e.Token
			iv := &interval{id: e.ID, slot: e.slot, token: e.Token, start: e.T}
			open[e.ID] = iv
			ivs = append(ivs, iv)
		case "sigstop":
			frozen[e.ID] = e.T
		case "work-end", "process-exit":
			if iv := open[e.ID]; iv != nil {
				iv.end = e.T
				if f, ok := frozen[e.ID]; ok && f > iv.start && f < iv.end {
					iv.end = f // a stopped process does no work; what it tries after SIGCONT the sink sees
				}
				delete(open, e.ID)
			}
		}
	}
	now := r.now()
	for _, iv := range open {
		iv.end = now
	}
	var overlapNs int64
	overlaps := 0
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			a, b := ivs[i], ivs[j]
			if a.id == b.id {
				continue
			}
			s, e := max(a.start, b.start), min(a.end, b.end)
			if e > s {
				overlaps++
				overlapNs += e - s
				out[fmt.Sprintf("overlap_%d", overlaps)] = fmt.Sprintf("%s@%d and %s@%d for %d ms in %s", a.id, a.token, b.id, b.token, ms(e-s), r.scenarioAt(s))
			}
		}
	}
	out["terms"] = len(ivs)
	out["tokens_back"] = tokenBacks
	out["work_overlaps"] = overlaps
	out["work_overlap_ms"] = ms(overlapNs)

	// The sink: refusals and the overlap it saw (attempts of an older token after a newer one's first admitted write).
	byStatus := map[int]int{}
	firstAdmit := map[int64]int64{}
	lastAttempt := map[int64]int64{}
	var high int64
	staleAttempts, staleAdmitted := 0, 0
	for _, a := range r.attempts {
		byStatus[a.status]++
		if a.token < high {
			staleAttempts++
			if a.status == http.StatusOK {
				staleAdmitted++
			}
		}
		if a.status == http.StatusOK {
			if _, ok := firstAdmit[a.token]; !ok {
				firstAdmit[a.token] = a.t
			}
			high = max(high, a.token)
		}
		lastAttempt[a.token] = a.t
	}
	var toks []int64
	for t := range firstAdmit {
		toks = append(toks, t)
	}
	sort.Slice(toks, func(i, j int) bool { return toks[i] < toks[j] })
	var sinkOverlap, sinkMax int64
	for i := 1; i < len(toks); i++ {
		if d := lastAttempt[toks[i-1]] - firstAdmit[toks[i]]; d > 0 {
			sinkOverlap += d
			sinkMax = max(sinkMax, d)
		}
	}
	out["sink_status"] = byStatus
	out["sink_stale_attempts"] = staleAttempts
	out["sink_stale_admitted"] = staleAdmitted
	out["sink_admitted_back"] = r.backs
	out["sink_overlap_ms"] = ms(sinkOverlap)
	out["sink_overlap_max_ms"] = ms(sinkMax)

	// Metrics and /healthz against the truth (who works), per scenario: a mismatch counts when
	// two consecutive samples of one process disagree with it.
	working := func(slot string, gen int, t int64) bool {
		id := fmt.Sprintf("%s-g%d", slot, gen)
		for _, iv := range ivs {
			if iv.id == id && iv.start <= t && t <= iv.end {
				return true
			}
		}
		return false
	}
	type key struct {
		slot string
		gen  int
	}
	prevBad := map[key]bool{}
	mism := map[string]int{}
	unhealthy := map[string]map[string]int{}
	for _, s := range r.samples {
		k := key{s.slot, s.gen}
		sc := r.scenarioAt(s.t)
		if s.held >= 0 {
			bad := (s.held == 1) != working(s.slot, s.gen, s.t)
			if bad && prevBad[k] {
				mism[sc]++
			}
			prevBad[k] = bad
		}
		if s.healthy != 0 && s.up >= 0 && (s.healthy == 200) != (s.up == 1) {
			out[fmt.Sprintf("healthz_vs_session_up_%s_%s-g%d_%d", sc, s.slot, s.gen, s.t/1e6)] = fmt.Sprintf("healthz %d session_up %d", s.healthy, s.up)
		}
		if s.healthy != 200 {
			if unhealthy[sc] == nil {
				unhealthy[sc] = map[string]int{}
			}
			unhealthy[sc][fmt.Sprintf("%s-g%d:%d", s.slot, s.gen, s.healthy)]++
		}
	}
	out["held_metric_mismatches_by_scenario"] = mism
	out["healthz_not_200_samples_by_scenario"] = unhealthy
	out["samples"] = len(r.samples)

	// Log lines per level and scenario.
	levels := map[string]map[string]int{}
	msgs := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(r.dir, "*.log"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			lv, tm, msg := "OTHER", int64(0), ""
			for _, fld := range splitFields(line) {
				switch {
				case strings.HasPrefix(fld, "level="):
					lv = fld[6:]
				case strings.HasPrefix(fld, "time="):
					if t, err := time.Parse(time.RFC3339Nano, fld[5:]); err == nil {
						tm = t.UnixNano()
					}
				case strings.HasPrefix(fld, "msg="):
					msg = strings.Trim(fld[4:], `"`)
				}
			}
			scn := r.scenarioAt(tm)
			if levels[scn] == nil {
				levels[scn] = map[string]int{}
			}
			levels[scn][lv]++
			msgs[lv+" "+msg]++
		}
		fh.Close()
	}
	out["log_lines_by_scenario"] = levels
	out["log_messages"] = msgs
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Printf("SUMMARY %s\n", b)
	all := map[string]any{"summary": out, "results": r.results}
	b, _ = json.MarshalIndent(all, "", "  ")
	os.WriteFile(filepath.Join(r.dir, "results.json"), b, 0o644)
}

// splitFields splits a slog text line on spaces outside quotes.
func splitFields(s string) []string {
	var out []string
	var b strings.Builder
	q := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && q && i+1 < len(s):
			b.WriteByte(c)
			i++
			b.WriteByte(s[i])
		case c == '"':
			q = !q
			b.WriteByte(c)
		case c == ' ' && !q:
			out = append(out, b.String())
			b.Reset()
		default:
			b.WriteByte(c)
		}
	}
	return append(out, b.String())
}
