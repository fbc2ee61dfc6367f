package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestPasswordAtServerWithoutOne: a DSN with a password for the default user, at a server that
// has none configured, is refused at the first OpenSession with a permanent error matching
// ErrAuth and spi.ErrInvalidOption that says so (Redis accepts any password for a "nopass"
// user through HELLO, which go-redis sends, so the client ran unauthenticated without a word:
// on the old code the session opened). A wrong password, or an unknown user, at a server with
// one is a permanent error matching ErrAuth; the right one opens. A private server: the test
// sets its password.
func TestPasswordAtServerWithoutOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := testenv.PrivateRedis(t)
	openWith := func(dsn string) error {
		t.Helper()
		b, err := Open(dsn, WithLogger(discard))
		if err != nil {
			t.Fatalf("Open(%s): %v", dsn, err)
		}
		defer b.Close()
		s, err := b.OpenSession(ctx, "o", time.Minute)
		if err == nil {
			_ = b.CloseSession(ctx, s.ID)
		}
		return err
	}
	for _, dsn := range []string{"redis://:secret@" + addr, "redis://default:secret@" + addr} {
		err := openWith(dsn)
		if !errors.Is(err, ErrAuth) || !errors.Is(err, spi.ErrInvalidOption) || spi.Classify(err) != spi.Permanent ||
			!strings.Contains(fmtErr(err), "has none configured") || strings.Contains(fmtErr(err), "secret") {
			t.Errorf("%s at a server without a password: %v; want a permanent ErrAuth saying the server has none configured (and not the password)", dsn, err)
		}
	}
	if err := openWith("redis://" + addr); err != nil {
		t.Errorf("no password at a server without one: %v", err)
	}

	c := goredis.NewClient(&goredis.Options{Addr: addr})
	if err := c.ConfigSet(ctx, "requirepass", "right").Err(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for _, dsn := range []string{"redis://:wrong@" + addr, "redis://nobody:right@" + addr, "redis://" + addr} {
		err := openWith(dsn)
		if !errors.Is(err, ErrAuth) || spi.Classify(err) != spi.Permanent || strings.Contains(fmtErr(err), "wrong") {
			t.Errorf("%s at a server with a password: %v; want a permanent ErrAuth (not showing the password)", strings.Replace(dsn, "wrong", "xxx", 1), err)
		}
	}
	if err := openWith("redis://:right@" + addr); err != nil {
		t.Errorf("the right password: %v", err)
	}
}

// TestInspectPasswordAtServerWithoutOne: Inspect (simba status) with a password for the default
// user at a server that has none configured is refused as OpenSession refuses it: a permanent
// ErrAuth saying the server has none configured. On the old code Inspect listed the server
// unauthenticated (nil error) while OpenSession, with the same DSN, was refused. Without the
// password Inspect works. Read-only on the shared server, which has no password.
func TestInspectPasswordAtServerWithoutOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := testenv.Redis(t)
	inspect := func(dsn string) error {
		t.Helper()
		b, err := Open(dsn, WithLogger(discard))
		if err != nil {
			t.Fatalf("Open(%s): %v", dsn, err)
		}
		defer b.Close()
		_, err = b.Inspect(ctx)
		return err
	}
	err := inspect("redis://:secret@" + addr)
	if !errors.Is(err, ErrAuth) || !errors.Is(err, spi.ErrAccessDenied) || spi.Classify(err) != spi.Permanent ||
		!strings.Contains(fmtErr(err), "has none configured") || strings.Contains(fmtErr(err), "secret") {
		t.Errorf("Inspect with a password at a server without one: %v; want a permanent ErrAuth saying the server has none configured", err)
	}
	if err := inspect("redis://" + addr); err != nil {
		t.Errorf("Inspect without a password: %v", err)
	}
}
