package open_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/open"
)

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWithLoggerReachesEtcd: the etcd backend's warning (a TTL the server raises to its
// minimum lease TTL) goes to the logger given with WithLogger.
func TestWithLoggerReachesEtcd(t *testing.T) {
	var logs lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dsn := "etcd://" + strings.Join(testenv.Etcd(t), ",") + "/simba-open-logger"
	b, err := open.Open(ctx, dsn, open.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
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
