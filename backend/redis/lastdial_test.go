package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestRefusedServerSaysSo: a call to a server that refuses connections fails as unavailable
// with the refused dial in its message, not a bare "deadline exceeded" that reads as a slow
// server: the dial's own error once go-redis has made its attempts (one dial each, see
// plainDialOnce), or, if the call's deadline comes first, the deadline's with the last
// connection attempt.
func TestRefusedServerSaysSo(t *testing.T) {
	addr := testenv.RefusedAddr(t)
	b, err := Open("redis://" + addr + "/0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = b.OpenSession(ctx, "refused", time.Minute)
	deadline := errors.Is(err, context.DeadlineExceeded)
	if !errors.Is(err, spi.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") || deadline && !strings.Contains(err.Error(), "last connection attempt") {
		t.Fatalf("OpenSession at a refusing server: %v; want unavailable, naming the refused dial", err)
	}
}
