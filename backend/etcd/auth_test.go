package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestAuth: on a private member with authentication on, the DSN's user:password logs in and
// the backend works; a wrong password is a permanent error that names no password.
func TestAuth(t *testing.T) {
	testenv.Short(t, "starts a private etcd member")
	c := startCluster(t, 1)
	addr := c.endpoints()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := rawClient(t, []string{addr})
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}

	good := openBackend(t, "etcd://root:rootpw@"+addr+"/auth")
	s, err := good.OpenSession(ctx, "auth", 5*time.Second)
	if err != nil {
		t.Fatalf("OpenSession with the right password: %v", err)
	}
	if r, err := good.Acquire(ctx, s.ID, "x"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}

	bad := openBackend(t, "etcd://root:wrongpw@"+addr+"/auth")
	_, err = bad.OpenSession(ctx, "auth", 5*time.Second)
	if err == nil || spi.Classify(err) != spi.Permanent || !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Fatalf("OpenSession with a wrong password = %v (class %v), want a permanent ErrAuthFailed", err, spi.Classify(err))
	}
	if strings.Contains(err.Error(), "wrongpw") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// TestClassify: what heals by retrying is retryable, what does not is permanent.
func TestClassify(t *testing.T) {
	for _, err := range []error{rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied, rpctypes.ErrTooManyOps, context.Canceled} {
		if c := spi.Classify(classify("op", err)); c != spi.Permanent {
			t.Errorf("%v: %v, want permanent", err, c)
		}
	}
	for _, err := range []error{rpctypes.ErrNoLeader, rpctypes.ErrTimeout, context.DeadlineExceeded, errors.New("connection reset")} {
		e := classify("op", err)
		if c := spi.Classify(e); c != spi.Retryable || !errors.Is(e, spi.ErrUnavailable) {
			t.Errorf("%v: %v (%v), want retryable ErrUnavailable", err, c, e)
		}
	}
}
