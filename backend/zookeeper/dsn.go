package zookeeper

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
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
	// change or delete them. Without a user the nodes are open (world-all). A user needs a
	// password that is not empty (ErrInvalidOption).
	User, Password string
	// OpenACL, without a User, says that the open ACL is intended (a private ensemble, a
	// test): the backend then logs its open-ACL warning at the debug level instead of WARN
	// (see the package doc, Security), so that a command run every minute (simba lock from
	// cron) does not log it every time. It changes no ACL. With a User it is refused
	// (ErrInvalidOption): the nodes are not open then. The DSN's acl=open sets it.
	OpenACL bool
	// Timeout bounds dialing one server and establishing a session when the caller's
	// context has no deadline (DefaultTimeout if zero).
	Timeout time.Duration
	// TLS, when set, makes every connection TLS with this configuration (the servers' secure
	// client port, ZooKeeper's secureClientPort). The option WithTLS overrides it. Without
	// TLS, everything crosses the network in clear text, digest credentials included.
	TLS *tls.Config
	// TickTime, when set, is the servers' tickTime (zoo.cfg's tickTime, 2 s by default), and
	// each session asks for a session timeout one tick shorter than its TTL, so that ZooKeeper
	// expires a crashed holder's session, and deletes its lease nodes, by its last request +
	// TTL rather than up to one tick later (see "Session timeout and tickTime" in the package
	// doc). Zero leaves it out: sessions ask for the TTL itself. It must be a whole number of
	// milliseconds, as ZooKeeper's is, and less than half of every TTL a session is opened
	// with (OpenSession refuses a shorter TTL with spi.ErrInvalidOption).
	TickTime time.Duration
}

// ParseDSN parses a ZooKeeper DSN:
//
//	zk://[user:password@]host1[:port],host2[:port]/[chroot]?timeout=10s&tickTime=2s
//	zk+tls://[user:password@]host1:securePort,.../[chroot]?ca=/ca.pem&cert=/c.pem&key=/k.pem
//
// The user information, if present, is the digest identity (see Config.User). The path is
// the chroot (optional), percent-decoded; a percent-encoded slash (%2F) in it is refused, as
// no ZooKeeper node name can hold a /. Query parameters: timeout, a Go duration (see Config.Timeout);
// acl=open, without a user, to say the open ACL is intended (Config.OpenACL);
// tickTime, the servers' tickTime as a Go duration or a bare number of milliseconds as zoo.cfg
// writes it (tickTime=2000 is 2s), which makes sessions ask for their TTL less one tick (see
// Config.TickTime); and,
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
	hl, err := dsnutil.ParseHostList(rest, DefaultPort, "server")
	if err != nil {
		return bad("%v", err)
	}
	cfg.Servers, cfg.User, cfg.Password = hl.Hosts, hl.User, hl.Password
	if err := checkDigest(cfg.User, cfg.Password); err != nil {
		return bad("%v", err)
	}
	if hl.Path != "" {
		// A ZooKeeper node's name cannot hold a '/': /a%2Fb cannot be one node "a/b", and
		// reading it as /a/b (two nodes) would make two spellings of one chroot and let a
		// percent-encoding tool's output silently change the tree Simba writes to.
		if i := strings.Index(strings.ToLower(hl.RawPath), "%2f"); i >= 0 {
			return bad("chroot %q holds a percent-encoded / (%s): a ZooKeeper node name cannot contain /; write the path with plain slashes (%s)", hl.RawPath, hl.RawPath[i:i+3], hl.Path)
		}
		if err := validateChroot(hl.Path); err != nil {
			return bad("%v", err)
		}
		cfg.Chroot = hl.Path
	}
	var files dsnutil.TLSFiles
	for k, v := range hl.Query {
		last := v[len(v)-1]
		if k == "timeout" {
			d, err := time.ParseDuration(last)
			if err != nil || d <= 0 {
				return bad("timeout %q is not a positive duration", last)
			}
			cfg.Timeout = d
			continue
		}
		if k == "acl" {
			if last != "open" {
				return bad("acl %q: the only value is open (the open ACL is intended; for a protected one put a user:password in the DSN)", last)
			}
			cfg.OpenACL = true
			continue
		}
		if k == "tickTime" {
			d, err := parseTickTime(last)
			if err != nil {
				return bad("%v", err)
			}
			cfg.TickTime = d
			continue
		}
		isTLS, err := files.Set(k, last)
		switch {
		case !isTLS:
			return bad("unknown parameter %q (known: timeout, tickTime, acl; with zk+tls: ca, cert, key, servername)", k)
		case !useTLS:
			return bad("parameter %q needs the scheme zk+tls", k)
		case err != nil:
			return bad("%v", err)
		}
	}
	if cfg.OpenACL && cfg.User != "" {
		return bad("%v", errOpenACLWithUser)
	}
	if useTLS {
		if cfg.TLS, err = files.Config(); err != nil {
			return bad("%v", err)
		}
	}
	return cfg, nil
}

// parseTickTime parses the DSN's tickTime: a Go duration ("200ms", "2s") or a bare integer
// of milliseconds ("2000", as zoo.cfg writes it), positive and a whole number of milliseconds.
func parseTickTime(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		ms, ierr := strconv.ParseInt(v, 10, 64)
		if ierr != nil || ms > int64(math.MaxInt64/time.Millisecond) {
			return 0, fmt.Errorf("tickTime %q is neither a Go duration (200ms, 2s) nor a number of milliseconds (2000)", v)
		}
		d = time.Duration(ms) * time.Millisecond
	}
	if err := checkTickTime(d); err != nil {
		return 0, fmt.Errorf("tickTime %q: %w", v, err)
	}
	return d, nil
}

// checkTickTime checks a tickTime that is set (non-zero): ZooKeeper's is a positive number of
// milliseconds.
func checkTickTime(d time.Duration) error {
	switch {
	case d <= 0:
		return errors.New("must be positive (leave it out to ask for the TTL itself)")
	case d%time.Millisecond != 0:
		return errors.New("must be a whole number of milliseconds, as ZooKeeper's tickTime is")
	}
	return nil
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

// errOpenACLWithUser refuses acl=open (Config.OpenACL) beside a user:password, whose nodes are
// not open.
var errOpenACLWithUser = errors.New("acl=open with a user:password: the nodes of a DSN with credentials are not open; drop one")

// checkDigest checks a digest identity's user and password: both or neither. A digest identity
// is the user name and a hash of "user:password": with an empty password anyone who knows the
// user name has it, so the ACL would protect nothing while looking like it does.
func checkDigest(user, password string) error {
	switch {
	case user == "" && password != "":
		return errors.New("password without user")
	case user != "" && password == "":
		return fmt.Errorf("user %q with an empty password: its digest identity protects nothing (anyone can compute it); give a password, or no user for open ACLs", user)
	}
	return nil
}

// validate checks a Config filled by hand.
func (c Config) validate() error {
	if len(c.Servers) == 0 {
		return fmt.Errorf("%w: zookeeper: no servers", spi.ErrInvalidOption)
	}
	for _, s := range c.Servers {
		if _, err := dsnutil.NormaliseHost(s, DefaultPort, "server"); err != nil {
			return fmt.Errorf("%w: zookeeper: %v", spi.ErrInvalidOption, err)
		}
	}
	if c.Chroot != "" {
		if err := validateChroot(c.Chroot); err != nil {
			return fmt.Errorf("%w: zookeeper: %v", spi.ErrInvalidOption, err)
		}
	}
	if err := checkDigest(c.User, c.Password); err != nil {
		return fmt.Errorf("%w: zookeeper: %v", spi.ErrInvalidOption, err)
	}
	if c.OpenACL && c.User != "" {
		return fmt.Errorf("%w: zookeeper: %v", spi.ErrInvalidOption, errOpenACLWithUser)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("%w: zookeeper: negative timeout", spi.ErrInvalidOption)
	}
	if c.TickTime != 0 {
		if err := checkTickTime(c.TickTime); err != nil {
			return fmt.Errorf("%w: zookeeper: tickTime %v %w", spi.ErrInvalidOption, c.TickTime, err)
		}
	}
	return nil
}
