package dsn

import (
	"fmt"
	"net"
	"strings"
	"unicode"
)

// CheckHostName checks the host part of an address (without its port; an IPv6 address with or
// without its brackets): a DNS name (letters, digits, '-', '_' and '.', Unicode letters for an
// internationalised name) or an IP address, an IPv6 one with a zone (fe80::1%eth0). A DSN whose
// host cannot be either never connects, and the driver's error for it ("lookup tcp(localhost:
// no such host") reads as an outage, which a client retries for ever: refusing it here turns a
// typo into an ErrInvalidOption at Open. what names the host in the message ("host",
// "server", "endpoint").
//
// The commonest such typo gets its own hint: go-sql-driver's DSN form (user@tcp(host:port)/db)
// written inside a URL.
func CheckHostName(host, what string) error {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if h == "" {
		return fmt.Errorf("%s %q has no host name", what, host)
	}
	if strings.Contains(h, ":") {
		ip, _, _ := strings.Cut(h, "%") // a zone names an interface: any text
		if net.ParseIP(ip) == nil {
			return fmt.Errorf("%s %q is neither a host name nor an IP address", what, host)
		}
		return nil
	}
	for _, r := range h {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.' {
			continue
		}
		if lower := strings.ToLower(h); strings.HasPrefix(lower, "tcp(") || strings.HasPrefix(lower, "unix(") {
			return fmt.Errorf("%s %q is not a host name: tcp(host:port) is go-sql-driver's own DSN form; in a URL write host:port (scheme://user:password@host:port/…)", what, host)
		}
		return fmt.Errorf("%s %q is not a host name: %q is not allowed in one (a host name has letters, digits, '-', '_' and '.'; an IPv6 address goes in brackets)", what, host, r)
	}
	return nil
}
