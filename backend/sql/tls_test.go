package sql

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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

// TestPostgresStartingUpIsRetryable: with sslmode=prefer (the default) against a server without
// TLS that is starting up (a restart after a crash replays its WAL first: "the database system
// is starting up", 57P03), pgconn's error names both attempts, the TLS one the server refused
// and the plain one it answered with 57P03. That is an outage, not a TLS failure: on the old
// code every call during a restarted PostgreSQL's recovery failed with a permanent ErrTLS (an
// ERROR line, and Lock returned it to its callers) — trial 25. The server is a fake that refuses
// TLS and answers every startup with 57P03.
func TestPostgresStartingUpIsRetryable(t *testing.T) {
	addr, startups := fakeStartingUp(t)
	b := open(t, "postgres://u:pw@"+addr+"/db?connect_timeout=5")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := b.OpenSession(ctx, "o", time.Second)
	if startups.Load() == 0 {
		t.Fatalf("OpenSession = %v without a plain startup at the fake: nothing checked", err)
	}
	if errors.Is(err, spi.ErrTLS) || spi.Classify(err) != spi.Retryable || !errors.Is(err, spi.ErrUnavailable) {
		t.Errorf("OpenSession = %v (%v), want a retryable ErrUnavailable, not ErrTLS", err, spi.Classify(err))
	}
}

// TestPostgresOutageLeadsWithCause: the error of a connect that sslmode=prefer (the default)
// tried with TLS first, refused by a server without TLS, then without TLS, failing for the
// real reason (57P03: starting up), leads with that reason, on one line: pgconn's message
// began with "tls error: server refused TLS connection" and gave each attempt a line, so the
// client's outage WARN lines read as a TLS problem (trial 28's PostgreSQL restarts). The
// error still matches what it matched: the ConnectError, the PgError and its code.
func TestPostgresOutageLeadsWithCause(t *testing.T) {
	addr, startups := fakeStartingUp(t)
	b := open(t, "postgres://u:pw@"+addr+"/db?connect_timeout=5")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := b.OpenSession(ctx, "o", time.Second)
	if startups.Load() == 0 || err == nil {
		t.Fatalf("OpenSession = %v with %d plain startups at the fake: nothing checked", err, startups.Load())
	}
	msg := err.Error()
	t.Logf("OpenSession: %s", msg)
	cause, tlsAt := strings.Index(msg, "the database system is starting up"), strings.Index(msg, "server refused TLS connection")
	if cause < 0 || tlsAt >= 0 && tlsAt < cause || strings.Contains(msg, "\n") {
		t.Errorf("OpenSession's error does not lead with the cause on one line (cause at %d, the TLS refusal at %d):\n%s", cause, tlsAt, msg)
	}
	if !strings.Contains(msg, "sslmode=prefer") {
		t.Errorf("OpenSession's error does not say the TLS attempt was sslmode=prefer's: %s", msg)
	}
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	if !errors.As(err, &ce) || !errors.As(err, &pe) || pe.Code != "57P03" || !errors.Is(err, spi.ErrUnavailable) {
		t.Errorf("OpenSession = %v: want a ConnectError, a PgError 57P03 and ErrUnavailable inside", err)
	}
}

// fakeStartingUp serves a fake PostgreSQL that refuses TLS and answers every plain startup
// with 57P03 ("the database system is starting up"); it returns its address and the count of
// the plain startups it answered.
func fakeStartingUp(t *testing.T) (string, *atomic.Int64) {
	startups := new(atomic.Int64)
	ln := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) {
		var req [8]byte // int32 length, int32 code: SSLRequest (80877103) or protocol 3.0
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		if binary.BigEndian.Uint32(req[4:]) == 80877103 {
			c.Write([]byte{'N'}) // no TLS; pgconn tries again without it on a new connection
			io.Copy(io.Discard, c)
			return
		}
		rest := make([]byte, binary.BigEndian.Uint32(req[:4])-8)
		if _, err := io.ReadFull(c, rest); err != nil {
			return
		}
		startups.Add(1)
		var body []byte
		for _, f := range []string{"SFATAL", "VFATAL", "C57P03", "Mthe database system is starting up"} {
			body = append(append(body, f...), 0)
		}
		body = append(body, 0)
		msg := binary.BigEndian.AppendUint32([]byte{'E'}, uint32(4+len(body)))
		c.Write(append(msg, body...))
	})
	return ln.Addr().String(), startups
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
