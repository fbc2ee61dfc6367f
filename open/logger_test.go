package open_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/open"
)

// TestWithLoggerReachesEtcd: the etcd backend's warning (a TTL the server raises to its
// minimum lease TTL) goes to the logger given with WithLogger.
func TestWithLoggerReachesEtcd(t *testing.T) {
	var logs testenv.LogBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dsn := "etcd://" + strings.Join(testenv.Etcd(t), ",") + "/simba-open-logger"
	b, err := open.Open(ctx, dsn, open.WithLogger(logs.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := b.OpenSession(ctx, "logger", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.CloseSession(context.Background(), s.ID) //nolint:errcheck
	if !strings.Contains(logs.String(), "longer lease TTL than asked") {
		t.Fatalf("no warning of the raised TTL in the logger given to open.WithLogger:\n%s", logs.String())
	}
}
