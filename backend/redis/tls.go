package redis

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/simba-go/simba/spi"
)

// plaintextProbeDelay is how long a TLS handshake may go unanswered before the dialer checks,
// on a second connection, whether the server speaks plain RESP instead. A plain-text Redis
// never answers a TLS ClientHello (it waits for the end of an inline command that never comes),
// so without the check a rediss:// DSN pointed at it would wait out every dial timeout and
// retry until the caller's context ends. A TLS server answers a handshake well within it; if
// it does not, the check costs one extra connection and changes nothing.
const plaintextProbeDelay = 500 * time.Millisecond

// plaintextProbeTimeout bounds the check.
const plaintextProbeTimeout = 2 * time.Second

// tlsDialer dials a TLS connection as go-redis's own dialer does, and fails fast with a
// permanent spi.ErrTLS when the server speaks plain RESP or its certificate does not verify.
type tlsDialer struct {
	cfg *tls.Config
	// plain holds the addresses found speaking plain RESP: the next dial checks them first,
	// so the pool's dial retries fail in one round trip each.
	plain sync.Map
}

func newTLSDialer(cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&tlsDialer{cfg: cfg}).dial
}

func (d *tlsDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
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
	probe := time.AfterFunc(plaintextProbeDelay, func() {
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
