package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// waitConnectedReplicas waits until the master at c reports want connected replicas, all
// online (connected_slaves counts a replica still waiting for its first sync too, which
// acknowledges no WAIT: Redis 7 delays a diskless sync by 5 s).
func waitConnectedReplicas(t *testing.T, c *goredis.Client, want int) {
	t.Helper()
	line := fmt.Sprintf("connected_slaves:%d", want)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		info, _ := c.Info(context.Background(), "replication").Result()
		if strings.Contains(info, line) && strings.Count(info, "state=online") == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the master never reported %s", line)
}

// TestWaitShortfallIsOneOutage: a client WithWaitReplicas(1, …) on a private master whose one
// replica is stopped (as right after a failover, until a replica rejoins). Every grant and
// keep-alive fails its WAIT; the outage probe (Members of wire.ProbeGroup) and the session's
// open, which did not WAIT, succeeded, so the client logged "simba backend reachable again"
// at each session it reopened and lost again (trial 28: 12 times in 10 s while nothing
// worked). Now both fail, retryably, naming the replica shortfall: no "reachable again" while
// the replica is away, one once it is back.
func TestWaitShortfallIsOneOutage(t *testing.T) {
	testenv.Short(t, "a private master and replica, an outage of several TTLs")
	_, mport := startPrivServerProc(t)
	replica, rport := startPrivServerProc(t, fmt.Sprintf("replicaof 127.0.0.1 %d", mport))
	master := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", mport)})
	defer master.Close()
	waitConnectedReplicas(t, master, 1)

	b, err := Open(fmt.Sprintf("redis://127.0.0.1:%d/0?wait_replicas=1&wait_timeout=100ms", mport))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var log testenv.LogBuffer
	c, err := simba.New(b, simba.WithTTL(1500*time.Millisecond), simba.WithOwner("waitprobe"),
		simba.WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(ctx) //nolint:errcheck
	}()
	lock := func(name string, within time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		h, err := c.Lock(ctx, name)
		if err != nil {
			return err
		}
		return h.Unlock(ctx)
	}
	if err := lock("test:waitprobe:before", 10*time.Second); err != nil {
		t.Fatalf("Lock with the replica connected: %v", err)
	}
	probe := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := b.Members(ctx, wire.ProbeGroup)
		return err
	}
	if err := probe(); err != nil {
		t.Fatalf("probe with the replica connected: %v", err)
	}

	replica.kill(rport)
	waitConnectedReplicas(t, master, 0)
	err = probe()
	if !errors.Is(err, spi.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 replicas") {
		t.Errorf("probe with no replica connected = %v, want a retryable error naming the shortfall (0 of 1 replicas)", err)
	}
	// Several TTLs without a replica: the session is lost and reopened over and over.
	if err := lock("test:waitprobe:during", 5*time.Second); err == nil {
		t.Error("Lock granted with no replica connected to WAIT for")
	}
	if n := strings.Count(log.String(), "simba backend reachable again"); n != 0 {
		t.Errorf("%d \"reachable again\" lines while no replica was connected (every grant and renewal failing), want 0:\n%s", n, log.String())
	}

	replica.start(rport)
	if err := replica.waitReady(rport); err != nil {
		t.Fatal(err)
	}
	waitConnectedReplicas(t, master, 1)
	if err := probe(); err != nil {
		t.Errorf("probe with the replica back: %v", err)
	}
	if err := lock("test:waitprobe:after", 15*time.Second); err != nil {
		t.Fatalf("Lock once the replica is back: %v\n%s", err, log.String())
	}
	if n := strings.Count(log.String(), "simba backend reachable again"); n != 1 {
		t.Errorf("%d \"reachable again\" lines once the replica is back, want 1:\n%s", n, log.String())
	}
}

// TestClusterProbeChecksEveryMaster: on a Cluster WithWaitReplicas(1, …), the outage probe
// (Members of wire.ProbeGroup) asks every master for its replicas, not only the master of the
// probe's key: a session's keys and leases spread over the masters, and one master short of a
// replica fails every grant and renewal on it. A master other than the probe key's, cut off
// from its replica, fails the probe with an error naming it; the old probe succeeded.
func TestClusterProbeChecksEveryMaster(t *testing.T) {
	pc := startPrivCluster(t)
	pc.waitHealthy(30 * time.Second)
	cc := pc.client()
	b := newBackend(t, cc, WithWaitReplicas(1, 200*time.Millisecond))
	probe := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := b.Members(ctx, wire.ProbeGroup)
		return err
	}
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = probe(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("probe with every replica connected: %v", err)
	}
	pm := pc.masterOfKey(cc, wire.GroupKey(wire.ProbeGroup))
	other := 0
	for _, p := range pc.ports {
		info, _ := pc.node(p).Info(context.Background(), "replication").Result()
		if p != pm && strings.Contains(info, "role:master") {
			other = p
			break
		}
	}
	if other == 0 {
		t.Fatal("no master besides the probe key's")
	}
	pc.breakReplication(other)
	err = probe()
	want := fmt.Sprintf("0 of 1 replicas acknowledged within 200ms on master 127.0.0.1:%d", other)
	if !errors.Is(err, spi.ErrUnavailable) || !strings.Contains(err.Error(), want) {
		t.Errorf("probe with master %d cut off from its replica = %v, want a retryable error containing %q", other, err, want)
	}
}
