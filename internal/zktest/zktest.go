// Package zktest gives tests a chroot of their own on a shared ZooKeeper server and removes it
// when the test ends, so that the shared server keeps nothing per test (CI runs left about 30
// simba-test-* and simba-cli-status-* chroots each: nodes created with a DSN's digest
// identity, which a removal without that identity may not delete, and tests that made a
// chroot with no removal at all).
package zktest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// RemoveWait is how long a Chroot's removal retries a node that still has children: an
// ephemeral node of a session that was not closed (its backend cut off from the server when
// the test ended) goes only when the session expires at the server (the shared server's
// maxSessionTimeout is 60 s).
const RemoveWait = 90 * time.Second

// Chroot is a test's chroot on a shared ZooKeeper.
type Chroot struct {
	// Servers are the addresses (host:port) of the ensemble.
	Servers []string
	// Path is the chroot: /<prefix>-<nanoseconds>.
	Path string

	mu    sync.Mutex
	auths []string // digest identities (user:password) nodes under Path may have been made with
}

// New returns a fresh chroot /<prefix>-<nanoseconds> on servers and registers its removal
// with everything under it when tb ends. Call it before opening the test's backends: cleanups
// run last registered first, so the removal runs after they have closed (and their sessions'
// ephemeral nodes are gone). The test fails if the chroot cannot be removed, naming what is
// left; one already gone (or never made) is fine.
func New(tb testing.TB, servers []string, prefix string) *Chroot {
	tb.Helper()
	c := &Chroot{Servers: servers, Path: fmt.Sprintf("/%s-%d", prefix, time.Now().UnixNano())}
	tb.Cleanup(func() {
		if err := RemoveTree(c.Servers, c.Path, c.identities()...); err != nil {
			tb.Errorf("the test's chroot is left on the shared ZooKeeper: %v", err)
		}
	})
	return c
}

// DSN returns the zk:// DSN of the chroot, with userinfo (user:password, or empty for none)
// and query (without "?", or empty). A userinfo is remembered for the removal: nodes made
// with a digest identity can be deleted only with it.
func (c *Chroot) DSN(userinfo, query string) string {
	dsn := "zk://"
	if userinfo != "" {
		c.Auth(userinfo)
		dsn += userinfo + "@"
	}
	dsn += strings.Join(c.Servers, ",") + c.Path
	if query != "" {
		dsn += "?" + query
	}
	return dsn
}

// Auth adds a digest identity (user:password, as in a DSN) that nodes under the chroot may
// have been made with, for the removal.
func (c *Chroot) Auth(userinfo string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.auths = append(c.auths, userinfo)
}

func (c *Chroot) identities() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.auths...)
}

// RemoveTree deletes the node at path and everything under it on servers, with the digest
// identities auths (user:password) added to the connection. A node that is already gone is
// fine; one that keeps getting children (ephemeral nodes of a session still open) is retried
// for up to RemoveWait. It returns what kept the tree from going.
func RemoveTree(servers []string, path string, auths ...string) error {
	conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	defer conn.Close()
	for _, a := range auths {
		if err := conn.AddAuth("digest", []byte(a)); err != nil {
			return fmt.Errorf("removing %s: adding a digest identity: %w", path, err)
		}
	}
	var remove func(p string) error
	remove = func(p string) error {
		children, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, ch := range children {
			if err := remove(p + "/" + ch); err != nil {
				return err
			}
		}
		if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	}
	deadline := time.Now().Add(RemoveWait)
	for {
		err := remove(path)
		if err == nil || !errors.Is(err, zk.ErrNotEmpty) || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("removing %s: %w", path, err)
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// quiet drops go-zookeeper's log lines.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
