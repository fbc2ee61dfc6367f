package dsn

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:secret@host:5432/db?sslmode=disable", "postgres://u:xxxxx@host:5432/db?sslmode=disable"},
		{"postgres://u@host/db", "postgres://u@host/db"},
		{"postgres://host/db", "postgres://host/db"},
		{"mysql://root:p/ss@tcp(h:3306)/db", "mysql://root:xxxxx@tcp(h:3306)/db"},
		{"redis+cluster://app:se@cret@h1:7001,h2:7002/", "redis+cluster://app:xxxxx@h1:7001,h2:7002/"},
		{"zk://simba:pw@h1:2181,h2:2181/chroot?timeout=5s", "zk://simba:xxxxx@h1:2181,h2:2181/chroot?timeout=5s"},
		{"rediss://:onlypass@host:6380/0", "rediss://:xxxxx@host:6380/0"},
		{"sqlite:///tmp/a@b.db", "sqlite:///tmp/a@b.db"},
		{"sqlite://simba.db", "sqlite://simba.db"},
		{"no scheme at all", "no scheme at all"},
		{"redis://h/?q=a@b", "redis://h/?q=a@b"},
		{"redis://u@h", "redis://u@h"},
	} {
		got := Redact(c.in)
		if got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, secret := range []string{"secret", "p/ss", "se@cret", "pw", "onlypass"} {
			if strings.Contains(c.in, ":"+secret+"@") && strings.Contains(got, secret) {
				t.Errorf("Redact(%q) = %q leaks %q", c.in, got, secret)
			}
		}
	}
}
