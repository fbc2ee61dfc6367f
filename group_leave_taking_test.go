package simba_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/spi"
)

// TestLeaveWhileTakingPartitionsLeavesNoneHeld: a Leave of a group still taking its partitions
// (most acquires queued behind the client's 32 calls in flight) returns with none of the
// group's partitions held on the backend. Found by an outside trial (chaos/trials/trial29,
// defect 1): the queued acquires still went out after the Leave, were granted, and were
// released afterwards, so Leave returned while thousands of partitions were held (SQLite,
// 8,192 partitions, Leave 1 s after the join: 6,905 still held when it returned, 514 two
// seconds later; Redis, 16,384: 6,997), which other members could not take meanwhile. On the
// old code this test found 3,999 of 4,096 held when Leave returned (this commit's first
// version, under the build tag trial29); now the Leave drops the acquires still queued unsent
// and waits for those in flight and the release of what they were granted. It also counts the
// backend's acquires and releases: on the old code nearly every partition was acquired and
// released once, now only those sent before the Leave are.
func TestLeaveWhileTakingPartitionsLeavesNoneHeld(t *testing.T) {
	ctx := context.Background()
	b, err := simbasql.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "simba.db"), simbasql.WithAutoMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var mu sync.Mutex
	calls := map[string]int{}
	c, err := simba.New(b, simba.WithTTL(15*time.Second), simba.WithCallObserver(func(ci simba.CallInfo) {
		mu.Lock()
		calls[ci.Op]++
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	const parts = 2048
	held := make(chan struct{}, parts)
	g, err := c.JoinGroup(ctx, "leaving", parts, simba.RunPartition(func(ctx context.Context, p int, t simba.Term) error {
		held <- struct{}{}
		<-ctx.Done()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	for range 64 { // some partitions held, most still to take
		<-held
	}
	start := time.Now()
	if err := g.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	snap, err := spi.Inspector(b).Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range snap.Leases {
		if strings.HasPrefix(l.Name, "leaving.") && l.Holder != "" {
			n++
		}
	}
	mu.Lock()
	acq, rel := calls[simba.OpAcquire], calls[simba.OpRelease]
	mu.Unlock()
	t.Logf("Leave took %v; when it returned: %d of %d partitions held, %d acquires and %d releases sent", took, n, parts, acq, rel)
	if n != 0 {
		t.Errorf("Leave returned with %d of the group's %d partitions still held by this client on the backend", n, parts)
	}
}
