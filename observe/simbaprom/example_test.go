package simbaprom_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// A client's metrics follow its terms: the gauge is 1 while the lock is held, and the
// revocation is counted by reason once it is released.
func ExampleNew() {
	ctx := context.Background()
	backend := simbatest.NewServer(simbatest.WithClock(spi.SystemClock())).Backend()
	m := simbaprom.New(simbaprom.Opts{ConstLabels: prometheus.Labels{"client": "reports"}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	c, err := simba.New(backend, m.Options()...)
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	show := func(names ...string) {
		families, _ := reg.Gather()
		for _, f := range families {
			for _, name := range names {
				if f.GetName() != name {
					continue
				}
				for _, mt := range f.GetMetric() {
					v := mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
					var labels []string
					for _, l := range mt.GetLabel() {
						labels = append(labels, l.GetName()+"="+l.GetValue())
					}
					fmt.Println(name, labels, v)
				}
			}
		}
	}
	held, err := c.Lock(ctx, "report")
	if err != nil {
		panic(err)
	}
	show("simba_term_held")
	if err := held.Unlock(ctx); err != nil {
		panic(err)
	}
	show("simba_term_held", "simba_terms_revoked_total")
	// Output:
	// simba_term_held [client=reports name=report] 1
	// simba_term_held [client=reports name=report] 0
	// simba_terms_revoked_total [client=reports name=report reason=stopped] 1
}
