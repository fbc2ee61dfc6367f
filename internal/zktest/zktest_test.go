package zktest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/simba-go/simba/internal/testenv"
)

// makeTree creates path/a/b with the digest identity auth owning every node (world: read
// only), as a backend with a user:password DSN creates Simba's nodes.
func makeTree(t *testing.T, servers []string, path, auth string) {
	t.Helper()
	conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.AddAuth("digest", []byte(auth)); err != nil {
		t.Fatal(err)
	}
	acl := append(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead)...)
	for _, p := range []string{path, path + "/a", path + "/a/b"} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil {
			t.Fatalf("creating %s: %v", p, err)
		}
	}
}

func exists(t *testing.T, servers []string, path string) bool {
	t.Helper()
	conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ok, _, err := conn.Exists(path)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestChrootRemovedWithItsIdentity: a chroot whose nodes a DSN's digest identity made is
// removed when its test ends. Without the identity the removal is refused (ErrNoAuth): the
// helpers it replaces removed as nobody and only logged that, and the shared server kept
// such chroots (aclwarn's, backend_test's, release_test's).
func TestChrootRemovedWithItsIdentity(t *testing.T) {
	servers := testenv.ZooKeeper(t)
	var c *Chroot
	t.Run("test", func(t *testing.T) {
		c = New(t, servers, "simba-zktest")
		if dsn, want := c.DSN("u:s3cr3t", "timeout=5s"), "zk://u:s3cr3t@"+strings.Join(servers, ",")+c.Path+"?timeout=5s"; dsn != want {
			t.Errorf("DSN = %q, want %q", dsn, want)
		}
		makeTree(t, servers, c.Path, "u:s3cr3t")
		if err := RemoveTree(servers, c.Path); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("RemoveTree without the identity: %v, want ErrNoAuth", err)
		}
	})
	if exists(t, servers, c.Path) {
		RemoveTree(servers, c.Path, "u:s3cr3t") //nolint:errcheck
		t.Fatalf("%s is left after its test ended", c.Path)
	}
}

// TestRemoveTreeGone: removing a chroot that is not there (never made, or removed by its
// test) succeeds.
func TestRemoveTreeGone(t *testing.T) {
	servers := testenv.ZooKeeper(t)
	if err := RemoveTree(servers, "/simba-zktest-never-made"); err != nil {
		t.Errorf("RemoveTree of a missing chroot: %v", err)
	}
}
