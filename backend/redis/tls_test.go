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
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

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
