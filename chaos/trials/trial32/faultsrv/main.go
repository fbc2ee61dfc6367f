// Command faultsrv is trial 32's fault injector for shell scripts: it starts one private server
// (chaos/servers: postgres, mariadb, redis with AOF always, or zookeeper) and -proxies netproxy
// proxies in front of it, writes one DSN per proxy (a line each) to -dsns, and then obeys
// commands read line by line from -ctl (a FIFO): kill, start (the server), cut N, heal N (proxy N,
// from 0; "all" for every proxy), quit. Each command's completion is appended to -log with a
// unix time, so the scripts can measure from the fault.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba/chaos/servers"
	"github.com/simba-go/simba/chaos/trials/netproxy"
)

func main() {
	kind := flag.String("kind", "postgres", "postgres, mariadb, redis or zookeeper")
	root := flag.String("root", "/tmp/t32/srv", "directory for the server's data")
	nproxy := flag.Int("proxies", 4, "proxies, one per simulated host")
	dsns := flag.String("dsns", "/tmp/t32/dsns", "file the DSNs are written to, one per proxy")
	ctl := flag.String("ctl", "/tmp/t32/ctl", "FIFO the commands are read from")
	logf := flag.String("log", "/tmp/t32/faults.log", "file each command's completion is appended to")
	flag.Parse()
	ctx := context.Background()
	if err := os.MkdirAll(*root, 0o777); err != nil {
		log.Fatal(err)
	}
	var srv *servers.Server
	var err error
	switch *kind {
	case "postgres":
		srv, err = servers.Postgres(ctx, *root)
	case "mariadb":
		srv, err = servers.MariaDB(ctx, *root)
	case "redis":
		srv, err = servers.Redis(ctx, *root, true)
	case "zookeeper":
		srv, err = servers.ZooKeeper(ctx, *root)
	default:
		log.Fatalf("unknown -kind %q", *kind)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	var ps []*netproxy.Proxy
	var lines []string
	for range *nproxy {
		p, err := netproxy.New(srv.Addr())
		if err != nil {
			log.Fatal(err)
		}
		defer p.Close()
		ps = append(ps, p)
		lines = append(lines, dsnFor(*kind, p.Addr()))
	}
	if err := os.WriteFile(*dsns+".tmp", []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(*dsns+".tmp", *dsns); err != nil {
		log.Fatal(err)
	}
	lf, err := os.OpenFile(*logf, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	for {
		f, err := os.Open(*ctl) // blocks until a writer opens the FIFO
		if err != nil {
			log.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) == 0 {
				continue
			}
			which := func() []*netproxy.Proxy {
				if len(fields) < 2 || fields[1] == "all" {
					return ps
				}
				i, err := strconv.Atoi(fields[1])
				if err != nil || i < 0 || i >= len(ps) {
					return nil
				}
				return ps[i : i+1]
			}
			switch fields[0] {
			case "kill":
				srv.Kill()
			case "start":
				if err := srv.Start(ctx); err != nil {
					log.Print(err)
				}
			case "cut":
				for _, p := range which() {
					p.Cut()
				}
			case "heal":
				for _, p := range which() {
					p.Heal()
				}
			case "quit":
				fmt.Fprintf(lf, "quit %.3f\n", float64(time.Now().UnixNano())/1e9)
				return
			default:
				log.Printf("unknown command %q", sc.Text())
				continue
			}
			fmt.Fprintf(lf, "%s %.3f\n", sc.Text(), float64(time.Now().UnixNano())/1e9)
		}
		f.Close()
	}
}

func dsnFor(kind, addr string) string {
	switch kind {
	case "postgres":
		return "postgres://postgres@" + addr + "/test?sslmode=disable"
	case "mariadb":
		return "mysql://root@" + addr + "/test"
	case "redis":
		return "redis://" + addr + "/0"
	default:
		return "zk://" + addr + "/t32?tickTime=200ms"
	}
}
