package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	_ "github.com/go-sql-driver/mysql"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/chaos/servers"
	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// secret is the password the hostile DSNs carry: no error may show it.
const secret = "Pw-t31-secret"

// show prints one case as the wrapper's users would see it: the error's class (errors.Is),
// whether it is permanent (simba.IsPermanent), how long it took, and its message.
func show(label string, took time.Duration, err error) {
	msg := "<nil>"
	if err != nil {
		msg = err.Error()
	}
	leak := ""
	if strings.Contains(msg, secret) {
		leak = " PASSWORD SHOWN"
	}
	fmt.Fprintf(out, "| %s | %s | %v | %v | %s%s |\n", label, errClass(err), err != nil && simba.IsPermanent(err),
		took.Round(time.Millisecond), strings.ReplaceAll(trunc(msg, 260), "|", "\\|"), leak)
}

func timed(f func() error) (time.Duration, error) {
	t := time.Now()
	err := f()
	return time.Since(t), err
}

func hostile(args []string) error {
	fs := flag.NewFlagSet("hostile", flag.ExitOnError)
	dir := fs.String("dir", "/tmp/t31", "log directory")
	fs.Parse(args)
	os.MkdirAll(*dir, 0o755)
	logger, _, err := newLog(filepath.Join(*dir, "hostile.log"))
	if err != nil {
		return err
	}
	ctx := context.Background()
	fmt.Fprintln(out, "| case | errors.Is | permanent | took | message |")
	fmt.Fprintln(out, "|---|---|---|---|---|")

	for _, kind := range []string{"mysql", "cluster"} {
		b, closeB, err := backendFor(ctx, kind, dsnFor(kind), logger)
		if err != nil {
			return err
		}
		c, err := simba.New(b, simba.WithTTL(3*time.Second), simba.WithLogger(logger))
		if err != nil {
			return err
		}
		names := map[string]string{
			"empty": "", "129 bytes": strings.Repeat("a", 129), "non-ASCII naïve": "naïve",
			"slash invoice/42": "invoice/42", "space": "a b", "dot": ".", "dotdot": "..", "NUL": "a\x00b",
			"emoji": "lock-🔒", "newline": "a\nb", "email": "user@example.com",
		}
		for _, label := range []string{"empty", "129 bytes", "non-ASCII naïve", "slash invoice/42", "space", "dot", "dotdot", "NUL", "emoji", "newline", "email"} {
			n := names[label]
			d, err := timed(func() error {
				lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				h, err := c.Lock(lctx, n)
				if err == nil {
					h.Unlock(ctx)
				}
				return err
			})
			show(kind+" Lock name "+label, d, err)
		}
		ok128 := "t31-" + strings.Repeat("x", 124)
		d, err := timed(func() error {
			h, err := c.Lock(ctx, ok128)
			if err == nil {
				h.Unlock(ctx)
			}
			return err
		})
		show(kind+" Lock name of exactly 128 bytes", d, err)
		d, err = timed(func() error { _, err := c.NewElection("bad/name"); return err })
		show(kind+" NewElection bad/name", d, err)
		grp := "t31-" + strings.Repeat("g", 122) // 126 bytes: "<group>.9" is 128, "<group>.64" would be 129
		d, err = timed(func() error {
			g, err := c.JoinGroup(ctx, grp, 65)
			if err == nil {
				g.Leave(ctx)
			}
			return err
		})
		show(kind+" JoinGroup 126-byte name, 65 partitions (<group>.64 is 129 bytes)", d, err)
		d, err = timed(func() error {
			g, err := c.JoinGroup(ctx, grp, 10)
			if err == nil {
				g.Leave(ctx)
			}
			return err
		})
		show(kind+" JoinGroup 126-byte name, 10 partitions (<group>.9 is 128 bytes)", d, err)
		d, err = timed(func() error { _, err := c.JoinGroup(ctx, "t31-g", 0); return err })
		show(kind+" JoinGroup 0 partitions", d, err)
		d, err = timed(func() error { _, err := c.JoinGroup(ctx, "t31-g", -5); return err })
		show(kind+" JoinGroup -5 partitions", d, err)
		d, err = timed(func() error { _, err := c.JoinGroup(ctx, "t31-g", 1<<20); return err })
		show(kind+" JoinGroup 1,048,576 partitions", d, err)
		d, err = timed(func() error {
			return c.WithLock(ctx, "with/slash", func(context.Context, simba.Term) error { return nil })
		})
		show(kind+" WithLock with/slash", d, err)
		c.Close(ctx)

		for _, tc := range []struct {
			label string
			opts  []simba.Option
		}{
			{"WithTTL(0)", []simba.Option{simba.WithTTL(0)}},
			{"WithTTL(-1s)", []simba.Option{simba.WithTTL(-time.Second)}},
			{"WithTTL(1ns)", []simba.Option{simba.WithTTL(time.Nanosecond)}},
			{"WithTTL(500µs)", []simba.Option{simba.WithTTL(500 * time.Microsecond)}},
			{"WithTTL(5ms)", []simba.Option{simba.WithTTL(5 * time.Millisecond)}},
			{"WithTTL(25h)", []simba.Option{simba.WithTTL(25 * time.Hour)}},
			{"WithTTL(24h) = MaxTTL", []simba.Option{simba.WithTTL(simba.MaxTTL)}},
			{"WithTTL(3s), WithRenewEvery(3s)", []simba.Option{simba.WithTTL(3 * time.Second), simba.WithRenewEvery(3 * time.Second)}},
			{"WithTTL(3s), WithRenewEvery(10s)", []simba.Option{simba.WithTTL(3 * time.Second), simba.WithRenewEvery(10 * time.Second)}},
			{"WithOwner(\"\\u202e\")", []simba.Option{simba.WithOwner("evil\u202e")}},
		} {
			var c2 *simba.Client
			d, err := timed(func() error {
				var err error
				c2, err = simba.New(b, append(tc.opts, simba.WithLogger(logger))...)
				if err != nil {
					return err
				}
				lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				h, err := c2.Lock(lctx, "t31-ttl-probe")
				if err == nil {
					h.Unlock(ctx)
				}
				return err
			})
			show(kind+" New+Lock "+tc.label, d, err)
			if c2 != nil {
				c2.Close(ctx)
			}
		}
		closeB()
	}

	// DSNs a service's configuration may carry.
	lockWith := func(dsn string, ping bool, kind string) (time.Duration, error) {
		return timed(func() error {
			var b spi.Backend
			var closeB func()
			var err error
			if kind == "mysql-own-pool" {
				b, closeB, err = backendFor(ctx, "mysql", dsn, logger)
			} else {
				opts := []open.Option{open.WithLogger(logger)}
				if ping {
					opts = append(opts, open.WithPing())
				}
				b, err = open.Open(ctx, dsn, opts...)
				closeB = func() {
					if b != nil {
						b.Close()
					}
				}
			}
			if err != nil {
				return err
			}
			defer closeB()
			c, err := simba.New(b, simba.WithTTL(3*time.Second), simba.WithLogger(logger))
			if err != nil {
				return err
			}
			defer c.Close(ctx)
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			h, err := c.Lock(lctx, "t31-dsn-probe")
			if err == nil {
				h.Unlock(ctx)
			}
			return err
		})
	}
	for _, tc := range []struct{ label, dsn, kind string }{
		{"MariaDB wrong password, own pool (NewMySQL)", "mysql://root:" + secret + "@127.0.0.1:3306/test", "mysql-own-pool"},
		{"MariaDB wrong password, open.Open", "mysql://root:" + secret + "@127.0.0.1:3306/test", "open"},
		{"MariaDB wrong password, open.Open WithPing", "mysql://root:" + secret + "@127.0.0.1:3306/test", "ping"},
		{"MariaDB unknown user", "mysql://t31nobody:" + secret + "@127.0.0.1:3306/test", "open"},
		{"MariaDB database that does not exist", "mysql://root@127.0.0.1:3306/t31_nodb", "open"},
		{"MariaDB nothing listening (port 1)", "mysql://root:" + secret + "@127.0.0.1:1/test", "open"},
		{"MariaDB port 99999", "mysql://root:" + secret + "@127.0.0.1:99999/test", "open"},
		{"MariaDB unknown parameter, right credentials", "mysql://root@127.0.0.1:3306/test?bogus=1", "open"},
		{"MariaDB unknown parameter, WithPing", "mysql://root@127.0.0.1:3306/test?bogus=1", "ping"},
		{"MariaDB misspelt parameter timeout=5 (no unit)", "mysql://root@127.0.0.1:3306/test?timeout=5", "open"},
		{"MySQL DSN in go-sql-driver form", "root:" + secret + "@tcp(127.0.0.1:3306)/test", "open"},
		{"Cluster password on a server without auth", "redis+cluster://:" + secret + "@127.0.0.1:7001,127.0.0.1:7002", "open"},
		{"Cluster password, WithPing", "redis+cluster://:" + secret + "@127.0.0.1:7001,127.0.0.1:7002", "ping"},
		{"standalone redis:// at a Cluster node", "redis://127.0.0.1:7001", "open"},
		{"Cluster seed without port", "redis+cluster://127.0.0.1", "open"},
		{"empty DSN", "", "open"},
	} {
		d, err := lockWith(tc.dsn, tc.kind == "ping", tc.kind)
		show("DSN: "+tc.label, d, err)
	}

	// A missing schema: an empty database on a private MariaDB.
	root := filepath.Join(*dir, "srv-hostile")
	os.RemoveAll(root)
	os.MkdirAll(root, 0o755)
	srv, err := servers.MariaDB(ctx, root)
	if err != nil {
		return err
	}
	defer srv.Close()
	db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/test")
	if err != nil {
		return err
	}
	if _, err := db.Exec("CREATE DATABASE empty"); err != nil {
		return err
	}
	db.Close()
	d, err := lockWith("mysql://root@"+srv.Addr()+"/empty", false, "open")
	show("DSN: MariaDB database without Simba's tables", d, err)
	d, err = lockWith("mysql://root@"+srv.Addr()+"/empty", true, "ping")
	show("DSN: MariaDB database without Simba's tables, WithPing", d, err)
	// The same through an election: Start succeeds, Err says why nothing happens.
	b, closeB, err := backendFor(ctx, "mysql", "mysql://root@"+srv.Addr()+"/empty", logger)
	if err == nil {
		// backendFor migrates; drop the tables again to have an election meet a missing schema.
		closeB()
	}
	b2, err := open.Open(ctx, "mysql://root@"+srv.Addr()+"/test", open.WithLogger(logger))
	if err != nil {
		return err
	}
	c, _ := simba.New(b2, simba.WithTTL(3*time.Second), simba.WithLogger(logger))
	e, _ := c.NewElection("t31-el")
	d, err = timed(func() error { return e.Start(ctx) })
	show("Election.Start on a database without the tables", d, err)
	time.Sleep(2 * time.Second)
	show("  its Err() 2 s later", 0, e.Err())
	show("  the client's Err()", 0, c.Err())
	c.Close(ctx)
	b2.Close()
	_ = b
	return nil
}
