package sql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestMySQLBadSessionVariableIsPermanent: go-sql-driver/mysql sends a DSN parameter it does not
// know as a session variable (SET foo=bar) on every new connection, so a misspelt or misvalued
// one fails every connection the same way: an unknown variable (1193), a value it refuses
// (1231), a value of the wrong type (1232) or a read-only variable (1238). Such a DSN cannot
// work, as PostgreSQL's unrecognized parameter cannot: the error is permanent, not a retry
// loop (`simba lock` with mysql://…?foo=bar retried forever, logging "retrying"). It matches
// spi.ErrInvalidOption, as every other DSN that cannot work does, and says that the DSN's
// parameter is the cause: it matched no sentinel, so a program that tells its users "fix your
// configuration" on ErrInvalidOption showed the server's "Unknown system variable" as an
// unknown failure (trial 31).
func TestMySQLBadSessionVariableIsPermanent(t *testing.T) {
	dsn := myDSN(t)
	for _, kv := range [][2]string{
		{"simba_no_such_variable", "1"}, // 1193
		{"sql_mode", "simba_bogus"},     // 1231
		{"wait_timeout", "abc"},         // 1232
		{"version", "1"},                // 1238
	} {
		b := open(t, withParam(t, dsn, kv[0], kv[1]))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := b.OpenSession(ctx, "o", time.Second)
		cancel()
		if err == nil || spi.Classify(err) != spi.Permanent || errors.Is(err, spi.ErrUnavailable) {
			t.Errorf("%s=%s: OpenSession = %v (%v), want a permanent error", kv[0], kv[1], err, spi.Classify(err))
			continue
		}
		if !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), "DSN parameter") {
			t.Errorf("%s=%s: OpenSession = %v, want an error matching ErrInvalidOption that names the DSN's parameter as the cause", kv[0], kv[1], err)
		}
	}
}
