//go:build trial34

package main

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testenv"
)

// TestDrillsShort runs one drill of each kind on a private Redis Cluster and a private
// 3-member etcd and fails on an overlap (two workers with valid leader terms at one sample), a
// write two holders made with one token, or a fleet that does not settle again (one leader, its
// gauge alone at 1, every partition owned once, every /readyz 200) within 60 s of the heal.
// Behind the build tag trial34 (see RESULTS.md: it starts 9 servers and takes about 2 minutes):
//
//	cd chaos && go test -tags trial34 -count=1 -timeout 15m ./trials/trial34/
func TestDrillsShort(t *testing.T) {
	for _, bin := range []string{"redis-server", "redis-cli", "etcd"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Unavailable(t, bin, err.Error())
		}
	}
	goredis.SetLogger(quiet{})
	for _, b := range []string{"redis", "etcd"} {
		t.Run(b, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			ok, err := run(ctx, config{backend: b, drills: 3, ttl: 3 * time.Second, workers: 3, partitions: 8, fullCoverage: true}, os.Stdout)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Fatal("a drill broke safety or did not recover (see its line above)")
			}
		})
	}
}
