package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/open"
)

// hostile is scenario 3: what a real team types wrong. Everything runs on a new SQLite file, but
// the DSN checks, which open the shared servers only with WithPing (one session-less ping).
func hostile(args []string) error {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "trial30-hostile-")
	defer os.RemoveAll(dir)
	dsn := "sqlite://" + filepath.Join(dir, "simba.db")
	logf, _ := os.Create("/tmp/trial30-hostile.log")
	defer logf.Close()
	log := slog.New(slog.NewTextHandler(logf, nil))
	b, err := open.Open(ctx, dsn, open.WithAutoMigrate())
	if err != nil {
		return err
	}
	defer b.Close()
	c, err := simba.New(b, simba.WithOwner("h1"), simba.WithTTL(2*time.Second), simba.WithLogger(log))
	if err != nil {
		return err
	}
	defer c.Close(ctx)

	fmt.Println("## election names")
	for _, n := range []string{"payments ledger", "ledger-é", strings.Repeat("x", 300), "", "ledger\n", "ledger/eu", "ledger.eu-1"} {
		t := time.Now()
		e, err := c.NewElection(n)
		show := n
		if len(show) > 20 {
			show = show[:10] + fmt.Sprintf("…(%d bytes)", len(n))
		}
		fmt.Printf("  %-24q -> %s (%v, permanent %v, %.3f ms)\n", show, errLine(err), errors.Is(err, simba.ErrInvalidOption), simba.IsPermanent(err), float64(time.Since(t).Microseconds())/1000)
		if e != nil {
			e.Stop(ctx)
		}
	}

	fmt.Println("## TTLs on SQLite (New only)")
	for _, ttl := range []time.Duration{0, -time.Second, time.Millisecond, 48 * time.Hour} {
		_, err := simba.New(b, simba.WithTTL(ttl))
		fmt.Printf("  %-8v -> %s\n", ttl, errLine(err))
	}

	fmt.Println("## DSN typos (open.Open, then WithPing)")
	for _, d := range []string{
		"postgres://postgres@127.0.0.1:5432/test?sslmod=disable",
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable&connect_timeout=abc",
		"postgres://postgres@127.0.0.1:5432/tset?sslmode=disable",
		"postgres://postgres@127.0.0.1:5433/test?sslmode=disable",
		"redis://127.0.0.1:6379/0?strict_durablity=true",
		"redis://127.0.0.1:6379/0?strict_durability=yes",
		"REDIS://127.0.0.1:6379/0",
		" redis://127.0.0.1:6379/0",
		"redis://127.0.0.1:6379/0 ",
		"etcd://127.0.0.1:2379/t30h?dial_timeout=5",
		"etcd://127.0.0.1:2379/t30h?dial_timeot=5s",
		"zk://127.0.0.1:2181/t30h?tickTime=2sec",
		"mysql://root@127.0.0.1:3306/test?parseTime=yes",
		"sqlite:/tmp/x.db",
	} {
		_, err := open.Open(ctx, d)
		line := "Open: " + errLine(err)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 12*time.Second)
			b2, err2 := open.Open(pctx, d, open.WithPing())
			cancel()
			line += "; WithPing: " + errLine(err2)
			if b2 != nil {
				b2.Close()
			}
		}
		fmt.Printf("  %q\n      %s\n", d, line)
	}

	fmt.Println("## metrics registered twice")
	m := simbaprom.New(simbaprom.Opts{})
	reg := prometheus.NewRegistry()
	fmt.Printf("  Register(m) first: %v\n", reg.Register(m))
	err = reg.Register(m)
	var are prometheus.AlreadyRegisteredError
	fmt.Printf("  Register(m) again: %v (AlreadyRegisteredError %v)\n", err, errors.As(err, &are))
	m2 := simbaprom.New(simbaprom.Opts{})
	fmt.Printf("  Register(second client's metrics, no ConstLabels): %v\n", reg.Register(m2))
	func() {
		defer func() { fmt.Printf("  MustRegister of it: panic %v\n", recover() != nil) }()
		reg.MustRegister(m2)
	}()
	_, err = simba.New(b, append(m.Options(), m.Options()...)...)
	fmt.Printf("  m.Options() passed twice to New: %s\n", errLine(err))

	fmt.Println("## two clients in one process, one election name")
	g0 := runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	h0 := ms.HeapAlloc
	c2, err := simba.New(b, simba.WithOwner("h2"), simba.WithTTL(2*time.Second), simba.WithLogger(log))
	if err != nil {
		return err
	}
	e1, _ := c.NewElection("payments-ledger")
	e2, _ := c2.NewElection("payments-ledger")
	e1.Start(ctx)
	e2.Start(ctx)
	t := time.Now()
	for !e1.IsLeader() && !e2.IsLeader() && time.Since(t) < 10*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	fmt.Printf("  leaders after %v: h1 %v h2 %v\n", time.Since(t).Round(time.Millisecond), e1.IsLeader(), e2.IsLeader())
	lead, other := e1, e2
	if e2.IsLeader() {
		lead, other = e2, e1
	}
	t = time.Now()
	err = lead.Stop(ctx)
	for !other.IsLeader() && time.Since(t) < 10*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Printf("  Stop of the leader (%v): the other leads after %v (%v)\n", err, time.Since(t).Round(time.Millisecond), other.IsLeader())
	other.Stop(ctx)
	_, err = c.NewElection("payments-ledger")
	fmt.Printf("  NewElection of the name again on h1 after Stop: %s\n", errLine(err))
	_, err = c.NewElection("payments-ledger")
	fmt.Printf("  NewElection of the same name twice on one client: %s\n", errLine(err))
	c2.Close(ctx)
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	fmt.Printf("  goroutines %d -> %d, heap %d -> %d KiB after the second client's Close\n", g0, runtime.NumGoroutine(), h0/1024, ms.HeapAlloc/1024)
	return nil
}

func errLine(err error) string {
	if err == nil {
		return "accepted"
	}
	s := err.Error()
	if len(s) > 260 {
		s = s[:260] + "…"
	}
	return s
}
