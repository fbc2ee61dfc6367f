package zookeeper

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate for 127.0.0.1 and localhost (server and client use) as PEM
// blocks: the certificate, and the key as PKCS#8.
func (ca *testCA) issue(t *testing.T, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})
}

func writeFile(t *testing.T, dir, name string, parts ...[]byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	var all []byte
	for _, b := range parts {
		all = append(all, b...)
	}
	if err := os.WriteFile(p, all, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsZK is a private ZooKeeper serving TLS on its secure client port (Netty, PEM key and trust
// stores, client certificates required), with the files a client needs.
type tlsZK struct {
	*privateZK
	secureAddr         string
	ca, cert, key      string // the CA that signed the server's and the client's certificates
	otherCA            string // a CA that signed neither
	otherCert, otherKY string // a client certificate of the other CA
}

// nettyJars are the jars ZooKeeper's Netty server needs beyond what zookeeper.jar's manifest
// lists (Debian's netty-handler.jar does not name its own dependencies), with a logger.
func nettyJars(t *testing.T) []string {
	var out []string
	for _, j := range []string{"netty-codec", "netty-resolver", "netty-transport-native-unix-common", "slf4j-simple"} {
		p := "/usr/share/java/" + j + ".jar"
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func startTLSZK(t *testing.T) *tlsZK {
	t.Helper()
	dir := t.TempDir()
	ca, other := newTestCA(t, "simba test CA"), newTestCA(t, "unrelated CA")
	srvCert, srvKey := ca.issue(t, "zookeeper")
	cliCert, cliKey := ca.issue(t, "simba-client")
	oCert, oKey := other.issue(t, "stranger")
	z := &tlsZK{
		ca:        writeFile(t, dir, "ca.pem", ca.pem),
		cert:      writeFile(t, dir, "client.pem", cliCert),
		key:       writeFile(t, dir, "client-key.pem", cliKey),
		otherCA:   writeFile(t, dir, "other-ca.pem", other.pem),
		otherCert: writeFile(t, dir, "other.pem", oCert),
		otherKY:   writeFile(t, dir, "other-key.pem", oKey),
	}
	keyStore := writeFile(t, dir, "server-keystore.pem", srvKey, srvCert)
	port := freePort(t)
	z.secureAddr = "127.0.0.1:" + strconv.Itoa(port)
	z.privateZK = startPrivateZKWith(t, fmt.Sprintf(`secureClientPort=%d
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=%s
ssl.keyStore.type=PEM
ssl.trustStore.location=%s
ssl.trustStore.type=PEM
ssl.clientAuth=need
`, port, keyStore, z.ca), nettyJars(t)...)
	z.awaitTLS(t, srvCertPool(t, ca.pem), cliCert, cliKey)
	return z
}

// awaitTLS waits until the secure client port completes a TLS handshake with the client
// certificate: a JVM's first handshakes (its TLS stack loading and warming up) can outlast a
// session's first connection attempt (bounded by a sixth of its TTL) on a loaded machine, and
// the backend's open fails fast when every server's dial failed, which the tests below do not
// mean to exercise.
func (z *tlsZK) awaitTLS(t *testing.T, roots *x509.CertPool, certPEM, keyPEM []byte) {
	t.Helper()
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := d.DialContext(ctx, "tcp", z.secureAddr)
		cancel()
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the private ZooKeeper's secure port %s never completed a TLS handshake: %v", z.secureAddr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// srvCertPool is a pool of the CA certificate caPEM.
func srvCertPool(t *testing.T, caPEM []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("the test CA's PEM did not parse")
	}
	return pool
}

func (z *tlsZK) dsn(query url.Values) string {
	return "zk+tls://" + z.secureAddr + fmt.Sprintf("/simba-tls-%d", time.Now().UnixNano()) + "?" + query.Encode()
}

// TestTLSSecureClientPort: a real ZooKeeper serving its secure client port. A zk+tls DSN with
// the right CA and a client certificate runs a lease cycle, a group and a keep-alive over TLS
// (the protocol tap reads the czxid through TLS); a custom dialer is used for every
// connection; and a wrong CA, or no client certificate, fails fast with a permanent error
// rather than retrying until the context ends.
func TestTLSSecureClientPort(t *testing.T) {
	z := startTLSZK(t)
	good := url.Values{"ca": {z.ca}, "cert": {z.cert}, "key": {z.key}}
	var dials atomic.Int32
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		dials.Add(1)
		return net.DialTimeout(network, address, timeout)
	}
	b := openBackend(t, z.dsn(good), WithDialer(dialer))
	if b.tls == nil {
		t.Fatal("a zk+tls DSN gave no TLS configuration")
	}
	ctx := testCtx(t)
	sess, err := b.OpenSession(ctx, "tls-owner", 5*time.Second)
	if err != nil {
		t.Fatalf("OpenSession over TLS: %v", err)
	}
	s, _ := b.lookup(sess.ID)
	if _, ok := s.tap.conn.Conn.(*tls.Conn); !ok {
		t.Fatalf("the session's connection is a %T, not TLS", s.tap.conn.Conn)
	}
	tok := mustGrant(t, b, sess.ID, "secure")
	if st, err := b.Join(ctx, sess.ID, "crew"); err != nil || st != spi.OK {
		t.Fatalf("Join = %s, %v", st, err)
	}
	ka, err := b.KeepAlive(ctx, sess.ID, []string{"secure"}, []string{"crew"})
	if err != nil || ka.Expired || len(ka.Held) != 1 || ka.Held[0].Token != tok || len(ka.Members["crew"]) != 1 {
		t.Fatalf("KeepAlive over TLS = %+v, %v", ka, err)
	}
	if err := b.Release(ctx, sess.ID, "secure", tok); err != nil {
		t.Fatal(err)
	}
	if next := mustGrant(t, b, sess.ID, "secure"); next <= tok {
		t.Fatalf("token after release %d, want > %d", next, tok)
	}
	if dials.Load() == 0 {
		t.Fatal("WithDialer's dialer was never used")
	}
	// The hint connection speaks the protocol itself, over the same TLS transport.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := b.Hints(hctx); err != nil {
		t.Fatal(err)
	}
	b.waitFor(testWaiter, "secure", time.Hour, false) // something to watch
	b.hmu.Lock()
	w := b.watcher
	b.hmu.Unlock()
	for deadline := time.Now().Add(20 * time.Second); !w.covers(spi.Released, "secure"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hint connection never set its watches over TLS")
		}
	}

	for _, c := range []struct {
		name  string
		query url.Values
		opts  []Option
	}{
		{"wrong CA", url.Values{"ca": {z.otherCA}, "cert": {z.cert}, "key": {z.key}}, nil},
		{"system roots", url.Values{"cert": {z.cert}, "key": {z.key}}, nil},
		{"wrong server name", url.Values{"ca": {z.ca}, "cert": {z.cert}, "key": {z.key}, "servername": {"zk.example.org"}}, nil},
		{"no client certificate", url.Values{"ca": {z.ca}}, nil},
		{"client certificate of another CA", url.Values{"ca": {z.ca}, "cert": {z.otherCert}, "key": {z.otherKY}}, nil},
		{"WithTLS overrides the DSN", good, []Option{WithTLS(&tls.Config{MinVersion: tls.VersionTLS12})}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := openBackend(t, z.dsn(c.query), c.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, err := b.OpenSession(ctx, "o", 5*time.Second)
			if err == nil || spi.Classify(err) != spi.Permanent || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("OpenSession = %v (%v); want a permanent TLS error before the context ends", err, spi.Classify(err))
			}
			t.Logf("%v", err)
		})
	}
}

// TestTLSFailureClasses: verification failures, alerts and non-TLS replies are permanent; an
// EOF or a timeout in the handshake is not (a server over its connection limit closes
// connections as a plain client port does on a TLS hello).
func TestTLSFailureClasses(t *testing.T) {
	for _, c := range []struct {
		err  error
		perm bool
	}{
		{x509.UnknownAuthorityError{}, true},
		{x509.HostnameError{Host: "h"}, true},
		{x509.CertificateInvalidError{}, true},
		{&tls.CertificateVerificationError{Err: errors.New("x")}, true},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, true},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, true},
		{fmt.Errorf("dial: %w", x509.UnknownAuthorityError{}), true},
		{io.EOF, false},
		{context.DeadlineExceeded, false},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, false},
	} {
		if got := isTLSFailure(c.err); got != c.perm {
			t.Errorf("isTLSFailure(%v) = %v, want %v", c.err, got, c.perm)
		}
	}
}

// TestTLSToPlainPort: zk+tls to a plain client port fails OpenSession with a permanent TLS
// failure (spi.ErrTLS) that says to use zk://: the server closes the connection on the TLS
// hello (an EOF, which alone may be a server over its connection limit) and answers a
// plain-text ZooKeeper handshake. It used to be retryable, retried for as long as the client
// ran ("could not connect to a server (last connection attempt: EOF)").
func TestTLSToPlainPort(t *testing.T) {
	addrs := testenv.ZooKeeper(t)
	b := openBackend(t, "zk+tls://"+addrs[0]+"/plain?timeout=1s")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := b.OpenSession(ctx, "o", 5*time.Second)
	if err == nil || spi.Classify(err) != spi.Permanent || !errors.Is(err, spi.ErrTLS) || !strings.Contains(err.Error(), "use zk://") {
		t.Fatalf("OpenSession = %v (%v); want a permanent TLS failure saying to use zk://", err, spi.Classify(err))
	}
}

// TestTLSToAServerThatHangsUp: zk+tls to a server that closes every connection at once (as one
// over its connection limit does) stays retryable, and the error names the last connection
// attempt's failure: the plain-text handshake that tells a plain client port apart gets no
// answer either.
func TestTLSToAServerThatHangsUp(t *testing.T) {
	ln := testenv.Serve(t, testenv.Listen(t), func(net.Conn) {})
	b := openBackend(t, "zk+tls://"+ln.Addr().String()+"/hangup?timeout=1s")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := b.OpenSession(ctx, "o", 5*time.Second)
	if err == nil || spi.Classify(err) != spi.Retryable || errors.Is(err, spi.ErrTLS) || !strings.Contains(err.Error(), "last connection attempt") {
		t.Fatalf("OpenSession = %v (%v); want a retryable error naming the last connection attempt", err, spi.Classify(err))
	}
}
