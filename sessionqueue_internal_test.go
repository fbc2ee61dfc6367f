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
