package sql

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
)

// interval is one term's validity as observed: from OnElected (no earlier than the term became
// valid) to the last instant a poller saw it valid (no later than it stopped being valid), so an
// overlap of two intervals is a real overlap.
type interval struct {
	client      int
	token       int64
	start, last time.Time
}

// contentionRecorder collects the terms of every client.
type contentionRecorder struct {
	mu        sync.Mutex
	intervals map[string][]*interval // by lease name
	byClient  map[string]map[int][]int64
	wg        sync.WaitGroup
}

func (r *contentionRecorder) elected(client int, t simba.Term) {
	now := time.Now()
	if !t.IsValid() {
		return // revoked before the callback ran: never observed valid
	}
	iv := &interval{client: client, token: t.Token(), start: now, last: now}
	r.mu.Lock()
	r.intervals[t.Name()] = append(r.intervals[t.Name()], iv)
	if r.byClient[t.Name()] == nil {
		r.byClient[t.Name()] = map[int][]int64{}
	}
	r.byClient[t.Name()][client] = append(r.byClient[t.Name()][client], t.Token())
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			seen := time.Now()
			if !t.IsValid() {
				return
			}
			r.mu.Lock()
			iv.last = seen
			r.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
}

// runContention runs clients simba.Clients, each contending for names elections on its own
// backend of dsn, for d; every killEvery one client at random is killed hard and replaced by a
// new one. Then it checks that per name every client's tokens strictly increase, no token went to
// two clients, and no two terms' validity intervals overlap.
func runContention(t *testing.T, dsn string, clients, names int, d, killEvery time.Duration) {
	migrated(t, dsn)
	prefix := "cont-" + unique(t)
	rec := &contentionRecorder{intervals: map[string][]*interval{}, byClient: map[string]map[int][]int64{}}
	type member struct {
		b    *Backend
		link *simbatest.Link // cut: the client is killed hard, as when its process dies
		c    *simba.Client
		es   []*simba.Election
	}
	leads := func(m member) bool {
		for _, e := range m.es {
			if e.IsLeader() {
				return true
			}
		}
		return false
	}
	var (
		mu      sync.Mutex
		all     []member
		live    = map[int]member{}
		nextID  int
		kills   int
		hkills  int // kills of a client that led at least one election
		started = time.Now()
	)
	ttl := 2 * time.Second
	start := func() {
		mu.Lock()
		id := nextID
		nextID++
		mu.Unlock()
		b, err := Open(testCtx(t), dsn, WithHousekeepingInterval(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		link := simbatest.NewLink(b)
		c, err := simba.New(link.Backend(), simba.WithTTL(ttl), simba.WithOwner(fmt.Sprintf("client-%d", id)))
		if err != nil {
			t.Fatal(err)
		}
		var es []*simba.Election
		for n := range names {
			e, err := c.NewElection(fmt.Sprintf("%s.%d", prefix, n),
				simba.OnElected(func(_ context.Context, term simba.Term) { rec.elected(id, term) }))
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Start(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
		}
		mu.Lock()
		all = append(all, member{b, link, c, es})
		live[id] = member{b, link, c, es}
		mu.Unlock()
	}
	for range clients {
		start()
	}
	for time.Since(started) < d {
		time.Sleep(killEvery/2 + rand.N(killEvery))
		mu.Lock()
		// Mostly kill a leader: killing an idle candidate tests little.
		var ids, leaders []int
		for id, m := range live {
			ids = append(ids, id)
			if leads(m) {
				leaders = append(leaders, id)
			}
		}
		victim := ids[rand.N(len(ids))]
		if len(leaders) > 0 && rand.N(4) > 0 {
			victim = leaders[rand.N(len(leaders))]
		}
		if leads(live[victim]) {
			hkills++
		}
		live[victim].link.CutOff()
		delete(live, victim)
		kills++
		mu.Unlock()
		start()
	}
	// Let the last kills fail over: the killed sessions expire after one TTL.
	time.Sleep(3 * ttl)
	var wg sync.WaitGroup
	for _, m := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := m.c.Close(ctx); err != nil && !m.link.IsCut() {
				t.Errorf("closing a live client: %v", err)
			}
			m.b.Close()
		}()
	}
	wg.Wait()
	rec.wg.Wait()

	terms := 0
	for name, ivs := range rec.intervals {
		terms += len(ivs)
		owner := map[int64]int{}
		for _, iv := range ivs {
			if c, ok := owner[iv.token]; ok && c != iv.client {
				t.Errorf("%s: token %d granted to clients %d and %d", name, iv.token, c, iv.client)
			}
			owner[iv.token] = iv.client
		}
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].token < ivs[j].token })
		for i := range ivs {
			for j := i + 1; j < len(ivs); j++ {
				a, b := ivs[i], ivs[j]
				if a.token == b.token {
					continue
				}
				if a.start.Before(b.last) && b.start.Before(a.last) {
					t.Errorf("%s: terms %d (client %d, valid %s..%s) and %d (client %d, valid %s..%s) overlap",
						name, a.token, a.client, a.start.Format("15:04:05.000"), a.last.Format("15:04:05.000"),
						b.token, b.client, b.start.Format("15:04:05.000"), b.last.Format("15:04:05.000"))
				}
				if b.start.Before(a.start) {
					t.Errorf("%s: token %d was elected before the smaller token %d", name, b.token, a.token)
				}
			}
		}
		for c, toks := range rec.byClient[name] {
			for i := 1; i < len(toks); i++ {
				if toks[i] <= toks[i-1] {
					t.Errorf("%s: client %d token history %v does not strictly increase", name, c, toks)
				}
			}
		}
	}
	if len(rec.intervals) != names {
		t.Errorf("%d of %d names were ever held", len(rec.intervals), names)
	}
	if terms < names+hkills {
		t.Errorf("only %d terms over %d names in %v with %d leaders killed: too little failover", terms, names, d, hkills)
	}
	t.Logf("%d clients (%d killed, %d of them leaders) × %d names for %v: %d terms", len(all), kills, hkills, names, d, terms)
}

// contentionDuration is the 30 s, shortened by SIMBA_SQL_CONTENTION (a Go duration).
func contentionDuration(t *testing.T) time.Duration {
	if v := os.Getenv("SIMBA_SQL_CONTENTION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SIMBA_SQL_CONTENTION: %v", err)
		}
		return d
	}
	if testing.Short() {
		return 5 * time.Second
	}
	return 30 * time.Second
}

// TestContention: 20 clients × 10 names for 30 s per dialect, a client killed hard every ~2 s;
// every token history strictly increases and no two terms of one name are ever valid at once.
func TestContention(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			runContention(t, d.dsn(t), 20, 10, contentionDuration(t), 2*time.Second)
		})
	}
}
