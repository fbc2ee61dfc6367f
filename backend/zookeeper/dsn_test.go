package zookeeper

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

func TestParseDSN(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		want Config
	}{
		{"zk://127.0.0.1:2181", Config{Servers: []string{"127.0.0.1:2181"}}},
		{"ZK://127.0.0.1:2181", Config{Servers: []string{"127.0.0.1:2181"}}},
		{"zk://h1,h2:2182/", Config{Servers: []string{"h1:2181", "h2:2182"}}},
		{"zk://h1:2181,h2:2181,h3:2181/apps/simba?timeout=3s", Config{
			Servers: []string{"h1:2181", "h2:2181", "h3:2181"}, Chroot: "/apps/simba", Timeout: 3 * time.Second}},
		{"zk://simba:s%40cret:x@h1/c", Config{Servers: []string{"h1:2181"}, Chroot: "/c", User: "simba", Password: "s@cret:x"}},
		{"zk://[::1]:2181,[::1]", Config{Servers: []string{"[::1]:2181", "[::1]:2181"}}},
		{"zk://h/c?acl=open", Config{Servers: []string{"h:2181"}, Chroot: "/c", OpenACL: true}},
		{"zk://h?tickTime=200ms", Config{Servers: []string{"h:2181"}, TickTime: 200 * time.Millisecond}},
		{"zk://h/c?tickTime=2s&timeout=3s", Config{Servers: []string{"h:2181"}, Chroot: "/c", TickTime: 2 * time.Second, Timeout: 3 * time.Second}},
		{"zk://h?tickTime=2000", Config{Servers: []string{"h:2181"}, TickTime: 2 * time.Second}}, // zoo.cfg's form: milliseconds
		{"zk://h?tickTime=1", Config{Servers: []string{"h:2181"}, TickTime: time.Millisecond}},
		{"zk://h?tickTime=1.5s", Config{Servers: []string{"h:2181"}, TickTime: 1500 * time.Millisecond}},
		{"zk://h?tickTime=3s&tickTime=200ms", Config{Servers: []string{"h:2181"}, TickTime: 200 * time.Millisecond}}, // the last wins, as for timeout
	} {
		got, err := ParseDSN(tc.dsn)
		if err != nil {
			t.Errorf("ParseDSN(%q): %v", tc.dsn, err)
			continue
		}
		if !slices.Equal(got.Servers, tc.want.Servers) || got.Chroot != tc.want.Chroot ||
			got.User != tc.want.User || got.Password != tc.want.Password || got.Timeout != tc.want.Timeout ||
			got.TickTime != tc.want.TickTime {
			t.Errorf("ParseDSN(%q) = %+v, want %+v", tc.dsn, got, tc.want)
		}
	}
}

func TestParseDSNRejects(t *testing.T) {
	for _, dsn := range []string{
		"",
		"127.0.0.1:2181",
		"redis://h:6379",
		"zk://",
		"zk:///chroot",
		"zk://h1,,h2",
		"zk://h:0",
		"zk://h:99999",
		"zk://h:port",
		"zk://h/a//b",
		"zk://h/a/",
		"zk://h/a/../b",
		"zk://h/zookeeper",
		"zk://h/zookeeper/x",
		"zk://h?timeout=soon",
		"zk://h?timeout=-1s",
		"zk://h?retries=3",
		"zk://h?tickTime=",
		"zk://h?tickTime=0",
		"zk://h?tickTime=0s",
		"zk://h?tickTime=-200ms",
		"zk://h?tickTime=-2000",
		"zk://h?tickTime=soon",
		"zk://h?tickTime=2000.5",
		"zk://h?tickTime=1500us", // not a whole number of milliseconds
		"zk://h?tickTime=99999999999999999999",
		"zk://h?ticktime=2000", // the parameter is tickTime, as in zoo.cfg
		"zk://user@h",
		"zk://user:@h", // an empty password: a digest anyone can compute
		"zk://:pw@h",
		"zk://h/a%2Fb", // a node name cannot hold a /
		"zk://h/a%2fb/c",
		"zk://h?acl=closed", // acl's one value is open
		"zk://h?acl=",
		"zk://u:pw@h?acl=open",     // credentials: the nodes are not open
		"zk://h?acl=open&acl=auth", // the last wins, as for timeout
	} {
		_, err := ParseDSN(dsn)
		if !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("ParseDSN(%q) = %v, want spi.ErrInvalidOption", dsn, err)
		}
		if spi.Classify(err) != spi.Permanent {
			t.Errorf("ParseDSN(%q) error is not permanent", dsn)
		}
	}
}

func TestParseDSNHidesPassword(t *testing.T) {
	_, err := ParseDSN("zk://simba:topsecret@h/a//b")
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("error %v should not contain the password", err)
	}
}

func TestNewFromConfigValidates(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Servers: []string{"h:0"}},
		{Servers: []string{"h"}, Chroot: "rel"},
		{Servers: []string{"h"}, Password: "pw"},
		{Servers: []string{"h"}, User: "simba"},
		{Servers: []string{"h"}, Timeout: -time.Second},
		{Servers: []string{"h"}, TickTime: -time.Millisecond},
		{Servers: []string{"h"}, TickTime: 200*time.Millisecond + time.Microsecond},
		{Servers: []string{"h"}, User: "simba", Password: "pw", OpenACL: true},
	} {
		if _, err := NewFromConfig(cfg); !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("NewFromConfig(%+v) = %v, want spi.ErrInvalidOption", cfg, err)
		}
	}
}

func TestLayout(t *testing.T) {
	l := layout{chroot: "/apps/x"}
	if got := l.lease("a.1"); got != "/apps/x/simba/leases/a.1" {
		t.Errorf("lease path = %q", got)
	}
	if n, ok := l.leaseName(l.lease("a.1")); !ok || n != "a.1" {
		t.Errorf("leaseName = %q, %v", n, ok)
	}
	for _, p := range []string{"/apps/x/simba/leases", "/apps/x/simba/leases/", "/simba/leases/a", l.member("g", "s")} {
		if n, ok := l.leaseName(p); ok {
			t.Errorf("leaseName(%q) = %q, want none", p, n)
		}
	}
	if g, ok := l.groupName(l.group("g1")); !ok || g != "g1" {
		t.Errorf("groupName = %q, %v", g, ok)
	}
	for _, p := range []string{"/apps/x/simba/groups", "/apps/x/simba/groups/", l.member("g1", "s"), "/apps/xy/simba/groups/g1", "/apps/x/simba/leases/g1"} {
		if g, ok := l.groupName(p); ok {
			t.Errorf("groupName(%q) = %q, want none", p, g)
		}
	}
	// The parsers are the generated inverses of the builders (wire.Parse*Path).
	if g, s, ok := l.memberOf(l.member("g1", "00000000000000ab")); !ok || g != "g1" || s != "00000000000000ab" {
		t.Errorf("memberOf = %q, %q, %v", g, s, ok)
	}
	for _, p := range []string{l.group("g1"), l.group("g1") + "/", l.member("g1", "s") + "/x", "/apps/x/simba/groups//s", l.lease("a")} {
		if g, s, ok := l.memberOf(p); ok {
			t.Errorf("memberOf(%q) = %q, %q, want none", p, g, s)
		}
	}
	// Waiter nodes: ZooKeeper appends a 10-digit sequence number to the created path.
	if n, s, seq, ok := l.waiterOf(l.waiter("a:b", "00000000000000ab") + "0000000042"); !ok || n != "a:b" || s != "00000000000000ab" || seq != 42 {
		t.Errorf("waiterOf = %q, %q, %d, %v", n, s, seq, ok)
	}
	for _, p := range []string{l.waiter("a", "00000000000000ab"), l.waiter("a", "00000000000000ab") + "42", l.waiter("a", "") + "0000000042", l.queue("a"), l.lease("a")} {
		if n, s, seq, ok := l.waiterOf(p); ok {
			t.Errorf("waiterOf(%q) = %q, %q, %d, want none", p, n, s, seq)
		}
	}
	root := layout{}
	if n, ok := root.leaseName(root.lease("a:b")); !ok || n != "a:b" {
		t.Errorf("leaseName without chroot = %q, %v", n, ok)
	}
	var paths []string
	for _, n := range l.persistent(newACLs(true)) {
		paths = append(paths, n.path)
	}
	want := []string{"/apps", "/apps/x", "/apps/x/simba", "/apps/x/simba/leases", "/apps/x/simba/groups", "/apps/x/simba/waiters"}
	if !slices.Equal(paths, want) {
		t.Errorf("persistent nodes = %v, want %v", paths, want)
	}
}

func TestACLs(t *testing.T) {
	open := newACLs(false)
	if len(open.member) != 1 || open.member[0].Scheme != "world" || open.member[0].Perms != 31 {
		t.Errorf("ACL without credentials = %+v, want world:anyone all", open.member)
	}
	auth := newACLs(true)
	if len(auth.member) != 2 || auth.member[0].Scheme != "auth" || auth.member[0].Perms != 31 ||
		auth.member[1].Scheme != "world" || auth.member[1].Perms != 1 {
		t.Errorf("ACL with credentials = %+v, want auth all + world read", auth.member)
	}
	// A lease node's creator entry is the session's own identity (see session.leaseACL); the
	// world may read it, with or without credentials.
	for _, a := range []acls{open, auth} {
		if len(a.leaseWorld) != 1 || a.leaseWorld[0].Scheme != "world" || a.leaseWorld[0].Perms != 1 {
			t.Errorf("lease world entry = %+v, want world read", a.leaseWorld)
		}
	}
}

func TestOpenSessionRejectsBadInputBeforeIO(t *testing.T) {
	b, err := New("zk://127.0.0.1:1") // nothing listens: any I/O would fail differently
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	if _, err := b.OpenSession(ctx, strings.Repeat("o", MaxOwnerLen+1), time.Second); !errors.Is(err, spi.ErrInvalidOption) {
		t.Errorf("long owner: %v", err)
	}
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
		if _, err := b.OpenSession(ctx, "o", ttl); !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("ttl %v: %v", ttl, err)
		}
	}
	for _, name := range []string{"", ".", "..", "a/b", strings.Repeat("n", 129)} {
		if _, err := b.Acquire(ctx, "0000000000000001", name); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Acquire(%q): %v", name, err)
		}
		if err := b.Release(ctx, "0000000000000001", name, 1); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Release(%q): %v", name, err)
		}
		if _, err := b.Join(ctx, "0000000000000001", name); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Join(%q): %v", name, err)
		}
		if _, err := b.Members(ctx, name); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("Members(%q): %v", name, err)
		}
		if _, err := b.KeepAlive(ctx, "0000000000000001", []string{name}, nil); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("KeepAlive(%q): %v", name, err)
		}
	}
	// A session this backend does not know is expired, without I/O.
	if r, err := b.Acquire(ctx, "0000000000000001", "x"); err != nil || r.Kind != spi.SessionExpired {
		t.Errorf("Acquire by an unknown session = %+v, %v", r, err)
	}
	b.Close()
	if _, err := b.OpenSession(ctx, "o", time.Second); !errors.Is(err, spi.ErrBackendClosed) {
		t.Errorf("OpenSession after Close: %v", err)
	}
}

// TestParseDSNTLS: zk+tls gives a TLS configuration from the DSN's files; TLS parameters need
// the zk+tls scheme; unreadable files are reported before any network I/O.
func TestParseDSNTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "dsn CA")
	cert, key := ca.issue(t, "client")
	caFile, certFile, keyFile := writeFile(t, dir, "ca.pem", ca.pem), writeFile(t, dir, "c.pem", cert), writeFile(t, dir, "k.pem", key)
	cfg, err := ParseDSN("zk+tls://u:p@h1:2281,h2/app?ca=" + caFile + "&cert=" + certFile + "&key=" + keyFile + "&servername=zk.internal&timeout=3s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil || cfg.TLS.RootCAs == nil || len(cfg.TLS.Certificates) != 1 || cfg.TLS.ServerName != "zk.internal" ||
		cfg.Timeout != 3*time.Second || cfg.User != "u" || cfg.Chroot != "/app" || len(cfg.Servers) != 2 {
		t.Fatalf("cfg = %+v", cfg)
	}
	if cfg, err := ParseDSN("ZK+TLS://h"); err != nil || cfg.TLS == nil || cfg.TLS.RootCAs != nil {
		t.Fatalf("bare zk+tls: %+v, %v; want TLS with the system roots", cfg, err)
	}
	if cfg, err := ParseDSN("zk://h"); err != nil || cfg.TLS != nil {
		t.Fatalf("zk: %+v, %v; want no TLS", cfg, err)
	}
	for _, dsn := range []string{
		"zk://h?ca=" + caFile,                   // TLS parameter without zk+tls
		"zk+tls://h?ca=" + dir + "/missing.pem", // unreadable
		"zk+tls://h?ca=" + keyFile,              // no certificate in it
		"zk+tls://h?cert=" + certFile,           // cert without key
		"zk+tls://h?cert=" + certFile + "&key=" + caFile,
		"zk+tls://h?ca=",
		"zks://h",
	} {
		if _, err := ParseDSN(dsn); !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("ParseDSN(%q) = %v; want ErrInvalidOption", dsn, err)
		}
	}
}

// TestParseDSNTickTimeErrors: a bad tickTime is reported with the value as given and what is
// wrong with it, and the error wraps spi.ErrInvalidOption.
func TestParseDSNTickTimeErrors(t *testing.T) {
	for dsn, want := range map[string]string{
		"zk://u:secret@h?tickTime=soon":   `tickTime "soon" is neither a Go duration (200ms, 2s) nor a number of milliseconds (2000)`,
		"zk://u:secret@h?tickTime=0":      `tickTime "0": must be positive`,
		"zk://u:secret@h?tickTime=-2000":  `tickTime "-2000": must be positive`,
		"zk://u:secret@h?tickTime=1500us": `tickTime "1500us": must be a whole number of milliseconds`,
	} {
		_, err := ParseDSN(dsn)
		if !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseDSN(%q) = %v; want spi.ErrInvalidOption with %q, without the password", dsn, err, want)
		}
	}
}

// TestSessionTimeoutFor: with a tickTime a session asks for its TTL less one tick; a tick of
// half the TTL or more is refused before any I/O; without one it asks for the TTL.
func TestSessionTimeoutFor(t *testing.T) {
	plain, err := NewFromConfig(Config{Servers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if got, err := plain.sessionTimeoutFor(2 * time.Second); err != nil || got != 2*time.Second {
		t.Errorf("without tickTime: %v, %v; want 2s", got, err)
	}
	// ZooKeeper counts a session timeout in int32 milliseconds: CheckTTL refuses a TTL outside.
	for _, ttl := range []time.Duration{500 * time.Microsecond, 1 << 31 * time.Millisecond} {
		if err := plain.CheckTTL(ttl); !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), "outside [1ms, ") {
			t.Errorf("without tickTime: CheckTTL(%v) = %v; want spi.ErrInvalidOption naming the range", ttl, err)
		}
	}
	b, err := New("zk://127.0.0.1:1?tickTime=200ms") // nothing listens: any I/O would fail differently
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for ttl, want := range map[time.Duration]time.Duration{
		2 * time.Second:        1800 * time.Millisecond,
		15 * time.Second:       14800 * time.Millisecond,
		401 * time.Millisecond: 201 * time.Millisecond,
	} {
		if got, err := b.sessionTimeoutFor(ttl); err != nil || got != want {
			t.Errorf("sessionTimeoutFor(%v) = %v, %v; want %v", ttl, got, err, want)
		}
		if err := b.CheckTTL(ttl); err != nil {
			t.Errorf("CheckTTL(%v) = %v; want nil", ttl, err)
		}
	}
	for _, ttl := range []time.Duration{400 * time.Millisecond, 300 * time.Millisecond, time.Millisecond} {
		if _, err := b.sessionTimeoutFor(ttl); !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("sessionTimeoutFor(%v) = %v; want spi.ErrInvalidOption", ttl, err)
		}
		// simba.New asks CheckTTL (spi.TTLChecker) and refuses the TTL up front, with a fix.
		if err := b.CheckTTL(ttl); !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), "must be less than half the ttl") ||
			!strings.Contains(err.Error(), "lower the DSN's tickTime or raise the TTL") {
			t.Errorf("CheckTTL(%v) = %v; want spi.ErrInvalidOption naming the rule and the fix", ttl, err)
		}
		_, err := b.OpenSession(t.Context(), "o", ttl)
		if !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), "less than half the ttl") {
			t.Errorf("OpenSession(ttl %v) = %v; want spi.ErrInvalidOption before any I/O", ttl, err)
		}
	}
}

// TestParseDSNChrootEncodedSlash: a percent-encoded slash in the chroot is refused with a
// message that says why and what to write instead; other percent-encodings are decoded.
func TestParseDSNChrootEncodedSlash(t *testing.T) {
	_, err := ParseDSN("zk://h/a%2Fb")
	if !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), `chroot "/a%2Fb" holds a percent-encoded / (%2F)`) ||
		!strings.Contains(err.Error(), "(/a/b)") {
		t.Errorf("ParseDSN(zk://h/a%%2Fb) = %v, want ErrInvalidOption naming the chroot and /a/b", err)
	}
	cfg, err := ParseDSN("zk://h/a%20b/c")
	if err != nil || cfg.Chroot != "/a b/c" {
		t.Errorf("ParseDSN(zk://h/a%%20b/c) = %q, %v; want chroot /a b/c", cfg.Chroot, err)
	}
}
