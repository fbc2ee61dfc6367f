package simbaprom

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// A failed keep-alive (one that timed out takes its whole timeout) is counted under
// outcome="error", apart from the latency of the ones that succeeded; both series exist from
// the start.
func TestKeepAliveDurationByOutcome(t *testing.T) {
	m := New(Opts{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	type hist struct {
		count uint64
		sum   float64
	}
	gather := func() map[string]hist {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := make(map[string]hist)
		for _, mf := range mfs {
			if mf.GetName() != "simba_keepalive_duration_seconds" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				var outcome string
				for _, l := range mt.GetLabel() {
					if l.GetName() == "outcome" {
						outcome = l.GetValue()
					}
				}
				out[outcome] = hist{mt.GetHistogram().GetSampleCount(), mt.GetHistogram().GetSampleSum()}
			}
		}
		return out
	}
	if got := gather(); len(got) != 2 || got[OutcomeOK] != (hist{}) || got[OutcomeError] != (hist{}) {
		t.Fatalf("before any keep-alive: %+v, want empty ok and error series", got)
	}
	m.observe(simba.CallInfo{Op: simba.OpKeepAlive, Took: 5 * time.Millisecond})
	m.observe(simba.CallInfo{Op: simba.OpKeepAlive, Took: 10 * time.Millisecond})
	timeout := spi.Unavailable("keep-alive", errors.New("i/o timeout"))
	m.observe(simba.CallInfo{Op: simba.OpKeepAlive, Took: 2 * time.Second, Err: timeout, Class: spi.Retryable})
	got := gather()
	if ok := got[OutcomeOK]; ok.count != 2 || ok.sum != 0.015 {
		t.Errorf("ok: %+v, want 2 calls taking 0.015 s", ok)
	}
	if bad := got[OutcomeError]; bad.count != 1 || bad.sum != 2 {
		t.Errorf("error: %+v, want 1 call taking 2 s", bad)
	}
}
