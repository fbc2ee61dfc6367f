package simba_test

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// TestObserveLeaderWithoutCampaigning pins what the README and Election.Leader say to a team
// porting from client-go's GetLeader (trial28): an election that was never started learns
// nothing, so its Leader reports false while another client leads, and the backend's
// InspectLease names the holder, its owner and its token without a session.
func TestObserveLeaderWithoutCampaigning(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	a, err := simba.New(srv.Backend(), simba.WithTTL(time.Second), simba.WithOwner("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := simba.New(srv.Backend(), simba.WithTTL(time.Second), simba.WithOwner("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	ea, err := a.NewElection("observed")
	if err != nil {
		t.Fatal(err)
	}
	if err := ea.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer ea.Stop(ctx)
	var term simba.Term
	for ctx.Err() == nil {
		if tm, ok := ea.Term(); ok {
			term = tm
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	eb, err := b.NewElection("observed")
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := eb.Leader(); ok {
		t.Errorf("an election never started reports a leader: %+v", l)
	}
	li, ok, err := spi.LeaseInspector(srv.Backend()).InspectLease(ctx, "observed")
	if err != nil || !ok {
		t.Fatalf("InspectLease: %v, found %v", err, ok)
	}
	if li.Owner != "a" || li.Token != term.Token() || li.Holder != a.Session() {
		t.Errorf("InspectLease = %+v, want owner a, token %d, holder %s", li, term.Token(), a.Session())
	}
}
