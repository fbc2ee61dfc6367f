package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/fence"
)

// The holder's write error decides its outcome: a fence's or guard's refusal, the lock's loss
// learned before the write, another error, or none.
func TestStaleOutcome(t *testing.T) {
	stale := &fence.StaleTokenError{Resource: "r", Token: 1, Highest: 2}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, outWrote},
		{"fence", fmt.Errorf("write: %w", stale), outRefused},
		{"etcd guard", errNotOwner, outRefused},
		{"lost", lostIf(ended, context.Canceled), outLost},
		// The fence's refusal stays a refusal when the lock's context has ended too.
		{"fence after the loss", lostIf(ended, stale), outRefused},
		{"an error with the lock live", lostIf(context.Background(), errors.New("connection refused")), outFailed},
		{"other", errors.New("connection refused"), outFailed},
	} {
		if got := staleOutcome(c.err); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if lostIf(ended, nil) != nil {
		t.Error("lostIf made an error of nil")
	}
}

func TestStaleResAdd(t *testing.T) {
	r := new(staleRes)
	ttl := 2 * time.Second
	for _, s := range []staleSample{
		{outcome: outWrote, landed: true, paused: 3 * time.Second},
		{outcome: outRefused, detail: "fence: stale fencing token", paused: 4 * time.Second},
		{outcome: outLost, detail: "context canceled", paused: 3 * time.Second},
		{outcome: outFailed, detail: "connection refused", paused: 3 * time.Second},
	} {
		r.add(s, ttl)
	}
	if r.Rounds != 4 || r.Landed != 1 || r.Refused != 1 || r.Lost != 1 || r.Failed != 1 {
		t.Errorf("tally %+v", r)
	}
	if r.LastRefusal != "fence: stale fencing token" || r.LastLost != "context canceled" || r.LastFailure != "connection refused" {
		t.Errorf("details %q, %q, %q", r.LastRefusal, r.LastLost, r.LastFailure)
	}
	if len(r.PauseTTLs) != 4 || r.PauseTTLs[1] != 2 {
		t.Errorf("pauses %v, want 4 with 2 TTLs second", r.PauseTTLs)
	}
}

func TestStaleSummary(t *testing.T) {
	if s := staleSummary(nil); s != "" {
		t.Errorf("no rows: %q", s)
	}
	rows := []*staleRes{
		{Group: "Redis", Name: "redislock", Rounds: 6, Landed: 6},
		{Group: "Redis", Name: rowLock, Rounds: 6, Refused: 6},
		{Group: "PostgreSQL", Name: rowLock, Rounds: 5, Lost: 5, Errors: 1},
		{Group: "ZooKeeper", Name: rowZK, Rounds: 6, Landed: 6},
		{Group: "SQLite", Name: rowLock, Errors: 6}, // no round: left out
	}
	want := "**Simba `Lock`: 0 of 11 paused holders' writes landed, on 2 backends; the peers': redislock 6 of 6, go-zookeeper zk.Lock 6 of 6.**"
	if got := staleSummary(rows); got != want {
		t.Errorf("summary\n%s\nwant\n%s", got, want)
	}
}

// The section appears only when the run selects the measure; a landed write is bold, and the
// notes show what the holder learned or the resource said.
func TestWriteStale(t *testing.T) {
	sel, err := parseSelection("redis", "stale")
	if err != nil {
		t.Fatal(err)
	}
	r := &report{TTL: "2s", sel: sel, Stale: []*staleRes{
		{Group: "Redis", Name: "redislock", Resource: resRedis, Check: "checks `Lock.TTL()` | plain SET", Rounds: 2, Landed: 2, PauseTTLs: []float64{1.5, 1.6}},
		{Group: "Redis", Name: rowLock, Resource: resRedis, Check: "checks `Held.IsValid()`", Rounds: 2, Refused: 1, Lost: 1,
			LastRefusal: "fence: stale fencing token", LastLost: "the lock was lost before the write: context canceled", PauseTTLs: []float64{1.5, 1.5},
			Errors: 1, LastError: "waiter: timeout"},
	}}
	md := markdown(r)
	for _, s := range []string{
		"## Stale writes after a pause past the TTL",
		"3s (1.5 × TTL)",
		"**Simba `Lock`: 0 of 2 paused holders' writes landed, on 1 backends; the peers': redislock 2 of 2.**",
		"| Redis | redislock | Redis | 2 | **2** | 0 | 0 | 0 | 1.50 | checks `Lock.TTL()` / plain SET |  |",
		"| Redis | **Simba `Lock`** | Redis | 2 | 0 | 1 | 1 | 0 | 1.50 | checks `Held.IsValid()` | learned: the lock was lost before the write: context canceled; refused: fence: stale fencing token; rounds 1 failed (waiter: timeout) |",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("the report lacks %q:\n%s", s, md)
		}
	}
	r.sel, _ = parseSelection("redis", "cycle")
	if strings.Contains(markdown(r), "Stale writes") {
		t.Error("a run without the stale measure has its section")
	}
	// A full run's report from before the measure, written again (-report): no empty section.
	r.sel, r.Stale = selection{}, nil
	if strings.Contains(markdown(r), "Stale writes") {
		t.Error("a report without stale rows has the section")
	}
}

// Every server's rows: Simba's on each backend (fenced where its helper matches the backend),
// and the peers'; etcd's only with etcd running.
func TestStaleRows(t *testing.T) {
	all, _ := parseSelection("", "")
	c := conf{etcdURL: "http://127.0.0.1:1"}
	rows := staleRows(c, all)
	got := map[string]string{}
	for _, r := range rows {
		got[r.group+" / "+plain(r.name)] = r.res
		if r.note == "" || r.role == "" {
			t.Errorf("%s / %s: no note or role", r.group, r.name)
		}
	}
	for k, res := range map[string]string{
		"Redis / Simba Lock": resRedis, "Redis Cluster / Simba Lock": resCluster, "PostgreSQL / Simba Lock": resPG,
		"MariaDB / Simba Lock": resPG, "SQLite / Simba Lock": resPG, "ZooKeeper / Simba Lock": resPG, groupEtc + " / Simba Lock": resPG,
		"Redis / redislock": resRedis, "Redis / redsync": resRedis, "PostgreSQL / pglock": resPG,
		"ZooKeeper / go-zookeeper zk.Lock": resPG, groupEtc + " / etcd concurrency.Mutex": resEtcd,
	} {
		if got[k] != res {
			t.Errorf("%s: resource %q, want %q", k, got[k], res)
		}
	}
	if len(rows) != 12 {
		t.Errorf("%d rows, want 12", len(rows))
	}
	libs := c.staleLibs()
	for _, r := range rows {
		if libs[r.role] == nil {
			t.Errorf("%s / %s: no library for role %q", r.group, r.name, r.role)
		}
	}
	pg, _ := parseSelection("pg", "stale")
	if rows := staleRows(conf{}, pg); len(rows) != 2 {
		t.Errorf("-only pg: %d rows, want Simba's and pglock's", len(rows))
	}
}
