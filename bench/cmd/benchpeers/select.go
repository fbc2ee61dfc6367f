package main

import (
	"fmt"
	"slices"
	"strings"
)

// The measures a run can select with -measures, in the order they run.
const (
	mCycle     = "cycle"
	mHandover  = "handover"
	mFailover  = "failover"
	mKeepAlive = "keepalive"
	mWaiting   = "waiting"
	mStale     = "stale"
)

var measureKeys = []string{mCycle, mHandover, mFailover, mStale, mKeepAlive, mWaiting}

// groupKeys are the -only keys of the servers, in groupOrder's order; groupAliases are other
// spellings accepted for them.
var (
	groupKeys    = []string{"redis", "redis-cluster", "postgres", "mariadb", "sqlite", "zookeeper", "etcd"}
	groupAliases = map[string]string{"postgresql": "postgres", "pg": "postgres", "zk": "zookeeper", "cluster": "redis-cluster"}
)

// selection is the part of the run -only and -measures select. Its zero value selects
// everything.
type selection struct {
	// groups and measures hold the selected group titles and measure keys; nil selects all.
	groups, measures map[string]bool
}

// parseSelection reads -only (comma-separated server keys) and -measures (comma-separated
// measure keys); an empty list selects everything.
func parseSelection(only, measures string) (selection, error) {
	var s selection
	if keys := splitList(only); len(keys) > 0 {
		s.groups = map[string]bool{}
		for _, k := range keys {
			if a, ok := groupAliases[k]; ok {
				k = a
			}
			i := slices.Index(groupKeys, k)
			if i < 0 {
				return selection{}, fmt.Errorf("-only: unknown server %q (one of %s)", k, strings.Join(groupKeys, ", "))
			}
			s.groups[groupOrder[i]] = true
		}
	}
	if keys := splitList(measures); len(keys) > 0 {
		s.measures = map[string]bool{}
		for _, k := range keys {
			if !slices.Contains(measureKeys, k) {
				return selection{}, fmt.Errorf("-measures: unknown measure %q (one of %s)", k, strings.Join(measureKeys, ", "))
			}
			s.measures[k] = true
		}
	}
	return s, nil
}

func splitList(s string) []string {
	var out []string
	for _, k := range strings.Split(s, ",") {
		if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// all reports whether s selects every server and every measure.
func (s selection) all() bool { return s.groups == nil && s.measures == nil }

// group reports whether s selects the server of this group title.
func (s selection) group(g string) bool { return s.groups == nil || s.groups[g] }

// measure reports whether s selects the measure of this key.
func (s selection) measure(m string) bool { return s.measures == nil || s.measures[m] }

// describe is the selection as the report's header states it (empty when everything is
// selected).
func (s selection) describe() string {
	var parts []string
	if s.groups != nil {
		var keys []string
		for i, g := range groupOrder {
			if s.groups[g] {
				keys = append(keys, groupKeys[i])
			}
		}
		parts = append(parts, "servers "+strings.Join(keys, ", ")+" (-only)")
	}
	if s.measures != nil {
		var keys []string
		for _, m := range measureKeys {
			if s.measures[m] {
				keys = append(keys, m)
			}
		}
		parts = append(parts, "measures "+strings.Join(keys, ", ")+" (-measures)")
	}
	return strings.Join(parts, "; ")
}

// filterRows keeps the rows of the selected servers and measures.
func (s selection) filterRows(cy []cycleRow, hand []handRow, fail []failRow) ([]cycleRow, []handRow, []failRow) {
	keep := func(group, measure string) bool { return s.group(group) && s.measure(measure) }
	cy = slices.DeleteFunc(cy, func(r cycleRow) bool { return !keep(r.group, mCycle) })
	hand = slices.DeleteFunc(hand, func(r handRow) bool { return !keep(r.group, mHandover) })
	fail = slices.DeleteFunc(fail, func(r failRow) bool { return !keep(r.group, mFailover) })
	return cy, hand, fail
}

// narrow is s restricted to the server of group title g ("": s's servers) and to those of
// measures that s selects.
func (s selection) narrow(g string, measures ...string) selection {
	n := selection{groups: s.groups, measures: map[string]bool{}}
	if g != "" {
		n.groups = map[string]bool{g: s.group(g)}
	}
	for _, m := range measures {
		n.measures[m] = s.measure(m)
	}
	return n
}
