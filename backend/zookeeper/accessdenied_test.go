package zookeeper

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/spi"
)

// firstErr opens a session of b and, if that works, acquires name and joins group; it returns
// the first error (the session closed again).
func firstErr(t *testing.T, b *Backend, name, group string) error {
	t.Helper()
	ctx := testCtx(t)
	s, err := b.OpenSession(ctx, "o", 10*time.Second)
	if err != nil {
		return err
	}
	defer b.CloseSession(ctx, s.ID)
	if _, err := b.Acquire(ctx, s.ID, name); err != nil {
		return err
	}
	_, err = b.Join(ctx, s.ID, group)
	return err
}

// wantZKDenied checks that err is a permanent spi.ErrAccessDenied saying each of says and not
// the password pw.
func wantZKDenied(t *testing.T, what string, err error, pw string, says ...string) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	ok := errors.Is(err, spi.ErrAccessDenied) && errors.Is(err, zk.ErrNoAuth) && spi.Classify(err) == spi.Permanent &&
		(pw == "" || !strings.Contains(msg, pw))
	for _, s := range says {
		ok = ok && strings.Contains(msg, s)
	}
	if !ok {
		t.Errorf("%s: %v; want a permanent spi.ErrAccessDenied (and zk.ErrNoAuth) saying %q", what, err, says)
	}
}

// TestAccessDeniedDigest: Simba's nodes made by a client with digest credentials refuse a
// client with a wrong password (ZooKeeper takes any digest identity: the refusal is the
// nodes' ACL, NoAuth) and one with none; each gets a permanent error matching
// spi.ErrAccessDenied that names the user and the servers and does not show the password. On
// the old code NoAuth was permanent but matched no sentinel.
func TestAccessDeniedDigest(t *testing.T) {
	c := serverChroot(t)
	// Removed with the identity that made Simba's nodes: they grant deleting their children
	// to their creator only.
	dsn, right := c.DSN("", ""), c.DSN("simba:s3cret", "")
	if err := firstErr(t, openBackend(t, right), "guarded", "crew"); err != nil {
		t.Fatalf("the right credentials: %v", err)
	}
	servers := openBackend(t, dsn).cfg.Servers[0]
	wantZKDenied(t, "wrong password", firstErr(t, openBackend(t, strings.Replace(dsn, "zk://", "zk://simba:wr0ng-pw@", 1)), "guarded2", "crew2"),
		"wr0ng-pw", "privilege refused", `user "simba"`, servers)
	wantZKDenied(t, "no credentials", firstErr(t, openBackend(t, dsn), "guarded3", "crew3"), "",
		"privilege refused", "without an identity", servers)
}

// TestAccessDeniedChrootACL: a chroot node whose ACL grants everything to another digest
// identity and only reading to the world refuses a backend without credentials its first
// OpenSession (it cannot create Simba's root under it) with a permanent error matching
// spi.ErrAccessDenied.
func TestAccessDeniedChrootACL(t *testing.T) {
	ch := serverChroot(t)
	ch.Auth("owner:0wner-pw")
	dsn := ch.DSN("", "")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	b := openBackend(t, dsn)
	c := rawClient(t, b, "owner:0wner-pw")
	acl := append(zk.DigestACL(zk.PermAll, "owner", "0wner-pw"), zk.WorldACL(zk.PermRead)...)
	if _, err := c.Create(u.Path, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	wantZKDenied(t, "chroot with another identity's ACL", firstErr(t, b, "x", "y"), "", "privilege refused", u.Path)
}
