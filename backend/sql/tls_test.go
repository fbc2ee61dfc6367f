package sql

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// wantTLSFailure checks that the first call of a backend on dsn fails with a permanent ErrTLS.
func wantTLSFailure(t *testing.T, dsn string) {
	t.Helper()
	b := open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := b.OpenSession(ctx, "o", time.Second)
	if !errors.Is(err, spi.ErrTLS) || spi.Classify(err) != spi.Permanent || errors.Is(err, spi.ErrUnavailable) {
		t.Errorf("OpenSession = %v (%v), want a permanent ErrTLS", err, spi.Classify(err))
	}
}

// TestPostgresTLSFailureIsPermanent: sslmode=verify-full against the local PostgreSQL (whose
// certificate is not issued for 127.0.0.1 by a trusted authority, or which has no TLS at all)
// is a permanent TLS failure, not a retry loop.
func TestPostgresTLSFailureIsPermanent(t *testing.T) {
	wantTLSFailure(t, withParam(t, testenv.Postgres(t), "sslmode", "verify-full"))
}

// TestPostgresTLSRefusedIsPermanent: sslmode=require against a server that answers the
// SSLRequest with 'N' (no TLS) is a permanent TLS failure. The server is a fake: the local
// PostgreSQL offers TLS.
func TestPostgresTLSRefusedIsPermanent(t *testing.T) {
	ln := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) {
		var req [8]byte // int32 length 8, int32 code 80877103
		if _, err := io.ReadFull(c, req[:]); err != nil || binary.BigEndian.Uint32(req[4:]) != 80877103 {
			return
		}
		c.Write([]byte{'N'})
		io.Copy(io.Discard, c)
	})
	wantTLSFailure(t, "postgres://u:pw@"+ln.Addr().String()+"/db?sslmode=require&connect_timeout=5")
}

// TestMySQLTLSFailureIsPermanent: tls=true against the local MariaDB/MySQL (without TLS, or
// with a self-signed certificate) is a permanent TLS failure, and so is tls=skip-verify against
// a server without TLS.
func TestMySQLTLSFailureIsPermanent(t *testing.T) {
	dsn := myDSN(t)
	wantTLSFailure(t, withParam(t, dsn, "tls", "true"))
	if tlsOffered(t) {
		return // skip-verify succeeds against a server with TLS: nothing to check
	}
	wantTLSFailure(t, withParam(t, dsn, "tls", "skip-verify"))
}

// tlsOffered reports whether the MySQL/MariaDB test server has TLS enabled.
func tlsOffered(t *testing.T) bool {
	t.Helper()
	db, err := sql.Open("mysql", testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var name, value string
	if err := db.QueryRowContext(testCtx(t), "SHOW VARIABLES LIKE 'have_ssl'").Scan(&name, &value); err != nil {
		t.Fatal(err)
	}
	return value == "YES"
}
