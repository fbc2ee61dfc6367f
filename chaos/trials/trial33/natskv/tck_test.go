//go:build trial33

package natskv_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/simba-go/simba/chaos/trials/trial33/natskv"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"
)

// natsURL is the NATS server with JetStream the suites run against (SIMBA_NATS_URL overrides).
func natsURL() string {
	if u := os.Getenv("SIMBA_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// factory opens one fresh bucket per suite, deleted when the suite ends.
func factory(t *testing.T) tck.Factory {
	var raw [4]byte
	_, _ = rand.Read(raw[:])
	bucket := "simba_trial33_" + hex.EncodeToString(raw[:])
	t.Cleanup(func() { _ = natskv.DeleteBucket(context.Background(), natsURL(), bucket) })
	open := func(t testing.TB) *natskv.Backend {
		b, err := natskv.Open(context.Background(), natsURL(), bucket)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	admin := open(t)
	t.Cleanup(func() { _ = admin.Close() })
	return tck.Factory{
		NewBackend: func(t testing.TB, _ tck.BackendConfig) spi.Backend { return open(t) },
		ExpireSession: func(t testing.TB, id spi.SessionID) {
			if err := admin.ExpireSession(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		},
		MinTTL:     300 * time.Millisecond,
		MaxTTL:     spi.MaxSessionTTL,
		Hints:      true,
		GroupHints: true, // Hints watches the groups' keys
	}
}

func TestLeaseBackendSpec(t *testing.T) { tck.LeaseBackendSpec(t, factory(t)) }
func TestFencingSpec(t *testing.T)      { tck.FencingSpec(t, factory(t)) }
func TestClientSpec(t *testing.T)       { tck.ClientSpec(t, factory(t)) }
func TestFairnessSpec(t *testing.T)     { tck.FairnessSpec(t, factory(t)) }
