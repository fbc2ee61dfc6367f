package zookeeper

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba/spi"

	dsnutil "github.com/simba-go/simba/internal/dsn"
)

// DefaultTimeout bounds dialing one server and, for calls whose context has no deadline,
// establishing a session.
const DefaultTimeout = 10 * time.Second

// DefaultPort is the ZooKeeper client port used when a host in the DSN has none.
const DefaultPort = 2181

// Config is a parsed DSN. Build one with ParseDSN, or fill it directly and pass it to
// NewFromConfig.
type Config struct {
	// Servers are the ensemble's client addresses as host:port.
	Servers []string
	// Chroot is a path prefix ("" or "/a/b") under which Simba keeps its nodes, like the
	// chroot suffix of a Java client connect string. It is created if missing.
	Chroot string
	// User and Password, when User is set, are added to every session as a ZooKeeper digest
	// identity ("digest", "user:password"). Simba's nodes then carry the ACL
	// creator-all + world-read, so clients without that identity can read but not create,
	// change or delete them. Without a user the nodes are open (world-all).
	User, Password string
	// Timeout bounds dialing one server and establishing a session when the caller's
	// context has no deadline (DefaultTimeout if zero).
	Timeout time.Duration
	// TLS, when set, makes every connection TLS with this configuration (the servers' secure
	// client port, ZooKeeper's secureClientPort). The option WithTLS overrides it. Without
	// TLS, everything crosses the network in clear text, digest credentials included.
	TLS *tls.Config
}

// ParseDSN parses a ZooKeeper DSN:
//
//	zk://[user:password@]host1[:port],host2[:port]/[chroot]?timeout=10s
//	zk+tls://[user:password@]host1:securePort,.../[chroot]?ca=/ca.pem&cert=/c.pem&key=/k.pem
//
// The user information, if present, is the digest identity (see Config.User). The path is
// the chroot (optional). Query parameters: timeout, a Go duration (see Config.Timeout); and,
// with the scheme zk+tls (TLS to the servers' secure client port, Config.TLS), ca (a PEM file
// of the certificate authorities to trust instead of the system's), cert and key (PEM files of
// a client certificate and its key, which ZooKeeper's default ssl.clientAuth=need requires)
// and servername (the name to verify in the servers' certificates instead of each address's
// host). The files are read here. Errors wrap spi.ErrInvalidOption and are reported before
// any network I/O.
func ParseDSN(dsn string) (Config, error) {
	var cfg Config
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, dsnutil.Errorf(spi.ErrInvalidOption, "zookeeper DSN", dsn, format, args...)
	}
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok || !dsnutil.ValidScheme(scheme) {
		return bad("want zk://host:port[,host:port...][/chroot][?timeout=...]")
	}
	useTLS := strings.EqualFold(scheme, "zk+tls")
	if !useTLS && !strings.EqualFold(scheme, "zk") {
		return bad("scheme %q is not zk or zk+tls", scheme)
	}
	// Split off the query, then the path, then the user information. A host list with
	// commas is not a valid URL authority, so this is done by hand.
	var query string
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
	}
	hosts, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hosts, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(hosts, '@'); i >= 0 {
		userinfo := hosts[:i]
		hosts = hosts[i+1:]
		u, p, ok := strings.Cut(userinfo, ":")
		var err error
		if cfg.User, err = url.PathUnescape(u); err != nil || cfg.User == "" {
			return bad("bad user in user:password@")
		}
		if !ok {
			return bad("user without password; want user:password@")
		}
		if cfg.Password, err = url.PathUnescape(p); err != nil {
			return bad("bad password in user:password@")
		}
	}
	if hosts == "" {
		return bad("no servers")
	}
	for _, h := range strings.Split(hosts, ",") {
		addr, err := normaliseHost(h)
		if err != nil {
			return bad("%v", err)
		}
		cfg.Servers = append(cfg.Servers, addr)
	}
	if path != "" && path != "/" {
		p, err := url.PathUnescape(path)
		if err != nil {
			return bad("bad chroot: %v", err)
		}
		if err := validateChroot(p); err != nil {
			return bad("%v", err)
		}
		cfg.Chroot = p
	}
	if query != "" {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return bad("bad query: %v", err)
		}
		var ca, cert, key, serverName string
		for k, v := range vals {
			last := v[len(v)-1]
			switch k {
			case "timeout":
				d, err := time.ParseDuration(last)
				if err != nil || d <= 0 {
					return bad("timeout %q is not a positive duration", last)
				}
				cfg.Timeout = d
			case "ca", "cert", "key", "servername":
				if !useTLS {
					return bad("parameter %q needs the scheme zk+tls", k)
				}
				if last == "" {
					return bad("parameter %q is empty", k)
				}
				switch k {
				case "ca":
					ca = last
				case "cert":
					cert = last
				case "key":
					key = last
				default:
					serverName = last
				}
			default:
				return bad("unknown parameter %q (known: timeout; with zk+tls: ca, cert, key, servername)", k)
			}
		}
		if useTLS {
			tc, err := tlsConfig(ca, cert, key, serverName)
			if err != nil {
				return bad("%v", err)
			}
			cfg.TLS = tc
		}
	}
	if useTLS && cfg.TLS == nil {
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return cfg, nil
}

// tlsConfig builds the TLS configuration of a zk+tls DSN from its files.
func tlsConfig(ca, cert, key, serverName string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca: %s holds no PEM certificate", ca)
		}
		tc.RootCAs = pool
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("cert and key go together")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %v", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// normaliseHost checks host[:port] and adds the default port.
func normaliseHost(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("empty server in host list")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// no port (or a bare IPv6 address in brackets)
		host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), strconv.Itoa(DefaultPort)
		if strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && !strings.HasPrefix(h, "[")) {
			return "", fmt.Errorf("bad server %q", h)
		}
	}
	if host == "" {
		return "", fmt.Errorf("server %q has no host", h)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("server %q has a bad port", h)
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), nil
}

// validateChroot checks an absolute ZooKeeper path without a trailing slash.
func validateChroot(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("chroot %q must start with /", p)
	}
	if strings.HasSuffix(p, "/") {
		return fmt.Errorf("chroot %q must not end with /", p)
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return fmt.Errorf("chroot %q is inside ZooKeeper's reserved /zookeeper", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch {
		case seg == "":
			return fmt.Errorf("chroot %q has an empty segment", p)
		case seg == "." || seg == "..":
			return fmt.Errorf("chroot %q has a relative segment", p)
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7f || (r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) {
				return fmt.Errorf("chroot %q has a character ZooKeeper rejects (%U)", p, r)
			}
		}
	}
	return nil
}

// validate checks a Config filled by hand.
func (c Config) validate() error {
	if len(c.Servers) == 0 {
		return fmt.Errorf("%w: zookeeper: no servers", spi.ErrInvalidOption)
	}
	for _, s := range c.Servers {
		if _, err := normaliseHost(s); err != nil {
			return fmt.Errorf("%w: zookeeper: %v", spi.ErrInvalidOption, err)
		}
	}
	if c.Chroot != "" {
		if err := validateChroot(c.Chroot); err != nil {
			return fmt.Errorf("%w: zookeeper: %v", spi.ErrInvalidOption, err)
		}
	}
	if c.User == "" && c.Password != "" {
		return fmt.Errorf("%w: zookeeper: password without user", spi.ErrInvalidOption)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("%w: zookeeper: negative timeout", spi.ErrInvalidOption)
	}
	return nil
}
