package main

import (
	"fmt"
	"sync"
	"time"
)

// resource is the fenced resource the team's leaders and partition owners write to: per name,
// it admits a write whose token is at least the highest seen, refuses a lower one (stale), and
// records every accepted write's time so that the harness can measure how long a name went
// unwritten (its lease unavailable). A write by another writer with the highest token itself
// would be two holders of one tenure: a violation.
type resource struct {
	mu         sync.Mutex
	highest    map[string]int64
	writer     map[string]string
	last       map[string]time.Time
	maxGap     map[string]time.Duration // since reset
	stale      []string                 // refused writes, described
	violations []string
	tenures    map[string]int // tenures seen per name since reset
}

func newResource() *resource {
	r := &resource{}
	r.highest, r.writer = map[string]int64{}, map[string]string{}
	r.reset()
	return r
}

func (r *resource) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.maxGap, r.tenures = map[string]time.Time{}, map[string]time.Duration{}, map[string]int{}
	r.stale = nil
}

func (r *resource) write(name string, token int64, writer string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	h, seen := r.highest[name]
	switch {
	case seen && token < h:
		r.stale = append(r.stale, fmt.Sprintf("%s: %s wrote with token %d after %s's %d", name, writer, token, r.writer[name], h))
		return false
	case seen && token == h && writer != r.writer[name]:
		r.violations = append(r.violations, fmt.Sprintf("%s: %s and %s both wrote with token %d", name, r.writer[name], writer, token))
		return false
	case !seen || token > h:
		r.tenures[name]++
	}
	r.highest[name], r.writer[name] = token, writer
	if l, ok := r.last[name]; ok {
		if g := now.Sub(l); g > r.maxGap[name] {
			r.maxGap[name] = g
		}
	}
	r.last[name] = now
	return true
}

// since returns how long ago name was last written (a large value if never since reset).
func (r *resource) since(name string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.last[name]
	if !ok {
		return time.Hour
	}
	return time.Since(l)
}

func (r *resource) gap(name string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.maxGap[name]
	if l, ok := r.last[name]; ok {
		if s := time.Since(l); s > g {
			g = s
		}
	}
	return g
}

func (r *resource) snapshot() (stale, violations []string, tenures map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := map[string]int{}
	for k, v := range r.tenures {
		t[k] = v
	}
	return append([]string(nil), r.stale...), append([]string(nil), r.violations...), t
}
