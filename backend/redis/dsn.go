package redis

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/spi"

	dsnutil "github.com/simba-go/simba/internal/dsn"
)

// Config is a parsed DSN: the go-redis options of a standalone or a Cluster client, and the
// backend's own options.
type Config struct {
	// Options is set for redis:// and rediss:// (standalone; TLS for rediss).
	Options *goredis.Options
	// ClusterOptions is set for redis+cluster:// and rediss+cluster:// (Redis Cluster).
	ClusterOptions *goredis.ClusterOptions
	// WaitReplicas and WaitTimeout are the wait_replicas and wait_timeout parameters (see
	// WithWaitReplicas).
	WaitReplicas int
	WaitTimeout  time.Duration
}

// ParseDSN parses a Redis DSN:
//
//	redis://[user:password@]host[:port][/db][?param=value&...]          standalone
//	rediss://[user:password@]host[:port][/db][?...]                     standalone over TLS
//	redis+cluster://[user:password@]host:port[,host:port...][/][?...]   Redis Cluster (seed nodes)
//	rediss+cluster://[user:password@]host:port[,host:port...][/][?...]  Redis Cluster over TLS
//
// The user and password are the ACL user (Redis 6+) and its password; a password alone
// (redis://:password@host) authenticates the default user. Simba's own parameters are
// wait_replicas (an integer, see WithWaitReplicas) and wait_timeout (a Go duration, default
// 1s when wait_replicas is set); every other parameter is go-redis's (redis.ParseURL and
// redis.ParseClusterURL: dial_timeout, read_timeout, pool_size, max_retries, ...). Errors match
// spi.ErrInvalidOption, name what is wrong and never show the password; ParseDSN does no I/O.
//
// For rediss:// and rediss+cluster:// the options' Dialer makes the TLS connection and fails
// fast with a permanent spi.ErrTLS when the server's certificate does not verify or when the
// server speaks plain RESP (a plain-text Redis never answers a TLS handshake: after 500 ms
// without an answer the dialer sends a plain-text PING on a second connection to find out).
func ParseDSN(dsn string) (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, dsnutil.Errorf(spi.ErrInvalidOption, "redis DSN", dsn, format, args...)
	}
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok || !dsnutil.ValidScheme(scheme) {
		return bad("want redis://, rediss://, redis+cluster:// or rediss+cluster://")
	}
	var cluster bool
	switch scheme {
	case "redis", "rediss":
	case "redis+cluster", "rediss+cluster":
		cluster, scheme = true, strings.TrimSuffix(scheme, "+cluster")
	default:
		return bad("unknown scheme %q (want redis, rediss, redis+cluster or rediss+cluster)", scheme)
	}
	var query string
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
	}
	authority, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	userinfo, hosts := "", authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hosts = authority[:i+1], authority[i+1:]
		if _, err := url.Parse(scheme + "://" + userinfo + "x"); err != nil {
			return bad("bad user:password@ (percent-encode reserved characters)")
		}
	}
	vals, err := url.ParseQuery(query)
	if err != nil {
		return bad("bad query: %v", err)
	}
	var cfg Config
	if v, ok := vals["wait_replicas"]; ok {
		n, err := strconv.Atoi(v[len(v)-1])
		if err != nil || n < 0 {
			return bad("wait_replicas %q is not a non-negative integer", v[len(v)-1])
		}
		cfg.WaitReplicas = n
		vals.Del("wait_replicas")
	}
	if v, ok := vals["wait_timeout"]; ok {
		d, err := time.ParseDuration(v[len(v)-1])
		if err != nil || d <= 0 {
			return bad("wait_timeout %q is not a positive duration", v[len(v)-1])
		}
		cfg.WaitTimeout = d
		vals.Del("wait_timeout")
	}
	if cfg.WaitReplicas > 0 && cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = time.Second
	}
	if _, ok := vals["addr"]; ok {
		return bad("list the servers in the host part (host:port,host:port), not with addr=")
	}
	if hosts == "" {
		return bad("no host")
	}
	list := strings.Split(hosts, ",")
	for _, h := range list {
		if err := checkHost(h, cluster); err != nil {
			return bad("%v", err)
		}
	}
	if !cluster {
		if len(list) > 1 {
			return bad("several hosts need redis+cluster:// (or a redis.UniversalClient passed to New)")
		}
		u := scheme + "://" + userinfo + hosts + path
		if q := vals.Encode(); q != "" {
			u += "?" + q
		}
		o, err := goredis.ParseURL(u)
		if err != nil {
			return bad("%v", err)
		}
		if o.TLSConfig != nil {
			o.Dialer = newTLSDialer(o.TLSConfig)
		}
		cfg.Options = o
		return cfg, nil
	}
	if path != "" && path != "/" {
		return bad("a Cluster DSN has no database path (Redis Cluster has database 0 only), got %q", path)
	}
	for _, h := range list[1:] {
		vals.Add("addr", h)
	}
	u := scheme + "://" + userinfo + list[0]
	if q := vals.Encode(); q != "" {
		u += "?" + q
	}
	o, err := goredis.ParseClusterURL(u)
	if err != nil {
		return bad("%v", err)
	}
	if o.TLSConfig != nil {
		o.Dialer = newTLSDialer(o.TLSConfig)
	}
	cfg.ClusterOptions = o
	return cfg, nil
}

// checkHost checks host[:port]; a Cluster seed needs its port.
func checkHost(h string, cluster bool) error {
	if h == "" {
		return fmt.Errorf("empty host in the host list")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		if cluster {
			return fmt.Errorf("Cluster seed %q needs host:port", h)
		}
		if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
			return fmt.Errorf("bad host %q", h)
		}
		return nil // standalone default port 6379
	}
	if host == "" {
		return fmt.Errorf("host %q has no host name", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("host %q has a bad port", h)
	}
	return nil
}

// Open parses dsn (see ParseDSN), connects a go-redis client of its own (redis.NewClient or
// redis.NewClusterClient; routeBySlot is on for a Cluster DSN) and returns a backend on it. The
// DSN's wait_replicas applies unless opts override it. Open does no I/O: a bad address shows in
// the first call. Close closes the client.
func Open(dsn string, opts ...Option) (*Backend, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	var c goredis.UniversalClient
	if cfg.ClusterOptions != nil {
		c = goredis.NewClusterClient(cfg.ClusterOptions)
	} else {
		c = goredis.NewClient(cfg.Options)
	}
	if cfg.WaitReplicas > 0 {
		opts = append([]Option{WithWaitReplicas(cfg.WaitReplicas, cfg.WaitTimeout)}, opts...)
	}
	b, err := New(c, opts...)
	if err != nil {
		c.Close()
		return nil, err
	}
	b.owned = true
	return b, nil
}
