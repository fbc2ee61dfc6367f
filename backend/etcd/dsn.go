package etcd

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

	"github.com/simba-go/simba/generated/wire"
	dsnutil "github.com/simba-go/simba/internal/dsn"
	"github.com/simba-go/simba/spi"
)

// DefaultPort is etcd's client port, used when a host in the DSN has none.
const DefaultPort = 2379

// DefaultDialTimeout bounds establishing the first connection (Config.DialTimeout).
const DefaultDialTimeout = 5 * time.Second

// Config is a parsed DSN. Build one with ParseDSN, or fill it directly and pass it to
// NewFromConfig.
type Config struct {
	// Endpoints are the cluster members' client addresses as host:port.
	Endpoints []string
	// Prefix is the key prefix under which Simba keeps its keys (wire.EtcdPrefix, "/simba", if
	// empty). Deployments that share a cluster but must not share leases use different ones.
	Prefix string
	// User and Password, when User is set, authenticate with etcd's user authentication.
	User, Password string
	// DialTimeout bounds establishing the first connection (DefaultDialTimeout if zero).
	DialTimeout time.Duration
	// TLS, when set, makes every connection TLS with this configuration (scheme etcd+tls).
	TLS *tls.Config
}

// ParseDSN parses an etcd DSN:
//
//	etcd://[user:password@]host1[:port],host2[:port]/[prefix]?dial_timeout=5s
//	etcd+tls://[user:password@]host1:port,.../[prefix]?ca=/ca.pem&cert=/c.pem&key=/k.pem
//
// The user information, if present, logs in with etcd's authentication (Config.User). The
// path is the key prefix (Config.Prefix; /simba if absent). Query parameters: dial_timeout, a
// Go duration; and, with etcd+tls, ca (a PEM file of the authorities to trust instead of the
// system's), cert and key (a client certificate and its key, for --client-cert-auth) and
// servername (the name to verify in the certificates). The files are read here. Errors wrap
// spi.ErrInvalidOption and are reported before any network I/O.
func ParseDSN(dsn string) (Config, error) {
	var cfg Config
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, dsnutil.Errorf(spi.ErrInvalidOption, "etcd DSN", dsn, format, args...)
	}
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok || !dsnutil.ValidScheme(scheme) {
		return bad("want etcd://host:port[,host:port...][/prefix][?dial_timeout=...]")
	}
	useTLS := strings.EqualFold(scheme, "etcd+tls")
	if !useTLS && !strings.EqualFold(scheme, "etcd") {
		return bad("scheme %q is not etcd or etcd+tls", scheme)
	}
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
		return bad("no endpoints")
	}
	for _, h := range strings.Split(hosts, ",") {
		addr, err := normaliseHost(h)
		if err != nil {
			return bad("%v", err)
		}
		cfg.Endpoints = append(cfg.Endpoints, addr)
	}
	if path != "" && path != "/" {
		p, err := url.PathUnescape(path)
		if err != nil {
			return bad("bad prefix: %v", err)
		}
		if err := validatePrefix(p); err != nil {
			return bad("%v", err)
		}
		cfg.Prefix = p
	}
	var ca, cert, key, serverName string
	if query != "" {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return bad("bad query: %v", err)
		}
		for k, v := range vals {
			last := v[len(v)-1]
			switch k {
			case "dial_timeout":
				d, err := time.ParseDuration(last)
				if err != nil || d <= 0 {
					return bad("dial_timeout %q is not a positive duration", last)
				}
				cfg.DialTimeout = d
			case "ca", "cert", "key", "servername":
				if !useTLS {
					return bad("parameter %q needs the scheme etcd+tls", k)
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
				return bad("unknown parameter %q (known: dial_timeout; with etcd+tls: ca, cert, key, servername)", k)
			}
		}
	}
	if useTLS {
		tc, err := tlsConfig(ca, cert, key, serverName)
		if err != nil {
			return bad("%v", err)
		}
		cfg.TLS = tc
	}
	return cfg, nil
}

// tlsConfig builds the TLS configuration of an etcd+tls DSN from its files.
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
		return "", fmt.Errorf("empty endpoint in host list")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), strconv.Itoa(DefaultPort)
		if strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && !strings.HasPrefix(h, "[")) {
			return "", fmt.Errorf("bad endpoint %q", h)
		}
	}
	if host == "" {
		return "", fmt.Errorf("endpoint %q has no host", h)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("endpoint %q has a bad port", h)
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), nil
}

// validatePrefix checks a key prefix: absolute, no trailing slash, no empty or relative
// segment, printable.
func validatePrefix(p string) error {
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return fmt.Errorf("prefix %q must start with / and not end with /", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("prefix %q has an empty or relative segment", p)
		}
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("prefix %q has a control character", p)
		}
	}
	return nil
}

// prefixOf returns cfg's prefix or the default.
func prefixOf(p string) string {
	if p == "" {
		return wire.EtcdPrefix
	}
	return p
}
