package zookeeper_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/simba-go/simba/backend/zookeeper"
)

// A DSN names the ensemble, the digest identity that protects Simba's nodes, a chroot and the
// dial timeout; bad DSNs fail before any I/O.
func ExampleParseDSN() {
	cfg, err := zookeeper.ParseDSN("zk://simba:secret@zk1:2181,zk2:2181,zk3/apps/billing?timeout=5s")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Servers, cfg.Chroot, cfg.User, cfg.Timeout)

	_, err = zookeeper.ParseDSN("zk://zk1:2181/apps/?timeout=5s")
	fmt.Println(err)
	// Output:
	// [zk1:2181 zk2:2181 zk3:2181] /apps/billing simba 5s
	// simba: invalid option: zookeeper DSN "zk://zk1:2181/apps/?timeout=5s": chroot "/apps/" must not end with /
}

// tickTime tells the backend the servers' tickTime (zoo.cfg's, here its default 2000 ms), so
// that a crashed holder's leases go by its last request + TTL: ZooKeeper expires sessions only
// at multiples of tickTime, so each session asks for its TTL less one tick. A tick of half the
// TTL or more is refused when a session is opened.
func ExampleParseDSN_tickTime() {
	cfg, err := zookeeper.ParseDSN("zk://simba:secret@zk1,zk2,zk3/apps/billing?tickTime=2000")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.TickTime)

	_, err = zookeeper.ParseDSN("zk://zk1/apps?tickTime=0")
	fmt.Println(err)
	// Output:
	// 2s
	// simba: invalid option: zookeeper DSN "zk://zk1/apps?tickTime=0": tickTime "0": must be positive (leave it out to ask for the TTL itself)
}

// The backend is normally handed to simba.New; used directly, it speaks the SPI: a session,
// then leases whose tokens are the nodes' czxids.
func Example() {
	b, err := zookeeper.New("zk://simba:secret@127.0.0.1:2181/example")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	s, err := b.OpenSession(ctx, "worker-1", 15*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer b.CloseSession(ctx, s.ID)
	r, err := b.Acquire(ctx, s.ID, "billing-leader")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Kind, r.Token > 0)
	if err := b.Release(ctx, s.ID, "billing-leader", r.Token); err != nil {
		log.Fatal(err)
	}
}
