package etcd_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd"
)

// A DSN names the cluster's members, the key prefix Simba's keys live under (deployments that
// share a cluster but must not share leases use different ones) and the dial timeout; a bad
// DSN fails before any I/O, with an error matching simba.ErrInvalidOption.
func ExampleParseDSN() {
	cfg, err := etcd.ParseDSN("etcd://simba:secret@etcd1:2379,etcd2:2379,etcd3:2379/billing?dial_timeout=5s")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Endpoints, cfg.Prefix, cfg.User, cfg.DialTimeout)

	_, err = etcd.ParseDSN("etcd://127.0.0.1:2379/simba?dial_timeout=soon")
	fmt.Println(err)
	// Output:
	// [etcd1:2379 etcd2:2379 etcd3:2379] /billing simba 5s
	// simba: invalid option: etcd DSN "etcd://127.0.0.1:2379/simba?dial_timeout=soon": dial_timeout "soon" is not a positive duration
}

// New does no I/O: the client connects at the first call, so a backend made while the cluster
// is down is no error. Without a path in the DSN, Simba's keys live under /simba.
func ExampleNew() {
	b, err := etcd.New("etcd://127.0.0.1:2379")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	fmt.Println(b.Prefix())
	// Output: /simba
}

// A distributed lock on etcd: the backend is handed to simba.New, and the fencing token is the
// lease key's create revision. etcd counts lease TTLs in whole seconds.
func Example() {
	backend, err := etcd.New("etcd://127.0.0.1:2379/example")
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
	client, err := simba.New(backend, simba.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer client.Close(ctx)

	held, err := client.Lock(ctx, "billing-run")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held with token", held.Token())
	_ = held.Unlock(ctx)
}
