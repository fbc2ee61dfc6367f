// Package locktest checks locks under contention from tests of any backend: goroutines of
// several clients take one lock name in turns for a while, and the check asserts the lock's
// promises as a user sees them through the public API.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// Config is a contention run: Goroutines goroutines on each client lock Name for Duration,
// each holding it for up to Hold and then pausing for up to Think (both drawn at random per
// turn, from a source seeded by Seed) before asking again.
type Config struct {
	Name       string
	Goroutines int
	Duration   time.Duration
	Hold       time.Duration
	Think      time.Duration
	Seed       uint64
}

// Report is what a run observed.
type Report struct {
	// Turns counts the turns each goroutine got, per client then per goroutine.
	Turns [][]int
	// Total is the number of turns, and Tokens the fencing tokens in the order the turns began.
	Total  int
	Tokens []int64
}

// Clients makes one client per backend, owners "one", "two", … with TTL ttl, closed when the
// test ends.
func Clients(t testing.TB, ttl time.Duration, backends ...spi.Backend) []*simba.Client {
	t.Helper()
	owners := []string{"one", "two", "three", "four", "five", "six", "seven", "eight"}
	var clients []*simba.Client
	for i, b := range backends {
		c, err := simba.New(b, simba.WithOwner(owners[i%len(owners)]), simba.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		clients = append(clients, c)
	}
	return clients
}

// Eight8 is the contention of the API issue: 8 goroutines on each client for 10 s, each turn
// held up to 2 ms and followed by a pause of up to 20 ms.
func Eight8(name string) Config {
	return Config{Name: name, Goroutines: 8, Duration: 10 * time.Second, Hold: 2 * time.Millisecond,
		Think: 20 * time.Millisecond, Seed: 1}
}

// Contend runs cfg over clients and fails t if at any turn's start another turn's term was
// still valid (two valid terms at once), if a token is not above every earlier one, if any
// call fails, or if some goroutine never got the lock.
func Contend(t testing.TB, clients []*simba.Client, cfg Config) Report {
	t.Helper()
	var (
		mu      sync.Mutex
		holding = map[*simba.Held]string{} // turns in progress, by who
		tokens  []int64
		errs    []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	turns := make([][]int, len(clients))
	deadline := time.Now().Add(cfg.Duration)
	var wg sync.WaitGroup
	for ci, c := range clients {
		turns[ci] = make([]int, cfg.Goroutines)
		for gi := range cfg.Goroutines {
			who := fmt.Sprintf("client %d goroutine %d", ci, gi)
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(ci*1000+gi)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(cfg.Duration))
					h, err := c.Lock(ctx, cfg.Name)
					cancel()
					if err != nil {
						fail(fmt.Errorf("%s: Lock: %w", who, err))
						return
					}
					mu.Lock()
					for other, by := range holding {
						if other.IsValid() {
							errs = append(errs, fmt.Errorf("%s got %v while %s's %v is valid", who, h.Term, by, other.Term))
						}
					}
					if n := len(tokens); n > 0 && h.Token() <= tokens[n-1] {
						errs = append(errs, fmt.Errorf("%s got token %d after token %d", who, h.Token(), tokens[n-1]))
					}
					tokens = append(tokens, h.Token())
					holding[h] = who
					turns[ci][gi]++
					mu.Unlock()
					if cfg.Hold > 0 {
						time.Sleep(time.Duration(rng.Int64N(int64(cfg.Hold))))
					}
					if !h.IsValid() {
						fail(fmt.Errorf("%s: the term %v was lost while held", who, h.Term))
					}
					if err := h.Unlock(context.Background()); err != nil {
						fail(fmt.Errorf("%s: Unlock: %w", who, err))
					}
					mu.Lock()
					delete(holding, h)
					mu.Unlock()
					if cfg.Think > 0 {
						time.Sleep(time.Duration(rng.Int64N(int64(cfg.Think))))
					}
				}
			}()
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("contention on %s: %v", cfg.Name, err)
	}
	r := Report{Turns: turns, Total: len(tokens), Tokens: tokens}
	for ci := range turns {
		for gi, n := range turns[ci] {
			if n == 0 {
				t.Errorf("client %d goroutine %d never got the lock in %v (turns %v)", ci, gi, cfg.Duration, turns)
			}
		}
	}
	return r
}
