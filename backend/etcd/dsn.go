package etcd

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/simba-go/simba/generated/wire"
	dsnutil "github.com/simba-go/simba/internal/dsn"
	"github.com/simba-go/simba/spi"
)

// DefaultPort is etcd's client port, used when a host in the DSN has none.
const DefaultPort = 2379

// DefaultDialTimeout bounds establishing the first connection and each connection attempt
// (Config.DialTimeout).
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
	// DialTimeout bounds establishing the first connection and, for the backend's own client,
	// each attempt to connect to a member (gRPC's MinConnectTimeout; DefaultDialTimeout if
	// zero).
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
// path is the key prefix (Config.Prefix; left empty if absent, which the backend takes as
// /simba). Query parameters: dial_timeout, a Go duration; and, with etcd+tls, ca (a PEM file
// of the authorities to trust instead of the system's), cert and key (a client certificate and
// its key, for --client-cert-auth) and servername (the name to verify in the certificates).
// The files are read here. Errors wrap spi.ErrInvalidOption and are reported before any
// network I/O.
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
	hl, err := dsnutil.ParseHostList(rest, DefaultPort, "endpoint")
	if err != nil {
		return bad("%v", err)
	}
	cfg.Endpoints, cfg.User, cfg.Password = hl.Hosts, hl.User, hl.Password
	if hl.Path != "" {
		if err := validatePrefix(hl.Path); err != nil {
			return bad("%v", err)
		}
		cfg.Prefix = hl.Path
	}
	var files dsnutil.TLSFiles
	for k, v := range hl.Query {
		last := v[len(v)-1]
		if k == "dial_timeout" {
			d, err := time.ParseDuration(last)
			if err != nil || d <= 0 {
				return bad("dial_timeout %q is not a positive duration", last)
			}
			cfg.DialTimeout = d
			continue
		}
		isTLS, err := files.Set(k, last)
		switch {
		case !isTLS:
			return bad("unknown parameter %q (known: dial_timeout; with etcd+tls: ca, cert, key, servername)", k)
		case !useTLS:
			return bad("parameter %q needs the scheme etcd+tls", k)
		case err != nil:
			return bad("%v", err)
		}
	}
	if useTLS {
		if cfg.TLS, err = files.Config(); err != nil {
			return bad("%v", err)
		}
	}
	return cfg, nil
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
