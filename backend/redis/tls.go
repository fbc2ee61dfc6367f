package redis

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/spi"
)

// plaintextProbeDelay is how long a TLS handshake may go unanswered before the dialer checks,
// on a second connection, whether the server speaks plain RESP instead. A plain-text Redis
// never answers a TLS ClientHello (it waits for the end of an inline command that never comes),
// so without the check a rediss:// DSN pointed at it would wait out every dial timeout and
// retry until the caller's context ends. A TLS server answers a handshake well within it; if
// it does not, the check costs one extra connection and changes nothing. A dial for a call with
// less than twice that time checks at half the call's time instead (see tlsDialer.probeDelay).
const plaintextProbeDelay = 500 * time.Millisecond

// plaintextProbeTimeout bounds the check.
const plaintextProbeTimeout = 2 * time.Second

// tlsDialer dials a TLS connection as go-redis's own dialer does, and fails fast with a
// permanent spi.ErrTLS when the server speaks plain RESP or its certificate does not verify.
//
// It also does the dial retries that go-redis's pool would otherwise do (the options'
// DialerRetries attempts, DialerRetryTimeout apart: 5 and 100 ms by default), so that it can
// tell the two kinds of failure apart, which the pool's loop cannot (its backoff sees the
// attempt number, never the error): a transient failure (connection refused while the server
// restarts, a reset, a timeout) is retried as the pool did, a TLS failure is returned at once.
// The pool retried TLS failures too, 5 attempts per connection and 100 ms apart, several
// connections per call (the durability check's CONFIG GET and INFO, then the script), so a call
// with a short timeout (a Simba client gives each call a third of its TTL: 1 s for a 3 s TTL)
// ended on its deadline, as a retryable "context deadline exceeded", before the TLS error came
// back. useTLSDialer sets the pool's DialerRetries to 1 accordingly.
type tlsDialer struct {
	cfg     *tls.Config
	retries int           // attempts per dial, at least 1
	backoff time.Duration // between attempts
	// plain holds the addresses found speaking plain RESP: the next dial checks them first,
	// so a dial to such a server fails in one round trip.
	plain sync.Map
	// budget is the time the latest call of the backend had when it began (nanoseconds; 0:
	// none known), which go-redis's dials do not see: the pool dials on a goroutine of its
	// own, under the dial timeout alone (5 s by default), while the call waits for it until
	// its own deadline. See probeDelay.
	budget atomic.Int64
}

// Defaults of go-redis's DialerRetries and DialerRetryTimeout.
const (
	defaultDialRetries = 5
	defaultDialBackoff = 100 * time.Millisecond
)

// useTLSDialer sets the Dialer and DialerRetries of a go-redis options struct (Options,
// ClusterOptions or FailoverOptions) to a tlsDialer for cfg that makes the retries and backoff
// the options asked for, and to 1 attempt per pool dial. The pool's DialTimeout then bounds
// the tlsDialer's attempts together rather than each (a Simba call's own timeout, a third of
// the TTL, is shorter anyway); the options' DialerRetryBackoff, which ParseDSN never sets, is
// not used.
func useTLSDialer(cfg *tls.Config, dialer *func(context.Context, string, string) (net.Conn, error), retries *int, backoff time.Duration) *tlsDialer {
	d := &tlsDialer{cfg: cfg, retries: *retries, backoff: backoff}
	if d.retries <= 0 {
		d.retries = defaultDialRetries
	}
	if d.backoff <= 0 {
		d.backoff = defaultDialBackoff
	}
	*dialer, *retries = d.dial, 1
	return d
}

// called notes that a call with ctx begins (see budget); a nil d (no TLS dialer) does nothing.
func (d *tlsDialer) called(ctx context.Context) {
	if d == nil {
		return
	}
	if dl, ok := ctx.Deadline(); ok {
		d.budget.Store(max(int64(time.Until(dl)), 1))
	}
}

// probeDelay is when a handshake under ctx is checked for a plain-text server:
// plaintextProbeDelay after it began, or half the time the latest call had (or ctx has) left,
// if sooner: the other half is for the check, a connection and one round trip. A Simba client
// gives each call a third of its TTL, 500 ms at a 1.5 s TTL, which the fixed delay would use
// up: that call ended as a retryable "context deadline exceeded" before the check could tell
// it ErrTLS (only the next one learnt it). A TLS server slower to answer a handshake than half
// a call costs that check's extra connection, and nothing else.
func (d *tlsDialer) probeDelay(ctx context.Context) time.Duration {
	delay := plaintextProbeDelay
	if b := time.Duration(d.budget.Load()); b > 0 {
		delay = min(delay, b/2)
	}
	if dl, ok := ctx.Deadline(); ok {
		delay = min(delay, time.Until(dl)/2)
	}
	return max(delay, 0)
}

func (d *tlsDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	for attempt := 1; ; attempt++ {
		conn, err := d.dialOnce(ctx, network, addr)
		if err == nil || spi.IsTLSError(err) || attempt >= d.retries {
			return conn, err
		}
		t := time.NewTimer(d.backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

func (d *tlsDialer) dialOnce(ctx context.Context, network, addr string) (net.Conn, error) {
	if _, ok := d.plain.Load(addr); ok {
		if reply := probePlaintext(ctx, network, addr); reply != "" {
			return nil, plaintextError(addr, reply)
		}
		d.plain.Delete(addr)
	}
	nd := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}}
	raw, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cfg := d.cfg
	if cfg.ServerName == "" { // as tls.DialWithDialer does
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	conn := tls.Client(raw, cfg)
	var reply string
	probed := make(chan struct{})
	probe := time.AfterFunc(d.probeDelay(ctx), func() {
		defer close(probed)
		if reply = probePlaintext(ctx, network, addr); reply != "" {
			raw.Close() // ends the handshake
		}
	})
	err = conn.HandshakeContext(ctx)
	if !probe.Stop() {
		<-probed
	}
	if reply != "" {
		d.plain.Store(addr, struct{}{})
		raw.Close()
		return nil, plaintextError(addr, reply)
	}
	if err != nil {
		raw.Close()
		if spi.IsTLSError(err) {
			return nil, spi.TLSFailure("redis: TLS handshake with "+addr, err)
		}
		return nil, err
	}
	return conn, nil
}

// probePlaintext sends a plain-text PING to addr and returns the first line of the reply when
// it is RESP ("+PONG", "-NOAUTH ...", "-DENIED ..."), or "" (no answer, a TLS alert, an error).
func probePlaintext(ctx context.Context, network, addr string) string {
	ctx, cancel := context.WithTimeout(ctx, plaintextProbeTimeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return ""
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return ""
	}
	buf := make([]byte, 128)
	n, _ := c.Read(buf)
	line := buf[:n]
	if i := bytes.IndexAny(line, "\r\n"); i >= 0 {
		line = line[:i]
	}
	if len(line) == 0 || (line[0] != '+' && line[0] != '-') {
		return ""
	}
	for _, b := range line {
		if b < 0x20 || b > 0x7e {
			return ""
		}
	}
	return string(line)
}

func plaintextError(addr, reply string) error {
	return spi.TLSFailure("redis: dial "+addr, fmt.Errorf(
		"the DSN asks for TLS (rediss://) but the server does not speak TLS: it answers a plain-text PING with %q (use redis://, or enable TLS on the server)", reply))
}
