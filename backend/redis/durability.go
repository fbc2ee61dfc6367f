package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/spi"
)

// ErrNotDurable matches the error of a backend built WithStrictDurability (or opened from a DSN
// with strict_durability=true) whose server could
// lose lease hashes (an allkeys-* maxmemory-policy, or no AOF), or whose configuration could not
// be read. It is permanent.
var ErrNotDurable = errors.New("redis: tokens not durable")

// WithLogger sets where the backend logs its warnings: the durability check at the first
// OpenSession (see CheckDurability) and foreign records it skips or frees, such as a group member
// or a lease holder that is not a client session id (logged once per record). The default is
// the logger of the client the backend is given to, if it has one (simba.WithLogger: see
// AdoptLogger), and slog.Default() otherwise; nil turns logging off.
//
// go-redis logs on its own (failed dials, "connection pool: failed to dial after 5 attempts",
// once per failed dial while a server is down; pool and pub/sub events) to stderr, through a
// process-wide logger this option does not touch. Route it with redis.SetLogger and a type with
// Printf(ctx context.Context, format string, v ...any), e.g. into a slog logger at DEBUG: the
// same failures reach the client as backend errors.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.logger = l
		return nil
	}
}

// WithStrictDurability makes the first OpenSession fail with a permanent error matching
// ErrNotDurable, instead of logging a warning, when a server (every master, on a Cluster) could
// lose lease hashes — an allkeys-* maxmemory-policy, or appendonly off — or its configuration
// cannot be read (CONFIG and INFO refused). Such a server can lose the hash of a held lease,
// and then grant the lease to a second session while the holder still believes it holds it
// (see Durability.String): use this option where that is not acceptable, rather than a
// warning in a log. See CheckDurability. The check runs once per
// Backend and its verdict is kept: after changing the server's configuration, build a new
// Backend. (A server that could not be reached is checked again at the next OpenSession.)
// A DSN sets it with the parameter strict_durability=true (see ParseDSN), for Open, the
// package open and the simba command.
func WithStrictDurability() Option {
	return func(c *config) error {
		c.strict = true
		return nil
	}
}

// strictHint ends the warning about a server that could lose lease hashes: how to refuse it.
const strictHint = "or refuse such a server: strict_durability=true (WithStrictDurability)"

// riskDetail is what a lost lease hash costs, in full: the warning's risk attribute (its
// message says it in a few words).
const riskDetail = "mutual exclusion breaks: another session can be granted a lease while its holder still believes it holds it (IsValid true) until the holder's next keep-alive, up to one renewal interval (TTL/3 by default), and only fencing tokens protect the resource then (they still increase while the server's clock moves forward; a clock that goes back could repeat one)"

// Durability is what CheckDurability found on one server.
type Durability struct {
	Addr           string // the server's address ("" when the client gives none)
	Checked        bool   // the configuration could be read (CONFIG GET, else INFO)
	Policy         string // maxmemory-policy
	MaxMemory      string // maxmemory in bytes ("0": no limit)
	AppendOnly     bool   // appendonly yes (AOF)
	Err            error  // why it could not be checked (Checked false)
	EvictsLeases   bool   // an allkeys-* policy: a lease hash can be evicted
	LosesOnRestart bool   // no AOF: a restart loses what the last RDB save (if any) lacks
}

// Safe reports whether nothing on this server can lose a lease hash short of an operator.
func (d Durability) Safe() bool { return d.Checked && !d.EvictsLeases && !d.LosesOnRestart }

// String says, in one short line (the message of the warning the backend logs), the setting
// found, what is at risk (two sessions holding one lease) and what to do: change the setting
// (appendonly yes; noeviction or a volatile-* policy), or refuse such a server with
// strict_durability=true in the DSN (WithStrictDurability in code).
//
// In full, what is at risk is mutual exclusion first, not only the tokens' order: a lease hash
// that is lost while its lease is held lets another session be granted the lease while the
// holder still believes it holds it (its term IsValid), until the holder's next keep-alive
// finds the hash gone or taken, up to one renewal interval later. Fencing tokens are then all
// that protects the resource, and they still increase only while the server's clock moves
// forward. The warning carries that as its risk attribute, beside the settings read (addr,
// maxmemory_policy, maxmemory, appendonly, checked) and, for a server that could not be
// checked, the error; see also the package doc, Fencing tokens and durability.
func (d Durability) String() string { return d.describe(", " + strictHint) }

// describe is String, its advice ending with then (", " and how to refuse such a server, or ""
// for the error of a backend that refuses it).
func (d Durability) describe(then string) string {
	at := ""
	if d.Addr != "" {
		at = " at " + d.Addr
	}
	switch {
	case !d.Checked:
		return fmt.Sprintf("simba: could not read the settings of Redis%s: with appendonly no or an allkeys-* policy two sessions can hold one lease; keep appendonly yes and noeviction%s", at, then)
	case d.EvictsLeases && d.LosesOnRestart:
		return fmt.Sprintf("simba: Redis%s has maxmemory-policy %s and appendonly no: two sessions can hold one lease after an eviction or a restart; set noeviction and appendonly yes%s", at, d.Policy, then)
	case d.EvictsLeases:
		return fmt.Sprintf("simba: Redis%s has maxmemory-policy %s: two sessions can hold one lease after an eviction; set noeviction (or a volatile-* policy)%s", at, d.Policy, then)
	case d.LosesOnRestart:
		return fmt.Sprintf("simba: Redis%s has appendonly no: two sessions can hold one lease after a restart; set appendonly yes%s", at, then)
	}
	return fmt.Sprintf("simba: Redis server%s keeps lease records (maxmemory-policy %s, appendonly yes)", at, d.Policy)
}

// logAttrs are the warning's attributes for the finding: the settings read, why it could not
// be checked (if so), and the risk in full.
func (d Durability) logAttrs() []any {
	attrs := []any{"addr", d.Addr, "maxmemory_policy", d.Policy, "maxmemory", d.MaxMemory, "appendonly", d.AppendOnly, "checked", d.Checked}
	if !d.Checked {
		attrs = append(attrs, "error", strings.Join(strings.Fields(fmt.Sprint(d.Err)), " ")) // one line, whatever the error holds
	}
	if d.EvictsLeases {
		attrs = append(attrs, "evicts", "an allkeys-* policy evicts lease hashes, which never expire, when maxmemory is reached")
	}
	if d.LosesOnRestart {
		attrs = append(attrs, "on_restart", "without AOF a restart loses the lease hashes written since the last RDB save (all of them without one)")
	}
	return append(attrs, "risk", riskDetail)
}

// CheckDurability reads, on the server (on a Cluster, on every master), the settings under which
// Redis itself can lose a lease hash and with it the lease's token: maxmemory-policy (an
// allkeys-* policy evicts keys that never expire, lease hashes included), maxmemory, and
// appendonly (without AOF a restart loses every write since the last RDB snapshot). It uses
// CONFIG GET and, where that is refused (an ACL without CONFIG, a renamed command), INFO memory
// and INFO persistence; a server where both are refused is reported unchecked. An error is
// returned only when a server could not be reached or cannot serve the DSN (a database it does
// not have; for a standalone client, a server with cluster-enabled yes, which needs a
// redis+cluster:// DSN).
//
// The backend runs it once, at the first OpenSession, and logs every finding that is not Safe
// as a warning (or, WithStrictDurability, refuses with ErrNotDurable). Losing the hash of a held
// lease breaks mutual exclusion for a while (see Durability.String): the lease can be granted
// to a second session before the holder's next keep-alive tells it the lease is gone. It does
// not make tokens go back while the server's clock moves forward: a new tenure's token is at
// least the server's clock in microseconds.
//
// It reads neither appendfsync nor replication, which decide what AOF and replicas still lose
// (see the package doc, Fencing tokens and durability): each lost grant or renewal opens the
// same window of two holders.
//
// It returns once ctx is done, as every call does (see bounded), even when a server stops
// answering.
func (b *Backend) CheckDurability(ctx context.Context) ([]Durability, error) {
	return bounded(ctx, b, "check durability", "", func() ([]Durability, error) { return b.checkDurabilityCall(ctx) })
}

// checkDurabilityCall is CheckDurability's body, run by bounded.
func (b *Backend) checkDurabilityCall(ctx context.Context) ([]Durability, error) {
	if b.cc != nil {
		var mu sync.Mutex
		var out []Durability
		err := b.cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
			d, err := checkDurability(ctx, c, c.Options().Addr)
			if err != nil {
				return err
			}
			mu.Lock()
			out = append(out, d)
			mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, b.fail("check durability", err)
		}
		return out, nil
	}
	addr := ""
	if c, ok := b.c.(*goredis.Client); ok {
		addr = c.Options().Addr
	}
	d, err := checkDurability(ctx, b.c, addr)
	if err != nil {
		return nil, b.fail("check durability", err)
	}
	if err := checkNotClusterNode(ctx, b.c); err != nil {
		return nil, b.fail("check durability", err)
	}
	return []Durability{d}, nil
}

// errClusterNode is checkNotClusterNode's finding; fail makes it permanent, with the fix.
var errClusterNode = errors.New("the server has cluster-enabled yes")

// checkNotClusterNode fails with errClusterNode when the server a standalone client talks to is
// a Redis Cluster node. Such a client's calls fail with MOVED or CROSSSLOT only for keys outside
// the node's own slots: without this check a session whose key hashes to one of them opened
// fine (open.WithPing passed about one time in three), and the misconfiguration showed only at
// the first lease. It reads CONFIG GET cluster-enabled, else INFO cluster; a server that
// refuses both, or does not know the setting, is taken for a standalone one.
func checkNotClusterNode(ctx context.Context, c goredis.Cmdable) error {
	v, err := c.ConfigGet(ctx, "cluster-enabled").Result()
	if err == nil {
		if v["cluster-enabled"] == "yes" {
			return errClusterNode
		}
		return nil
	}
	if !refused(err) {
		return err
	}
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		if refused(err) {
			return nil
		}
		return err
	}
	if infoFields(info)["cluster_enabled"] == "1" {
		return errClusterNode
	}
	return nil
}

// refused reports an error by which the server refused a command (no permission, unknown or
// renamed command) rather than failing to answer. A DSN the server cannot serve is not such a
// refusal, though a Cluster node's "SELECT is not allowed in cluster mode" reads like one: every
// command of the connection fails with it, the scripts too, so it is the check's error (which
// the first OpenSession returns, permanent), not a server that could not be checked (a
// warning first, or ErrNotDurable with WithStrictDurability).
func refused(err error) bool {
	var re goredis.Error
	if !errors.As(err, &re) || unservable(err) {
		return false
	}
	return goredis.HasErrorPrefix(err, "NOPERM") || strings.Contains(err.Error(), "unknown command") ||
		strings.Contains(err.Error(), "not allowed")
}

func checkDurability(ctx context.Context, c goredis.Cmdable, addr string) (Durability, error) {
	d := Durability{Addr: addr}
	pipe := c.Pipeline()
	pol := pipe.ConfigGet(ctx, "maxmemory-policy")
	mem := pipe.ConfigGet(ctx, "maxmemory")
	aof := pipe.ConfigGet(ctx, "appendonly")
	_, err := pipe.Exec(ctx)
	if err == nil {
		d.Checked = true
		d.Policy, d.MaxMemory = pol.Val()["maxmemory-policy"], mem.Val()["maxmemory"]
		d.AppendOnly = aof.Val()["appendonly"] == "yes"
	} else if !refused(err) {
		return d, err
	} else {
		cfgErr := err
		pipe := c.Pipeline()
		im := pipe.Info(ctx, "memory")
		ip := pipe.Info(ctx, "persistence")
		if _, err := pipe.Exec(ctx); err != nil {
			if !refused(err) {
				return d, err
			}
			d.Err = fmt.Errorf("CONFIG GET: %w; INFO: %w", cfgErr, err)
			return d, nil
		}
		f := infoFields(im.Val() + "\n" + ip.Val())
		d.Policy, d.MaxMemory = f["maxmemory_policy"], f["maxmemory"]
		d.AppendOnly = f["aof_enabled"] == "1"
		d.Checked = d.Policy != "" && f["aof_enabled"] != ""
		if !d.Checked {
			d.Err = fmt.Errorf("CONFIG GET: %w; INFO lacks maxmemory_policy or aof_enabled", cfgErr)
			return d, nil
		}
	}
	d.EvictsLeases = strings.HasPrefix(d.Policy, "allkeys-")
	d.LosesOnRestart = !d.AppendOnly
	return d, nil
}

// infoFields parses INFO's "key:value" lines.
func infoFields(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}

// durability runs CheckDurability once, before the first session is opened: it logs each
// finding that is not safe (or, strict, fails with ErrNotDurable, which names them, instead). A
// server that could not be reached leaves the check for the next OpenSession, and fails this
// one (on a Cluster, only when strict: the session's master may be up).
func (b *Backend) durability(ctx context.Context) error {
	return b.durCheck.run(func() (bool, error) {
		ds, err := b.CheckDurability(ctx)
		if err != nil {
			// A server that could not be reached: on a standalone server (or Sentinel's
			// master) the session's script would go there too, and fail the same way after as
			// long again (go-redis's retries); say so now. A Cluster opens the session on one
			// master, which may be up while another is not.
			if b.strict || b.cc == nil {
				return false, err
			}
			return false, nil
		}
		var bad []string
		for _, d := range ds {
			if d.Safe() {
				continue
			}
			if b.strict {
				// The error says it, without the hint to refuse such a server: it is refused;
				// and why a server could not be checked (the warning's error attribute).
				why := d.describe("")
				if !d.Checked {
					why += " (" + strings.Join(strings.Fields(fmt.Sprint(d.Err)), " ") + ")"
				}
				bad = append(bad, why)
				continue
			}
			b.log.Warn(d.String(), d.logAttrs()...)
		}
		if b.strict && len(bad) > 0 {
			return true, spi.AsPermanent(fmt.Errorf("%w (strict durability): %s", ErrNotDurable, strings.Join(bad, "; ")))
		}
		return true, nil
	})
}
