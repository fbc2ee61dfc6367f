package etcd

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

func TestParseDSN(t *testing.T) {
	for _, c := range []struct {
		dsn       string
		endpoints []string
		prefix    string
		user, pw  string
		timeout   time.Duration
		tls       bool
	}{
		{"etcd://h", []string{"h:2379"}, "", "", "", 0, false},
		{"etcd://h1:1,h2,[::1]:3/apps/simba", []string{"h1:1", "h2:2379", "[::1]:3"}, "/apps/simba", "", "", 0, false},
		{"ETCD://u:p%40ss@h:2379/?dial_timeout=2s", []string{"h:2379"}, "", "u", "p@ss", 2 * time.Second, false},
		{"etcd+tls://h:2379/x?servername=etcd.local", []string{"h:2379"}, "/x", "", "", 0, true},
	} {
		cfg, err := ParseDSN(c.dsn)
		if err != nil {
			t.Errorf("ParseDSN(%q): %v", c.dsn, err)
			continue
		}
		if !slices.Equal(cfg.Endpoints, c.endpoints) || cfg.Prefix != c.prefix || cfg.User != c.user || cfg.Password != c.pw || cfg.DialTimeout != c.timeout || (cfg.TLS != nil) != c.tls {
			t.Errorf("ParseDSN(%q) = %+v", c.dsn, cfg)
		}
	}
	for _, c := range []struct{ dsn, want string }{
		{"http://h:2379", "not etcd"},
		{"etcd://", "no endpoints"},
		{"etcd://h:99999", "bad port"},
		{"etcd://u@h", "user without password"},
		{"etcd://h/a/", "not end with /"},
		{"etcd://h/a//b", "empty or relative segment"},
		{"etcd://h?ca=/x.pem", "needs the scheme etcd+tls"},
		{"etcd://h?dial_timeout=-1s", "not a positive duration"},
		{"etcd+tls://h?cert=/c.pem", "cert and key go together"},
		{"etcd://u:secret@h?x=1", "unknown parameter"},
	} {
		_, err := ParseDSN(c.dsn)
		if !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseDSN(%q) = %v, want ErrInvalidOption saying %q", c.dsn, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseDSN(%q) shows the password: %v", c.dsn, err)
		}
	}
}

// TestSessionIDs: a session id is the lease id in 16 lowercase hex digits and parses back;
// anything else is no session.
func TestSessionIDs(t *testing.T) {
	for _, id := range []int64{1, 0x694d9a2b3c4d5e6f, -1} {
		sid := sessionID(clientLease(id))
		if len(sid) != 16 || strings.ToLower(string(sid)) != string(sid) {
			t.Errorf("sessionID(%d) = %q", id, sid)
		}
		if back, ok := leaseOf(sid); !ok || int64(back) != id {
			t.Errorf("leaseOf(%q) = %d, %v; want %d", sid, back, ok, id)
		}
	}
	for _, sid := range []spi.SessionID{"", "0000000000000000", "ABCDEF0123456789", "123", spi.SessionID(strings.Repeat("a", 32))} {
		if _, ok := leaseOf(sid); ok {
			t.Errorf("leaseOf(%q) accepted", sid)
		}
	}
}
