package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/simba-go/simba/chaos/trials/netproxy"
	"sort"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/open"
)

// rtt measures, per link delay, how long a waiting candidate's acquire and the holder's
// keep-alive take through the proxy, and how many of them fail (time out at TTL/3).
func rtt(args []string) error {
	fs := flag.NewFlagSet("rtt", flag.ExitOnError)
	be := fs.String("backend", "pg", "pg or etcd")
	ttl := fs.Duration("ttl", 3*time.Second, "TTL")
	span := fs.Duration("for", 8*time.Second, "measure this long per delay")
	fs.Parse(args)
	r := &runner{backend: *be}
	switch *be {
	case "pg":
		r.target, r.dsnFmt = "127.0.0.1:5432", "postgres://postgres@%s/test?sslmode=disable"
	case "etcd":
		r.target, r.dsnFmt = "127.0.0.1:2379", "etcd://%s/trial26"
	}
	ctx := context.Background()
	for _, d := range []time.Duration{0, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond} {
		name := fmt.Sprintf("trial26-rtt-%s-%d-%d", *be, d.Milliseconds(), time.Now().Unix())
		type stat struct {
			mu    sync.Mutex
			took  map[string][]time.Duration
			fails map[string]int
		}
		st := &stat{took: map[string][]time.Duration{}, fails: map[string]int{}}
		obs := func(who string) simba.Option {
			return simba.WithCallObserver(func(c simba.CallInfo) {
				st.mu.Lock()
				defer st.mu.Unlock()
				k := who + " " + c.Op
				if c.Err != nil {
					st.fails[k]++
				} else {
					st.took[k] = append(st.took[k], c.Took)
				}
			})
		}
		var clients []*simba.Client
		var pxs []*netproxy.Proxy
		for _, who := range []string{"holder", "candidate"} {
			px, err := netproxy.New(r.target)
			if err != nil {
				return err
			}
			pxs = append(pxs, px)
			b, err := open.Open(ctx, r.dsn(px.Addr()), open.WithAutoMigrate())
			if err != nil {
				return err
			}
			defer b.Close()
			c, err := simba.New(b, simba.WithTTL(*ttl), simba.WithOwner(who), obs(who))
			if err != nil {
				return err
			}
			clients = append(clients, c)
			e, _ := c.NewElection(name, simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error { <-ctx.Done(); return nil }))
			e.Start(ctx)
			if who == "holder" {
				for !e.IsLeader() {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}
		time.Sleep(time.Second)
		st.mu.Lock()
		st.took, st.fails = map[string][]time.Duration{}, map[string]int{}
		st.mu.Unlock()
		for _, p := range pxs {
			p.SetDelay(d)
		}
		time.Sleep(*span)
		st.mu.Lock()
		var keys []string
		for k := range st.took {
			keys = append(keys, k)
		}
		for k := range st.fails {
			if _, ok := st.took[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			t := st.took[k]
			sort.Slice(t, func(i, j int) bool { return t[i] < t[j] })
			med := time.Duration(0)
			if len(t) > 0 {
				med = t[len(t)/2]
			}
			fmt.Printf("RTT %s delay=%v/chunk/direction %-22s ok=%d median=%v failed=%d\n", *be, d, k, len(t), med.Round(time.Millisecond), st.fails[k])
		}
		st.mu.Unlock()
		for _, p := range pxs {
			p.SetDelay(0)
		}
		for _, c := range clients {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			c.Close(cctx)
			cancel()
		}
		for _, p := range pxs {
			p.Close()
		}
	}
	return nil
}
