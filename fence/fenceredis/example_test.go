package fenceredis_test

import (
	"context"
	"errors"
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
