package simba

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// claimSessionQueue reports entries living with the session (or not) for any backend.
type claimSessionQueue bool

func (c claimSessionQueue) QueueEntriesLiveWithSession() bool { return bool(c) }

// TestNewReadsSessionQueue: New tells the engine that waiter entries live with the session
// (engine.Options.QueueLivesWithSession) exactly when the backend is an spi.Queuer that says
// so through spi.SessionQueue; without the capability, with it denied, or on a backend without
// a waiter queue, the waiter re-attempts before its entry would lapse.
func TestNewReadsSessionQueue(t *testing.T) {
	lapsing := func() *simbatest.Backend { return simbatest.NewServer().Backend() }
	living := func() *simbatest.Backend {
		return simbatest.NewServer(simbatest.WithModelOptions(simbatest.WithSessionWaiters())).Backend()
	}
	type queuer struct {
		spi.Backend
		spi.Queuer
	}
	type claiming struct {
		spi.Backend
		spi.Queuer
		claimSessionQueue
	}
	type claimingNoQueue struct {
		spi.Backend
		claimSessionQueue
	}
	for _, tc := range []struct {
		name         string
		backend      func() spi.Backend
		queue, lives bool
	}{
		{"entries lapse", func() spi.Backend { return lapsing() }, true, false},
		{"entries live with the session", func() spi.Backend { return living() }, true, true},
		{"decorator without SessionQueue", func() spi.Backend { b := living(); return queuer{b, b} }, true, false},
		{"decorator denying it", func() spi.Backend { b := living(); return claiming{b, b, false} }, true, false},
		{"decorator claiming it", func() spi.Backend { b := lapsing(); return claiming{b, b, true} }, true, true},
		{"claim without a queue", func() spi.Backend { return claimingNoQueue{living(), true} }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.backend(), WithOwner("o"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = c.Close(ctx)
			}()
			o := c.eng.Options()
			if o.Queue != tc.queue || o.QueueLivesWithSession != tc.lives {
				t.Fatalf("engine options Queue=%v QueueLivesWithSession=%v, want %v and %v",
					o.Queue, o.QueueLivesWithSession, tc.queue, tc.lives)
			}
		})
	}
}

// claimSteadyHints reports hints that survive reconnects (or not) for any backend.
type claimSteadyHints bool

func (c claimSteadyHints) HintsSteady() bool { return bool(c) }

// TestNewReadsSteadyHints: New tells the engine that the backend's hints survive its
// reconnects (engine.Options.SteadyHints: a fallback retry two TTLs after a HeldBy whose time
// left is unknown) exactly when the backend is an spi.Hinter that says so through
// spi.SteadyHints; without the capability, with it denied, or on a backend without hints, the
// fallback retry stays one TTL after the reply.
func TestNewReadsSteadyHints(t *testing.T) {
	plain := func() *simbatest.Backend { return simbatest.NewServer().Backend() }
	steady := func() *simbatest.Backend {
		return simbatest.NewServer(simbatest.WithModelOptions(simbatest.WithUnknownRemaining())).Backend()
	}
	type hinter struct {
		spi.Backend
		spi.Hinter
	}
	type claiming struct {
		spi.Backend
		spi.Hinter
		claimSteadyHints
	}
	type claimingNoHints struct {
		spi.Backend
		claimSteadyHints
	}
	for _, tc := range []struct {
		name    string
		backend func() spi.Backend
		steady  bool
	}{
		{"plain hints", func() spi.Backend { return plain() }, false},
		{"steady hints", func() spi.Backend { return steady() }, true},
		{"decorator without SteadyHints", func() spi.Backend { b := steady(); return hinter{b, b} }, false},
		{"decorator denying it", func() spi.Backend { b := steady(); return claiming{b, b, false} }, false},
		{"decorator claiming it", func() spi.Backend { b := plain(); return claiming{b, b, true} }, true},
		{"claim without hints", func() spi.Backend { return claimingNoHints{steady(), true} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.backend(), WithOwner("o"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = c.Close(ctx)
			}()
			if o := c.eng.Options(); o.SteadyHints != tc.steady {
				t.Fatalf("engine options SteadyHints=%v, want %v", o.SteadyHints, tc.steady)
			}
		})
	}
}
