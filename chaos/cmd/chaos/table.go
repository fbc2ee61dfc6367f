package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"

	"time"
)

// runTable prints the Markdown table of docs/reliability.md from a results file (one JSON
// line per run, as run -result writes): per backend, mode and fault, the rounds, the
// violations, and the failover p50 and max in TTLs.
func runTable(args []string) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	path := fs.String("results", "", "results file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := os.Open(*path)
	if err != nil {
		return err
	}
	defer f.Close()
	type key struct{ backend, mode, fault string }
	type agg struct {
		rounds, violations, runs int
		failover                 []float64
		durable, restarted       bool
		unknown                  int
	}
	rows := map[key]*agg{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<22), 1<<22)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return err
		}
		ttl, _ := time.ParseDuration(r.TTL)
		for fault, n := range r.Rounds {
			k := key{r.Backend, r.Mode, fault}
			a := rows[k]
			if a == nil {
				a = &agg{durable: true}
				rows[k] = a
			}
			a.rounds += n
			a.runs++
			a.durable = a.durable && r.Durable
			a.restarted = r.Restarted
			// A run's violations are the run's, not one fault's: count them on every row of the run.
			a.violations += len(r.Violations)
			if r.Linearizable != "ok" {
				a.unknown++
			}
			for _, ms := range r.Failover[fault] {
				a.failover = append(a.failover, float64(ms)/float64(ttl.Milliseconds()))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	keys := make([]key, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.backend != b.backend {
			return a.backend < b.backend
		}
		if a.mode != b.mode {
			return a.mode < b.mode
		}
		return a.fault < b.fault
	})
	fmt.Println("| backend | mode | fault | rounds | violations | linearizability not ok | failover p50 | failover max | durable servers |")
	fmt.Println("|---|---|---|---:|---:|---:|---:|---:|---|")
	for _, k := range keys {
		a := rows[k]
		p50, mx := "–", "–"
		if len(a.failover) > 0 {
			slices.Sort(a.failover)
			p50 = fmt.Sprintf("%.2f×TTL", a.failover[len(a.failover)/2])
			mx = fmt.Sprintf("%.2f×TTL", a.failover[len(a.failover)-1])
		}
		durable := "yes"
		switch {
		case !a.restarted:
			durable = "not restarted (embedded or shared)"
		case !a.durable:
			durable = "**no** (not counted as a pass)"
		}
		fmt.Printf("| %s | %s | %s | %d | %d | %d | %s | %s | %s |\n", k.backend, k.mode, k.fault, a.rounds, a.violations, a.unknown, p50, mx, durable)
	}
	return nil
}
