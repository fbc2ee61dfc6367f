// Command trial26 is an outside trial of Simba as a platform team writing Kubernetes-style
// controllers would use it: a controller binary (an Election with leader work, graceful SIGTERM
// hand-over, simbaprom metrics, simbahttp /healthz, writes fenced by a fencehttp sink), a runner
// that starts three replicas behind TCP proxies it controls and breaks their links (blackhole,
// slow link, partition of one replica, flapping), kills and stops the leader and rolls the
// replicas, and a set of hostile uses of the API. Written from the documentation alone.
//
//	trial26 controller -dsn … -name … -id r1 -http 127.0.0.1:0 -sink http://…
//	trial26 run -backend pg|etcd|rc [-scenarios all]
//	trial26 hostile -backend pg|etcd|rc
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: trial26 controller|run|hostile [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "controller":
		err = controller(os.Args[2:])
	case "run":
		err = run(os.Args[2:])
	case "rtt":
		err = rtt(os.Args[2:])
	case "hostile":
		err = hostile(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trial26:", err)
		os.Exit(1)
	}
}
