package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestAccessDenied: on a private member with authentication on, a wrong password, an unknown
// user and no credentials fail OpenSession with a permanent error matching spi.ErrAccessDenied
// that says authentication (naming the user and the endpoint, never the password); a user
// whose role has readwrite on another prefix only fails it with one that says privilege. A
// user with readwrite on the backend's prefix opens a session and acquires. On the old code
// these were permanent but matched no common sentinel.
func TestAccessDenied(t *testing.T) {
	testenv.Short(t, "starts a private etcd member")
	c := startCluster(t, 1)
	addr := c.endpoints()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := rawClient(t, []string{addr})
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "app"); return err },
		func() error { _, err := admin.RoleGrantPermission(ctx, "app", "/app/", "/app0", 2); return err }, // readwrite
		func() error { _, err := admin.RoleAdd(ctx, "other"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "other", "/elsewhere/", "/elsewhere0", 2)
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "app", "apppw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "app", "app"); return err },
		func() error { _, err := admin.UserAdd(ctx, "stranger", "strangerpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "stranger", "other"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	openErr := func(dsn string) error {
		t.Helper()
		b := openBackend(t, dsn)
		s, err := b.OpenSession(ctx, "denied", 5*time.Second)
		if err != nil {
			return err
		}
		defer b.CloseSession(ctx, s.ID)
		r, err := b.Acquire(ctx, s.ID, "x")
		if err == nil && r.Kind != spi.Granted {
			t.Errorf("Acquire = %+v; want granted", r)
		}
		return err
	}
	for _, tc := range []struct {
		what, dsn string
		says      []string
	}{
		{"wrong password", "etcd://app:bad-secret@" + addr + "/app", []string{"authentication refused", `user "app"`, addr}},
		{"unknown user", "etcd://nobody:apppw@" + addr + "/app", []string{"authentication refused", `user "nobody"`}},
		{"no credentials", "etcd://" + addr + "/app", []string{"without credentials"}},
		{"no permission on the prefix", "etcd://stranger:strangerpw@" + addr + "/app", []string{"privilege refused", `user "stranger"`, addr, "grant-permission"}},
	} {
		err := openErr(tc.dsn)
		t.Logf("%s: %v", tc.what, err)
		ok := errors.Is(err, spi.ErrAccessDenied) && spi.Classify(err) == spi.Permanent && !strings.Contains(err.Error(), "bad-secret")
		for _, s := range tc.says {
			ok = ok && strings.Contains(err.Error(), s)
		}
		if !ok {
			t.Errorf("%s: %v; want a permanent spi.ErrAccessDenied saying %q", tc.what, err, tc.says)
		}
	}
	if err := openErr("etcd://app:apppw@" + addr + "/app"); err != nil {
		t.Errorf("a user with readwrite on the prefix: %v", err)
	}
}
