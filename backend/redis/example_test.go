package redis_test

import (
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	simbaredis "github.com/simba-go/simba/backend/redis"
)

// A backend from a DSN: Open does no I/O, so this runs without a server. Pass the backend to
// simba.New.
func Example() {
	b, err := simbaredis.Open("redis://app:secret@127.0.0.1:6379/0?wait_replicas=1&wait_timeout=250ms")
	if err != nil {
		panic(err)
	}
	defer b.Close()
	fmt.Println("routeBySlot:", b.RouteBySlot())

	c, err := simbaredis.Open("redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003")
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Println("routeBySlot:", c.RouteBySlot())
	// Output:
	// routeBySlot: false
	// routeBySlot: true
}

// A backend on a client the application already has; Close leaves the client open.
// WithDropSilent gives the client what Open's has against a silent link (pass it before the
// client has dialled), and ContextTimeoutEnabled lets calls end at their deadlines.
func ExampleNew() {
	client := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:7001"}, ContextTimeoutEnabled: true})
	defer client.Close()
	b, err := simbaredis.New(client, simbaredis.WithDropSilent(), simbaredis.WithWaitReplicas(1, 500*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer b.Close()
	fmt.Println("routeBySlot:", b.RouteBySlot())
	// Output: routeBySlot: true
}

// A bad DSN names what is wrong and matches simba.ErrInvalidOption.
func ExampleParseDSN() {
	_, err := simbaredis.ParseDSN("redis+cluster://:pw@127.0.0.1,127.0.0.1:7002")
	fmt.Println(err)
	// Output: simba: invalid option: redis DSN "redis+cluster://:xxxxx@127.0.0.1,127.0.0.1:7002": Cluster seed "127.0.0.1" needs host:port
}
