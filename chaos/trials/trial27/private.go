package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/simba-go/simba/chaos/servers"
)

// private holds the servers "private" started; the runner's faults zkleader and dbrestart act
// on them (never on the shared servers).
var private []*servers.Server

// privateRun starts a private ZooKeeper ensemble (-kind zkens) or MariaDB (-kind mariadb),
// then the runner against it with the remaining arguments, and removes the servers.
func privateRun(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("usage: trial27 private zkens|mariadb [run flags]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := os.MkdirTemp("", "trial27-srv-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	_ = os.Chmod(root, 0o755) // the servers may run as their own users
	var dsn, target string
	switch args[0] {
	case "zkens":
		ens, err := servers.ZooKeeperEnsemble(ctx, root)
		if err != nil {
			return err
		}
		private = ens
		var hosts []string
		for _, s := range ens {
			hosts = append(hosts, s.Addr())
		}
		dsn = "zk://" + strings.Join(hosts, ",") + "/t27?tickTime=200ms"
	case "mariadb":
		s, err := servers.MariaDB(ctx, root)
		if err != nil {
			return err
		}
		private = []*servers.Server{s}
		dsn, target = "mysql://root@"+s.Addr()+"/test", s.Addr() // servers.MariaDB creates test
	default:
		return fmt.Errorf("unknown kind %q", args[0])
	}
	defer func() {
		for _, s := range private {
			s.Close()
		}
	}()
	return run(append([]string{"-dsn", dsn, "-target", target}, args[1:]...))
}

// zkLeaderKill kills the private ensemble's leader, waits d, and starts it again.
func zkLeaderKill(r *runner, d time.Duration) {
	for _, s := range private {
		if s.ZKMode() == "leader" {
			r.note("kill -9 ZooKeeper leader %s", s.Addr())
			s.Kill()
			time.Sleep(d)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := s.Start(ctx)
			cancel()
			r.note("restarted %s: %v", s.Addr(), err)
			return
		}
	}
	r.note("no ZooKeeper leader found")
}

// dbRestart kills the private MariaDB, waits d, and starts it again.
func dbRestart(r *runner, d time.Duration) {
	s := private[0]
	r.note("kill -9 private MariaDB %s", s.Addr())
	s.Kill()
	time.Sleep(d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := s.Start(ctx)
	cancel()
	r.note("restarted MariaDB %s: %v", s.Addr(), err)
}
