package simba_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/open"
)

// TestAccessDeniedReachesTheCaller: a refusal of the credentials or privileges reaches the
// caller as simba.ErrAccessDenied, permanent, through every door, on a private Redis with ACL
// users: open.Open with WithPing and simba.New (a wrong password; a user without Simba's
// channels, refused at New's subscription) fail with it; for a user without Simba's keys,
// whose session is refused, TryLock and Lock return it at once (not at their deadline),
// and Election.Start and JoinGroup succeed and report it through Err, as the Client's Err
// does. On the old code the errors were permanent but matched no such sentinel.
func TestAccessDeniedReachesTheCaller(t *testing.T) {
	addr := testenv.PrivateRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := goredis.NewClient(&goredis.Options{Addr: addr})
	defer admin.Close()
	for _, rule := range [][]any{
		{"ACL", "SETUSER", "app", "on", ">right", "~simba:*", "&simba:*", "+@all"},
		{"ACL", "SETUSER", "nokeys", "on", ">right", "~other:*", "&*", "+@all"},
		{"ACL", "SETUSER", "nochan", "on", ">right", "~simba:*", "resetchannels", "+@all"},
	} {
		if err := admin.Do(ctx, rule...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	t0 := time.Now()
	want := func(what string, err error, says string) {
		t.Helper()
		t.Logf("%v %s: %v", time.Since(t0).Round(time.Millisecond), what, err)
		if !errors.Is(err, simba.ErrAccessDenied) || !simba.IsPermanent(err) || errors.Is(err, simba.ErrUnavailable) ||
			errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "bad-secret") {
			t.Errorf("%s: %v; want a permanent simba.ErrAccessDenied saying %q (and no password)", what, err, says)
		}
	}

	b, err := open.Open(ctx, "redis://app:bad-secret@"+addr, open.WithPing())
	if err == nil {
		b.Close()
	}
	want("open.Open with WithPing, a wrong password", err, "refused the credentials")

	for _, tc := range []struct{ dsn, what, says string }{
		{"redis://app:bad-secret@" + addr, "a wrong password", "refused the credentials"},
		{"redis://nochan:right@" + addr, "a user without Simba's channels", "privilege refused"},
	} {
		b, err := redis.Open(tc.dsn, redis.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		c, err := simba.New(b, simba.WithLogger(quiet))
		if err == nil {
			c.Close(ctx)
		}
		b.Close()
		want("simba.New, "+tc.what, err, tc.says)
	}

	b, err = redis.Open("redis://nokeys:right@"+addr, redis.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := simba.New(b, simba.WithLogger(quiet))
	if err != nil {
		t.Fatalf("New for a user with Simba's channels: %v", err)
	}
	defer c.Close(ctx)
	_, err = c.TryLock(ctx, "denied")
	want("TryLock", err, "privilege refused")
	_, err = c.Lock(ctx, "denied")
	want("Lock", err, "privilege refused")

	e, err := c.NewElection("denied-election")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatalf("Election.Start: %v; want nil (it runs in the background)", err)
	}
	g, err := c.JoinGroup(ctx, "denied-group", 4)
	if err != nil {
		t.Fatalf("JoinGroup: %v; want nil (it runs in the background)", err)
	}
	for _, r := range []struct {
		what string
		err  func() error
	}{{"Election.Err", e.Err}, {"PartitionGroup.Err", g.Err}, {"Client.Err", c.Err}} {
		for r.err() == nil && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		want(r.what, r.err(), "privilege refused")
	}
}
