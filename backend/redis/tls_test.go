package redis

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestRedissToPlaintextFailsFast: rediss:// (and rediss+cluster://) to the plain-text test
// servers fails long before the caller's deadline (it used to wait for it: a plain-text Redis
// never answers a TLS handshake) with a permanent ErrTLS naming TLS.
func TestRedissToPlaintextFailsFast(t *testing.T) {
	dsns := []string{"rediss://" + testenv.Redis(t)}
	dsns = append(dsns, "rediss+cluster://"+strings.Join(testenv.RedisCluster(t), ","))
	for _, dsn := range dsns {
		b, err := Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		start := time.Now()
		_, err = b.OpenSession(ctx, "o", time.Second)
		took := time.Since(start)
		cancel()
		b.Close()
		if !errors.Is(err, spi.ErrTLS) || spi.Classify(err) != spi.Permanent || !strings.Contains(err.Error(), "TLS") {
			t.Errorf("%s: OpenSession = %v (%v), want a permanent ErrTLS", dsn, err, spi.Classify(err))
		}
		// The bound is generous for a loaded CI machine; the point is that it is far below
		// the 60 s deadline (it takes about 1 s: one probe delay and the pool's dial retries).
		if took > 10*time.Second {
			t.Errorf("%s: OpenSession took %v, want well under the 60 s deadline", dsn, took)
		}
		t.Logf("%s: %v after %v", dsn, err, took)
	}
}

// selfSignedListener is a TLS server on a loopback port whose certificate no client trusts;
// it completes handshakes and then closes the connection.
func selfSignedListener(t *testing.T) net.Listener {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "simba-test"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Serve(t, ln, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.(*tls.Conn).Handshake()
	})
}

// TestRedissUntrustedCertificateIsPermanent: a certificate that does not verify is a permanent
// ErrTLS, found in one handshake (no probe, no wait).
func TestRedissUntrustedCertificateIsPermanent(t *testing.T) {
	ln := selfSignedListener(t)
	b, err := Open("rediss://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = b.OpenSession(ctx, "o", time.Second)
	var unknown x509.UnknownAuthorityError
	if !errors.Is(err, spi.ErrTLS) || spi.Classify(err) != spi.Permanent || !errors.As(err, &unknown) {
		t.Errorf("OpenSession = %v (%v), want a permanent ErrTLS wrapping x509.UnknownAuthorityError", err, spi.Classify(err))
	}
}

// TestRedissSilentServerStaysRetryable: a server that accepts the connection and answers
// nothing at all (neither TLS nor RESP: an overloaded TLS server looks the same) is not
// mistaken for a plain-text one: the dial times out and the error is retryable.
func TestRedissSilentServerStaysRetryable(t *testing.T) {
	ln := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) { io.Copy(io.Discard, c) })
	b, err := Open("rediss://" + ln.Addr().String() + "?dial_timeout=1s&max_retries=0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = b.OpenSession(ctx, "o", time.Second)
	if err == nil || errors.Is(err, spi.ErrTLS) || spi.Classify(err) != spi.Retryable {
		t.Errorf("OpenSession against a silent server = %v (%v), want a retryable error", err, spi.Classify(err))
	}
}

// startPlainRedis starts a private plain-text redis-server on a free port (killed when the test
// ends) and returns its address; it skips (fails under SIMBA_REQUIRE_SERVICES=1) without
// redis-server.
func startPlainRedis(t *testing.T) string {
	t.Helper()
	addr, _ := startPlainRedisProc(t)
	return addr
}

// startPlainRedisProc is startPlainRedis returning the server's process too (to signal it).
func startPlainRedisProc(t *testing.T) (string, *os.Process) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		testenv.Unavailable(t, "redis-server", err.Error())
	}
	ln := testenv.Listen(t)
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	cmd.SysProcAttr = testenv.OwnGroup()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server on %s: %v", port, err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return addr, cmd.Process
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not come up on %s", addr)
		}
	}
}

// TestRedissToPlaintextWithinOneCallTimeout: rediss:// to a plain-text Redis fails with the
// permanent ErrTLS within the timeout a Simba client gives each call (a third of its TTL: 1 s
// for a 3 s TTL, 500 ms for 1.5 s), the first call already. go-redis's pool used to retry the
// TLS failure 5 times 100 ms apart for each of the call's connections (the durability check's,
// the script's), so the call ended on its deadline, as a retryable "context deadline
// exceeded", first. Then, at a 500 ms timeout, the TLS dialer's check for a plain-text server,
// half a second into the handshake, came too late for the call (go-redis dials on a goroutine
// of its own, without the call's deadline): the first call still ended on its deadline.
//
// Both are checked without timing the call, which a loaded machine can stall past any bound
// (a CI run on a 2-CPU machine did, once, at 1 s): the check of a dial for a call with a
// timeout comes at half that timeout at the latest (the dialer's probe delay, which leaves the
// other half for the check's one round trip), the pool does not retry a dial (five attempts
// 100 ms apart by default), and the first call fails with ErrTLS, whatever its deadline.
func TestRedissToPlaintextWithinOneCallTimeout(t *testing.T) {
	addr := startPlainRedis(t)
	for _, timeout := range []time.Duration{time.Second, 500 * time.Millisecond} {
		t.Run(timeout.String(), func(t *testing.T) {
			b, err := Open("rediss://" + addr) // a backend of its own: nothing known of addr yet
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			// The pool dials under its own context (no deadline of the call's): the check
			// comes at half the time of the latest call begun.
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			b.tlsd.called(ctx)
			cancel()
			if got := b.tlsd.probeDelay(context.Background()); got > timeout/2 {
				t.Errorf("a dial for a call with a %v timeout checks for a plain-text server after %v, want at most %v", timeout, got, timeout/2)
			}
			// The dial's retries are the TLS dialer's, which returns a TLS failure at once;
			// the pool's own would retry it, 100 ms apart.
			if o := b.c.(*goredis.Client).Options(); o.DialerRetries != 1 {
				t.Errorf("the pool retries each dial %d times, want 1 (the TLS dialer retries transient failures only)", o.DialerRetries)
			}
			for i := range 2 {
				// A deadline the call never nears: what ends it must be the ErrTLS.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				start := time.Now()
				_, err = b.OpenSession(ctx, "o", 3*timeout)
				took := time.Since(start)
				cancel()
				if !errors.Is(err, spi.ErrTLS) || spi.Classify(err) != spi.Permanent || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("call %d: OpenSession = %v (%v) after %v, want a permanent ErrTLS", i, err, spi.Classify(err), took)
				}
				t.Logf("call %d: %v after %v", i, err, took)
			}
		})
	}
}

// TestRedissToPlaintextLockShortTTL: the outside trial's case through a client: a rediss://
// DSN at a plain-text Redis and a 3 s TTL. Lock returns ErrTLS within seconds (it used to
// wait for an 8 s ctx and return context.DeadlineExceeded, retryable, never naming TLS).
func TestRedissToPlaintextLockShortTTL(t *testing.T) {
	b, err := Open("rediss://" + startPlainRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lockWithShortTTL(t, b)
}

// TestRedissDialRetriesTransientOnly: the TLS dialer retries a transient dial failure as
// go-redis's pool did (5 attempts) and a TLS failure not at all; the pool is left one attempt.
func TestRedissDialRetriesTransientOnly(t *testing.T) {
	var resets, handshakes atomic.Int32
	reset := testenv.Serve(t, testenv.Listen(t), func(net.Conn) { resets.Add(1) }) // closes at once: EOF
	untrusted := selfSignedListener(t)
	counted := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) {
		handshakes.Add(1)
		p, err := net.Dial("tcp", untrusted.Addr().String())
		if err != nil {
			return
		}
		defer p.Close()
		go io.Copy(p, c)
		io.Copy(c, p)
	})
	for _, tc := range []struct {
		addr  string
		count *atomic.Int32
		want  int32
		tls   bool
	}{{reset.Addr().String(), &resets, 5, false}, {counted.Addr().String(), &handshakes, 1, true}} {
		cfg, err := ParseDSN("rediss://" + tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Options.DialerRetries != 1 {
			t.Errorf("DialerRetries = %d, want 1 (the TLS dialer retries)", cfg.Options.DialerRetries)
		}
		if !tc.tls { // UseTLS over the DSN's TLS keeps the DSN's dial retries
			cfg.UseTLS(&tls.Config{RootCAs: x509.NewCertPool()})
			if cfg.Options.DialerRetries != 1 {
				t.Errorf("after UseTLS: DialerRetries = %d, want 1", cfg.Options.DialerRetries)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = cfg.Options.Dialer(ctx, "tcp", tc.addr)
		cancel()
		if got := spi.IsTLSError(err); err == nil || got != tc.tls {
			t.Errorf("%s: dial = %v (TLS %v), want TLS %v", tc.addr, err, got, tc.tls)
		}
		time.Sleep(50 * time.Millisecond) // the server's side of the last attempt
		if n := tc.count.Load(); n != tc.want {
			t.Errorf("%s: %d connections, want %d (%v)", tc.addr, n, tc.want, err)
		}
	}
}

// TestRedissConnectionRefusedStaysRetryable: nothing listening is transient (a server
// restarting), retried and reported as a retryable ErrUnavailable, never as ErrTLS.
func TestRedissConnectionRefusedStaysRetryable(t *testing.T) {
	ln := testenv.Listen(t)
	addr := ln.Addr().String()
	ln.Close()
	cfg, err := ParseDSN("rediss://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	start := time.Now()
	_, err = cfg.Options.Dialer(ctx, "tcp", addr)
	took := time.Since(start)
	cancel()
	if err == nil || spi.IsTLSError(err) || took < 4*defaultDialBackoff-50*time.Millisecond {
		t.Errorf("dial to a closed port = %v after %v, want a non-TLS error after 5 attempts 100 ms apart", err, took)
	}
	b, err := OpenConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = b.OpenSession(ctx, "o", 3*time.Second)
	if !errors.Is(err, spi.ErrUnavailable) || errors.Is(err, spi.ErrTLS) || spi.Classify(err) != spi.Retryable {
		t.Errorf("OpenSession against a closed port = %v (%v), want a retryable ErrUnavailable", err, spi.Classify(err))
	}
}

// lockWithShortTTL locks through a client with a 3 s TTL on b, whose server does not speak
// TLS, and wants ErrTLS long before the 60 s ctx ends.
func lockWithShortTTL(t *testing.T, b *Backend) {
	t.Helper()
	c, err := simba.New(b, simba.WithTTL(3*time.Second), simba.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		if errors.Is(err, simba.ErrTLS) {
			return // the hint subscription at New found it: as good
		}
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Lock(ctx, "tls-short-ttl")
	took := time.Since(start)
	if !errors.Is(err, simba.ErrTLS) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v after %v, want ErrTLS", err, took)
	}
	// Generous for a loaded machine (it takes about 0.6 s: one probe delay); before the TLS
	// dialer did the dial retries it took 8 s to over a minute, or never came.
	if took > 6*time.Second {
		t.Errorf("Lock took %v, want well under the 60 s ctx", took)
	}
	t.Logf("Lock: %v after %v", err, took)
}
