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

// TestRefusedServerSaysSo: a call to a server that refuses connections, which go-redis
// retries until the call's deadline, fails as unavailable with the refused dial in its
// message, not a bare "deadline exceeded" that reads as a slow server.
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
	if !errors.Is(err, spi.ErrUnavailable) || !strings.Contains(err.Error(), "last connection attempt") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("OpenSession at a refusing server: %v; want unavailable, naming the refused dial", err)
	}
}
