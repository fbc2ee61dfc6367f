package redis

import (
	"context"
	"crypto/tls"
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

// DefaultSentinelPort is the port of a Sentinel named without one in a redis+sentinel:// DSN.
const DefaultSentinelPort = "26379"

// Config is a parsed DSN: the go-redis options of a standalone, a Cluster or a Sentinel
// failover client (exactly one is set), and the backend's own options.
type Config struct {
	// Options is set for redis:// and rediss:// (standalone; TLS for rediss).
	Options *goredis.Options
	// ClusterOptions is set for redis+cluster:// and rediss+cluster:// (Redis Cluster).
	ClusterOptions *goredis.ClusterOptions
	// FailoverOptions is set for redis+sentinel:// and rediss+sentinel:// (a master found
	// through Redis Sentinel, redis.NewFailoverClient).
	FailoverOptions *goredis.FailoverOptions
	// WaitReplicas and WaitTimeout are the wait_replicas and wait_timeout parameters (see
	// WithWaitReplicas); WaitTimeout is 0 without wait_timeout: the default timeout.
	WaitReplicas int
	WaitTimeout  time.Duration
	// StrictDurability is the strict_durability parameter (see WithStrictDurability).
	StrictDurability bool

	// dialRetries is the options' DialerRetries as the DSN set it, when ParseDSN moved them
	// into the TLS dialer (see tlsDialer), for UseTLS.
	dialRetries int
	// tlsd is the TLS dialer ParseDSN or UseTLS installed (nil without TLS): the backend tells
	// it how long its calls have (see tlsDialer.probeDelay).
	tlsd *tlsDialer
}

// ParseDSN parses a Redis DSN:
//
//	redis://[user:password@]host[:port][/db][?param=value&...]          standalone
//	rediss://[user:password@]host[:port][/db][?...]                     standalone over TLS
//	redis+cluster://[user:password@]host:port[,host:port...][/][?...]   Redis Cluster (seed nodes)
//	rediss+cluster://[user:password@]host:port[,host:port...][/][?...]  Redis Cluster over TLS
//	redis+sentinel://[user:password@]host[:port][,host[:port]...]/master[/db][?...]  Sentinel
//	rediss+sentinel://...                                               Sentinel over TLS
//
// The user and password are the ACL user (Redis 6+) and its password; a password alone
// (redis://:password@host) authenticates the default user. A Sentinel DSN lists the Sentinels
// (default port 26379) and names the master they monitor in its path; its user and password
// are the master's and replicas' (as for redis://), and the parameters sentinel_username and
// sentinel_password authenticate to Sentinels that require it. Simba's own parameters are
// wait_replicas (an integer, see WithWaitReplicas), wait_timeout (a Go duration of at
// least 1ms; left out, the default min(1s, TTL/6, half of each call's time), which fits every
// TTL; given, it must be below a third of the client's TTL and below its renewal interval, or
// simba.New refuses it) and strict_durability (true or false, as strconv.ParseBool
// reads it: true is WithStrictDurability, a server that could lose lease hashes fails the
// first OpenSession with ErrNotDurable instead of a warning); every other parameter is go-redis's (redis.ParseURL and
// redis.ParseClusterURL, redis.ParseFailoverURL: dial_timeout, read_timeout, pool_size,
// max_retries, ...). Errors match
// spi.ErrInvalidOption, name what is wrong and never show the password; ParseDSN does no I/O.
//
// For rediss:// and rediss+cluster:// the options' Dialer makes the TLS connection and fails
// fast with a permanent spi.ErrTLS when the server's certificate does not verify or when the
// server speaks plain RESP (a plain-text Redis never answers a TLS handshake: after 500 ms
// without an answer, or half the time of the backend's latest call if that is less, the dialer
// sends a plain-text PING on a second connection to find out; the call gets ErrTLS within its
// time).
// That dialer also does the dial retries (DialerRetries attempts, DialerRetryTimeout apart, as
// go-redis's pool would), retrying transient failures only, and the options' DialerRetries is
// set to 1 so that the pool does not retry a TLS failure on top. A plain-text DSN's
// DialerRetries is 1 unless it sets dialer_retries: a call at a server that refuses
// connections fails after its command's attempts (max_retries), within about 100 ms, not
// after 5 dials 100 ms apart per attempt; the client retries it with its own backoff.
func ParseDSN(dsn string) (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, dsnutil.Errorf(spi.ErrInvalidOption, "redis DSN", dsn, format, args...)
	}
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok || !dsnutil.ValidScheme(scheme) {
		return bad("want redis://, rediss://, redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://")
	}
	var cluster, sentinel bool
	switch scheme {
	case "redis", "rediss":
	case "redis+cluster", "rediss+cluster":
		cluster, scheme = true, strings.TrimSuffix(scheme, "+cluster")
	case "redis+sentinel", "rediss+sentinel":
		sentinel, scheme = true, strings.TrimSuffix(scheme, "+sentinel")
	default:
		return bad("unknown scheme %q (want redis, rediss, redis+cluster, rediss+cluster, redis+sentinel or rediss+sentinel)", scheme)
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
	if err := dsnutil.NoFragment(hosts, path, query); err != nil {
		return bad("%v", err)
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
		if d < time.Millisecond {
			return bad("wait_timeout %q is below 1ms: Redis counts WAIT's timeout in whole milliseconds, and WAIT n 0 waits until the call's deadline; leave wait_timeout out for the default (min(%v, TTL/6))", v[len(v)-1], DefaultWaitTimeout)
		}
		cfg.WaitTimeout = d
		vals.Del("wait_timeout")
	}
	if v, ok := vals["strict_durability"]; ok {
		strict, err := strconv.ParseBool(v[len(v)-1])
		if err != nil {
			return bad("strict_durability %q is not true or false", v[len(v)-1])
		}
		cfg.StrictDurability = strict
		vals.Del("strict_durability")
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
	if sentinel {
		o, err := parseSentinel(scheme, userinfo, list, path, vals)
		if err != nil {
			return bad("%v", err)
		}
		plainDialOnce(&o.DialerRetries, o.TLSConfig)
		if o.TLSConfig != nil {
			cfg.dialRetries = o.DialerRetries
			cfg.tlsd = useTLSDialer(o.TLSConfig, &o.Dialer, &o.DialerRetries, o.DialerRetryTimeout)
		}
		o.ContextTimeoutEnabled = true // see bounded
		cfg.FailoverOptions = o
		return cfg, nil
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
		plainDialOnce(&o.DialerRetries, o.TLSConfig)
		if o.TLSConfig != nil {
			cfg.dialRetries = o.DialerRetries
			cfg.tlsd = useTLSDialer(o.TLSConfig, &o.Dialer, &o.DialerRetries, o.DialerRetryTimeout)
		}
		o.ContextTimeoutEnabled = true // see bounded
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
	plainDialOnce(&o.DialerRetries, o.TLSConfig)
	if o.TLSConfig != nil {
		cfg.dialRetries = o.DialerRetries
		cfg.tlsd = useTLSDialer(o.TLSConfig, &o.Dialer, &o.DialerRetries, o.DialerRetryTimeout)
	}
	o.ContextTimeoutEnabled = true // see bounded
	cfg.ClusterOptions = o
	return cfg, nil
}

// parseSentinel makes the failover options of a Sentinel DSN: list are the Sentinels (checked
// by checkHost), path is /master[/db], vals the parameters left after Simba's own.
func parseSentinel(scheme, userinfo string, list []string, path string, vals url.Values) (*goredis.FailoverOptions, error) {
	for _, k := range []string{"master_name", "username", "password"} {
		if _, ok := vals[k]; ok {
			return nil, fmt.Errorf("parameter %s: put the master in the path and the user:password@ in the host part", k)
		}
	}
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	master, err := url.PathUnescape(segs[0])
	if err != nil || master == "" {
		return nil, fmt.Errorf("name the master the Sentinels monitor: redis+sentinel://host:26379/master")
	}
	if len(segs) > 2 || (len(segs) == 2 && segs[1] == "") {
		return nil, fmt.Errorf("path %q: want /master or /master/db", path)
	}
	sentUser, sentPass := vals.Get("sentinel_username"), vals.Get("sentinel_password")
	vals.Del("sentinel_username")
	vals.Del("sentinel_password")
	vals.Set("master_name", master)
	for i, h := range list {
		if _, _, err := net.SplitHostPort(h); err != nil {
			list[i] = net.JoinHostPort(strings.Trim(h, "[]"), DefaultSentinelPort)
		}
	}
	for _, h := range list[1:] {
		vals.Add("addr", h)
	}
	u := scheme + "://" + list[0]
	if len(segs) == 2 {
		u += "/" + segs[1]
	}
	o, err := goredis.ParseFailoverURL(u + "?" + vals.Encode())
	if err != nil {
		return nil, err
	}
	if userinfo != "" {
		ui, err := url.Parse(scheme + "://" + userinfo + "x")
		if err != nil || ui.User == nil {
			return nil, fmt.Errorf("bad user:password@ (percent-encode reserved characters)")
		}
		o.Username = ui.User.Username()
		o.Password, _ = ui.User.Password()
	}
	o.SentinelUsername, o.SentinelPassword = sentUser, sentPass
	return o, nil
}

// UseTLS makes the client Open builds from c connect with TLS configured by tc (replacing the
// DSN's: rediss:// verifies the servers against the system's roots), whatever the scheme, with
// the same fast failures as a rediss:// DSN (see ParseDSN). A nil tc changes nothing.
func (c *Config) UseTLS(tc *tls.Config) {
	if tc == nil {
		return
	}
	// use installs the TLS dialer; if ParseDSN installed one already, the options'
	// DialerRetries is 1 and the DSN's value is c.dialRetries.
	use := func(old *tls.Config, dialer *func(context.Context, string, string) (net.Conn, error), retries *int, backoff time.Duration) {
		if old != nil {
			*retries = c.dialRetries
		} else {
			c.dialRetries = *retries
		}
		c.tlsd = useTLSDialer(tc, dialer, retries, backoff)
	}
	switch o := c; {
	case o.Options != nil:
		use(o.Options.TLSConfig, &o.Options.Dialer, &o.Options.DialerRetries, o.Options.DialerRetryTimeout)
		o.Options.TLSConfig = tc
	case o.ClusterOptions != nil:
		use(o.ClusterOptions.TLSConfig, &o.ClusterOptions.Dialer, &o.ClusterOptions.DialerRetries, o.ClusterOptions.DialerRetryTimeout)
		o.ClusterOptions.TLSConfig = tc
	case o.FailoverOptions != nil:
		use(o.FailoverOptions.TLSConfig, &o.FailoverOptions.Dialer, &o.FailoverOptions.DialerRetries, o.FailoverOptions.DialerRetryTimeout)
		o.FailoverOptions.TLSConfig = tc
	}
}

// checkHost checks host[:port] as the ZooKeeper and etcd DSNs' hosts are (dsnutil.NormaliseHost:
// host name, port range; standalone's default port is 6379); a Cluster seed needs its port.
func checkHost(h string, cluster bool) error {
	if _, _, err := net.SplitHostPort(h); err != nil && cluster && h != "" {
		return fmt.Errorf("Cluster seed %q needs host:port", h)
	}
	_, err := dsnutil.NormaliseHost(h, 6379, "host")
	return err
}

// Open parses dsn (see ParseDSN), connects a go-redis client of its own (redis.NewClient,
// redis.NewClusterClient or redis.NewFailoverClient; routeBySlot is on for a Cluster DSN) and
// returns a backend on it. The DSN's wait_replicas applies unless opts override it, and its
// strict_durability=true as WithStrictDurability would. Open does no
// I/O: a bad address shows in the first call. Close closes the client.
func Open(dsn string, opts ...Option) (*Backend, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return OpenConfig(cfg, opts...)
}

// OpenConfig is Open for a parsed (and possibly adjusted, see Config.UseTLS) DSN: it makes the
// client of the options cfg holds and returns a backend on it that Close closes.
func OpenConfig(cfg Config, opts ...Option) (*Backend, error) {
	var c goredis.UniversalClient
	switch {
	case cfg.ClusterOptions != nil:
		c = goredis.NewClusterClient(cfg.ClusterOptions)
	case cfg.FailoverOptions != nil:
		c = goredis.NewFailoverClient(cfg.FailoverOptions)
	case cfg.Options != nil:
		c = goredis.NewClient(cfg.Options)
	default:
		return nil, fmt.Errorf("%w: redis: a Config without client options (use ParseDSN)", spi.ErrInvalidOption)
	}
	if cfg.WaitReplicas > 0 {
		opts = append([]Option{WithWaitReplicas(cfg.WaitReplicas, cfg.WaitTimeout)}, opts...)
	}
	if cfg.StrictDurability {
		opts = append([]Option{WithStrictDurability()}, opts...)
	}
	b, err := New(c, opts...)
	if err != nil {
		c.Close()
		return nil, err
	}
	b.owned, b.tlsd = true, cfg.tlsd
	if b.dials == nil { // WithDropSilent made it already
		b.dials = newLastDial()
		b.dials.watch(c)
	}
	return b, nil
}

// plainDialOnce sets the dial retries of a plain-text DSN that does not set dialer_retries to
// one attempt: go-redis's pool otherwise dials 5 times 100 ms apart, for each of a command's
// attempts (max_retries + 1), so that a call at a server that refuses connections failed only
// after about 2 s, and OpenSession (the durability check, then the session's script) at its
// deadline: a client (simba lock at a Redis that is down) heard of it 5 s late. The client
// retries the call with its own backoff. (A TLS DSN's dialer does its own retries: see
// useTLSDialer.)
func plainDialOnce(retries *int, tlsConfig *tls.Config) {
	if tlsConfig == nil && *retries <= 0 {
		*retries = 1
	}
}
