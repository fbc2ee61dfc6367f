package fenceredis_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fenceredis"
)

// A fenced SET of a key of the resource invoice-42: the key carries the hash tag
// {invoice-42}, so it shares a slot with the fence key simba:fence:{invoice-42} (on a Cluster
// too). Needs a Redis server, so it only compiles here; the package's tests run it.
func Example() {
	ctx := context.Background()
	rdb := goredis.NewUniversalClient(&goredis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	defer rdb.Close()
	f := fenceredis.New(rdb)

	var token int64 = 1796238121161000 // held.Token() of the lock "invoice-42"
	err := f.Set(ctx, "invoice-42", token, "invoice:{invoice-42}:status", "paid")
	if errors.Is(err, fence.ErrStaleToken) {
		log.Print("a newer holder has written: drop this write")
	}
	_ = f.HSet(ctx, "invoice-42", token, "invoice:{invoice-42}", "status", "paid")
}

// The guarded key must share the fence key's hash slot, so that one script can check the token
// and write on a Cluster too: a key without the resource's hash tag fails before any I/O (this
// runs without a server), with an error matching ErrCrossSlot that names the fix.
func ExampleFence_Set_crossSlot() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never dialled here
	defer rdb.Close()
	f := fenceredis.New(rdb)

	err := f.Set(context.Background(), "invoice-42", 7, "invoice:42:status", "paid")
	fmt.Println(errors.Is(err, fenceredis.ErrCrossSlot))
	fmt.Println(err)
	fmt.Println(fenceredis.Slot("invoice:{invoice-42}:status") == fenceredis.Slot("simba:fence:{invoice-42}"))
	// Output:
	// true
	// fenceredis: key outside the resource's hash slot: "invoice:42:status" is in slot 7500, resource "invoice-42" in slot 13003: give the key the hash tag {invoice-42}
	// true
}
