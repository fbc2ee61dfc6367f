package dsn

import (
	"strings"
	"testing"
)

func TestCheckHostName(t *testing.T) {
	for _, h := range []string{"localhost", "db_1", "db-1.internal", "10.0.0.1", "::1", "[::1]", "fe80::1%eth0", "bücher.example", "a"} {
		if err := CheckHostName(h, "host"); err != nil {
			t.Errorf("CheckHostName(%q) = %v, want nil", h, err)
		}
	}
	for h, want := range map[string]string{
		"":              "no host name",
		"[]":            "no host name",
		"tcp(localhost": "go-sql-driver's own DSN form",
		"unix(/tmp/s":   "go-sql-driver's own DSN form",
		"db host":       `' ' is not allowed`,
		"h<1>":          `'<' is not allowed`,
		"1:2:zz":        "neither a host name nor an IP address",
		"a/b":           `'/' is not allowed`,
	} {
		err := CheckHostName(h, "host")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckHostName(%q) = %v, want an error saying %q", h, err, want)
		}
	}
}
