package main

import (
	"fmt"
	"github.com/simba-go/simba/chaos/trials/netproxy"
	"math/rand"
	"sort"
	"syscall"
	"time"
)

// cutSIGTERM: the leader's link is blackholed and then it is told to terminate, as a node with a
// network problem is drained: how long until it exits, and until another replica leads.
func (r *runner) cutSIGTERM(sinkURL string) {
	r.mark("cut-sigterm")
	L, le := r.leader()
	if L == nil {
		r.result(map[string]any{"scenario": "cut-sigterm", "error": "no leader"})
		return
	}
	t0 := r.now()
	L.px.Cut()
	time.Sleep(500 * time.Millisecond)
	ts := r.now()
	L.cmd.Process.Signal(syscall.SIGTERM)
	res := map[string]any{"scenario": "cut-sigterm", "backend": r.backend, "leader": le.ID}
	select {
	case <-L.done:
		res["exit_after_sigterm_ms"] = ms(r.now() - ts)
	case <-time.After(30 * time.Second):
		res["exit"] = "no exit 30 s after SIGTERM"
		L.cmd.Process.Kill()
		<-L.done
	}
	if e, ok := r.findID(le.ID, "work-end"); ok && e.T > le.T {
		res["work_end_after_sigterm_ms"] = ms(e.T - ts)
	}
	if e, ok := r.findID(le.ID, "stopped"); ok {
		res["stop_ms"] = e.StopMS
	}
	res["exit_after_cut_ms"] = ms(r.now() - t0)
	if _, ne := r.waitLeader(t0, L.slot, 5*r.ttl); ne.T != 0 {
		res["failover_after_cut_ms"] = ms(ne.T - t0)
		res["new"] = ne.ID
	}
	res["heal_after_cut_ms"] = ms(r.now() - t0)
	L.px.Heal()
	r.start(L, sinkURL)
	time.Sleep(2 * time.Second)
	r.result(res)
}

// churn starts a fourth replica and terminates it after 0-300 ms, 20 times (a pod scheduled and
// evicted at once), optionally with its link cut from the start (a pod on a broken node).
func (r *runner) churn(sinkURL string, cut bool) {
	name := "churn"
	if cut {
		name = "churn-cut"
	}
	r.mark(name)
	rep := r.reps["r4"]
	if rep == nil {
		rep = &replica{slot: "r4"}
		if r.target != "" {
			px, err := netproxy.New(r.target)
			if err != nil {
				return
			}
			rep.px = px
		}
		r.reps["r4"] = rep
	}
	rep.extra = nil
	if cut && rep.px != nil {
		rep.px.Cut()
		rep.extra = []string{"-migrate=false"} // the schema is there; a pod on a broken node starts all the same
	}
	var exits []int64
	var slow []string
	for i := 0; i < 20; i++ {
		if err := r.start(rep, sinkURL); err != nil {
			fmt.Println("churn start:", err)
			continue
		}
		time.Sleep(time.Duration(rand.Intn(300)) * time.Millisecond)
		ts := r.now()
		rep.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-rep.done:
			exits = append(exits, ms(r.now()-ts))
		case <-time.After(30 * time.Second):
			slow = append(slow, fmt.Sprintf("r4-g%d", rep.gen))
			rep.cmd.Process.Kill()
			<-rep.done
		}
	}
	if rep.px != nil {
		rep.px.Heal()
	}
	sort.Slice(exits, func(a, b int) bool { return exits[a] < exits[b] })
	r.result(map[string]any{"scenario": name, "backend": r.backend, "exit_ms_sorted": exits, "no_exit_30s": slow})
}

// partitionRepeat cuts one non-leader for 2 TTL and heals it for 3 TTL, 6 times, reading its
// goroutines, fds and sockets after each heal: they must not grow with the faults.
func (r *runner) partitionRepeat() {
	r.mark("partition-repeat")
	L, _ := r.leader()
	var P *replica
	for _, rep := range r.live() {
		if rep != L {
			P = rep
			break
		}
	}
	var after []map[string]any
	before := r.stats(P)
	for i := 0; i < 6; i++ {
		P.px.Cut()
		time.Sleep(2 * r.ttl)
		P.px.Heal()
		time.Sleep(3 * r.ttl)
		after = append(after, r.stats(P))
	}
	r.result(map[string]any{"scenario": "partition-repeat", "backend": r.backend, "replica": P.slot,
		"stats_before": before, "stats_after_each_heal": after, "proxy_conns_now": P.px.Conns()})
}
